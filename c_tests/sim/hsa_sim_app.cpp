// hsa_sim_app.cpp: the ordinary HSA application API (hsa_memory_allocate,
// hsa_amd_memory_pool_allocate, ...) for programs running on the software
// HSA runtime.
//
// Why it exists: the runtime only hands out its CoreApiTable / AmdExtTable,
// which a tool receives in OnLoad. An application, and any C program, calls
// the plain names from <hsa/hsa.h> and <hsa/hsa_ext_amd.h> instead; C cannot
// even name the tables (<hsa/hsa_api_trace.h> is C++). In ROCr those names
// are exported trampolines of libhsa-runtime64 that call through the live
// HsaApiTable, which is why a tool's wrappers installed into the table see
// the application's calls. These definitions do the same through
// hsa_sim_core_table() / hsa_sim_amd_ext_table(): once kernel-replay is
// installed over the tables, every call below goes through its wrappers.
//
// Built into the CMake hsa_sim library only. The Rust tests drive the
// tables directly (tests/common), and c_tests/sim/build.rs compiles its own
// fixed list of sources, which does not include this file. Nothing is
// declared in hsa_sim.h: the prototypes are the standard ones.

#include <hsa_api_trace.h>

#include "hsa_sim.h"

namespace {

// The tables are read at every call, never cached: a tool may install its
// wrappers at any time, and must see every call made after that.
CoreApiTable& core() { return *hsa_sim_core_table(); }
AmdExtTable& amd_ext() { return *hsa_sim_amd_ext_table(); }

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

hsa_status_t hsa_amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                                  void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                                  hsa_agent_t** accessible) {
  return amd_ext().hsa_amd_pointer_info_fn(ptr, info, alloc, num_agents_accessible, accessible);
}

}  // extern "C"
