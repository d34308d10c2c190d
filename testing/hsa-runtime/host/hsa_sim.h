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

/* ---- ISAs, queues and the library's kernels ----------------------------- */

/* Sets the ISA an agent reports (hsa_agent_iterate_isas, HSA_AGENT_INFO_ISA,
 * hsa_isa_get_info_alt) and that a code object must suit to load on it, e.g.
 * "amdgcn-amd-amdhsa--gfx1100"; its processor also becomes a GPU's
 * HSA_AGENT_INFO_NAME. NULL: the agent has no ISA (as ROCr's CPU agent).
 * After reset every GPU reports "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
 * and the CPU none. False for an unknown agent. */
bool hsa_sim_set_agent_isa(hsa_agent_t agent, const char* isa);
/* Kernel dispatches that ran, by kernel name (with or without ".kd"; NULL:
 * all kernels), since reset. A dispatch refused or faulted does not count. */
uint64_t hsa_sim_dispatch_count(const char* kernel);
/* AQL queues created and not destroyed (reset destroys them all). */
uint64_t hsa_sim_live_queue_count(void);

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
 * (0xA015, uint64_t: free bytes of a GPU's device memory: 16 GiB less what
 * its device pools and vmem handles hold, see "Device memory" below), as
 * ROCr releases after 5.2 do; false models an older runtime
 * (INVALID_ARGUMENT). On after reset. */
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
 * with HSA_STATUS_ERROR and copy nothing; a dispatch that would move host
 * memory there faults. Up to 16 addresses; NULL clears all. */
void hsa_sim_fail_h2d_copy_into(const void* device_addr);
/* Every copy whose destination range contains addr fails, whatever its
 * direction: hsa_memory_copy with HSA_STATUS_ERROR; an asynchronous copy
 * (linear, on an engine, or a rect copy one of whose rows contains addr) is
 * accepted and then fails while executing (nothing copied, completion
 * signal set to -1, as ROCr reports a failed copy). Up to 16 addresses; NULL
 * clears all. A kernel dispatch that would write there faults instead
 * (HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION, nothing run), as a GPU
 * faults on a bad page. */
void hsa_sim_fail_copies_into(const void* addr);
/* The same for copies whose source range contains addr (a failing read, e.g.
 * a snapshot's capture of that region), and dispatches that would read it. */
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

/* The next count hsa_queue_create calls that pass their argument checks
 * fail with HSA_STATUS_ERROR_OUT_OF_RESOURCES. */
void hsa_sim_fail_next_queue_creations(uint32_t count);
/* The next count hsa_executable_load_agent_code_object calls whose code
 * object would load fail with HSA_STATUS_ERROR_OUT_OF_RESOURCES (as a failed
 * segment allocation), loading nothing. */
void hsa_sim_fail_next_code_object_loads(uint32_t count);
/* The next count kernel dispatches of a known kernel fault before running:
 * nothing is touched, the queue is suspended and its error callback gets
 * HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION (see "AQL queues" below); not
 * counted as a copy violation. */
void hsa_sim_fault_next_dispatches(uint32_t count);

/* The n-th asynchronous copy (hsa_amd_memory_async_copy, _on_engine or
 * _rect) counted from this call (1 = the next) is refused at submission with
 * HSA_STATUS_ERROR_OUT_OF_RESOURCES: nothing is copied and its completion
 * signal is not touched. 0 disarms. */
void hsa_sim_fail_nth_async_copy(uint64_t n);
/* The n-th accepted asynchronous copy (of the three kinds) counted from this
 * call (1 = the next) fails while executing: nothing is copied and its
 * completion signal is set to -1, the way ROCr reports an error during a
 * copy. 0 disarms. */
void hsa_sim_fail_nth_async_copy_completion(uint64_t n);

/* ---- virtual memory (hsa_amd_vmem_*, ROCm 6.0+ headers) ------------------ */

/* Whether the runtime implements the vmem API (hsa_amd_vmem_*) and
 * hsa_amd_memory_async_copy_on_engine: true when it was compiled against
 * ROCm 6.0 or later headers, false against 5.2 (which declare neither; the
 * table entries then do not exist). The functions below exist either way;
 * without vmem they count nothing. */
bool hsa_sim_vmem_supported(void);
/* Mappings made by hsa_amd_vmem_map and not yet unmapped. */
uint64_t hsa_sim_vmem_mapping_count(void);
/* Handles made by hsa_amd_vmem_handle_create that still exist: not yet
 * released (every retain needs its own release), or released but still
 * mapped somewhere. */
uint64_t hsa_sim_vmem_handle_count(void);
/* Reservations made by hsa_amd_vmem_address_reserve(_align) and not freed. */
uint64_t hsa_sim_vmem_reservation_count(void);

typedef enum hsa_sim_vmem_op_t {
  HSA_SIM_VMEM_HANDLE_CREATE = 0,  /* fails with HSA_STATUS_ERROR_OUT_OF_RESOURCES */
  HSA_SIM_VMEM_HANDLE_RELEASE = 1, /* the others with HSA_STATUS_ERROR */
  HSA_SIM_VMEM_MAP = 2,
  HSA_SIM_VMEM_UNMAP = 3,
  HSA_SIM_VMEM_SET_ACCESS = 4
} hsa_sim_vmem_op_t;
/* The n-th call of that operation counted from this call (1 = the next one)
 * that passes its argument checks fails, changing nothing: handle_create
 * with HSA_STATUS_ERROR_OUT_OF_RESOURCES, the others with HSA_STATUS_ERROR.
 * 0 disarms; each operation has its own counter; reset disarms all. */
void hsa_sim_fail_nth_vmem(hsa_sim_vmem_op_t op, uint64_t n);

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
 * touched unmapped host memory, ran past the end of a noted host block
 * (hsa_sim_note_host_block), or touched a vmem reservation other than
 * inside one mapping some agent may access that way (see the vmem notes).
 * Such a copy copies nothing. */
uint64_t hsa_sim_copy_violations(void);
/* Live allocations (pool + region), not counting executable storage. */
uint64_t hsa_sim_live_allocation_count(void);
/* True while every quarantined block still holds only the poison byte, i.e.
 * nothing wrote freed memory behind the runtime's back. */
bool hsa_sim_quarantine_intact(void);
/* The poison byte freed memory is filled with. */
#define HSA_SIM_POISON_BYTE 0xDD

/* Asynchronous copies accepted since reset (hsa_amd_memory_async_copy,
 * hsa_amd_memory_async_copy_on_engine and hsa_amd_memory_async_copy_rect;
 * refused submissions and empty ones excluded). Their copies also count in
 * hsa_sim_copy_count, by direction, when they execute (a rect copy once). */
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
 * they survive hsa_sim_reset, so compare before/after values. A queue's
 * doorbell signal is the runtime's, not counted. */
uint64_t hsa_sim_live_signal_count(void);
/* Handlers registered with hsa_amd_signal_async_handler that have not ended
 * (one running counts until it returns; one whose signal was destroyed does
 * not). Like signals they survive hsa_sim_reset. */
uint64_t hsa_sim_signal_handler_count(void);
/* Signal operations (load, store, wait, atomics, async-copy dependency or
 * completion) on a signal that does not exist, since reset. Such a load or
 * wait returns 0 and such a store does nothing. */
uint64_t hsa_sim_invalid_signal_uses(void);

/* ---- behaviour notes -------------------------------------------------------
 *
 * ISAs, as ROCr: a GPU agent iterates one ISA (hsa_agent_iterate_isas), the
 * CPU agent none (the walk succeeds without a callback; HSA_AGENT_INFO_ISA
 * is handle 0). hsa_isa_get_info_alt answers NAME_LENGTH (with the
 * terminating NUL, as ROCr counts it), NAME (NUL-terminated) and
 * WORKGROUP_MAX_SIZE (1024); an unknown ISA handle is INVALID_ISA, other
 * attributes INVALID_ARGUMENT. One handle per distinct ISA name.
 *
 * Code objects (ROCr's loader for code object v3 to v6): a reader only
 * remembers the caller's memory (NULL or size 0 INVALID_ARGUMENT; destroy of
 * an unknown reader INVALID_CODE_OBJECT_READER). hsa_executable_create_alt
 * checks profile, rounding mode and the out pointer (INVALID_ARGUMENT); the
 * executable is listed by the loader's iterator like any other.
 * hsa_executable_load_agent_code_object: an unknown executable
 * INVALID_EXECUTABLE, an unknown reader INVALID_CODE_OBJECT_READER, a frozen
 * executable FROZEN_EXECUTABLE; then the bytes must be an AMDGPU ELF (ELF64
 * little endian, EM_AMDGPU, OS ABI AMDGPU_HSA, ABI version v3-v6, ET_DYN,
 * consistent section and symbol tables, a known processor in e_flags), else
 * INVALID_CODE_OBJECT (malformed input is refused, never read past); its ISA
 * (processor, and sramecc/xnack where e_flags fixes them) must suit the
 * agent's (ROCr's Isa::IsCompatible), else INCOMPATIBLE_ARGUMENTS (also for
 * the CPU or an unknown agent, which support no ISA). Each STT_OBJECT
 * "name.kd" symbol of 64 bytes in .symtab or .dynsym becomes a kernel symbol
 * "name.kd" of that agent: KERNEL_OBJECT the address of a 64-byte-aligned
 * copy of its kernel descriptor (unique per loaded kernel), the group,
 * private and kernarg segment sizes from the descriptor (offsets 0, 4, 8).
 * hsa_executable_freeze: INVALID_EXECUTABLE, or FROZEN_EXECUTABLE the second
 * time. hsa_executable_get_symbol_by_name: NULL name or symbol
 * INVALID_ARGUMENT, unknown executable INVALID_EXECUTABLE; without an agent,
 * or with one that has no symbol of that name, INVALID_SYMBOL_NAME.
 *
 * AQL queues (ROCr's hsa_queue_create, GpuAgent::QueueCreate and AqlQueue):
 * NULL queue, a size 0 or not a power of two, or an unknown type
 * INVALID_ARGUMENT; an unknown agent INVALID_AGENT; the CPU agent
 * HSA_STATUS_ERROR (no packet processor); COOPERATIVE
 * INVALID_QUEUE_CREATION; more than 0x20000 packets (QUEUE_MAX_SIZE)
 * OUT_OF_RESOURCES; fewer than 0x40 (QUEUE_MIN_SIZE) INVALID_ARGUMENT; a
 * private segment size over 262128 (UINT32_MAX meaning the default)
 * OUT_OF_RESOURCES; past 128 live queues on the agent (QUEUES_MAX)
 * OUT_OF_RESOURCES. The queue: features KERNEL_DISPATCH, a ring of
 * INVALID-headed packets, a doorbell signal the runtime owns. Each queue has
 * a packet-processor thread: after the doorbell is rung with a packet index
 * (store the index of the last packet written, as HIP does), it runs the
 * packets from the read index up to the highest index rung, each once its
 * header type is not INVALID; a packet then gets its header set back to
 * INVALID, the read index passes it and its completion signal (if any) is
 * decremented. KERNEL_DISPATCH runs a kernel; BARRIER_AND waits for every
 * dependency to read 0, BARRIER_OR for one; fences and the barrier bit hold
 * trivially. Any other type fails with INVALID_PACKET_FORMAT.
 * A kernel dispatch, in order: 0 dimensions INCOMPATIBLE_ARGUMENTS; a
 * workgroup of 0 or more than 1024 work-items INVALID_ARGUMENT; a
 * kernel_object that is no kernel loaded for the queue's agent (or whose
 * executable was destroyed) INVALID_CODE_OBJECT; an injected fault
 * (hsa_sim_fault_next_dispatches) MEMORY_APERTURE_VIOLATION; a shape other
 * than the library's kernels need (workgroup KR_WORKGROUP x 1 x 1, grid a
 * multiple of it x 1 x 1) INVALID_ARGUMENT (a GPU would run it and compute
 * garbage); a kernel other than kr_scatter_copy, kr_hash_blocks and
 * kr_compare_copy INVALID_CODE_OBJECT (only those have a host build). Then
 * every range the kernel will touch (the kernarg, the records / blocks /
 * pairs array, each record's ranges, keys, hashes, changed; see
 * kernels/replay_kernels.h) must pass the copy engine's checks (live, in
 * bounds, not freed, vmem permissions) and be reachable by the queue's GPU
 * (owned by it, granted with hsa_amd_agents_allow_access, or a vmem
 * permission for the access: kernels always get the strict check, as a
 * kernel's accesses go through that GPU's page tables; system memory from
 * the kernarg pool needs allow_access too, as in ROCr). A failure there is
 * one copy violation (hsa_sim_copy_violations) and
 * MEMORY_APERTURE_VIOLATION, with nothing touched. Otherwise the kernel runs
 * on the CPU (kr_host_dispatch, over grid / KR_WORKGROUP workgroups) under
 * the runtime's lock, on the copy engine's addresses, and counts in
 * hsa_sim_dispatch_count. A failure of any kind is what ROCr does with a
 * queue error: the queue is suspended (no further packet runs; the failed
 * packet's completion signal is never decremented, its read index not
 * advanced), then the queue's error callback is called, on the processor
 * thread, with the status; without a callback, ROCr's default handler
 * prints "Queue at %p inactivated due to async error" and aborts the
 * process unless HSA_ENABLE_QUEUE_FAULT_MESSAGE is "0". The callback may
 * destroy its queue. hsa_queue_inactivate stops processing too.
 * hsa_queue_destroy: NULL INVALID_ARGUMENT, not a live queue INVALID_QUEUE;
 * it waits for the packet in progress. Index operations on a pointer that
 * is no live queue do nothing (loads return 0). hsa_sim_reset stops and
 * retires every queue (the memory of a retired queue and its ring stays, so
 * a stale pointer is harmless; its doorbell signal is destroyed).
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
 * Device memory: each GPU has 16 GiB (what its pools report as SIZE and
 * ALLOC_MAX_SIZE), shared by its coarse and fine pools and its vmem handles.
 * An allocation in a device pool (hsa_amd_memory_pool_allocate or
 * hsa_memory_allocate) or a vmem handle that would take the GPU's live
 * bytes (allocations' granule-rounded sizes plus handles' sizes, what
 * HSA_AMD_AGENT_INFO_MEMORY_AVAIL subtracts) past 16 GiB is
 * HSA_STATUS_ERROR_OUT_OF_RESOURCES; a single request larger than 16 GiB is
 * INVALID_ALLOCATION, as ROCr answers a size over ALLOC_MAX_SIZE. Freed
 * (quarantined) blocks and executables' variable storage do not count.
 * System pools are bounded per request only (64 GiB). Memory is committed
 * only when touched, so filling a device costs nothing.
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
 * hsa_amd_memory_async_copy_on_engine (6.0+ headers) is
 * hsa_amd_memory_async_copy with the same checks, faults and queue, plus
 * hsa_common::check_copy_engine after the size-0 answer: engine_id must be a
 * single HSA_AMD_SDMA_ENGINE_* bit among the first 8 (each GPU here has 2
 * SDMA and 6 xGMI SDMA engines, as an MI250X GCD) else INVALID_ARGUMENT, and
 * a copy between two CPU agents is HSA_STATUS_ERROR (no engine);
 * force_copy_on_sdma is ignored. The engine changes nothing else.
 *
 * hsa_amd_memory_async_copy_rect copies a box (range.x bytes by range.y rows
 * by range.z layers) between pitched buffers, with ROCr's checks
 * (hsa_common::check_async_copy_rect: dir hsaHostToHost or unknown
 * INVALID_ARGUMENT, a copy_agent that is not a GPU INVALID_AGENT, a zero
 * range component SUCCESS with nothing done, bases/pitches/slices not
 * multiples of 4, a row wider than a pitch, more rows than slice / pitch, or
 * several layers without a slice INVALID_ARGUMENT; a NULL base is a counted
 * violation and INVALID_ARGUMENT). dir is not compared with the memory.
 * Accepted, it is queued like an async copy (same worker, submission order,
 * dependencies, completion signal, fault injection). At execution every row
 * is checked as a copy of range.x bytes; if any is a violation the whole
 * copy is one violation and nothing is copied. Direction: the first row's.
 * In strict async access mode copy_agent must reach every row.
 *
 * Virtual memory (hsa_amd_vmem_*, 6.0+ headers), following ROCr
 * (runtime.cpp, VMemory*) and each generation's header:
 *   address_reserve(_align): va NULL or size 0 / not a multiple of the page
 *     size INVALID_ARGUMENT; alignment (reserve_align, 6.2+ headers) 0 = the
 *     page size, else a power of two >= the page size, else
 *     INVALID_ARGUMENT. The range is PROT_NONE anonymous memory; the address
 *     is honoured when free and suitably aligned, else ignored. flags are
 *     ignored.
 *   address_free: va NULL or size 0 INVALID_ARGUMENT; va not a reservation's
 *     start INVALID_ALLOCATION; size not its size INVALID_ARGUMENT; a mapping
 *     inside HSA_STATUS_ERROR_RESOURCE_FREE.
 *   handle_create: size 0, a type other than MEMORY_TYPE_NONE/PINNED, an
 *     unknown pool, a system pool (ROCr backs handles with VRAM only) or a
 *     size not a multiple of 4096: INVALID_ARGUMENT; NULL handle pointer
 *     INVALID_ARGUMENT; over 16 GiB INVALID_ALLOCATION; past the GPU's free
 *     device memory OUT_OF_RESOURCES. The memory is a zero-filled memfd of
 *     size bytes; flags are ignored.
 *   handle_release: unknown or already released handle INVALID_ALLOCATION.
 *     A mapped handle may be released; its memory lives (and counts) until
 *     the last unmap. retain_alloc_handle(&h, va): va must be a mapping's
 *     start (INVALID_ALLOCATION); the handle is referenced again and needs a
 *     release of its own.
 *   map(va, size, offset, handle, flags): va NULL or size 0 INVALID_ARGUMENT;
 *     [va, va + size) not inside one reservation, overlapping a mapping, or
 *     va / size not page-aligned: INVALID_ARGUMENT; unknown handle
 *     INVALID_ARGUMENT; size larger than the handle OUT_OF_RESOURCES (ROCr's
 *     dma-buf export of size bytes fails). in_offset and flags are ignored
 *     (offset 0). The handle's first size bytes appear at va MAP_SHARED with
 *     PROT_NONE: no agent has access yet. One handle mapped at two addresses
 *     shows the same bytes at both.
 *   unmap: va NULL or size 0 INVALID_ARGUMENT; va not a mapping's start
 *     INVALID_ALLOCATION; size not its size INVALID_ARGUMENT. The range goes
 *     back to PROT_NONE reserved memory; the handle keeps its bytes.
 *   set_access(va, size, desc, count): va or desc NULL or count 0
 *     INVALID_ARGUMENT; an unknown agent in desc INVALID_AGENT and an
 *     unknown permission value INVALID_ARGUMENT (all checked before anything
 *     changes). Then per generation (HSA_COMMON_VMEM_SET_ACCESS_MERGES in
 *     hsa_common.h):
 *       6.0 - 6.2 headers: (va, size) must be exactly one mapping, else
 *         INVALID_ALLOCATION; the listed agents get their permission and
 *         every other agent loses its access (replace);
 *       6.4+ headers: size 0 INVALID_ARGUMENT; [va, va + size) must lie in
 *         one reservation (INVALID_ARGUMENT) and be covered by contiguous
 *         mappings found by their exact starts from va (a gap
 *         INVALID_ALLOCATION); the listed agents get their permission on
 *         each, the others keep theirs (merge).
 *     The CPU agent's permission is the user view's protection (mprotect:
 *     RW, RO, WO as PROT_WRITE, NONE); GPU permissions are records the copy
 *     checks read.
 *   get_access(va, perms, agent): va or perms NULL INVALID_ARGUMENT; va not
 *     inside a mapping INVALID_ALLOCATION; agent not a GPU (the CPU
 *     included) INVALID_AGENT; an agent never given access: 6.0 - 6.2
 *     headers INVALID_ALLOCATION, 6.4+ NONE.
 *   get_alloc_properties_from_handle: NULL outputs INVALID_ARGUMENT, unknown
 *     handle INVALID_ALLOCATION; else the pool and the memory type.
 *   export/import_shareable_handle are not implemented (NULL entries).
 * Copies (hsa_memory_copy and the three async copies) treat a range that
 * meets a reservation as device memory only when it lies inside one mapping
 * and some agent may access that mapping: READ_WRITE or WRITE_ONLY for a
 * destination, READ_ONLY or READ_WRITE for a source (in strict async access
 * mode: the copying agent). Anything else touching a reservation (reserved
 * but unmapped memory, two mappings, a mapping nobody may access that way)
 * is a counted violation and copies nothing. The engine copies through the
 * handle's own memory, so the CPU view's protection never faults it.
 * hsa_amd_pointer_info on an address in a reservation:
 *   6.x headers (as ROCr 6.x passes the thunk's reservation object through):
 *     type 5 (RESERVED_ADDR, mapped or not), agentBaseAddress = the
 *     reservation's start, hostBaseAddress NULL, sizeInBytes = its size,
 *     agentOwner = the CPU agent, global_flags FINE_GRAINED, userData NULL,
 *     no accessible agents (alloc(0) is still called, as ROCr does);
 *   7.x headers (ROCr's VMemoryPtrInfo): a mapped address is
 *     HSA_EXT_POINTER_TYPE_HSA_VMEM with both base addresses = the queried
 *     pointer, sizeInBytes = the mapping's size, agentOwner = the handle's
 *     GPU, global_flags 0, registered true, and as accessible agents those
 *     whose permission is not NONE (alloc is not called for none: the list
 *     is NULL, the count 0); a reserved but unmapped address is
 *     RESERVED_ADDR with agentBaseAddress NULL, hostBaseAddress = the
 *     reservation's start, its size, no owner, flags 0, registered true, and
 *     a count of 0.
 *   hsa_amd_pointer_info_set_userdata and hsa_amd_agents_allow_access do not
 *     know vmem addresses (INVALID_ARGUMENT / HSA_STATUS_ERROR).
 * hsa_sim_reset releases every reservation, mapping and handle.
 *
 * hsa_amd_signal_async_handler (shared with HSA-on-CUDA,
 * hsa_common::SignalTable::async_handler): a NULL handler INVALID_ARGUMENT,
 * an unknown signal INVALID_SIGNAL; one background thread (started by the
 * first registration, never joined, so exiting with handlers armed is fine)
 * calls handler(value, arg) once the condition holds and re-arms it while it
 * returns true; handlers run one at a time, without any runtime lock. A
 * signal destroyed while a handler is armed on it drops the handler uncalled.
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
 *     hsa_agent_iterate_isas, hsa_isa_get_info_alt, hsa_queue_create,
 *     hsa_queue_destroy, hsa_queue_inactivate, every hsa_queue_load/store/
 *     cas/add read- and write-index variant,
 *     hsa_code_object_reader_create_from_memory / _destroy,
 *     hsa_executable_create_alt, hsa_executable_load_agent_code_object,
 *     hsa_executable_freeze, hsa_executable_get_symbol_by_name,
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
 *     hsa_amd_memory_async_copy, hsa_amd_memory_async_copy_rect,
 *     hsa_amd_signal_create, hsa_amd_signal_wait_any,
 *     hsa_amd_signal_async_handler; with 6.0+ headers also
 *     hsa_amd_memory_async_copy_on_engine, hsa_amd_vmem_address_reserve,
 *     hsa_amd_vmem_address_free, hsa_amd_vmem_handle_create,
 *     hsa_amd_vmem_handle_release, hsa_amd_vmem_map, hsa_amd_vmem_unmap,
 *     hsa_amd_vmem_set_access, hsa_amd_vmem_get_access,
 *     hsa_amd_vmem_retain_alloc_handle,
 *     hsa_amd_vmem_get_alloc_properties_from_handle, and with 6.2+ headers
 *     hsa_amd_vmem_address_reserve_align.
 */

#ifdef __cplusplus
}
#endif

#endif /* HSA_SIM_H */
