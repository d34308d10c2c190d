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

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

// Symbol handles: tag:8 | epoch:16 | executable id:20 | symbol index:20, as
// the sim's (hsa_common::symbol_handle).
using hsa_common::kSymbolFieldMask;

// address: the variable's address, or the CUfunction of a kernel.
using Symbol = hsa_common::SymbolRecord;

struct Executable {
  uint32_t agent_index = 0;
  CUmodule module = nullptr;
  std::vector<Symbol> symbols;
};

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
  if (exe == nullptr) return HSA_STATUS_ERROR_INVALID_EXECUTABLE;
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

}  // namespace

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
  for (const auto& entry : executables) unload_module(entry.second.agent_index, entry.second.module);
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
  l.zombies.emplace_back(exe.agent_index, exe.module);
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
  // Attributes that do not apply to the symbol's kind are INVALID_ARGUMENT,
  // as ROCr's per-kind GetInfo reports them.
  return hsa_common::write_symbol_info(*found, agent_handle(agent_index),
                                       static_cast<uint32_t>(attribute), value);
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
      [name](CUmodule module, Symbol* symbol) {
        CUdeviceptr dptr = 0;
        size_t bytes = 0;
        const std::string call = std::string("cuModuleGetGlobal(\"") + name + "\")";
        const CUresult result = cu().cuModuleGetGlobal(&dptr, &bytes, module, name);
        if (!cuda_check(result, call.c_str())) {
          return result == CUDA_ERROR_NOT_FOUND ? HSA_STATUS_ERROR_INVALID_SYMBOL_NAME
                                                : HSA_STATUS_ERROR;
        }
        // HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE is 32 bits.
        if (bytes == 0 || bytes > UINT32_MAX) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        symbol->address = dptr;
        symbol->size = static_cast<uint32_t>(bytes);
        return HSA_STATUS_SUCCESS;
      },
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
      [name](CUmodule module, Symbol* symbol) {
        CUfunction found = nullptr;
        const std::string call = std::string("cuModuleGetFunction(\"") + name + "\")";
        const CUresult result = cu().cuModuleGetFunction(&found, module, name);
        if (!cuda_check(result, call.c_str())) {
          return result == CUDA_ERROR_NOT_FOUND ? HSA_STATUS_ERROR_INVALID_SYMBOL_NAME
                                                : HSA_STATUS_ERROR;
        }
        symbol->address = reinterpret_cast<uint64_t>(found);
        return HSA_STATUS_SUCCESS;
      },
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
