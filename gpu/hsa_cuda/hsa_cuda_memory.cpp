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
// module storage only: see free_allocation).

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

// The entry of a base-keyed map whose range contains address.
template <typename Map>
auto find_containing(Map& map, uintptr_t address) -> decltype(map.begin()) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address - it->first < extent_of(it->second) ? it : map.end();
}

// True when [address, address + size) meets any range of the map.
template <typename Map>
bool range_meets(const Map& map, uintptr_t address, size_t size) {
  if (find_containing(map, address) != map.end()) return true;
  auto next = map.upper_bound(address);
  return next != map.end() && next->first - address < size;
}

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

// Regions an agent reports: ROCr's GpuAgent::IterateRegion also visits the
// system regions (that is how applications find the kernarg region from a
// GPU), so a GPU lists its own region followed by the CPU's.
std::vector<PoolId> visible_regions(uint32_t agent_index) {
  std::vector<PoolId> regions = owned_pools(agent_index);
  if (is_gpu_index(agent_index)) {
    const std::vector<PoolId> system = owned_pools(kCpuAgentIndex);
    regions.insert(regions.end(), system.begin(), system.end());
  }
  return regions;
}

// Attributes regions and pools share: hsa_amd_memory_pool_info_t reuses the
// hsa_region_info_t values, and HSA_AMD_SEGMENT_GLOBAL equals
// HSA_REGION_SEGMENT_GLOBAL (both 0, both 4-byte enums).
bool write_common_pool_info(PoolId pool, uint32_t attribute, void* value) {
  switch (attribute) {
    case HSA_REGION_INFO_SEGMENT:
      write_value(value, HSA_REGION_SEGMENT_GLOBAL);
      return true;
    case HSA_REGION_INFO_GLOBAL_FLAGS:
      write_value(value, pool_global_flags(pool.kind));
      return true;
    case HSA_REGION_INFO_SIZE:
      write_value(value, size_t(pool_size(pool)));
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED:
      write_value(value, true);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE:
      write_value(value, kGranule);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT:
      write_value(value, is_device_kind(pool.kind) ? kDeviceAlignment : kHostAlignment);
      return true;
    default:
      return false;
  }
}

// HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS as ROCr's GetAgentPoolInfo computes
// it (the sim's notes): the owner, and the CPU for system memory, are allowed
// by default; a GPU is disallowed by default for system pools and for a peer
// GPU's pool, the CPU for device pools. NEVER_ALLOWED does not occur.
hsa_amd_memory_pool_access_t pool_access(uint32_t agent_index, PoolId pool) {
  const bool system_pool = !is_device_kind(pool.kind);
  if (agent_index == pool.agent_index || (system_pool && !is_gpu_index(agent_index))) {
    return HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
  }
  return HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
}

hsa_amd_memory_pool_link_info_t link_info(uint32_t agent_index, PoolId pool) {
  hsa_amd_memory_pool_link_info_t info{};
  const bool gpu_to_gpu = is_gpu_index(agent_index) && is_gpu_index(pool.agent_index);
  info.atomic_support_32bit = true;
  info.atomic_support_64bit = true;
  info.coherent_support = !gpu_to_gpu;
  // NVLink has no enumerator of its own; XGMI is its AMD counterpart.
  info.link_type = gpu_to_gpu ? HSA_AMD_LINK_INFO_TYPE_XGMI : HSA_AMD_LINK_INFO_TYPE_PCIE;
  info.numa_distance = 20;
  return info;
}

// ---- the map ------------------------------------------------------------------------

// Agents that can reach a fresh allocation before any
// hsa_amd_agents_allow_access: ROCr maps device memory for its owner only and
// system memory from hsa_amd_memory_pool_allocate for the CPU only; system
// memory from the older hsa_memory_allocate is mapped to every GPU.
std::vector<uint32_t> initial_accessible_agents(PoolId pool, bool from_region) {
  std::vector<uint32_t> agents{pool.agent_index};
  if (!is_device_kind(pool.kind) && from_region) {
    for (uint32_t gpu = 1; gpu <= gpu_count(); ++gpu) agents.push_back(gpu);
  }
  return agents;
}

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

hsa_status_t allocate(PoolId pool, size_t size, uint32_t flags, bool from_region, void** ptr) {
  // ROCr refuses sizes over the pool's ALLOC_MAX_SIZE with INVALID_ALLOCATION.
  if (size > pool_size(pool) || size > std::numeric_limits<size_t>::max() - kGranule) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  const size_t rounded = (size + kGranule - 1) / kGranule * kGranule;
  MemoryState& m = memory();
  Allocation allocation;
  allocation.extent = rounded;
  allocation.pool = pool;
  allocation.alloc_flags = flags;
  allocation.from_region = from_region;
  allocation.accessible = initial_accessible_agents(pool, from_region);

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
    const CUresult result = cu().cuMemAlloc(&device, rounded);
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
      // Quarantined; what goes over the limits (the oldest blocks, or this
      // one if it alone is too large) is released below and forgotten.
      m.quarantine.emplace_back(base, extent, pool);
      m.quarantine_bytes += extent;
      std::vector<std::pair<uintptr_t, PoolId>> released;
      while (!m.quarantine.empty() && (m.quarantine_bytes > kQuarantineBytesMax ||
                                       m.quarantine.size() > kQuarantineBlocksMax)) {
        const auto [old_base, old_extent, old_pool] = m.quarantine.front();
        m.quarantine.pop_front();
        m.quarantine_bytes -= old_extent;
        forget_freed_overlapping_locked(m, old_base, old_extent);
        released.emplace_back(old_base, old_pool);
      }
      lock.unlock();
      bool ok = true;
      for (const auto& [old_base, old_pool] : released) ok &= release_block(old_base, old_pool);
      return ok ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
    }
  }
  // Outside the lock: cuMemFreeHost may wait for the device, and copies in
  // other threads need not wait for that.
  return release_block(base, pool) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

// ---- copy checking ---------------------------------------------------------------------

enum class Side { kHost, kDevice, kViolation };

// Classifies one side of a copy. `owner` is the owning agent for runtime
// memory, kNoAgent otherwise; `why` says what is wrong with a violation.
Side classify_locked(const MemoryState& m, const void* ptr, size_t size, uint32_t* owner,
                     const char** why) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  *owner = kNoAgent;
  if (size > std::numeric_limits<uintptr_t>::max() - address) {
    *why = "wraps around the address space";
    return Side::kViolation;
  }
  auto live = find_containing(m.live, address);
  if (live != m.live.end()) {
    const size_t offset = address - live->first;
    if (size > live->second.extent - offset) {
      *why = "runs past the end of its allocation";
      return Side::kViolation;
    }
    *owner = live->second.pool.agent_index;
    return is_device_kind(live->second.pool.kind) ? Side::kDevice : Side::kHost;
  }
  auto variable = find_containing(m.variables, address);
  if (variable != m.variables.end()) {
    if (size > variable->second.size - (address - variable->first)) {
      *why = "runs past the end of its module variable";
      return Side::kViolation;
    }
    *owner = variable->second.agent_index;
    return Side::kDevice;
  }
  if (find_containing(m.freed, address) != m.freed.end()) {
    *why = "lies in memory freed through the runtime";
    return Side::kViolation;
  }
  if (range_meets(m.live, address, size) || range_meets(m.variables, address, size) ||
      range_meets(m.freed, address, size)) {
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
  if (src == Side::kDevice) {
    return dst == Side::kDevice ? HSA_CUDA_COPY_DEVICE_TO_DEVICE : HSA_CUDA_COPY_DEVICE_TO_HOST;
  }
  return dst == Side::kDevice ? HSA_CUDA_COPY_HOST_TO_DEVICE : HSA_CUDA_COPY_HOST_TO_HOST;
}

// Checks both sides and fills the plan; counts the copy or the violation.
bool plan_locked(const MemoryState& m, const char* what, void* dst, const void* src, size_t size,
                 CopyPlan* plan) {
  uint32_t dst_owner = kNoAgent;
  uint32_t src_owner = kNoAgent;
  const char* why = "";
  const Side dst_side = classify_locked(m, dst, size, &dst_owner, &why);
  const bool dst_ok = dst_side != Side::kViolation;
  const Side src_side = dst_ok ? classify_locked(m, src, size, &src_owner, &why) : Side::kHost;
  if (!dst_ok || src_side == Side::kViolation) {
    counters().violations.fetch_add(1, std::memory_order_relaxed);
    std::fprintf(stderr, "hsa_cuda: %s(dst=%p, src=%p, size=%zu) refused: the %s %s\n", what, dst,
                 src, size, dst_ok ? "source" : "destination", why);
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
  counters().copies[plan->direction].fetch_add(1, std::memory_order_relaxed);
  counters().bytes[plan->direction].fetch_add(size, std::memory_order_relaxed);
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
  for (const PoolId& pool : pools) {
    const hsa_status_t status = callback(Handle{pool_handle(pool)}, data);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}

}  // namespace

hsa_status_t agent_iterate_regions(hsa_agent_t agent,
                                   hsa_status_t (*callback)(hsa_region_t, void*), void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  return visit_pools(visible_regions(index), callback, data);
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
  if (write_common_pool_info(pool, attribute, value)) return HSA_STATUS_SUCCESS;
  switch (static_cast<uint32_t>(attribute)) {
    case HSA_REGION_INFO_ALLOC_MAX_SIZE:
      write_value(value, size_t(pool_size(pool)));
      return HSA_STATUS_SUCCESS;
    case HSA_AMD_REGION_INFO_HOST_ACCESSIBLE:
      // Only system memory is host accessible on a discrete GPU.
      write_value(value, !is_device_kind(pool.kind));
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
                                      hsa_amd_memory_pool_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  if (write_common_pool_info(pool, attribute, value)) return HSA_STATUS_SUCCESS;
  switch (attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL:
      // ROCr: true exactly for system memory.
      write_value(value, !is_device_kind(pool.kind));
      return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE:
      write_value(value, size_t(pool_size(pool)));
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
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
  const bool owner = agent_index == pool.agent_index;
  switch (attribute) {
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS:
      write_value(value, pool_access(agent_index, pool));
      return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS:
      // One direct link between any two agents; zero hops to one's own pool.
      write_value(value, owner ? uint32_t{0} : uint32_t{1});
      return HSA_STATUS_SUCCESS;
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO: {
      // One entry per hop; ROCr writes a zeroed entry for an agent's own pool.
      const hsa_amd_memory_pool_link_info_t info =
          owner ? hsa_amd_memory_pool_link_info_t{} : link_info(agent_index, pool);
      write_value(value, info);
      return HSA_STATUS_SUCCESS;
    }
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                     const uint32_t* flags, const void* ptr) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  // ROCr: flags is reserved and must be NULL.
  if (num_agents == 0 || agents == nullptr || flags != nullptr || ptr == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  std::vector<uint32_t> indices(num_agents);
  for (uint32_t i = 0; i < num_agents; ++i) {
    if (!agent_index_from_handle(agents[i], &indices[i])) return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  MemoryState& m = memory();
  ExclusiveLock lock(m.mutex);
  // ROCr looks the pointer up by exact base and answers a plain
  // HSA_STATUS_ERROR when it is not there.
  auto it = m.live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.live.end()) return HSA_STATUS_ERROR;
  // Recorded only: with unified addressing every GPU can already reach
  // pinned host memory, and peer device memory is reached by the driver's
  // copies. Grants accumulate, as ROCr makes them sticky.
  std::vector<uint32_t>& accessible = it->second.accessible;
  for (uint32_t index : indices) {
    if (std::find(accessible.begin(), accessible.end(), index) == accessible.end()) {
      accessible.push_back(index);
    }
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                              void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                              hsa_agent_t** accessible) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (ptr == nullptr || info == nullptr || info->size == 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  hsa_amd_pointer_info_t result{};
  // Fill at most what the caller's structure holds, and say how much.
  result.size = static_cast<uint32_t>(std::min<size_t>(info->size, sizeof(result)));
  std::vector<hsa_agent_t> agents;
  {
    MemoryState& m = memory();
    SharedLock lock(m.mutex);
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    auto live = find_containing(m.live, address);
    auto variable = find_containing(m.variables, address);
    if (live != m.live.end()) {
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
    } else {
      // Unknown and freed pointers are not an error in ROCr: SUCCESS, UNKNOWN.
      result.type = HSA_EXT_POINTER_TYPE_UNKNOWN;
      std::memcpy(info, &result, result.size);
      return HSA_STATUS_SUCCESS;
    }
  }
  std::memcpy(info, &result, result.size);
  // As in ROCr, the list is returned only when all three out-parameters are
  // given; alloc is the caller's and runs without the runtime's lock.
  if (alloc != nullptr && num_agents_accessible != nullptr && accessible != nullptr) {
    auto* list = static_cast<hsa_agent_t*>(alloc(agents.size() * sizeof(hsa_agent_t)));
    if (list == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    std::copy(agents.begin(), agents.end(), list);
    *accessible = list;
    *num_agents_accessible = static_cast<uint32_t>(agents.size());
  }
  return HSA_STATUS_SUCCESS;
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
    for (const auto& entry : m.reuse_cache) {
      for (uintptr_t base : entry.second) {
        released.emplace_back(base, PoolId{entry.first.first, HSA_CUDA_POOL_DEVICE_COARSE});
      }
    }
    m.reuse_cache.clear();
    m.reuse_cache_bytes = 0;
  }
  // Their freed-range records stay: the addresses are still not live.
  for (const auto& [base, pool] : released) release_block(base, pool);
}

extern "C" uint64_t hsa_cuda_reuse_cache_bytes(void) {
  MemoryState& m = memory();
  SharedLock lock(m.mutex);
  return m.reuse_cache_bytes;
}
