// hsa_cuda_tables.cpp: the CoreApiTable / AmdExtTable the runtime hands to a
// tool, filled as ROCr fills them: version.major_id = the table's major
// version, version.minor_id = sizeof(table) (what kernel-replay's table-size
// guard reads), version.step_id = the step version. Entries the runtime does
// not implement stay NULL.

#include <hsa/hsa_api_trace.h>

#include <cstring>

#include "hsa_cuda_internal.h"

extern "C" void hsa_cuda_fill_core_table(CoreApiTable* out) {
  using namespace hsa_cuda::api;
  if (out == nullptr) return;
  std::memset(out, 0, sizeof(*out));
  out->version.major_id = HSA_CORE_API_TABLE_MAJOR_VERSION;
  out->version.minor_id = sizeof(CoreApiTable);
  out->version.step_id = HSA_CORE_API_TABLE_STEP_VERSION;

  out->hsa_init_fn = init;
  out->hsa_shut_down_fn = shut_down;
  out->hsa_system_get_info_fn = system_get_info;
  out->hsa_system_get_major_extension_table_fn = system_get_major_extension_table;
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
  hsa_cuda::fill_signal_core_entries(out);
}

extern "C" void hsa_cuda_fill_amd_ext_table(AmdExtTable* out) {
  using namespace hsa_cuda::api;
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
  hsa_cuda::fill_signal_amd_entries(out);
}

extern "C" CoreApiTable* hsa_cuda_core_table(void) {
  // Filled once and never rewritten: a tool may have installed wrappers.
  static CoreApiTable* const table = [] {
    auto* t = new CoreApiTable;
    hsa_cuda_fill_core_table(t);
    return t;
  }();
  return table;
}

extern "C" AmdExtTable* hsa_cuda_amd_ext_table(void) {
  static AmdExtTable* const table = [] {
    auto* t = new AmdExtTable;
    hsa_cuda_fill_amd_ext_table(t);
    return t;
  }();
  return table;
}

extern "C" size_t hsa_cuda_core_table_size(void) { return sizeof(CoreApiTable); }

extern "C" size_t hsa_cuda_amd_ext_table_size(void) { return sizeof(AmdExtTable); }
