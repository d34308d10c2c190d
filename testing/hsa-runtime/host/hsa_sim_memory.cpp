// hsa_sim_memory.cpp: pools and regions, allocation, quarantined frees,
// synchronous copies with bounds checking, pointer info and access grants.
//
// "Device memory" is anonymous host memory mapped per allocation (page
// aligned, zero-filled and committed lazily, so a large allocation costs
// nothing until it is touched). Freed blocks stay mapped, filled with
// HSA_SIM_POISON_BYTE, in a FIFO quarantine so late accesses are caught.
// Device allocations are counted against their GPU's device memory
// (State::device_bytes, shared with vmem handles). Copies treat vmem
// reservations as hsa_sim_vmem.cpp decides, and copy through a mapping's
// handle memory.

#include <sys/mman.h>
#include <unistd.h>

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

using hsa_common::kInvalidMemoryPool;

const Block& block_of(const Block& block) { return block; }
const Block& block_of(const QuarantinedBlock& entry) { return entry.block; }

// The range of a block (live or quarantined) in the maps keyed by base that
// hsa_common::find_containing / range_meets search: its whole mapping.
constexpr auto kMappedBytes = [](const auto& entry) { return block_of(entry).mapped_bytes; };

using hsa_common::find_containing;
using hsa_common::range_meets;

// The extent of an entry of a map of plain ranges (base -> bytes).
constexpr auto kRangeBytes = [](size_t bytes) { return bytes; };

// ---- host memory the test program registered ---------------------------------

// Blocks of host memory the test program told the runtime about (its
// allocator registers what it hands out), by base. A copy whose host side
// starts in one must end in it: that is how an overrun of a host buffer (a
// snapshot's pageable arena, say) is caught as a violation instead of as
// heap corruption. Its own lock, a leaf: taken under State::mutex, or alone.
struct HostBlocks {
  std::mutex mutex;
  std::map<uintptr_t, size_t> blocks;
};

HostBlocks& host_blocks() {
  static HostBlocks* const blocks = new HostBlocks;
  return *blocks;
}

// Whether every page of [address, address + size) is mapped.
bool pages_mapped(uintptr_t address, size_t size) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = address & ~(page - 1);
  const uintptr_t length = address + size - first;
  std::vector<unsigned char> residency((length + page - 1) / page);
  return mincore(reinterpret_cast<void*>(first), length, residency.data()) == 0;
}

// A host-side range is valid when it is mapped and, if it starts in a
// registered block, ends in it.
bool host_range_valid(uintptr_t address, size_t size) {
  {
    HostBlocks& h = host_blocks();
    std::lock_guard<std::mutex> lock(h.mutex);
    auto block = find_containing(h.blocks, address, kRangeBytes);
    if (block != h.blocks.end()) return size <= block->second - (address - block->first);
  }
  return pages_mapped(address, size);
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

hsa_status_t allocate_locked(State& s, PoolId pool, size_t size, uint32_t flags, BlockOrigin origin,
                             void** ptr) {
  size_t rounded = 0;
  // ROCr refuses sizes over the pool's ALLOC_MAX_SIZE with INVALID_ALLOCATION.
  if (size > pool_size(pool.kind) || !hsa_common::round_up(size, kGranule, &rounded)) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (s.faults.failing_allocations > 0) {
    --s.faults.failing_allocations;
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  // A GPU's pools and vmem handles share its device memory.
  const bool device = is_device_kind(pool.kind);
  if (device && !take_device_bytes_locked(s, pool.agent_index, rounded)) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  Block block;
  if (!(s.address_reuse && take_quarantined_block_locked(s, pool, rounded, &block))) {
    block.base = static_cast<uint8_t*>(map_block_memory(rounded));
    if (block.base == nullptr) {
      if (device) give_device_bytes_locked(s, pool.agent_index, rounded);
      return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    }
    block.mapped_bytes = rounded;
    // Fresh device memory holds whatever was there before (VRAM is not
    // cleared for the process: an H200 showed garbage where a buffer was
    // assumed zero), so code that reads before it writes is caught here.
    // Only the first 64 KiB: small buffers (counters, tables) whole, and
    // the tests' multi-GiB footprints are not all touched.
    if (device) std::memset(block.base, HSA_SIM_POISON_BYTE, std::min<size_t>(rounded, 64 << 10));
  }
  block.extent = rounded;
  block.origin = origin;
  block.pool = pool;
  block.global_flags = pool_global_flags(pool.kind);
  block.alloc_flags = flags;
  block.accessible = hsa_common::initial_accessible_agents(
      pool.agent_index, is_device_kind(pool.kind), origin == BlockOrigin::kRegionAllocation,
      s.gpu_count);
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
  if (is_device_kind(block.pool.kind)) give_device_bytes_locked(s, block.pool.agent_index, block.extent);
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

template <typename Handle>
hsa_status_t visit_pools(const std::vector<uint64_t>& handles,
                         hsa_status_t (*callback)(Handle, void*), void* data) {
  return hsa_common::call_each(handles,
                               [&](uint64_t handle) { return callback(Handle{handle}, data); });
}

// Handles of pools, taken under the lock so the walk can run without it.
bool pool_handles_for_agent(hsa_agent_t agent, bool include_system_regions,
                            std::vector<uint64_t>* handles) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t index = 0;
  if (!agent_index_from_handle_locked(s, agent, &index)) return false;
  // Regions: a GPU's own followed by the CPU's (hsa_common::visible_regions).
  const std::vector<PoolId> pools = include_system_regions
                                        ? hsa_common::visible_regions(index, owned_pools)
                                        : owned_pools(index);
  for (const PoolId& pool : pools) handles->push_back(pool_handle_locked(s, pool));
  return true;
}

// What the pool/region attribute queries report about a pool.
hsa_common::PoolDescription describe_pool(PoolId pool) {
  hsa_common::PoolDescription description;
  description.global_flags = pool_global_flags(pool.kind);
  description.size = pool_size(pool.kind);
  description.granule = kGranule;
  description.alignment = kAlignment;
  description.device = is_device_kind(pool.kind);
  return description;
}

// ---- pointer lookup ---------------------------------------------------------

// The live block whose reported extent contains address (what
// hsa_amd_pointer_info reports): allocations and variable storage.
const Block* live_block_at_locked(const State& s, uintptr_t address) {
  auto it = find_containing(s.live, address, kMappedBytes);
  if (it == s.live.end()) return nullptr;
  const Block& block = it->second;
  return address - reinterpret_cast<uintptr_t>(block.base) < block.extent ? &block : nullptr;
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
  for (uint64_t& bytes : s.device_bytes) bytes = 0;
}

// ---- copy classification ----------------------------------------------------

Side classify_range_locked(const State& s, const void* ptr, size_t size, CopyRole role) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (size > std::numeric_limits<uintptr_t>::max() - address) return Side::kViolation;
  // Reserved address space: device memory only inside one accessible
  // mapping. Checked first, so nothing else ever touches a reservation.
  if (vmem_range_meets_locked(s, address, size == 0 ? 1 : size)) {
    return vmem_classify_locked(s, address, size, role);
  }
  auto live = find_containing(s.live, address, kMappedBytes);
  if (live != s.live.end()) {
    const Block& block = live->second;
    const uintptr_t offset = address - reinterpret_cast<uintptr_t>(block.base);
    // In bounds only when the whole range lies within the block's extent.
    return offset <= block.extent && size <= block.extent - offset ? Side::kDevice
                                                                   : Side::kViolation;
  }
  if (find_containing(s.quarantine, address, kMappedBytes) != s.quarantine.end()) {
    return Side::kViolation;
  }
  // Host memory, unless the range runs on into memory the runtime owns.
  if (range_meets(s.live, address, size, kMappedBytes) ||
      range_meets(s.quarantine, address, size, kMappedBytes)) {
    return Side::kViolation;
  }
  if (size == 0) return Side::kHost;
  if (range_meets(s.unbacked, address, size, kRangeBytes) || !host_range_valid(address, size)) {
    return Side::kViolation;
  }
  return Side::kHost;
}

bool range_is_live_storage_locked(const State& s, uint64_t address, size_t size) {
  auto live = find_containing(s.live, static_cast<uintptr_t>(address), kMappedBytes);
  if (live == s.live.end()) return false;
  const uintptr_t offset = static_cast<uintptr_t>(address) - reinterpret_cast<uintptr_t>(live->second.base);
  return offset <= live->second.extent && size <= live->second.extent - offset;
}

void* engine_address_locked(const State& s, const void* ptr) {
  uint8_t* handle_memory = vmem_engine_address_locked(s, reinterpret_cast<uintptr_t>(ptr));
  return handle_memory != nullptr ? handle_memory : const_cast<void*>(ptr);
}

bool agent_can_access_locked(const State& s, uint32_t agent_index, const void* ptr) {
  uint32_t permission = 0;
  if (vmem_agent_permission_locked(s, reinterpret_cast<uintptr_t>(ptr), agent_index,
                                   &permission)) {
    return permission != 0;  // HSA_ACCESS_PERMISSION_NONE
  }
  auto it = find_containing(s.live, reinterpret_cast<uintptr_t>(ptr), kMappedBytes);
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
  return static_cast<hsa_sim_copy_direction_t>(hsa_common::direction_index(src, dst));
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
  const Side dst_side = classify_range_locked(s, dst, size, CopyRole::kDestination);
  const Side src_side = classify_range_locked(s, src, size, CopyRole::kSource);
  if (dst_side == Side::kViolation || src_side == Side::kViolation) {
    ++s.counters.violations;
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const hsa_sim_copy_direction_t direction = direction_of(src_side, dst_side);
  ++s.counters.copies[direction];
  if (injected_copy_failure_locked(s, direction, dst, src, size)) return HSA_STATUS_ERROR;
  std::memmove(engine_address_locked(s, dst), engine_address_locked(s, src), size);
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
  return hsa_common::write_region_info(describe_pool(pool), attribute, value);
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
  return hsa_common::write_memory_pool_info(describe_pool(pool), attribute, value);
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
  return hsa_common::write_agent_memory_pool_info(agent_index, pool.agent_index,
                                                  is_device_kind(pool.kind), attribute, value);
}

hsa_status_t amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                     const uint32_t* flags, const void* ptr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // The pointer is looked up first (HSA-on-CUDA checks the agents first; see
  // hsa_common::AllowAccessOrder). Variable storage is no allocation.
  return hsa_common::allow_access(
      num_agents, agents, flags, ptr, hsa_common::AllowAccessOrder::kPointerFirst,
      [&](hsa_agent_t agent, uint32_t* index) {
        return agent_index_from_handle_locked(s, agent, index);
      },
      [&](const void* base) -> std::vector<uint32_t>* {
        auto it = s.live.find(reinterpret_cast<uintptr_t>(base));
        if (it == s.live.end() || it->second.origin == BlockOrigin::kVariableStorage) {
          return nullptr;
        }
        return &it->second.accessible;
      });
}

hsa_status_t amd_pointer_info(const void* ptr, hsa_amd_pointer_info_t* info,
                              void* (*alloc)(size_t), uint32_t* num_agents_accessible,
                              hsa_agent_t** accessible) {
  State& s = state();
  std::vector<hsa_agent_t> agents;
  hsa_amd_pointer_info_t result{};
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    // Counted, and the injected failure answered, before the argument check.
    ++s.counters.pointer_info_queries;
    if (s.faults.fail_pointer_info) return HSA_STATUS_ERROR;
    if (!hsa_common::pointer_info_arguments_valid(ptr, info)) {
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    // Unknown and freed pointers: type UNKNOWN.
    result = hsa_common::pointer_info_answer(*info);
    // Reserved address space (vmem), as the headers' generation answers it.
    bool list_without_alloc = false;
    if (vmem_pointer_info_locked(s, reinterpret_cast<uintptr_t>(ptr), &result, &agents,
                                 &list_without_alloc)) {
      if (list_without_alloc) {
        // ROCr 7.x's VMemoryPtrInfo: no alloc call for an empty list.
        return hsa_common::deliver_vmem_pointer_info_without_agents(
            result, info, alloc, num_agents_accessible, accessible);
      }
    } else {
      const Block* block = live_block_at_locked(s, reinterpret_cast<uintptr_t>(ptr));
      if (block == nullptr) {
        return hsa_common::deliver_pointer_info(result, agents, info, alloc,
                                                num_agents_accessible, accessible);
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
  }
  // alloc is the caller's and runs without the runtime's lock.
  return hsa_common::deliver_pointer_info(result, agents, info, alloc, num_agents_accessible,
                                          accessible);
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

// ---- control interface: host blocks ------------------------------------------

extern "C" void hsa_sim_note_host_block(const void* base, size_t size) {
  if (base == nullptr || size == 0) return;
  hsa_sim::HostBlocks& h = hsa_sim::host_blocks();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.blocks[reinterpret_cast<uintptr_t>(base)] = size;
}

extern "C" void hsa_sim_forget_host_block(const void* base) {
  hsa_sim::HostBlocks& h = hsa_sim::host_blocks();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.blocks.erase(reinterpret_cast<uintptr_t>(base));
}
