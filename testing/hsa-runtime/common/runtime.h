/* runtime.h: what the front end's files and the backends share
 * (include/hsa_rt.h is the public control interface).
 *
 * The front end (this directory) implements every HSA semantic once:
 *   runtime.cpp  state, handles, topology, init/reset, agent and system
 *                queries, ISAs, status strings, the tables (from
 *                hsa-sys/hsa_entries.def), fault injection, modes, counters
 *   memory.cpp   pools, allocation map, quarantine and reuse, copy checking,
 *                hsa_memory_copy, pointer info, access grants
 *   signals.cpp  signals, async handlers, the asynchronous copy engines
 *   vmem.cpp     the virtual memory API's records and rules
 *   loader.cpp   executables, symbols, code object readers
 *   queues.cpp   AQL queues and their packet processors
 *   app.cpp      the plain hsa_* names, trampolines through the live tables
 * over the backend interface at the end of this file, which one backend
 * (host/ or cuda/) implements.
 *
 * Locking: memory_mutex() (shared: copies, lookups; exclusive: changes)
 * guards Memory (allocations, quarantine, vmem records, locked host memory);
 * the loader, the queue registry, the signal table, each copy engine and the
 * faults have a mutex each. Orders: the loader's lock before the memory
 * lock, the memory lock before the faults'; no other path holds two, and no
 * user callback runs while any is held.
 */
#ifndef HSA_RT_RUNTIME_H
#define HSA_RT_RUNTIME_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include "hsa_entries.h"
#include "hsa_rt.h"

namespace hsa_rt {

// ---- constants ------------------------------------------------------------------

constexpr uint32_t kCpu = 0;  // agent index 0 is the CPU, 1..gpu_count the GPUs
inline bool is_gpu(uint32_t index) { return index != kCpu; }
constexpr uint32_t kNoAgent = UINT32_MAX;
constexpr size_t kGranule = 4096;              // RUNTIME_ALLOC_GRANULE
constexpr uint64_t kTimestampHz = 1000000000;  // timeouts are in nanoseconds
constexpr uint32_t kQueueMinSize = 0x40;
constexpr uint32_t kQueueMaxSize = 0x20000;
constexpr uint32_t kQueuesMax = 128;
constexpr uint32_t kPermissionNone = 0, kPermissionReadOnly = 1, kPermissionWriteOnly = 2,
                   kPermissionReadWrite = 3;
// RESERVED_ADDR, which the 6.0 - 6.3 headers do not name.
constexpr auto kPointerTypeReservedAddr = static_cast<hsa_amd_pointer_type_t>(5);
// AMD codes in anonymous enums of hsa_ext_amd.h.
constexpr auto kInvalidMemoryPool = static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
constexpr auto kApertureViolation =
    static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION);

// Writes an attribute with exactly its width (the buffer may be unaligned).
template <typename T>
void write_value(void* out, const T& value) {
  std::memcpy(out, &value, sizeof(T));
}
// A char[capacity] attribute, NUL-padded and truncated.
void write_string(void* out, size_t capacity, const std::string& text);
// An attribute query's answer: the value written, SUCCESS.
template <typename T>
hsa_status_t answer(void* out, const T& value) {
  write_value(out, value);
  return HSA_STATUS_SUCCESS;
}
inline hsa_status_t answer_string(void* out, size_t capacity, const std::string& text) {
  write_string(out, capacity, text);
  return HSA_STATUS_SUCCESS;
}
// Rounds up to a multiple of granule; false on overflow.
bool round_up(size_t size, size_t granule, size_t* rounded);
// Calls call(item) in order; the first status other than SUCCESS is returned.
template <typename Item, typename Call>
hsa_status_t call_each(const std::vector<Item>& items, Call call) {
  for (const Item& item : items) {
    const hsa_status_t status = call(item);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}
// The entry of a base-keyed map whose [base, base + extent(value)) holds
// address, or end(); and whether [address, address + size) meets any.
template <typename Map, typename Extent>
auto find_containing(Map& map, uintptr_t address, Extent extent) -> decltype(map.begin()) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address - it->first < extent(it->second) ? it : map.end();
}
template <typename Map, typename Extent>
bool range_meets(const Map& map, uintptr_t address, size_t size, Extent extent) {
  if (find_containing(map, address, extent) != map.end()) return true;
  auto next = map.upper_bound(address);
  return next != map.end() && next->first - address < size;
}

// ---- handles --------------------------------------------------------------------
//
// tag:8 | epoch:16 | payload:40. The epoch (reset count) makes every handle
// from before a reset unknown after it; signals carry none (they survive
// resets): tag | serial. Symbols: tag | epoch | executable:20 | index:20.

enum class Tag : uint8_t {
  kAgent = 0xA6,
  kPool = 0xB7,  // also the hsa_region_t of the same memory, as in ROCr
  kExecutable = 0xC8,
  kSymbol = 0xD9,
  kSignal = 0xE5,
  kVmemHandle = 0xF6,
  kIsa = 0x97,
  kReader = 0x86,
  kLoadedCodeObject = 0x75,
};
uint64_t make_handle(Tag tag, uint64_t payload);
bool decode_handle(uint64_t handle, Tag tag, uint64_t* payload);
constexpr uint64_t kSymbolFieldMask = (uint64_t{1} << 20) - 1;

// ---- state, topology -------------------------------------------------------------

// What hsa_agent_get_info says of an agent beyond what every agent answers.
struct AgentDescription {
  std::string name;  // the CPU's; a GPU's is its ISA's processor
  std::string vendor;
  std::string product;
  uint32_t wavefront_size = 0;
  uint32_t compute_units = 0;
  bool has_uuid = false;
  std::string uuid;
  std::string isa;        // default ISA ("" for none)
  uint64_t memory = 0;    // device memory (pool SIZE)
  uint32_t engines = 0;   // copy engines (async_copy_on_engine)
};

bool ready();
uint32_t gpu_count();
bool agent_index(hsa_agent_t agent, uint32_t* index);
hsa_agent_t agent_handle(uint32_t index);
const AgentDescription& agent_description(uint32_t index);
// The agent's ISA now ("" for none); read under memory_mutex().
const std::string& agent_isa_locked(uint32_t index);
// What NOT_INITIALIZED-checking entries return first.
#define HSA_RT_REQUIRE_READY()                                        \
  do {                                                                \
    if (!::hsa_rt::ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED; \
  } while (0)

struct PoolId {
  uint32_t agent = kCpu;
  hsa_rt_pool_kind_t kind = HSA_RT_POOL_SYSTEM_FINE;
  bool operator==(const PoolId& other) const { return agent == other.agent && kind == other.kind; }
};
inline bool is_device_kind(hsa_rt_pool_kind_t kind) {
  return kind == HSA_RT_POOL_DEVICE_COARSE || kind == HSA_RT_POOL_DEVICE_FINE;
}
uint32_t pool_flags(hsa_rt_pool_kind_t kind);
uint64_t pool_handle(PoolId pool);
bool pool_from_handle(uint64_t handle, PoolId* pool);

// ---- faults, modes, counters -------------------------------------------------------

// Armed faults (hsa_rt_inject); a flag is on when not 0.
struct Faults {
  uint64_t pointer_info = 0;
  uint64_t d2h_at = 0, d2h_seen = 0;
  std::vector<uintptr_t> h2d_into, copies_into, copies_from;
  std::map<uint64_t, bool> refused_walks;  // executable handle -> refused
  std::map<uint32_t, bool> symbol_queries;
  uint64_t executable_iteration = 0, loader_extension = 0;
  uint64_t allocations = 0, frees = 0, queue_creations = 0, code_object_loads = 0,
           dispatches = 0;
  uint64_t async_at = 0, async_seen = 0, async_error_at = 0, async_error_seen = 0;
  uint64_t vmem_at[5] = {}, vmem_seen[5] = {};
  uint64_t locks = 0, unlocks = 0;
  uint64_t svm_sets = 0, svm_gets = 0, svm_prefetches = 0;
};
enum class VmemOp { kHandleCreate, kHandleRelease, kMap, kUnmap, kSetAccess };
std::mutex& faults_mutex();
Faults& faults_locked();
// Runs f(Faults&) under the faults' lock and returns what it returns.
template <typename F>
auto with_faults(F f) -> decltype(f(std::declval<Faults&>())) {
  std::lock_guard<std::mutex> lock(faults_mutex());
  return f(faults_locked());
}
// Takes one of a "next count" fault; true when this call is to fail.
bool take_fault(uint64_t Faults::*count);
// An n-th fault: true when this call is the one.
bool nth_fault(uint64_t* at, uint64_t* seen);
bool vmem_fault(VmemOp op);
// Whether [begin, begin + size) holds one of the addresses.
bool covers(const std::vector<uintptr_t>& addresses, const void* begin, size_t size);

bool mode(hsa_rt_mode_t mode);

struct Counters {
  std::atomic<uint64_t> copies[4]{}, bytes[4]{};
  std::atomic<uint64_t> violations{0}, async_copies{0}, pointer_info{0}, dispatches{0},
      backend_errors{0}, locks{0}, unlocks{0}, svm_migrations{0}, svm_prefetches{0};
  std::mutex mutex;  // by_kernel
  std::map<std::string, uint64_t> by_kernel;
};
Counters& counters();
// Counts a copy violation; says why on stderr when the backend reports them.
void count_violation(const char* what, const void* dst, const void* src, size_t size,
                     const char* side, const char* why);

// ---- memory (memory.cpp, vmem.cpp) ---------------------------------------------------

enum class Origin { kPool, kRegion, kVariable };
struct Block {
  uint8_t* base = nullptr;
  size_t bytes = 0;   // what the backend allocated
  size_t extent = 0;  // what the owner may touch (rounded size, or a variable's)
  Origin origin = Origin::kPool;
  PoolId pool;
  uint32_t alloc_flags = 0;
  std::vector<uint32_t> accessible;  // agent indices, owner first
  void* user_data = nullptr;
  bool owned = true;  // the backend's to release (not a module's variable)
};

struct VmemHandle {
  PoolId pool;
  size_t size = 0;
  uint32_t type = 0;  // hsa_amd_memory_type_t
  uint32_t refs = 1, maps = 0;
  void* backend = nullptr;  // the backend's object
};
using VmemAccess = std::map<uint32_t, uint32_t>;  // agent index -> permission
struct VmemMapping {
  size_t size = 0;
  uint32_t handle = 0;
  VmemAccess access;
};
struct VmemReservation {
  size_t size = 0;   // what the caller asked for
  size_t bytes = 0;  // what the backend reserved
  // 7.x HSA_AMD_VMEM_ADDRESS_NO_REGISTER: an anonymous read-write mmap of
  // the front end's (host memory, SVM), not the backend's address space.
  bool registered = true;
};

// Host memory locked for GPUs (hsa_amd_memory_lock / _lock_to_pool), by its
// start: one record however often it was locked there.
struct Locked {
  size_t size = 0;
  hsa_rt_pool_kind_t kind = HSA_RT_POOL_SYSTEM_COARSE;  // the pool locked to: its grain
  std::vector<uint32_t> gpus;  // mapped for, in the order first named
  uint32_t count = 1;          // locks not unlocked yet
  bool registered = false;     // the backend holds a registration to undo
};

struct Memory {
  std::map<uintptr_t, Block> live;  // allocations and variable storage
  struct Quarantined {
    Block block;
    uint64_t sequence = 0;
  };
  std::map<uintptr_t, Quarantined> quarantine;
  std::deque<std::pair<uintptr_t, uint64_t>> order;  // oldest first
  uint64_t quarantine_bytes = 0, next_sequence = 1;
  std::map<uintptr_t, size_t> unbacked;  // raw variables' ranges
  std::vector<uint64_t> device_bytes;    // per agent: live device allocations + handles
  std::map<uintptr_t, VmemReservation> reservations;
  std::map<uint32_t, VmemHandle> handles;
  std::map<uintptr_t, VmemMapping> mappings;
  uint32_t next_handle = 1;
  std::map<uintptr_t, Locked> locks;
};
std::shared_mutex& memory_mutex();
Memory& memory();
using SharedLock = std::shared_lock<std::shared_mutex>;
using ExclusiveLock = std::unique_lock<std::shared_mutex>;

// Blocks given back to the backend once the memory lock is dropped.
using Released = std::vector<Block>;
bool release_blocks(const Released& blocks);
// Moves a dead block into the quarantine (or straight to `released`).
void quarantine_locked(Block block, Released* released);
// Frees everything (reset).
void release_all_memory();
// Takes or gives back device bytes of a GPU: false (nothing taken) past its
// capacity (backend::device_capacity; 0: unbounded).
bool take_device_bytes_locked(uint32_t agent, uint64_t bytes);
void give_device_bytes_locked(uint32_t agent, uint64_t bytes);
// Gives an agent's quarantined blocks back (an allocation out of memory).
bool release_quarantine_of(uint32_t agent);
// Storage of a variable: allocated and zeroed (owned), or a module's.
uint8_t* allocate_variable_locked(uint32_t agent, uint32_t size);
void register_variable_locked(uintptr_t base, size_t size, uint32_t agent);

enum class Side { kHost, kDevice, kViolation };
enum class Role { kSource, kDestination };
inline bool permission_allows(uint32_t permission, Role role) {
  return role == Role::kSource
             ? permission == kPermissionReadOnly || permission == kPermissionReadWrite
             : permission == kPermissionWriteOnly || permission == kPermissionReadWrite;
}
// One side of a copy, with memory_mutex() held: the owning agent (a GPU that
// may access a vmem mapping that way), or kNoAgent; *why for a violation.
Side classify_locked(const void* ptr, size_t size, Role role, uint32_t* owner, const char** why);
struct CopyPlan {
  uint32_t direction = 0;  // host->host 0, ->device 1, device->host 2, ->device 3
  bool dst_device = false, src_device = false;
  uint32_t issuing_agent = 1;  // the GPU whose context copies (CUDA)
};
// Both sides; a violation is counted (with what) and false returned.
bool plan_copy_locked(const char* what, void* dst, const void* src, size_t size, CopyPlan* plan);
void count_copy(const CopyPlan& plan, uint64_t bytes);
// Whether agent can reach ptr: a block's accessible agents, a vmem
// permission other than NONE, or for memory the runtime does not own the
// CPU and the GPUs it is locked for.
bool agent_can_access_locked(uint32_t agent, const void* ptr);
// A vmem permission of agent at address; false when it is in no mapping.
bool vmem_permission_locked(uintptr_t address, uint32_t agent, uint32_t* permission);
// Where an engine reads or writes ptr (a mapping's handle memory, host).
void* engine_address_locked(const void* ptr);
// Reserved address space (vmem.cpp), with memory_mutex() held.
bool vmem_meets_locked(uintptr_t address, size_t size);
Side vmem_side_locked(uintptr_t address, size_t size, Role role, uint32_t* owner,
                      const char** why);
// hsa_amd_pointer_info's answer in a reservation; false when in none.
bool vmem_pointer_info_locked(uintptr_t address, hsa_amd_pointer_info_t* info,
                              std::vector<hsa_agent_t>* agents, bool* no_alloc);
void vmem_release_all_locked();

// Shared virtual memory (svm.cpp); its own lock, a leaf (memory_mutex() may
// be held). Whether a GPU may reach SVM memory at address (XNACK, or its
// access attributes); an access of [ptr, ptr + size) by an agent (a GPU's
// engine or dispatch, the CPU's hsa_memory_copy): counts its SVM bytes and
// the migrations it causes; dropping a range's attributes (its memory
// unmapped); reset; the per-agent bytes cleared; the ranges kept.
bool svm_gpu_may_access(uint32_t agent, uintptr_t address);
void svm_access(uint32_t agent, const void* ptr, size_t size);
void svm_forget(uintptr_t base, size_t size);
void svm_reset();
void svm_reset_counters();
uint64_t svm_range_count();

// ---- signals and engines (signals.cpp) -------------------------------------------------

hsa_signal_value_t load_signal(hsa_signal_t signal);
void store_signal(hsa_signal_t signal, hsa_signal_value_t value);
void subtract_signal(hsa_signal_t signal, hsa_signal_value_t value);
hsa_signal_value_t wait_signal(hsa_signal_t signal, hsa_signal_condition_t condition,
                               hsa_signal_value_t compare, uint64_t timeout_ns);
uint32_t wait_any_signal(uint32_t count, const hsa_signal_t* signals,
                         const hsa_signal_condition_t* conditions,
                         const hsa_signal_value_t* values, uint64_t timeout_ns,
                         hsa_signal_value_t* satisfying);
// The runtime's own signals (doorbells), not counted as live.
hsa_signal_t create_runtime_signal(hsa_signal_value_t value);
void destroy_runtime_signal(hsa_signal_t signal);
// Whether every dependency reads 0 (destroyed ones count as satisfied); with
// block, waits until they do or give_up is set (see wake_signal_waiters).
bool dependencies_satisfied(const std::vector<hsa_signal_t>& deps, bool block,
                            const std::atomic<bool>& give_up);
void wake_signal_waiters();
// Whether a signal exists (created and not destroyed).
bool signal_known(hsa_signal_t signal);
// The end of an asynchronous copy: ok decrements the completion, else -1.
void complete_copy(hsa_signal_t completion, bool ok);
void drain_engines();         // reset: waits for queued copies (drops blocked ones)
void destroy_all_signals();   // shutdown
uint64_t live_signal_count();
uint64_t armed_handler_count();
uint64_t invalid_signal_uses();
void reset_invalid_signal_uses();

// A queued asynchronous copy: linear (one row) or a rect copy's rows.
struct RectGeometry {
  hsa_pitched_ptr_t dst{}, src{};
  hsa_dim3_t dst_offset{}, src_offset{}, range{};
};
struct AsyncJob {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t size = 0;
  bool rect = false;
  RectGeometry geometry;
  std::vector<hsa_signal_t> dependencies;
  hsa_signal_t completion{0};
  uint32_t copy_agent = kCpu;
  bool inject_error = false;
  uint64_t rows() const { return rect ? uint64_t{geometry.range.y} * geometry.range.z : 1; }
  void* dst_row(uint64_t row) const;
  const void* src_row(uint64_t row) const;
};

// ---- loader and queues -----------------------------------------------------------------

// A kernel a dispatch can run, as the queue's processor needs it.
struct KernelInfo {
  std::string name;  // without ".kd"
  uint64_t object = 0;
  uint32_t kernarg_size = 0, group_size = 0, private_size = 0;
  int param_count = -1;  // CUDA: its parameters (-1 unknown)
};
// The dispatchable kernel of a live executable of `agent` with that kernel
// object; false when there is none.
bool find_kernel(uint64_t object, uint32_t agent, KernelInfo* out);
void unload_all_executables();   // reset
void retire_all_queues();        // reset
uint64_t live_queue_count();

// What a symbol of an executable is (hsa_executable_symbol_get_info).
struct Symbol {
  hsa_symbol_kind_t kind = HSA_SYMBOL_KIND_VARIABLE;
  std::string name;
  uint64_t address = 0;  // variable address, or the kernel object
  uint32_t size = 0;     // VARIABLE_SIZE
  bool is_constant = false;
  uint32_t kernarg_size = 0, group_size = 0, private_size = 0;
  uint32_t agent = kCpu;
  bool dispatchable = false;  // loaded from a code object
  int param_count = -1;
};

// ---- the backend interface ---------------------------------------------------------------
//
// One backend (host/ or cuda/) defines all of these. The front end calls
// them without its locks unless a comment says otherwise.
namespace backend {

hsa_rt_backend_t kind();
// Brings the backend up with at most `wanted` GPUs (UINT32_MAX: its
// default): fills one description per agent, the CPU's first.
hsa_rt_init_status_t start(uint32_t wanted, std::vector<AgentDescription>* agents,
                           std::string* message);
// After every front-end object is gone: reset (stop == false) or shutdown.
void stop(bool shutdown);
bool reports_violations();

// Memory.
bool has_pool(hsa_rt_pool_kind_t kind);
size_t pool_alignment(hsa_rt_pool_kind_t kind);
uint64_t system_pool_size();
uint64_t device_capacity(uint32_t agent);  // 0: the driver decides
hsa_status_t memory_avail(uint32_t agent, uint64_t* bytes);
hsa_status_t allocate(PoolId pool, size_t bytes, void** base);  // OUT_OF_RESOURCES
bool release(const Block& block);
// Host memory locked for the GPUs, with memory_mutex() held (exclusive):
// SUCCESS with *registered when there is a registration for unlock_host to
// undo; an error status when the backend refuses the range.
hsa_status_t lock_host(void* base, size_t size, bool* registered);
void unlock_host(void* base);
bool quarantines(hsa_rt_pool_kind_t kind);
uint64_t quarantine_max_bytes();
size_t quarantine_max_blocks();
bool quarantine_holds_memory();       // an allocation out of memory gets it back
void poison(void* base, size_t bytes);           // with memory_mutex() held
bool poison_intact(const void* base, size_t bytes);
bool zero(uint32_t agent, void* base, size_t bytes);  // a variable's storage
bool runtime_memory_is_device();
// Memory the runtime does not own: device memory the driver knows, or host.
Side foreign_side(uintptr_t address, size_t size);
// A synchronous copy, with memory_mutex() held (shared).
bool copy(void* dst, const void* src, size_t size, const CopyPlan& plan);

// Asynchronous copy engines.
uint32_t engine_count();
uint32_t engine_of(uint32_t copy_agent);
enum class Queued { kDone, kFailed, kLater };
// Performs (or enqueues, then completes itself) the job's rows, with
// memory_mutex() held (shared); kDone / kFailed: the front end completes.
Queued async_copy(uint32_t engine, const AsyncJob& job, const CopyPlan& plan);
void flush(uint32_t engine);  // what async_copy left queued goes
void drain();                 // waits for every copy async_copy queued

// Virtual memory, with memory_mutex() held (exclusive).
size_t vmem_granularity(uint32_t agent);  // 0: no virtual memory management
hsa_status_t vmem_reserve(size_t size, uint64_t alignment, uint64_t hint, uintptr_t* base,
                          size_t* bytes);
void vmem_free(uintptr_t base, const VmemReservation& reservation);
hsa_status_t vmem_create(PoolId pool, size_t size, void** handle);
void vmem_destroy(const VmemHandle& handle);
bool vmem_map(uintptr_t va, size_t size, const VmemHandle& handle);
bool vmem_unmap(uintptr_t va, size_t size, const VmemHandle& handle);
// Whether the backend can give `permission` to the agent at all (else
// HSA_STATUS_ERROR with nothing changed).
bool vmem_grantable(uint32_t agent, uint32_t permission, const void* va);
bool vmem_set_access(uintptr_t va, const VmemMapping& mapping, const VmemHandle& handle,
                     const VmemAccess& after);
// Where an engine reaches offset of a handle (NULL: at its mapping).
void* vmem_engine_address(const VmemHandle& handle, size_t offset);

// Code objects.
struct Loaded {
  void* module = nullptr;
  std::vector<Symbol> kernels;  // those the object lists (host)
};
hsa_status_t load(uint32_t agent, const std::string& agent_isa, const void* image, size_t size,
                  Loaded* out);
void unload(uint32_t agent, void* module);
// A symbol of a loaded module by name (CUDA), with address and size or the
// kernel's attributes; INVALID_SYMBOL_NAME when it has none.
hsa_status_t find_symbol(uint32_t agent, void* module, const std::string& name, bool kernel,
                         Symbol* out);

// Queues and dispatches.
hsa_status_t queue_start(uint32_t agent, void** data);
void queue_stop(uint32_t agent, void* data);
// Runs one dispatch of a known kernel to completion (the front end has
// checked the packet's dimensions, workgroup and kernel).
hsa_status_t dispatch(uint32_t agent, void* queue_data, const hsa_kernel_dispatch_packet_t& packet,
                      const KernelInfo& kernel);

// CUDA accessors of the control interface (NULL / -1 elsewhere).
const cuda_driver_t* driver();
int device(uint32_t agent);
CUctx_st* context(uint32_t agent);

}  // namespace backend

}  // namespace hsa_rt

// Every table entry's implementing function, with exactly its field's type
// (from hsa-sys/hsa_entries.def; runtime.cpp checks each signature).
namespace hsa_rt::api {
#define HSA_ENTRY_VISIT(table, name, library, runtime, signature) \
  HSA_ENTRY_RET(signature) runtime(HSA_ENTRY_PARAMS(signature));
#include "hsa_entries.h"
}  // namespace hsa_rt::api

#endif /* HSA_RT_RUNTIME_H */
