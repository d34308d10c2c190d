// hsa_sim.cpp: process state, topology, reset, modes, fault switches and
// observation counters of the software HSA runtime (see hsa_sim.h).

#include <algorithm>
#include <limits>

#include "hsa_sim_internal.h"

namespace hsa_sim {

// ---- handles ----------------------------------------------------------------

namespace {
using Handles = hsa_common::HandleLayout<24>;
constexpr uint32_t kEpochMask = static_cast<uint32_t>(Handles::kEpochMask);
}  // namespace

uint64_t make_handle(HandleTag tag, uint32_t epoch, uint32_t payload) {
  return Handles::make(tag, epoch, payload);
}

bool decode_handle(uint64_t handle, HandleTag tag, uint32_t epoch, uint32_t* payload) {
  uint64_t decoded = 0;
  if (!Handles::decode(handle, tag, epoch, &decoded)) return false;
  *payload = static_cast<uint32_t>(decoded);
  return true;
}

// ---- pools ------------------------------------------------------------------

bool is_device_kind(hsa_sim_pool_kind_t kind) {
  return kind == HSA_SIM_POOL_DEVICE_COARSE || kind == HSA_SIM_POOL_DEVICE_FINE;
}

uint32_t pool_global_flags(hsa_sim_pool_kind_t kind) {
  switch (kind) {
    case HSA_SIM_POOL_DEVICE_COARSE:
    case HSA_SIM_POOL_SYSTEM_COARSE:
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
    case HSA_SIM_POOL_DEVICE_FINE:
    case HSA_SIM_POOL_SYSTEM_FINE:
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
    case HSA_SIM_POOL_SYSTEM_KERNARG:
      // ROCr's system kernarg pool is fine-grained system memory that also
      // carries KERNARG_INIT.
      return HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT |
             HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
  }
  return 0;
}

size_t pool_size(hsa_sim_pool_kind_t kind) {
  return is_device_kind(kind) ? kDevicePoolSize : kSystemPoolSize;
}

// ---- agents -----------------------------------------------------------------

uint32_t agent_count_locked(const State& s) { return s.gpu_count + 1; }

bool agent_index_from_handle_locked(const State& s, hsa_agent_t agent, uint32_t* index) {
  uint32_t payload = 0;
  if (!decode_handle(agent.handle, HandleTag::kAgent, s.epoch, &payload)) return false;
  if (payload >= agent_count_locked(s)) return false;
  *index = payload;
  return true;
}

hsa_agent_t agent_handle_locked(const State& s, uint32_t index) {
  return hsa_agent_t{make_handle(HandleTag::kAgent, s.epoch, index)};
}

// Pool payload: agent index in the high bits, kind in the low three.
namespace {
constexpr uint32_t kKindBits = 3;
constexpr uint32_t kKindMask = (1u << kKindBits) - 1;

bool agent_owns_kind(uint32_t agent_index, hsa_sim_pool_kind_t kind) {
  return is_gpu_index(agent_index) == is_device_kind(kind);
}
}  // namespace

bool pool_from_handle_locked(const State& s, uint64_t handle, PoolId* pool) {
  uint32_t payload = 0;
  if (!decode_handle(handle, HandleTag::kPool, s.epoch, &payload)) return false;
  const uint32_t agent_index = payload >> kKindBits;
  const uint32_t kind = payload & kKindMask;
  if (agent_index >= agent_count_locked(s) || kind >= kPoolKindCount) return false;
  const auto pool_kind = static_cast<hsa_sim_pool_kind_t>(kind);
  if (!agent_owns_kind(agent_index, pool_kind)) return false;
  *pool = PoolId{agent_index, pool_kind};
  return true;
}

uint64_t pool_handle_locked(const State& s, PoolId pool) {
  return make_handle(HandleTag::kPool, s.epoch,
                     (pool.agent_index << kKindBits) | static_cast<uint32_t>(pool.kind));
}

// ---- state ------------------------------------------------------------------

namespace {

// Drops every allocation, executable, fault and counter and starts a new
// epoch, so that every handle given out before is unknown afterwards.
void rebuild_locked(State& s, uint32_t gpu_count) {
  release_all_memory_locked(s);
  vmem_release_all_locked(s);
  s.device_bytes.assign(size_t{gpu_count} + 1, 0);
  s.executables.clear();
  s.next_executable_id = 1;
  s.readers.clear();
  s.next_reader_id = 1;
  s.next_loaded_code_object_id = 1;
  // GPUs report the default ISA, the CPU none (as ROCr's CpuAgent).
  s.agent_isas.assign(size_t{gpu_count} + 1, kDefaultGpuIsa);
  s.agent_isas[kCpuAgentIndex].clear();
  s.isa_names.clear();
  s.unbacked.clear();
  s.faults = Faults{};
  s.counters = Counters{};
  s.address_reuse = false;
  s.memory_avail_supported = true;
  s.strict_async_access = false;
  s.gpu_count = gpu_count;
  // Epoch 0 is never used, so a zeroed handle never validates.
  s.epoch = (s.epoch + 1) & kEpochMask;
  if (s.epoch == 0) s.epoch = 1;
}

State* create_state() {
  // Never deleted: the library under test may call in from atexit handlers
  // or static destructors, after any destructor of ours would have run.
  auto* s = new State;
  rebuild_locked(*s, 2);
  return s;
}

}  // namespace

State& state() {
  static State* const instance = create_state();
  return *instance;
}

}  // namespace hsa_sim

using namespace hsa_sim;

// ---- topology ---------------------------------------------------------------

extern "C" void hsa_sim_reset(uint32_t gpu_count) {
  State& s = state();
  // Copies queued before the reset must not land in the new topology's memory,
  // nor dispatches still on a queue: queues are the old topology's.
  drain_async_copies();
  retire_all_queues();
  {
    std::lock_guard<std::mutex> loader(s.loader_mutex);
    std::lock_guard<std::mutex> lock(s.mutex);
    rebuild_locked(s, gpu_count);
  }
  reset_signal_counters();
}

extern "C" uint32_t hsa_sim_gpu_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.gpu_count;
}

extern "C" hsa_agent_t hsa_sim_cpu_agent(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return agent_handle_locked(s, kCpuAgentIndex);
}

extern "C" hsa_agent_t hsa_sim_gpu_agent(uint32_t index) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (index >= s.gpu_count) return hsa_agent_t{0};
  return agent_handle_locked(s, index + 1);
}

namespace {
uint64_t pool_or_region_handle(hsa_agent_t agent, hsa_sim_pool_kind_t kind) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t index = 0;
  if (!agent_index_from_handle_locked(s, agent, &index)) return 0;
  if (static_cast<uint32_t>(kind) >= kPoolKindCount || !agent_owns_kind(index, kind)) return 0;
  return pool_handle_locked(s, PoolId{index, kind});
}
}  // namespace

extern "C" hsa_amd_memory_pool_t hsa_sim_pool(hsa_agent_t agent, hsa_sim_pool_kind_t kind) {
  return hsa_amd_memory_pool_t{pool_or_region_handle(agent, kind)};
}

extern "C" hsa_region_t hsa_sim_region(hsa_agent_t agent, hsa_sim_pool_kind_t kind) {
  // ROCr implements pools and regions with one object, so a pool handle and
  // the region handle of the same memory are the same value.
  return hsa_region_t{pool_or_region_handle(agent, kind)};
}

// ---- modes ------------------------------------------------------------------

extern "C" void hsa_sim_set_address_reuse(bool enabled) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.address_reuse = enabled;
}

extern "C" void hsa_sim_set_memory_avail_supported(bool supported) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.memory_avail_supported = supported;
}

uint64_t hsa_sim::device_bytes_live_locked(const State& s, uint32_t agent_index) {
  return agent_index < s.device_bytes.size() ? s.device_bytes[agent_index] : 0;
}

bool hsa_sim::take_device_bytes_locked(State& s, uint32_t agent_index, uint64_t bytes) {
  if (agent_index >= s.device_bytes.size()) return false;
  uint64_t& used = s.device_bytes[agent_index];
  if (bytes > kDevicePoolSize - used) return false;
  used += bytes;
  return true;
}

void hsa_sim::give_device_bytes_locked(State& s, uint32_t agent_index, uint64_t bytes) {
  if (agent_index < s.device_bytes.size()) {
    uint64_t& used = s.device_bytes[agent_index];
    used -= std::min(used, bytes);
  }
}

extern "C" void hsa_sim_set_strict_async_access(bool enabled) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.strict_async_access = enabled;
}

// ---- fault injection --------------------------------------------------------

extern "C" void hsa_sim_fail_pointer_info(bool fail) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.fail_pointer_info = fail;
}

extern "C" void hsa_sim_fail_nth_d2h_copy(uint64_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.d2h_fail_at = n;
  s.faults.d2h_seen = 0;
}

extern "C" void hsa_sim_fail_h2d_copy_into(const void* device_addr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto& addresses = s.faults.h2d_fail_addresses;
  if (device_addr == nullptr) {
    addresses.clear();
    return;
  }
  const auto address = reinterpret_cast<uintptr_t>(device_addr);
  if (addresses.size() < kMaxH2dFaultAddresses &&
      std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
    addresses.push_back(address);
  }
}

namespace {

// Adds an address to a fault list (NULL clears it).
void set_copy_fault(std::vector<uintptr_t>& addresses, const void* addr) {
  if (addr == nullptr) {
    addresses.clear();
    return;
  }
  const auto address = reinterpret_cast<uintptr_t>(addr);
  if (addresses.size() < kMaxH2dFaultAddresses &&
      std::find(addresses.begin(), addresses.end(), address) == addresses.end()) {
    addresses.push_back(address);
  }
}

}  // namespace

extern "C" void hsa_sim_fail_copies_into(const void* addr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  set_copy_fault(s.faults.copy_fail_addresses, addr);
}

extern "C" void hsa_sim_fail_copies_from(const void* addr) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  set_copy_fault(s.faults.copy_from_fail_addresses, addr);
}

extern "C" void hsa_sim_refuse_symbol_walk(hsa_executable_t exe, bool refuse) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint32_t id = 0;
  if (!decode_handle(exe.handle, HandleTag::kExecutable, s.epoch, &id)) return;
  auto it = s.executables.find(id);
  if (it != s.executables.end()) it->second.refuse_symbol_walk = refuse;
}

extern "C" void hsa_sim_fail_symbol_query(hsa_executable_symbol_info_t attribute, bool fail) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto key = static_cast<uint32_t>(attribute);
  if (fail) {
    s.faults.failing_symbol_queries.insert(key);
  } else {
    s.faults.failing_symbol_queries.erase(key);
  }
}

extern "C" void hsa_sim_fail_executable_iteration(bool fail) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.fail_executable_iteration = fail;
}

extern "C" void hsa_sim_fail_next_allocations(uint32_t count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.failing_allocations = count;
}

extern "C" void hsa_sim_fail_next_frees(uint32_t count) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.failing_frees = count;
}

extern "C" void hsa_sim_fail_nth_async_copy(uint64_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.async_fail_at = n;
  s.faults.async_seen = 0;
}

extern "C" void hsa_sim_fail_nth_vmem(hsa_sim_vmem_op_t op, uint64_t n) {
  const auto index = static_cast<size_t>(op);
  if (index >= static_cast<size_t>(VmemOp::kCount)) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.vmem_fail_at[index] = n;
  s.faults.vmem_seen[index] = 0;
}

extern "C" void hsa_sim_fail_nth_async_copy_completion(uint64_t n) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.faults.async_error_at = n;
  s.faults.async_error_seen = 0;
}

// ---- observation ------------------------------------------------------------

extern "C" uint64_t hsa_sim_copy_count(hsa_sim_copy_direction_t direction) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto index = static_cast<size_t>(direction);
  return index < 4 ? s.counters.copies[index] : 0;
}

extern "C" uint64_t hsa_sim_copy_violations(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counters.violations;
}

extern "C" uint64_t hsa_sim_pointer_info_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counters.pointer_info_queries;
}

extern "C" uint64_t hsa_sim_async_copy_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counters.async_copies;
}

extern "C" uint64_t hsa_sim_live_allocation_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return static_cast<uint64_t>(
      std::count_if(s.live.begin(), s.live.end(), [](const auto& entry) {
        return entry.second.origin != BlockOrigin::kVariableStorage;
      }));
}

extern "C" bool hsa_sim_allocation_flags(const void* ptr, uint32_t* flags) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.live.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.live.end() || it->second.origin == BlockOrigin::kVariableStorage) return false;
  if (flags != nullptr) *flags = it->second.alloc_flags;
  return true;
}

extern "C" bool hsa_sim_quarantine_intact(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const auto& entry : s.quarantine) {
    const Block& block = entry.second.block;
    const uint8_t* begin = block.base;
    const uint8_t* end = begin + block.mapped_bytes;
    const bool all_poison = std::all_of(begin, end, [](uint8_t byte) {
      return byte == HSA_SIM_POISON_BYTE;
    });
    if (!all_poison) return false;
  }
  return true;
}

extern "C" uint64_t hsa_sim_quarantined_bytes(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.quarantine_bytes;
}

extern "C" uint64_t hsa_sim_live_signal_count(void) {
  // A live queue's doorbell is the runtime's own signal, not the caller's.
  const uint64_t doorbells = live_queue_count();
  const uint64_t live = live_signal_count();
  return live > doorbells ? live - doorbells : 0;
}

extern "C" uint64_t hsa_sim_signal_handler_count(void) { return armed_signal_handler_count(); }

extern "C" bool hsa_sim_vmem_supported(void) { return HSA_COMMON_HAVE_VMEM; }

extern "C" uint64_t hsa_sim_vmem_mapping_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.vmem.mappings.size();
}

extern "C" uint64_t hsa_sim_vmem_handle_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.vmem.handles.size();
}

extern "C" uint64_t hsa_sim_vmem_reservation_count(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.vmem.reservations.size();
}

extern "C" uint64_t hsa_sim_invalid_signal_uses(void) { return invalid_signal_uses(); }
