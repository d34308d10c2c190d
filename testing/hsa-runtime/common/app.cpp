// app.cpp: the plain HSA names an application calls (hsa_init,
// hsa_memory_allocate, hsa_amd_memory_pool_allocate, ...), one trampoline
// per entry of hsa-sys/hsa_entries.def, through the runtime's live tables.
//
// A runtime only hands out its tables, which a tool receives in OnLoad; an
// application (and any C program: C cannot even name the tables) calls the
// plain names. In ROCr those are libhsa-runtime64's exports, trampolines
// through the live HsaApiTable, which is why a tool's wrappers installed
// into the table see the application's calls. The tables are read at every
// call, never cached: a tool may install its wrappers at any time.
//
// Compiled into the CMake libraries of the runtime (not into the Rust
// crate, whose tests drive the tables directly). The prototypes are the
// headers' own.

#include "runtime.h"

namespace {

template <typename Table>
Table& live();
template <>
CoreApiTable& live<CoreApiTable>() {
  return *hsa_rt_core_table();
}
template <>
AmdExtTable& live<AmdExtTable>() {
  return *hsa_rt_amd_ext_table();
}

}  // namespace

extern "C" {
#define HSA_ENTRY_VISIT(table, name, library, runtime, signature)          \
  HSA_ENTRY_RET(signature) hsa_##name(HSA_ENTRY_PARAMS(signature)) {        \
    return live<table>().hsa_##name##_fn(HSA_ENTRY_ARGS(signature));        \
  }
#include "hsa_entries.h"
}
