// hsa_sim_tables.cpp: runtime-level entry points (init, agents) and the
// CoreApiTable / AmdExtTable the runtime hands out. System info, status
// strings, the agent attributes both runtimes answer alike and the table
// layout are shared with HSA-on-CUDA (c_tests/hsa_common).

#include <cstdio>

#include "hsa_sim_internal.h"

namespace hsa_sim::api {

namespace {

// What this runtime says about agent `index` (a CPU, or a gfx90a-like GPU).
hsa_common::AgentDescription describe_agent(uint32_t index) {
  const bool gpu = is_gpu_index(index);
  hsa_common::AgentDescription agent;
  // ROCr names a GPU agent after its ISA target.
  agent.name = gpu ? "gfx90a" : "HSA Sim CPU";
  agent.vendor_name = gpu ? "AMD" : "CPU";
  agent.wavefront_size = gpu ? 64 : 0;
  agent.queues_max = gpu ? 128 : 0;
  agent.compute_unit_count = gpu ? 104 : 16;
  char text[64];
  std::snprintf(text, sizeof(text), gpu ? "HSA Sim GPU %u" : "HSA Sim CPU",
                static_cast<unsigned>(index));
  agent.product_name = text;
  // "GPU-" and 16 hex digits; CPUs have no UUID ("CPU-XX").
  if (gpu) {
    std::snprintf(text, sizeof(text), "GPU-%016x", static_cast<unsigned>(index));
  } else {
    std::snprintf(text, sizeof(text), "CPU-XX");
  }
  agent.has_uuid = true;
  agent.uuid = text;
  return agent;
}

}  // namespace

hsa_status_t init() { return HSA_STATUS_SUCCESS; }

hsa_status_t shut_down() { return HSA_STATUS_SUCCESS; }

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
  return hsa_common::call_each(agents, [&](hsa_agent_t agent) { return callback(agent, data); });
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
      // Allocations in both device pools and vmem handles share it.
      write_value(value, uint64_t{kDevicePoolSize - device_bytes_live_locked(s, index)});
      return HSA_STATUS_SUCCESS;
    }
  }
  return hsa_common::write_agent_info(index, describe_agent(index),
                                      static_cast<uint32_t>(attribute), value);
}

}  // namespace hsa_sim::api

// ---- tables -----------------------------------------------------------------

extern "C" void hsa_sim_fill_core_table(CoreApiTable* out) {
  if (!hsa_common::begin_table(out)) return;
#define HSA_SIM_SET_ENTRY(Table, field, function) out->field = hsa_sim::api::function;
  HSA_COMMON_RUNTIME_CORE_ENTRIES(HSA_SIM_SET_ENTRY)
  // The sim's loader produces no code-object status codes (hsa_common.h).
  hsa_common::fill_shared_core_entries<hsa_common::StatusCodes::kCore>(out);
  hsa_sim::fill_signal_core_entries(out);
}

extern "C" void hsa_sim_fill_amd_ext_table(AmdExtTable* out) {
  if (!hsa_common::begin_table(out)) return;
  // With the rect copy, and per generation the copy on an engine and the
  // vmem API (hsa_common_tables.h).
  HSA_COMMON_RUNTIME_AMD_ENTRIES(HSA_SIM_SET_ENTRY)
#undef HSA_SIM_SET_ENTRY
  hsa_sim::fill_signal_amd_entries(out);
}

extern "C" CoreApiTable* hsa_sim_core_table(void) {
  return hsa_common::filled_once<CoreApiTable, hsa_sim_fill_core_table>();
}

extern "C" AmdExtTable* hsa_sim_amd_ext_table(void) {
  return hsa_common::filled_once<AmdExtTable, hsa_sim_fill_amd_ext_table>();
}

extern "C" size_t hsa_sim_core_table_size(void) { return sizeof(CoreApiTable); }

extern "C" size_t hsa_sim_amd_ext_table_size(void) { return sizeof(AmdExtTable); }

extern "C" void hsa_sim_header_table_versions(uint32_t out[4]) {
  out[0] = HSA_CORE_API_TABLE_MAJOR_VERSION;
  out[1] = HSA_CORE_API_TABLE_STEP_VERSION;
  out[2] = HSA_AMD_EXT_API_TABLE_MAJOR_VERSION;
  out[3] = HSA_AMD_EXT_API_TABLE_STEP_VERSION;
}
