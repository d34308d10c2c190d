/* hsa_cuda_internal.h: what the translation units of the HSA-on-CUDA runtime
 * share (hsa_cuda.h is the public control interface).
 *
 * Layout:
 *   cuda_driver.cpp        dlopen/dlsym of libcuda.so.1
 *   hsa_cuda_runtime.cpp   init/shutdown, topology, agent and system queries,
 *                          CUDA error reporting, contexts, counters
 *   hsa_cuda_memory.cpp    pools/regions, allocation map, address reuse,
 *                          hsa_memory_copy, pointer info, access grants
 *   hsa_cuda_vmem.cpp      the virtual memory API (hsa_amd_vmem_*) on CUDA's
 *                          virtual memory management
 *   hsa_cuda_signals.cpp   signals and the per-GPU asynchronous copy engines
 *   hsa_cuda_loader.cpp    executables (CUDA modules) and their symbols,
 *                          code object readers
 *   hsa_cuda_queues.cpp    ISAs, AQL queues and their packet processors
 *   hsa_cuda_tables.cpp    the CoreApiTable / AmdExtTable
 *   hsa_cuda_app.cpp       the plain HSA names an application calls
 *
 * What this runtime shares with the software runtime (testing/hsa-runtime/host) lives in
 * testing/hsa-runtime/common: handle layout, attribute writers, status strings,
 * system info, the signal table, the async-copy argument checks, the vmem
 * rules (hsa_common_vmem.h), the table entry lists and the common
 * application trampolines. This runtime keeps
 * CUDA: the driver, contexts, allocation and copies, the copy engines and
 * modules.
 *
 * Locking: the topology is immutable while the runtime is ready (written only
 * by init/shutdown, which must not race with anything). Memory has a
 * reader-writer lock (copies read, allocation and free write), which also
 * guards the vmem records (reservations, handles, mappings: a copy or
 * pointer query sees them as consistently as allocations); the loader,
 * the signal table and each copy engine have a mutex each. No code path holds
 * two of them at once except the memory lock taken inside the loader's
 * variable registration (loader mutex, then memory lock; never the reverse),
 * and no user callback runs while any of them is held.
 */
#ifndef HSA_CUDA_INTERNAL_H
#define HSA_CUDA_INTERNAL_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <shared_mutex>

#include "hsa_common.h"
#include "hsa_common_signals.h"
#include "hsa_common_tables.h"
#include "hsa_common_vmem.h"
#include "hsa_cuda.h"

namespace hsa_cuda {

using hsa_common::CopyRole;
using hsa_common::HandleTag;
using hsa_common::is_gpu_index;
using hsa_common::kCpuAgentIndex;
using hsa_common::kInvalidMemoryPool;
using hsa_common::write_value;

// ---- constants ----------------------------------------------------------------

// Allocation sizes are rounded up to this granule (ROCr rounds to the pool's
// RUNTIME_ALLOC_GRANULE) and the rounded size is what is allocated and what
// hsa_amd_pointer_info reports.
constexpr size_t kGranule = 4096;
// cuMemAlloc guarantees 256-byte alignment (small blocks are sub-allocated),
// cuMemHostAlloc returns whole pages: each pool reports what it guarantees.
constexpr size_t kDeviceAlignment = 256;
constexpr size_t kHostAlignment = 4096;
// Agent index 0 is the CPU (kCpuAgentIndex), 1..gpu_count the GPUs in CUDA
// ordinal order.
static_assert(HSA_CUDA_AGENT_INFO_MEMORY_AVAIL == hsa_common::kAgentInfoMemoryAvail,
              "the public name of HSA_AMD_AGENT_INFO_MEMORY_AVAIL");

// ---- the driver and CUDA errors ------------------------------------------------

bool load_driver(const char* library, std::string* error);
const cuda_driver_t* loaded_driver();
// The resolved driver; only valid while the runtime is ready (or during init
// after the load succeeded).
const cuda_driver_t& cu();

// Checks a CUDA result: true on success; otherwise prints the call, the code,
// its name and the driver's description on stderr, counts it
// (hsa_cuda_cuda_error_count) and returns false.
bool cuda_check(CUresult result, const char* call);
#define HSA_CUDA_CHECK(call) ::hsa_cuda::cuda_check((call), #call)
// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" (never NULL).
std::string cuda_error_text(CUresult result);

// Makes `target` current on this thread for the scope and puts back whatever
// was current before, so no runtime entry point changes the caller's context.
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext target);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  bool ok() const { return ok_; }

 private:
  CUcontext previous_ = nullptr;
  bool switched_ = false;
  bool ok_ = false;
};

// ---- handles -------------------------------------------------------------------

// Every handle carries its kind in the top byte (hsa_common::HandleTag) and
// the init epoch in the next 16 bits, so a handle of one kind never
// validates as another and handles from before a shutdown are unknown after
// it: tag:8 | epoch:16 | payload:40 (hsa_common::HandleLayout<16>). Symbols
// use hsa_common::symbol_handle with the same epoch.
uint64_t make_handle(HandleTag tag, uint64_t payload);
bool decode_handle(uint64_t handle, HandleTag tag, uint64_t* payload);
// The init epoch the handles carry.
uint64_t handle_epoch();

// ---- topology ------------------------------------------------------------------

struct GpuDevice {
  CUdevice device = 0;
  int ordinal = 0;
  CUcontext context = nullptr;  // the retained primary context
  std::string name;             // cuDeviceGetName
  std::string isa;              // "sm_90"
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int warp_size = 32;
  size_t total_memory = 0;
  // CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT (at least 1): the copy engines
  // hsa_amd_memory_async_copy_on_engine may name.
  uint32_t copy_engines = 1;
  // cuMemGetAllocationGranularity(MINIMUM) of device memory on this GPU
  // (2 MiB on an H200); 0 when the driver has no virtual memory management.
  size_t vmm_granularity = 0;
};

bool ready();
uint32_t gpu_count();
uint32_t agent_count();  // gpu_count() + 1
// index in 1..gpu_count()
const GpuDevice& gpu_at(uint32_t agent_index);
bool agent_index_from_handle(hsa_agent_t agent, uint32_t* index);
hsa_agent_t agent_handle(uint32_t index);
uint64_t host_memory_bytes();

// ---- pools -------------------------------------------------------------------------

struct PoolId {
  uint32_t agent_index = kCpuAgentIndex;
  hsa_cuda_pool_kind_t kind = HSA_CUDA_POOL_SYSTEM_FINE;
  bool operator==(const PoolId& other) const {
    return agent_index == other.agent_index && kind == other.kind;
  }
};
inline bool is_device_kind(hsa_cuda_pool_kind_t kind) {
  return kind == HSA_CUDA_POOL_DEVICE_COARSE;
}
uint32_t pool_global_flags(hsa_cuda_pool_kind_t kind);
uint64_t pool_handle(PoolId pool);
bool pool_from_handle(uint64_t handle, PoolId* pool);

// ---- counters -------------------------------------------------------------------------

struct Counters {
  std::atomic<uint64_t> copies[4];
  std::atomic<uint64_t> bytes[4];
  std::atomic<uint64_t> async_copies;
  std::atomic<uint64_t> violations;
  std::atomic<uint64_t> cuda_errors;
  std::atomic<uint64_t> aql_dispatches;
};
Counters& counters();

// ---- memory (hsa_cuda_memory.cpp) ---------------------------------------------------------

// How a copy's two sides were classified, for the counters and for the
// choice of the context / engine that performs it.
struct CopyPlan {
  hsa_cuda_copy_direction_t direction = HSA_CUDA_COPY_HOST_TO_HOST;
  bool dst_is_device = false;
  // The GPU agent whose context issues the copy: the source's owner if it
  // is device memory, else the destination's, else GPU 1 (the first GPU).
  uint32_t issuing_agent = 1;
};
// Classifies both ranges (under the memory lock) and counts the copy, or
// counts a violation, prints why and returns false.
bool plan_async_copy(void* dst, const void* src, size_t size, CopyPlan* plan);
// The same for a rect copy: every row is checked; one violation (nothing
// copied) if any row is one, else one copy of every row's bytes, planned as
// its first row.
bool plan_async_rect(const hsa_common::RectGeometry& geometry, CopyPlan* plan);
// The memory lock (see "Locking" above): the vmem entry points take it
// exclusively to change their records; copies and pointer queries hold it
// shared while they read them.
std::shared_mutex& memory_mutex();
// Gives the agent's quarantined device blocks back to CUDA (forgetting their
// freed ranges); true when there were any. An allocation the driver refuses
// for lack of memory calls it and retries once: the quarantine only serves
// to catch copies into freed memory, and must never make an allocation fail
// that ROCr, which frees at once, would grant.
bool release_quarantine(uint32_t agent_index);
// Module variables of loaded executables, so that copies and pointer info
// know them as device memory of their agent.
void register_variable_range(uintptr_t base, size_t size, uint32_t agent_index);
void unregister_variable_range(uintptr_t base);
// Frees every allocation and the reuse cache (shutdown).
void release_all_memory();
uint64_t live_allocation_count();

// ---- virtual memory (hsa_cuda_vmem.cpp) ----------------------------------------------------

// Called with memory_mutex() held (shared or exclusive).
// Whether [address, address + size) meets a vmem reservation.
bool vmem_range_meets_locked(uintptr_t address, size_t size);
// One side of a copy that meets a reservation: device memory inside one
// mapping some agent may access in that role (*accessor: the handle's GPU
// when it may, else the first GPU that may), else a violation (*why).
hsa_common::Side vmem_classify_locked(uintptr_t address, size_t size, CopyRole role,
                                      uint32_t* accessor, const char** why);
// hsa_amd_pointer_info's answer for an address in a reservation (see
// hsa_common::vmem_pointer_info); false when it is in none.
bool vmem_pointer_info_locked(uintptr_t address, hsa_amd_pointer_info_t* info,
                              std::vector<hsa_agent_t>* agents, bool* list_without_alloc);
// Unmaps every mapping, releases every handle and frees every reservation
// (shutdown; takes the lock itself).
void vmem_release_all();
uint64_t vmem_mapping_count();
uint64_t vmem_handle_count();
uint64_t vmem_reservation_count();

// ---- signals and copy engines (hsa_cuda_signals.cpp) ------------------------------------

void signals_start(uint32_t gpus);  // builds the (idle) engines at init
void signals_shutdown();            // stops the engines, destroys every signal
uint64_t live_signal_count();

// ---- loader (hsa_cuda_loader.cpp) ------------------------------------------------------------

void unload_all_executables();
void release_all_code_object_readers();
// What a packet processor needs to launch the kernel behind a dispatch
// packet's kernel_object (the CUfunction's value, see the loader).
struct KernelLaunch {
  CUfunction function = nullptr;
  std::string name;
  // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: the static shared memory, which the
  // packet's group_segment_size includes (ROCr's GROUP_SEGMENT_SIZE does).
  uint32_t static_shared = 0;
  uint32_t kernarg_size = 0;
  // Kernel parameters (cuFuncGetParamInfo); -1 when unknown, then the
  // kernarg segment is passed as one by-value parameter.
  int param_count = -1;
};
// The kernel of a live executable loaded on agent_index whose KERNEL_OBJECT
// is `object`; false if there is none.
bool kernel_for_object(uint64_t object, uint32_t agent_index, KernelLaunch* out);

// ---- ISAs and AQL queues (hsa_cuda_queues.cpp) ------------------------------------------------

// Handle tags of this runtime only (hsa_common::HandleTag lists the shared
// ones; these values are not among them).
constexpr HandleTag kIsaTag = static_cast<HandleTag>(0x9A);
constexpr HandleTag kCodeObjectReaderTag = static_cast<HandleTag>(0x8B);
// "nvptx-nvidia-cuda--sm_90": what hsa_isa_get_info_alt(NAME) says for a GPU.
std::string isa_name(uint32_t agent_index);
// hsa_agent_get_info's queue attributes for a GPU (QUEUE_MIN_SIZE,
// QUEUE_MAX_SIZE, QUEUE_TYPE, ISA); false for any other attribute.
bool write_queue_agent_info(uint32_t agent_index, uint32_t attribute, void* value);
// Stops every packet processor and destroys every queue (shutdown, before the
// signals go).
void queues_shutdown();
uint64_t live_queue_count();
// The runtime's signal table (hsa_cuda_signals.cpp), for the packet
// processors' doorbells and completion signals.
hsa_common::SignalTable& signal_table();

// ---- entry points, by file, for the tables ------------------------------------------------

// The core entries only this runtime has, beside the AQL queue and
// code-object entries both runtimes implement (hsa_common_tables.h; ISAs and
// queues in hsa_cuda_queues.cpp, readers and executables in
// hsa_cuda_loader.cpp). The field names are the same in every header
// generation this builds against (5.2 to 7.x).
#define HSA_CUDA_EXTRA_CORE_ENTRIES(ENTRY)                                 \
  ENTRY(CoreApiTable, hsa_isa_get_info_fn, isa_get_info)                   \
  ENTRY(CoreApiTable, hsa_isa_from_name_fn, isa_from_name)                 \
  ENTRY(CoreApiTable, hsa_executable_get_info_fn, executable_get_info)

// init, shut_down, iterate_agents, agent_get_info: hsa_cuda_runtime.cpp;
// regions, pools, allocation, copies, pointer info: hsa_cuda_memory.cpp;
// executables: hsa_cuda_loader.cpp; amd_memory_async_copy:
// hsa_cuda_signals.cpp. Declared with the types of their table fields (the
// lists are in hsa_common_tables.h).
namespace api {
HSA_COMMON_RUNTIME_CORE_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
HSA_COMMON_RUNTIME_AMD_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
HSA_COMMON_RUNTIME_AQL_CORE_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
HSA_CUDA_EXTRA_CORE_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
}  // namespace api

// The signal entries (hsa_common::SignalEntries over this runtime's signal
// table); hsa_cuda_signals.cpp places them in the tables.
void fill_signal_core_entries(CoreApiTable* core);
void fill_signal_amd_entries(AmdExtTable* amd);

}  // namespace hsa_cuda

#endif /* HSA_CUDA_INTERNAL_H */
