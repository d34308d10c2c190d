/* hsa_cuda.h: control interface of "HSA on CUDA", an HSA runtime implemented
 * on the CUDA driver API, used to run kernel-replay unchanged against real
 * device memory and real kernels on an NVIDIA GPU.
 *
 * kernel-replay only ever sees HSA function tables. This runtime fills the
 * real CoreApiTable / AmdExtTable from <hsa/hsa_api_trace.h> (version fields
 * as ROCr fills them: major_id = *_MAJOR_VERSION, minor_id = sizeof(table),
 * step_id = *_STEP_VERSION) with entry points that follow ROCr's semantics —
 * the same status codes as the software runtime in testing/hsa-runtime/host — implemented
 * on CUDA:
 *
 *   agents       one CPU agent (index 0), then one GPU agent per CUDA device,
 *                in CUDA ordinal order. Each GPU runs in its device's primary
 *                context; every entry point makes the right context current
 *                for the CUDA calls it makes and restores the caller's.
 *   pools        GPU: DEVICE_COARSE (cuMemAlloc, COARSE_GRAINED).
 *                CPU: SYSTEM_FINE (FINE_GRAINED), SYSTEM_KERNARG
 *                (KERNARG_INIT | FINE_GRAINED), both pinned host memory from
 *                cuMemHostAlloc(PORTABLE | DEVICEMAP); SYSTEM_COARSE
 *                (COARSE_GRAINED) pinned host memory from
 *                cuMemHostAlloc(PORTABLE), the staging tier a tool may use.
 *                A region of the same memory shares the pool's handle value,
 *                as in ROCr; a GPU lists its own region, then the system
 *                regions, in hsa_agent_iterate_regions.
 *   copies       hsa_memory_copy is a blocking cuMemcpy (unified addressing):
 *                pageable host memory goes through the driver's staging
 *                buffers, as ROCr stages it. hsa_amd_memory_async_copy runs on
 *                a runtime-owned stream per GPU (the source agent's if it is a
 *                GPU, else the destination's, else GPU 0's), after its
 *                dependency signals read 0; the completion signal is
 *                decremented when the copy completes, or set to -1 if the
 *                driver reports an error. With 6.0+ headers
 *                hsa_amd_memory_async_copy_on_engine is the same copy once
 *                its engine_id names one of the copying GPU's copy engines
 *                (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT; CUDA picks the
 *                engine itself); hsa_amd_memory_async_copy_rect copies its
 *                box row by row (one cuMemcpyAsync per row) on copy_agent's
 *                stream, completing once for all rows. Argument checks are
 *                the sim's (hsa_common_signals.h); hsa_amd_signal_async_handler
 *                is the shared signal table's.
 *   virtual memory  with 6.0+ headers, hsa_amd_vmem_* on CUDA's virtual
 *                memory management (cuMemAddressReserve, cuMemCreate,
 *                cuMemMap, cuMemSetAccess, ...), with the sim's rules and
 *                status codes per header generation (hsa_common_vmem.h);
 *                hsa_cuda_vmem.cpp says how each entry maps to CUDA and what
 *                CUDA cannot do (CPU access to device handles, write-only
 *                mappings: HSA_STATUS_ERROR). Handle sizes, and map addresses
 *                and sizes, must be multiples of the driver's granularity
 *                (hsa_cuda_vmem_granularity; 2 MiB on an H200), else
 *                INVALID_ARGUMENT. Copies into a reservation are device
 *                copies only inside one mapping a GPU may access that way;
 *                anything else is refused and counted as a violation.
 *   ISAs, queues one ISA per GPU, "nvptx-nvidia-cuda--sm_XY"; AQL queues whose
 *                packet processor launches KERNEL_DISPATCH packets with
 *                cuLaunchKernel and runs BARRIER_AND packets
 *                (hsa_cuda_queues.cpp says how, and what differs from ROCr).
 *   executables  CUDA modules (cubin / fatbin) loaded per GPU agent. The driver
 *                API cannot enumerate a module's globals, so the caller
 *                registers the __device__ / __constant__ variables (and the
 *                kernels) each module exposes; hsa_cuda_iterate_executables is
 *                the loader-style iterator (the shape of
 *                hsa_ven_amd_loader_iterate_executables), and the loader
 *                extension table from hsa_system_get_major_extension_table
 *                carries it too.
 *
 * Differences from the software runtime that a test may notice: no
 * DEVICE_FINE pool (CUDA has no fine-grained device memory outside managed
 * memory, which this runtime never uses); no fault injection; freed memory is
 * really freed (a copy into device memory freed since is refused and counted
 * as a violation, see hsa_cuda_copy_violations); vmem sizes in granules
 * rather than pages, and no CPU or write-only access to vmem mappings (see
 * "virtual memory" above).
 *
 * Thread safety: every entry point and control function is thread-safe,
 * except hsa_cuda_init / hsa_cuda_shutdown, which must not race with other
 * calls into the runtime.
 */
#ifndef HSA_CUDA_H
#define HSA_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include "cuda_driver.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CoreApiTable;
struct AmdExtTable;

/* hsa_agent_get_info attribute of newer ROCm releases (free device memory in
 * bytes, uint64_t), not in every header this builds against; answered for GPU
 * agents from cuMemGetInfo. Named apart from ROCm's enumerator so the two
 * never collide. */
#define HSA_CUDA_AGENT_INFO_MEMORY_AVAIL 0xA015

/* ---- initialisation ----------------------------------------------------- */

typedef enum hsa_cuda_init_status_t {
  HSA_CUDA_INIT_OK = 0,
  /* libcuda.so.1 could not be loaded, or lacks an entry point the runtime
   * needs. The library loaded is $HSA_CUDA_LIBCUDA if set, else libcuda.so.1. */
  HSA_CUDA_INIT_NO_DRIVER = 1,
  /* The driver loaded, but reports no CUDA device. */
  HSA_CUDA_INIT_NO_DEVICE = 2,
  /* A device lacks unified addressing (every 64-bit Linux GPU has it). */
  HSA_CUDA_INIT_UNSUPPORTED = 3,
  /* A CUDA call failed while setting up; hsa_cuda_init_message says which. */
  HSA_CUDA_INIT_DRIVER_ERROR = 4
} hsa_cuda_init_status_t;

/* Loads the driver, builds the topology and retains each device's primary
 * context. Idempotent once it succeeded; after a failure nothing is held and
 * it may be called again. */
hsa_cuda_init_status_t hsa_cuda_init(void);
/* One line saying why the last hsa_cuda_init failed ("" after a success).
 * Static storage, overwritten by the next hsa_cuda_init. */
const char* hsa_cuda_init_message(void);
/* True between a successful hsa_cuda_init and hsa_cuda_shutdown. Every table
 * entry except hsa_init, hsa_shut_down, hsa_status_string and
 * hsa_system_get_info answers HSA_STATUS_ERROR_NOT_INITIALIZED otherwise. */
bool hsa_cuda_initialized(void);
/* Stops the copy engines (queued copies whose dependencies are satisfied
 * still run; the others are dropped), destroys every signal, unloads every
 * executable, frees every allocation and releases the primary contexts.
 * Handles from before are invalid afterwards, also after a new init. The
 * driver library stays loaded for the life of the process. */
void hsa_cuda_shutdown(void);
/* The resolved CUDA driver entry points, for the harness's own kernels and
 * copies; NULL until a hsa_cuda_init loaded the driver. */
const cuda_driver_t* hsa_cuda_driver(void);

/* ---- API tables ----------------------------------------------------------- */

/* The runtime's own tables, filled once, as ROCr passes them to a tool's
 * OnLoad; a tool may install wrappers into them. Entries the runtime does not
 * implement are NULL. Usable (and filled) before hsa_cuda_init. */
struct CoreApiTable* hsa_cuda_core_table(void);
struct AmdExtTable* hsa_cuda_amd_ext_table(void);
/* Fresh, un-wrapped copies into caller storage of at least
 * hsa_cuda_core_table_size() / hsa_cuda_amd_ext_table_size() bytes. */
void hsa_cuda_fill_core_table(struct CoreApiTable* out);
void hsa_cuda_fill_amd_ext_table(struct AmdExtTable* out);
size_t hsa_cuda_core_table_size(void);
size_t hsa_cuda_amd_ext_table_size(void);

/* ---- topology ------------------------------------------------------------- */

typedef enum hsa_cuda_pool_kind_t {
  HSA_CUDA_POOL_DEVICE_COARSE = 0,
  HSA_CUDA_POOL_SYSTEM_FINE = 1,
  HSA_CUDA_POOL_SYSTEM_KERNARG = 2,
  HSA_CUDA_POOL_SYSTEM_COARSE = 3
} hsa_cuda_pool_kind_t;

uint32_t hsa_cuda_gpu_count(void);
hsa_agent_t hsa_cuda_cpu_agent(void);
/* index < hsa_cuda_gpu_count(), else handle 0. */
hsa_agent_t hsa_cuda_gpu_agent(uint32_t index);
/* The CUDA ordinal of a GPU agent; -1 for the CPU or an unknown handle. */
int hsa_cuda_agent_device(hsa_agent_t agent);
/* The GPU agent's primary context; NULL for the CPU or an unknown handle. */
CUcontext hsa_cuda_agent_context(hsa_agent_t agent);
/* The pool / region of that kind on that agent; handle 0 if it has none
 * (device kinds belong to GPU agents, system kinds to the CPU agent). */
hsa_amd_memory_pool_t hsa_cuda_pool(hsa_agent_t agent, hsa_cuda_pool_kind_t kind);
hsa_region_t hsa_cuda_region(hsa_agent_t agent, hsa_cuda_pool_kind_t kind);

/* ---- executables (CUDA modules) --------------------------------------------- */

/* Executables are also made through the HSA entries, as a tool makes them
 * on ROCm: hsa_code_object_reader_create_from_memory, hsa_executable_create_alt,
 * hsa_executable_load_agent_code_object (a cubin or fatbin), freeze, and
 * hsa_executable_get_symbol_by_name ("name.kd" for a kernel); see
 * hsa_cuda_loader.cpp. */
/* Loads a cubin / fatbin file (cuModuleLoad) or an image in memory
 * (cuModuleLoadData) into the GPU agent's context as an executable.
 * HSA_STATUS_ERROR_INVALID_AGENT for the CPU or an unknown agent,
 * HSA_STATUS_ERROR_INVALID_CODE_OBJECT when the driver refuses the image (the
 * reason is printed on stderr). */
hsa_status_t hsa_cuda_executable_load(hsa_agent_t agent, const char* path,
                                      hsa_executable_t* executable);
hsa_status_t hsa_cuda_executable_load_data(hsa_agent_t agent, const void* image,
                                           hsa_executable_t* executable);
/* Exposes a module-scope variable as a variable symbol (cuModuleGetGlobal);
 * is_constant marks a __constant__ variable. address / size may be NULL.
 * HSA_STATUS_ERROR_INVALID_SYMBOL_NAME when the module has no such global;
 * HSA_STATUS_ERROR_INVALID_ARGUMENT for a name registered twice or a variable
 * of 4 GiB or more (VARIABLE_SIZE is 32 bits). */
hsa_status_t hsa_cuda_executable_register_variable(hsa_executable_t executable, const char* name,
                                                   bool is_constant, uint64_t* address,
                                                   uint32_t* size);
/* Exposes a kernel as a kernel symbol (cuModuleGetFunction); its
 * KERNEL_OBJECT is the CUfunction. function may be NULL. */
hsa_status_t hsa_cuda_executable_register_kernel(hsa_executable_t executable, const char* name,
                                                 CUfunction* function);
/* The executable's module; NULL for an unknown handle. */
CUmodule hsa_cuda_executable_module(hsa_executable_t executable);
/* Unloads (cuModuleUnload): the runtime's hsa_executable_destroy, called
 * directly. An application unloads through the table (hsa_executable_destroy
 * in hsa_cuda_app.cpp) so that a tool's wrapper sees it; this does not. */
hsa_status_t hsa_cuda_executable_unload(hsa_executable_t executable);
/* Loader-style iterator: calls callback for every loaded executable in load
 * order; a status other than HSA_STATUS_SUCCESS stops the walk and is
 * returned. NULL callback: HSA_STATUS_ERROR_INVALID_ARGUMENT. */
hsa_status_t hsa_cuda_iterate_executables(hsa_status_t (*callback)(hsa_executable_t executable,
                                                                   void* data),
                                          void* data);

/* ---- modes ------------------------------------------------------------------ */

/* Address reuse (off by default): a freed DEVICE_COARSE block is kept in a
 * per-size cache instead of being returned to CUDA, and the next allocation of
 * the same rounded size on the same agent gets it back (most recently freed
 * first), as allocators that reuse addresses do. Turning it off releases the
 * cache. */
void hsa_cuda_set_address_reuse(bool enabled);
/* Bytes held in the address-reuse cache. */
uint64_t hsa_cuda_reuse_cache_bytes(void);
/* Gives every GPU's quarantined freed device blocks back to CUDA now (they
 * are otherwise kept, up to 8 GiB, to catch copies into freed memory): for a
 * measurement that must see only live allocations, such as the CUPTI
 * checkpoint API, which saves every allocation of the context. */
void hsa_cuda_release_quarantine(void);

/* ---- virtual memory ------------------------------------------------------------ */

/* Whether the vmem entries work: built against 6.0+ headers (the tables have
 * them), initialized, and the driver has virtual memory management. */
bool hsa_cuda_vmem_supported(void);
/* The granularity a GPU agent's vmem handles and mappings are sized in
 * (cuMemGetAllocationGranularity, minimum); 0 for the CPU, an unknown agent
 * or a driver without virtual memory management. */
size_t hsa_cuda_vmem_granularity(hsa_agent_t agent);
/* Mappings not yet unmapped; handles with references or mappings left;
 * reservations not yet freed. hsa_cuda_shutdown releases them all. */
uint64_t hsa_cuda_vmem_mapping_count(void);
uint64_t hsa_cuda_vmem_handle_count(void);
uint64_t hsa_cuda_vmem_reservation_count(void);

/* ---- observation ------------------------------------------------------------ */

typedef enum hsa_cuda_copy_direction_t {
  HSA_CUDA_COPY_HOST_TO_HOST = 0,
  HSA_CUDA_COPY_HOST_TO_DEVICE = 1,
  HSA_CUDA_COPY_DEVICE_TO_HOST = 2,
  HSA_CUDA_COPY_DEVICE_TO_DEVICE = 3
} hsa_cuda_copy_direction_t;

/* Copies issued to the driver (hsa_memory_copy and asynchronous copies) per
 * direction, and their bytes, since init or the last counter reset. A side is
 * "device" when it lies in a device-pool allocation, in a registered module
 * variable or in other device memory the driver knows; pinned and pageable
 * host memory are "host". */
uint64_t hsa_cuda_copy_count(hsa_cuda_copy_direction_t direction);
uint64_t hsa_cuda_copy_bytes(hsa_cuda_copy_direction_t direction);
/* hsa_amd_memory_async_copy calls accepted (size 0 excluded). */
uint64_t hsa_cuda_async_copy_count(void);
/* Copies refused because a side was NULL, ran past the end of a live
 * allocation or variable, or touched device memory freed through the runtime
 * (or held in the address-reuse cache) or the storage of an unloaded
 * executable. Such a copy copies nothing. Freed pinned host memory is not
 * remembered: the OS may hand its addresses to malloc again. */
uint64_t hsa_cuda_copy_violations(void);
/* CUDA calls that failed inside the runtime (each was printed on stderr).
 * Out-of-memory answers to an allocation are not counted: they are a normal
 * HSA_STATUS_ERROR_OUT_OF_RESOURCES. */
uint64_t hsa_cuda_cuda_error_count(void);
void hsa_cuda_reset_counters(void);
/* Live allocations (pool and region), and live signals. */
uint64_t hsa_cuda_live_allocation_count(void);
uint64_t hsa_cuda_live_signal_count(void);
/* Live AQL queues, and the kernel-dispatch packets their processors have
 * launched successfully since init or the last counter reset. */
uint64_t hsa_cuda_live_queue_count(void);
uint64_t hsa_cuda_aql_dispatch_count(void);

#ifdef __cplusplus
}
#endif

#endif /* HSA_CUDA_H */
