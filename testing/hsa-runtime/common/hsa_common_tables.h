/* hsa_common_tables.h: the CoreApiTable / AmdExtTable both HSA runtimes of
 * this repository hand out, the sim (testing/hsa-runtime/host/hsa_sim_tables.cpp) and
 * HSA-on-CUDA (testing/hsa-runtime/cuda/hsa_cuda_tables.cpp).
 *
 * Both fill the tables as ROCr does (major_id = *_MAJOR_VERSION, minor_id =
 * sizeof(table), step_id = *_STEP_VERSION; entries not implemented NULL) and
 * implement the same set of entries. The entries each runtime implements
 * itself are listed once here, by table field and by the name of the
 * implementing function in the runtime's own `api` namespace: the runtime
 * declares them with HSA_COMMON_DECLARE_ENTRY (so each has exactly the type of
 * its field) and fills them with the same lists. The entries with a shared
 * implementation (system info, status strings, signals) come from
 * hsa_common.h and hsa_common_signals.h. A runtime adds its own extras
 * after these.
 */
#ifndef HSA_COMMON_TABLES_H
#define HSA_COMMON_TABLES_H

#include <cstring>
#include <type_traits>

#include <hsa/hsa_api_trace.h>

#include "hsa_common.h"

// ENTRY(Table, field, function) for every CoreApiTable entry a runtime
// implements in its own `api` namespace.
#define HSA_COMMON_RUNTIME_CORE_ENTRIES(ENTRY)                                         \
  ENTRY(CoreApiTable, hsa_init_fn, init)                                               \
  ENTRY(CoreApiTable, hsa_shut_down_fn, shut_down)                                     \
  ENTRY(CoreApiTable, hsa_iterate_agents_fn, iterate_agents)                           \
  ENTRY(CoreApiTable, hsa_agent_get_info_fn, agent_get_info)                           \
  ENTRY(CoreApiTable, hsa_agent_iterate_regions_fn, agent_iterate_regions)             \
  ENTRY(CoreApiTable, hsa_region_get_info_fn, region_get_info)                         \
  ENTRY(CoreApiTable, hsa_memory_allocate_fn, memory_allocate)                         \
  ENTRY(CoreApiTable, hsa_memory_free_fn, memory_free)                                 \
  ENTRY(CoreApiTable, hsa_memory_copy_fn, memory_copy)                                 \
  ENTRY(CoreApiTable, hsa_executable_destroy_fn, executable_destroy)                   \
  ENTRY(CoreApiTable, hsa_executable_symbol_get_info_fn, executable_symbol_get_info)   \
  ENTRY(CoreApiTable, hsa_executable_iterate_agent_symbols_fn,                         \
        executable_iterate_agent_symbols)                                               \
  ENTRY(CoreApiTable, hsa_system_get_major_extension_table_fn,                          \
        system_get_major_extension_table)

// The AQL queue and code-object entries both runtimes implement (the
// library runs its own kernels through them): ISAs, queues (every
// memory-order variant of an index operation shares one function, as the
// signal entries do), code-object readers and executables. The same fields
// in every generation's table (ROCm 5.2 to 7.2).
#define HSA_COMMON_RUNTIME_AQL_CORE_ENTRIES(ENTRY)                                       \
  ENTRY(CoreApiTable, hsa_agent_iterate_isas_fn, agent_iterate_isas)                     \
  ENTRY(CoreApiTable, hsa_isa_get_info_alt_fn, isa_get_info_alt)                         \
  ENTRY(CoreApiTable, hsa_queue_create_fn, queue_create)                                 \
  ENTRY(CoreApiTable, hsa_queue_destroy_fn, queue_destroy)                               \
  ENTRY(CoreApiTable, hsa_queue_inactivate_fn, queue_inactivate)                         \
  ENTRY(CoreApiTable, hsa_queue_load_read_index_relaxed_fn, queue_load_read_index)       \
  ENTRY(CoreApiTable, hsa_queue_load_read_index_scacquire_fn, queue_load_read_index)     \
  ENTRY(CoreApiTable, hsa_queue_load_write_index_relaxed_fn, queue_load_write_index)     \
  ENTRY(CoreApiTable, hsa_queue_load_write_index_scacquire_fn, queue_load_write_index)   \
  ENTRY(CoreApiTable, hsa_queue_store_write_index_relaxed_fn, queue_store_write_index)   \
  ENTRY(CoreApiTable, hsa_queue_store_write_index_screlease_fn, queue_store_write_index) \
  ENTRY(CoreApiTable, hsa_queue_cas_write_index_relaxed_fn, queue_cas_write_index)       \
  ENTRY(CoreApiTable, hsa_queue_cas_write_index_scacquire_fn, queue_cas_write_index)     \
  ENTRY(CoreApiTable, hsa_queue_cas_write_index_screlease_fn, queue_cas_write_index)     \
  ENTRY(CoreApiTable, hsa_queue_cas_write_index_scacq_screl_fn, queue_cas_write_index)   \
  ENTRY(CoreApiTable, hsa_queue_add_write_index_relaxed_fn, queue_add_write_index)       \
  ENTRY(CoreApiTable, hsa_queue_add_write_index_scacquire_fn, queue_add_write_index)     \
  ENTRY(CoreApiTable, hsa_queue_add_write_index_screlease_fn, queue_add_write_index)     \
  ENTRY(CoreApiTable, hsa_queue_add_write_index_scacq_screl_fn, queue_add_write_index)   \
  ENTRY(CoreApiTable, hsa_queue_store_read_index_relaxed_fn, queue_store_read_index)     \
  ENTRY(CoreApiTable, hsa_queue_store_read_index_screlease_fn, queue_store_read_index)   \
  ENTRY(CoreApiTable, hsa_code_object_reader_create_from_memory_fn,                      \
        code_object_reader_create_from_memory)                                           \
  ENTRY(CoreApiTable, hsa_code_object_reader_destroy_fn, code_object_reader_destroy)     \
  ENTRY(CoreApiTable, hsa_executable_create_alt_fn, executable_create_alt)               \
  ENTRY(CoreApiTable, hsa_executable_load_agent_code_object_fn,                          \
        executable_load_agent_code_object)                                               \
  ENTRY(CoreApiTable, hsa_executable_freeze_fn, executable_freeze)                       \
  ENTRY(CoreApiTable, hsa_executable_get_symbol_by_name_fn, executable_get_symbol_by_name)

// ENTRY(Table, field, function) for every AmdExtTable entry a runtime
// implements in its own `api` namespace.
#define HSA_COMMON_RUNTIME_AMD_ENTRIES(ENTRY)                                                \
  ENTRY(AmdExtTable, hsa_amd_memory_pool_get_info_fn, amd_memory_pool_get_info)              \
  ENTRY(AmdExtTable, hsa_amd_agent_iterate_memory_pools_fn, amd_agent_iterate_memory_pools)  \
  ENTRY(AmdExtTable, hsa_amd_memory_pool_allocate_fn, amd_memory_pool_allocate)              \
  ENTRY(AmdExtTable, hsa_amd_memory_pool_free_fn, amd_memory_pool_free)                      \
  ENTRY(AmdExtTable, hsa_amd_agent_memory_pool_get_info_fn, amd_agent_memory_pool_get_info)  \
  ENTRY(AmdExtTable, hsa_amd_agents_allow_access_fn, amd_agents_allow_access)                \
  ENTRY(AmdExtTable, hsa_amd_pointer_info_fn, amd_pointer_info)                              \
  ENTRY(AmdExtTable, hsa_amd_pointer_info_set_userdata_fn, amd_pointer_info_set_userdata)    \
  ENTRY(AmdExtTable, hsa_amd_memory_async_copy_fn, amd_memory_async_copy)                    \
  ENTRY(AmdExtTable, hsa_amd_memory_async_copy_rect_fn, amd_memory_async_copy_rect)          \
  HSA_COMMON_RUNTIME_VMEM_AMD_ENTRIES(ENTRY)                                                 \
  HSA_COMMON_RUNTIME_VMEM_ALIGN_AMD_ENTRIES(ENTRY)

// The entries of the generations that have them (hsa_common.h): with 6.0+
// headers the copy on an engine and the vmem API, with 6.2+ headers the
// aligned reservation. As ROCr, neither runtime fills
// export/import_shareable_handle.
#if HSA_COMMON_HAVE_VMEM
#define HSA_COMMON_RUNTIME_VMEM_AMD_ENTRIES(ENTRY)                                              \
  ENTRY(AmdExtTable, hsa_amd_memory_async_copy_on_engine_fn, amd_memory_async_copy_on_engine) \
  ENTRY(AmdExtTable, hsa_amd_vmem_address_reserve_fn, amd_vmem_address_reserve)              \
  ENTRY(AmdExtTable, hsa_amd_vmem_address_free_fn, amd_vmem_address_free)                    \
  ENTRY(AmdExtTable, hsa_amd_vmem_handle_create_fn, amd_vmem_handle_create)                  \
  ENTRY(AmdExtTable, hsa_amd_vmem_handle_release_fn, amd_vmem_handle_release)                \
  ENTRY(AmdExtTable, hsa_amd_vmem_map_fn, amd_vmem_map)                                      \
  ENTRY(AmdExtTable, hsa_amd_vmem_unmap_fn, amd_vmem_unmap)                                  \
  ENTRY(AmdExtTable, hsa_amd_vmem_set_access_fn, amd_vmem_set_access)                        \
  ENTRY(AmdExtTable, hsa_amd_vmem_get_access_fn, amd_vmem_get_access)                        \
  ENTRY(AmdExtTable, hsa_amd_vmem_retain_alloc_handle_fn, amd_vmem_retain_alloc_handle)      \
  ENTRY(AmdExtTable, hsa_amd_vmem_get_alloc_properties_from_handle_fn,                       \
        amd_vmem_get_alloc_properties_from_handle)
#else
#define HSA_COMMON_RUNTIME_VMEM_AMD_ENTRIES(ENTRY)
#endif
#if HSA_COMMON_HAVE_VMEM_RESERVE_ALIGN
#define HSA_COMMON_RUNTIME_VMEM_ALIGN_AMD_ENTRIES(ENTRY) \
  ENTRY(AmdExtTable, hsa_amd_vmem_address_reserve_align_fn, amd_vmem_address_reserve_align)
#else
#define HSA_COMMON_RUNTIME_VMEM_ALIGN_AMD_ENTRIES(ENTRY)
#endif

// Declares `function` with exactly the type of Table::field (use inside the
// runtime's `api` namespace, with the lists above).
#define HSA_COMMON_DECLARE_ENTRY(Table, field, function) \
  std::remove_pointer_t<decltype(Table::field)> function;

namespace hsa_common {

// The version a runtime's table carries, as ROCr fills it.
template <typename Table>
struct TableVersion;
template <>
struct TableVersion<CoreApiTable> {
  static constexpr uint32_t kMajor = HSA_CORE_API_TABLE_MAJOR_VERSION;
  static constexpr uint32_t kStep = HSA_CORE_API_TABLE_STEP_VERSION;
};
template <>
struct TableVersion<AmdExtTable> {
  static constexpr uint32_t kMajor = HSA_AMD_EXT_API_TABLE_MAJOR_VERSION;
  static constexpr uint32_t kStep = HSA_AMD_EXT_API_TABLE_STEP_VERSION;
};

// Clears a table (every entry NULL) and sets its version as ROCr does:
// minor_id carries the table size for version checks. False for NULL.
template <typename Table>
bool begin_table(Table* out) {
  if (out == nullptr) return false;
  std::memset(out, 0, sizeof(*out));
  out->version.major_id = TableVersion<Table>::kMajor;
  out->version.minor_id = sizeof(Table);
  out->version.step_id = TableVersion<Table>::kStep;
  return true;
}

// The core entries with a shared implementation other than the signals.
template <StatusCodes Codes>
void fill_shared_core_entries(CoreApiTable* out) {
  out->hsa_system_get_info_fn = system_get_info;
  out->hsa_status_string_fn = status_string<Codes>;
}

// A runtime's own table: filled once by Fill on first use and never rewritten
// (a tool may have installed wrappers into it), never destroyed.
template <typename Table, void (*Fill)(Table*)>
Table* filled_once() {
  static Table* const table = [] {
    auto* t = new Table;
    Fill(t);
    return t;
  }();
  return table;
}

}  // namespace hsa_common

#endif /* HSA_COMMON_TABLES_H */
