// hsa_sim_tables.cpp: runtime-level entry points (init, agents, system info,
// status strings) and the CoreApiTable / AmdExtTable the runtime hands out.

#include <hsa_api_trace.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "hsa_sim_internal.h"

namespace hsa_sim::api {

namespace {

// Writes a string attribute into a fixed char[capacity], NUL-padded.
void write_string(void* out, size_t capacity, const char* text) {
  auto* chars = static_cast<char*>(out);
  std::memset(chars, 0, capacity);
  std::memcpy(chars, text, std::min(std::strlen(text), capacity - 1));
}

// Answers one agent attribute; false for attributes the runtime does not know.
bool write_agent_info(uint32_t index, uint32_t attribute, void* value) {
  const bool gpu = is_gpu_index(index);
  char text[64];
  switch (attribute) {
    case HSA_AGENT_INFO_NAME:
      // ROCr names a GPU agent after its ISA target.
      write_string(value, 64, gpu ? "gfx90a" : "HSA Sim CPU");
      return true;
    case HSA_AGENT_INFO_VENDOR_NAME:
      write_string(value, 64, gpu ? "AMD" : "CPU");
      return true;
    case HSA_AGENT_INFO_FEATURE:
      write_value(value, gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : hsa_agent_feature_t{});
      return true;
    case HSA_AGENT_INFO_MACHINE_MODEL:
      write_value(value, HSA_MACHINE_MODEL_LARGE);
      return true;
    case HSA_AGENT_INFO_PROFILE:
      write_value(value, gpu ? HSA_PROFILE_BASE : HSA_PROFILE_FULL);
      return true;
    case HSA_AGENT_INFO_WAVEFRONT_SIZE:
      write_value(value, gpu ? uint32_t{64} : uint32_t{0});
      return true;
    case HSA_AGENT_INFO_QUEUES_MAX:
      write_value(value, gpu ? uint32_t{128} : uint32_t{0});
      return true;
    case HSA_AGENT_INFO_NODE:
      write_value(value, index);
      return true;
    case HSA_AGENT_INFO_DEVICE:
      write_value(value, gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU);
      return true;
    case HSA_AGENT_INFO_VERSION_MAJOR:
    case HSA_AGENT_INFO_VERSION_MINOR:
      write_value(value, uint16_t{1});
      return true;
    case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID:
      write_value(value, index);
      return true;
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT:
      write_value(value, gpu ? uint32_t{104} : uint32_t{16});
      return true;
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
      std::snprintf(text, sizeof(text), gpu ? "HSA Sim GPU %u" : "HSA Sim CPU",
                    static_cast<unsigned>(index));
      write_string(value, 64, text);
      return true;
    case HSA_AMD_AGENT_INFO_UUID:
      // "GPU-" and 16 hex digits; CPUs have no UUID ("CPU-XX").
      if (gpu) {
        std::snprintf(text, sizeof(text), "GPU-%016x", static_cast<unsigned>(index));
      } else {
        std::snprintf(text, sizeof(text), "CPU-XX");
      }
      write_string(value, 21, text);
      return true;
    default:
      return false;
  }
}

const char* status_text(hsa_status_t status) {
  switch (status) {
    case HSA_STATUS_SUCCESS:
      return "HSA_STATUS_SUCCESS: The function has been executed successfully.";
    case HSA_STATUS_INFO_BREAK:
      return "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted.";
    case HSA_STATUS_ERROR:
      return "HSA_STATUS_ERROR: A generic error has occurred.";
    case HSA_STATUS_ERROR_INVALID_ARGUMENT:
      return "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a "
             "precondition stated in the documentation of the corresponding formal argument.";
    case HSA_STATUS_ERROR_INVALID_ALLOCATION:
      return "HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid.";
    case HSA_STATUS_ERROR_INVALID_AGENT:
      return "HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid.";
    case HSA_STATUS_ERROR_INVALID_REGION:
      return "HSA_STATUS_ERROR_INVALID_REGION: The memory region is invalid.";
    case HSA_STATUS_ERROR_INVALID_SIGNAL:
      return "HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid.";
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
      return "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary "
             "resources.";
    case HSA_STATUS_ERROR_NOT_INITIALIZED:
      return "HSA_STATUS_ERROR_NOT_INITIALIZED: The HSA runtime is not initialized.";
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE:
      return "HSA_STATUS_ERROR_INVALID_EXECUTABLE: The executable is invalid.";
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL:
      return "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: The executable symbol is invalid.";
    default:
      break;
  }
  if (static_cast<uint32_t>(status) == HSA_STATUS_ERROR_INVALID_MEMORY_POOL) {
    return "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid.";
  }
  return nullptr;
}

hsa_status_t init() { return HSA_STATUS_SUCCESS; }

hsa_status_t shut_down() { return HSA_STATUS_SUCCESS; }

}  // namespace

hsa_status_t iterate_agents(hsa_status_t (*callback)(hsa_agent_t, void*), void* data) {
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::vector<hsa_agent_t> agents;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    // The CPU first, then the GPUs, as ROCr orders them.
    for (uint32_t i = 0; i < agent_count_locked(s); ++i) {
      agents.push_back(agent_handle_locked(s, i));
    }
  }
  for (hsa_agent_t agent : agents) {
    const hsa_status_t status = callback(agent, data);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!agent_index_from_handle_locked(s, agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (static_cast<uint32_t>(attribute) == kAgentInfoMemoryAvail) {
      // Newer ROCr (not the 5.2 headers): free bytes of the agent's local
      // memory. Only GPU agents own device pools here.
      if (!is_gpu_index(index) || !s.memory_avail_supported) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      write_value(value, uint64_t{pool_size(HSA_SIM_POOL_DEVICE_COARSE) - device_bytes_live_locked(s, index)});
      return HSA_STATUS_SUCCESS;
    }
  }
  return write_agent_info(index, attribute, value) ? HSA_STATUS_SUCCESS
                                                   : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

hsa_status_t system_get_info(hsa_system_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attribute) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR:
    case HSA_SYSTEM_INFO_VERSION_MINOR:
      write_value(value, uint16_t{1});
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_TIMESTAMP: {
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      write_value(value, static_cast<uint64_t>(
                             std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
      write_value(value, kTimestampFrequencyHz);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
      write_value(value, UINT64_MAX);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_ENDIANNESS:
      write_value(value, HSA_ENDIANNESS_LITTLE);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_MACHINE_MODEL:
      write_value(value, HSA_MACHINE_MODEL_LARGE);
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t status_string(hsa_status_t status, const char** status_string) {
  if (status_string == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const char* text = status_text(status);
  if (text == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *status_string = text;
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_sim::api

// ---- tables -----------------------------------------------------------------

extern "C" void hsa_sim_fill_core_table(CoreApiTable* out) {
  using namespace hsa_sim::api;
  if (out == nullptr) return;
  std::memset(out, 0, sizeof(*out));
  // As ROCr fills it: minor_id carries the table size for version checks.
  out->version.major_id = HSA_CORE_API_TABLE_MAJOR_VERSION;
  out->version.minor_id = sizeof(CoreApiTable);
  out->version.step_id = HSA_CORE_API_TABLE_STEP_VERSION;

  out->hsa_init_fn = init;
  out->hsa_shut_down_fn = shut_down;
  out->hsa_system_get_info_fn = system_get_info;
  out->hsa_iterate_agents_fn = iterate_agents;
  out->hsa_agent_get_info_fn = agent_get_info;
  out->hsa_agent_iterate_regions_fn = agent_iterate_regions;
  out->hsa_region_get_info_fn = region_get_info;
  out->hsa_memory_allocate_fn = memory_allocate;
  out->hsa_memory_free_fn = memory_free;
  out->hsa_memory_copy_fn = memory_copy;
  out->hsa_executable_destroy_fn = executable_destroy;
  out->hsa_executable_symbol_get_info_fn = executable_symbol_get_info;
  out->hsa_executable_iterate_agent_symbols_fn = executable_iterate_agent_symbols;
  out->hsa_status_string_fn = status_string;
  hsa_sim::fill_signal_core_entries(out);
}

extern "C" void hsa_sim_fill_amd_ext_table(AmdExtTable* out) {
  using namespace hsa_sim::api;
  if (out == nullptr) return;
  std::memset(out, 0, sizeof(*out));
  out->version.major_id = HSA_AMD_EXT_API_TABLE_MAJOR_VERSION;
  out->version.minor_id = sizeof(AmdExtTable);
  out->version.step_id = HSA_AMD_EXT_API_TABLE_STEP_VERSION;

  out->hsa_amd_memory_pool_get_info_fn = amd_memory_pool_get_info;
  out->hsa_amd_agent_iterate_memory_pools_fn = amd_agent_iterate_memory_pools;
  out->hsa_amd_memory_pool_allocate_fn = amd_memory_pool_allocate;
  out->hsa_amd_memory_pool_free_fn = amd_memory_pool_free;
  out->hsa_amd_agent_memory_pool_get_info_fn = amd_agent_memory_pool_get_info;
  out->hsa_amd_agents_allow_access_fn = amd_agents_allow_access;
  out->hsa_amd_pointer_info_fn = amd_pointer_info;
  out->hsa_amd_pointer_info_set_userdata_fn = amd_pointer_info_set_userdata;
  hsa_sim::fill_signal_amd_entries(out);
}

extern "C" CoreApiTable* hsa_sim_core_table(void) {
  // Filled once and never rewritten: a tool may have installed wrappers.
  static CoreApiTable* const table = [] {
    auto* t = new CoreApiTable;
    hsa_sim_fill_core_table(t);
    return t;
  }();
  return table;
}

extern "C" AmdExtTable* hsa_sim_amd_ext_table(void) {
  static AmdExtTable* const table = [] {
    auto* t = new AmdExtTable;
    hsa_sim_fill_amd_ext_table(t);
    return t;
  }();
  return table;
}

extern "C" size_t hsa_sim_core_table_size(void) { return sizeof(CoreApiTable); }

extern "C" size_t hsa_sim_amd_ext_table_size(void) { return sizeof(AmdExtTable); }
