// hsa_common_app.cpp: the plain HSA names both runtimes export to
// applications, as trampolines through the live tables (hsa_common_app.h).
// Compiled into the CMake hsa_sim library (with hsa_sim_app.cpp) and into
// HSA-on-CUDA (with hsa_cuda_app.cpp); not into the Rust build of the sim,
// whose tests drive the tables directly.

#include "hsa_common_app.h"

#include <hsa/hsa_api_trace.h>

namespace {

CoreApiTable& core() { return *hsa_common::app_core_table(); }
AmdExtTable& amd_ext() { return *hsa_common::app_amd_ext_table(); }

}  // namespace

extern "C" {

// ---- runtime and agents ------------------------------------------------------

hsa_status_t hsa_init() { return core().hsa_init_fn(); }

hsa_status_t hsa_shut_down() { return core().hsa_shut_down_fn(); }

hsa_status_t hsa_status_string(hsa_status_t status, const char** status_string) {
  return core().hsa_status_string_fn(status, status_string);
}

hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void* data),
                                void* data) {
  return core().hsa_iterate_agents_fn(callback, data);
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  return core().hsa_agent_get_info_fn(agent, attribute, value);
}

// ---- memory: core API ----------------------------------------------------------

hsa_status_t hsa_memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  return core().hsa_memory_allocate_fn(region, size, ptr);
}

hsa_status_t hsa_memory_free(void* ptr) { return core().hsa_memory_free_fn(ptr); }

hsa_status_t hsa_memory_copy(void* dst, const void* src, size_t size) {
  return core().hsa_memory_copy_fn(dst, src, size);
}

// ---- memory: AMD extension -----------------------------------------------------

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

hsa_status_t hsa_executable_destroy(hsa_executable_t executable) {
  return core().hsa_executable_destroy_fn(executable);
}

hsa_status_t hsa_system_get_major_extension_table(uint16_t extension, uint16_t version_major,
                                                  size_t table_length, void* table) {
  return core().hsa_system_get_major_extension_table_fn(extension, version_major, table_length,
                                                        table);
}

hsa_status_t hsa_amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                                  void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                                  hsa_agent_t** accessible) {
  return amd_ext().hsa_amd_pointer_info_fn(ptr, info, alloc, num_agents_accessible, accessible);
}

}  // extern "C"
