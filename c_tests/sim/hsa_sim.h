/* hsa_sim.h: control interface of the software HSA runtime used by every test.
 *
 * No machine this project is tested on has an AMD GPU, so the tests run the
 * library against this runtime instead of ROCr. It fills the real
 * CoreApiTable / AmdExtTable from <hsa/hsa_api_trace.h> (version fields as
 * ROCr fills them) with entry points that follow ROCr's documented semantics,
 * keeps "device memory" in host memory, and adds what a test needs on top:
 * quarantined and poisoned frees, copy-bounds checking with a violation
 * counter, an address-reuse mode and fault injection.
 *
 * Everything here is process-global and thread-safe. hsa_sim_reset() brings
 * the runtime back to a fresh topology between tests; it never touches the
 * function pointers in the tables (a tool may have installed wrappers there).
 */
#ifndef HSA_SIM_H
#define HSA_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CoreApiTable;
struct AmdExtTable;

/* ---- topology --------------------------------------------------------- */

/* Pools (and the matching hsa_region_t) the runtime exposes, per agent kind.
 * GPU agents: DEVICE_COARSE (VRAM, coarse-grained), DEVICE_FINE (VRAM,
 * fine-grained). The CPU agent: SYSTEM_FINE, SYSTEM_KERNARG
 * (KERNARG_INIT | FINE_GRAINED, as ROCr's system kernarg pool),
 * SYSTEM_COARSE (coarse-grained system memory). */
typedef enum hsa_sim_pool_kind_t {
  HSA_SIM_POOL_DEVICE_COARSE = 0,
  HSA_SIM_POOL_DEVICE_FINE = 1,
  HSA_SIM_POOL_SYSTEM_FINE = 2,
  HSA_SIM_POOL_SYSTEM_KERNARG = 3,
  HSA_SIM_POOL_SYSTEM_COARSE = 4
} hsa_sim_pool_kind_t;

/* Frees every allocation and executable, clears faults, counters and modes,
 * and builds a topology of one CPU agent and gpu_count GPU agents. The tables
 * keep whatever function pointers they hold. Called implicitly with
 * gpu_count = 2 on first use. */
void hsa_sim_reset(uint32_t gpu_count);

/* Number of GPU agents in the current topology. */
uint32_t hsa_sim_gpu_count(void);

hsa_agent_t hsa_sim_cpu_agent(void);
/* index < gpu_count, else handle 0. */
hsa_agent_t hsa_sim_gpu_agent(uint32_t index);
/* The pool / region of that kind on that agent; handle 0 if the agent has none.
 * As in ROCr, a pool and the region of the same memory share one handle value.
 * The system kinds belong to the CPU agent only (a GPU still lists the system
 * regions in hsa_agent_iterate_regions, after its own, as ROCr does). */
hsa_amd_memory_pool_t hsa_sim_pool(hsa_agent_t agent, hsa_sim_pool_kind_t kind);
hsa_region_t hsa_sim_region(hsa_agent_t agent, hsa_sim_pool_kind_t kind);

/* ---- API tables ------------------------------------------------------- */

/* The runtime's own tables, filled once (major_id = *_MAJOR_VERSION,
 * minor_id = sizeof(table), step_id = *_STEP_VERSION), as ROCr passes them to
 * a tool's OnLoad. Entries the runtime does not implement are NULL. */
struct CoreApiTable* hsa_sim_core_table(void);
struct AmdExtTable* hsa_sim_amd_ext_table(void);
/* Write a fresh, un-wrapped copy of the tables into caller storage. */
void hsa_sim_fill_core_table(struct CoreApiTable* out);
void hsa_sim_fill_amd_ext_table(struct AmdExtTable* out);
/* sizeof(CoreApiTable) / sizeof(AmdExtTable), for callers that cannot
 * include the C++ <hsa/hsa_api_trace.h> but need storage for the fills. */
size_t hsa_sim_core_table_size(void);
size_t hsa_sim_amd_ext_table_size(void);
/* The table versions the HSA headers this runtime was compiled against
 * declare, straight from their macros (not from the tables): core major,
 * core step, AMD extension major, AMD extension step. */
void hsa_sim_header_table_versions(uint32_t out[4]);

/* ---- executables (the loader) ----------------------------------------- */

/* Add every symbol before the executable is first walked (before the first
 * snapshot that can see it): in HSA a loaded, frozen executable's symbols
 * never change, and the library's discovery cache relies on that. */
hsa_executable_t hsa_sim_executable_create(void);
/* Adds a variable symbol visible to agent; the runtime allocates size bytes of
 * zeroed device storage that lives until the executable is destroyed and
 * returns its address. is_constant marks a __constant__ variable. */
void* hsa_sim_executable_add_variable(hsa_executable_t exe, hsa_agent_t agent, const char* name,
                                      uint32_t size, bool is_constant);
/* Adds a variable symbol reporting exactly this address and size, with no
 * storage behind it (for zero-address, zero-size and oversized symbols). */
void hsa_sim_executable_add_variable_raw(hsa_executable_t exe, hsa_agent_t agent, const char* name,
                                         uint64_t address, uint32_t size);
void hsa_sim_executable_add_kernel(hsa_executable_t exe, hsa_agent_t agent, const char* name);
/* Unloads the executable; its variable storage is quarantined like a free. */
void hsa_sim_executable_destroy(hsa_executable_t exe);
/* Loader-style iterator, the shape of hsa_ven_amd_loader_iterate_executables:
 * calls callback for every loaded executable in load order; a callback status
 * other than HSA_STATUS_SUCCESS stops the walk and is returned. As ROCr's
 * loader, it holds the loader lock across the callbacks, and creating or
 * destroying an executable takes that lock: an executable reported to a
 * callback stays loaded until the callback returns (so a callback must not
 * create or destroy one; it may call any other entry). */
hsa_status_t hsa_sim_iterate_executables(hsa_status_t (*callback)(hsa_executable_t executable,
                                                                  void* data),
                                         void* data);

/* ---- modes ------------------------------------------------------------ */

/* Address reuse: an allocation first takes a quarantined block of the same
 * pool that is large enough (most recently freed first), so a freed address
 * comes back for a new allocation. Off after reset. */
void hsa_sim_set_address_reuse(bool enabled);

/* Strict async access: an asynchronous copy whose copying agent (the source
 * agent if it is a GPU, else the destination agent if it is a GPU, else the
 * CPU, as ROCr picks the engine) cannot directly access both buffers is a
 * violation, as the hsa_amd_memory_async_copy documentation requires and as
 * a DMA engine faults on unmapped memory. An agent can access a runtime block
 * if it owns it or was granted access (hsa_amd_agents_allow_access; system
 * memory from hsa_memory_allocate is granted to every GPU), and memory the
 * runtime does not own only if it is the CPU (hsa_amd_memory_lock is not
 * implemented). Off after reset. */
void hsa_sim_set_strict_async_access(bool enabled);

/* Whether hsa_agent_get_info answers HSA_AMD_AGENT_INFO_MEMORY_AVAIL
 * (0xA015, uint64_t: free bytes of a GPU's device memory), as ROCr releases
 * after 5.2 do; false models an older runtime (INVALID_ARGUMENT). On after
 * reset. */
void hsa_sim_set_memory_avail_supported(bool supported);

/* Host memory the test program owns, for the copy checks: a copy whose host
 * side starts inside a noted block must end inside it (else it is a
 * violation: nothing is copied), so an overrun of a host buffer is reported
 * instead of corrupting the heap. A test harness notes what its allocator
 * hands out and forgets it when freed. A host side outside every noted block
 * must be mapped memory. Not part of the topology: reset keeps them. */
void hsa_sim_note_host_block(const void* base, size_t size);
void hsa_sim_forget_host_block(const void* base);

/* ---- fault injection (all cleared by reset) ---------------------------- */

/* Every hsa_amd_pointer_info call returns HSA_STATUS_ERROR while set. */
void hsa_sim_fail_pointer_info(bool fail);
/* The n-th device-to-host hsa_memory_copy counted from this call (1 = the next
 * one) fails with HSA_STATUS_ERROR and copies nothing; 0 disarms. */
void hsa_sim_fail_nth_d2h_copy(uint64_t n);
/* Host-to-device copies whose destination range contains device_addr fail
 * with HSA_STATUS_ERROR and copy nothing. Up to 16 addresses; NULL clears all. */
void hsa_sim_fail_h2d_copy_into(const void* device_addr);
/* Every copy whose destination range contains addr fails, whatever its
 * direction: hsa_memory_copy with HSA_STATUS_ERROR; hsa_amd_memory_async_copy
 * is accepted and then fails while executing (nothing copied, completion
 * signal set to -1, as ROCr reports a failed copy). Up to 16 addresses; NULL
 * clears all. */
void hsa_sim_fail_copies_into(const void* addr);
/* The same for copies whose source range contains addr (a failing read, e.g.
 * a snapshot's capture of that region). */
void hsa_sim_fail_copies_from(const void* addr);
/* hsa_executable_iterate_agent_symbols on this executable returns
 * HSA_STATUS_ERROR_INVALID_EXECUTABLE without calling back, while refuse. */
void hsa_sim_refuse_symbol_walk(hsa_executable_t exe, bool refuse);
/* hsa_executable_symbol_get_info for this attribute returns
 * HSA_STATUS_ERROR_INVALID_ARGUMENT while fail. */
void hsa_sim_fail_symbol_query(hsa_executable_symbol_info_t attribute, bool fail);
/* The loader iterator returns HSA_STATUS_ERROR before any callback while fail. */
void hsa_sim_fail_executable_iteration(bool fail);
/* hsa_system_get_major_extension_table returns HSA_STATUS_ERROR for every
 * extension while fail, as a runtime without the AMD loader extension. */
void hsa_sim_fail_loader_extension(bool fail);
/* The next count allocations (pool or region) fail with
 * HSA_STATUS_ERROR_OUT_OF_RESOURCES. */
void hsa_sim_fail_next_allocations(uint32_t count);
/* The next count frees (pool or region) fail with HSA_STATUS_ERROR and free nothing. */
void hsa_sim_fail_next_frees(uint32_t count);

/* The n-th hsa_amd_memory_async_copy counted from this call (1 = the next)
 * is refused at submission with HSA_STATUS_ERROR_OUT_OF_RESOURCES: nothing is
 * copied and its completion signal is not touched. 0 disarms. */
void hsa_sim_fail_nth_async_copy(uint64_t n);
/* The n-th accepted hsa_amd_memory_async_copy counted from this call (1 = the
 * next) fails while executing: nothing is copied and its completion signal is
 * set to -1, the way ROCr reports an error during a copy. 0 disarms. */
void hsa_sim_fail_nth_async_copy_completion(uint64_t n);

/* ---- observation -------------------------------------------------------- */

typedef enum hsa_sim_copy_direction_t {
  HSA_SIM_COPY_HOST_TO_HOST = 0,
  HSA_SIM_COPY_HOST_TO_DEVICE = 1,
  HSA_SIM_COPY_DEVICE_TO_HOST = 2,
  HSA_SIM_COPY_DEVICE_TO_DEVICE = 3
} hsa_sim_copy_direction_t;

/* Copies (successful or injected-failed) per direction since reset. */
uint64_t hsa_sim_copy_count(hsa_sim_copy_direction_t direction);
/* Copies that touched freed (quarantined) memory, ran past the end of a live
 * allocation or variable, had a NULL side, touched the range of a variable
 * symbol with no storage behind it (hsa_sim_executable_add_variable_raw),
 * touched unmapped host memory, or ran past the end of a noted host block
 * (hsa_sim_note_host_block). Such a copy copies nothing. */
uint64_t hsa_sim_copy_violations(void);
/* Live allocations (pool + region), not counting executable storage. */
uint64_t hsa_sim_live_allocation_count(void);
/* True while every quarantined block still holds only the poison byte, i.e.
 * nothing wrote freed memory behind the runtime's back. */
bool hsa_sim_quarantine_intact(void);
/* The poison byte freed memory is filled with. */
#define HSA_SIM_POISON_BYTE 0xDD

/* hsa_amd_memory_async_copy calls accepted since reset (refused submissions
 * and size-0 calls excluded). Their copies also count in hsa_sim_copy_count,
 * by direction, when they execute. */
uint64_t hsa_sim_async_copy_count(void);
/* The flags given to hsa_amd_memory_pool_allocate for the live allocation at
 * base ptr (0 for hsa_memory_allocate); false when ptr is no such base. */
bool hsa_sim_allocation_flags(const void* ptr, uint32_t* flags);
/* hsa_amd_pointer_info calls since reset, failed ones included (to check
 * what a tool queries, e.g. that a flag filter runs before any query). */
uint64_t hsa_sim_pointer_info_count(void);
/* Bytes held in the quarantine (freed blocks not yet released). */
uint64_t hsa_sim_quarantined_bytes(void);
/* Signals created and not destroyed. Signals are not part of the topology:
 * they survive hsa_sim_reset, so compare before/after values. */
uint64_t hsa_sim_live_signal_count(void);
/* Signal operations (load, store, wait, atomics, async-copy dependency or
 * completion) on a signal that does not exist, since reset. Such a load or
 * wait returns 0 and such a store does nothing. */
uint64_t hsa_sim_invalid_signal_uses(void);

/* ---- behaviour notes -------------------------------------------------------
 *
 * Agent/pool access (HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS), as ROCr's
 * MemoryRegion::GetAgentPoolInfo computes it:
 *   owner agent -> its own pools              ALLOWED_BY_DEFAULT
 *   CPU         -> system pools               ALLOWED_BY_DEFAULT
 *   GPU         -> system pools (all three)   DISALLOWED_BY_DEFAULT
 *   CPU         -> device pools               DISALLOWED_BY_DEFAULT
 *   GPU         -> a peer GPU's pools         DISALLOWED_BY_DEFAULT
 * NEVER_ALLOWED does not occur (every pair of agents is linked, one hop).
 * ACCESSIBLE_BY_ALL is true exactly for the system pools.
 *
 * hsa_amd_pointer_info reports, for a pointer anywhere inside a live
 * allocation: type HSA, both base addresses = the base, sizeInBytes = the
 * granule-rounded size, agentOwner = the pool's agent, global_flags = the
 * pool's flags, and as accessible agents the owner followed by the agents
 * granted access (system memory from hsa_memory_allocate is mapped to every
 * GPU from the start, as in ROCr). A variable's storage reports its exact
 * size, the variable's agent and COARSE_GRAINED. Anything else: SUCCESS with
 * type UNKNOWN. The accessible list is produced only when alloc,
 * num_agents_accessible and accessible are all non-NULL.
 *
 * Frees: hsa_memory_free and hsa_amd_memory_pool_free are interchangeable,
 * as in ROCr. NULL is a successful no-op; anything but the base of a live
 * allocation (an interior pointer, a freed block, variable storage) is
 * HSA_STATUS_ERROR_INVALID_ALLOCATION. hsa_amd_agents_allow_access also wants
 * the exact base (else HSA_STATUS_ERROR, as ROCr) and a NULL flags argument;
 * grants accumulate.
 *
 * hsa_amd_memory_async_copy validates like ROCr (NULL dst/src: a violation
 * and INVALID_ARGUMENT; unknown agent: INVALID_AGENT; unknown dependency or
 * completion signal: INVALID_SIGNAL; size 0: SUCCESS without touching the
 * completion signal), then queues the copy for one background thread, which
 * runs copies in submission order. For each it waits until every dependency
 * signal reads 0, checks both ranges against the memory as it is then, copies
 * and subtracts 1 from the completion signal. A violation (a range freed or
 * out of bounds by then, or, in strict async access mode, a buffer the
 * copying agent cannot reach) copies nothing and is counted, but the
 * completion signal is still decremented so that a waiter does not hang.
 * hsa_sim_fail_h2d_copy_into also refuses matching asynchronous
 * host-to-device submissions, with HSA_STATUS_ERROR and the completion signal
 * untouched; hsa_sim_fail_nth_d2h_copy concerns hsa_memory_copy only.
 * hsa_sim_reset first waits for queued copies; one still blocked on a
 * dependency that is not 0 is dropped, its completion signal untouched.
 *
 * Signal waits (hsa_signal_wait_*, hsa_amd_signal_wait_any) honour the
 * timeout hint (in ticks of the 1 GHz system timestamp, i.e. nanoseconds) as
 * an upper bound. hsa_signal_wait_* returns the value that satisfied the
 * condition, or the current value on timeout; hsa_amd_signal_wait_any the
 * index of the first satisfied pair, or UINT32_MAX on timeout. Every memory
 * order variant is sequentially consistent.
 *
 * Entries the tables carry (the rest are NULL):
 *   core: hsa_init, hsa_shut_down (no-ops), hsa_system_get_info,
 *     hsa_iterate_agents, hsa_agent_get_info, hsa_agent_iterate_regions,
 *     hsa_region_get_info, hsa_memory_allocate, hsa_memory_free,
 *     hsa_memory_copy, hsa_signal_create/destroy, every hsa_signal_load/
 *     store/silent_store/wait/and/or/xor/add/subtract/exchange/cas variant,
 *     hsa_executable_destroy, hsa_executable_symbol_get_info,
 *     hsa_executable_iterate_agent_symbols, hsa_status_string,
 *     hsa_system_get_major_extension_table (the AMD loader extension, major
 *     version 1, as ROCr answers it: up to the 1.03 table, of which only
 *     hsa_ven_amd_loader_iterate_executables is filled, with
 *     hsa_sim_iterate_executables; another extension or major version is
 *     HSA_STATUS_ERROR, a NULL table or length 0 INVALID_ARGUMENT).
 *   amd: hsa_amd_agent_iterate_memory_pools, hsa_amd_memory_pool_get_info,
 *     hsa_amd_agent_memory_pool_get_info, hsa_amd_memory_pool_allocate,
 *     hsa_amd_memory_pool_free, hsa_amd_agents_allow_access,
 *     hsa_amd_pointer_info, hsa_amd_pointer_info_set_userdata,
 *     hsa_amd_memory_async_copy, hsa_amd_signal_create,
 *     hsa_amd_signal_wait_any.
 */

#ifdef __cplusplus
}
#endif

#endif /* HSA_SIM_H */
