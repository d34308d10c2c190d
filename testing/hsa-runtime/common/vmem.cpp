// vmem.cpp: the virtual memory API (hsa_amd_vmem_*, ROCm 6.0 and later
// headers): reservations, handles and mappings by start address, each
// mapping with the permission of every agent given one; the argument checks
// and status codes, what set_access reaches and leaves per header
// generation, get_access, and how copies and hsa_amd_pointer_info see
// reserved memory (see hsa_rt.h, "Virtual memory"). The backend reserves,
// creates, maps and grants (host: mmap and memfds; CUDA: cuMem*), always
// with memory_mutex() held exclusively.
//
// The helpers copies and pointer info use compile with every generation
// (with 5.2 headers nothing is ever reserved, so they find nothing).

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "runtime.h"

namespace hsa_rt {

namespace {

constexpr auto kReservationBytes = [](const VmemReservation& r) { return r.size; };
constexpr auto kMappingBytes = [](const VmemMapping& m) { return m.size; };

uint32_t permission_of(const VmemMapping& mapping, uint32_t agent) {
  auto grant = mapping.access.find(agent);
  return grant == mapping.access.end() ? kPermissionNone : grant->second;
}

}  // namespace

// Registered reservations only: a NO_REGISTER one is host memory (SVM).
bool vmem_meets_locked(uintptr_t address, size_t size) {
  const Memory& m = memory();
  if (m.reservations.empty()) return false;
  const uintptr_t end = address + (size == 0 ? 1 : size);
  auto it = m.reservations.upper_bound(address);
  if (it != m.reservations.begin()) --it;
  for (; it != m.reservations.end() && it->first < end; ++it) {
    if (it->second.registered && it->first + it->second.size > address) return true;
  }
  return false;
}

// Device memory only inside one mapping some agent may access in that role:
// reserved but unmapped memory, a range running past its mapping and a
// mapping nobody may access that way are violations. The owner is the GPU a
// copy goes through: the handle's own if it may, else the first that may.
Side vmem_side_locked(uintptr_t address, size_t size, Role role, uint32_t* owner,
                      const char** why) {
  const Memory& m = memory();
  auto mapping = find_containing(m.mappings, address, kMappingBytes);
  if (mapping == m.mappings.end()) {
    *why = "lies in reserved virtual memory that is not mapped";
    return Side::kViolation;
  }
  if (size > mapping->second.size - (address - mapping->first)) {
    *why = "runs past the end of its virtual memory mapping";
    return Side::kViolation;
  }
  const uint32_t handle_agent = m.handles.at(mapping->second.handle).pool.agent;
  if (permission_allows(permission_of(mapping->second, handle_agent), role)) {
    *owner = handle_agent;
    return Side::kDevice;
  }
  for (const auto& [agent, permission] : mapping->second.access) {
    if (permission_allows(permission, role)) {
      *owner = is_gpu(agent) ? agent : kNoAgent;
      return Side::kDevice;
    }
  }
  *why = role == Role::kSource ? "reads a mapping no agent may read"
                               : "writes a mapping no agent may write";
  return Side::kViolation;
}

bool vmem_permission_locked(uintptr_t address, uint32_t agent, uint32_t* permission) {
  const Memory& m = memory();
  if (m.mappings.empty()) return false;
  auto mapping = find_containing(m.mappings, address, kMappingBytes);
  if (mapping == m.mappings.end()) return false;
  *permission = permission_of(mapping->second, agent);
  return true;
}

bool vmem_pointer_info_locked(uintptr_t address, hsa_amd_pointer_info_t* info,
                              std::vector<hsa_agent_t>* agents, bool* no_alloc) {
  const Memory& m = memory();
  if (m.reservations.empty()) return false;
  auto reservation = find_containing(m.reservations, address, kReservationBytes);
  if (reservation == m.reservations.end()) return false;
  *no_alloc = false;
  if (!reservation->second.registered) {
#if HSA_RT_HAVE_POINTER_TYPE_HSA_VMEM
    // ROCr 7.x's VMemoryPtrInfo: the reservation, not registered (the
    // thunk knows nothing of its mmap), no owner, no agent.
    info->type = kPointerTypeReservedAddr;
    info->hostBaseAddress = reinterpret_cast<void*>(reservation->first);
    info->sizeInBytes = reservation->second.size;
    info->global_flags = 0;
#if HSA_RT_HAVE_POINTER_INFO_REGISTERED
    info->registered = false;
#endif
    *no_alloc = true;
    return true;
#else
    return false;  // ROCm 7.0: nothing but an mmap, UNKNOWN
#endif
  }
#if HSA_RT_HAVE_POINTER_TYPE_HSA_VMEM
  // ROCr's VMemoryPtrInfo: a mapping answers for itself, from the address.
  auto mapping = find_containing(m.mappings, address, kMappingBytes);
  if (mapping != m.mappings.end()) {
    info->type = HSA_EXT_POINTER_TYPE_HSA_VMEM;
    info->agentBaseAddress = reinterpret_cast<void*>(address);
    info->hostBaseAddress = reinterpret_cast<void*>(address);
    info->sizeInBytes = mapping->second.size;
    info->agentOwner = agent_handle(m.handles.at(mapping->second.handle).pool.agent);
    for (const auto& [agent, permission] : mapping->second.access) {
      if (permission != kPermissionNone) agents->push_back(agent_handle(agent));
    }
  } else {
    info->type = kPointerTypeReservedAddr;
    info->hostBaseAddress = reinterpret_cast<void*>(reservation->first);
    info->sizeInBytes = reservation->second.size;
  }
  info->global_flags = 0;
#if HSA_RT_HAVE_POINTER_INFO_REGISTERED
  info->registered = true;
#endif
  *no_alloc = agents->empty();
#else
  // ROCr 6.x passes the thunk's address-only object of the reservation
  // through, accessible by no agent.
  (void)agents;
  info->type = kPointerTypeReservedAddr;
  info->agentBaseAddress = reinterpret_cast<void*>(reservation->first);
  info->sizeInBytes = reservation->second.size;
  info->agentOwner = agent_handle(kCpu);
  info->global_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
#endif
  return true;
}

void vmem_release_all_locked() {
  Memory& m = memory();
  for (const auto& [base, mapping] : m.mappings) {
    backend::vmem_unmap(base, mapping.size, m.handles.at(mapping.handle));
  }
  for (const auto& [id, handle] : m.handles) backend::vmem_destroy(handle);
  for (const auto& [base, reservation] : m.reservations) {
    if (reservation.registered) {
      backend::vmem_free(base, reservation);
    } else {
      munmap(reinterpret_cast<void*>(base), reservation.bytes);
    }
  }
  m.mappings.clear();
  m.handles.clear();
  m.reservations.clear();
  m.next_handle = 1;
}

}  // namespace hsa_rt

#if HSA_RT_HAVE_VMEM

namespace hsa_rt {

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The granularity every GPU's mappings respect (the largest; 0 without VMM).
size_t map_granularity() {
  size_t granularity = 0;
  for (uint32_t gpu = 1; gpu <= gpu_count(); ++gpu) {
    const size_t g = backend::vmem_granularity(gpu);
    if (g == 0) return 0;
    granularity = std::max(granularity, g);
  }
  return granularity;
}

std::map<uint32_t, VmemHandle>::iterator find_handle_locked(hsa_amd_vmem_alloc_handle_t handle) {
  Memory& m = memory();
  uint64_t id = 0;
  if (!decode_handle(handle.handle, Tag::kVmemHandle, &id) || id > UINT32_MAX) {
    return m.handles.end();
  }
  return m.handles.find(static_cast<uint32_t>(id));
}

// Frees a handle nothing refers to any more: no reference, no mapping.
void drop_if_unused_locked(std::map<uint32_t, VmemHandle>::iterator it) {
  if (it->second.refs != 0 || it->second.maps != 0) return;
  give_device_bytes_locked(it->second.pool.agent, it->second.size);
  backend::vmem_destroy(it->second);
  memory().handles.erase(it);
}

// HSA_AMD_VMEM_ADDRESS_NO_REGISTER (ROCr 7.x's VMemoryAddressReserve): an
// anonymous read-write mapping, aligned, at the hint if it is free.
hsa_status_t reserve_unregistered(size_t size, uint64_t address, uint64_t alignment,
                                  uintptr_t* base) {
  if (size > std::numeric_limits<size_t>::max() - alignment) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const size_t span = size + alignment;
  void* hint = reinterpret_cast<void*>(address);
  void* mapped = mmap(hint, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                      -1, 0);
  if (mapped == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const auto start = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t aligned = (start + alignment - 1) & ~uintptr_t(alignment - 1);
  if (aligned > start) munmap(mapped, aligned - start);
  const uintptr_t tail = start + span - (aligned + size);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  *base = aligned;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t reserve(void** va, size_t size, uint64_t address, uint64_t alignment,
                     uint64_t flags) {
  HSA_RT_REQUIRE_READY();
  const size_t page = page_size();
  if (va == nullptr || size == 0 || size % page != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (alignment == 0) alignment = page;
  if (alignment < page || (alignment & (alignment - 1)) != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  ExclusiveLock lock(memory_mutex());
  uintptr_t base = 0;
  VmemReservation reservation{size, 0, true};
#if HSA_RT_HAVE_VMEM_NO_REGISTER
  reservation.registered = (flags & HSA_AMD_VMEM_ADDRESS_NO_REGISTER) == 0;
#else
  (void)flags;  // no such flag before 7.0
#endif
  const hsa_status_t status =
      reservation.registered
          ? backend::vmem_reserve(size, alignment, address, &base, &reservation.bytes)
          : reserve_unregistered(size, address, alignment, &base);
  if (!reservation.registered) reservation.bytes = size;
  if (status != HSA_STATUS_SUCCESS) return status;
  memory().reservations[base] = reservation;
  *va = reinterpret_cast<void*>(base);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

}  // namespace hsa_rt

namespace hsa_rt::api {

hsa_status_t amd_vmem_address_reserve(void** va, size_t size, uint64_t address,
                                      uint64_t flags) {
  return reserve(va, size, address, 0, flags);
}

#if HSA_RT_HAVE_VMEM_RESERVE_ALIGN
hsa_status_t amd_vmem_address_reserve_align(void** va, size_t size, uint64_t address,
                                            uint64_t alignment, uint64_t flags) {
  return reserve(va, size, address, alignment, flags);
}
#endif

hsa_status_t amd_vmem_address_free(void* va, size_t size) {
  HSA_RT_REQUIRE_READY();
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  ExclusiveLock lock(memory_mutex());
  Memory& m = memory();
  const auto base = reinterpret_cast<uintptr_t>(va);
  auto it = m.reservations.find(base);
  if (it == m.reservations.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (size != it->second.size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (range_meets(m.mappings, base, size, kMappingBytes)) return HSA_STATUS_ERROR_RESOURCE_FREE;
  if (it->second.registered) {
    backend::vmem_free(base, it->second);
  } else {
    // Managed memory (7.x): unmapped, and KFD drops its SVM range with it.
    munmap(va, it->second.bytes);
    svm_forget(base, it->second.bytes);
  }
  m.reservations.erase(it);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_handle_create(hsa_amd_memory_pool_t memory_pool, size_t size,
                                    hsa_amd_memory_type_t type, uint64_t /*flags*/,
                                    hsa_amd_vmem_alloc_handle_t* memory_handle) {
  HSA_RT_REQUIRE_READY();
  if (size == 0 || memory_handle == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (type != MEMORY_TYPE_NONE && type != MEMORY_TYPE_PINNED) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  // ROCr: an invalid pool is INVALID_ARGUMENT here, and only device memory
  // can back a handle, in whole granules.
  PoolId pool;
  if (!pool_from_handle(memory_pool.handle, &pool) || !is_device_kind(pool.kind)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const size_t granularity = backend::vmem_granularity(pool.agent);
  if (granularity == 0) return HSA_STATUS_ERROR;  // the driver has no VMM
  if (size % granularity != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (size > agent_description(pool.agent).memory) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (vmem_fault(VmemOp::kHandleCreate)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  VmemHandle handle;
  handle.pool = pool;
  handle.size = size;
  handle.type = static_cast<uint32_t>(type);
  hsa_status_t status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  for (int attempt = 0; attempt < 2 && status == HSA_STATUS_ERROR_OUT_OF_RESOURCES; ++attempt) {
    // Out of memory once, the GPU's quarantine goes back first (CUDA).
    if (attempt == 1 &&
        !(backend::quarantine_holds_memory() && release_quarantine_of(pool.agent))) {
      break;
    }
    ExclusiveLock lock(memory_mutex());
    if (!take_device_bytes_locked(pool.agent, size)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    status = backend::vmem_create(pool, size, &handle.backend);
    if (status != HSA_STATUS_SUCCESS) {
      give_device_bytes_locked(pool.agent, size);
      continue;
    }
    const uint32_t id = memory().next_handle++;
    memory().handles.emplace(id, handle);
    *memory_handle = hsa_amd_vmem_alloc_handle_t{make_handle(Tag::kVmemHandle, id)};
  }
  return status;
}

hsa_status_t amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle) {
  HSA_RT_REQUIRE_READY();
  ExclusiveLock lock(memory_mutex());
  auto it = find_handle_locked(memory_handle);
  // Unknown, or released already (its mappings may still keep it alive).
  if (it == memory().handles.end() || it->second.refs == 0) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  if (vmem_fault(VmemOp::kHandleRelease)) return HSA_STATUS_ERROR;
  --it->second.refs;
  drop_if_unused_locked(it);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_map(void* va, size_t size, size_t /*in_offset: unsupported, 0*/,
                          hsa_amd_vmem_alloc_handle_t memory_handle, uint64_t /*flags*/) {
  HSA_RT_REQUIRE_READY();
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  ExclusiveLock lock(memory_mutex());
  Memory& m = memory();
  const size_t granularity = map_granularity();
  if (granularity == 0) return HSA_STATUS_ERROR;
  const auto address = reinterpret_cast<uintptr_t>(va);
  auto reservation = find_containing(m.reservations, address, kReservationBytes);
  if (size > std::numeric_limits<uintptr_t>::max() - address ||
      reservation == m.reservations.end() || !reservation->second.registered ||
      size > reservation->second.size - (address - reservation->first) ||
      range_meets(m.mappings, address, size, kMappingBytes) || address % granularity != 0 ||
      size % granularity != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  auto it = find_handle_locked(memory_handle);
  if (it == m.handles.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // ROCr exports size bytes of the handle as a dma-buf; past its end that fails.
  if (size > it->second.size) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (vmem_fault(VmemOp::kMap)) return HSA_STATUS_ERROR;
  if (!backend::vmem_map(address, size, it->second)) return HSA_STATUS_ERROR;
  m.mappings.emplace(address, VmemMapping{size, it->first, {}});
  ++it->second.maps;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_unmap(void* va, size_t size) {
  HSA_RT_REQUIRE_READY();
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  ExclusiveLock lock(memory_mutex());
  Memory& m = memory();
  auto it = m.mappings.find(reinterpret_cast<uintptr_t>(va));
  if (it == m.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (size != it->second.size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;  // whole mappings only
  if (vmem_fault(VmemOp::kUnmap)) return HSA_STATUS_ERROR;
  auto handle = m.handles.find(it->second.handle);
  if (!backend::vmem_unmap(it->first, size, handle->second)) return HSA_STATUS_ERROR;
  m.mappings.erase(it);
  --handle->second.maps;
  drop_if_unused_locked(handle);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_set_access(void* va, size_t size, const hsa_amd_memory_access_desc_t* desc,
                                 size_t desc_cnt) {
  HSA_RT_REQUIRE_READY();
  if (va == nullptr || desc == nullptr || desc_cnt == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // Every agent and permission is checked before anything changes (a
  // permission read as an integer: the caller's may be out of range).
  std::vector<std::pair<uint32_t, uint32_t>> grants;
  for (size_t i = 0; i < desc_cnt; ++i) {
    uint32_t index = 0;
    if (!agent_index(desc[i].agent_handle, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    uint32_t permission = 0;
    static_assert(sizeof(desc[i].permissions) == sizeof(permission), "a 4-byte enum");
    std::memcpy(&permission, &desc[i].permissions, sizeof(permission));
    if (permission > kPermissionReadWrite) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    grants.emplace_back(index, permission);
  }
  ExclusiveLock lock(memory_mutex());
  Memory& m = memory();
  const auto address = reinterpret_cast<uintptr_t>(va);
  std::vector<std::map<uintptr_t, VmemMapping>::iterator> targets;
#if HSA_RT_VMEM_SET_ACCESS_MERGES
  // 6.4+: the range lies in one reservation and is covered by contiguous
  // mappings, each found by its exact start.
  auto reservation = find_containing(m.reservations, address, kReservationBytes);
  if (size == 0 || size > std::numeric_limits<uintptr_t>::max() - address ||
      reservation == m.reservations.end() ||
      size > reservation->second.size - (address - reservation->first)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  for (uintptr_t chunk = address; chunk < address + size;) {
    auto it = m.mappings.find(chunk);
    if (it == m.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
    targets.push_back(it);
    chunk += it->second.size;
  }
#else
  // 6.0 - 6.2: exactly one mapping.
  auto it = m.mappings.find(address);
  if (it == m.mappings.end() || it->second.size != size) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  targets.push_back(it);
#endif
  // What the backend cannot give at all is refused before anything changes.
  for (const auto& [agent, permission] : grants) {
    if (!backend::vmem_grantable(agent, permission, va)) return HSA_STATUS_ERROR;
  }
  if (vmem_fault(VmemOp::kSetAccess)) return HSA_STATUS_ERROR;
  // Mapping by mapping; one that fails stops the walk, the earlier ones
  // changed, as ROCr's VMemorySetAccess stops at its first failing handle.
  for (auto& target : targets) {
    VmemMapping& mapping = target->second;
#if HSA_RT_VMEM_SET_ACCESS_MERGES
    VmemAccess access = mapping.access;  // the others keep theirs
#else
    VmemAccess access;  // the agents not listed lose theirs
#endif
    for (const auto& [agent, permission] : grants) access[agent] = permission;
    if (!backend::vmem_set_access(target->first, mapping, m.handles.at(mapping.handle), access)) {
      return HSA_STATUS_ERROR;
    }
    mapping.access = std::move(access);
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_get_access(void* va, hsa_access_permission_t* perms,
                                 hsa_agent_t agent_handle) {
  HSA_RT_REQUIRE_READY();
  if (va == nullptr || perms == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *perms = HSA_ACCESS_PERMISSION_NONE;  // as ROCr, whatever follows
  SharedLock lock(memory_mutex());
  const Memory& m = memory();
  auto mapping = find_containing(m.mappings, reinterpret_cast<uintptr_t>(va), kMappingBytes);
  if (mapping == m.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  uint32_t index = 0;
  if (!agent_index(agent_handle, &index) || !is_gpu(index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  auto grant = mapping->second.access.find(index);
  if (grant == mapping->second.access.end()) {
    // Never given access: NONE (6.4+), INVALID_ALLOCATION (6.0 - 6.2).
    return HSA_RT_VMEM_SET_ACCESS_MERGES ? HSA_STATUS_SUCCESS
                                         : HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  *perms = static_cast<hsa_access_permission_t>(grant->second);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_retain_alloc_handle(hsa_amd_vmem_alloc_handle_t* memory_handle, void* addr) {
  HSA_RT_REQUIRE_READY();
  if (memory_handle == nullptr || addr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  ExclusiveLock lock(memory_mutex());
  auto mapping = memory().mappings.find(reinterpret_cast<uintptr_t>(addr));
  if (mapping == memory().mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  ++memory().handles.at(mapping->second.handle).refs;
  *memory_handle =
      hsa_amd_vmem_alloc_handle_t{make_handle(Tag::kVmemHandle, mapping->second.handle)};
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_get_alloc_properties_from_handle(hsa_amd_vmem_alloc_handle_t memory_handle,
                                                       hsa_amd_memory_pool_t* pool,
                                                       hsa_amd_memory_type_t* type) {
  HSA_RT_REQUIRE_READY();
  if (pool == nullptr || type == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  SharedLock lock(memory_mutex());
  auto it = find_handle_locked(memory_handle);
  if (it == memory().handles.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  pool->handle = pool_handle(it->second.pool);
  *type = static_cast<hsa_amd_memory_type_t>(it->second.type);
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_rt::api

#endif  // HSA_RT_HAVE_VMEM
