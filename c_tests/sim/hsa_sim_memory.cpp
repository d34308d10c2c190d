// hsa_sim_memory.cpp: pools and regions, allocation, quarantined frees,
// synchronous copies with bounds checking, pointer info and access grants.
//
// "Device memory" is anonymous host memory mapped per allocation (page
// aligned, zero-filled and committed lazily, so a large allocation costs
// nothing until it is touched). Freed blocks stay mapped, filled with
// HSA_SIM_POISON_BYTE, in a FIFO quarantine so late accesses are caught.

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "hsa_sim_internal.h"

namespace hsa_sim {

// ---- mappings ---------------------------------------------------------------

void* map_block_memory(size_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return base == MAP_FAILED ? nullptr : base;
}

void unmap_block_memory(void* base, size_t bytes) { munmap(base, bytes); }

namespace {

// HSA_STATUS_ERROR_INVALID_MEMORY_POOL lives in an anonymous enum of
// hsa_ext_amd.h, so it needs a cast to be returned as an hsa_status_t.
constexpr auto kInvalidMemoryPool = static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);

// Rounds up to the granule; false when that overflows.
bool round_to_granule(size_t size, size_t* rounded) {
  if (size > std::numeric_limits<size_t>::max() - (kGranule - 1)) return false;
  *rounded = (size + kGranule - 1) / kGranule * kGranule;
  return true;
}

const Block& block_of(const Block& block) { return block; }
const Block& block_of(const QuarantinedBlock& entry) { return entry.block; }

// The entry of blocks (a map keyed by base) whose mapping contains address.
template <typename Map>
auto find_mapping_containing(Map& blocks, uintptr_t address) -> decltype(blocks.begin()) {
  auto it = blocks.upper_bound(address);
  if (it == blocks.begin()) return blocks.end();
  --it;
  const Block& block = block_of(it->second);
  const auto base = reinterpret_cast<uintptr_t>(block.base);
  return address - base < block.mapped_bytes ? it : blocks.end();
}

// True when [address, address + size) meets any mapping of blocks.
template <typename Map>
bool range_meets_mapping(const Map& blocks, uintptr_t address, size_t size) {
  if (find_mapping_containing(blocks, address) != blocks.end()) return true;
  auto next = blocks.upper_bound(address);
  return next != blocks.end() && next->first - address < size;
}

// ---- quarantine -------------------------------------------------------------

// Really releases the oldest quarantined block; false when there is none.
// Order entries whose block was taken back by address reuse are stale and
// skipped.
bool release_oldest_quarantined_locked(State& s) {
  while (!s.quarantine_order.empty()) {
    const auto [base, sequence] = s.quarantine_order.front();
    s.quarantine_order.pop_front();
    auto it = s.quarantine.find(base);
    if (it == s.quarantine.end() || it->second.sequence != sequence) continue;
    const Block& block = it->second.block;
    s.quarantine_bytes -= block.mapped_bytes;
    unmap_block_memory(block.base, block.mapped_bytes);
    s.quarantine.erase(it);
    return true;
  }
  return false;
}

// Address reuse: the most recently quarantined block of the same pool that is
// large enough comes back, still holding poison (like VRAM garbage).
bool take_quarantined_block_locked(State& s, PoolId pool, size_t bytes, Block* out) {
  for (auto it = s.quarantine_order.rbegin(); it != s.quarantine_order.rend(); ++it) {
    auto found = s.quarantine.find(it->first);
    if (found == s.quarantine.end() || found->second.sequence != it->second) continue;
    const Block& block = found->second.block;
    if (block.origin == BlockOrigin::kVariableStorage || !(block.pool == pool) ||
        block.mapped_bytes < bytes) {
      continue;
    }
    *out = block;
    s.quarantine_bytes -= block.mapped_bytes;
    s.quarantine.erase(found);
    s.quarantine_order.erase(std::next(it).base());
    return true;
  }
  return false;
}

// ---- allocation -------------------------------------------------------------

// Agents that can reach a fresh allocation before any hsa_amd_agents_allow_access.
// ROCr maps device memory for its owner only, and system memory from
// hsa_amd_memory_pool_allocate (a "restricted" allocation) for the CPU only;
// system memory from the older hsa_memory_allocate is mapped to every GPU.
std::vector<uint32_t> initial_accessible_agents(const State& s, PoolId pool, BlockOrigin origin) {
  std::vector<uint32_t> agents{pool.agent_index};
  if (!is_device_kind(pool.kind) && origin == BlockOrigin::kRegionAllocation) {
    for (uint32_t gpu = 1; gpu <= s.gpu_count; ++gpu) agents.push_back(gpu);
  }
  return agents;
}

hsa_status_t allocate_locked(State& s, PoolId pool, size_t size, uint32_t flags, BlockOrigin origin,
                             void** ptr) {
  size_t rounded = 0;
  // ROCr refuses sizes over the pool's ALLOC_MAX_SIZE with INVALID_ALLOCATION.
  if (size > pool_size(pool.kind) || !round_to_granule(size, &rounded)) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (s.faults.failing_allocations > 0) {
    --s.faults.failing_allocations;
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  Block block;
  if (!(s.address_reuse && take_quarantined_block_locked(s, pool, rounded, &block))) {
    block.base = static_cast<uint8_t*>(map_block_memory(rounded));
    if (block.base == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    block.mapped_bytes = rounded;
  }
  block.extent = rounded;
  block.origin = origin;
  block.pool = pool;
  block.global_flags = pool_global_flags(pool.kind);
  block.alloc_flags = flags;
  block.accessible = initial_accessible_agents(s, pool, origin);
  block.user_data = nullptr;
  s.live[reinterpret_cast<uintptr_t>(block.base)] = block;
  *ptr = block.base;
  return HSA_STATUS_SUCCESS;
}

// hsa_memory_free and hsa_amd_memory_pool_free are the same operation in ROCr:
// NULL is accepted, anything but the base of a live runtime allocation is
// HSA_STATUS_ERROR_INVALID_ALLOCATION.
hsa_status_t free_allocation(void* ptr) {
  if (ptr == nullptr) return HSA_STATUS_SUCCESS;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.live.end() || it->second.origin == BlockOrigin::kVariableStorage) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (s.faults.failing_frees > 0) {
    --s.faults.failing_frees;
    return HSA_STATUS_ERROR;
  }
  Block block = std::move(it->second);
  s.live.erase(it);
  quarantine_block_locked(s, std::move(block));
  return HSA_STATUS_SUCCESS;
}

// ---- pools and regions ------------------------------------------------------

// Pools an agent reports: a GPU its own device pools, the CPU the system pools
// (fine, kernarg, coarse: the order rocminfo shows for ROCr).
std::vector<PoolId> owned_pools(uint32_t agent_index) {
  if (is_gpu_index(agent_index)) {
    return {{agent_index, HSA_SIM_POOL_DEVICE_COARSE}, {agent_index, HSA_SIM_POOL_DEVICE_FINE}};
  }
  return {{agent_index, HSA_SIM_POOL_SYSTEM_FINE},
          {agent_index, HSA_SIM_POOL_SYSTEM_KERNARG},
          {agent_index, HSA_SIM_POOL_SYSTEM_COARSE}};
}

// Regions an agent reports. ROCr's GpuAgent::IterateRegion also visits the
// system regions (that is how applications find the kernarg region from a
// GPU), so a GPU lists its own regions followed by the CPU's.
std::vector<PoolId> visible_regions(uint32_t agent_index) {
  std::vector<PoolId> regions = owned_pools(agent_index);
  if (is_gpu_index(agent_index)) {
    const std::vector<PoolId> system = owned_pools(kCpuAgentIndex);
    regions.insert(regions.end(), system.begin(), system.end());
  }
  return regions;
}

template <typename Handle>
hsa_status_t visit_pools(const std::vector<uint64_t>& handles,
                         hsa_status_t (*callback)(Handle, void*), void* data) {
  for (uint64_t handle : handles) {
    const hsa_status_t status = callback(Handle{handle}, data);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}

// Handles of pools, taken under the lock so the walk can run without it.
bool pool_handles_for_agent(hsa_agent_t agent, bool include_system_regions,
                            std::vector<uint64_t>* handles) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t index = 0;
  if (!agent_index_from_handle_locked(s, agent, &index)) return false;
  const std::vector<PoolId> pools = include_system_regions ? visible_regions(index)
                                                           : owned_pools(index);
  for (const PoolId& pool : pools) handles->push_back(pool_handle_locked(s, pool));
  return true;
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
      write_value(value, pool_size(pool.kind));
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED:
      write_value(value, true);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE:
      write_value(value, kGranule);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT:
      write_value(value, kAlignment);
      return true;
    default:
      return false;
  }
}

// HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS as ROCr's MemoryRegion::GetAgentPoolInfo
// computes it: the owner, and a CPU for system memory, are allowed by default;
// any other agent with a link (every pair in this topology has one) is
// disallowed by default and needs hsa_amd_agents_allow_access. So a GPU gets
// DISALLOWED_BY_DEFAULT for all system pools (kernarg included), the CPU for
// device pools, and a GPU for a peer GPU's pools. NEVER_ALLOWED does not occur.
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
  info.link_type = gpu_to_gpu ? HSA_AMD_LINK_INFO_TYPE_XGMI : HSA_AMD_LINK_INFO_TYPE_PCIE;
  info.numa_distance = 20;
  return info;
}

// ---- pointer lookup ---------------------------------------------------------

// The live block whose reported extent contains address (what
// hsa_amd_pointer_info reports): allocations and variable storage.
const Block* live_block_at_locked(const State& s, uintptr_t address) {
  auto it = find_mapping_containing(s.live, address);
  if (it == s.live.end()) return nullptr;
  const Block& block = it->second;
  return address - reinterpret_cast<uintptr_t>(block.base) < block.extent ? &block : nullptr;
}

void add_accessible_agent(Block& block, uint32_t agent_index) {
  if (std::find(block.accessible.begin(), block.accessible.end(), agent_index) ==
      block.accessible.end()) {
    block.accessible.push_back(agent_index);
  }
}

}  // namespace

// ---- quarantine (shared) ----------------------------------------------------

void quarantine_block_locked(State& s, Block block) {
  // A block bigger than the whole quarantine would be the oldest entry the
  // moment it went in; release it directly instead of poisoning it first.
  if (block.mapped_bytes > kQuarantineMaxBytes) {
    unmap_block_memory(block.base, block.mapped_bytes);
    return;
  }
  std::memset(block.base, HSA_SIM_POISON_BYTE, block.mapped_bytes);
  const auto base = reinterpret_cast<uintptr_t>(block.base);
  const uint64_t sequence = s.next_quarantine_sequence++;
  s.quarantine_bytes += block.mapped_bytes;
  s.quarantine[base] = QuarantinedBlock{std::move(block), sequence};
  s.quarantine_order.emplace_back(base, sequence);
  while (s.quarantine_bytes > kQuarantineMaxBytes || s.quarantine.size() > kQuarantineMaxBlocks) {
    if (!release_oldest_quarantined_locked(s)) break;
  }
}

void release_all_memory_locked(State& s) {
  for (auto& entry : s.live) unmap_block_memory(entry.second.base, entry.second.mapped_bytes);
  for (auto& entry : s.quarantine) {
    unmap_block_memory(entry.second.block.base, entry.second.block.mapped_bytes);
  }
  s.live.clear();
  s.quarantine.clear();
  s.quarantine_order.clear();
  s.quarantine_bytes = 0;
}

// ---- copy classification ----------------------------------------------------

Side classify_range_locked(const State& s, const void* ptr, size_t size) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (size > std::numeric_limits<uintptr_t>::max() - address) return Side::kViolation;
  auto live = find_mapping_containing(s.live, address);
  if (live != s.live.end()) {
    const Block& block = live->second;
    const uintptr_t offset = address - reinterpret_cast<uintptr_t>(block.base);
    // In bounds only when the whole range lies within the block's extent.
    return offset <= block.extent && size <= block.extent - offset ? Side::kDevice
                                                                   : Side::kViolation;
  }
  if (find_mapping_containing(s.quarantine, address) != s.quarantine.end()) {
    return Side::kViolation;
  }
  // Host memory, unless the range runs on into memory the runtime owns.
  if (range_meets_mapping(s.live, address, size) ||
      range_meets_mapping(s.quarantine, address, size)) {
    return Side::kViolation;
  }
  return Side::kHost;
}

bool agent_can_access_locked(const State& s, uint32_t agent_index, const void* ptr) {
  auto it = find_mapping_containing(s.live, reinterpret_cast<uintptr_t>(ptr));
  if (it == s.live.end()) return !is_gpu_index(agent_index);
  const std::vector<uint32_t>& agents = it->second.accessible;
  return std::find(agents.begin(), agents.end(), agent_index) != agents.end();
}

bool h2d_fault_covers_locked(const State& s, const void* dst, size_t size) {
  const auto begin = reinterpret_cast<uintptr_t>(dst);
  for (uintptr_t address : s.faults.h2d_fail_addresses) {
    if (address >= begin && address - begin < size) return true;
  }
  return false;
}

bool copy_fault_covers_locked(const State& s, const void* dst, const void* src, size_t size) {
  const auto covers = [size](const std::vector<uintptr_t>& addresses, const void* range) {
    const auto begin = reinterpret_cast<uintptr_t>(range);
    return std::any_of(addresses.begin(), addresses.end(), [&](uintptr_t address) {
      return address >= begin && address - begin < size;
    });
  };
  return covers(s.faults.copy_fail_addresses, dst) || covers(s.faults.copy_from_fail_addresses, src);
}

hsa_sim_copy_direction_t direction_of(Side src, Side dst) {
  if (src == Side::kDevice) {
    return dst == Side::kDevice ? HSA_SIM_COPY_DEVICE_TO_DEVICE : HSA_SIM_COPY_DEVICE_TO_HOST;
  }
  return dst == Side::kDevice ? HSA_SIM_COPY_HOST_TO_DEVICE : HSA_SIM_COPY_HOST_TO_HOST;
}

}  // namespace hsa_sim

namespace hsa_sim::api {

namespace {

// Injected failures for a synchronous copy that passed the bounds check.
bool injected_copy_failure_locked(State& s, hsa_sim_copy_direction_t direction, const void* dst,
                                  const void* src, size_t size) {
  Faults& faults = s.faults;
  if (direction == HSA_SIM_COPY_DEVICE_TO_HOST && faults.d2h_fail_at != 0 &&
      ++faults.d2h_seen == faults.d2h_fail_at) {
    faults.d2h_fail_at = 0;
    return true;
  }
  if (copy_fault_covers_locked(s, dst, src, size)) return true;
  return direction == HSA_SIM_COPY_HOST_TO_DEVICE && h2d_fault_covers_locked(s, dst, size);
}

}  // namespace

hsa_status_t memory_copy(void* dst, const void* src, size_t size) {
  State& s = state();
  // The check and the memcpy happen under one lock so a concurrent free can
  // never slip in between them.
  std::lock_guard<std::mutex> lock(s.mutex);
  if (dst == nullptr || src == nullptr) {
    ++s.counters.violations;
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (size == 0) return HSA_STATUS_SUCCESS;
  const Side dst_side = classify_range_locked(s, dst, size);
  const Side src_side = classify_range_locked(s, src, size);
  if (dst_side == Side::kViolation || src_side == Side::kViolation) {
    ++s.counters.violations;
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const hsa_sim_copy_direction_t direction = direction_of(src_side, dst_side);
  ++s.counters.copies[direction];
  if (injected_copy_failure_locked(s, direction, dst, src, size)) return HSA_STATUS_ERROR;
  std::memmove(dst, src, size);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t memory_allocate(hsa_region_t region, size_t size, void** ptr) {
  if (size == 0 || ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolId pool{};
  if (!pool_from_handle_locked(s, region.handle, &pool)) return HSA_STATUS_ERROR_INVALID_REGION;
  return allocate_locked(s, pool, size, 0, BlockOrigin::kRegionAllocation, ptr);
}

hsa_status_t amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
                                      uint32_t flags, void** ptr) {
  if (size == 0 || ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolId pool{};
  if (!pool_from_handle_locked(s, memory_pool.handle, &pool)) {
    return kInvalidMemoryPool;
  }
  // ROCr accepts allocation flags (PCIe, contiguous, ...); they are recorded
  // for hsa_sim_allocation_flags and otherwise ignored.
  return allocate_locked(s, pool, size, flags, BlockOrigin::kPoolAllocation, ptr);
}

hsa_status_t memory_free(void* ptr) { return free_allocation(ptr); }

hsa_status_t amd_memory_pool_free(void* ptr) { return free_allocation(ptr); }

hsa_status_t agent_iterate_regions(hsa_agent_t agent,
                                   hsa_status_t (*callback)(hsa_region_t, void*), void* data) {
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::vector<uint64_t> handles;
  if (!pool_handles_for_agent(agent, true, &handles)) return HSA_STATUS_ERROR_INVALID_AGENT;
  return visit_pools(handles, callback, data);
}

hsa_status_t amd_agent_iterate_memory_pools(hsa_agent_t agent,
                                            hsa_status_t (*callback)(hsa_amd_memory_pool_t,
                                                                     void*),
                                            void* data) {
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::vector<uint64_t> handles;
  if (!pool_handles_for_agent(agent, false, &handles)) return HSA_STATUS_ERROR_INVALID_AGENT;
  return visit_pools(handles, callback, data);
}

hsa_status_t region_get_info(hsa_region_t region, hsa_region_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolId pool{};
  if (!pool_from_handle_locked(s, region.handle, &pool)) return HSA_STATUS_ERROR_INVALID_REGION;
  if (write_common_pool_info(pool, attribute, value)) return HSA_STATUS_SUCCESS;
  switch (static_cast<uint32_t>(attribute)) {
    case HSA_REGION_INFO_ALLOC_MAX_SIZE:
      write_value(value, pool_size(pool.kind));
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
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolId pool{};
  if (!pool_from_handle_locked(s, memory_pool.handle, &pool)) {
    return kInvalidMemoryPool;
  }
  if (write_common_pool_info(pool, attribute, value)) return HSA_STATUS_SUCCESS;
  switch (attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL:
      // ROCr: true exactly for system memory.
      write_value(value, !is_device_kind(pool.kind));
      return HSA_STATUS_SUCCESS;
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE:
      write_value(value, pool_size(pool.kind));
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t amd_agent_memory_pool_get_info(hsa_agent_t agent, hsa_amd_memory_pool_t memory_pool,
                                            hsa_amd_agent_memory_pool_info_t attribute,
                                            void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t agent_index = 0;
  if (!agent_index_from_handle_locked(s, agent, &agent_index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  PoolId pool{};
  if (!pool_from_handle_locked(s, memory_pool.handle, &pool)) {
    return kInvalidMemoryPool;
  }
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
  // ROCr: flags is reserved and must be NULL.
  if (num_agents == 0 || agents == nullptr || flags != nullptr || ptr == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // ROCr looks the pointer up by exact base in its allocation map and answers
  // a plain HSA_STATUS_ERROR when it is not there.
  auto it = s.live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.live.end() || it->second.origin == BlockOrigin::kVariableStorage) {
    return HSA_STATUS_ERROR;
  }
  std::vector<uint32_t> indices(num_agents);
  for (uint32_t i = 0; i < num_agents; ++i) {
    if (!agent_index_from_handle_locked(s, agents[i], &indices[i])) {
      return HSA_STATUS_ERROR_INVALID_AGENT;
    }
  }
  // Grants accumulate (ROCr makes them sticky for sub-allocated blocks).
  for (uint32_t index : indices) add_accessible_agent(it->second, index);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                              void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                              hsa_agent_t** accessible) {
  State& s = state();
  std::vector<hsa_agent_t> agents;
  hsa_amd_pointer_info_t result{};
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.counters.pointer_info_queries;
    if (s.faults.fail_pointer_info) return HSA_STATUS_ERROR;
    if (ptr == nullptr || info == nullptr || info->size == 0) {
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    // Fill at most what the caller's structure holds, and tell it how much.
    result.size = static_cast<uint32_t>(std::min<size_t>(info->size, sizeof(result)));
    const Block* block = live_block_at_locked(s, reinterpret_cast<uintptr_t>(ptr));
    if (block == nullptr) {
      // Unknown and freed pointers are not an error in ROCr: SUCCESS, UNKNOWN.
      result.type = HSA_EXT_POINTER_TYPE_UNKNOWN;
      std::memcpy(info, &result, result.size);
      return HSA_STATUS_SUCCESS;
    }
    result.type = HSA_EXT_POINTER_TYPE_HSA;
    result.agentBaseAddress = block->base;
    result.hostBaseAddress = block->base;
    result.sizeInBytes = block->extent;
    result.userData = block->user_data;
    result.agentOwner = agent_handle_locked(s, block->pool.agent_index);
    result.global_flags = block->global_flags;
    for (uint32_t index : block->accessible) agents.push_back(agent_handle_locked(s, index));
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
  if (ptr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.live.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  it->second.user_data = userdata;
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_sim::api
