// hsa_cuda_app.cpp: the plain HSA names (<hsa/hsa.h>, <hsa/hsa_ext_amd.h>)
// for programs running on HSA-on-CUDA, as libhsa-runtime64 exports them:
// trampolines through the live tables. That is why a tool's wrappers,
// installed into the tables, see the application's calls: once kernel-replay
// is installed, hsa_amd_memory_pool_allocate goes through its wrapper. The
// tables are read at every call, never cached.
//
// The names the sim exports too (hsa_init, hsa_memory_allocate,
// hsa_amd_memory_pool_allocate, hsa_amd_pointer_info, ...) are the shared
// trampolines of testing/hsa-runtime/common/hsa_common_app.cpp, pointed at this
// runtime's tables by the hooks below. Defined here are the further names the
// harness calls, which the sim does not export: regions and pools, async
// copies (with 6.0+ headers on an engine too, and rect), the vmem API (6.0+
// headers), signals and async handlers. Nothing here is declared in
// hsa_cuda.h, the prototypes are the standard ones.

#include <hsa/hsa_api_trace.h>

#include "hsa_common.h"
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

hsa_status_t hsa_amd_memory_async_copy_rect(const hsa_pitched_ptr_t* dst,
                                            const hsa_dim3_t* dst_offset,
                                            const hsa_pitched_ptr_t* src,
                                            const hsa_dim3_t* src_offset, const hsa_dim3_t* range,
                                            hsa_agent_t copy_agent, hsa_amd_copy_direction_t dir,
                                            uint32_t num_dep_signals,
                                            const hsa_signal_t* dep_signals,
                                            hsa_signal_t completion_signal) {
  return amd_ext().hsa_amd_memory_async_copy_rect_fn(dst, dst_offset, src, src_offset, range,
                                                     copy_agent, dir, num_dep_signals,
                                                     dep_signals, completion_signal);
}

#if HSA_COMMON_HAVE_VMEM
hsa_status_t hsa_amd_memory_async_copy_on_engine(void* dst, hsa_agent_t dst_agent, const void* src,
                                                 hsa_agent_t src_agent, size_t size,
                                                 uint32_t num_dep_signals,
                                                 const hsa_signal_t* dep_signals,
                                                 hsa_signal_t completion_signal,
                                                 hsa_amd_sdma_engine_id_t engine_id,
                                                 bool force_copy_on_sdma) {
  return amd_ext().hsa_amd_memory_async_copy_on_engine_fn(
      dst, dst_agent, src, src_agent, size, num_dep_signals, dep_signals, completion_signal,
      engine_id, force_copy_on_sdma);
}

// ---- virtual memory (ROCm 6.0+ headers) --------------------------------------------------

hsa_status_t hsa_amd_vmem_address_reserve(void** va, size_t size, uint64_t address,
                                          uint64_t flags) {
  return amd_ext().hsa_amd_vmem_address_reserve_fn(va, size, address, flags);
}

#if HSA_COMMON_HAVE_VMEM_RESERVE_ALIGN
hsa_status_t hsa_amd_vmem_address_reserve_align(void** va, size_t size, uint64_t address,
                                                uint64_t alignment, uint64_t flags) {
  return amd_ext().hsa_amd_vmem_address_reserve_align_fn(va, size, address, alignment, flags);
}
#endif

hsa_status_t hsa_amd_vmem_address_free(void* va, size_t size) {
  return amd_ext().hsa_amd_vmem_address_free_fn(va, size);
}

hsa_status_t hsa_amd_vmem_handle_create(hsa_amd_memory_pool_t pool, size_t size,
                                        hsa_amd_memory_type_t type, uint64_t flags,
                                        hsa_amd_vmem_alloc_handle_t* memory_handle) {
  return amd_ext().hsa_amd_vmem_handle_create_fn(pool, size, type, flags, memory_handle);
}

hsa_status_t hsa_amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle) {
  return amd_ext().hsa_amd_vmem_handle_release_fn(memory_handle);
}

hsa_status_t hsa_amd_vmem_map(void* va, size_t size, size_t in_offset,
                              hsa_amd_vmem_alloc_handle_t memory_handle, uint64_t flags) {
  return amd_ext().hsa_amd_vmem_map_fn(va, size, in_offset, memory_handle, flags);
}

hsa_status_t hsa_amd_vmem_unmap(void* va, size_t size) {
  return amd_ext().hsa_amd_vmem_unmap_fn(va, size);
}

hsa_status_t hsa_amd_vmem_set_access(void* va, size_t size,
                                     const hsa_amd_memory_access_desc_t* desc, size_t desc_cnt) {
  return amd_ext().hsa_amd_vmem_set_access_fn(va, size, desc, desc_cnt);
}

hsa_status_t hsa_amd_vmem_get_access(void* va, hsa_access_permission_t* perms,
                                     hsa_agent_t agent_handle) {
  return amd_ext().hsa_amd_vmem_get_access_fn(va, perms, agent_handle);
}

hsa_status_t hsa_amd_vmem_retain_alloc_handle(hsa_amd_vmem_alloc_handle_t* memory_handle,
                                              void* addr) {
  return amd_ext().hsa_amd_vmem_retain_alloc_handle_fn(memory_handle, addr);
}

hsa_status_t hsa_amd_vmem_get_alloc_properties_from_handle(
    hsa_amd_vmem_alloc_handle_t memory_handle, hsa_amd_memory_pool_t* pool,
    hsa_amd_memory_type_t* type) {
  return amd_ext().hsa_amd_vmem_get_alloc_properties_from_handle_fn(memory_handle, pool, type);
}
#endif  // HSA_COMMON_HAVE_VMEM

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

hsa_status_t hsa_amd_signal_async_handler(hsa_signal_t signal, hsa_signal_condition_t cond,
                                          hsa_signal_value_t value,
                                          hsa_amd_signal_handler handler, void* arg) {
  return amd_ext().hsa_amd_signal_async_handler_fn(signal, cond, value, handler, arg);
}

void hsa_signal_subtract_screlease(hsa_signal_t signal, hsa_signal_value_t value) {
  core().hsa_signal_subtract_screlease_fn(signal, value);
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
