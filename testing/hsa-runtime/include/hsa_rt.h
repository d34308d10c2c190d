/* hsa_rt.h: control interface of the project's test HSA runtime.
 *
 * kernel-replay only ever sees HSA function tables. This runtime fills the
 * real CoreApiTable / AmdExtTable of <hsa/hsa_api_trace.h> (version fields as
 * ROCr fills them) with entry points that follow ROCr's documented semantics,
 * and adds what a test needs on top: copy checking with a violation counter,
 * quarantined frees, address reuse, fault injection and counters. One front
 * end (testing/hsa-runtime/common) implements every HSA semantic once; a
 * small backend interface does what needs real memory and a real engine:
 *
 *   host   (host/)  "device memory" is host memory, a kernel dispatch runs the
 *                   library's kernels on the CPU (kernels/replay_kernels.cu
 *                   built for the host), code objects are AMDGPU ELF. Every
 *                   test of the library runs on it: no machine here has a GPU.
 *   cuda   (cuda/)  the CUDA driver API (libcuda.so.1 loaded at run time, or
 *                   $HSA_RT_LIBCUDA: cuda/fake is a stand-in for CI): device
 *                   memory, copies on streams, CUDA modules, cuLaunchKernel.
 *                   kernel-replay runs unchanged on an NVIDIA GPU through it.
 *
 * A program links one backend (libhsa_rt_host / libhsa_rt_cuda, or the Rust
 * crate hsa-sim for the host). Everything here is thread-safe, except that
 * hsa_rt_reset / hsa_rt_shutdown must not race with other calls into the
 * runtime. The behaviour notes are at the end of this file.
 */
#ifndef HSA_RT_H
#define HSA_RT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

/* ---- what the HSA headers compiled against declare -------------------------------
 *
 * The runtime builds against every ROCm generation the project supports (5.2,
 * 6.1, 6.4, 7.2 headers), told apart by HSA_AMD_INTERFACE_VERSION: 5.2 = 1.0,
 * 6.0/6.1 = 1.4, 6.2/6.3 = 1.6, 6.4 = 1.7, 7.2 = 1.15. */
#define HSA_RT_INTERFACE_AT_LEAST(minor) \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > 1 || HSA_AMD_INTERFACE_VERSION_MINOR >= (minor))
/* ROCm 6.0: the vmem API and hsa_amd_memory_async_copy_on_engine. */
#define HSA_RT_HAVE_VMEM HSA_RT_INTERFACE_AT_LEAST(4)
/* ROCm 6.2: hsa_amd_vmem_address_reserve_align. */
#define HSA_RT_HAVE_VMEM_RESERVE_ALIGN HSA_RT_INTERFACE_AT_LEAST(6)
/* 6.4 headers (1.7): set_access merges (see "Virtual memory" below). The
 * boundary is the first interface version the merge can be told by: 6.2 and
 * 6.3 headers both say 1.6, so a 6.3 build gets the 6.0 - 6.2 rules. */
#define HSA_RT_VMEM_SET_ACCESS_MERGES HSA_RT_INTERFACE_AT_LEAST(7)
/* 7.x (1.12): HSA_EXT_POINTER_TYPE_HSA_VMEM; (1.13): pointer_info.registered. */
#define HSA_RT_HAVE_POINTER_TYPE_HSA_VMEM HSA_RT_INTERFACE_AT_LEAST(12)
#define HSA_RT_HAVE_POINTER_INFO_REGISTERED HSA_RT_INTERFACE_AT_LEAST(13)
/* ROCm 5.2: hsa_amd_pointer_info knows locked host memory (type LOCKED);
 * from 5.6 memory_lock goes through the SVM API, whose ranges it does not
 * know (UNKNOWN). The headers cannot name 5.6 itself: every interface
 * version after 5.2's 1.0 counts as the newer rule (the runtime builds
 * against 5.2 and 6.0+ headers). */
#define HSA_RT_POINTER_INFO_KNOWS_LOCKED (!HSA_RT_INTERFACE_AT_LEAST(1))
/* ROCm 6.0 (1.4 headers on): HSA_AMD_SYSTEM_INFO_XNACK_ENABLED (0x206). */
#define HSA_RT_HAVE_XNACK_ENABLED HSA_RT_INTERFACE_AT_LEAST(4)
/* ROCm 7.0 (1.10): hsa_amd_vmem_address_reserve(_align) takes
 * HSA_AMD_VMEM_ADDRESS_NO_REGISTER (managed memory of clr 7.x). */
#define HSA_RT_HAVE_VMEM_NO_REGISTER HSA_RT_INTERFACE_AT_LEAST(10)

/* hsa_agent_get_info attribute of newer ROCm (free device memory, uint64_t),
 * not in every header this builds against: HSA_AMD_AGENT_INFO_MEMORY_AVAIL. */
#define HSA_RT_AGENT_INFO_MEMORY_AVAIL 0xA015
/* The byte freed (quarantined) host-backend memory is filled with. */
#define HSA_RT_POISON_BYTE 0xDD

#ifdef __cplusplus
extern "C" {
#endif

struct CoreApiTable;
struct AmdExtTable;
struct cuda_driver_t;
struct CUctx_st;

/* ---- the runtime ---------------------------------------------------------------- */

typedef enum hsa_rt_backend_t { HSA_RT_BACKEND_HOST = 0, HSA_RT_BACKEND_CUDA = 1 } hsa_rt_backend_t;

typedef enum hsa_rt_init_status_t {
  HSA_RT_INIT_OK = 0,
  /* The CUDA driver library could not be loaded, or lacks an entry point. */
  HSA_RT_INIT_NO_DRIVER = 1,
  /* The driver loaded but reports no device. */
  HSA_RT_INIT_NO_DEVICE = 2,
  /* A device lacks unified addressing. */
  HSA_RT_INIT_UNSUPPORTED = 3,
  /* A driver call failed while setting up (hsa_rt_init_message says which). */
  HSA_RT_INIT_DRIVER_ERROR = 4
} hsa_rt_init_status_t;

/* The backend this program is linked with. */
hsa_rt_backend_t hsa_rt_backend(void);
/* Brings the runtime up if it is not: the host backend with two GPU agents,
 * the CUDA backend with every device. Idempotent once it succeeded. The host
 * backend does this on the first call into the runtime of a process. */
hsa_rt_init_status_t hsa_rt_init(void);
/* (Re)builds the runtime with gpu_count GPU agents (CUDA: the first
 * min(gpu_count, devices), at least one; the primary contexts stay retained):
 * waits for queued asynchronous copies (dropping those blocked on a
 * dependency that is not 0, their completion signal untouched), stops and
 * retires every AQL queue, frees every allocation, executable and vmem
 * object, clears faults, counters and modes, and starts a new epoch: every
 * handle given out before is unknown afterwards. Signals and armed async
 * handlers survive it; the tables keep whatever function pointers they hold
 * (a tool may have installed wrappers). */
hsa_rt_init_status_t hsa_rt_reset(uint32_t gpu_count);
/* As hsa_rt_reset, then also destroys every signal and releases the backend
 * (CUDA: the primary contexts; the driver library stays loaded). Every entry
 * but hsa_init, hsa_shut_down, hsa_status_string and hsa_system_get_info
 * then answers HSA_STATUS_ERROR_NOT_INITIALIZED until the next init. */
void hsa_rt_shutdown(void);
bool hsa_rt_initialized(void);
/* One line saying why the last init failed ("" after a success). */
const char* hsa_rt_init_message(void);

/* ---- API tables ----------------------------------------------------------------- */

/* The runtime's own tables, filled once (major_id = *_MAJOR_VERSION, minor_id
 * = sizeof(table), step_id = *_STEP_VERSION), as ROCr passes them to a tool's
 * OnLoad; entries the runtime does not implement are NULL. */
struct CoreApiTable* hsa_rt_core_table(void);
struct AmdExtTable* hsa_rt_amd_ext_table(void);
/* Fresh, un-wrapped copies into caller storage of the sizes below. */
void hsa_rt_fill_core_table(struct CoreApiTable* out);
void hsa_rt_fill_amd_ext_table(struct AmdExtTable* out);
size_t hsa_rt_core_table_size(void);
size_t hsa_rt_amd_ext_table_size(void);
/* The versions the headers declare: core major, core step, AMD major, AMD step. */
void hsa_rt_header_table_versions(uint32_t out[4]);

/* ---- topology ------------------------------------------------------------------- */

/* Pools (and the hsa_region_t of the same memory, same handle value). GPU
 * agents: DEVICE_COARSE and DEVICE_FINE (host backend only: CUDA has no
 * fine-grained device memory outside managed memory). The CPU agent:
 * SYSTEM_FINE, SYSTEM_KERNARG (KERNARG_INIT | FINE_GRAINED) and
 * SYSTEM_COARSE (the staging tier a tool may use). */
typedef enum hsa_rt_pool_kind_t {
  HSA_RT_POOL_DEVICE_COARSE = 0,
  HSA_RT_POOL_DEVICE_FINE = 1,
  HSA_RT_POOL_SYSTEM_FINE = 2,
  HSA_RT_POOL_SYSTEM_KERNARG = 3,
  HSA_RT_POOL_SYSTEM_COARSE = 4
} hsa_rt_pool_kind_t;

uint32_t hsa_rt_gpu_count(void);
hsa_agent_t hsa_rt_cpu_agent(void);
/* index < hsa_rt_gpu_count(), else handle 0. */
hsa_agent_t hsa_rt_gpu_agent(uint32_t index);
/* The pool / region of that kind on that agent; handle 0 if it has none. */
hsa_amd_memory_pool_t hsa_rt_pool(hsa_agent_t agent, hsa_rt_pool_kind_t kind);
hsa_region_t hsa_rt_region(hsa_agent_t agent, hsa_rt_pool_kind_t kind);
/* Sets the ISA an agent reports and code objects must suit (host backend),
 * e.g. "amdgcn-amd-amdhsa--gfx1100"; its processor also becomes a GPU's
 * HSA_AGENT_INFO_NAME. NULL: no ISA. False for an unknown agent. */
bool hsa_rt_set_agent_isa(hsa_agent_t agent, const char* isa);
/* Whether the vmem entries work (6.0+ headers, and for CUDA a driver with
 * virtual memory management), and the size vmem handles and mappings of a
 * GPU come in (host: the page size; CUDA: the driver's granularity, 2 MiB on
 * an H200); 0 for the CPU or an unknown agent. */
bool hsa_rt_vmem_supported(void);
size_t hsa_rt_vmem_granularity(hsa_agent_t agent);

/* The CUDA backend's driver (NULL before init and on the host backend), a GPU
 * agent's CUDA ordinal (-1) and primary context (NULL). */
const struct cuda_driver_t* hsa_rt_cuda_driver(void);
int hsa_rt_cuda_device(hsa_agent_t agent);
struct CUctx_st* hsa_rt_cuda_context(hsa_agent_t agent);

/* ---- executables ------------------------------------------------------------------ */

/* Executables are also made through the HSA entries, as a tool makes them:
 * code object reader, hsa_executable_create_alt, load_agent_code_object,
 * freeze, get_symbol_by_name ("name.kd" for a kernel). These make them
 * directly. Add every symbol before the executable is first walked: a
 * frozen executable's symbols never change, and the library caches them. */
hsa_executable_t hsa_rt_executable_create(void);
/* A variable of agent with size bytes of zeroed storage the runtime
 * allocates (device memory of a GPU), living until the executable is
 * destroyed; returns its address, NULL for an unknown executable or agent. */
void* hsa_rt_executable_add_variable(hsa_executable_t exe, hsa_agent_t agent, const char* name,
                                     uint32_t size, bool is_constant);
/* A variable reporting exactly this address and size, with no storage behind
 * it (a copy touching the range is a violation). */
void hsa_rt_executable_add_variable_raw(hsa_executable_t exe, hsa_agent_t agent,
                                        const char* name, uint64_t address, uint32_t size);
/* A kernel symbol with a unique kernel object that no dispatch can run. */
void hsa_rt_executable_add_kernel(hsa_executable_t exe, hsa_agent_t agent, const char* name);
/* A frozen executable of one code object (host: AMDGPU ELF; CUDA: a cubin or
 * fatbin) loaded for a GPU agent: INVALID_AGENT for the CPU or an unknown
 * agent, INVALID_CODE_OBJECT when the backend refuses the image; _file reads
 * it from a file (INVALID_CODE_OBJECT when it cannot be read). */
hsa_status_t hsa_rt_executable_load(hsa_agent_t agent, const void* image, size_t size,
                                    hsa_executable_t* executable);
hsa_status_t hsa_rt_executable_load_file(hsa_agent_t agent, const char* path,
                                         hsa_executable_t* executable);
/* Exposes a module variable or a kernel (by its name without ".kd") of the
 * executable's code object as a symbol, as get_symbol_by_name does for CUDA
 * modules, whose symbols cannot be listed: INVALID_SYMBOL_NAME when the code
 * object has none, INVALID_ARGUMENT for a name registered twice. The outputs
 * may be NULL. */
hsa_status_t hsa_rt_executable_register_variable(hsa_executable_t executable, const char* name,
                                                 bool is_constant, uint64_t* address,
                                                 uint32_t* size);
hsa_status_t hsa_rt_executable_register_kernel(hsa_executable_t executable, const char* name,
                                               uint64_t* kernel_object);
/* hsa_executable_destroy, called directly (a tool's wrapper does not see it). */
hsa_status_t hsa_rt_executable_destroy(hsa_executable_t exe);
/* The shape of hsa_ven_amd_loader_iterate_executables (also in the loader
 * extension table): every loaded executable in load order; a status other
 * than SUCCESS stops the walk and is returned. It holds the loader lock
 * across the callbacks, as ROCr does: a callback must not create or destroy
 * an executable (it may call any other entry). */
hsa_status_t hsa_rt_iterate_executables(hsa_status_t (*callback)(hsa_executable_t executable,
                                                                 void* data),
                                        void* data);

/* ---- AQL packets, as HIP writes them ------------------------------------------------
 *
 * Reserve a slot (add_write_index), write the body, publish header and setup
 * with one release store, ring the doorbell with the packet's index; the
 * index is returned. A 1-D dispatch of grid_x work-items in workgroups of
 * workgroup_x (barrier bit, system-scope fences), and a barrier-AND (or OR)
 * packet with up to five dependencies. */
uint64_t hsa_rt_submit_dispatch(hsa_queue_t* queue, uint64_t kernel_object, const void* kernarg,
                                uint32_t grid_x, uint16_t workgroup_x,
                                uint32_t group_segment_size, hsa_signal_t completion);
uint64_t hsa_rt_submit_barrier(hsa_queue_t* queue, bool any, const hsa_signal_t* dependencies,
                               uint32_t count, hsa_signal_t completion);

/* ---- modes (reset restores the defaults) ------------------------------------------- */

typedef enum hsa_rt_mode_t {
  /* An allocation first takes back the most recently freed quarantined block
   * of the same pool that is large enough. Off by default. */
  HSA_RT_MODE_ADDRESS_REUSE = 0,
  /* An asynchronous copy whose copying agent (the source agent if a GPU, else
   * the destination if a GPU, else the CPU) cannot reach both buffers is a
   * violation, as a DMA engine faults on memory not mapped for it (host
   * memory the runtime does not own: only where it is locked for that GPU).
   * Off. */
  HSA_RT_MODE_STRICT_ASYNC_ACCESS = 1,
  /* hsa_agent_get_info answers HSA_AMD_AGENT_INFO_MEMORY_AVAIL (false models
   * a runtime older than the query: INVALID_ARGUMENT). On by default. */
  HSA_RT_MODE_MEMORY_AVAIL_SUPPORTED = 2,
  /* XNACK (ROCr's HSA_XNACK=1): GPUs may access any system memory, and a
   * GPU access to SVM pages resident elsewhere that the GPU has
   * AGENT_ACCESSIBLE (not _IN_PLACE) migrates them to it (counted:
   * HSA_RT_COUNT_SVM_MIGRATIONS). hsa_system_get_info answers it as
   * HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT and (6.0+ headers)
   * HSA_AMD_SYSTEM_INFO_XNACK_ENABLED. Off: a GPU reaches SVM memory only
   * where it was given AGENT_ACCESSIBLE(_IN_PLACE). Off by default. */
  HSA_RT_MODE_XNACK = 3
} hsa_rt_mode_t;
void hsa_rt_set_mode(hsa_rt_mode_t mode, bool enabled);

/* Host memory the test program owns: a copy whose host side starts in a
 * noted block must end inside it (else a violation: nothing is copied), so an
 * overrun of a host buffer is reported instead of corrupting the heap. Not
 * part of the topology: reset keeps them. */
void hsa_rt_note_host_block(const void* base, size_t size);
void hsa_rt_forget_host_block(const void* base);
/* Gives every quarantined block back to the backend now (for a measurement
 * that must see only live allocations, such as CUPTI's checkpoints). */
void hsa_rt_release_quarantine(void);

/* ---- fault injection (reset clears every fault) -------------------------------------
 *
 * One entry point, hsa_rt_inject(fault, target, value); what target and value
 * mean is said for each fault. "n-th" counts from the call (1 = the next one;
 * 0 disarms); "next count" arms that many. Address faults take up to 16
 * addresses; target 0 clears them all. */
typedef enum hsa_rt_fault_t {
  /* value != 0: every hsa_amd_pointer_info returns HSA_STATUS_ERROR. */
  HSA_RT_FAULT_POINTER_INFO = 0,
  /* The value-th device-to-host hsa_memory_copy fails with HSA_STATUS_ERROR,
   * copying nothing (it still counts as a copy). */
  HSA_RT_FAULT_NTH_D2H_COPY = 1,
  /* target: host-to-device copies whose destination range contains it fail:
   * hsa_memory_copy with HSA_STATUS_ERROR; an async submission is refused
   * (HSA_STATUS_ERROR, completion untouched); a dispatch moving host memory
   * there faults. */
  HSA_RT_FAULT_H2D_COPY_INTO = 2,
  /* target: every copy whose destination range contains it fails, whatever
   * its direction: hsa_memory_copy with HSA_STATUS_ERROR; an async copy (a
   * rect copy: one of whose rows) is accepted, then fails while executing
   * (nothing copied, completion -1); a dispatch writing there faults
   * (MEMORY_APERTURE_VIOLATION, nothing run). */
  HSA_RT_FAULT_COPIES_INTO = 3,
  /* The same for copies whose source contains target, dispatches reading it. */
  HSA_RT_FAULT_COPIES_FROM = 4,
  /* target: an executable handle; value != 0: its
   * hsa_executable_iterate_agent_symbols returns INVALID_EXECUTABLE without
   * calling back. */
  HSA_RT_FAULT_SYMBOL_WALK = 5,
  /* target: an hsa_executable_symbol_info_t; value != 0:
   * hsa_executable_symbol_get_info of it returns INVALID_ARGUMENT. */
  HSA_RT_FAULT_SYMBOL_QUERY = 6,
  /* value != 0: the loader iterator returns HSA_STATUS_ERROR at once. */
  HSA_RT_FAULT_EXECUTABLE_ITERATION = 7,
  /* value != 0: hsa_system_get_major_extension_table returns HSA_STATUS_ERROR
   * (a runtime without the AMD loader extension). */
  HSA_RT_FAULT_LOADER_EXTENSION = 8,
  /* The next value allocations (pool or region) fail: OUT_OF_RESOURCES. */
  HSA_RT_FAULT_NEXT_ALLOCATIONS = 9,
  /* The next value frees fail with HSA_STATUS_ERROR, freeing nothing. */
  HSA_RT_FAULT_NEXT_FREES = 10,
  /* The next value hsa_queue_create calls that pass their checks fail:
   * OUT_OF_RESOURCES. */
  HSA_RT_FAULT_NEXT_QUEUE_CREATIONS = 11,
  /* The next value code-object loads that would succeed fail:
   * OUT_OF_RESOURCES, loading nothing. */
  HSA_RT_FAULT_NEXT_CODE_OBJECT_LOADS = 12,
  /* The next value dispatches of a known kernel fault before running:
   * nothing touched, the queue's error callback gets
   * MEMORY_APERTURE_VIOLATION; not a copy violation. */
  HSA_RT_FAULT_NEXT_DISPATCHES = 13,
  /* The value-th asynchronous copy (linear, on an engine or rect) is refused
   * at submission: OUT_OF_RESOURCES, nothing copied, completion untouched. */
  HSA_RT_FAULT_NTH_ASYNC_COPY = 14,
  /* The value-th accepted asynchronous copy fails while executing: nothing
   * copied, completion set to -1 (ROCr's report of an error in a copy). */
  HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION = 15,
  /* The value-th call of that vmem operation that passes its argument checks
   * fails, changing nothing: handle_create with OUT_OF_RESOURCES, the others
   * with HSA_STATUS_ERROR. */
  HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE = 16,
  HSA_RT_FAULT_NTH_VMEM_HANDLE_RELEASE = 17,
  HSA_RT_FAULT_NTH_VMEM_MAP = 18,
  HSA_RT_FAULT_NTH_VMEM_UNMAP = 19,
  HSA_RT_FAULT_NTH_VMEM_SET_ACCESS = 20,
  /* The next value hsa_amd_memory_lock / _lock_to_pool calls fail with
   * HSA_STATUS_ERROR before anything else (no check, *agent_ptr untouched,
   * nothing locked); they still count (HSA_RT_COUNT_LOCKS). */
  HSA_RT_FAULT_LOCKS = 21,
  /* The next value hsa_amd_memory_unlock calls fail with HSA_STATUS_ERROR,
   * unlocking nothing (still counted: HSA_RT_COUNT_UNLOCKS). */
  HSA_RT_FAULT_UNLOCKS = 22,
  /* The next value hsa_amd_svm_attributes_set / _get /
   * hsa_amd_svm_prefetch_async calls fail with HSA_STATUS_ERROR before
   * anything else (nothing checked, set, written or migrated; a prefetch's
   * completion signal untouched). */
  HSA_RT_FAULT_SVM_ATTRIBUTES_SET = 23,
  HSA_RT_FAULT_SVM_ATTRIBUTES_GET = 24,
  HSA_RT_FAULT_SVM_PREFETCH = 25
} hsa_rt_fault_t;
void hsa_rt_inject(hsa_rt_fault_t fault, uint64_t target, uint64_t value);

/* ---- observation ------------------------------------------------------------------ */

typedef enum hsa_rt_counter_t {
  /* Copies performed or refused by an injected fault, per direction (a side
   * is device memory when it lies in runtime memory of a device: the host
   * backend counts every runtime allocation as device memory, the CUDA
   * backend only device pools, vmem mappings, module variables and memory
   * the driver calls device memory), and their bytes. A rect copy counts once. */
  HSA_RT_COUNT_COPIES_HOST_TO_HOST = 0,
  HSA_RT_COUNT_COPIES_HOST_TO_DEVICE = 1,
  HSA_RT_COUNT_COPIES_DEVICE_TO_HOST = 2,
  HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE = 3,
  HSA_RT_COUNT_COPY_BYTES_HOST_TO_HOST = 4,
  HSA_RT_COUNT_COPY_BYTES_HOST_TO_DEVICE = 5,
  HSA_RT_COUNT_COPY_BYTES_DEVICE_TO_HOST = 6,
  HSA_RT_COUNT_COPY_BYTES_DEVICE_TO_DEVICE = 7,
  /* Copies refused: a NULL side, freed (quarantined) memory, past the end of
   * an allocation or variable, a raw variable's range, unmapped host memory,
   * past the end of a noted host block, reserved address space other than
   * inside one mapping some agent may access that way, and in strict mode a
   * buffer the copying agent cannot reach; a dispatch whose ranges fail the
   * same checks counts one. Such a copy copies nothing. */
  HSA_RT_COUNT_COPY_VIOLATIONS = 8,
  /* Asynchronous copies accepted (refused and empty ones excluded). */
  HSA_RT_COUNT_ASYNC_COPIES = 9,
  /* hsa_amd_pointer_info calls, failed ones included. */
  HSA_RT_COUNT_POINTER_INFO_QUERIES = 10,
  /* Live allocations (pool and region; not executables' storage). */
  HSA_RT_COUNT_LIVE_ALLOCATIONS = 11,
  /* Bytes held in the quarantine. */
  HSA_RT_COUNT_QUARANTINED_BYTES = 12,
  /* Signals created and not destroyed (queues' doorbells excluded). They
   * survive reset: compare before and after. */
  HSA_RT_COUNT_LIVE_SIGNALS = 13,
  /* Async handlers armed and not ended (a running one counts until it
   * returns; one whose signal was destroyed does not). They survive reset. */
  HSA_RT_COUNT_SIGNAL_HANDLERS = 14,
  /* Signal operations on a signal that does not exist (load and wait return
   * 0, a store does nothing). */
  HSA_RT_COUNT_INVALID_SIGNAL_USES = 15,
  /* AQL queues alive; kernel dispatches that ran (refused or faulted ones
   * excluded; by kernel: hsa_rt_dispatch_count). */
  HSA_RT_COUNT_LIVE_QUEUES = 16,
  HSA_RT_COUNT_DISPATCHES = 17,
  /* vmem mappings, handles (released but mapped ones included) and
   * reservations alive. */
  HSA_RT_COUNT_VMEM_MAPPINGS = 18,
  HSA_RT_COUNT_VMEM_HANDLES = 19,
  HSA_RT_COUNT_VMEM_RESERVATIONS = 20,
  /* Backend calls that failed inside the runtime (CUDA: each printed on
   * stderr; out of memory answers to an allocation are not counted). */
  HSA_RT_COUNT_BACKEND_ERRORS = 21,
  /* hsa_amd_memory_lock and _lock_to_pool calls, and hsa_amd_memory_unlock
   * calls, failed ones included. */
  HSA_RT_COUNT_LOCKS = 22,
  HSA_RT_COUNT_UNLOCKS = 23,
  /* Ranges of host memory locked for GPUs and not unlocked (one per start
   * address, however often it was locked). */
  HSA_RT_COUNT_LOCKED_RANGES = 24,
  /* SVM pages moved by an access (not by a prefetch), one per contiguous
   * run of pages an access moved: a GPU's access (an async copy it
   * executes, a host-backend dispatch on it) to pages resident elsewhere
   * that it has AGENT_ACCESSIBLE with XNACK on; hsa_memory_copy (the CPU)
   * touching pages resident on a GPU. */
  HSA_RT_COUNT_SVM_MIGRATIONS = 25,
  /* hsa_amd_svm_prefetch_async calls that moved (or kept) a range. */
  HSA_RT_COUNT_SVM_PREFETCHES = 26,
  /* SVM ranges the runtime keeps attributes of (split where attributes
   * differ, as KFD's). */
  HSA_RT_COUNT_SVM_RANGES = 27
} hsa_rt_counter_t;
uint64_t hsa_rt_count(hsa_rt_counter_t counter);
/* Clears the event counters (copies, bytes, violations, async copies,
 * pointer-info queries, dispatches, invalid signal uses, backend errors,
 * locks and unlocks, SVM migrations, prefetches and bytes), not the live
 * counts. Reset does it too. */
void hsa_rt_reset_counters(void);
/* Dispatches that ran of one kernel (name with or without ".kd"; NULL: all). */
uint64_t hsa_rt_dispatch_count(const char* kernel);
/* The flags given to hsa_amd_memory_pool_allocate for the live allocation at
 * base ptr (0 for hsa_memory_allocate); false when ptr is no such base. */
bool hsa_rt_allocation_flags(const void* ptr, uint32_t* flags);
/* True while every quarantined block of host memory still holds only
 * HSA_RT_POISON_BYTE (nothing wrote freed memory behind the runtime's back). */
bool hsa_rt_quarantine_intact(void);
/* Bytes of SVM memory (ranges given attributes or prefetched) an agent
 * moved through the runtime: a GPU, the SVM side of the async copies it
 * executed (its copying agent: the source if a GPU, else the destination)
 * and of its host-backend dispatches' ranges; the CPU, hsa_memory_copy's.
 * 0 for an unknown agent. Cleared with the event counters. */
uint64_t hsa_rt_svm_bytes(hsa_agent_t agent);
/* Where the SVM page holding ptr is resident: a GPU agent, or the CPU
 * agent (memory no SVM range covers, too). */
hsa_agent_t hsa_rt_svm_location(const void* ptr);

#ifdef __cplusplus
}
#endif

/* ---- behaviour notes ---------------------------------------------------------------
 *
 * Both backends give every answer below unless a note says otherwise; the
 * conformance suite (conformance/, CONFORMANCE.md) checks them on both.
 *
 * Agents: the CPU (index 0), then the GPUs (CUDA: one per device in ordinal
 * order, each in its primary context; every entry makes the context it needs
 * current and puts the caller's back). A GPU is named after its ISA's
 * processor (host: "gfx942" of "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
 * set with hsa_rt_set_agent_isa; CUDA: "sm_90" of "nvptx-nvidia-cuda--sm_90");
 * the CPU has no ISA (iterate_isas calls nothing, HSA_AGENT_INFO_ISA 0). GPUs:
 * QUEUE_MIN_SIZE 0x40, QUEUE_MAX_SIZE 0x20000, QUEUES_MAX 128; the CPU 0.
 * HSA_AMD_AGENT_INFO_UUID: host backend only. MEMORY_AVAIL (GPUs only): host:
 * 16 GiB less what its device pools and vmem handles hold; CUDA: cuMemGetInfo.
 * ISAs: one handle per ISA name, shared by agents; NAME_LENGTH counts the
 * NUL, which NAME writes; ROCr's other ISA attributes as for a large-model,
 * full-profile ISA (WORKGROUP_MAX_SIZE 1024); hsa_isa_from_name finds an
 * agent's ISA (INVALID_ISA_NAME), hsa_isa_get_info takes index 0 only.
 *
 * Pools and regions, as ROCr's MemoryRegion::GetAgentPoolInfo: the owner and
 * the CPU for system pools ALLOWED_BY_DEFAULT, every other pair (a GPU and a
 * system pool, the CPU and a device pool, a GPU and a peer's pool)
 * DISALLOWED_BY_DEFAULT; one link hop between agents, none to one's own;
 * ACCESSIBLE_BY_ALL exactly for system pools. A GPU lists its regions then
 * the CPU's in hsa_agent_iterate_regions. Sizes: host 16 GiB per GPU (its
 * device pools and vmem handles share it; past it OUT_OF_RESOURCES) and 64
 * GiB per system request; CUDA the device's memory and the host's. A request
 * over the pool's size is INVALID_ALLOCATION. Sizes are rounded up to the
 * 4096-byte granule; alignment host 4096, CUDA 256 for device memory. Fresh
 * host-backend device memory holds poison (its first 64 KiB), as VRAM holds
 * whatever was there before.
 *
 * Frees: hsa_memory_free and hsa_amd_memory_pool_free are one operation; NULL
 * is a successful no-op; anything but the base of a live allocation is
 * INVALID_ALLOCATION. A freed block goes to a FIFO quarantine (host backend:
 * every pool, poisoned, 256 MiB / 65536 blocks; CUDA: device pools, 8 GiB /
 * 4096 blocks) so a late copy into it is a violation; past the limits the
 * oldest block is really freed. On CUDA an allocation the driver refuses for
 * lack of memory gets that GPU's quarantine back and is tried once more.
 * hsa_amd_agents_allow_access: num_agents 0, NULL agents, flags or ptr
 * INVALID_ARGUMENT; then the pointer (the exact base of a live allocation,
 * else HSA_STATUS_ERROR), then the agents (INVALID_AGENT); then, as ROCr's
 * MemoryRegion::AllowAccess, the list replaces the grants: the allocation's
 * owner (device memory: its GPU; system memory: the CPU) and the listed
 * agents have access, nobody else (system memory granted to CPUs only has
 * no GPU left). Grants do not accumulate: the runtime has no sub-allocated
 * fragments. System memory from hsa_memory_allocate is granted to every GPU
 * from the start, pool allocations to their owner only.
 *
 * Locked host memory (hsa_amd_memory_lock, _lock_to_pool; ROCr's
 * MemoryRegion::Lock): size 0, NULL host_ptr or agent_ptr (_to_pool: flags
 * not 0) INVALID_ARGUMENT; then *agent_ptr = NULL; agents NULL with
 * num_agent not 0 or the reverse (or num_agent < 0) INVALID_ARGUMENT;
 * _to_pool: an unknown pool, or one no CPU owns, INVALID_MEMORY_POOL; an
 * unknown agent INVALID_AGENT; host memory not mapped HSA_STATUS_ERROR.
 * No agents means every GPU; CPUs in the list are skipped, and a list
 * without a GPU locks nothing (*agent_ptr = host_ptr, SUCCESS). Otherwise
 * the range is recorded with its pool's grain (memory_lock: the CPU's
 * coarse pool; 6.3+ ROCr takes its extended-scope fine pool, which the
 * runtime does not model) and its GPUs, and *agent_ptr = host_ptr (5.6+
 * ROCr). Locking at the same host_ptr again adds the GPUs named (HIP locks
 * once per GPU), grows the range to the larger size and needs one more
 * unlock; ranges may overlap. hsa_amd_memory_unlock(host_ptr) undoes one
 * lock of the range starting there; after the last the GPUs lose it. An
 * address locked by nobody: SUCCESS, nothing done (ROCr's SVM thunk finds
 * nothing). A locked range counts as reachable by its GPUs only (strict
 * async copies, host dispatches). CUDA: the first lock of a range registers
 * it with cuMemHostRegister (PORTABLE | DEVICEMAP), the last unlock
 * unregisters it; a range the driver has registered already (overlapping
 * locks, cuMemHostAlloc memory) is left as the driver has it.
 *
 * hsa_amd_pointer_info: NULL ptr or info, or info->size 0, INVALID_ARGUMENT;
 * the answer is written up to what both sides know of the struct. Inside a
 * live allocation: type HSA, both bases the base, sizeInBytes the rounded
 * size, agentOwner, the pool's flags, userData, and as accessible agents the
 * owner then the grants (a list only when alloc, the count and the list
 * pointer are all non-NULL). A variable's storage: its exact size, its agent,
 * COARSE_GRAINED. Locked host memory: 5.2 headers LOCKED, both bases the
 * range's start, its size, owner the CPU, its pool's flags, its GPUs as the
 * accessible agents; newer headers UNKNOWN (see the locks above). Anything
 * else: SUCCESS with type UNKNOWN and no list.
 * Reserved address space: see "Virtual memory".
 *
 * Copies (hsa_memory_copy): NULL sides are a violation and INVALID_ARGUMENT,
 * size 0 SUCCESS; both sides are checked (see HSA_RT_COUNT_COPY_VIOLATIONS)
 * under the memory lock, which a free then waits for. CUDA copies with
 * cuMemcpy in the context of the source's GPU (else the destination's, else
 * GPU 0) and waits for a copy into device memory to land.
 *
 * hsa_amd_memory_async_copy: NULL dst/src a violation and INVALID_ARGUMENT;
 * dependencies without a count or the reverse INVALID_ARGUMENT; an unknown
 * agent INVALID_AGENT; an unknown dependency or completion signal
 * INVALID_SIGNAL; size 0 SUCCESS without touching the completion signal.
 * Accepted copies go to their copying agent's engine (host: one engine for
 * all; CUDA: one per GPU, a stream), which runs them in submission order:
 * each waits until every dependency reads 0, is then checked against the
 * memory as it is (a violation copies nothing but still decrements the
 * completion signal, so a waiter does not hang) and copied; the completion
 * signal is decremented, or set to -1 when the backend reports an error.
 * _on_engine (6.0+ headers) is the same after the size-0 answer, with
 * engine_id a single HSA_AMD_SDMA_ENGINE_* bit among the copying GPU's
 * engines (host: 8, as an MI250X GCD; CUDA: its copy engines) else
 * INVALID_ARGUMENT, and a copy between two CPU agents HSA_STATUS_ERROR.
 * _rect copies a box (range.x bytes by range.y rows by range.z layers)
 * between pitched buffers with ROCr's checks (dir hsaHostToHost or unknown
 * INVALID_ARGUMENT; copy_agent not a GPU INVALID_AGENT; a zero range SUCCESS
 * with nothing done; bases, pitches, slices not multiples of 4, a row wider
 * than a pitch, more rows than slice / pitch, several layers without a slice
 * INVALID_ARGUMENT; a NULL base a violation and INVALID_ARGUMENT); every row
 * is checked at execution, one bad row makes the whole copy one violation.
 *
 * Signals: 64-bit values under one lock; waits honour the timeout hint (1
 * GHz timestamp ticks, i.e. nanoseconds) as an upper bound and return the
 * satisfying value or the current one; hsa_amd_signal_wait_any the index of
 * the first satisfied pair or UINT32_MAX. Every memory order is sequentially
 * consistent. hsa_signal_create: NULL out, or consumers without a count,
 * INVALID_ARGUMENT; an unknown consumer INVALID_AGENT, one listed twice
 * INVALID_ARGUMENT. hsa_amd_signal_async_handler: NULL handler
 * INVALID_ARGUMENT, unknown signal INVALID_SIGNAL; one thread calls handlers
 * one at a time, without any runtime lock, once their condition holds, and
 * re-arms one that returns true; a signal destroyed while a handler is armed
 * on it drops the handler uncalled.
 *
 * Code objects: a reader remembers the caller's memory (NULL or size 0
 * INVALID_ARGUMENT; destroy of an unknown one INVALID_CODE_OBJECT_READER).
 * hsa_executable_create_alt checks profile, rounding mode and the out pointer
 * (INVALID_ARGUMENT). load_agent_code_object: unknown executable
 * INVALID_EXECUTABLE, unknown reader INVALID_CODE_OBJECT_READER, frozen
 * FROZEN_EXECUTABLE; then the backend: host: an AMDGPU ELF (ELF64 LE,
 * EM_AMDGPU, OS ABI AMDGPU_HSA, code object v3-v6, ET_DYN, consistent
 * tables, a known processor; else INVALID_CODE_OBJECT, never read past)
 * whose ISA suits the agent's (ROCr's Isa::IsCompatible, else
 * INCOMPATIBLE_ARGUMENTS, the CPU too); its "name.kd" descriptors become
 * kernels "name.kd" with a 64-byte-aligned copy of the descriptor as kernel
 * object and its segment sizes; CUDA: cuModuleLoadData in the agent's
 * context (INVALID_CODE_OBJECT when refused), symbols found by name on
 * first lookup ("name.kd": cuModuleGetFunction(name), else a global).
 * freeze: INVALID_EXECUTABLE, or FROZEN_EXECUTABLE the second time.
 * get_symbol_by_name: NULL name or symbol INVALID_ARGUMENT, unknown
 * executable INVALID_EXECUTABLE, no agent or none of that name
 * INVALID_SYMBOL_NAME. symbol_get_info: NAME is NAME_LENGTH bytes, not
 * NUL-terminated; attributes of the other kind INVALID_ARGUMENT; an unknown
 * symbol INVALID_EXECUTABLE_SYMBOL. Destroying an executable quarantines its
 * variables' storage (CUDA keeps the module loaded until reset, so its
 * addresses are never handed out again).
 *
 * AQL queues (ROCr's hsa_queue_create, GpuAgent::QueueCreate, AqlQueue):
 * NULL queue, size 0 or not a power of two, or an unknown type
 * INVALID_ARGUMENT; an unknown agent INVALID_AGENT; the CPU HSA_STATUS_ERROR;
 * COOPERATIVE INVALID_QUEUE_CREATION; past 0x20000 packets OUT_OF_RESOURCES,
 * under 0x40 INVALID_ARGUMENT; a private segment over 262128 (UINT32_MAX: the
 * default) OUT_OF_RESOURCES; past 128 queues on the agent OUT_OF_RESOURCES.
 * A queue has a ring of INVALID-headed packets, a doorbell signal of its own
 * and a packet processor: after the doorbell is rung with a packet index it
 * runs the packets from the read index up to the highest index rung, each
 * once its header is not INVALID; a packet then gets its header set back to
 * INVALID, the read index passes it and its completion signal is
 * decremented. BARRIER_AND waits for every dependency to read 0, BARRIER_OR
 * for one; every packet behaves as if its barrier bit were set. Other types
 * INVALID_PACKET_FORMAT. A dispatch, in order: 0 dimensions
 * INCOMPATIBLE_ARGUMENTS; a workgroup of 0 or over 1024 work-items
 * INVALID_ARGUMENT; a kernel object no dispatchable kernel of the queue's
 * agent INVALID_CODE_OBJECT; an injected fault MEMORY_APERTURE_VIOLATION;
 * then the backend. Host: a shape other than the library's kernels need
 * (KR_WORKGROUP x 1 x 1, whole workgroups) INVALID_ARGUMENT; a kernel without
 * a host build INVALID_CODE_OBJECT; every range the kernel will touch must
 * pass the copy checks and be reachable by the queue's GPU (owned, granted,
 * locked for it, or a vmem permission for the access), else one violation and
 * MEMORY_APERTURE_VIOLATION with nothing touched; an injected copy fault on a
 * range MEMORY_APERTURE_VIOLATION; then the kernel runs on the CPU. CUDA:
 * cuLaunchKernel (the kernarg segment as one parameter, or as a buffer for
 * kernels of several; dynamic shared memory = group segment less the static)
 * on the queue's stream: a launch refused OUT_OF_RESOURCES, a kernel fault
 * (CUDA_ERROR_ILLEGAL_ADDRESS) MEMORY_APERTURE_VIOLATION, another error
 * EXCEPTION. A failure suspends the queue (nothing more runs; the failed
 * packet is neither completed nor passed) and calls the queue's error
 * callback on the processor thread (it may destroy its queue); without one,
 * ROCr's default handler prints "Queue at %p inactivated due to async error"
 * and aborts unless HSA_ENABLE_QUEUE_FAULT_MESSAGE is "0". queue_destroy:
 * NULL INVALID_ARGUMENT, unknown INVALID_QUEUE; it waits for the packet in
 * progress. Index operations on no live queue do nothing (loads return 0);
 * a retired queue's memory stays, so a stale pointer is harmless.
 *
 * Shared virtual memory (ROCr's Runtime::SetSvmAttrib / GetSvmAttrib /
 * SvmPrefetch over KFD's SVM ranges), on both backends as bookkeeping: SVM
 * memory is host memory the program mapped (mmap, or a NO_REGISTER
 * reservation below), and every range is ptr aligned down and ptr + size up
 * to 4096-byte pages.
 *   hsa_amd_svm_attributes_set(ptr, size, list, count): NULL ptr or list,
 *     size or count 0 INVALID_ARGUMENT; per pair, in order: an attribute
 *     given twice, or an agent named twice among AGENT_ACCESSIBLE,
 *     AGENT_ACCESSIBLE_IN_PLACE and AGENT_NO_ACCESS,
 *     INCOMPATIBLE_ARGUMENTS; an unknown attribute, or a get-only one
 *     (PREFETCH_LOCATION, ACCESS_QUERY), INVALID_ARGUMENT; an unknown agent
 *     (access attributes; PREFERRED_LOCATION other than 0) INVALID_AGENT;
 *     GLOBAL_FLAG other than FINE / COARSE INVALID_ARGUMENT. Then the range:
 *     pages not mapped, or meeting runtime memory (an allocation, the
 *     quarantine, a registered reservation), HSA_STATUS_ERROR. All checked
 *     before anything changes; then each page takes the attributes (a range
 *     split where they differ). A CPU agent in an access attribute is
 *     accepted and changes nothing a GPU sees.
 *   hsa_amd_svm_attributes_get: the same argument checks; set-only
 *     attributes (AGENT_ACCESSIBLE, _IN_PLACE, NO_ACCESS) and unknown ones
 *     INVALID_ARGUMENT; pages not mapped HSA_STATUS_ERROR (KFD has dropped
 *     the range at munmap: its attributes are forgotten). ACCESS_QUERY takes
 *     an agent in value (unknown: INVALID_AGENT) and answers in attribute
 *     its access: what was set, else AGENT_ACCESSIBLE with XNACK on (and for
 *     the CPU), AGENT_NO_ACCESS off; pages that differ answer NO_ACCESS if
 *     any has it, else ACCESSIBLE if any has it, else IN_PLACE.
 *     PREFETCH_LOCATION: the agent of the last prefetch of every page, 0 if
 *     none or not uniform; GLOBAL_FLAG: FINE unless set, INDETERMINATE when
 *     pages differ; the others what was set (0 when not, or not uniform).
 *   hsa_amd_svm_prefetch_async(ptr, size, agent, n, deps, completion): size
 *     0 or NULL ptr INVALID_ARGUMENT; dependencies without a count or the
 *     reverse INVALID_ARGUMENT; an unknown agent INVALID_AGENT; an unknown
 *     dependency or completion (handle not 0) INVALID_SIGNAL; pages not
 *     mapped HSA_STATUS_ERROR. It waits for the dependencies, makes agent
 *     the range's location and prefetch location (counted:
 *     HSA_RT_COUNT_SVM_PREFETCHES), then decrements the completion signal.
 *   Access: a GPU reaches SVM memory (strict async copies, host dispatches)
 *   where it has AGENT_ACCESSIBLE or _IN_PLACE, or anywhere with XNACK on
 *   (HSA_RT_MODE_XNACK). See HSA_RT_COUNT_SVM_MIGRATIONS, hsa_rt_svm_bytes
 *   and hsa_rt_svm_location for what accesses move and count. The CUDA
 *   backend's dispatches are not checked or counted (cuLaunchKernel).
 *   7.2 headers: hsa_amd_vmem_address_reserve(_align) with
 *   HSA_AMD_VMEM_ADDRESS_NO_REGISTER is ROCr's: an anonymous read-write
 *   mmap (host memory on both backends) recorded as a reservation that is
 *   not registered: copies see host memory, vmem_map into it
 *   INVALID_ARGUMENT, hsa_amd_pointer_info RESERVED_ADDR with
 *   hostBaseAddress its start, its size, no owner, registered false, no
 *   agents; hsa_amd_vmem_address_free unmaps it and forgets its SVM
 *   attributes. Earlier headers have no such flag (managed memory is a
 *   plain mmap: pointer info UNKNOWN).
 *
 * Virtual memory (hsa_amd_vmem_*, 6.0+ headers), following ROCr (runtime.cpp,
 * VMemory*) and each generation's header:
 *   address_reserve(_align): NULL va, size 0 or not whole pages
 *     INVALID_ARGUMENT; alignment 0 = the page size, else a power of two of
 *     at least a page, else INVALID_ARGUMENT; a free, suitably aligned hint
 *     is honoured. address_free: NULL or size 0 INVALID_ARGUMENT, not a
 *     reservation's start INVALID_ALLOCATION, not its size INVALID_ARGUMENT,
 *     a mapping inside HSA_STATUS_ERROR_RESOURCE_FREE.
 *   handle_create: size 0, a type other than NONE / PINNED, NULL out, an
 *     unknown or system pool, a size not whole granules (host 4096; CUDA the
 *     driver's) INVALID_ARGUMENT; larger than the pool INVALID_ALLOCATION;
 *     no device memory left OUT_OF_RESOURCES. handle_release: unknown or
 *     already released INVALID_ALLOCATION; a mapped handle lives (and
 *     counts) until its last unmap. retain_alloc_handle(&h, va): va must be a
 *     mapping's start (INVALID_ALLOCATION); needs its own release.
 *     get_alloc_properties_from_handle: NULL outputs INVALID_ARGUMENT, an
 *     unknown handle INVALID_ALLOCATION; else the pool and the type.
 *   map: NULL va or size 0, a range not inside one reservation, overlapping
 *     a mapping, or not on the granularity, or an unknown handle
 *     INVALID_ARGUMENT; more than the handle holds OUT_OF_RESOURCES; offset
 *     and flags ignored; no agent has access yet. One handle mapped at two
 *     addresses shows the same bytes at both. CUDA: the driver maps only a
 *     whole handle, so a size other than the handle's is HSA_STATUS_ERROR
 *     with nothing changed (ROCr maps its first bytes). unmap: NULL or size 0
 *     INVALID_ARGUMENT, not a mapping's start INVALID_ALLOCATION, not its
 *     size INVALID_ARGUMENT; the handle keeps its bytes.
 *   set_access(va, size, desc, count): NULL va or desc, count 0
 *     INVALID_ARGUMENT; an unknown agent INVALID_AGENT, a permission past
 *     READ_WRITE INVALID_ARGUMENT, all before anything changes. 6.0 - 6.2
 *     headers: (va, size) exactly one mapping, else INVALID_ALLOCATION; the
 *     agents not listed lose their access (replace). 6.4+: size 0
 *     INVALID_ARGUMENT; the range must lie in one reservation
 *     (INVALID_ARGUMENT) and be covered by contiguous mappings found by their
 *     exact starts (a gap INVALID_ALLOCATION); the others keep theirs
 *     (merge). Host: the CPU's permission is the user view's protection.
 *     CUDA: cuMemSetAccess per GPU; giving the CPU access, or WRITE_ONLY, is
 *     HSA_STATUS_ERROR with nothing changed (CUDA maps cuMemCreate memory for
 *     devices only, read-only or read-write); a GPU losing access is
 *     revoked by mapping the handle afresh (its bytes stay).
 *   get_access(va, perms, agent): NULL va or perms INVALID_ARGUMENT; va in
 *     no mapping INVALID_ALLOCATION; not a GPU INVALID_AGENT; never given
 *     access: 6.0 - 6.2 INVALID_ALLOCATION, 6.4+ NONE.
 *   Copies treat a range meeting a reservation as device memory only inside
 *   one mapping some agent may access that way (READ_WRITE or WRITE_ONLY for
 *   a destination, READ_ONLY or READ_WRITE for a source; strict mode: the
 *   copying agent); anything else is a violation. The engine copies through
 *   the handle's memory, whatever the CPU view's protection.
 *   hsa_amd_pointer_info in a reservation: 6.x headers: type 5
 *   (RESERVED_ADDR) mapped or not, agentBaseAddress the reservation's start,
 *   hostBaseAddress NULL, its size, owner the CPU, FINE_GRAINED, no agents
 *   (alloc(0) still called, as ROCr 6.x); 7.x: a mapped address
 *   HSA_EXT_POINTER_TYPE_HSA_VMEM, both bases the address, the mapping's
 *   size, owner the handle's GPU, flags 0, registered, the agents whose
 *   permission is not NONE (no alloc call for none); an unmapped one
 *   RESERVED_ADDR with hostBaseAddress the reservation's start, its size, no
 *   owner, registered. set_userdata and allow_access do not know vmem
 *   addresses. export/import_shareable_handle are not implemented.
 *
 * Loader extension: hsa_system_get_major_extension_table answers the AMD
 * loader extension, major version 1, as ROCr: up to the 1.03 table of which
 * only hsa_ven_amd_loader_iterate_executables is filled; another extension
 * or version HSA_STATUS_ERROR, a NULL table or length 0 INVALID_ARGUMENT.
 */

#endif /* HSA_RT_H */
