// hsa_cuda_memory.cpp: pools and regions, the allocation map, address reuse,
// hsa_memory_copy, pointer info and access grants, on CUDA memory.
//
// Device pools allocate with cuMemAlloc in the owning GPU's primary context;
// system pools allocate pinned host memory with cuMemHostAlloc (portable, so
// every context sees it as pinned). The runtime keeps its own map of what it
// handed out (base -> rounded size, pool, flags, grants), which is what
// hsa_amd_pointer_info answers from and what hsa_memory_copy checks both
// sides against. Ranges freed through the runtime are remembered (a bounded
// FIFO) so that a copy into memory freed since is refused and counted instead
// of silently scribbling on whatever CUDA put there next (device memory and
// module storage only: see free_allocation). Virtual memory reservations
// and mappings (hsa_cuda_vmem.cpp) are checked first, under the same lock.

#include <algorithm>
#include <cstdio>
#include <deque>
#include <tuple>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

constexpr uint32_t kNoAgent = std::numeric_limits<uint32_t>::max();
// Freed ranges remembered for copy checking; the oldest are forgotten beyond.
constexpr size_t kFreedRangesMax = 65536;
// Freed device blocks are quarantined (kept allocated) up to these limits
// before cuMemFree: once the driver has the address back it may map it as
// host memory (seen on an H200: malloc handed out a freed device range), and
// a copy there could no longer be told from a copy into freed device memory.
constexpr uint64_t kQuarantineBytesMax = uint64_t{8} << 30;
constexpr size_t kQuarantineBlocksMax = 4096;

struct Allocation {
  size_t extent = 0;  // the granule-rounded size actually allocated
  PoolId pool;
  uint32_t alloc_flags = 0;  // flags given to hsa_amd_memory_pool_allocate
  bool from_region = false;  // hsa_memory_allocate
  std::vector<uint32_t> accessible;  // agent indices, owner first
  void* user_data = nullptr;
};

struct Variable {
  size_t size = 0;
  uint32_t agent_index = kNoAgent;
};

struct FreedRange {
  size_t size = 0;
  uint64_t sequence = 0;
};

struct MemoryState {
  // Copies take it shared for the check and the copy, so a concurrent free
  // (exclusive) can neither slip between them nor free memory mid-copy.
  std::shared_mutex mutex;
  std::map<uintptr_t, Allocation> live;
  std::map<uintptr_t, Variable> variables;
  std::map<uintptr_t, FreedRange> freed;
  std::deque<std::pair<uintptr_t, uint64_t>> freed_order;
  uint64_t next_freed_sequence = 1;
  bool address_reuse = false;
  // (agent index, rounded size) -> bases, most recently freed last.
  std::map<std::pair<uint32_t, size_t>, std::vector<uintptr_t>> reuse_cache;
  uint64_t reuse_cache_bytes = 0;
  // Freed device blocks not yet given back to the driver, oldest first.
  std::deque<std::tuple<uintptr_t, size_t, PoolId>> quarantine;
  uint64_t quarantine_bytes = 0;
};

MemoryState& memory() {
  // Never destroyed: a detached waiter or a late free at exit must not find
  // it gone.
  static MemoryState* const state = new MemoryState;
  return *state;
}

using SharedLock = std::shared_lock<std::shared_mutex>;
using ExclusiveLock = std::unique_lock<std::shared_mutex>;

size_t extent_of(const Allocation& a) { return a.extent; }
size_t extent_of(const Variable& v) { return v.size; }
size_t extent_of(const FreedRange& f) { return f.size; }

// The range of an entry in the maps keyed by base that
// hsa_common::find_containing / range_meets search.
constexpr auto kExtent = [](const auto& entry) { return extent_of(entry); };

using hsa_common::find_containing;
using hsa_common::range_meets;

// ---- pools -----------------------------------------------------------------------

bool agent_owns_kind(uint32_t agent_index, hsa_cuda_pool_kind_t kind) {
  return is_gpu_index(agent_index) == is_device_kind(kind);
}

uint64_t pool_size(PoolId pool) {
  return is_device_kind(pool.kind) ? gpu_at(pool.agent_index).total_memory : host_memory_bytes();
}

// Pools an agent owns: a GPU its device pool, the CPU the system pools (fine,
// kernarg, coarse: the order rocminfo shows for ROCr).
std::vector<PoolId> owned_pools(uint32_t agent_index) {
  if (is_gpu_index(agent_index)) return {{agent_index, HSA_CUDA_POOL_DEVICE_COARSE}};
  return {{agent_index, HSA_CUDA_POOL_SYSTEM_FINE},
          {agent_index, HSA_CUDA_POOL_SYSTEM_KERNARG},
          {agent_index, HSA_CUDA_POOL_SYSTEM_COARSE}};
}

// What the pool/region attribute queries report about a pool: each pool
// reports the alignment its allocator guarantees.
hsa_common::PoolDescription describe_pool(PoolId pool) {
  hsa_common::PoolDescription description;
  description.global_flags = pool_global_flags(pool.kind);
  description.size = size_t(pool_size(pool));
  description.granule = kGranule;
  description.alignment = is_device_kind(pool.kind) ? kDeviceAlignment : kHostAlignment;
  description.device = is_device_kind(pool.kind);
  return description;
}

// ---- the map ------------------------------------------------------------------------

void forget_freed_overlapping_locked(MemoryState& m, uintptr_t base, size_t size) {
  auto it = m.freed.upper_bound(base);
  if (it != m.freed.begin()) {
    auto previous = std::prev(it);
    if (base - previous->first < previous->second.size) m.freed.erase(previous);
  }
  while (it != m.freed.end() && it->first - base < size) it = m.freed.erase(it);
}

void remember_freed_locked(MemoryState& m, uintptr_t base, size_t size) {
  forget_freed_overlapping_locked(m, base, size);
  const uint64_t sequence = m.next_freed_sequence++;
  m.freed[base] = FreedRange{size, sequence};
  m.freed_order.emplace_back(base, sequence);
  // Entries forgotten because the address was allocated again leave stale
  // order entries behind; they are skipped (sequence mismatch) and bounded.
  while (m.freed.size() > kFreedRangesMax || m.freed_order.size() > 2 * kFreedRangesMax) {
    const auto [old_base, old_sequence] = m.freed_order.front();
    m.freed_order.pop_front();
    auto found = m.freed.find(old_base);
    if (found != m.freed.end() && found->second.sequence == old_sequence) m.freed.erase(found);
  }
}

// Gives a block back to CUDA, in the context that owns it.
bool release_block(uintptr_t base, PoolId pool) {
  if (is_device_kind(pool.kind)) {
    ScopedContext scope(gpu_at(pool.agent_index).context);
    return scope.ok() && HSA_CUDA_CHECK(cu().cuMemFree(CUdeviceptr(base)));
  }
  ScopedContext scope(gpu_at(1).context);
  return scope.ok() && HSA_CUDA_CHECK(cu().cuMemFreeHost(reinterpret_cast<void*>(base)));
}

// Puts a freed device block (its freed range already remembered) into the
// quarantine; what goes over the limits (the oldest blocks, or this one if it
// alone is too large) is forgotten and added to `released`, for the caller to
// give back to CUDA once the lock is dropped. Every path that hands a freed
// device block back to CUDA goes through here, so no freed-range record ever
// outlives the reservation of its addresses.
void quarantine_locked(MemoryState& m, uintptr_t base, size_t extent, PoolId pool,
                       std::vector<std::pair<uintptr_t, PoolId>>* released) {
  m.quarantine.emplace_back(base, extent, pool);
  m.quarantine_bytes += extent;
  while (!m.quarantine.empty() && (m.quarantine_bytes > kQuarantineBytesMax ||
                                   m.quarantine.size() > kQuarantineBlocksMax)) {
    const auto [old_base, old_extent, old_pool] = m.quarantine.front();
    m.quarantine.pop_front();
    m.quarantine_bytes -= old_extent;
    forget_freed_overlapping_locked(m, old_base, old_extent);
    released->emplace_back(old_base, old_pool);
  }
}

bool release_blocks(const std::vector<std::pair<uintptr_t, PoolId>>& blocks) {
  bool ok = true;
  for (const auto& [base, pool] : blocks) ok &= release_block(base, pool);
  return ok;
}

// cuMemAlloc in the current context; out of memory once, the agent's
// quarantine goes back to the driver and the allocation is tried again.
CUresult allocate_device(uint32_t agent_index, size_t bytes, CUdeviceptr* device) {
  CUresult result = cu().cuMemAlloc(device, bytes);
  if (result == CUDA_ERROR_OUT_OF_MEMORY && release_quarantine(agent_index)) {
    result = cu().cuMemAlloc(device, bytes);
  }
  return result;
}

hsa_status_t allocate(PoolId pool, size_t size, uint32_t flags, bool from_region, void** ptr) {
  // ROCr refuses sizes over the pool's ALLOC_MAX_SIZE with INVALID_ALLOCATION.
  size_t rounded = 0;
  if (size > pool_size(pool) || !hsa_common::round_up(size, kGranule, &rounded)) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  MemoryState& m = memory();
  Allocation allocation;
  allocation.extent = rounded;
  allocation.pool = pool;
  allocation.alloc_flags = flags;
  allocation.from_region = from_region;
  allocation.accessible = hsa_common::initial_accessible_agents(
      pool.agent_index, is_device_kind(pool.kind), from_region, gpu_count());

  if (is_device_kind(pool.kind)) {
    // Address reuse: the most recently freed block of the same size on the
    // same agent comes back, still holding whatever it held.
    ExclusiveLock lock(m.mutex);
    auto cached = m.reuse_cache.find({pool.agent_index, rounded});
    if (m.address_reuse && cached != m.reuse_cache.end()) {
      const uintptr_t base = cached->second.back();
      cached->second.pop_back();
      if (cached->second.empty()) m.reuse_cache.erase(cached);
      m.reuse_cache_bytes -= rounded;
      forget_freed_overlapping_locked(m, base, rounded);
      m.live[base] = std::move(allocation);
      *ptr = reinterpret_cast<void*>(base);
      return HSA_STATUS_SUCCESS;
    }
  }

  uintptr_t base = 0;
  if (is_device_kind(pool.kind)) {
    ScopedContext scope(gpu_at(pool.agent_index).context);
    if (!scope.ok()) return HSA_STATUS_ERROR;
    CUdeviceptr device = 0;
    const CUresult result = allocate_device(pool.agent_index, rounded, &device);
    // Out of memory is an answer, not a fault: ROCr says OUT_OF_RESOURCES.
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    if (!HSA_CUDA_CHECK(result)) return HSA_STATUS_ERROR;
    base = uintptr_t(device);
  } else {
    // Pinned host memory. PORTABLE: pinned for every context, not just the
    // one current here. DEVICEMAP for the fine-grained pools, which kernels
    // access in place (with unified addressing the device address is the
    // host address). The coarse-grained pool is the staging tier a tool
    // copies through, not memory kernels touch.
    ScopedContext scope(gpu_at(1).context);
    if (!scope.ok()) return HSA_STATUS_ERROR;
    const unsigned int host_flags = pool.kind == HSA_CUDA_POOL_SYSTEM_COARSE
                                        ? CU_MEMHOSTALLOC_PORTABLE
                                        : CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP;
    void* host = nullptr;
    const CUresult result = cu().cuMemHostAlloc(&host, rounded, host_flags);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    if (!HSA_CUDA_CHECK(result)) return HSA_STATUS_ERROR;
    base = reinterpret_cast<uintptr_t>(host);
  }
  {
    ExclusiveLock lock(m.mutex);
    forget_freed_overlapping_locked(m, base, rounded);
    m.live[base] = std::move(allocation);
  }
  *ptr = reinterpret_cast<void*>(base);
  return HSA_STATUS_SUCCESS;
}

// hsa_memory_free and hsa_amd_memory_pool_free are one operation in ROCr:
// NULL is a successful no-op; anything but the base of a live allocation is
// HSA_STATUS_ERROR_INVALID_ALLOCATION.
hsa_status_t free_allocation(void* ptr) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (ptr == nullptr) return HSA_STATUS_SUCCESS;
  MemoryState& m = memory();
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  PoolId pool;
  {
    ExclusiveLock lock(m.mutex);
    auto it = m.live.find(base);
    if (it == m.live.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
    pool = it->second.pool;
    const size_t extent = it->second.extent;
    m.live.erase(it);
    // Device memory only, and before CUDA can hand the address out again: the
    // driver keeps device virtual addresses reserved (a later copy there is
    // a use after free), whereas freed pinned host memory goes back to the
    // OS and may legitimately come back from malloc as someone's buffer.
    if (is_device_kind(pool.kind)) remember_freed_locked(m, base, extent);
    if (is_device_kind(pool.kind) && m.address_reuse) {
      m.reuse_cache[{pool.agent_index, extent}].push_back(base);
      m.reuse_cache_bytes += extent;
      return HSA_STATUS_SUCCESS;
    }
    if (is_device_kind(pool.kind)) {
      std::vector<std::pair<uintptr_t, PoolId>> released;
      quarantine_locked(m, base, extent, pool, &released);
      lock.unlock();
      return release_blocks(released) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
    }
  }
  // Outside the lock: cuMemFreeHost may wait for the device, and copies in
  // other threads need not wait for that.
  return release_block(base, pool) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

// ---- copy checking ---------------------------------------------------------------------

using hsa_common::Side;

// Classifies one side of a copy. `owner` is the owning agent for runtime
// memory (for a vmem mapping, the GPU that may access it in `role`),
// kNoAgent otherwise; `why` says what is wrong with a violation.
Side classify_locked(const MemoryState& m, const void* ptr, size_t size, CopyRole role,
                     uint32_t* owner, const char** why) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  *owner = kNoAgent;
  if (size > std::numeric_limits<uintptr_t>::max() - address) {
    *why = "wraps around the address space";
    return Side::kViolation;
  }
  // Reserved address space first, as the sim: device memory only inside one
  // mapping an agent may access that way; nothing else ever touches it.
  if (vmem_range_meets_locked(address, size)) {
    return vmem_classify_locked(address, size, role, owner, why);
  }
  auto live = find_containing(m.live, address, kExtent);
  if (live != m.live.end()) {
    const size_t offset = address - live->first;
    if (size > live->second.extent - offset) {
      *why = "runs past the end of its allocation";
      return Side::kViolation;
    }
    *owner = live->second.pool.agent_index;
    return is_device_kind(live->second.pool.kind) ? Side::kDevice : Side::kHost;
  }
  auto variable = find_containing(m.variables, address, kExtent);
  if (variable != m.variables.end()) {
    if (size > variable->second.size - (address - variable->first)) {
      *why = "runs past the end of its module variable";
      return Side::kViolation;
    }
    *owner = variable->second.agent_index;
    return Side::kDevice;
  }
  if (find_containing(m.freed, address, kExtent) != m.freed.end()) {
    *why = "lies in memory freed through the runtime";
    return Side::kViolation;
  }
  if (range_meets(m.live, address, size, kExtent) ||
      range_meets(m.variables, address, size, kExtent) ||
      range_meets(m.freed, address, size, kExtent)) {
    *why = "runs into runtime memory it does not start in (or into freed memory)";
    return Side::kViolation;
  }
  // Not the runtime's: pageable host memory (the usual case: a tool's own
  // buffers), or memory the program got from CUDA directly. The driver knows
  // the latter; for pageable memory it answers an error, which is expected
  // here and not reported.
  unsigned int type = 0;
  ScopedContext scope(gpu_at(1).context);
  const CUresult result =
      cu().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(address));
  return result == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE ? Side::kDevice : Side::kHost;
}

hsa_cuda_copy_direction_t direction_of(Side src, Side dst) {
  return static_cast<hsa_cuda_copy_direction_t>(hsa_common::direction_index(src, dst));
}

// Checks both sides and fills the plan (counting nothing); on a violation
// says which side and why.
bool check_locked(const MemoryState& m, void* dst, const void* src, size_t size, CopyPlan* plan,
                  const char** which, const char** why) {
  uint32_t dst_owner = kNoAgent;
  uint32_t src_owner = kNoAgent;
  const Side dst_side = classify_locked(m, dst, size, CopyRole::kDestination, &dst_owner, why);
  const bool dst_ok = dst_side != Side::kViolation;
  const Side src_side =
      dst_ok ? classify_locked(m, src, size, CopyRole::kSource, &src_owner, why) : Side::kHost;
  if (!dst_ok || src_side == Side::kViolation) {
    *which = dst_ok ? "source" : "destination";
    return false;
  }
  plan->direction = direction_of(src_side, dst_side);
  plan->dst_is_device = dst_side == Side::kDevice;
  // The source's engine if it is device memory, else the destination's, as
  // ROCr picks the copying agent; GPU 1 for host-to-host and foreign memory.
  if (src_side == Side::kDevice && src_owner != kNoAgent && is_gpu_index(src_owner)) {
    plan->issuing_agent = src_owner;
  } else if (dst_side == Side::kDevice && dst_owner != kNoAgent && is_gpu_index(dst_owner)) {
    plan->issuing_agent = dst_owner;
  } else {
    plan->issuing_agent = 1;
  }
  return true;
}

void count_copy(const CopyPlan& plan, uint64_t bytes) {
  counters().copies[plan.direction].fetch_add(1, std::memory_order_relaxed);
  counters().bytes[plan.direction].fetch_add(bytes, std::memory_order_relaxed);
}

// Checks both sides and fills the plan; counts the copy or the violation.
bool plan_locked(const MemoryState& m, const char* what, void* dst, const void* src, size_t size,
                 CopyPlan* plan) {
  const char* which = "";
  const char* why = "";
  if (!check_locked(m, dst, src, size, plan, &which, &why)) {
    counters().violations.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "hsa_cuda: %s(dst=%p, src=%p, size=%zu) refused: the %s %s\n", what, dst,
                 src, size, which, why);
    return false;
  }
  count_copy(*plan, size);
  return true;
}

}  // namespace

// ---- shared with the other files ------------------------------------------------------------

uint32_t pool_global_flags(hsa_cuda_pool_kind_t kind) {
  switch (kind) {
    case HSA_CUDA_POOL_DEVICE_COARSE:
    case HSA_CUDA_POOL_SYSTEM_COARSE:
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
    case HSA_CUDA_POOL_SYSTEM_FINE:
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
    case HSA_CUDA_POOL_SYSTEM_KERNARG:
      // ROCr's system kernarg pool is fine-grained system memory that also
      // carries KERNARG_INIT.
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT |
             HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
  }
  return 0;
}

// Pool payload: agent index above, kind in the low byte.
uint64_t pool_handle(PoolId pool) {
  return make_handle(HandleTag::kPool, (uint64_t{pool.agent_index} << 8) | uint64_t(pool.kind));
}

bool pool_from_handle(uint64_t handle, PoolId* pool) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(handle, HandleTag::kPool, &payload)) return false;
  const uint64_t agent_index = payload >> 8;
  const uint64_t kind = payload & 0xFF;
  if (agent_index >= agent_count() || kind > HSA_CUDA_POOL_SYSTEM_COARSE) return false;
  const PoolId id{static_cast<uint32_t>(agent_index), static_cast<hsa_cuda_pool_kind_t>(kind)};
  if (!agent_owns_kind(id.agent_index, id.kind)) return false;
  *pool = id;
  return true;
}

bool plan_async_copy(void* dst, const void* src, size_t size, CopyPlan* plan) {
  MemoryState& m = memory();
  SharedLock lock(m.mutex);
  return plan_locked(m, "hsa_amd_memory_async_copy", dst, src, size, plan);
}

bool plan_async_rect(const hsa_common::RectGeometry& geometry, CopyPlan* plan) {
  MemoryState& m = memory();
  SharedLock lock(m.mutex);
  const uint64_t rows = geometry.rows();
  for (uint64_t row = 0; row < rows; ++row) {
    CopyPlan row_plan;
    const char* which = "";
    const char* why = "";
    if (!check_locked(m, geometry.dst_row(row), geometry.src_row(row), geometry.row_bytes(),
                      &row_plan, &which, &why)) {
      counters().violations.fetch_add(1, std::memory_order_relaxed);
      std::fprintf(stderr,
                   "hsa_cuda: hsa_amd_memory_async_copy_rect refused: row %llu of %llu (dst=%p, "
                   "src=%p, %zu bytes): the %s %s\n",
                   static_cast<unsigned long long>(row), static_cast<unsigned long long>(rows),
                   geometry.dst_row(row), geometry.src_row(row), geometry.row_bytes(), which, why);
      return false;
    }
    if (row == 0) *plan = row_plan;
  }
  count_copy(*plan, rows * geometry.row_bytes());
  return true;
}

std::shared_mutex& memory_mutex() { return memory().mutex; }

bool release_quarantine(uint32_t agent_index) {
  MemoryState& m = memory();
  std::vector<std::pair<uintptr_t, PoolId>> released;
  {
    ExclusiveLock lock(m.mutex);
    for (auto it = m.quarantine.begin(); it != m.quarantine.end();) {
      const auto [base, extent, pool] = *it;
      if (pool.agent_index != agent_index) {
        ++it;
        continue;
      }
      // The record goes before the addresses do (quarantine_locked's rule).
      m.quarantine_bytes -= extent;
      forget_freed_overlapping_locked(m, base, extent);
      released.emplace_back(base, pool);
      it = m.quarantine.erase(it);
    }
  }
  release_blocks(released);
  return !released.empty();
}

void register_variable_range(uintptr_t base, size_t size, uint32_t agent_index) {
  MemoryState& m = memory();
  ExclusiveLock lock(m.mutex);
  forget_freed_overlapping_locked(m, base, size);
  m.variables[base] = Variable{size, agent_index};
}

void unregister_variable_range(uintptr_t base) {
  MemoryState& m = memory();
  ExclusiveLock lock(m.mutex);
  auto it = m.variables.find(base);
  if (it == m.variables.end()) return;
  // The module's storage goes with the unload: a later copy into it is a
  // copy into freed memory, refused and counted.
  const size_t size = it->second.size;
  m.variables.erase(it);
  remember_freed_locked(m, base, size);
}

void release_all_memory() {
  MemoryState& m = memory();
  std::vector<std::pair<uintptr_t, PoolId>> blocks;
  {
    ExclusiveLock lock(m.mutex);
    for (const auto& entry : m.live) blocks.emplace_back(entry.first, entry.second.pool);
    for (const auto& entry : m.reuse_cache) {
      for (uintptr_t base : entry.second) {
        blocks.emplace_back(base, PoolId{entry.first.first, HSA_CUDA_POOL_DEVICE_COARSE});
      }
    }
    for (const auto& [base, extent, pool] : m.quarantine) blocks.emplace_back(base, pool);
    m.quarantine.clear();
    m.quarantine_bytes = 0;
    m.live.clear();
    m.variables.clear();
    m.freed.clear();
    m.freed_order.clear();
    m.reuse_cache.clear();
    m.reuse_cache_bytes = 0;
    m.address_reuse = false;
  }
  for (const auto& [base, pool] : blocks) release_block(base, pool);
}

uint64_t live_allocation_count() {
  MemoryState& m = memory();
  SharedLock lock(m.mutex);
  return m.live.size();
}

// ---- entry points -----------------------------------------------------------------------------

namespace api {

hsa_status_t memory_copy(void* dst, const void* src, size_t size) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (dst == nullptr || src == nullptr) {
    counters().violations.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "hsa_cuda: hsa_memory_copy(dst=%p, src=%p, size=%zu) refused: NULL side\n",
                 dst, src, size);
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (size == 0) return HSA_STATUS_SUCCESS;
  MemoryState& m = memory();
  // The first GPU's context for the driver queries of the check (so they do
  // not switch contexts themselves), then the issuing GPU's for the copy.
  ScopedContext first(gpu_at(1).context);
  if (!first.ok()) return HSA_STATUS_ERROR;
  // Held across the copy: a free of either side waits until it is done.
  SharedLock lock(m.mutex);
  CopyPlan plan;
  if (!plan_locked(m, "hsa_memory_copy", dst, src, size, &plan)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  ScopedContext scope(gpu_at(plan.issuing_agent).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  // Unified addressing: the driver infers the direction from the pointers
  // and stages pageable host memory itself.
  if (!HSA_CUDA_CHECK(cu().cuMemcpy(CUdeviceptr(dst), CUdeviceptr(src), size))) {
    return HSA_STATUS_ERROR;
  }
  // hsa_memory_copy is blocking in ROCr. cuMemcpy returns before the data has
  // landed for pageable host-to-device (once staged) and device-to-device
  // copies; waiting for the legacy stream the copy ran on closes that gap.
  // Device-to-host copies are complete on return already.
  if (plan.dst_is_device && !HSA_CUDA_CHECK(cu().cuStreamSynchronize(nullptr))) {
    return HSA_STATUS_ERROR;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (size == 0 || ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(region.handle, &pool)) return HSA_STATUS_ERROR_INVALID_REGION;
  return allocate(pool, size, 0, /*from_region=*/true, ptr);
}

hsa_status_t amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
                                      uint32_t flags, void** ptr) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (size == 0 || ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  // ROCr's allocation flags (PCIe, contiguous, executable) change nothing
  // here; they are recorded.
  return allocate(pool, size, flags, /*from_region=*/false, ptr);
}

hsa_status_t memory_free(void* ptr) { return free_allocation(ptr); }

hsa_status_t amd_memory_pool_free(void* ptr) { return free_allocation(ptr); }

namespace {

template <typename Handle>
hsa_status_t visit_pools(const std::vector<PoolId>& pools,
                         hsa_status_t (*callback)(Handle, void*), void* data) {
  return hsa_common::call_each(
      pools, [&](const PoolId& pool) { return callback(Handle{pool_handle(pool)}, data); });
}

}  // namespace

hsa_status_t agent_iterate_regions(hsa_agent_t agent,
                                   hsa_status_t (*callback)(hsa_region_t, void*), void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  // A GPU's own region followed by the CPU's (hsa_common::visible_regions).
  return visit_pools(hsa_common::visible_regions(index, owned_pools), callback, data);
}

hsa_status_t amd_agent_iterate_memory_pools(hsa_agent_t agent,
                                            hsa_status_t (*callback)(hsa_amd_memory_pool_t,
                                                                     void*),
                                            void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  return visit_pools(owned_pools(index), callback, data);
}

hsa_status_t region_get_info(hsa_region_t region, hsa_region_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(region.handle, &pool)) return HSA_STATUS_ERROR_INVALID_REGION;
  return hsa_common::write_region_info(describe_pool(pool), attribute, value);
}

hsa_status_t amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
                                      hsa_amd_memory_pool_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  return hsa_common::write_memory_pool_info(describe_pool(pool), attribute, value);
}

hsa_status_t amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t memory_pool,
                                            hsa_amd_agent_memory_pool_info_t attribute,
                                            void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t agent_index = 0;
  if (!agent_index_from_handle(agent, &agent_index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  return hsa_common::write_agent_memory_pool_info(agent_index, pool.agent_index,
                                                  is_device_kind(pool.kind), attribute, value);
}

hsa_status_t amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                     const uint32_t* flags, const void* ptr) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  MemoryState& m = memory();
  ExclusiveLock lock(m.mutex);
  // The agents are resolved first (the sim looks the pointer up first; see
  // hsa_common::AllowAccessOrder). Grants are recorded only: with unified
  // addressing every GPU can already reach pinned host memory, and peer
  // device memory is reached by the driver's copies.
  return hsa_common::allow_access(
      num_agents, agents, flags, ptr, hsa_common::AllowAccessOrder::kAgentsFirst,
      agent_index_from_handle, [&](const void* base) -> std::vector<uint32_t>* {
        auto it = m.live.find(reinterpret_cast<uintptr_t>(base));
        return it == m.live.end() ? nullptr : &it->second.accessible;
      });
}

hsa_status_t amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                              void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                              hsa_agent_t** accessible) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (!hsa_common::pointer_info_arguments_valid(ptr, info)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // Unknown and freed pointers: type UNKNOWN.
  hsa_amd_pointer_info_t result = hsa_common::pointer_info_answer(*info);
  std::vector<hsa_agent_t> agents;
  {
    MemoryState& m = memory();
    SharedLock lock(m.mutex);
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    auto live = find_containing(m.live, address, kExtent);
    auto variable = find_containing(m.variables, address, kExtent);
    // Reserved address space (vmem), as the headers' generation answers it.
    bool list_without_alloc = false;
    if (vmem_pointer_info_locked(address, &result, &agents, &list_without_alloc)) {
      if (list_without_alloc) {
        // ROCr 7.x's VMemoryPtrInfo: no alloc call for an empty list.
        return hsa_common::deliver_vmem_pointer_info_without_agents(
            result, info, alloc, num_agents_accessible, accessible);
      }
    } else if (live != m.live.end()) {
      const Allocation& a = live->second;
      result.type = HSA_EXT_POINTER_TYPE_HSA;
      result.agentBaseAddress = reinterpret_cast<void*>(live->first);
      result.hostBaseAddress = reinterpret_cast<void*>(live->first);
      result.sizeInBytes = a.extent;
      result.userData = a.user_data;
      result.agentOwner = agent_handle(a.pool.agent_index);
      result.global_flags = pool_global_flags(a.pool.kind);
      for (uint32_t index : a.accessible) agents.push_back(agent_handle(index));
    } else if (variable != m.variables.end()) {
      // Module storage: its exact size, its agent, coarse-grained (as the
      // sim reports code object memory).
      result.type = HSA_EXT_POINTER_TYPE_HSA;
      result.agentBaseAddress = reinterpret_cast<void*>(variable->first);
      result.hostBaseAddress = nullptr;
      result.sizeInBytes = variable->second.size;
      result.agentOwner = agent_handle(variable->second.agent_index);
      result.global_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
      agents.push_back(result.agentOwner);
    }
  }
  // alloc is the caller's and runs without the runtime's lock.
  return hsa_common::deliver_pointer_info(result, agents, info, alloc, num_agents_accessible,
                                          accessible);
}

hsa_status_t amd_pointer_info_set_userdata(const void* ptr, void* userdata) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  MemoryState& m = memory();
  ExclusiveLock lock(m.mutex);
  auto it = m.live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.live.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  it->second.user_data = userdata;
  return HSA_STATUS_SUCCESS;
}

}  // namespace api

}  // namespace hsa_cuda

using namespace hsa_cuda;

// ---- control interface -------------------------------------------------------------------

extern "C" hsa_amd_memory_pool_t hsa_cuda_pool(hsa_agent_t agent, hsa_cuda_pool_kind_t kind) {
  uint32_t index = 0;
  if (static_cast<uint32_t>(kind) > HSA_CUDA_POOL_SYSTEM_COARSE ||
      !agent_index_from_handle(agent, &index) || !agent_owns_kind(index, kind)) {
    return hsa_amd_memory_pool_t{0};
  }
  return hsa_amd_memory_pool_t{pool_handle(PoolId{index, kind})};
}

extern "C" hsa_region_t hsa_cuda_region(hsa_agent_t agent, hsa_cuda_pool_kind_t kind) {
  return hsa_region_t{hsa_cuda_pool(agent, kind).handle};
}

extern "C" void hsa_cuda_set_address_reuse(bool enabled) {
  MemoryState& m = memory();
  std::vector<std::pair<uintptr_t, PoolId>> released;
  {
    ExclusiveLock lock(m.mutex);
    m.address_reuse = enabled;
    if (enabled) return;
    // The cached blocks' freed-range records stay (the addresses are still
    // not live), so the blocks go to the quarantine rather than straight back
    // to CUDA: once the driver has an address back, malloc may hand it out as
    // a tool's pageable buffer (seen on an H200), and a copy into that buffer
    // would be refused as a copy into freed memory.
    for (const auto& [key, bases] : m.reuse_cache) {
      const PoolId pool{key.first, HSA_CUDA_POOL_DEVICE_COARSE};
      for (uintptr_t base : bases) quarantine_locked(m, base, key.second, pool, &released);
    }
    m.reuse_cache.clear();
    m.reuse_cache_bytes = 0;
  }
  release_blocks(released);
}

extern "C" uint64_t hsa_cuda_reuse_cache_bytes(void) {
  MemoryState& m = memory();
  SharedLock lock(m.mutex);
  return m.reuse_cache_bytes;
}

extern "C" void hsa_cuda_release_quarantine(void) {
  if (!hsa_cuda::ready()) return;
  for (uint32_t i = 1; i <= hsa_cuda::gpu_count(); ++i) hsa_cuda::release_quarantine(i);
}
