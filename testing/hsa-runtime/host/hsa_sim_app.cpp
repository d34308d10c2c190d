// hsa_sim_app.cpp: the ordinary HSA application API (hsa_memory_allocate,
// hsa_amd_memory_pool_allocate, ...) for programs running on the software
// HSA runtime: the trampolines of testing/hsa-runtime/common/hsa_common_app.cpp (see
// hsa_common_app.h for why they exist), pointed at hsa_sim_core_table() /
// hsa_sim_amd_ext_table(). Once kernel-replay is installed over the tables,
// every such call goes through its wrappers.
//
// Built into the CMake hsa_sim library only, with hsa_common_app.cpp. The
// Rust tests drive the tables directly (tests/common), and
// testing/hsa-runtime/rust/build.rs compiles its own fixed list of sources, which includes
// neither file.

#include "hsa_common_app.h"
#include "hsa_sim.h"

CoreApiTable* hsa_common::app_core_table() { return hsa_sim_core_table(); }

AmdExtTable* hsa_common::app_amd_ext_table() { return hsa_sim_amd_ext_table(); }
