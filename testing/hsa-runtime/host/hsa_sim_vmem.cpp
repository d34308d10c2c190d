// hsa_sim_vmem.cpp: the virtual memory API (hsa_amd_vmem_*, ROCm 6.0 and
// later headers) and how copies and hsa_amd_pointer_info see its memory.
//
// Memory model, after ROCr's Runtime::VMemory* (runtime.cpp):
//   a reservation (address_reserve) is PROT_NONE anonymous memory;
//   a handle (handle_create) is "physical" memory: a memfd of its size,
//     counted in its GPU's device bytes, also mapped read-write at a private
//     address (the shadow) through which the sim's copy engine reads and
//     writes it, like a DMA engine that never sees the CPU's page tables;
//   a mapping (map) puts the memfd at an address inside a reservation,
//     MAP_SHARED | MAP_FIXED with PROT_NONE: two mappings of one handle show
//     the same bytes;
//   set_access records each agent's permission and applies the CPU agent's
//     to the user view with mprotect;
//   unmap puts PROT_NONE anonymous memory back; the handle keeps its bytes.
// Everything lives in State::vmem under State::mutex. The semantics per
// header generation are described in hsa_sim.h ("Virtual memory"); the rules
// HSA-on-CUDA follows too (argument checks, set_access per generation,
// get_access, copies, pointer info) are hsa_common_vmem.h's.
//
// The helpers copies, pointer info and reset use are compiled with every
// header generation (with 5.2 headers nothing is ever reserved, so they find
// nothing); the entry points only where the headers declare the API.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "hsa_sim_internal.h"

namespace hsa_sim {

namespace {

using hsa_common::kPermissionNone;
using hsa_common::kPermissionReadOnly;
using hsa_common::kPermissionReadWrite;
using hsa_common::kPermissionWriteOnly;

void close_handle(VmemHandle& handle) {
  if (handle.shadow != nullptr) munmap(handle.shadow, handle.size);
  if (handle.fd >= 0) close(handle.fd);
  handle.shadow = nullptr;
  handle.fd = -1;
}

}  // namespace

// ---- for copies, pointer info and reset ------------------------------------------

bool vmem_range_meets_locked(const State& s, uintptr_t address, size_t size) {
  return hsa_common::vmem_range_meets(s.vmem.reservations, address, size);
}

Side vmem_classify_locked(const State& s, uintptr_t address, size_t size, CopyRole role) {
  const char* why = nullptr;  // the sim counts violations without saying why
  return hsa_common::vmem_copy_side(s.vmem.mappings, address, size, role, &why);
}

uint8_t* vmem_engine_address_locked(const State& s, uintptr_t address) {
  if (s.vmem.mappings.empty()) return nullptr;
  auto mapping = hsa_common::vmem_mapping_containing(s.vmem.mappings, address);
  if (mapping == s.vmem.mappings.end()) return nullptr;
  auto handle = s.vmem.handles.find(mapping->second.handle_id);
  if (handle == s.vmem.handles.end()) return nullptr;
  return handle->second.shadow + (address - mapping->first);
}

bool vmem_agent_permission_locked(const State& s, uintptr_t address, uint32_t agent_index,
                                  uint32_t* permission) {
  if (s.vmem.mappings.empty()) return false;
  auto mapping = hsa_common::vmem_mapping_containing(s.vmem.mappings, address);
  if (mapping == s.vmem.mappings.end()) return false;
  *permission = hsa_common::vmem_permission(mapping->second, agent_index);
  return true;
}

bool vmem_pointer_info_locked(const State& s, uintptr_t address, hsa_amd_pointer_info_t* info,
                              std::vector<hsa_agent_t>* agents, bool* list_without_alloc) {
  return hsa_common::vmem_pointer_info(
      s.vmem.reservations, s.vmem.mappings, address,
      [&](uint32_t handle_id) { return s.vmem.handles.at(handle_id).pool.agent_index; },
      [&](uint32_t index) { return agent_handle_locked(s, index); }, info, agents,
      list_without_alloc);
}

void vmem_release_all_locked(State& s) {
  // Unmapping a reservation also removes the mappings inside it.
  for (auto& entry : s.vmem.reservations) {
    munmap(reinterpret_cast<void*>(entry.first), entry.second.size);
  }
  for (auto& entry : s.vmem.handles) close_handle(entry.second);
  s.vmem.reservations.clear();
  s.vmem.mappings.clear();
  s.vmem.handles.clear();
  s.vmem.next_handle_id = 1;
}

}  // namespace hsa_sim

#if HSA_COMMON_HAVE_VMEM

namespace hsa_sim {

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

int protection_of(uint32_t permission) {
  switch (permission) {
    case kPermissionReadOnly:
      return PROT_READ;
    case kPermissionWriteOnly:
      return PROT_WRITE;
    case kPermissionReadWrite:
      return PROT_READ | PROT_WRITE;
    default:
      return PROT_NONE;
  }
}

// Puts reserved (PROT_NONE anonymous) memory at [address, address + size).
bool map_reserved(uintptr_t address, size_t size) {
  void* mapped = mmap(reinterpret_cast<void*>(address), size, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return mapped != MAP_FAILED;
}

hsa_amd_vmem_alloc_handle_t handle_of(const State& s, uint32_t id) {
  return hsa_amd_vmem_alloc_handle_t{make_handle(HandleTag::kVmemHandle, s.epoch, id)};
}

// The handle's entry, or end() for a handle unknown in this topology.
std::map<uint32_t, VmemHandle>::iterator find_handle_locked(State& s,
                                                            hsa_amd_vmem_alloc_handle_t handle) {
  uint32_t id = 0;
  if (!decode_handle(handle.handle, HandleTag::kVmemHandle, s.epoch, &id)) {
    return s.vmem.handles.end();
  }
  return s.vmem.handles.find(id);
}

// Frees a handle nothing refers to any more: neither a reference
// (create/retain not yet released) nor a mapping.
void drop_handle_if_unused_locked(State& s, std::map<uint32_t, VmemHandle>::iterator it) {
  VmemHandle& handle = it->second;
  if (handle.ref_count != 0 || handle.map_count != 0) return;
  give_device_bytes_locked(s, handle.pool.agent_index, handle.size);
  close_handle(handle);
  s.vmem.handles.erase(it);
}

// hsa_sim_fail_nth_vmem: whether this call (one that passed its checks) is
// the one to fail.
bool injected_failure_locked(State& s, VmemOp op) {
  const auto index = static_cast<size_t>(op);
  uint64_t& fail_at = s.faults.vmem_fail_at[index];
  if (fail_at == 0) return false;
  if (++s.faults.vmem_seen[index] != fail_at) return false;
  fail_at = 0;
  return true;
}

hsa_status_t reserve(void** va, size_t size, uint64_t address, uint64_t alignment) {
  const size_t page = page_size();
  const hsa_status_t checked = hsa_common::vmem_check_reserve(va, size, &alignment, page);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  // Over-reserve by the alignment and trim, so that any alignment can be
  // met; the hint is used when it is aligned (and free).
  size_t span = 0;
  if (__builtin_add_overflow(size, static_cast<size_t>(alignment) - page, &span)) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  void* hint = address % alignment == 0 ? reinterpret_cast<void*>(address) : nullptr;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  void* raw = mmap(hint, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + (alignment - 1)) & ~static_cast<uintptr_t>(alignment - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + size;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  s.vmem.reservations[aligned] = VmemReservation{size};
  *va = reinterpret_cast<void*>(aligned);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

}  // namespace hsa_sim

namespace hsa_sim::api {

hsa_status_t amd_vmem_address_reserve(void** va, size_t size, uint64_t address, uint64_t flags) {
  (void)flags;  // "currently unsupported" (7.x: NO_REGISTER, which changes nothing here)
  return reserve(va, size, address, 0);
}

#if HSA_COMMON_HAVE_VMEM_RESERVE_ALIGN
hsa_status_t amd_vmem_address_reserve_align(void** va, size_t size, uint64_t address,
                                             uint64_t alignment, uint64_t flags) {
  (void)flags;
  return reserve(va, size, address, alignment);
}
#endif

hsa_status_t amd_vmem_address_free(void* va, size_t size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const hsa_status_t checked =
      hsa_common::vmem_check_address_free(s.vmem.reservations, s.vmem.mappings, va, size);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  munmap(va, size);
  s.vmem.reservations.erase(reinterpret_cast<uintptr_t>(va));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_handle_create(hsa_amd_memory_pool_t memory_pool, size_t size,
                                    hsa_amd_memory_type_t type, uint64_t flags,
                                    hsa_amd_vmem_alloc_handle_t* memory_handle) {
  (void)flags;  // "currently unsupported"
  if (size == 0 || memory_handle == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (type != MEMORY_TYPE_NONE && type != MEMORY_TYPE_PINNED) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolId pool{};
  // ROCr: an invalid pool is INVALID_ARGUMENT here, and only device-local
  // memory (VRAM, coarse or fine) can back a handle.
  if (!pool_from_handle_locked(s, memory_pool.handle, &pool) || !is_device_kind(pool.kind) ||
      size % kGranule != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (size > pool_size(pool.kind)) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (injected_failure_locked(s, VmemOp::kHandleCreate)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (!take_device_bytes_locked(s, pool.agent_index, size)) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  VmemHandle handle;
  handle.pool = pool;
  handle.size = size;
  handle.memory_type = static_cast<uint32_t>(type);
  handle.fd = memfd_create("hsa_sim_vmem", MFD_CLOEXEC);
  if (handle.fd >= 0 && ftruncate(handle.fd, static_cast<off_t>(size)) == 0) {
    void* shadow = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, handle.fd, 0);
    if (shadow != MAP_FAILED) handle.shadow = static_cast<uint8_t*>(shadow);
  }
  if (handle.shadow == nullptr) {
    close_handle(handle);
    give_device_bytes_locked(s, pool.agent_index, size);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  const uint32_t id = s.vmem.next_handle_id++;
  s.vmem.handles.emplace(id, handle);
  *memory_handle = handle_of(s, id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = find_handle_locked(s, memory_handle);
  // Unknown, or released already (its mappings may still keep it alive).
  if (it == s.vmem.handles.end() || it->second.ref_count == 0) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (injected_failure_locked(s, VmemOp::kHandleRelease)) return HSA_STATUS_ERROR;
  --it->second.ref_count;
  // A handle may be released while mapped: it lives until the last unmap.
  drop_handle_if_unused_locked(s, it);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_map(void* va, size_t size, size_t in_offset,
                          hsa_amd_vmem_alloc_handle_t memory_handle, uint64_t flags) {
  (void)in_offset;  // "currently unsupported": the mapping starts at offset 0
  (void)flags;
  const auto address = reinterpret_cast<uintptr_t>(va);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const hsa_status_t checked = hsa_common::vmem_check_map_range(
      s.vmem.reservations, s.vmem.mappings, va, size, page_size());
  if (checked != HSA_STATUS_SUCCESS) return checked;
  auto it = find_handle_locked(s, memory_handle);
  if (it == s.vmem.handles.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  VmemHandle& handle = it->second;
  // ROCr exports size bytes of the handle as a dma-buf; past its end that
  // fails.
  if (size > handle.size) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (injected_failure_locked(s, VmemOp::kMap)) return HSA_STATUS_ERROR;
  // No agent has access yet: PROT_NONE until set_access.
  void* mapped = mmap(va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, handle.fd, 0);
  if (mapped == MAP_FAILED) {
    map_reserved(address, size);
    return HSA_STATUS_ERROR;
  }
  VmemMapping mapping;
  mapping.size = size;
  mapping.handle_id = it->first;
  s.vmem.mappings.emplace(address, mapping);
  ++handle.map_count;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_unmap(void* va, size_t size) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const auto address = reinterpret_cast<uintptr_t>(va);
  std::map<uintptr_t, VmemMapping>::iterator it;
  const hsa_status_t checked = hsa_common::vmem_check_unmap(s.vmem.mappings, va, size, &it);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  if (injected_failure_locked(s, VmemOp::kUnmap)) return HSA_STATUS_ERROR;
  if (!map_reserved(address, size)) return HSA_STATUS_ERROR;
  auto handle = s.vmem.handles.find(it->second.handle_id);
  s.vmem.mappings.erase(it);
  if (handle != s.vmem.handles.end()) {
    --handle->second.map_count;
    drop_handle_if_unused_locked(s, handle);
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_set_access(void* va, size_t size, const hsa_amd_memory_access_desc_t* desc,
                                 size_t desc_cnt) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Every agent and permission is checked before anything changes.
  std::vector<std::pair<uint32_t, uint32_t>> grants;  // agent index, permission
  hsa_status_t status = hsa_common::vmem_read_access_descs(
      va, desc, desc_cnt,
      [&](hsa_agent_t agent, uint32_t* index) {
        return agent_index_from_handle_locked(s, agent, index);
      },
      &grants);
  if (status != HSA_STATUS_SUCCESS) return status;
  std::vector<std::map<uintptr_t, VmemMapping>::iterator> targets;
  status = hsa_common::vmem_set_access_targets(
      s.vmem.reservations, s.vmem.mappings, reinterpret_cast<uintptr_t>(va), size, &targets);
  if (status != HSA_STATUS_SUCCESS) return status;
  if (injected_failure_locked(s, VmemOp::kSetAccess)) return HSA_STATUS_ERROR;
  for (auto& target : targets) {
    VmemMapping& mapping = target->second;
    hsa_common::VmemAccess access = hsa_common::vmem_access_after(mapping.access, grants);
    auto cpu = access.find(kCpuAgentIndex);
    const uint32_t cpu_permission = cpu == access.end() ? kPermissionNone : cpu->second;
    if (mprotect(reinterpret_cast<void*>(target->first), mapping.size,
                 protection_of(cpu_permission)) != 0) {
      return HSA_STATUS_ERROR;
    }
    mapping.access = std::move(access);
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_get_access(void* va, hsa_access_permission_t* perms,
                                 hsa_agent_t agent_handle) {
  if (va == nullptr || perms == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *perms = HSA_ACCESS_PERMISSION_NONE;  // as ROCr, whatever follows
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto mapping =
      hsa_common::vmem_mapping_containing(s.vmem.mappings, reinterpret_cast<uintptr_t>(va));
  if (mapping == s.vmem.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  uint32_t index = 0;
  if (!agent_index_from_handle_locked(s, agent_handle, &index) || !is_gpu_index(index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  uint32_t permission = kPermissionNone;
  const hsa_status_t status = hsa_common::vmem_get_access_answer(mapping->second, index, &permission);
  *perms = static_cast<hsa_access_permission_t>(permission);
  return status;
}

hsa_status_t amd_vmem_retain_alloc_handle(hsa_amd_vmem_alloc_handle_t* memory_handle, void* addr) {
  if (memory_handle == nullptr || addr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto mapping = s.vmem.mappings.find(reinterpret_cast<uintptr_t>(addr));
  if (mapping == s.vmem.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  auto handle = s.vmem.handles.find(mapping->second.handle_id);
  if (handle == s.vmem.handles.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  ++handle->second.ref_count;
  *memory_handle = handle_of(s, handle->first);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_get_alloc_properties_from_handle(hsa_amd_vmem_alloc_handle_t memory_handle,
                                                       hsa_amd_memory_pool_t* pool,
                                                       hsa_amd_memory_type_t* type) {
  if (pool == nullptr || type == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = find_handle_locked(s, memory_handle);
  if (it == s.vmem.handles.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  pool->handle = pool_handle_locked(s, it->second.pool);
  *type = static_cast<hsa_amd_memory_type_t>(it->second.memory_type);
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_sim::api

#endif  // HSA_COMMON_HAVE_VMEM
