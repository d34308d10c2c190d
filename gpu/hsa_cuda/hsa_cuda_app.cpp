// hsa_cuda_app.cpp: the plain HSA names (<hsa/hsa.h>, <hsa/hsa_ext_amd.h>)
// for programs running on HSA-on-CUDA, as libhsa-runtime64 exports them:
// trampolines through the live tables. That is why a tool's wrappers,
// installed into the tables, see the application's calls: once kernel-replay
// is installed, hsa_amd_memory_pool_allocate below goes through its wrapper.
// The tables are read at every call, never cached.
//
// Only the names the harness calls are defined; nothing here is declared in
// hsa_cuda.h, the prototypes are the standard ones.

#include <hsa/hsa_api_trace.h>

#include "hsa_cuda.h"

namespace {

CoreApiTable& core() { return *hsa_cuda_core_table(); }
AmdExtTable& amd_ext() { return *hsa_cuda_amd_ext_table(); }

}  // namespace

extern "C" {

// ---- runtime and agents --------------------------------------------------------

hsa_status_t hsa_init() { return core().hsa_init_fn(); }

hsa_status_t hsa_shut_down() { return core().hsa_shut_down_fn(); }

hsa_status_t hsa_status_string(hsa_status_t status, const char** status_string) {
  return core().hsa_status_string_fn(status, status_string);
}

hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void* value) {
  return core().hsa_system_get_info_fn(attribute, value);
}

hsa_status_t hsa_system_get_major_extension_table(uint16_t extension, uint16_t version_major,
                                                  size_t table_length, void* table) {
  return core().hsa_system_get_major_extension_table_fn(extension, version_major, table_length,
                                                        table);
}

hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void* data),
                                void* data) {
  return core().hsa_iterate_agents_fn(callback, data);
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  return core().hsa_agent_get_info_fn(agent, attribute, value);
}

hsa_status_t hsa_agent_iterate_regions(hsa_agent_t agent,
                                       hsa_status_t (*callback)(hsa_region_t region, void* data),
                                       void* data) {
  return core().hsa_agent_iterate_regions_fn(agent, callback, data);
}

hsa_status_t hsa_region_get_info(hsa_region_t region, hsa_region_info_t attribute, void* value) {
  return core().hsa_region_get_info_fn(region, attribute, value);
}

hsa_status_t hsa_executable_destroy(hsa_executable_t executable) {
  return core().hsa_executable_destroy_fn(executable);
}

// ---- memory: core API -----------------------------------------------------------

hsa_status_t hsa_memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  return core().hsa_memory_allocate_fn(region, size, ptr);
}

hsa_status_t hsa_memory_free(void* ptr) { return core().hsa_memory_free_fn(ptr); }

hsa_status_t hsa_memory_copy(void* dst, const void* src, size_t size) {
  return core().hsa_memory_copy_fn(dst, src, size);
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

hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
                                          uint32_t flags, void** ptr) {
  return amd_ext().hsa_amd_memory_pool_allocate_fn(memory_pool, size, flags, ptr);
}

hsa_status_t hsa_amd_memory_pool_free(void* ptr) {
  return amd_ext().hsa_amd_memory_pool_free_fn(ptr);
}

hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                         const uint32_t* flags, const void* ptr) {
  return amd_ext().hsa_amd_agents_allow_access_fn(num_agents, agents, flags, ptr);
}

hsa_status_t hsa_amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                                  void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                                  hsa_agent_t** accessible) {
  return amd_ext().hsa_amd_pointer_info_fn(ptr, info, alloc, num_agents_accessible, accessible);
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
