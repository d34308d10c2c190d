/* hsa_common_vmem.h: the rules of the virtual memory API (hsa_amd_vmem_*,
 * ROCm 6.0 and later headers) that both HSA runtimes of this repository
 * follow, the sim (testing/hsa-runtime/host/hsa_sim_vmem.cpp) and HSA-on-CUDA
 * (testing/hsa-runtime/cuda/hsa_cuda_vmem.cpp): argument checks and their status codes,
 * which mappings a set_access reaches and what permissions they end up with
 * in each header generation, get_access's answers, how a copy touching a
 * reservation is judged, and what hsa_amd_pointer_info says of a reserved
 * address. Each runtime keeps its own backing (the sim: memfds and mmap;
 * HSA-on-CUDA: cuMemAddressReserve / cuMemCreate / cuMemMap) and calls these
 * with its own lock held; nothing here holds state.
 *
 * The records are the same in both: reservations and mappings by start
 * address, each mapping with the handle it shows and the permission of
 * every agent given one (agent index -> hsa_access_permission_t as an
 * integer, NONE included once set). The header generations are told apart
 * by hsa_common.h's HSA_COMMON_VMEM_SET_ACCESS_MERGES and
 * HSA_COMMON_HAVE_POINTER_TYPE_HSA_VMEM; what each rule is, and where ROCr
 * has it, is in testing/hsa-runtime/host/hsa_sim.h ("Virtual memory").
 *
 * Everything below compiles against every generation's headers (with 5.2
 * headers nothing is ever reserved, so the queries find nothing), except the
 * descriptor reader, which needs hsa_amd_memory_access_desc_t. */
#ifndef HSA_COMMON_VMEM_H
#define HSA_COMMON_VMEM_H

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "hsa_common.h"

namespace hsa_common {

// hsa_access_permission_t as integers (HSA_ACCESS_PERMISSION_NONE is not in
// the 5.2 headers, and a caller's value is read as an integer before it is
// trusted to be one of these).
constexpr uint32_t kPermissionNone = 0;
constexpr uint32_t kPermissionReadOnly = 1;
constexpr uint32_t kPermissionWriteOnly = 2;
constexpr uint32_t kPermissionReadWrite = 3;

// Which side of a copy a range is: a mapping needs a permission that allows
// reading a source or writing a destination.
enum class CopyRole { kSource, kDestination };

inline bool permission_allows(uint32_t permission, CopyRole role) {
  return role == CopyRole::kSource
             ? permission == kPermissionReadOnly || permission == kPermissionReadWrite
             : permission == kPermissionWriteOnly || permission == kPermissionReadWrite;
}

// agent index -> permission, for every agent a set_access named.
using VmemAccess = std::map<uint32_t, uint32_t>;

// A range given out by hsa_amd_vmem_address_reserve(_align), of the size the
// caller asked for.
struct VmemReservation {
  size_t size = 0;
};

// A mapping made by hsa_amd_vmem_map: [start, start + size) shows the first
// size bytes of the handle with id handle_id.
struct VmemMapping {
  size_t size = 0;
  uint32_t handle_id = 0;
  VmemAccess access;
};

using VmemReservations = std::map<uintptr_t, VmemReservation>;
using VmemMappings = std::map<uintptr_t, VmemMapping>;

namespace vmem_detail {
constexpr auto kReservationBytes = [](const VmemReservation& r) { return r.size; };
constexpr auto kMappingBytes = [](const VmemMapping& m) { return m.size; };
}  // namespace vmem_detail

// ---- lookups ------------------------------------------------------------------------

// Whether [address, address + size) meets a reservation (size 0 counts as 1).
inline bool vmem_range_meets(const VmemReservations& reservations, uintptr_t address,
                             size_t size) {
  return !reservations.empty() && range_meets(reservations, address, size == 0 ? 1 : size,
                                              vmem_detail::kReservationBytes);
}

// The reservation holding address, or end().
inline VmemReservations::const_iterator vmem_reservation_containing(
    const VmemReservations& reservations, uintptr_t address) {
  return find_containing(reservations, address, vmem_detail::kReservationBytes);
}

// The reservation holding all of [address, address + size), or end().
inline VmemReservations::const_iterator vmem_reservation_holding(
    const VmemReservations& reservations, uintptr_t address, size_t size) {
  auto it = vmem_reservation_containing(reservations, address);
  if (it == reservations.end()) return it;
  return size <= it->second.size - (address - it->first) ? it : reservations.end();
}

// The mapping holding address, or end().
inline VmemMappings::const_iterator vmem_mapping_containing(const VmemMappings& mappings,
                                                            uintptr_t address) {
  return find_containing(mappings, address, vmem_detail::kMappingBytes);
}

// The permission of an agent on a mapping (NONE when it was never given one).
inline uint32_t vmem_permission(const VmemMapping& mapping, uint32_t agent_index) {
  auto grant = mapping.access.find(agent_index);
  return grant == mapping.access.end() ? kPermissionNone : grant->second;
}

// ---- argument checks, in ROCr's order ----------------------------------------------

// address_reserve(_align): va NULL, size 0 or not a multiple of the page size
// INVALID_ARGUMENT; alignment 0 means the page size, else it must be a power
// of two of at least the page size (INVALID_ARGUMENT). *alignment is
// updated to the one to use.
inline hsa_status_t vmem_check_reserve(void** va, size_t size, uint64_t* alignment, size_t page) {
  if (va == nullptr || size == 0 || size % page != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (*alignment == 0) *alignment = page;
  if (*alignment < page || (*alignment & (*alignment - 1)) != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

// address_free: va NULL or size 0 INVALID_ARGUMENT; va not a reservation's
// start INVALID_ALLOCATION; size not its size INVALID_ARGUMENT; a mapping
// still inside HSA_STATUS_ERROR_RESOURCE_FREE.
inline hsa_status_t vmem_check_address_free(const VmemReservations& reservations,
                                            const VmemMappings& mappings, const void* va,
                                            size_t size) {
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto address = reinterpret_cast<uintptr_t>(va);
  auto it = reservations.find(address);
  if (it == reservations.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (size != it->second.size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (range_meets(mappings, address, size, vmem_detail::kMappingBytes)) {
    return HSA_STATUS_ERROR_RESOURCE_FREE;
  }
  return HSA_STATUS_SUCCESS;
}

// map's range: va NULL or size 0, a range not inside one reservation, one
// overlapping a mapping, or va / size not multiples of `alignment` (the sim:
// the page size; HSA-on-CUDA: the driver's granularity): INVALID_ARGUMENT.
// The handle is checked after (unknown: INVALID_ARGUMENT; smaller than size:
// OUT_OF_RESOURCES, ROCr's dma-buf export of size bytes fails).
inline hsa_status_t vmem_check_map_range(const VmemReservations& reservations,
                                         const VmemMappings& mappings, const void* va,
                                         size_t size, size_t alignment) {
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const auto address = reinterpret_cast<uintptr_t>(va);
  if (size > std::numeric_limits<uintptr_t>::max() - address ||
      vmem_reservation_holding(reservations, address, size) == reservations.end() ||
      range_meets(mappings, address, size, vmem_detail::kMappingBytes) ||
      address % alignment != 0 || size % alignment != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

// unmap: va NULL or size 0 INVALID_ARGUMENT; va not a mapping's start
// INVALID_ALLOCATION; size not its size INVALID_ARGUMENT (whole mappings
// only, as ROCr). On SUCCESS *found is the mapping.
inline hsa_status_t vmem_check_unmap(VmemMappings& mappings, const void* va, size_t size,
                                     VmemMappings::iterator* found) {
  if (va == nullptr || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  auto it = mappings.find(reinterpret_cast<uintptr_t>(va));
  if (it == mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  if (size != it->second.size) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *found = it;
  return HSA_STATUS_SUCCESS;
}

#if HSA_COMMON_HAVE_VMEM
// set_access's descriptors, all checked before anything changes: va or desc
// NULL or a count of 0 INVALID_ARGUMENT; an agent resolve_agent(hsa_agent_t,
// uint32_t*) -> bool does not know INVALID_AGENT; a permission value past
// READ_WRITE INVALID_ARGUMENT. On SUCCESS *grants is (agent index,
// permission) in the caller's order.
template <typename ResolveAgent>
hsa_status_t vmem_read_access_descs(const void* va, const hsa_amd_memory_access_desc_t* desc,
                                    size_t desc_cnt, ResolveAgent resolve_agent,
                                    std::vector<std::pair<uint32_t, uint32_t>>* grants) {
  if (va == nullptr || desc == nullptr || desc_cnt == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  grants->clear();
  for (size_t i = 0; i < desc_cnt; ++i) {
    uint32_t index = 0;
    if (!resolve_agent(desc[i].agent_handle, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    // Read as an integer: a caller's out-of-range value is not an
    // hsa_access_permission_t the compiler may assume valid.
    uint32_t permission = 0;
    static_assert(sizeof(desc[i].permissions) == sizeof(permission), "a 4-byte enum");
    std::memcpy(&permission, &desc[i].permissions, sizeof(permission));
    if (permission > kPermissionReadWrite) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    grants->emplace_back(index, permission);
  }
  return HSA_STATUS_SUCCESS;
}
#endif

// The mappings a set_access of [address, address + size) reaches, per
// generation:
//   6.0 - 6.2 headers: exactly one mapping (start and size), else
//     INVALID_ALLOCATION;
//   6.4+ headers: size 0 INVALID_ARGUMENT; the range must lie in one
//     reservation (INVALID_ARGUMENT) and be covered by contiguous mappings,
//     each found by its exact start from address (a gap INVALID_ALLOCATION).
inline hsa_status_t vmem_set_access_targets(const VmemReservations& reservations,
                                            VmemMappings& mappings, uintptr_t address,
                                            size_t size,
                                            std::vector<VmemMappings::iterator>* targets) {
  targets->clear();
#if HSA_COMMON_VMEM_SET_ACCESS_MERGES
  if (size == 0 || size > std::numeric_limits<uintptr_t>::max() - address ||
      vmem_reservation_holding(reservations, address, size) == reservations.end()) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  for (uintptr_t chunk = address; chunk < address + size;) {
    auto it = mappings.find(chunk);
    if (it == mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
    targets->push_back(it);
    chunk += it->second.size;
  }
#else
  (void)reservations;
  auto it = mappings.find(address);
  if (it == mappings.end() || it->second.size != size) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  targets->push_back(it);
#endif
  return HSA_STATUS_SUCCESS;
}

// A mapping's permissions after a set_access granting `grants`: 6.0 - 6.2
// headers replace them (the agents not listed lose theirs), 6.4+ merge them
// (the others keep theirs).
inline VmemAccess vmem_access_after(const VmemAccess& before,
                                    const std::vector<std::pair<uint32_t, uint32_t>>& grants) {
#if HSA_COMMON_VMEM_SET_ACCESS_MERGES
  VmemAccess access = before;
#else
  (void)before;
  VmemAccess access;
#endif
  for (const auto& grant : grants) access[grant.first] = grant.second;
  return access;
}

// get_access's answer for a GPU agent on a mapping (the caller checked va,
// perms, the mapping and the agent): its permission, or for an agent never
// given one NONE with 6.4+ headers and INVALID_ALLOCATION ("permissions never
// set for this agent") with 6.0 - 6.2 headers.
inline hsa_status_t vmem_get_access_answer(const VmemMapping& mapping, uint32_t agent_index,
                                           uint32_t* permission) {
  *permission = kPermissionNone;
  auto grant = mapping.access.find(agent_index);
  if (grant != mapping.access.end()) {
    *permission = grant->second;
    return HSA_STATUS_SUCCESS;
  }
#if HSA_COMMON_VMEM_SET_ACCESS_MERGES
  return HSA_STATUS_SUCCESS;
#else
  return HSA_STATUS_ERROR_INVALID_ALLOCATION;
#endif
}

// ---- copies ---------------------------------------------------------------------------

// One side of a copy that meets a reservation (vmem_range_meets): device
// memory only when it lies inside one mapping some agent may access in that
// role; reserved but unmapped memory, a range running past its mapping and
// a mapping nobody may access that way are violations (*why says which).
inline Side vmem_copy_side(const VmemMappings& mappings, uintptr_t address, size_t size,
                           CopyRole role, const char** why) {
  auto mapping = vmem_mapping_containing(mappings, address);
  if (mapping == mappings.end()) {
    *why = "lies in reserved virtual memory that is not mapped";
    return Side::kViolation;
  }
  if (size > mapping->second.size - (address - mapping->first)) {
    *why = "runs past the end of its virtual memory mapping";
    return Side::kViolation;
  }
  for (const auto& grant : mapping->second.access) {
    if (permission_allows(grant.second, role)) return Side::kDevice;
  }
  *why = role == CopyRole::kSource ? "reads a mapping no agent may read"
                                   : "writes a mapping no agent may write";
  return Side::kViolation;
}

// ---- pointer info --------------------------------------------------------------------

// hsa_amd_pointer_info's answer for an address in a reservation, into *info
// (already zeroed, size set) and *agents; false when address is in none.
// owner_index(handle_id) -> uint32_t is the GPU of a mapping's handle,
// agent_handle(uint32_t) -> hsa_agent_t the handle of an agent index.
//   6.x headers (ROCr 6.x passes the thunk's address-only object of the whole
//     reservation through): type 5 (RESERVED_ADDR) mapped or not,
//     agentBaseAddress = the reservation's start, hostBaseAddress NULL, its
//     size, owner the CPU agent (node 0), FINE_GRAINED, no accessible agents.
//   7.x headers (ROCr's VMemoryPtrInfo): a mapped address is
//     HSA_EXT_POINTER_TYPE_HSA_VMEM, both bases = the queried address, the
//     mapping's size, owner the handle's GPU, flags 0, registered, and the
//     agents whose permission is not NONE; a reserved, unmapped address is
//     RESERVED_ADDR with the reservation's start as hostBaseAddress, its
//     size, no owner, flags 0, registered.
// *list_without_alloc: deliver with deliver_vmem_pointer_info (7.x calls no
// alloc for an empty agent list).
template <typename OwnerIndex, typename AgentHandle>
bool vmem_pointer_info(const VmemReservations& reservations, const VmemMappings& mappings,
                       uintptr_t address, OwnerIndex owner_index, AgentHandle agent_handle,
                       hsa_amd_pointer_info_t* info, std::vector<hsa_agent_t>* agents,
                       bool* list_without_alloc) {
  auto reservation = vmem_reservation_containing(reservations, address);
  if (reservation == reservations.end()) return false;
  *list_without_alloc = false;
#if HSA_COMMON_HAVE_POINTER_TYPE_HSA_VMEM
  auto mapping = vmem_mapping_containing(mappings, address);
  if (mapping != mappings.end()) {
    info->type = HSA_EXT_POINTER_TYPE_HSA_VMEM;
    info->agentBaseAddress = reinterpret_cast<void*>(address);
    info->hostBaseAddress = reinterpret_cast<void*>(address);
    info->sizeInBytes = mapping->second.size;
    info->agentOwner = agent_handle(owner_index(mapping->second.handle_id));
    info->global_flags = 0;
    for (const auto& grant : mapping->second.access) {
      if (grant.second != kPermissionNone) agents->push_back(agent_handle(grant.first));
    }
  } else {
    info->type = kPointerTypeReservedAddr;
    info->agentBaseAddress = nullptr;
    info->hostBaseAddress = reinterpret_cast<void*>(reservation->first);
    info->sizeInBytes = reservation->second.size;
    info->agentOwner = hsa_agent_t{0};
    info->global_flags = 0;
  }
#if HSA_COMMON_HAVE_POINTER_INFO_REGISTERED
  info->registered = true;
#endif
  *list_without_alloc = agents->empty();
#else
  (void)mappings;
  (void)owner_index;
  (void)agents;
  info->type = kPointerTypeReservedAddr;
  info->agentBaseAddress = reinterpret_cast<void*>(reservation->first);
  info->hostBaseAddress = nullptr;
  info->sizeInBytes = reservation->second.size;
  info->agentOwner = agent_handle(kCpuAgentIndex);
  info->global_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
#endif
  return true;
}

// Delivers a vmem answer whose agent list is empty as ROCr 7.x's
// VMemoryPtrInfo does: no alloc call, the count 0 and the list NULL.
inline hsa_status_t deliver_vmem_pointer_info_without_agents(const hsa_amd_pointer_info_t& answer,
                                                             hsa_amd_pointer_info_t* info,
                                                             void* (*alloc)(size_t),
                                                             uint32_t* num_agents_accessible,
                                                             hsa_agent_t** accessible) {
  std::memcpy(info, &answer, answer.size);
  if (num_agents_accessible != nullptr) *num_agents_accessible = 0;
  if (alloc != nullptr && num_agents_accessible != nullptr && accessible != nullptr) {
    *accessible = nullptr;
  }
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_common

#endif /* HSA_COMMON_VMEM_H */
