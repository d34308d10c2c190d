// loader.cpp: executables and their symbols, code object readers, AMDGPU
// code objects (the host backend's loader) and the ELF they are made of.


#include "conformance.h"

using namespace conformance;

namespace {

struct SymbolList {
  std::vector<hsa_executable_symbol_t> symbols;
  size_t stop_after = SIZE_MAX;
};

hsa_status_t collect_symbol(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t symbol,
                            void* data) {
  auto* list = static_cast<SymbolList*>(data);
  list->symbols.push_back(symbol);
  // Calling back into the runtime from the callback must not deadlock.
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  return list->symbols.size() >= list->stop_after ? HSA_STATUS_INFO_BREAK : HSA_STATUS_SUCCESS;
}

std::string symbol_name(hsa_executable_symbol_t symbol) {
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  std::vector<char> buffer(length + 1, '#');
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME,
                                                        buffer.data()),
               HSA_STATUS_SUCCESS);
  CHECK(buffer[length] == '#');  // not NUL-terminated
  return std::string(buffer.data(), length);
}

// Bytes an attribute writes, measured against a 0xAB-filled buffer.
size_t written_width(hsa_executable_symbol_t symbol, hsa_executable_symbol_info_t attribute) {
  unsigned char buffer[32];
  std::memset(buffer, 0xAB, sizeof(buffer));
  if (core().hsa_executable_symbol_get_info_fn(symbol, attribute, buffer) != HSA_STATUS_SUCCESS) {
    return 0;
  }
  size_t width = sizeof(buffer);
  while (width > 0 && buffer[width - 1] == 0xAB) --width;
  return width;
}

hsa_status_t record_executable(hsa_executable_t exe, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(exe.handle);
  // The loader iterator's callback may use the runtime too.
  SymbolList list;
  core().hsa_executable_iterate_agent_symbols_fn(exe, hsa_rt_gpu_agent(0), collect_symbol, &list);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

CASE("loader: executables, variables, kernels, symbols, the iterator, destroy, reset", kBoth) {
  if (!reset(2)) return;
  hsa_executable_t first = hsa_rt_executable_create();
  hsa_executable_t second = hsa_rt_executable_create();
  CHECK(first.handle != 0 && first.handle != second.handle);
  auto* var = static_cast<unsigned char*>(
      hsa_rt_executable_add_variable(first, gpu(0), "counter", 24, false));
  auto* constant = static_cast<unsigned char*>(
      hsa_rt_executable_add_variable(first, gpu(0), "table", 8, true));
  hsa_rt_executable_add_kernel(first, gpu(0), "kern.kd");
  hsa_rt_executable_add_variable_raw(first, gpu(0), "raw", 0, 0);
  void* other_gpu = hsa_rt_executable_add_variable(first, gpu(1), "elsewhere", 4, false);
  hsa_rt_executable_add_variable(second, gpu(0), "second", 4, false);
  CHECK(var != nullptr && constant != nullptr && other_gpu != nullptr);
  CHECK(dev_byte(var) == 0 && dev_byte(var, 23) == 0);  // zeroed storage
  CHECK(hsa_rt_executable_add_variable(hsa_executable_t{1}, gpu(0), "x", 4, false) == nullptr);
  CHECK(count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);  // storage is not an allocation

  // Symbol walk: only the agent's symbols, in order; a break status stops it.
  SymbolList list;
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, gpu(0), collect_symbol, &list),
               HSA_STATUS_SUCCESS);
  CHECK(list.symbols.size() == 4);
  if (list.symbols.size() != 4) return;
  CHECK(symbol_name(list.symbols[0]) == "counter");
  CHECK(symbol_name(list.symbols[2]) == "kern.kd");
  SymbolList stopped;
  stopped.stop_after = 2;
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, gpu(0), collect_symbol,
                                                              &stopped),
               HSA_STATUS_INFO_BREAK);
  CHECK(stopped.symbols.size() == 2);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, gpu(0), nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, hsa_agent_t{5},
                                                              collect_symbol, &list),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(hsa_executable_t{5}, gpu(0),
                                                              collect_symbol, &list),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);

  // get_info widths and values.
  const hsa_executable_symbol_t counter = list.symbols[0];
  const hsa_executable_symbol_t table = list.symbols[1];
  const hsa_executable_symbol_t kernel = list.symbols[2];
  const hsa_executable_symbol_t raw = list.symbols[3];
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE) <= 4);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH) <= 4);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE) <= 4);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST) <= 1);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS) <= 8);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_AGENT) <= 8);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_NAME) == 7);
  hsa_symbol_kind_t kind{};
  uint64_t address = 0;
  uint32_t size = 0;
  bool is_const = true;
  hsa_agent_t agent{};
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_SUCCESS);
  CHECK(kind == HSA_SYMBOL_KIND_VARIABLE);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address),
               HSA_STATUS_SUCCESS);
  CHECK(address == reinterpret_cast<uintptr_t>(var));
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 24);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST, &is_const),
               HSA_STATUS_SUCCESS);
  CHECK(!is_const);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   table, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST, &is_const),
               HSA_STATUS_SUCCESS);
  CHECK(is_const);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_AGENT,
                                                        &agent),
               HSA_STATUS_SUCCESS);
  CHECK(agent.handle == gpu(0).handle);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(kernel, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_SUCCESS);
  CHECK(kind == HSA_SYMBOL_KIND_KERNEL);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   kernel, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  uint64_t kernel_object = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   kernel, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &kernel_object),
               HSA_STATUS_SUCCESS);
  CHECK(kernel_object != 0);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   raw, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address),
               HSA_STATUS_SUCCESS);
  CHECK(address == 0);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(hsa_executable_symbol_t{counter.handle + 9},
                                                        HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL);

  // Variable storage: exact bounds for copies, reported by pointer info.
  hsa_amd_pointer_info_t info = pointer_info(var + 10);
  CHECK(info.type == HSA_EXT_POINTER_TYPE_HSA && info.agentBaseAddress == var);
  CHECK(info.sizeInBytes == 24 && info.agentOwner.handle == gpu(0).handle);
  CHECK(info.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
  CHECK(pointer_info(var + 24).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  unsigned char host[32] = {1};
  CHECK_STATUS(core().hsa_memory_copy_fn(var, host, 24), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);
  CHECK_STATUS(core().hsa_memory_copy_fn(var, host, 25), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 1);
  CHECK_STATUS(core().hsa_memory_free_fn(var), HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // Executables in creation order; the callback may re-enter the runtime.
  std::vector<uint64_t> order;
  CHECK_STATUS(hsa_rt_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.size() == 2 && order[0] == first.handle && order[1] == second.handle);
  CHECK_STATUS(hsa_rt_iterate_executables(nullptr, nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Destroy: storage quarantined, handles unknown.
  CHECK_STATUS(core().hsa_executable_destroy_fn(first), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(first), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  CHECK(!on_host() || var[0] == HSA_RT_POISON_BYTE);  // quarantined
  CHECK(pointer_info(var).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_STATUS(core().hsa_memory_copy_fn(host, var, 4), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL);
  order.clear();
  CHECK_STATUS(hsa_rt_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.size() == 1 && order[0] == second.handle);
  hsa_rt_executable_destroy(second);
  CHECK(hsa_rt_quarantine_intact());

  // Reset forgets executables and symbol handles.
  hsa_executable_t third = hsa_rt_executable_create();
  hsa_rt_executable_add_kernel(third, gpu(0), "k");
  hsa_rt_reset(2);
  CHECK_STATUS(core().hsa_executable_destroy_fn(third), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  order.clear();
  CHECK_STATUS(hsa_rt_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.empty());
}

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, T value) {
  if (out.size() < at + sizeof(T)) out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

}  // namespace

std::vector<uint8_t> conformance::build_code_object(const std::vector<ElfKernelSpec>& kernels,
                                                    uint32_t e_flags, uint8_t abi_version) {
  std::vector<uint8_t> elf(64, 0);
  const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 64, abi_version};
  std::memcpy(elf.data(), ident, sizeof(ident));
  put<uint16_t>(elf, 16, 3);    // ET_DYN
  put<uint16_t>(elf, 18, 224);  // EM_AMDGPU
  put<uint32_t>(elf, 20, 1);
  put<uint32_t>(elf, 48, e_flags);
  put<uint16_t>(elf, 52, 64);
  // Descriptors.
  const size_t text = 64;
  for (size_t i = 0; i < kernels.size(); ++i) {
    put<uint32_t>(elf, text + i * 64 + 0, kernels[i].group);
    put<uint32_t>(elf, text + i * 64 + 4, kernels[i].private_size);
    put<uint32_t>(elf, text + i * 64 + 8, kernels[i].kernarg);
    put<uint64_t>(elf, text + i * 64 + 56, 0);
  }
  // String table and symbols.
  std::string strtab(1, '\0');
  std::vector<uint32_t> names;
  for (const ElfKernelSpec& k : kernels) {
    names.push_back(static_cast<uint32_t>(strtab.size()));
    strtab += k.name + ".kd";
    strtab += '\0';
  }
  const size_t symtab = text + kernels.size() * 64;
  put<uint64_t>(elf, symtab + 16, 0);  // the null symbol
  for (size_t i = 0; i < kernels.size(); ++i) {
    const size_t at = symtab + (i + 1) * 24;
    put<uint32_t>(elf, at, names[i]);
    put<uint8_t>(elf, at + 4, 0x11);  // STB_GLOBAL, STT_OBJECT
    put<uint16_t>(elf, at + 6, 1);    // the descriptors' section
    put<uint64_t>(elf, at + 8, 0x1000 + i * 64);
    put<uint64_t>(elf, at + 16, 64);
  }
  const size_t strings = symtab + (kernels.size() + 1) * 24;
  elf.resize(strings + strtab.size());
  std::memcpy(elf.data() + strings, strtab.data(), strtab.size());
  // Section headers: null, descriptors, .symtab, .strtab.
  const size_t shoff = (elf.size() + 7) / 8 * 8;
  const auto section = [&](size_t index, uint32_t type, uint64_t addr, uint64_t offset,
                           uint64_t size, uint32_t link, uint64_t entsize) {
    const size_t at = shoff + index * 64;
    put<uint32_t>(elf, at + 4, type);
    put<uint64_t>(elf, at + 16, addr);
    put<uint64_t>(elf, at + 24, offset);
    put<uint64_t>(elf, at + 32, size);
    put<uint32_t>(elf, at + 40, link);
    put<uint64_t>(elf, at + 56, entsize);
  };
  section(0, 0, 0, 0, 0, 0, 0);
  section(1, 1, 0x1000, text, kernels.size() * 64, 0, 0);
  section(2, 2, 0, symtab, (kernels.size() + 1) * 24, 3, 24);
  section(3, 3, 0, strings, strtab.size(), 0, 0);
  put<uint64_t>(elf, 40, shoff);
  put<uint16_t>(elf, 58, 64);
  put<uint16_t>(elf, 60, 4);
  return elf;
}

// The library's three kernels, as its code objects describe them.
std::vector<ElfKernelSpec> conformance::library_kernels() {
  return {{"kr_scatter_copy", 0, 0, sizeof(kr_scatter_copy_args)},
          {"kr_hash_blocks", 0, 0, sizeof(kr_hash_blocks_args)},
          {"kr_compare_copy", 0, 16, sizeof(kr_compare_copy_args)}};
}

// Reader, executable, load, freeze: what the library does. SUCCESS or the
// first failing status.
hsa_status_t conformance::load_executable(const std::vector<uint8_t>& object, hsa_agent_t agent,
                                          hsa_executable_t* exe) {
  hsa_code_object_reader_t reader{0};
  hsa_status_t status = core().hsa_code_object_reader_create_from_memory_fn(
      object.data(), object.size(), &reader);
  if (status != HSA_STATUS_SUCCESS) return status;
  status = core().hsa_executable_create_alt_fn(HSA_PROFILE_FULL,
                                               HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, nullptr,
                                               exe);
  if (status == HSA_STATUS_SUCCESS) {
    status = core().hsa_executable_load_agent_code_object_fn(*exe, agent, reader, nullptr,
                                                             nullptr);
    if (status == HSA_STATUS_SUCCESS) status = core().hsa_executable_freeze_fn(*exe, nullptr);
    if (status != HSA_STATUS_SUCCESS) core().hsa_executable_destroy_fn(*exe);
  }
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader), HSA_STATUS_SUCCESS);
  return status;
}

namespace {

uint64_t kernel_object(hsa_executable_t exe, hsa_agent_t agent, const char* name) {
  hsa_executable_symbol_t symbol{0};
  if (core().hsa_executable_get_symbol_by_name_fn(exe, name, &agent, &symbol) !=
      HSA_STATUS_SUCCESS) {
    return 0;
  }
  uint64_t object = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &object),
               HSA_STATUS_SUCCESS);
  return object;
}

}  // namespace

CASE("loader: AMDGPU code objects: load, kernel symbols, ISA compatibility, faults", kHost) {
  hsa_rt_reset(2);
  const std::vector<uint8_t> object = build_code_object(library_kernels());
  hsa_executable_t exe{0};
  CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_SUCCESS);
  // Listed by the loader's iterator, as ROCr lists a tool's own executables.
  int executables = 0;
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &executables), HSA_STATUS_SUCCESS);
  CHECK(executables == 1);

  // Kernel symbols by their ".kd" names, for that agent only.
  hsa_agent_t agent = gpu(0);
  hsa_executable_symbol_t symbol{0};
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, "kr_compare_copy.kd", &agent,
                                                           &symbol),
               HSA_STATUS_SUCCESS);
  hsa_symbol_kind_t kind = HSA_SYMBOL_KIND_VARIABLE;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(symbol, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_SUCCESS);
  CHECK(kind == HSA_SYMBOL_KIND_KERNEL);
  uint32_t size = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == sizeof(kr_compare_copy_args));
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 16);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 0);
  const uint64_t scatter = kernel_object(exe, gpu(0), "kr_scatter_copy.kd");
  const uint64_t hash = kernel_object(exe, gpu(0), "kr_hash_blocks.kd");
  CHECK(scatter != 0 && hash != 0 && scatter != hash && scatter % 64 == 0);
  CHECK(kernel_object(exe, gpu(0), "kr_scatter_copy") == 0);  // v3+: the name has ".kd"
  CHECK(kernel_object(exe, gpu(1), "kr_scatter_copy.kd") == 0);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, "kr_scatter_copy.kd", nullptr,
                                                           &symbol),
               HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, nullptr, &agent, &symbol),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(hsa_executable_t{9}, "x", &agent,
                                                           &symbol),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  // A frozen executable takes no more code and freezes once.
  hsa_code_object_reader_t reader{0};
  CHECK_STATUS(core().hsa_code_object_reader_create_from_memory_fn(object.data(), object.size(),
                                                                   &reader),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_load_agent_code_object_fn(exe, gpu(0), reader, nullptr,
                                                               nullptr),
               HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_STATUS(core().hsa_executable_freeze_fn(exe, nullptr), HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_STATUS(core().hsa_executable_load_agent_code_object_fn(exe, gpu(0),
                                                               hsa_code_object_reader_t{3},
                                                               nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader),
               HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
  CHECK_STATUS(core().hsa_code_object_reader_create_from_memory_fn(object.data(), 0, &reader),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_create_alt_fn(static_cast<hsa_profile_t>(7),
                                                   HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                                   nullptr, &exe),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_destroy_fn(exe), HSA_STATUS_SUCCESS);

  // ISA: the processor must match; a feature the object fixes must be the
  // agent's; the CPU supports no code object.
  hsa_executable_t other{0};
  CHECK_STATUS(load_executable(object, cpu(), &other), HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  hsa_rt_set_agent_isa(gpu(1), "amdgcn-amd-amdhsa--gfx1100");
  CHECK_STATUS(load_executable(object, gpu(1), &other), HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  const uint32_t xnack_on = 0x04c | 0x300 | 0x400;
  const uint32_t sramecc_on = 0x04c | 0x100 | 0xc00;
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), xnack_on), gpu(0), &other),
               HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), sramecc_on), gpu(0), &other),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(other), HSA_STATUS_SUCCESS);
  // Code object v3 names both features a gfx942 supports: sramecc-, xnack-.
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), 0x04c, 1), gpu(0), &other),
               HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), 0x04c | 0x200, 1), gpu(0),
                               &other),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(other), HSA_STATUS_SUCCESS);

  // Fault injection: the load fails and loads nothing.
  hsa_rt_inject(HSA_RT_FAULT_NEXT_CODE_OBJECT_LOADS, 0, 1);
  CHECK_STATUS(load_executable(object, gpu(0), &other), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(load_executable(object, gpu(0), &other), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(other), HSA_STATUS_SUCCESS);
}

CASE("loader: malformed code objects are refused, never read past", kHost) {
  hsa_rt_reset(1);
  const std::vector<uint8_t> object = build_code_object(library_kernels());
  hsa_executable_t exe{0};
  // Wrong machine, class, OS ABI, code object version, processor.
  const auto refused = [&](std::vector<uint8_t> bytes) {
    return load_executable(bytes, gpu(0), &exe) == HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  };
  std::vector<uint8_t> bad = object;
  bad[18] = 62;  // EM_X86_64
  CHECK(refused(bad));
  bad = object;
  bad[4] = 1;  // ELFCLASS32
  CHECK(refused(bad));
  bad = object;
  bad[7] = 0;  // OS ABI none
  CHECK(refused(bad));
  bad = object;
  bad[8] = 0;  // code object v2
  CHECK(refused(bad));
  CHECK(refused(build_code_object(library_kernels(), 0x0ee)));  // unknown processor
  bad = object;
  bad[0] = 0;
  CHECK(refused(bad));
  // Every truncation is refused, never read past (ASan and valgrind watch
  // these runs); the buffer is exactly as long as the truncation.
  for (size_t length = 1; length < object.size(); ++length) {
    std::vector<uint8_t> prefix(object.begin(), object.begin() + static_cast<long>(length));
    CHECK(refused(prefix));
  }
  // Random corruption: accepted or refused, never a crash or an overread.
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> mangled = object;
    const int flips = 1 + static_cast<int>(next_random(&seed) % 4);
    for (int i = 0; i < flips; ++i) {
      mangled[next_random(&seed) % mangled.size()] = static_cast<uint8_t>(next_random(&seed));
    }
    const hsa_status_t status = load_executable(mangled, gpu(0), &exe);
    if (status == HSA_STATUS_SUCCESS) core().hsa_executable_destroy_fn(exe);
    CHECK(status == HSA_STATUS_SUCCESS || status == HSA_STATUS_ERROR_INVALID_CODE_OBJECT ||
          status == HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  }
  int executables = 0;
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &executables), HSA_STATUS_SUCCESS);
  CHECK(executables == 0);
}

