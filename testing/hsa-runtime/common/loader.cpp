// loader.cpp: executables, their symbols and code object readers, as ROCr's
// loader reports them, and the loader extension's executable iterator (see
// hsa_rt.h, "Code objects"). The backend loads code objects (host: AMDGPU
// ELF, whose kernels it lists; CUDA: modules, whose symbols it finds by name).

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>

#include <hsa/hsa_ven_amd_loader.h>

#include "runtime.h"

namespace hsa_rt {

namespace {

struct Executable {
  std::vector<Symbol> symbols;
  bool frozen = false;
  std::vector<std::pair<uint32_t, void*>> modules;  // agent, the backend's module
};

struct Loader {
  std::mutex mutex;
  // ROCr's loader lock: the executable iterator holds it across its
  // callbacks, and creating, loading or destroying an executable takes it,
  // so an executable the iterator reports stays loaded until its callback
  // returns. Taken before `mutex`.
  std::mutex iteration;
  std::map<uint32_t, Executable> executables;  // by id = creation order
  uint32_t next_id = 1;
  std::map<uint32_t, std::pair<const void*, size_t>> readers;  // the caller's memory
  uint32_t next_reader = 1;
  uint64_t next_loaded = 1;
};

Loader& loader() {
  static Loader* const instance = new Loader;  // never destroyed
  return *instance;
}

hsa_executable_t executable_handle(uint32_t id) {
  return hsa_executable_t{make_handle(Tag::kExecutable, id)};
}

uint64_t symbol_handle(uint32_t id, size_t index) {
  return make_handle(Tag::kSymbol, (uint64_t{id} & kSymbolFieldMask) << 20 |
                                       (uint64_t{index} & kSymbolFieldMask));
}

Executable* find_locked(hsa_executable_t executable, uint32_t* id = nullptr) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(executable.handle, Tag::kExecutable, &payload)) return nullptr;
  auto it = loader().executables.find(static_cast<uint32_t>(payload));
  if (it == loader().executables.end()) return nullptr;
  if (id != nullptr) *id = it->first;
  return &it->second;
}

const Symbol* find_symbol_locked(hsa_executable_symbol_t symbol) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(symbol.handle, Tag::kSymbol, &payload)) return nullptr;
  auto it = loader().executables.find(static_cast<uint32_t>(payload >> 20));
  const size_t index = payload & kSymbolFieldMask;
  if (it == loader().executables.end() || index >= it->second.symbols.size()) return nullptr;
  return &it->second.symbols[index];
}

uint32_t create_locked(bool frozen) {
  Loader& l = loader();
  const uint32_t id = l.next_id++;
  l.executables[id].frozen = frozen;
  return id;
}

// Unloads an executable: its variables' storage is quarantined like a free
// (a module's stays loaded until reset, its addresses never handed out
// again), its modules go back to the backend.
void destroy_locked(Executable& exe) {
  Released released;
  {
    ExclusiveLock lock(memory_mutex());
    for (const Symbol& symbol : exe.symbols) {
      if (symbol.kind != HSA_SYMBOL_KIND_VARIABLE) continue;
      auto it = memory().live.find(uintptr_t(symbol.address));
      if (it == memory().live.end() || it->second.origin != Origin::kVariable) continue;
      Block block = std::move(it->second);
      memory().live.erase(it);
      quarantine_locked(std::move(block), &released);
    }
  }
  release_blocks(released);
  for (const auto& [agent, module] : exe.modules) backend::unload(agent, module);
}

// A symbol of one of the executable's modules found by name (CUDA): added
// (a variable's storage becomes device memory of its agent) and returned.
hsa_status_t look_up_locked(Executable& exe, uint32_t agent, const std::string& name, bool kernel,
                            bool is_constant, size_t* index) {
  if (exe.symbols.size() >= kSymbolFieldMask) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  for (const auto& [module_agent, module] : exe.modules) {
    if (module_agent != agent) continue;
    Symbol symbol;
    status = backend::find_symbol(agent, module, kernel ? name.substr(0, name.size() - 3) : name,
                                  kernel, &symbol);
    if (status == HSA_STATUS_ERROR_INVALID_SYMBOL_NAME) continue;
    if (status != HSA_STATUS_SUCCESS) return status;
    symbol.name = name;
    symbol.agent = agent;
    symbol.is_constant = is_constant;
    if (!kernel) {
      ExclusiveLock lock(memory_mutex());
      register_variable_locked(uintptr_t(symbol.address), symbol.size, agent);
    }
    exe.symbols.push_back(symbol);
    *index = exe.symbols.size() - 1;
    return HSA_STATUS_SUCCESS;
  }
  return status;
}

bool is_kernel_name(const std::string& name) {
  return name.size() > 3 && name.compare(name.size() - 3, 3, ".kd") == 0;
}

// Loads a code object into an executable for an agent (kNoAgent: unknown,
// which supports none): the backend reads it and checks its ISA, the
// injected fault comes last, the kernels it lists become symbols.
hsa_status_t load_locked(Executable& exe, uint32_t agent, const void* image, size_t size) {
  std::string isa;
  if (agent != kNoAgent) {
    SharedLock lock(memory_mutex());
    isa = agent_isa_locked(agent);
  }
  backend::Loaded loaded;
  const hsa_status_t status = backend::load(agent, isa, image, size, &loaded);
  if (status != HSA_STATUS_SUCCESS) return status;
  if (take_fault(&Faults::code_object_loads) ||
      exe.symbols.size() + loaded.kernels.size() > kSymbolFieldMask) {
    backend::unload(agent, loaded.module);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;  // as a segment allocation failing
  }
  for (Symbol& kernel : loaded.kernels) {
    kernel.agent = agent;
    exe.symbols.push_back(std::move(kernel));
  }
  exe.modules.emplace_back(agent, loaded.module);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

bool find_kernel(uint64_t object, uint32_t agent, KernelInfo* out) {
  std::lock_guard<std::mutex> lock(loader().mutex);
  for (const auto& entry : loader().executables) {
    for (const Symbol& s : entry.second.symbols) {
      if (s.kind != HSA_SYMBOL_KIND_KERNEL || !s.dispatchable || s.address != object ||
          s.agent != agent) {
        continue;
      }
      *out = KernelInfo{is_kernel_name(s.name) ? s.name.substr(0, s.name.size() - 3) : s.name,
                        s.address, s.kernarg_size, s.group_size, s.private_size, s.param_count};
      return true;
    }
  }
  return false;
}

void unload_all_executables() {
  Loader& l = loader();
  std::lock_guard<std::mutex> iteration(l.iteration);
  std::lock_guard<std::mutex> lock(l.mutex);
  for (auto& entry : l.executables) destroy_locked(entry.second);
  l.executables.clear();
  l.readers.clear();
  l.next_id = 1;
  l.next_reader = 1;
}

}  // namespace hsa_rt

using namespace hsa_rt;

// ---- entry points ----------------------------------------------------------------------

namespace hsa_rt::api {

hsa_status_t executable_destroy(hsa_executable_t executable) {
  HSA_RT_REQUIRE_READY();
  Loader& l = loader();
  std::lock_guard<std::mutex> iteration(l.iteration);
  std::lock_guard<std::mutex> lock(l.mutex);
  uint32_t id = 0;
  Executable* exe = find_locked(executable, &id);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  destroy_locked(*exe);
  l.executables.erase(id);
  return HSA_STATUS_SUCCESS;
}

// The AMD loader extension's table, as ROCr hands it out (see hsa_rt.h).
hsa_status_t system_get_major_extension_table(uint16_t extension, uint16_t version_major,
                                              size_t table_length, void* table) {
  HSA_RT_REQUIRE_READY();
  if (with_faults([](Faults& f) { return f.loader_extension != 0; })) return HSA_STATUS_ERROR;
  if (table == nullptr || table_length == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (extension != HSA_EXTENSION_AMD_LOADER || version_major != 1) return HSA_STATUS_ERROR;
  hsa_ven_amd_loader_1_03_pfn_t loader_table;
  std::memset(&loader_table, 0, sizeof(loader_table));
  loader_table.hsa_ven_amd_loader_iterate_executables = hsa_rt_iterate_executables;
  std::memcpy(table, &loader_table, std::min(table_length, sizeof(loader_table)));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_iterate_agent_symbols(
    hsa_executable_t executable, hsa_agent_t agent,
    hsa_status_t (*callback)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*),
    void* data) {
  HSA_RT_REQUIRE_READY();
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  std::vector<hsa_executable_symbol_t> symbols;
  {
    std::lock_guard<std::mutex> lock(loader().mutex);
    uint32_t id = 0;
    const Executable* exe = find_locked(executable, &id);
    if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    if (with_faults([&](Faults& f) { return f.refused_walks[executable.handle]; })) {
      return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    }
    for (size_t i = 0; i < exe->symbols.size(); ++i) {
      if (exe->symbols[i].agent == index) symbols.push_back({symbol_handle(id, i)});
    }
  }
  // Without the lock: the callback may call back into the runtime.
  return call_each(symbols, [&](hsa_executable_symbol_t symbol) {
    return callback(executable, agent, symbol, data);
  });
}

hsa_status_t executable_symbol_get_info(hsa_executable_symbol_t symbol,
                                        hsa_executable_symbol_info_t attribute, void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(loader().mutex);
  const Symbol* s = find_symbol_locked(symbol);
  if (s == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL;
  if (with_faults([&](Faults& f) { return f.symbol_queries[uint32_t(attribute)]; })) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // Attributes of the other kind are INVALID_ARGUMENT, as ROCr's per-kind
  // GetInfo reports them.
  const bool variable = s->kind == HSA_SYMBOL_KIND_VARIABLE;
  switch (attribute) {
    case HSA_EXECUTABLE_SYMBOL_INFO_TYPE:
      return answer(value, s->kind);
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH:
      return answer(value, static_cast<uint32_t>(s->name.size()));
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME:  // NAME_LENGTH bytes, not NUL-terminated
      std::memcpy(value, s->name.data(), s->name.size());
      return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME_LENGTH:
      return answer(value, uint32_t{0});
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME:
      return HSA_STATUS_SUCCESS;  // zero bytes
    case HSA_EXECUTABLE_SYMBOL_INFO_AGENT:
      return answer(value, agent_handle(s->agent));
    case HSA_EXECUTABLE_SYMBOL_INFO_LINKAGE:
      return answer(value, HSA_SYMBOL_LINKAGE_PROGRAM);
    case HSA_EXECUTABLE_SYMBOL_INFO_IS_DEFINITION:
      return answer(value, true);
    default:
      break;
  }
  if (variable) {
    switch (attribute) {
      case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS:
        return answer(value, s->address);
      case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE:
        return answer(value, s->size);
      case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST:
        return answer(value, s->is_constant);
      case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALLOCATION:
        return answer(value, HSA_VARIABLE_ALLOCATION_AGENT);
      case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT:
        return answer(value,
                      s->is_constant ? HSA_VARIABLE_SEGMENT_READONLY : HSA_VARIABLE_SEGMENT_GLOBAL);
      case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALIGNMENT:
        return answer(value, uint32_t{16});
      default:
        return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  switch (attribute) {
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT:
      return answer(value, s->address);
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE:
      return answer(value, s->kernarg_size);
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE:
      return answer(value, s->group_size);
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE:
      return answer(value, s->private_size);
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT:
      return answer(value, uint32_t{16});
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK:
      return answer(value, false);
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t code_object_reader_create_from_memory(const void* code_object, size_t size,
                                                   hsa_code_object_reader_t* reader) {
  HSA_RT_REQUIRE_READY();
  // ROCr only remembers the memory; it is read when a code object is loaded.
  if (code_object == nullptr || size == 0 || reader == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  std::lock_guard<std::mutex> lock(loader().mutex);
  const uint32_t id = loader().next_reader++;
  loader().readers[id] = {code_object, size};
  reader->handle = make_handle(Tag::kReader, id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t code_object_reader_destroy(hsa_code_object_reader_t reader) {
  HSA_RT_REQUIRE_READY();
  std::lock_guard<std::mutex> lock(loader().mutex);
  uint64_t id = 0;
  if (!decode_handle(reader.handle, Tag::kReader, &id) ||
      loader().readers.erase(uint32_t(id)) == 0) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_create_alt(hsa_profile_t profile,
                                   hsa_default_float_rounding_mode_t rounding,
                                   const char* /*options*/, hsa_executable_t* executable) {
  HSA_RT_REQUIRE_READY();
  // ROCr's IS_BAD_PROFILE, IS_BAD_ROUNDING_MODE and IS_BAD_PTR.
  if ((profile != HSA_PROFILE_BASE && profile != HSA_PROFILE_FULL) ||
      static_cast<uint32_t>(rounding) > HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR ||
      executable == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // Listed by the loader's iterator like any other (a tool's own included).
  std::lock_guard<std::mutex> iteration(loader().iteration);
  std::lock_guard<std::mutex> lock(loader().mutex);
  *executable = executable_handle(create_locked(false));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_load_agent_code_object(hsa_executable_t executable, hsa_agent_t agent,
                                               hsa_code_object_reader_t reader,
                                               const char* /*options*/,
                                               hsa_loaded_code_object_t* loaded_code_object) {
  HSA_RT_REQUIRE_READY();
  Loader& l = loader();
  // The loader's lock across the load: the iterator never sees half of one.
  std::lock_guard<std::mutex> iteration(l.iteration);
  std::lock_guard<std::mutex> lock(l.mutex);
  Executable* exe = find_locked(executable);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  uint64_t reader_id = 0;
  if (!decode_handle(reader.handle, Tag::kReader, &reader_id) ||
      l.readers.count(uint32_t(reader_id)) == 0) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  }
  if (exe->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  // An unknown agent, or one without an ISA (the CPU), supports no code
  // object: ROCr's IsaSupportedByAgent iterates the agent's ISAs.
  uint32_t index = kNoAgent;
  if (!agent_index(agent, &index)) index = kNoAgent;
  const auto [image, size] = l.readers.at(uint32_t(reader_id));
  const hsa_status_t status = load_locked(*exe, index, image, size);
  if (status == HSA_STATUS_SUCCESS && loaded_code_object != nullptr) {
    loaded_code_object->handle = make_handle(Tag::kLoadedCodeObject, l.next_loaded++);
  }
  return status;
}

hsa_status_t executable_freeze(hsa_executable_t executable, const char* /*options*/) {
  HSA_RT_REQUIRE_READY();
  std::lock_guard<std::mutex> lock(loader().mutex);
  Executable* exe = find_locked(executable);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (exe->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  exe->frozen = true;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_get_info(hsa_executable_t executable, hsa_executable_info_t attribute,
                                 void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(loader().mutex);
  const Executable* exe = find_locked(executable);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  switch (attribute) {
    case HSA_EXECUTABLE_INFO_PROFILE:
      return answer(value, HSA_PROFILE_FULL);
    case HSA_EXECUTABLE_INFO_STATE:
      return answer(value,
                    exe->frozen ? HSA_EXECUTABLE_STATE_FROZEN : HSA_EXECUTABLE_STATE_UNFROZEN);
    case HSA_EXECUTABLE_INFO_DEFAULT_FLOAT_ROUNDING_MODE:
      return answer(value, HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR);
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

// Without an agent ROCr looks among program symbols, which this runtime
// never has; with one, among that agent's symbols (a CUDA module's found by
// name on first lookup).
hsa_status_t executable_get_symbol_by_name(hsa_executable_t executable, const char* symbol_name,
                                           const hsa_agent_t* agent,
                                           hsa_executable_symbol_t* symbol) {
  HSA_RT_REQUIRE_READY();
  if (symbol_name == nullptr || symbol == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(loader().mutex);
  uint32_t id = 0;
  Executable* exe = find_locked(executable, &id);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  uint32_t index = 0;
  if (agent == nullptr || !agent_index(*agent, &index)) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  const std::string name = symbol_name;
  for (size_t i = 0; i < exe->symbols.size(); ++i) {
    if (exe->symbols[i].agent == index && exe->symbols[i].name == name) {
      symbol->handle = symbol_handle(id, i);
      return HSA_STATUS_SUCCESS;
    }
  }
  size_t found = 0;
  const hsa_status_t status =
      look_up_locked(*exe, index, name, is_kernel_name(name), false, &found);
  if (status == HSA_STATUS_SUCCESS) symbol->handle = symbol_handle(id, found);
  return status;
}

}  // namespace hsa_rt::api

// ---- control interface ---------------------------------------------------------------------

namespace {

// Adds a symbol to a known executable for a known agent; false otherwise.
bool add_symbol(hsa_executable_t exe, hsa_agent_t agent, Symbol symbol, uint32_t storage_size,
                void** storage) {
  std::lock_guard<std::mutex> lock(loader().mutex);
  uint32_t id = 0;
  Executable* executable = find_locked(exe, &id);
  if (executable == nullptr || !agent_index(agent, &symbol.agent) ||
      executable->symbols.size() >= kSymbolFieldMask) {
    return false;
  }
  if (storage != nullptr) {
    ExclusiveLock memory_lock(memory_mutex());
    uint8_t* base = allocate_variable_locked(symbol.agent, storage_size);
    if (base == nullptr) return false;
    symbol.address = reinterpret_cast<uintptr_t>(base);
    *storage = base;
  } else if (symbol.kind == HSA_SYMBOL_KIND_KERNEL) {
    // A non-zero kernel object unique to this symbol, never dispatchable.
    symbol.address = symbol_handle(id, executable->symbols.size());
  } else if (symbol.address != 0 && symbol.size != 0) {
    // A raw variable: a copy touching its range, unless live storage backs
    // it, is a violation rather than a wild access.
    ExclusiveLock memory_lock(memory_mutex());
    auto& live = memory().live;
    auto it =
        find_containing(live, uintptr_t(symbol.address), [](const Block& b) { return b.bytes; });
    if (it == live.end() || symbol.address - it->first + symbol.size > it->second.extent) {
      memory().unbacked[uintptr_t(symbol.address)] = symbol.size;
    }
  }
  executable->symbols.push_back(std::move(symbol));
  return true;
}

// A symbol of an executable's module exposed by name (see hsa_rt.h).
hsa_status_t register_symbol(hsa_executable_t executable, const char* name, bool kernel,
                             bool is_constant, Symbol* out) {
  HSA_RT_REQUIRE_READY();
  if (name == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(loader().mutex);
  Executable* exe = find_locked(executable);
  if (exe == nullptr || exe->modules.empty()) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  const std::string symbol_name = kernel ? std::string(name) + ".kd" : std::string(name);
  for (const Symbol& s : exe->symbols) {
    if (s.name == symbol_name) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  size_t index = 0;
  const hsa_status_t status =
      look_up_locked(*exe, exe->modules.front().first, symbol_name, kernel, is_constant, &index);
  if (status == HSA_STATUS_SUCCESS) *out = exe->symbols[index];
  return status;
}

}  // namespace

extern "C" {

hsa_executable_t hsa_rt_executable_create(void) {
  if (!ready()) return hsa_executable_t{0};
  std::lock_guard<std::mutex> iteration(loader().iteration);
  std::lock_guard<std::mutex> lock(loader().mutex);
  return executable_handle(create_locked(false));
}

void* hsa_rt_executable_add_variable(hsa_executable_t exe, hsa_agent_t agent, const char* name,
                                     uint32_t size, bool is_constant) {
  if (name == nullptr) return nullptr;
  Symbol symbol;
  symbol.name = name;
  symbol.size = size;
  symbol.is_constant = is_constant;
  void* storage = nullptr;
  return add_symbol(exe, agent, symbol, size, &storage) ? storage : nullptr;
}

void hsa_rt_executable_add_variable_raw(hsa_executable_t exe, hsa_agent_t agent, const char* name,
                                        uint64_t address, uint32_t size) {
  if (name == nullptr) return;
  Symbol symbol;
  symbol.name = name;
  symbol.address = address;
  symbol.size = size;
  add_symbol(exe, agent, symbol, 0, nullptr);
}

void hsa_rt_executable_add_kernel(hsa_executable_t exe, hsa_agent_t agent, const char* name) {
  if (name == nullptr) return;
  Symbol symbol;
  symbol.kind = HSA_SYMBOL_KIND_KERNEL;
  symbol.name = name;
  add_symbol(exe, agent, symbol, 0, nullptr);
}

hsa_status_t hsa_rt_executable_load(hsa_agent_t agent, const void* image, size_t size,
                                    hsa_executable_t* executable) {
  HSA_RT_REQUIRE_READY();
  if (image == nullptr || size == 0 || executable == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t index = 0;
  if (!agent_index(agent, &index) || !is_gpu(index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  std::lock_guard<std::mutex> iteration(loader().iteration);
  std::lock_guard<std::mutex> lock(loader().mutex);
  const uint32_t id = create_locked(true);
  const hsa_status_t status = load_locked(loader().executables.at(id), index, image, size);
  if (status != HSA_STATUS_SUCCESS) {
    loader().executables.erase(id);
    return status == HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS ? status
                                                             : HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  *executable = executable_handle(id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_rt_executable_load_file(hsa_agent_t agent, const char* path,
                                         hsa_executable_t* executable) {
  if (path == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::ifstream file(path, std::ios::binary);
  const std::vector<char> image((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  if (image.empty()) {
    std::fprintf(stderr, "hsa_rt: cannot read the code object %s\n", path);
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  return hsa_rt_executable_load(agent, image.data(), image.size(), executable);
}

hsa_status_t hsa_rt_executable_register_variable(hsa_executable_t executable, const char* name,
                                                 bool is_constant, uint64_t* address,
                                                 uint32_t* size) {
  Symbol symbol;
  const hsa_status_t status = register_symbol(executable, name, false, is_constant, &symbol);
  if (status != HSA_STATUS_SUCCESS) return status;
  if (address != nullptr) *address = symbol.address;
  if (size != nullptr) *size = symbol.size;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_rt_executable_register_kernel(hsa_executable_t executable, const char* name,
                                               uint64_t* kernel_object) {
  Symbol symbol;
  const hsa_status_t status = register_symbol(executable, name, true, false, &symbol);
  if (status == HSA_STATUS_SUCCESS && kernel_object != nullptr) *kernel_object = symbol.address;
  return status;
}

hsa_status_t hsa_rt_executable_destroy(hsa_executable_t exe) {
  return hsa_rt::api::executable_destroy(exe);
}

hsa_status_t hsa_rt_iterate_executables(hsa_status_t (*callback)(hsa_executable_t, void*),
                                        void* data) {
  HSA_RT_REQUIRE_READY();
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  Loader& l = loader();
  // Held across the callbacks, as ROCr's loader holds its lock.
  std::lock_guard<std::mutex> iteration(l.iteration);
  std::vector<hsa_executable_t> executables;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    if (with_faults([](Faults& f) { return f.executable_iteration != 0; })) {
      return HSA_STATUS_ERROR;
    }
    for (const auto& entry : l.executables) executables.push_back(executable_handle(entry.first));
  }
  // Without `mutex`: the callbacks may call back into the runtime.
  return call_each(executables,
                   [&](hsa_executable_t executable) { return callback(executable, data); });
}

}  // extern "C"
