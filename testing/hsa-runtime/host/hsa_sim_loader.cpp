// hsa_sim_loader.cpp: executables and their symbols, standing in for code
// objects loaded by ROCr's loader. A test builds an executable symbol by
// symbol; the runtime then reports it through hsa_executable_* entry points
// and a hsa_ven_amd_loader_iterate_executables-shaped iterator.

#include <algorithm>
#include <cstring>

#include "hsa_sim_internal.h"

namespace hsa_sim {

namespace {

// Symbol handles: tag:8 | epoch:16 | executable id:20 | symbol index:20, as
// HSA-on-CUDA's (hsa_common::symbol_handle).
using hsa_common::kSymbolFieldMask;
using hsa_common::symbol_handle;

bool executable_id_from_handle_locked(const State& s, hsa_executable_t exe, uint32_t* id) {
  return decode_handle(exe.handle, HandleTag::kExecutable, s.epoch, id) &&
         s.executables.count(*id) != 0;
}

Executable* find_executable_locked(State& s, hsa_executable_t exe) {
  uint32_t id = 0;
  if (!executable_id_from_handle_locked(s, exe, &id)) return nullptr;
  return &s.executables.at(id);
}

const Symbol* find_symbol_locked(const State& s, hsa_executable_symbol_t handle) {
  uint32_t id = 0;
  size_t index = 0;
  if (!hsa_common::decode_symbol_handle(handle.handle, s.epoch, &id, &index)) return nullptr;
  auto it = s.executables.find(id);
  if (it == s.executables.end() || index >= it->second.symbols.size()) return nullptr;
  return &it->second.symbols[index];
}

// Adds a symbol to a known executable for a known agent; false otherwise.
bool add_symbol_locked(State& s, hsa_executable_t exe, hsa_agent_t agent, Symbol symbol) {
  Executable* executable = find_executable_locked(s, exe);
  uint32_t agent_index = 0;
  if (executable == nullptr || !agent_index_from_handle_locked(s, agent, &agent_index)) {
    return false;
  }
  if (executable->symbols.size() > kSymbolFieldMask) return false;
  symbol.agent_index = agent_index;
  executable->symbols.push_back(std::move(symbol));
  return true;
}

// Zeroed storage for a variable, registered as a live block so that copies
// and pointer info see it. Code object memory reports coarse-grained.
uint8_t* allocate_variable_storage_locked(State& s, uint32_t agent_index, uint32_t size) {
  // At least one granule, so even a zero-size variable has a distinct address.
  const size_t granules = std::max<size_t>((size_t{size} + kGranule - 1) / kGranule, 1);
  const size_t mapped = granules * kGranule;
  auto* base = static_cast<uint8_t*>(map_block_memory(mapped));
  if (base == nullptr) return nullptr;
  Block block;
  block.base = base;
  block.mapped_bytes = mapped;
  block.extent = size;
  block.origin = BlockOrigin::kVariableStorage;
  block.pool = PoolId{agent_index, is_gpu_index(agent_index) ? HSA_SIM_POOL_DEVICE_COARSE
                                                             : HSA_SIM_POOL_SYSTEM_COARSE};
  block.global_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
  block.accessible = {agent_index};
  s.live[reinterpret_cast<uintptr_t>(base)] = block;
  return base;
}

void release_executable_storage_locked(State& s, const Executable& executable) {
  for (const Symbol& symbol : executable.symbols) {
    if (!symbol.has_storage) continue;
    auto it = s.live.find(static_cast<uintptr_t>(symbol.address));
    if (it == s.live.end()) continue;
    Block block = std::move(it->second);
    s.live.erase(it);
    quarantine_block_locked(s, std::move(block));
  }
}

}  // namespace

}  // namespace hsa_sim

using namespace hsa_sim;

// ---- control interface ------------------------------------------------------

extern "C" hsa_executable_t hsa_sim_executable_create(void) {
  State& s = state();
  std::lock_guard<std::mutex> loader(s.loader_mutex);
  std::lock_guard<std::mutex> lock(s.mutex);
  const uint32_t id = s.next_executable_id++;
  s.executables.emplace(id, Executable{});
  return hsa_executable_t{make_handle(HandleTag::kExecutable, s.epoch, id)};
}

extern "C" void* hsa_sim_executable_add_variable(hsa_executable_t exe, hsa_agent_t agent,
                                                 const char* name, uint32_t size,
                                                 bool is_constant) {
  if (name == nullptr) return nullptr;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t agent_index = 0;
  if (find_executable_locked(s, exe) == nullptr ||
      !agent_index_from_handle_locked(s, agent, &agent_index)) {
    return nullptr;
  }
  uint8_t* storage = allocate_variable_storage_locked(s, agent_index, size);
  if (storage == nullptr) return nullptr;
  Symbol symbol;
  symbol.kind = HSA_SYMBOL_KIND_VARIABLE;
  symbol.name = name;
  symbol.address = reinterpret_cast<uintptr_t>(storage);
  symbol.size = size;
  symbol.is_constant = is_constant;
  symbol.has_storage = true;
  if (!add_symbol_locked(s, exe, agent, std::move(symbol))) {
    Block block = s.live.at(reinterpret_cast<uintptr_t>(storage));
    s.live.erase(reinterpret_cast<uintptr_t>(storage));
    unmap_block_memory(block.base, block.mapped_bytes);
    return nullptr;
  }
  return storage;
}

extern "C" void hsa_sim_executable_add_variable_raw(hsa_executable_t exe, hsa_agent_t agent,
                                                    const char* name, uint64_t address,
                                                    uint32_t size) {
  if (name == nullptr) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Symbol symbol;
  symbol.kind = HSA_SYMBOL_KIND_VARIABLE;
  symbol.name = name;
  symbol.address = address;
  symbol.size = size;
  if (add_symbol_locked(s, exe, agent, std::move(symbol)) && address != 0 && size != 0 &&
      !range_is_live_storage_locked(s, address, size)) {
    // Nothing backs it: remember it, so that a copy there is a violation.
    s.unbacked[static_cast<uintptr_t>(address)] = size;
  }
}

extern "C" void hsa_sim_executable_add_kernel(hsa_executable_t exe, hsa_agent_t agent,
                                              const char* name) {
  if (name == nullptr) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Executable* executable = find_executable_locked(s, exe);
  if (executable == nullptr) return;
  Symbol symbol;
  symbol.kind = HSA_SYMBOL_KIND_KERNEL;
  symbol.name = name;
  // A non-zero kernel object unique to this symbol (never dereferenced).
  symbol.address = symbol_handle(s.epoch, static_cast<uint32_t>(exe.handle),
                                 executable->symbols.size());
  add_symbol_locked(s, exe, agent, std::move(symbol));
}

extern "C" void hsa_sim_executable_destroy(hsa_executable_t exe) {
  hsa_sim::api::executable_destroy(exe);
}

extern "C" void hsa_sim_fail_loader_extension(bool fail) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.fail_loader_extension = fail;
}

extern "C" hsa_status_t hsa_sim_iterate_executables(
    hsa_status_t (*callback)(hsa_executable_t executable, void* data), void* data) {
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  // Held across the callbacks, as ROCr's loader holds its lock: no executable
  // is created or destroyed while the walk runs (a callback must not do so).
  std::lock_guard<std::mutex> loader(s.loader_mutex);
  std::vector<hsa_executable_t> executables;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.faults.fail_executable_iteration) return HSA_STATUS_ERROR;
    for (const auto& entry : s.executables) {
      executables.push_back(
          hsa_executable_t{make_handle(HandleTag::kExecutable, s.epoch, entry.first)});
    }
  }
  // The callbacks run without State::mutex, so they may call back into the
  // runtime (anything but creating or destroying an executable).
  return hsa_common::call_each(
      executables, [&](hsa_executable_t executable) { return callback(executable, data); });
}

// ---- table entry points -----------------------------------------------------

namespace hsa_sim::api {

hsa_status_t executable_destroy(hsa_executable_t executable) {
  State& s = state();
  std::lock_guard<std::mutex> loader(s.loader_mutex);
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t id = 0;
  if (!executable_id_from_handle_locked(s, executable, &id)) {
    return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  }
  // Unloading releases the code object's memory: quarantined like a free.
  release_executable_storage_locked(s, s.executables.at(id));
  s.executables.erase(id);
  return HSA_STATUS_SUCCESS;
}

// The AMD loader extension's table, as ROCr hands it out, with this
// runtime's executable iterator (hsa_common::loader_extension_table).
hsa_status_t system_get_major_extension_table(uint16_t extension, uint16_t version_major,
                                              size_t table_length, void* table) {
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.faults.fail_loader_extension) return HSA_STATUS_ERROR;
  }
  return hsa_common::loader_extension_table(extension, version_major, table_length, table,
                                            hsa_sim_iterate_executables);
}

hsa_status_t executable_iterate_agent_symbols(
    hsa_executable_t executable, hsa_agent_t agent,
    hsa_status_t (*callback)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*),
    void* data) {
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::vector<hsa_executable_symbol_t> symbols;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    uint32_t agent_index = 0;
    if (!agent_index_from_handle_locked(s, agent, &agent_index)) {
      return HSA_STATUS_ERROR_INVALID_AGENT;
    }
    uint32_t id = 0;
    if (!executable_id_from_handle_locked(s, executable, &id)) {
      return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    }
    const Executable& exe = s.executables.at(id);
    if (exe.refuse_symbol_walk) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    for (size_t i = 0; i < exe.symbols.size(); ++i) {
      if (exe.symbols[i].agent_index == agent_index) {
        symbols.push_back(hsa_executable_symbol_t{symbol_handle(s.epoch, id, i)});
      }
    }
  }
  // Without the lock: the callback may call back into the runtime.
  return hsa_common::call_each(symbols, [&](hsa_executable_symbol_t symbol) {
    return callback(executable, agent, symbol, data);
  });
}

hsa_status_t executable_symbol_get_info(hsa_executable_symbol_t symbol,
                                        hsa_executable_symbol_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const Symbol* found = find_symbol_locked(s, symbol);
  if (found == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL;
  if (s.faults.failing_symbol_queries.count(static_cast<uint32_t>(attribute)) != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // Attributes that do not apply to the symbol's kind are INVALID_ARGUMENT,
  // as ROCr's per-kind GetInfo reports them.
  return hsa_common::write_symbol_info(*found, agent_handle_locked(s, found->agent_index),
                                       static_cast<uint32_t>(attribute), value);
}

}  // namespace hsa_sim::api

// ---- code objects: readers, loading, freezing, symbols by name ----------------

namespace hsa_sim {

namespace {

// Kernel descriptor fields (llvm::amdhsa::kernel_descriptor_t): the fixed
// group and private segment sizes and the kernarg size, little endian.
uint32_t descriptor_field(const uint8_t* descriptor, size_t offset) {
  uint32_t value = 0;
  std::memcpy(&value, descriptor + offset, sizeof(value));
  return value;
}

std::unique_ptr<LoadedKernel> load_kernel(const ElfKernel& kernel, uint32_t agent_index) {
  auto loaded = std::make_unique<LoadedKernel>();
  std::memcpy(loaded->descriptor, kernel.descriptor, sizeof(loaded->descriptor));
  loaded->name = kernel.name.substr(0, kernel.name.size() - 3);  // without ".kd"
  loaded->agent_index = agent_index;
  loaded->group_segment_size = descriptor_field(kernel.descriptor, 0);
  loaded->private_segment_size = descriptor_field(kernel.descriptor, 4);
  loaded->kernarg_segment_size = descriptor_field(kernel.descriptor, 8);
  return loaded;
}

// The symbol ROCr's loader reports for a loaded kernel: an agent symbol named
// as in the ELF ("name.kd"), its kernel object the descriptor's address.
Symbol kernel_symbol(const ElfKernel& elf, const LoadedKernel& loaded) {
  Symbol symbol;
  symbol.kind = HSA_SYMBOL_KIND_KERNEL;
  symbol.name = elf.name;
  symbol.address = loaded.kernel_object();
  symbol.kernarg_segment_size = loaded.kernarg_segment_size;
  symbol.group_segment_size = loaded.group_segment_size;
  symbol.private_segment_size = loaded.private_segment_size;
  symbol.agent_index = loaded.agent_index;
  return symbol;
}

bool reader_from_handle_locked(const State& s, hsa_code_object_reader_t handle,
                               CodeObjectReader* out) {
  uint32_t id = 0;
  if (!decode_handle(handle.handle, HandleTag::kCodeObjectReader, s.epoch, &id)) return false;
  auto it = s.readers.find(id);
  if (it == s.readers.end()) return false;
  *out = it->second;
  return true;
}

// ROCr's LoadCodeObject checks, with the loader lock and State::mutex held:
// the executable, the reader, not frozen. The reader's bytes are then read
// by the caller (without State::mutex: they are the caller's memory).
hsa_status_t check_load_locked(State& s, hsa_executable_t executable,
                               hsa_code_object_reader_t reader, CodeObjectReader* bytes) {
  Executable* exe = find_executable_locked(s, executable);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (!reader_from_handle_locked(s, reader, bytes)) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  }
  if (exe->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  return HSA_STATUS_SUCCESS;
}

// After the object was read: the ISA against the agent's (an unknown agent,
// or one without an ISA such as the CPU, supports none: ROCr's
// IsaSupportedByAgent iterates the agent's ISAs), then fault injection,
// then the kernels become symbols of the executable.
hsa_status_t finish_load_locked(State& s, hsa_executable_t executable, hsa_agent_t agent,
                                const CodeObject& object, hsa_loaded_code_object_t* loaded) {
  uint32_t agent_index = 0;
  if (!agent_index_from_handle_locked(s, agent, &agent_index) ||
      !isa_compatible(object.isa, s.agent_isas[agent_index])) {
    return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
  }
  if (s.faults.failing_code_object_loads > 0) {
    --s.faults.failing_code_object_loads;
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;  // as a segment allocation failing
  }
  Executable* exe = find_executable_locked(s, executable);
  if (exe->symbols.size() + object.kernels.size() > kSymbolFieldMask) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  for (const ElfKernel& kernel : object.kernels) {
    exe->kernels.push_back(load_kernel(kernel, agent_index));
    exe->symbols.push_back(kernel_symbol(kernel, *exe->kernels.back()));
  }
  if (loaded != nullptr) {
    loaded->handle =
        make_handle(HandleTag::kLoadedCodeObject, s.epoch, s.next_loaded_code_object_id++);
  }
  return HSA_STATUS_SUCCESS;
}

}  // namespace

const LoadedKernel* find_loaded_kernel_locked(const State& s, uint64_t kernel_object) {
  for (const auto& entry : s.executables) {
    for (const auto& kernel : entry.second.kernels) {
      if (kernel->kernel_object() == kernel_object) return kernel.get();
    }
  }
  return nullptr;
}

}  // namespace hsa_sim

namespace hsa_sim::api {

hsa_status_t code_object_reader_create_from_memory(const void* code_object, size_t size,
                                                   hsa_code_object_reader_t* code_object_reader) {
  // ROCr only remembers the memory here; it is read when loaded.
  if (code_object == nullptr || code_object_reader == nullptr || size == 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const uint32_t id = s.next_reader_id++;
  s.readers[id] = CodeObjectReader{static_cast<const uint8_t*>(code_object), size};
  code_object_reader->handle = make_handle(HandleTag::kCodeObjectReader, s.epoch, id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t code_object_reader_destroy(hsa_code_object_reader_t code_object_reader) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t id = 0;
  if (!decode_handle(code_object_reader.handle, HandleTag::kCodeObjectReader, s.epoch, &id) ||
      s.readers.erase(id) == 0) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_create_alt(hsa_profile_t profile,
                                   hsa_default_float_rounding_mode_t default_float_rounding_mode,
                                   const char* options, hsa_executable_t* executable) {
  (void)options;  // ROCr's loader options change nothing here
  // ROCr's IS_BAD_PROFILE, IS_BAD_ROUNDING_MODE and IS_BAD_PTR, in order.
  if ((profile != HSA_PROFILE_BASE && profile != HSA_PROFILE_FULL) ||
      static_cast<uint32_t>(default_float_rounding_mode) >
          static_cast<uint32_t>(HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR) ||
      executable == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // Listed by the loader's iterator like any other, as ROCr lists every
  // executable (a tool's own included).
  *executable = hsa_sim_executable_create();
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_load_agent_code_object(hsa_executable_t executable, hsa_agent_t agent,
                                               hsa_code_object_reader_t code_object_reader,
                                               const char* options,
                                               hsa_loaded_code_object_t* loaded_code_object) {
  (void)options;
  State& s = state();
  // The loader's lock across the load, as ROCr's loader holds its own: the
  // executable iterator never sees half a load.
  std::lock_guard<std::mutex> loader(s.loader_mutex);
  CodeObjectReader bytes;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const hsa_status_t checked = check_load_locked(s, executable, code_object_reader, &bytes);
    if (checked != HSA_STATUS_SUCCESS) return checked;
  }
  CodeObject object;
  if (!read_code_object(bytes.data, bytes.size, &object)) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  return finish_load_locked(s, executable, agent, object, loaded_code_object);
}

hsa_status_t executable_freeze(hsa_executable_t executable, const char* options) {
  (void)options;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Executable* exe = find_executable_locked(s, executable);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (exe->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  exe->frozen = true;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_get_symbol_by_name(hsa_executable_t executable, const char* symbol_name,
                                           const hsa_agent_t* agent,
                                           hsa_executable_symbol_t* symbol) {
  if (symbol_name == nullptr || symbol == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t id = 0;
  if (!executable_id_from_handle_locked(s, executable, &id)) {
    return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  }
  // Without an agent ROCr looks among program symbols, which this runtime
  // never has; with one, among that agent's symbols.
  uint32_t agent_index = 0;
  if (agent == nullptr || !agent_index_from_handle_locked(s, *agent, &agent_index)) {
    return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  }
  const std::vector<Symbol>& symbols = s.executables.at(id).symbols;
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i].agent_index == agent_index && symbols[i].name == symbol_name) {
      symbol->handle = symbol_handle(s.epoch, id, i);
      return HSA_STATUS_SUCCESS;
    }
  }
  return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
}

}  // namespace hsa_sim::api
