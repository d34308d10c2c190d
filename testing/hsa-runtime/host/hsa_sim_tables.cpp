// hsa_sim_tables.cpp: runtime-level entry points (init, agents, ISAs) and
// the CoreApiTable / AmdExtTable the runtime hands out. System info, status
// strings, the agent attributes both runtimes answer alike and the table
// layout are shared with HSA-on-CUDA (testing/hsa-runtime/common).

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "hsa_sim_internal.h"

namespace hsa_sim::api {

namespace {

// What this runtime says about agent `index` (a CPU, or a GPU of ISA `isa`).
hsa_common::AgentDescription describe_agent(uint32_t index, const std::string& isa) {
  const bool gpu = is_gpu_index(index);
  hsa_common::AgentDescription agent;
  // ROCr names a GPU agent after its ISA's processor ("gfx942").
  const std::string processor = isa_processor(isa);
  agent.name = gpu ? (processor.empty() ? "gfx000" : processor) : "HSA Sim CPU";
  agent.vendor_name = gpu ? "AMD" : "CPU";
  agent.wavefront_size = gpu ? 64 : 0;
  agent.queues_max = gpu ? kQueuesMax : 0;
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

namespace {

// The queue and ISA attributes, answered as ROCr's GpuAgent / CpuAgent
// GetInfo do; false for any other attribute.
bool write_queue_or_isa_info(State& s, uint32_t index, uint32_t attribute, void* value) {
  const bool gpu = is_gpu_index(index);
  switch (attribute) {
    case HSA_AGENT_INFO_QUEUE_MIN_SIZE:
      write_value(value, gpu ? kQueueMinSize : uint32_t{0});
      return true;
    case HSA_AGENT_INFO_QUEUE_MAX_SIZE:
      write_value(value, gpu ? kQueueMaxSize : uint32_t{0});
      return true;
    case HSA_AGENT_INFO_QUEUE_TYPE:
      write_value(value, hsa_queue_type32_t{HSA_QUEUE_TYPE_MULTI});
      return true;
    case HSA_AGENT_INFO_ISA: {
      const std::string& isa = s.agent_isas[index];
      write_value(value, hsa_isa_t{isa.empty() ? 0 : isa_handle_locked(s, isa)});
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

hsa_status_t agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  std::string isa;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!agent_index_from_handle_locked(s, agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (write_queue_or_isa_info(s, index, static_cast<uint32_t>(attribute), value)) {
      return HSA_STATUS_SUCCESS;
    }
    isa = s.agent_isas[index];
    if (static_cast<uint32_t>(attribute) == kAgentInfoMemoryAvail) {
      // Newer ROCr (not the 5.2 headers): free bytes of the agent's local
      // memory. Only GPU agents own device pools here.
      if (!is_gpu_index(index) || !s.memory_avail_supported) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
      // Allocations in both device pools and vmem handles share it.
      write_value(value, uint64_t{kDevicePoolSize - device_bytes_live_locked(s, index)});
      return HSA_STATUS_SUCCESS;
    }
  }
  return hsa_common::write_agent_info(index, describe_agent(index, isa),
                                      static_cast<uint32_t>(attribute), value);
}

// ---- ISAs ---------------------------------------------------------------------

hsa_status_t agent_iterate_isas(hsa_agent_t agent, hsa_status_t (*callback)(hsa_isa_t, void*),
                                void* data) {
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_isa_t isa{0};
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    uint32_t index = 0;
    if (!agent_index_from_handle_locked(s, agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    // ROCr's CPU agent has no ISA: the walk calls nothing and succeeds.
    if (s.agent_isas[index].empty()) return HSA_STATUS_SUCCESS;
    isa.handle = isa_handle_locked(s, s.agent_isas[index]);
  }
  return callback(isa, data);
}

hsa_status_t isa_get_info_alt(hsa_isa_t isa, hsa_isa_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::string name;
  {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    uint32_t payload = 0;
    if (!decode_handle(isa.handle, HandleTag::kIsa, s.epoch, &payload) ||
        payload >= s.isa_names.size()) {
      return HSA_STATUS_ERROR_INVALID_ISA;
    }
    name = s.isa_names[payload];
  }
  switch (attribute) {
    case HSA_ISA_INFO_NAME_LENGTH:
      // ROCr's Isa::GetInfo counts the terminating NUL, and writes it.
      write_value(value, static_cast<uint32_t>(name.size() + 1));
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_NAME:
      std::memcpy(value, name.c_str(), name.size() + 1);
      return HSA_STATUS_SUCCESS;
    case HSA_ISA_INFO_WORKGROUP_MAX_SIZE:
      write_value(value, uint32_t{1024});
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

}  // namespace hsa_sim::api

// ---- ISAs (shared) --------------------------------------------------------------

uint64_t hsa_sim::isa_handle_locked(State& s, const std::string& name) {
  auto it = std::find(s.isa_names.begin(), s.isa_names.end(), name);
  if (it == s.isa_names.end()) it = s.isa_names.insert(s.isa_names.end(), name);
  return hsa_sim::make_handle(hsa_sim::HandleTag::kIsa, s.epoch, static_cast<uint32_t>(it - s.isa_names.begin()));
}

extern "C" bool hsa_sim_set_agent_isa(hsa_agent_t agent, const char* isa) {
  hsa_sim::State& s = hsa_sim::state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t index = 0;
  if (!hsa_sim::agent_index_from_handle_locked(s, agent, &index)) return false;
  s.agent_isas[index] = isa == nullptr ? std::string() : std::string(isa);
  return true;
}

// ---- tables -----------------------------------------------------------------

extern "C" void hsa_sim_fill_core_table(CoreApiTable* out) {
  if (!hsa_common::begin_table(out)) return;
#define HSA_SIM_SET_ENTRY(Table, field, function) out->field = hsa_sim::api::function;
  HSA_COMMON_RUNTIME_CORE_ENTRIES(HSA_SIM_SET_ENTRY)
  // ISAs, AQL queues and code-object loading (hsa_common_tables.h).
  HSA_COMMON_RUNTIME_AQL_CORE_ENTRIES(HSA_SIM_SET_ENTRY)
  // The loader and the queues produce the code-object and queue codes.
  hsa_common::fill_shared_core_entries<hsa_common::StatusCodes::kCoreAndCodeObject>(out);
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
