// hsa_cuda_tables.cpp: the CoreApiTable / AmdExtTable the runtime hands to a
// tool, filled as ROCr fills them: version.major_id = the table's major
// version, version.minor_id = sizeof(table) (what kernel-replay's table-size
// guard reads), version.step_id = the step version. Entries the runtime does
// not implement stay NULL. The table layout and the entry lists are shared
// with the sim (testing/hsa-runtime/common/hsa_common_tables.h).

#include "hsa_cuda_internal.h"

extern "C" void hsa_cuda_fill_core_table(CoreApiTable* out) {
  if (!hsa_common::begin_table(out)) return;
#define HSA_CUDA_SET_ENTRY(Table, field, function) out->field = hsa_cuda::api::function;
  HSA_COMMON_RUNTIME_CORE_ENTRIES(HSA_CUDA_SET_ENTRY)
  // ISAs, AQL queues and executables loaded through HSA, as the sim has them,
  // and the ISA and executable queries only this runtime answers.
  HSA_COMMON_RUNTIME_AQL_CORE_ENTRIES(HSA_CUDA_SET_ENTRY)
  HSA_CUDA_EXTRA_CORE_ENTRIES(HSA_CUDA_SET_ENTRY)
  // Module loading and lookup by name produce the code-object status codes.
  hsa_common::fill_shared_core_entries<hsa_common::StatusCodes::kCoreAndCodeObject>(out);
  hsa_cuda::fill_signal_core_entries(out);
}

extern "C" void hsa_cuda_fill_amd_ext_table(AmdExtTable* out) {
  if (!hsa_common::begin_table(out)) return;
  HSA_COMMON_RUNTIME_AMD_ENTRIES(HSA_CUDA_SET_ENTRY)
#undef HSA_CUDA_SET_ENTRY
  hsa_cuda::fill_signal_amd_entries(out);
}

extern "C" CoreApiTable* hsa_cuda_core_table(void) {
  return hsa_common::filled_once<CoreApiTable, hsa_cuda_fill_core_table>();
}

extern "C" AmdExtTable* hsa_cuda_amd_ext_table(void) {
  return hsa_common::filled_once<AmdExtTable, hsa_cuda_fill_amd_ext_table>();
}

extern "C" size_t hsa_cuda_core_table_size(void) { return sizeof(CoreApiTable); }

extern "C" size_t hsa_cuda_amd_ext_table_size(void) { return sizeof(AmdExtTable); }
