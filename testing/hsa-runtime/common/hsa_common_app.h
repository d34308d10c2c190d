/* hsa_common_app.h: the plain HSA names an application calls (hsa_init,
 * hsa_memory_allocate, hsa_amd_memory_pool_allocate, ...), as trampolines
 * through a runtime's live tables, shared by the sim (testing/hsa-runtime/host/
 * hsa_sim_app.cpp, CMake build only) and HSA-on-CUDA (testing/hsa-runtime/cuda/
 * hsa_cuda_app.cpp).
 *
 * Why they exist: a runtime only hands out its CoreApiTable / AmdExtTable,
 * which a tool receives in OnLoad. An application, and any C program, calls
 * the plain names from <hsa/hsa.h> and <hsa/hsa_ext_amd.h> instead; C cannot
 * even name the tables (<hsa/hsa_api_trace.h> is C++). In ROCr those names
 * are exported trampolines of libhsa-runtime64 that call through the live
 * HsaApiTable, which is why a tool's wrappers installed into the table see
 * the application's calls. hsa_common_app.cpp does the same through the two
 * hooks below, which the runtime linked with it defines (exactly one runtime
 * per program). The tables are read at every call, never cached: a tool may
 * install its wrappers at any time, and must see every call made after that.
 *
 * hsa_common_app.cpp defines the names both runtimes export. HSA-on-CUDA
 * exports more (the ones its GPU harness calls: system info, regions, pool
 * queries, async copies, signals), defined in hsa_cuda_app.cpp; the sim's
 * library exports only the common set. Nothing here is declared in hsa_sim.h
 * or hsa_cuda.h: the prototypes are the standard ones.
 */
#ifndef HSA_COMMON_APP_H
#define HSA_COMMON_APP_H

struct CoreApiTable;
struct AmdExtTable;

namespace hsa_common {

// The live tables of the runtime the program is linked with: defined by that
// runtime (hsa_sim_app.cpp, hsa_cuda_app.cpp), never NULL.
CoreApiTable* app_core_table();
AmdExtTable* app_amd_ext_table();

}  // namespace hsa_common

#endif /* HSA_COMMON_APP_H */
