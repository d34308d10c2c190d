// memory.cpp: pools and regions, the allocation map, the quarantine of
// freed blocks and address reuse, copy checking, hsa_memory_copy, pointer
// info, access grants and locked host memory (see hsa_rt.h; SVM memory is
// svm.cpp's). The backend allocates, frees, copies and pins; everything it
// hands out is recorded here, which is what pointer info answers from and
// what every copy is checked against.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "runtime.h"

namespace hsa_rt {

namespace {

std::shared_mutex* const g_memory_mutex = new std::shared_mutex;  // never destroyed
Memory* const g_memory = new Memory;

// Host memory the test program noted (hsa_rt_note_host_block), by base. Its
// own lock, a leaf: taken alone or under the memory lock.
std::mutex g_host_mutex;
std::map<uintptr_t, size_t>* const g_host_blocks = new std::map<uintptr_t, size_t>;

constexpr auto kBlockBytes = [](const Block& block) { return block.bytes; };
constexpr auto kQuarantinedBytes = [](const Memory::Quarantined& q) { return q.block.bytes; };
constexpr auto kRangeBytes = [](size_t bytes) { return bytes; };

// Whether every page of [address, address + size) is mapped.
bool pages_mapped(uintptr_t address, size_t size) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = address & ~(page - 1);
  const uintptr_t length = address + size - first;
  std::vector<unsigned char> residency((length + page - 1) / page);
  return mincore(reinterpret_cast<void*>(first), length, residency.data()) == 0;
}

// Host memory must be mapped and, if it starts in a noted block, end in it.
bool host_range_valid(uintptr_t address, size_t size) {
  {
    std::lock_guard<std::mutex> lock(g_host_mutex);
    auto block = find_containing(*g_host_blocks, address, kRangeBytes);
    if (block != g_host_blocks->end()) return size <= block->second - (address - block->first);
  }
  return pages_mapped(address, size);
}

uint64_t pool_size(PoolId pool) {
  return is_device_kind(pool.kind) ? agent_description(pool.agent).memory
                                   : backend::system_pool_size();
}

// Erases the quarantine entry of a block given back to the backend (or
// taken back by address reuse); false when it was no longer there.
bool unquarantine_locked(Memory& m, uintptr_t base, uint64_t sequence, Block* out) {
  auto it = m.quarantine.find(base);
  if (it == m.quarantine.end() || it->second.sequence != sequence) return false;
  *out = std::move(it->second.block);
  m.quarantine_bytes -= out->bytes;
  m.quarantine.erase(it);
  return true;
}

// Address reuse: the most recently quarantined block of the same pool that
// is large enough comes back (still holding whatever it held).
bool take_quarantined_locked(PoolId pool, size_t bytes, Block* out) {
  Memory& m = *g_memory;
  for (auto it = m.order.rbegin(); it != m.order.rend(); ++it) {
    auto found = m.quarantine.find(it->first);
    if (found == m.quarantine.end() || found->second.sequence != it->second) continue;
    const Block& block = found->second.block;
    if (block.origin == Origin::kVariable || !(block.pool == pool) || block.bytes < bytes) continue;
    unquarantine_locked(m, it->first, it->second, out);
    m.order.erase(std::next(it).base());
    return true;
  }
  return false;
}

hsa_status_t allocate(PoolId pool, size_t size, uint32_t flags, Origin origin, void** ptr) {
  size_t rounded = 0;
  // ROCr refuses sizes over the pool's ALLOC_MAX_SIZE with INVALID_ALLOCATION.
  if (size > pool_size(pool) || !round_up(size, kGranule, &rounded)) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (take_fault(&Faults::allocations)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const bool device = is_device_kind(pool.kind);
  Block block;
  {
    ExclusiveLock lock(*g_memory_mutex);
    // A GPU's pools and vmem handles share its device memory.
    if (device && !take_device_bytes_locked(pool.agent, rounded)) {
      return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    }
    if (!(mode(HSA_RT_MODE_ADDRESS_REUSE) && take_quarantined_locked(pool, rounded, &block))) {
      block.base = nullptr;
    }
  }
  if (block.base == nullptr) {
    void* base = nullptr;
    hsa_status_t status = backend::allocate(pool, rounded, &base);
    // The quarantine only catches late copies: it must never make an
    // allocation fail that ROCr, which frees at once, would grant.
    if (status == HSA_STATUS_ERROR_OUT_OF_RESOURCES && backend::quarantine_holds_memory() &&
        release_quarantine_of(pool.agent)) {
      status = backend::allocate(pool, rounded, &base);
    }
    if (status != HSA_STATUS_SUCCESS) {
      ExclusiveLock lock(*g_memory_mutex);
      if (device) give_device_bytes_locked(pool.agent, rounded);
      return status;
    }
    block.base = static_cast<uint8_t*>(base);
    block.bytes = rounded;
  }
  block.extent = rounded;
  block.origin = origin;
  block.pool = pool;
  block.alloc_flags = flags;
  // ROCr maps device memory for its owner only, pool allocations of system
  // memory for the CPU only, and hsa_memory_allocate's system memory for
  // every GPU too.
  block.accessible = {pool.agent};
  if (!device && origin == Origin::kRegion) {
    for (uint32_t gpu = 1; gpu <= gpu_count(); ++gpu) block.accessible.push_back(gpu);
  }
  block.user_data = nullptr;
  block.owned = true;
  ExclusiveLock lock(*g_memory_mutex);
  g_memory->live[reinterpret_cast<uintptr_t>(block.base)] = block;
  *ptr = block.base;
  return HSA_STATUS_SUCCESS;
}

// hsa_memory_free and hsa_amd_memory_pool_free are one operation in ROCr.
hsa_status_t free_allocation(void* ptr) {
  HSA_RT_REQUIRE_READY();
  if (ptr == nullptr) return HSA_STATUS_SUCCESS;
  Released released;
  {
    ExclusiveLock lock(*g_memory_mutex);
    Memory& m = *g_memory;
    auto it = m.live.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == m.live.end() || it->second.origin == Origin::kVariable) {
      return HSA_STATUS_ERROR_INVALID_ALLOCATION;
    }
    if (take_fault(&Faults::frees)) return HSA_STATUS_ERROR;
    Block block = std::move(it->second);
    m.live.erase(it);
    if (is_device_kind(block.pool.kind)) give_device_bytes_locked(block.pool.agent, block.extent);
    quarantine_locked(std::move(block), &released);
  }
  return release_blocks(released) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

// Pools an agent owns: a GPU its device pools, the CPU the system pools
// (fine, kernarg, coarse: the order rocminfo shows for ROCr).
std::vector<PoolId> owned_pools(uint32_t agent) {
  std::vector<PoolId> pools;
  for (uint32_t kind = 0; kind <= HSA_RT_POOL_SYSTEM_COARSE; ++kind) {
    const auto pool_kind = static_cast<hsa_rt_pool_kind_t>(kind);
    if (is_device_kind(pool_kind) == is_gpu(agent) && backend::has_pool(pool_kind)) {
      pools.push_back(PoolId{agent, pool_kind});
    }
  }
  return pools;
}

template <typename Handle>
hsa_status_t visit_pools(hsa_agent_t agent, bool with_system_regions,
                         hsa_status_t (*callback)(Handle, void*), void* data) {
  HSA_RT_REQUIRE_READY();
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  std::vector<PoolId> pools = owned_pools(index);
  // ROCr's GpuAgent::IterateRegion lists the system regions after its own:
  // that is how applications find the kernarg region from a GPU.
  if (with_system_regions && is_gpu(index)) {
    const std::vector<PoolId> system = owned_pools(kCpu);
    pools.insert(pools.end(), system.begin(), system.end());
  }
  return call_each(pools, [&](PoolId pool) { return callback(Handle{pool_handle(pool)}, data); });
}

// The attributes pools and regions share (hsa_amd_memory_pool_info_t reuses
// the hsa_region_info_t values); false for any other.
bool write_pool_info(PoolId pool, uint32_t attribute, void* value) {
  switch (attribute) {
    case HSA_REGION_INFO_SEGMENT:
      write_value(value, HSA_REGION_SEGMENT_GLOBAL);
      return true;
    case HSA_REGION_INFO_GLOBAL_FLAGS:
      write_value(value, pool_flags(pool.kind));
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
      write_value(value, backend::pool_alignment(pool.kind));
      return true;
    default:
      return false;
  }
}

// The live block whose extent holds address (what pointer info reports).
const Block* live_block_locked(uintptr_t address) {
  auto it = find_containing(g_memory->live, address, kBlockBytes);
  if (it == g_memory->live.end()) return nullptr;
  return address - it->first < it->second.extent ? &it->second : nullptr;
}

// The locked range holding address that starts nearest below it (ranges
// may overlap: every one starting below is looked at), or end().
std::map<uintptr_t, Locked>::const_iterator lock_holding_locked(uintptr_t address) {
  const std::map<uintptr_t, Locked>& locks = g_memory->locks;
  for (auto it = locks.upper_bound(address); it != locks.begin();) {
    --it;
    if (address - it->first < it->second.size) return it;
  }
  return locks.end();
}

// Whether some locked range holding address is mapped for gpu.
bool lock_maps_locked(uint32_t gpu, uintptr_t address) {
  const std::map<uintptr_t, Locked>& locks = g_memory->locks;
  for (auto it = locks.begin(); it != locks.end() && it->first <= address; ++it) {
    const std::vector<uint32_t>& gpus = it->second.gpus;
    if (address - it->first < it->second.size &&
        std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) {
      return true;
    }
  }
  return false;
}

// hsa_amd_memory_lock / _to_pool once their own checks passed: ROCr's
// MemoryRegion::Lock (kind: the pool's, for its grain).
hsa_status_t lock_memory(void* host_ptr, size_t size, const hsa_agent_t* agents, int num_agent,
                         hsa_rt_pool_kind_t kind, void** agent_ptr) {
  // No list: every GPU. CPUs in a list are skipped.
  std::vector<uint32_t> gpus;
  for (uint32_t gpu = 1; agents == nullptr && gpu <= gpu_count(); ++gpu) gpus.push_back(gpu);
  for (int i = 0; agents != nullptr && i < num_agent; ++i) {
    uint32_t index = 0;
    if (!agent_index(agents[i], &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (is_gpu(index) && std::find(gpus.begin(), gpus.end(), index) == gpus.end()) {
      gpus.push_back(index);
    }
  }
  // ROCm 5.6 on (the SVM thunk): GPUs reach locked memory at its own
  // address; with no GPU to map for, nothing is registered at all.
  if (gpus.empty()) {
    *agent_ptr = host_ptr;
    return HSA_STATUS_SUCCESS;
  }
  // The kernel driver cannot register what is not mapped.
  const auto base = reinterpret_cast<uintptr_t>(host_ptr);
  if (size > std::numeric_limits<uintptr_t>::max() - base || !pages_mapped(base, size)) {
    return HSA_STATUS_ERROR;
  }
  ExclusiveLock lock(*g_memory_mutex);
  auto it = g_memory->locks.find(base);
  if (it == g_memory->locks.end()) {
    Locked locked;
    const hsa_status_t status = backend::lock_host(host_ptr, size, &locked.registered);
    if (status != HSA_STATUS_SUCCESS) return status;
    locked.size = size;
    locked.kind = kind;
    locked.gpus = gpus;
    g_memory->locks.emplace(base, std::move(locked));
  } else {
    // Locked there again (HIP locks once per GPU, naming one each time): the
    // GPUs named join, the range grows to cover both (the backend keeps its
    // first registration), one more unlock.
    Locked& locked = it->second;
    for (uint32_t gpu : gpus) {
      if (std::find(locked.gpus.begin(), locked.gpus.end(), gpu) == locked.gpus.end()) {
        locked.gpus.push_back(gpu);
      }
    }
    locked.size = std::max(locked.size, size);
    ++locked.count;
  }
  *agent_ptr = host_ptr;
  return HSA_STATUS_SUCCESS;
}

// The checks both lock entries share, in ROCr's order; *agent_ptr is NULL
// from the first check that passes it.
hsa_status_t check_lock(void* host_ptr, size_t size, const hsa_agent_t* agents, int num_agent,
                        void** agent_ptr) {
  if (size == 0 || host_ptr == nullptr || agent_ptr == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  *agent_ptr = nullptr;
  // A negative count: ROCr reads it as a huge unsigned one, past the list.
  if ((agents != nullptr) != (num_agent != 0) || num_agent < 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

}  // namespace

// ---- shared with the other files ------------------------------------------------------------

std::shared_mutex& memory_mutex() { return *g_memory_mutex; }
Memory& memory() { return *g_memory; }

void quarantine_locked(Block block, Released* released) {
  Memory& m = *g_memory;
  // Memory the backend does not quarantine, and a block bigger than the
  // whole quarantine, go back at once.
  if (!backend::quarantines(block.pool.kind) || block.bytes > backend::quarantine_max_bytes()) {
    if (block.owned) released->push_back(std::move(block));
    return;
  }
  if (block.owned) backend::poison(block.base, block.bytes);
  const auto base = reinterpret_cast<uintptr_t>(block.base);
  const uint64_t sequence = m.next_sequence++;
  m.quarantine_bytes += block.bytes;
  m.quarantine[base] = Memory::Quarantined{std::move(block), sequence};
  m.order.emplace_back(base, sequence);
  while (!m.order.empty() && (m.quarantine_bytes > backend::quarantine_max_bytes() ||
                              m.quarantine.size() > backend::quarantine_max_blocks())) {
    const auto [old_base, old_sequence] = m.order.front();
    m.order.pop_front();
    Block old;
    if (unquarantine_locked(m, old_base, old_sequence, &old) && old.owned) {
      released->push_back(std::move(old));
    }
  }
}

bool release_blocks(const Released& blocks) {
  bool ok = true;
  for (const Block& block : blocks) ok = backend::release(block) && ok;
  return ok;
}

bool release_quarantine_of(uint32_t agent) {
  Released released;
  {
    ExclusiveLock lock(*g_memory_mutex);
    Memory& m = *g_memory;
    for (auto it = m.order.begin(); it != m.order.end();) {
      auto found = m.quarantine.find(it->first);
      const bool stale = found == m.quarantine.end() || found->second.sequence != it->second;
      if (!stale && agent != kNoAgent && found->second.block.pool.agent != agent) {
        ++it;
        continue;
      }
      Block block;
      if (!stale && unquarantine_locked(m, it->first, it->second, &block) && block.owned) {
        released.push_back(std::move(block));
      }
      it = m.order.erase(it);
    }
  }
  release_blocks(released);
  return !released.empty();
}

void release_all_memory() {
  Released released;
  {
    ExclusiveLock lock(*g_memory_mutex);
    Memory& m = *g_memory;
    for (auto& entry : m.live) {
      if (entry.second.owned) released.push_back(std::move(entry.second));
    }
    for (auto& entry : m.quarantine) {
      if (entry.second.block.owned) released.push_back(std::move(entry.second.block));
    }
    m.live.clear();
    m.quarantine.clear();
    m.order.clear();
    m.quarantine_bytes = 0;
    m.unbacked.clear();
    std::fill(m.device_bytes.begin(), m.device_bytes.end(), 0);
    vmem_release_all_locked();
    for (const auto& [base, locked] : m.locks) {
      if (locked.registered) backend::unlock_host(reinterpret_cast<void*>(base));
    }
    m.locks.clear();
  }
  svm_reset();
  release_blocks(released);
}

bool take_device_bytes_locked(uint32_t agent, uint64_t bytes) {
  std::vector<uint64_t>& used = g_memory->device_bytes;
  if (agent >= used.size()) return false;
  const uint64_t capacity = backend::device_capacity(agent);
  if (capacity != 0 && bytes > capacity - used[agent]) return false;
  used[agent] += bytes;
  return true;
}

void give_device_bytes_locked(uint32_t agent, uint64_t bytes) {
  std::vector<uint64_t>& used = g_memory->device_bytes;
  if (agent < used.size()) used[agent] -= std::min(used[agent], bytes);
}

uint8_t* allocate_variable_locked(uint32_t agent, uint32_t size) {
  // At least one granule, so even a zero-size variable has an address of its own.
  const size_t bytes = std::max<size_t>((size_t{size} + kGranule - 1) / kGranule, 1) * kGranule;
  const PoolId pool{agent, is_gpu(agent) ? HSA_RT_POOL_DEVICE_COARSE : HSA_RT_POOL_SYSTEM_COARSE};
  void* base = nullptr;
  if (backend::allocate(pool, bytes, &base) != HSA_STATUS_SUCCESS) return nullptr;
  if (!backend::zero(agent, base, bytes)) {
    Block block;
    block.base = static_cast<uint8_t*>(base);
    block.bytes = bytes;
    block.pool = pool;
    backend::release(block);
    return nullptr;
  }
  Block block;
  block.base = static_cast<uint8_t*>(base);
  block.bytes = bytes;
  block.extent = size;
  block.origin = Origin::kVariable;
  block.pool = pool;
  block.accessible = {agent};
  g_memory->live[reinterpret_cast<uintptr_t>(base)] = block;
  return block.base;
}

void register_variable_locked(uintptr_t base, size_t size, uint32_t agent) {
  Block block;
  block.base = reinterpret_cast<uint8_t*>(base);
  block.bytes = size;
  block.extent = size;
  block.origin = Origin::kVariable;
  block.pool = PoolId{agent, HSA_RT_POOL_DEVICE_COARSE};
  block.accessible = {agent};
  block.owned = false;  // the module's
  g_memory->live[base] = block;
}

Side classify_locked(const void* ptr, size_t size, Role role, uint32_t* owner, const char** why) {
  const Memory& m = *g_memory;
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  *owner = kNoAgent;
  if (size > std::numeric_limits<uintptr_t>::max() - address) {
    *why = "wraps around the address space";
    return Side::kViolation;
  }
  // Reserved address space first: nothing else ever touches it.
  if (vmem_meets_locked(address, size)) return vmem_side_locked(address, size, role, owner, why);
  auto live = find_containing(m.live, address, kBlockBytes);
  if (live != m.live.end()) {
    const Block& block = live->second;
    const uintptr_t offset = address - live->first;
    if (offset > block.extent || size > block.extent - offset) {
      *why = "runs past the end of its allocation or variable";
      return Side::kViolation;
    }
    *owner = block.pool.agent;
    return backend::runtime_memory_is_device() || is_device_kind(block.pool.kind) ? Side::kDevice
                                                                                  : Side::kHost;
  }
  if (find_containing(m.quarantine, address, kQuarantinedBytes) != m.quarantine.end()) {
    *why = "lies in memory freed through the runtime";
    return Side::kViolation;
  }
  if (range_meets(m.live, address, size, kBlockBytes) ||
      range_meets(m.quarantine, address, size, kQuarantinedBytes)) {
    *why = "runs into runtime memory it does not start in (or into freed memory)";
    return Side::kViolation;
  }
  if (size == 0) return Side::kHost;
  if (range_meets(m.unbacked, address, size, kRangeBytes)) {
    *why = "touches a variable symbol with no storage behind it";
    return Side::kViolation;
  }
  // Not the runtime's: device memory the driver knows, or host memory.
  if (backend::foreign_side(address, size) == Side::kDevice) return Side::kDevice;
  if (!host_range_valid(address, size)) {
    *why = "is unmapped host memory or runs past the end of a noted host block";
    return Side::kViolation;
  }
  return Side::kHost;
}

bool plan_copy_locked(const char* what, void* dst, const void* src, size_t size, CopyPlan* plan) {
  uint32_t dst_owner = kNoAgent, src_owner = kNoAgent;
  const char* why = "";
  const Side dst_side = classify_locked(dst, size, Role::kDestination, &dst_owner, &why);
  if (dst_side == Side::kViolation) {
    count_violation(what, dst, src, size, "destination", why);
    return false;
  }
  const Side src_side = classify_locked(src, size, Role::kSource, &src_owner, &why);
  if (src_side == Side::kViolation) {
    count_violation(what, dst, src, size, "source", why);
    return false;
  }
  plan->src_device = src_side == Side::kDevice;
  plan->dst_device = dst_side == Side::kDevice;
  plan->direction = (plan->src_device ? 2 : 0) + (plan->dst_device ? 1 : 0);
  // The source's engine if it is a GPU's memory, else the destination's, as
  // ROCr picks the copying agent; the first GPU otherwise.
  plan->issuing_agent = plan->src_device && src_owner != kNoAgent && is_gpu(src_owner) ? src_owner
                        : plan->dst_device && dst_owner != kNoAgent && is_gpu(dst_owner)
                            ? dst_owner
                            : 1;
  return true;
}

void count_copy(const CopyPlan& plan, uint64_t bytes) {
  counters().copies[plan.direction].fetch_add(1);
  counters().bytes[plan.direction].fetch_add(bytes);
}

bool agent_can_access_locked(uint32_t agent, const void* ptr) {
  uint32_t permission = 0;
  if (vmem_permission_locked(reinterpret_cast<uintptr_t>(ptr), agent, &permission)) {
    return permission != kPermissionNone;
  }
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = find_containing(g_memory->live, address, kBlockBytes);
  if (it == g_memory->live.end()) {
    return !is_gpu(agent) || lock_maps_locked(agent, address) ||
           svm_gpu_may_access(agent, address);
  }
  const std::vector<uint32_t>& agents = it->second.accessible;
  return std::find(agents.begin(), agents.end(), agent) != agents.end();
}

void* engine_address_locked(const void* ptr) {
  const Memory& m = *g_memory;
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (!m.mappings.empty()) {
    auto mapping =
        find_containing(m.mappings, address, [](const VmemMapping& v) { return v.size; });
    if (mapping != m.mappings.end()) {
      void* at = backend::vmem_engine_address(m.handles.at(mapping->second.handle),
                                              address - mapping->first);
      if (at != nullptr) return at;
    }
  }
  return const_cast<void*>(ptr);
}

}  // namespace hsa_rt

using namespace hsa_rt;

namespace hsa_rt::api {

hsa_status_t memory_copy(void* dst, const void* src, size_t size) {
  HSA_RT_REQUIRE_READY();
  if (dst == nullptr || src == nullptr) {
    count_violation("hsa_memory_copy", dst, src, size, "caller", "passed a NULL side");
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (size == 0) return HSA_STATUS_SUCCESS;
  // Held across the copy: a free of either side waits until it is done.
  SharedLock lock(memory_mutex());
  CopyPlan plan;
  if (!plan_copy_locked("hsa_memory_copy", dst, src, size, &plan)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  count_copy(plan, size);
  const bool injected = with_faults([&](Faults& f) {
    return (plan.direction == 2 && nth_fault(&f.d2h_at, &f.d2h_seen)) ||
           covers(f.copies_into, dst, size) || covers(f.copies_from, src, size) ||
           (plan.direction == 1 && covers(f.h2d_into, dst, size));
  });
  if (injected) return HSA_STATUS_ERROR;
  // The CPU copies: SVM pages resident on a GPU come back to the host.
  svm_access(kCpu, dst, size);
  svm_access(kCpu, src, size);
  return backend::copy(dst, src, size, plan) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

hsa_status_t memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  HSA_RT_REQUIRE_READY();
  if (size == 0 || ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(region.handle, &pool)) return HSA_STATUS_ERROR_INVALID_REGION;
  return allocate(pool, size, 0, Origin::kRegion, ptr);
}

hsa_status_t amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
                                      uint32_t flags, void** ptr) {
  HSA_RT_REQUIRE_READY();
  if (size == 0 || ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  // ROCr's allocation flags (PCIe, contiguous, ...) are recorded only.
  return allocate(pool, size, flags, Origin::kPool, ptr);
}

hsa_status_t memory_free(void* ptr) { return free_allocation(ptr); }

hsa_status_t amd_memory_pool_free(void* ptr) { return free_allocation(ptr); }

hsa_status_t agent_iterate_regions(hsa_agent_t agent,
                                   hsa_status_t (*callback)(hsa_region_t, void*), void* data) {
  return visit_pools(agent, true, callback, data);
}

hsa_status_t amd_agent_iterate_memory_pools(hsa_agent_t agent,
                                            hsa_status_t (*callback)(hsa_amd_memory_pool_t,
                                                                     void*),
                                            void* data) {
  return visit_pools(agent, false, callback, data);
}

hsa_status_t region_get_info(hsa_region_t region, hsa_region_info_t attribute, void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(region.handle, &pool)) return HSA_STATUS_ERROR_INVALID_REGION;
  if (write_pool_info(pool, attribute, value)) return HSA_STATUS_SUCCESS;
  switch (static_cast<uint32_t>(attribute)) {
    case HSA_REGION_INFO_ALLOC_MAX_SIZE:
      return answer(value, size_t(pool_size(pool)));
    case HSA_AMD_REGION_INFO_HOST_ACCESSIBLE:
      // Only system memory is host accessible on a discrete GPU.
      return answer(value, !is_device_kind(pool.kind));
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
                                      hsa_amd_memory_pool_info_t attribute, void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  if (write_pool_info(pool, attribute, value)) return HSA_STATUS_SUCCESS;
  switch (attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL:  // ROCr: exactly system memory
      return answer(value, !is_device_kind(pool.kind));
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE:
      return answer(value, size_t(pool_size(pool)));
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t memory_pool,
                                            hsa_amd_agent_memory_pool_info_t attribute,
                                            void* value) {
  HSA_RT_REQUIRE_READY();
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool)) return kInvalidMemoryPool;
  const bool owner = index == pool.agent;
  switch (attribute) {
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS:
      // ROCr's MemoryRegion::GetAgentPoolInfo: every pair of agents is
      // linked, so NEVER_ALLOWED does not occur.
      return answer(value, owner || (!is_device_kind(pool.kind) && !is_gpu(index))
                                ? HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT
                                : HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT);
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS:
      return answer(value, owner ? uint32_t{0} : uint32_t{1});
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO: {
      // One entry per hop; ROCr writes a zeroed one for an agent's own pool.
      hsa_amd_memory_pool_link_info_t info{};
      if (!owner) {
        const bool gpus = is_gpu(index) && is_gpu(pool.agent);
        info.atomic_support_32bit = true;
        info.atomic_support_64bit = true;
        info.coherent_support = !gpus;
        // XGMI between GPUs (NVLink has no enumerator of its own), PCIe to the CPU.
        info.link_type = gpus ? HSA_AMD_LINK_INFO_TYPE_XGMI : HSA_AMD_LINK_INFO_TYPE_PCIE;
        info.numa_distance = 20;
      }
      return answer(value, info);
    }
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                     const uint32_t* flags, const void* ptr) {
  HSA_RT_REQUIRE_READY();
  if (num_agents == 0 || agents == nullptr || flags != nullptr || ptr == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  ExclusiveLock lock(memory_mutex());
  // The allocation first (ROCr's Runtime::AllowAccess), by its exact base;
  // variable storage is no allocation.
  auto it = memory().live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == memory().live.end() || it->second.origin == Origin::kVariable) return HSA_STATUS_ERROR;
  std::vector<uint32_t> indices(num_agents);
  for (uint32_t i = 0; i < num_agents; ++i) {
    if (!agent_index(agents[i], &indices[i])) return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  // ROCr maps the allocation for exactly the agents listed (the thunk
  // unmaps the others), the owner always: device memory keeps its GPU,
  // system memory its CPU, and system memory granted to CPUs only keeps no
  // GPU. Only fragments of a sub-allocated block would keep other grants,
  // and the runtime has none.
  std::vector<uint32_t> granted = {it->second.pool.agent};
  for (uint32_t index : indices) {
    if (std::find(granted.begin(), granted.end(), index) == granted.end()) granted.push_back(index);
  }
  it->second.accessible = std::move(granted);
  return HSA_STATUS_SUCCESS;
}

// Counted, and the injected failure answered, before anything else.
hsa_status_t amd_memory_lock(void* host_ptr, size_t size, hsa_agent_t* agents, int num_agent,
                             void** agent_ptr) {
  HSA_RT_REQUIRE_READY();
  counters().locks.fetch_add(1);
  if (take_fault(&Faults::locks)) return HSA_STATUS_ERROR;
  const hsa_status_t status = check_lock(host_ptr, size, agents, num_agent, agent_ptr);
  if (status != HSA_STATUS_SUCCESS) return status;
  // ROCr locks to the CPU's coarse-grained pool (6.3 on: its extended-scope
  // fine-grained one, which the runtime does not model).
  return lock_memory(host_ptr, size, agents, num_agent, HSA_RT_POOL_SYSTEM_COARSE, agent_ptr);
}

hsa_status_t amd_memory_lock_to_pool(void* host_ptr, size_t size, hsa_agent_t* agents,
                                     int num_agent, hsa_amd_memory_pool_t memory_pool,
                                     uint32_t flags, void** agent_ptr) {
  HSA_RT_REQUIRE_READY();
  counters().locks.fetch_add(1);
  if (take_fault(&Faults::locks)) return HSA_STATUS_ERROR;
  // ROCr checks flags with the other arguments, before *agent_ptr is reset.
  if (flags != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const hsa_status_t status = check_lock(host_ptr, size, agents, num_agent, agent_ptr);
  if (status != HSA_STATUS_SUCCESS) return status;
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool) || is_gpu(pool.agent)) {
    return kInvalidMemoryPool;
  }
  return lock_memory(host_ptr, size, agents, num_agent, pool.kind, agent_ptr);
}

hsa_status_t amd_memory_unlock(void* host_ptr) {
  HSA_RT_REQUIRE_READY();
  counters().unlocks.fetch_add(1);
  if (take_fault(&Faults::unlocks)) return HSA_STATUS_ERROR;
  ExclusiveLock lock(memory_mutex());
  auto it = memory().locks.find(reinterpret_cast<uintptr_t>(host_ptr));
  // Nothing locked there: ROCr's SVM thunk finds nothing to undo, SUCCESS.
  if (it == memory().locks.end() || --it->second.count > 0) return HSA_STATUS_SUCCESS;
  if (it->second.registered) backend::unlock_host(host_ptr);
  memory().locks.erase(it);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                              void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                              hsa_agent_t** accessible) {
  HSA_RT_REQUIRE_READY();
  // Counted, and the injected failure answered, before the argument check.
  counters().pointer_info.fetch_add(1);
  if (with_faults([](Faults& f) { return f.pointer_info != 0; })) return HSA_STATUS_ERROR;
  if (ptr == nullptr || info == nullptr || info->size == 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // Written up to what both sides know (the caller's may be an older struct).
  hsa_amd_pointer_info_t result{};
  result.size = static_cast<uint32_t>(std::min<size_t>(info->size, sizeof(result)));
  result.type = HSA_EXT_POINTER_TYPE_UNKNOWN;  // unknown and freed pointers
  std::vector<hsa_agent_t> agents;
  bool no_alloc = false;  // ROCr 7.x's VMemoryPtrInfo: no alloc for no agents
  {
    SharedLock lock(memory_mutex());
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    if (!vmem_pointer_info_locked(address, &result, &agents, &no_alloc)) {
      if (const Block* block = live_block_locked(address)) {
        result.type = HSA_EXT_POINTER_TYPE_HSA;
        result.agentBaseAddress = block->base;
        result.hostBaseAddress = block->base;
        result.sizeInBytes = block->extent;
        result.userData = block->user_data;
        result.agentOwner = agent_handle(block->pool.agent);
        result.global_flags = pool_flags(block->pool.kind);
        for (uint32_t index : block->accessible) agents.push_back(agent_handle(index));
      } else if (HSA_RT_POINTER_INFO_KNOWS_LOCKED) {
        // ROCm 5.2: the thunk's registered user pointer, owned by the CPU.
        auto locked = lock_holding_locked(address);
        if (locked != memory().locks.end()) {
          result.type = HSA_EXT_POINTER_TYPE_LOCKED;
          result.agentBaseAddress = reinterpret_cast<void*>(locked->first);
          result.hostBaseAddress = result.agentBaseAddress;
          result.sizeInBytes = locked->second.size;
          result.agentOwner = agent_handle(kCpu);
          result.global_flags = pool_flags(locked->second.kind);
          for (uint32_t index : locked->second.gpus) agents.push_back(agent_handle(index));
        }
      }
    }
  }
  std::memcpy(info, &result, result.size);
  if (result.type == HSA_EXT_POINTER_TYPE_UNKNOWN) return HSA_STATUS_SUCCESS;
  if (no_alloc) {
    if (num_agents_accessible != nullptr) *num_agents_accessible = 0;
    if (alloc != nullptr && num_agents_accessible != nullptr && accessible != nullptr) {
      *accessible = nullptr;
    }
    return HSA_STATUS_SUCCESS;
  }
  if (alloc != nullptr && num_agents_accessible != nullptr && accessible != nullptr) {
    // The caller's alloc, without any runtime lock.
    auto* list = static_cast<hsa_agent_t*>(alloc(agents.size() * sizeof(hsa_agent_t)));
    if (list == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    std::copy(agents.begin(), agents.end(), list);
    *accessible = list;
    *num_agents_accessible = static_cast<uint32_t>(agents.size());
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_pointer_info_set_userdata(const void* ptr, void* userdata) {
  HSA_RT_REQUIRE_READY();
  if (ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  ExclusiveLock lock(memory_mutex());
  auto it = memory().live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == memory().live.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  it->second.user_data = userdata;
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_rt::api

// ---- control interface -----------------------------------------------------------------------

extern "C" {

bool hsa_rt_allocation_flags(const void* ptr, uint32_t* flags) {
  if (!ready()) return false;
  SharedLock lock(memory_mutex());
  auto it = memory().live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == memory().live.end() || it->second.origin == Origin::kVariable) return false;
  if (flags != nullptr) *flags = it->second.alloc_flags;
  return true;
}

bool hsa_rt_quarantine_intact(void) {
  SharedLock lock(memory_mutex());
  return std::all_of(memory().quarantine.begin(), memory().quarantine.end(), [](const auto& e) {
    const Block& block = e.second.block;
    return !block.owned || backend::poison_intact(block.base, block.bytes);
  });
}

void hsa_rt_note_host_block(const void* base, size_t size) {
  if (base == nullptr || size == 0) return;
  std::lock_guard<std::mutex> lock(g_host_mutex);
  (*g_host_blocks)[reinterpret_cast<uintptr_t>(base)] = size;
}

void hsa_rt_forget_host_block(const void* base) {
  std::lock_guard<std::mutex> lock(g_host_mutex);
  g_host_blocks->erase(reinterpret_cast<uintptr_t>(base));
}

void hsa_rt_release_quarantine(void) {
  if (ready()) release_quarantine_of(kNoAgent);
}

}  // extern "C"
