// hsa_cuda_loader.cpp: executables are CUDA modules, one per (code object,
// GPU agent), standing in for code objects loaded by ROCr's loader.
//
// The CUDA driver API can look a global up by name (cuModuleGetGlobal) but
// cannot list a module's globals, so the harness registers the __device__ and
// __constant__ variables (and the kernels) each module exposes; from then on
// they are ordinary HSA symbols: hsa_executable_iterate_agent_symbols yields
// them and hsa_executable_symbol_get_info answers their address, size and
// agent. The iterator over loaded executables has the shape of
// hsa_ven_amd_loader_iterate_executables.
//
// An executable is also made as ROCr makes one, through the HSA calls a tool
// loading its own code object uses: hsa_code_object_reader_create_from_memory
// (the reader keeps a copy of the bytes), hsa_executable_create_alt,
// hsa_executable_load_agent_code_object (cuModuleLoadData of a cubin or
// fatbin into the agent's context; one code object per executable here),
// hsa_executable_freeze, and hsa_executable_get_symbol_by_name, which finds a
// kernel "name.kd" as cuModuleGetFunction("name") and a variable as
// cuModuleGetGlobal, registering the symbol on first use (the driver cannot
// list a module's functions). These executables are listed by the iterator
// like any other, as ROCr's loader lists a tool's own.
//
// A kernel symbol's KERNEL_OBJECT is its CUfunction (the packet processor,
// hsa_cuda_queues.cpp, maps it back through kernel_for_object);
// GROUP_SEGMENT_SIZE is CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static shared
// memory), PRIVATE_SEGMENT_SIZE CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, and
// KERNARG_SEGMENT_SIZE the end of the last parameter by cuFuncGetParamInfo
// (CUDA 12.4+), else, for the library's own kernels, the size of their
// argument struct in kernels/replay_kernels.h, else 0.

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "hsa_cuda_internal.h"
#include "replay_kernels.h"

namespace hsa_cuda {

namespace {

// Symbol handles: tag:8 | epoch:16 | executable id:20 | symbol index:20, as
// the sim's (hsa_common::symbol_handle).
using hsa_common::kSymbolFieldMask;

// address: the variable's address, or the CUfunction of a kernel; the
// kernel attributes the shared record does not carry.
struct Symbol : hsa_common::SymbolRecord {
  uint32_t kernarg_size = 0;
  uint32_t group_size = 0;
  uint32_t private_size = 0;
  int param_count = -1;
};

struct Executable {
  // 0 (no agent) until a code object is loaded into an executable made by
  // hsa_executable_create_alt.
  uint32_t agent_index = 0;
  CUmodule module = nullptr;
  bool frozen = true;
  std::vector<Symbol> symbols;
};

// A code object reader: a copy of the bytes it was made from.
using Reader = std::vector<unsigned char>;

struct LoaderState {
  std::mutex mutex;
  // The loader's lock as ROCr holds one: the executable iterator holds it
  // across its callbacks and loading or destroying an executable takes it, so
  // an executable the iterator reports stays loaded until its callback
  // returns. Taken before `mutex`, never while holding it.
  std::mutex iteration_mutex;
  std::map<uint32_t, Executable> executables;  // by id, which is load order
  uint32_t next_id = 1;
  // Destroyed executables' modules, unloaded at shutdown (see
  // executable_destroy).
  std::vector<std::pair<uint32_t, CUmodule>> zombies;
  std::map<uint64_t, Reader> readers;  // by id
  uint64_t next_reader_id = 1;
};

LoaderState& loader() {
  static LoaderState* const state = new LoaderState;
  return *state;
}

hsa_executable_t executable_handle(uint32_t id) {
  return hsa_executable_t{make_handle(HandleTag::kExecutable, id)};
}

hsa_executable_symbol_t symbol_handle(uint32_t id, size_t index) {
  return hsa_executable_symbol_t{hsa_common::symbol_handle(handle_epoch(), id, index)};
}

Executable* find_executable_locked(LoaderState& l, hsa_executable_t executable, uint32_t* id) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(executable.handle, HandleTag::kExecutable, &payload)) {
    return nullptr;
  }
  auto it = l.executables.find(static_cast<uint32_t>(payload));
  if (it == l.executables.end()) return nullptr;
  if (id != nullptr) *id = it->first;
  return &it->second;
}

const Symbol* find_symbol_locked(const LoaderState& l, hsa_executable_symbol_t symbol,
                                 uint32_t* agent_index) {
  uint32_t id = 0;
  size_t index = 0;
  if (!ready() || !hsa_common::decode_symbol_handle(symbol.handle, handle_epoch(), &id, &index)) {
    return nullptr;
  }
  auto it = l.executables.find(id);
  if (it == l.executables.end() || index >= it->second.symbols.size()) return nullptr;
  *agent_index = it->second.agent_index;
  return &it->second.symbols[index];
}

hsa_status_t load(hsa_agent_t agent, const char* path, const void* image,
                  hsa_executable_t* executable) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (executable == nullptr || (path == nullptr && image == nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t agent_index = 0;
  if (!agent_index_from_handle(agent, &agent_index) || !is_gpu_index(agent_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  ScopedContext scope(gpu_at(agent_index).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  CUmodule module = nullptr;
  if (path != nullptr) {
    const std::string call = std::string("cuModuleLoad(\"") + path + "\")";
    if (!cuda_check(cu().cuModuleLoad(&module, path), call.c_str())) {
      return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
    }
  } else if (!HSA_CUDA_CHECK(cu().cuModuleLoadData(&module, image))) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  LoaderState& l = loader();
  std::lock_guard<std::mutex> loading(l.iteration_mutex);
  std::lock_guard<std::mutex> lock(l.mutex);
  const uint32_t id = l.next_id++;
  Executable loaded;
  loaded.agent_index = agent_index;
  loaded.module = module;
  l.executables.emplace(id, std::move(loaded));
  *executable = executable_handle(id);
  return HSA_STATUS_SUCCESS;
}

// Adds a symbol found by `lookup` (which runs in the executable's context and
// fills address and size); the common part of variable and kernel
// registration.
template <typename Lookup>
hsa_status_t add_symbol(hsa_executable_t executable, const char* name, hsa_symbol_kind_t kind,
                        bool is_constant, Lookup lookup, Symbol* added) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (name == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  Executable* exe = find_executable_locked(l, executable, nullptr);
  if (exe == nullptr || exe->module == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  const bool duplicate = std::any_of(exe->symbols.begin(), exe->symbols.end(),
                                     [&](const Symbol& s) { return s.name == name; });
  if (duplicate) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (exe->symbols.size() >= kSymbolFieldMask) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  ScopedContext scope(gpu_at(exe->agent_index).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  Symbol symbol;
  symbol.kind = kind;
  symbol.name = name;
  symbol.is_constant = is_constant;
  const hsa_status_t status = lookup(exe->module, &symbol);
  if (status != HSA_STATUS_SUCCESS) return status;
  if (kind == HSA_SYMBOL_KIND_VARIABLE) {
    // Lock order: loader, then memory (see hsa_cuda_internal.h).
    register_variable_range(uintptr_t(symbol.address), symbol.size, exe->agent_index);
  }
  exe->symbols.push_back(symbol);
  if (added != nullptr) *added = symbol;
  return HSA_STATUS_SUCCESS;
}

void unregister_variables(const Executable& exe) {
  for (const Symbol& symbol : exe.symbols) {
    if (symbol.kind == HSA_SYMBOL_KIND_VARIABLE) unregister_variable_range(uintptr_t(symbol.address));
  }
}

bool unload_module(uint32_t agent_index, CUmodule module) {
  ScopedContext scope(gpu_at(agent_index).context);
  return scope.ok() && HSA_CUDA_CHECK(cu().cuModuleUnload(module));
}

// The kernel attributes of `function` (named `name`, without ".kd"), in
// the module's context (see the file comment).
void describe_kernel(CUfunction function, const std::string& name, Symbol* symbol) {
  int value = 0;
  if (HSA_CUDA_CHECK(cu().cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                             function))) {
    symbol->group_size = uint32_t(value);
  }
  if (HSA_CUDA_CHECK(cu().cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                                             function))) {
    symbol->private_size = uint32_t(value);
  }
  // The library's kernels take one argument struct (replay_kernels.h).
  uint32_t by_name = 0;
  if (name == "kr_scatter_copy") by_name = sizeof(kr_scatter_copy_args);
  if (name == "kr_hash_blocks") by_name = sizeof(kr_hash_blocks_args);
  if (name == "kr_compare_copy") by_name = sizeof(kr_compare_copy_args);
  if (cu().cuFuncGetParamInfo != nullptr) {
    size_t end = 0;
    size_t index = 0;
    CUresult result = CUDA_SUCCESS;
    for (;; ++index) {
      size_t offset = 0;
      size_t size = 0;
      result = cu().cuFuncGetParamInfo(function, index, &offset, &size);
      if (result != CUDA_SUCCESS) break;
      end = std::max(end, offset + size);
    }
    // The first index the driver refuses is past the last parameter (it
    // answers INVALID_VALUE there). A refusal of index 0 is a kernel
    // without parameters only when it is INVALID_VALUE and the name is not
    // one of the library's kernels; otherwise the driver cannot tell, and
    // the name decides.
    if (index > 0 || (result == CUDA_ERROR_INVALID_VALUE && by_name == 0)) {
      symbol->param_count = int(index);
      symbol->kernarg_size = uint32_t(end);
      if (by_name != 0 && by_name != end) {
        std::fprintf(stderr,
                     "hsa_cuda: %s takes %zu bytes of parameters, replay_kernels.h says %u\n",
                     name.c_str(), end, by_name);
      }
      return;
    }
  }
  if (by_name != 0) {
    symbol->param_count = 1;
    symbol->kernarg_size = by_name;
  }
}

// Looks a kernel up in the module: the common part of registration by the
// harness and lookup by name.
hsa_status_t find_kernel(CUmodule module, const std::string& cuda_name, Symbol* symbol) {
  CUfunction found = nullptr;
  const std::string call = "cuModuleGetFunction(\"" + cuda_name + "\")";
  const CUresult result = cu().cuModuleGetFunction(&found, module, cuda_name.c_str());
  if (result == CUDA_ERROR_NOT_FOUND) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  if (!cuda_check(result, call.c_str())) return HSA_STATUS_ERROR;
  symbol->address = reinterpret_cast<uint64_t>(found);
  describe_kernel(found, cuda_name, symbol);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t find_variable(CUmodule module, const char* name, Symbol* symbol) {
  CUdeviceptr dptr = 0;
  size_t bytes = 0;
  const CUresult result = cu().cuModuleGetGlobal(&dptr, &bytes, module, name);
  if (result == CUDA_ERROR_NOT_FOUND) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  const std::string call = std::string("cuModuleGetGlobal(\"") + name + "\")";
  if (!cuda_check(result, call.c_str())) return HSA_STATUS_ERROR;
  // HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE is 32 bits.
  if (bytes == 0 || bytes > UINT32_MAX) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  symbol->address = dptr;
  symbol->size = static_cast<uint32_t>(bytes);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

bool kernel_for_object(uint64_t object, uint32_t agent_index, KernelLaunch* out) {
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (const auto& entry : l.executables) {
    const Executable& exe = entry.second;
    if (exe.agent_index != agent_index) continue;
    for (const Symbol& symbol : exe.symbols) {
      if (symbol.kind != HSA_SYMBOL_KIND_KERNEL || symbol.address != object) continue;
      out->function = reinterpret_cast<CUfunction>(symbol.address);
      out->name = symbol.name;
      out->static_shared = symbol.group_size;
      out->kernarg_size = symbol.kernarg_size;
      out->param_count = symbol.param_count;
      return true;
    }
  }
  return false;
}

void release_all_code_object_readers() {
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.readers.clear();
}

void unload_all_executables() {
  LoaderState& l = loader();
  std::map<uint32_t, Executable> executables;
  std::vector<std::pair<uint32_t, CUmodule>> zombies;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    executables.swap(l.executables);
    zombies.swap(l.zombies);
    for (const auto& entry : executables) unregister_variables(entry.second);
  }
  for (const auto& entry : executables) {
    if (entry.second.module != nullptr) unload_module(entry.second.agent_index, entry.second.module);
  }
  for (const auto& [agent_index, module] : zombies) unload_module(agent_index, module);
}

namespace api {

hsa_status_t executable_destroy(hsa_executable_t executable) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  LoaderState& l = loader();
  std::lock_guard<std::mutex> loading(l.iteration_mutex);
  Executable exe;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    uint32_t id = 0;
    Executable* found = find_executable_locked(l, executable, &id);
    if (found == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    exe = std::move(*found);
    l.executables.erase(id);
    // Forgotten before the module goes: no copy may be admitted into its
    // storage once the unload starts.
    unregister_variables(exe);
  }
  // The module stays loaded until shutdown (unloaded modules are kept as
  // zombies): unloading would let the driver hand the variables' addresses
  // out again, and then a copy into them would no longer be recognisable as
  // a copy into an unloaded executable's storage.
  std::lock_guard<std::mutex> lock(l.mutex);
  if (exe.module != nullptr) l.zombies.emplace_back(exe.agent_index, exe.module);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_iterate_agent_symbols(
    hsa_executable_t executable, hsa_agent_t agent,
    hsa_status_t (*callback)(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void*),
    void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t agent_index = 0;
  if (!agent_index_from_handle(agent, &agent_index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  std::vector<hsa_executable_symbol_t> symbols;
  {
    LoaderState& l = loader();
    std::lock_guard<std::mutex> lock(l.mutex);
    uint32_t id = 0;
    const Executable* exe = find_executable_locked(l, executable, &id);
    if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    // A module is loaded into one GPU's context: its symbols are that
    // agent's only.
    if (exe->agent_index == agent_index) {
      for (size_t i = 0; i < exe->symbols.size(); ++i) symbols.push_back(symbol_handle(id, i));
    }
  }
  // Without the lock: the callback may call back into the runtime.
  return hsa_common::call_each(symbols, [&](hsa_executable_symbol_t symbol) {
    return callback(executable, agent, symbol, data);
  });
}

hsa_status_t executable_symbol_get_info(hsa_executable_symbol_t symbol,
                                        hsa_executable_symbol_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  uint32_t agent_index = 0;
  const Symbol* found = find_symbol_locked(l, symbol, &agent_index);
  if (found == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL;
  if (found->kind == HSA_SYMBOL_KIND_KERNEL) {
    switch (static_cast<uint32_t>(attribute)) {
      case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE:
        write_value(value, found->kernarg_size);
        return HSA_STATUS_SUCCESS;
      case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE:
        write_value(value, found->group_size);
        return HSA_STATUS_SUCCESS;
      case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE:
        write_value(value, found->private_size);
        return HSA_STATUS_SUCCESS;
      default:
        break;
    }
  }
  // Attributes that do not apply to the symbol's kind are INVALID_ARGUMENT,
  // as ROCr's per-kind GetInfo reports them.
  return hsa_common::write_symbol_info(*found, agent_handle(agent_index),
                                       static_cast<uint32_t>(attribute), value);
}

// ---- code object readers and executables made through HSA ----------------------------

hsa_status_t code_object_reader_create_from_memory(const void* code_object, size_t size,
                                                   hsa_code_object_reader_t* reader) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (code_object == nullptr || size == 0 || reader == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const auto* bytes = static_cast<const unsigned char*>(code_object);
  Reader copy(bytes, bytes + size);
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  const uint64_t id = l.next_reader_id++;
  l.readers.emplace(id, std::move(copy));
  reader->handle = make_handle(kCodeObjectReaderTag, id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t code_object_reader_destroy(hsa_code_object_reader_t reader) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  uint64_t id = 0;
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (!decode_handle(reader.handle, kCodeObjectReaderTag, &id) || l.readers.erase(id) == 0) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_create_alt(hsa_profile_t profile,
                                   hsa_default_float_rounding_mode_t default_float_rounding_mode,
                                   const char* /*options*/, hsa_executable_t* executable) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (executable == nullptr || (profile != HSA_PROFILE_BASE && profile != HSA_PROFILE_FULL) ||
      static_cast<uint32_t>(default_float_rounding_mode) >
          static_cast<uint32_t>(HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  LoaderState& l = loader();
  std::lock_guard<std::mutex> loading(l.iteration_mutex);
  std::lock_guard<std::mutex> lock(l.mutex);
  const uint32_t id = l.next_id++;
  Executable created;
  created.frozen = false;
  l.executables.emplace(id, std::move(created));
  *executable = executable_handle(id);
  return HSA_STATUS_SUCCESS;
}

// One code object per executable here (ROCr takes several, one per agent):
// a second load is HSA_STATUS_ERROR.
hsa_status_t executable_load_agent_code_object(hsa_executable_t executable, hsa_agent_t agent,
                                               hsa_code_object_reader_t code_object_reader,
                                               const char* /*options*/,
                                               hsa_loaded_code_object_t* loaded_code_object) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  LoaderState& l = loader();
  Reader image;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    const Executable* exe = find_executable_locked(l, executable, nullptr);
    if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    if (exe->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
    uint64_t reader_id = 0;
    if (!decode_handle(code_object_reader.handle, kCodeObjectReaderTag, &reader_id) ||
        l.readers.count(reader_id) == 0) {
      return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
    }
    image = l.readers.at(reader_id);
  }
  uint32_t agent_index = 0;
  if (!agent_index_from_handle(agent, &agent_index) || !is_gpu_index(agent_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  CUmodule module = nullptr;
  {
    ScopedContext scope(gpu_at(agent_index).context);
    if (!scope.ok()) return HSA_STATUS_ERROR;
    if (!HSA_CUDA_CHECK(cu().cuModuleLoadData(&module, image.data()))) {
      return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
    }
  }
  std::lock_guard<std::mutex> loading(l.iteration_mutex);
  std::lock_guard<std::mutex> lock(l.mutex);
  uint32_t id = 0;
  Executable* exe = find_executable_locked(l, executable, &id);
  const bool usable = exe != nullptr && !exe->frozen && exe->module == nullptr;
  if (!usable) {
    // Destroyed, frozen or loaded meanwhile: the module goes again.
    l.zombies.emplace_back(agent_index, module);
    if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
    return exe->frozen ? HSA_STATUS_ERROR_FROZEN_EXECUTABLE : HSA_STATUS_ERROR;
  }
  exe->agent_index = agent_index;
  exe->module = module;
  if (loaded_code_object != nullptr) loaded_code_object->handle = executable_handle(id).handle;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_freeze(hsa_executable_t executable, const char* /*options*/) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  Executable* exe = find_executable_locked(l, executable, nullptr);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (exe->frozen) return HSA_STATUS_ERROR_FROZEN_EXECUTABLE;
  exe->frozen = true;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t executable_get_info(hsa_executable_t executable, hsa_executable_info_t attribute,
                                 void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  const Executable* exe = find_executable_locked(l, executable, nullptr);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  switch (attribute) {
    case HSA_EXECUTABLE_INFO_PROFILE:
      write_value(value, HSA_PROFILE_FULL);
      return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_INFO_STATE:
      write_value(value, exe->frozen ? HSA_EXECUTABLE_STATE_FROZEN : HSA_EXECUTABLE_STATE_UNFROZEN);
      return HSA_STATUS_SUCCESS;
    case HSA_EXECUTABLE_INFO_DEFAULT_FLOAT_ROUNDING_MODE:
      write_value(value, HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR);
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

// A kernel "name.kd" is the module's function "name"; any other name a
// module variable. Found symbols are registered on first use.
hsa_status_t executable_get_symbol_by_name(hsa_executable_t executable, const char* symbol_name,
                                           const hsa_agent_t* agent,
                                           hsa_executable_symbol_t* symbol) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (symbol_name == nullptr || symbol == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t wanted_agent = 0;
  if (agent != nullptr && !agent_index_from_handle(*agent, &wanted_agent)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  uint32_t id = 0;
  Executable* exe = find_executable_locked(l, executable, &id);
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  if (exe->module == nullptr || (agent != nullptr && wanted_agent != exe->agent_index)) {
    return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  }
  const std::string name = symbol_name;
  for (size_t i = 0; i < exe->symbols.size(); ++i) {
    if (exe->symbols[i].name == name) {
      *symbol = symbol_handle(id, i);
      return HSA_STATUS_SUCCESS;
    }
  }
  if (exe->symbols.size() >= kSymbolFieldMask) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  ScopedContext scope(gpu_at(exe->agent_index).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  Symbol found;
  found.name = name;
  static const std::string kDescriptor = ".kd";
  const bool kernel = name.size() > kDescriptor.size() &&
                      name.compare(name.size() - kDescriptor.size(), kDescriptor.size(),
                                   kDescriptor) == 0;
  hsa_status_t status = HSA_STATUS_SUCCESS;
  if (kernel) {
    found.kind = HSA_SYMBOL_KIND_KERNEL;
    status = find_kernel(exe->module, name.substr(0, name.size() - kDescriptor.size()), &found);
  } else {
    found.kind = HSA_SYMBOL_KIND_VARIABLE;
    status = find_variable(exe->module, symbol_name, &found);
    // Lock order: loader, then memory (see hsa_cuda_internal.h).
    if (status == HSA_STATUS_SUCCESS) {
      register_variable_range(uintptr_t(found.address), found.size, exe->agent_index);
    }
  }
  if (status != HSA_STATUS_SUCCESS) return status;
  exe->symbols.push_back(found);
  *symbol = symbol_handle(id, exe->symbols.size() - 1);
  return HSA_STATUS_SUCCESS;
}

}  // namespace api

}  // namespace hsa_cuda

using namespace hsa_cuda;

// ---- control interface ----------------------------------------------------------------

extern "C" hsa_status_t hsa_cuda_executable_load(hsa_agent_t agent, const char* path,
                                                 hsa_executable_t* executable) {
  if (path == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return load(agent, path, nullptr, executable);
}

extern "C" hsa_status_t hsa_cuda_executable_load_data(hsa_agent_t agent, const void* image,
                                                      hsa_executable_t* executable) {
  if (image == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  return load(agent, nullptr, image, executable);
}

extern "C" hsa_status_t hsa_cuda_executable_register_variable(hsa_executable_t executable,
                                                              const char* name, bool is_constant,
                                                              uint64_t* address, uint32_t* size) {
  Symbol added;
  const hsa_status_t status = add_symbol(
      executable, name, HSA_SYMBOL_KIND_VARIABLE, is_constant,
      [name](CUmodule module, Symbol* symbol) { return find_variable(module, name, symbol); },
      &added);
  if (status == HSA_STATUS_SUCCESS) {
    if (address != nullptr) *address = added.address;
    if (size != nullptr) *size = added.size;
  }
  return status;
}

extern "C" hsa_status_t hsa_cuda_executable_register_kernel(hsa_executable_t executable,
                                                            const char* name,
                                                            CUfunction* function) {
  Symbol added;
  const hsa_status_t status = add_symbol(
      executable, name, HSA_SYMBOL_KIND_KERNEL, false,
      [name](CUmodule module, Symbol* symbol) { return find_kernel(module, name, symbol); },
      &added);
  if (status == HSA_STATUS_SUCCESS && function != nullptr) {
    *function = reinterpret_cast<CUfunction>(added.address);
  }
  return status;
}

extern "C" CUmodule hsa_cuda_executable_module(hsa_executable_t executable) {
  LoaderState& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  const Executable* exe = find_executable_locked(l, executable, nullptr);
  return exe != nullptr ? exe->module : nullptr;
}

extern "C" hsa_status_t hsa_cuda_executable_unload(hsa_executable_t executable) {
  return api::executable_destroy(executable);
}

extern "C" hsa_status_t hsa_cuda_iterate_executables(
    hsa_status_t (*callback)(hsa_executable_t executable, void* data), void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  LoaderState& l = loader();
  // Held across the callbacks, as ROCr's loader holds its lock: no executable
  // is loaded or destroyed while the walk runs (a callback must not do so).
  std::lock_guard<std::mutex> loading(l.iteration_mutex);
  std::vector<hsa_executable_t> executables;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    for (const auto& entry : l.executables) executables.push_back(executable_handle(entry.first));
  }
  // The callbacks run without `mutex`, so they may call back into the
  // runtime (anything but loading or destroying an executable).
  return hsa_common::call_each(
      executables, [&](hsa_executable_t executable) { return callback(executable, data); });
}
