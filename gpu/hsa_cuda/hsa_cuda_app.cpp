// hsa_cuda_app.cpp: the plain HSA names (<hsa/hsa.h>, <hsa/hsa_ext_amd.h>)
// for programs running on HSA-on-CUDA, as libhsa-runtime64 exports them:
// trampolines through the live tables. That is why a tool's wrappers,
// installed into the tables, see the application's calls: once kernel-replay
// is installed, hsa_amd_memory_pool_allocate goes through its wrapper. The
// tables are read at every call, never cached.
//
// The names the sim exports too (hsa_init, hsa_memory_allocate,
// hsa_amd_memory_pool_allocate, hsa_amd_pointer_info, ...) are the shared
// trampolines of c_tests/hsa_common/hsa_common_app.cpp, pointed at this
// runtime's tables by the hooks below. Defined here are the further names the
// harness calls, which the sim does not export. Nothing here is declared in
// hsa_cuda.h, the prototypes are the standard ones.

#include <hsa/hsa_api_trace.h>

#include "hsa_common_app.h"
#include "hsa_cuda.h"

CoreApiTable* hsa_common::app_core_table() { return hsa_cuda_core_table(); }

AmdExtTable* hsa_common::app_amd_ext_table() { return hsa_cuda_amd_ext_table(); }

namespace {

CoreApiTable& core() { return *hsa_common::app_core_table(); }
AmdExtTable& amd_ext() { return *hsa_common::app_amd_ext_table(); }

}  // namespace

extern "C" {

// ---- runtime, agents and regions ---------------------------------------------------

hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void* value) {
  return core().hsa_system_get_info_fn(attribute, value);
}

hsa_status_t hsa_agent_iterate_regions(hsa_agent_t agent,
                                       hsa_status_t (*callback)(hsa_region_t region, void* data),
                                       void* data) {
  return core().hsa_agent_iterate_regions_fn(agent, callback, data);
}

hsa_status_t hsa_region_get_info(hsa_region_t region, hsa_region_info_t attribute, void* value) {
  return core().hsa_region_get_info_fn(region, attribute, value);
}

// ---- memory: AMD extension --------------------------------------------------------

hsa_status_t hsa_amd_agent_iterate_memory_pools(
    hsa_agent_t agent, hsa_status_t (*callback)(hsa_amd_memory_pool_t memory_pool, void* data),
    void* data) {
  return amd_ext().hsa_amd_agent_iterate_memory_pools_fn(agent, callback, data);
}

hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
                                          hsa_amd_memory_pool_info_t attribute, void* value) {
  return amd_ext().hsa_amd_memory_pool_get_info_fn(memory_pool, attribute, value);
}

hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent,
                                                hsa_amd_memory_pool_t memory_pool,
                                                hsa_amd_agent_memory_pool_info_t attribute,
                                                void* value) {
  return amd_ext().hsa_amd_agent_memory_pool_get_info_fn(agent, memory_pool, attribute, value);
}

hsa_status_t hsa_amd_memory_async_copy(void* dst, hsa_agent_t dst_agent, const void* src,
                                       hsa_agent_t src_agent, size_t size,
                                       uint32_t num_dep_signals, const hsa_signal_t* dep_signals,
                                       hsa_signal_t completion_signal) {
  return amd_ext().hsa_amd_memory_async_copy_fn(dst, dst_agent, src, src_agent, size,
                                                num_dep_signals, dep_signals, completion_signal);
}

// ---- signals ---------------------------------------------------------------------------

hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value, uint32_t num_consumers,
                               const hsa_agent_t* consumers, hsa_signal_t* signal) {
  return core().hsa_signal_create_fn(initial_value, num_consumers, consumers, signal);
}

hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  return core().hsa_signal_destroy_fn(signal);
}

hsa_signal_value_t hsa_signal_load_scacquire(hsa_signal_t signal) {
  return core().hsa_signal_load_scacquire_fn(signal);
}

void hsa_signal_store_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  core().hsa_signal_store_screlease_fn(signal, value);
}

hsa_signal_value_t hsa_signal_wait_scacquire(hsa_signal_t signal,
                                             hsa_signal_condition_t condition,
                                             hsa_signal_value_t compare_value,
                                             uint64_t timeout_hint,
                                             hsa_wait_state_t wait_state_hint) {
  return core().hsa_signal_wait_scacquire_fn(signal, condition, compare_value, timeout_hint,
                                             wait_state_hint);
}

}  // extern "C"
