// hsa_cuda_vmem.cpp: the virtual memory API (hsa_amd_vmem_*, ROCm 6.0 and
// later headers) on CUDA's virtual memory management, and how copies and
// hsa_amd_pointer_info see its memory.
//
// Each HSA object is the CUDA object of the same role:
//   address_reserve(_align)   cuMemAddressReserve (size rounded up to the
//                             driver's granularity; the caller's size is the
//                             reservation's size for every HSA rule)
//   address_free              cuMemAddressFree
//   handle_create(pool, ...)  cuMemCreate of device memory (PINNED, located
//                             on the pool's GPU)
//   handle_release            cuMemRelease: one CUDA reference per HSA
//                             reference (create, retain), so a handle
//                             released while mapped lives until its last
//                             unmap in CUDA exactly as in ROCr
//   map                       cuMemMap at offset 0: no agent has access yet
//   unmap                     cuMemUnmap (whole mappings only, as ROCr)
//   set_access                cuMemSetAccess with one descriptor per GPU
//   retain_alloc_handle       cuMemRetainAllocationHandle
//   get_alloc_properties      cuMemGetAllocationPropertiesFromHandle, its
//                             location mapped back to the GPU's pool
// The rules both runtimes share (status codes, set_access per generation,
// get_access, copies, pointer info) are hsa_common_vmem.h's; the records are
// the sim's, under the memory lock (memory_mutex()).
//
// Where CUDA cannot do what ROCr does, the answer is ROCr's answer for a
// runtime that cannot enable an agent's access (HSA_STATUS_ERROR, nothing
// changed, as ROCr's set_access answers when a mapping for an agent fails):
//   - the CPU agent: CUDA does not map device memory made by cuMemCreate for
//     the host (ROCr does, through the PCIe BAR). A descriptor giving the CPU
//     any access is refused; one giving it NONE is accepted and recorded
//     (the CPU never had access). get_access does not answer for the CPU
//     (INVALID_AGENT), as in ROCr.
//   - WRITE_ONLY: CUDA has read-only and read-write mappings only.
//   - READ_ONLY is cuMemSetAccess's PROT_READ; a driver that refuses it
//     makes the set_access fail the same way, nothing changed.
// Revoking (a GPU whose permission goes down: replaced away under the 6.0 -
// 6.2 rules, or set to NONE or to read-only) unmaps the mapping and maps the
// same handle again (its bytes are the handle's, so they stay), then grants
// what remains: CUDA documents cuMemSetAccess for giving access, not for
// taking it back, and a new mapping starts with none.
//
// Sizes: CUDA maps whole granules (cuMemGetAllocationGranularity, 2 MiB on
// an H200), ROCr whole pages. So handle_create wants a size that is a
// multiple of the GPU's granularity (else INVALID_ARGUMENT, as ROCr answers
// a size that is not a multiple of its page size), and map wants its address
// and size on that granularity (else INVALID_ARGUMENT). Reservations take
// any multiple of the page size.

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

using hsa_common::kPermissionNone;
using hsa_common::kPermissionReadOnly;
using hsa_common::kPermissionReadWrite;
using hsa_common::kPermissionWriteOnly;
using hsa_common::Side;
using hsa_common::VmemAccess;
using hsa_common::VmemMapping;
using hsa_common::VmemReservation;

using SharedLock = std::shared_lock<std::shared_mutex>;
using ExclusiveLock = std::unique_lock<std::shared_mutex>;

// Device memory from cuMemCreate.
struct VmemHandle {
  CUmemGenericAllocationHandle cuda = 0;
  uint32_t agent_index = 1;  // the GPU it lives on
  size_t size = 0;
  uint32_t memory_type = 0;  // hsa_amd_memory_type_t, as created
  // HSA references (create and retain add one, release takes one); each
  // holds one CUDA reference. The record lives while it has references or
  // mappings.
  uint32_t ref_count = 1;
  uint32_t map_count = 0;
};

struct VmemState {
  hsa_common::VmemReservations reservations;
  // The size given to cuMemAddressReserve for each reservation (its size
  // rounded up to the granularity), which cuMemAddressFree needs back.
  std::map<uintptr_t, size_t> reserved_bytes;
  std::map<uint32_t, VmemHandle> handles;  // by id, the handle's payload
  hsa_common::VmemMappings mappings;
  uint32_t next_handle_id = 1;
};

VmemState& vmem() {
  // Never destroyed, like the memory map it shares a lock with.
  static VmemState* const state = new VmemState;
  return *state;
}

// The granularity every GPU's mappings respect (the largest; 0 without VMM).
size_t common_granularity() {
  size_t granularity = 0;
  for (uint32_t index = 1; index <= gpu_count(); ++index) {
    if (gpu_at(index).vmm_granularity == 0) return 0;
    granularity = std::max(granularity, gpu_at(index).vmm_granularity);
  }
  return granularity;
}

}  // namespace

// ---- for copies, pointer info and shutdown ---------------------------------------

bool vmem_range_meets_locked(uintptr_t address, size_t size) {
  return hsa_common::vmem_range_meets(vmem().reservations, address, size);
}

Side vmem_classify_locked(uintptr_t address, size_t size, CopyRole role, uint32_t* accessor,
                          const char** why) {
  const VmemState& v = vmem();
  const Side side = hsa_common::vmem_copy_side(v.mappings, address, size, role, why);
  if (side != Side::kDevice) return side;
  const auto mapping = hsa_common::vmem_mapping_containing(v.mappings, address);
  const uint32_t owner = v.handles.at(mapping->second.handle_id).agent_index;
  // The copy is issued in the context of a GPU that may access the mapping
  // that way: the handle's own if it may, else the first that may.
  if (hsa_common::permission_allows(hsa_common::vmem_permission(mapping->second, owner), role)) {
    *accessor = owner;
    return side;
  }
  for (const auto& [index, permission] : mapping->second.access) {
    if (is_gpu_index(index) && hsa_common::permission_allows(permission, role)) {
      *accessor = index;
      return side;
    }
  }
  *why = "is a mapping no GPU may access that way";
  return Side::kViolation;
}

bool vmem_pointer_info_locked(uintptr_t address, hsa_amd_pointer_info_t* info,
                              std::vector<hsa_agent_t>* agents, bool* list_without_alloc) {
  const VmemState& v = vmem();
  return hsa_common::vmem_pointer_info(
      v.reservations, v.mappings, address,
      [&](uint32_t handle_id) { return v.handles.at(handle_id).agent_index; }, agent_handle,
      info, agents, list_without_alloc);
}

void vmem_release_all() {
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  if (v.reservations.empty() && v.handles.empty()) return;
  ScopedContext scope(gpu_at(1).context);
  if (!scope.ok()) return;
  for (const auto& [base, mapping] : v.mappings) {
    HSA_CUDA_CHECK(cu().cuMemUnmap(CUdeviceptr(base), mapping.size));
  }
  for (const auto& [id, handle] : v.handles) {
    for (uint32_t i = 0; i < handle.ref_count; ++i) HSA_CUDA_CHECK(cu().cuMemRelease(handle.cuda));
  }
  for (const auto& [base, bytes] : v.reserved_bytes) {
    HSA_CUDA_CHECK(cu().cuMemAddressFree(CUdeviceptr(base), bytes));
  }
  v.mappings.clear();
  v.handles.clear();
  v.reservations.clear();
  v.reserved_bytes.clear();
  v.next_handle_id = 1;
}

uint64_t vmem_mapping_count() {
  SharedLock lock(memory_mutex());
  return vmem().mappings.size();
}

uint64_t vmem_handle_count() {
  SharedLock lock(memory_mutex());
  return vmem().handles.size();
}

uint64_t vmem_reservation_count() {
  SharedLock lock(memory_mutex());
  return vmem().reservations.size();
}

}  // namespace hsa_cuda

#if HSA_COMMON_HAVE_VMEM

namespace hsa_cuda {

namespace {

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

CUmemAllocationProp device_properties(uint32_t agent_index) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = gpu_at(agent_index).ordinal;
  return prop;
}

bool gpu_index_of_ordinal(int ordinal, uint32_t* index) {
  for (uint32_t i = 1; i <= gpu_count(); ++i) {
    if (gpu_at(i).ordinal == ordinal) {
      *index = i;
      return true;
    }
  }
  return false;
}

int cuda_access_flags(uint32_t permission) {
  return permission == kPermissionReadWrite  ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
         : permission == kPermissionReadOnly ? CU_MEM_ACCESS_FLAGS_PROT_READ
                                             : CU_MEM_ACCESS_FLAGS_PROT_NONE;
}

// Whether `after` takes anything `before` gave away: a GPU losing read or
// write access.
bool revokes(uint32_t before, uint32_t after) {
  return (hsa_common::permission_allows(before, CopyRole::kSource) &&
          !hsa_common::permission_allows(after, CopyRole::kSource)) ||
         (hsa_common::permission_allows(before, CopyRole::kDestination) &&
          !hsa_common::permission_allows(after, CopyRole::kDestination));
}

// cuMemSetAccess for the GPUs of `access` whose permission is not NONE (only
// those in `only` when it is not NULL).
bool grant(uintptr_t base, size_t size, const VmemAccess& access, const VmemAccess* only) {
  std::vector<CUmemAccessDesc> descs;
  for (const auto& [index, permission] : access) {
    if (!is_gpu_index(index) || permission == kPermissionNone) continue;
    if (only != nullptr && only->count(index) == 0) continue;
    CUmemAccessDesc desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = gpu_at(index).ordinal;
    desc.flags = cuda_access_flags(permission);
    descs.push_back(desc);
  }
  if (descs.empty()) return true;
  return HSA_CUDA_CHECK(cu().cuMemSetAccess(CUdeviceptr(base), size, descs.data(), descs.size()));
}

// A handle's CUDA value to map or query with: its own while the application
// holds a reference; after its last release (still mapped somewhere) a
// temporary reference taken through one of its mappings, which *temporary
// says to release.
bool cuda_handle_for(const VmemState& v, uint32_t id, const VmemHandle& handle,
                     CUmemGenericAllocationHandle* cuda, bool* temporary) {
  *temporary = false;
  if (handle.ref_count > 0) {
    *cuda = handle.cuda;
    return true;
  }
  for (const auto& [base, mapping] : v.mappings) {
    if (mapping.handle_id != id) continue;
    if (!HSA_CUDA_CHECK(cu().cuMemRetainAllocationHandle(cuda, reinterpret_cast<void*>(base)))) {
      return false;
    }
    *temporary = true;
    return true;
  }
  return false;
}

// Makes a mapping's CUDA access what `after` says, from what mapping.access
// says now.
bool apply_access(uintptr_t base, const VmemMapping& mapping, const VmemHandle& handle, uint32_t id,
                  const VmemState& v, const VmemAccess& after) {
  bool revoked = false;
  VmemAccess raised;  // GPUs whose permission goes up (or changes kind)
  for (uint32_t index = 1; index <= gpu_count(); ++index) {
    const uint32_t was = hsa_common::vmem_permission(mapping, index);
    auto found = after.find(index);
    const uint32_t now = found == after.end() ? kPermissionNone : found->second;
    revoked = revoked || revokes(was, now);
    if (now != was && now != kPermissionNone) raised[index] = now;
  }
  if (!revoked) return grant(base, mapping.size, after, &raised);
  // Take everything away by mapping the handle afresh, then give back what
  // remains. The handle's memory, not the mapping, holds the bytes; a
  // handle the application released is referenced before the unmap (which
  // would free it, were this its last mapping) and let go after the map.
  CUmemGenericAllocationHandle cuda = 0;
  bool temporary = false;
  if (!cuda_handle_for(v, id, handle, &cuda, &temporary)) return false;
  bool ok = HSA_CUDA_CHECK(cu().cuMemUnmap(CUdeviceptr(base), mapping.size)) &&
            HSA_CUDA_CHECK(cu().cuMemMap(CUdeviceptr(base), mapping.size, 0, cuda, 0));
  if (temporary) HSA_CUDA_CHECK(cu().cuMemRelease(cuda));
  if (!ok) {
    std::fprintf(stderr, "hsa_cuda: the mapping at %p could not be mapped again to revoke access\n",
                 reinterpret_cast<void*>(base));
    return false;
  }
  if (grant(base, mapping.size, after, nullptr)) return true;
  // The new permissions were refused (a driver without read-only mappings):
  // put the old ones back, so that nothing changed.
  grant(base, mapping.size, mapping.access, nullptr);
  return false;
}

hsa_amd_vmem_alloc_handle_t handle_of(uint32_t id) {
  return hsa_amd_vmem_alloc_handle_t{make_handle(HandleTag::kVmemHandle, id)};
}

// The handle's entry, or end() for one unknown in this runtime's epoch.
std::map<uint32_t, VmemHandle>::iterator find_handle(VmemState& v,
                                                     hsa_amd_vmem_alloc_handle_t handle) {
  uint64_t id = 0;
  if (!decode_handle(handle.handle, HandleTag::kVmemHandle, &id) ||
      id > std::numeric_limits<uint32_t>::max()) {
    return v.handles.end();
  }
  return v.handles.find(static_cast<uint32_t>(id));
}

void drop_if_unused(VmemState& v, std::map<uint32_t, VmemHandle>::iterator it) {
  // Every CUDA reference was released with the HSA ones: CUDA frees the
  // memory with its last mapping; only the record is left to drop.
  if (it->second.ref_count == 0 && it->second.map_count == 0) v.handles.erase(it);
}

hsa_status_t reserve(void** va, size_t size, uint64_t address, uint64_t alignment) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  const hsa_status_t checked = hsa_common::vmem_check_reserve(va, size, &alignment, page_size());
  if (checked != HSA_STATUS_SUCCESS) return checked;
  const size_t granularity = common_granularity();
  if (granularity == 0) return HSA_STATUS_ERROR;  // the driver has no VMM
  size_t bytes = 0;
  if (!hsa_common::round_up(size, granularity, &bytes)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  // The hint is used when it meets the alignment, as ROCr (here the one the
  // driver is given, at least a granule); the driver may still place the
  // range elsewhere.
  const size_t cuda_alignment = std::max<size_t>(size_t(alignment), granularity);
  const CUdeviceptr hint = address % cuda_alignment == 0 ? CUdeviceptr(address) : 0;
  CUdeviceptr base = 0;
  {
    ScopedContext scope(gpu_at(1).context);
    if (!scope.ok()) return HSA_STATUS_ERROR;
    const CUresult result = cu().cuMemAddressReserve(&base, bytes, cuda_alignment, hint, 0);
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    if (!HSA_CUDA_CHECK(result)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  v.reservations[uintptr_t(base)] = VmemReservation{size};
  v.reserved_bytes[uintptr_t(base)] = bytes;
  *va = reinterpret_cast<void*>(base);
  return HSA_STATUS_SUCCESS;
}

}  // namespace

namespace api {

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
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  const hsa_status_t checked =
      hsa_common::vmem_check_address_free(v.reservations, v.mappings, va, size);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  const auto base = reinterpret_cast<uintptr_t>(va);
  ScopedContext scope(gpu_at(1).context);
  if (!scope.ok() ||
      !HSA_CUDA_CHECK(cu().cuMemAddressFree(CUdeviceptr(base), v.reserved_bytes.at(base)))) {
    return HSA_STATUS_ERROR;
  }
  v.reservations.erase(base);
  v.reserved_bytes.erase(base);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_handle_create(hsa_amd_memory_pool_t memory_pool, size_t size,
                                    hsa_amd_memory_type_t type, uint64_t flags,
                                    hsa_amd_vmem_alloc_handle_t* memory_handle) {
  (void)flags;  // "currently unsupported"
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (size == 0 || memory_handle == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (type != MEMORY_TYPE_NONE && type != MEMORY_TYPE_PINNED) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  PoolId pool;
  // ROCr: an invalid pool is INVALID_ARGUMENT here, and only device memory
  // can back a handle; the size must be whole granules (see the top).
  if (!pool_from_handle(memory_pool.handle, &pool) || !is_device_kind(pool.kind)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const GpuDevice& gpu = gpu_at(pool.agent_index);
  if (gpu.vmm_granularity == 0) return HSA_STATUS_ERROR;
  if (size % gpu.vmm_granularity != 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (size > gpu.total_memory) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  const CUmemAllocationProp prop = device_properties(pool.agent_index);
  CUmemGenericAllocationHandle cuda = 0;
  {
    ScopedContext scope(gpu.context);
    if (!scope.ok()) return HSA_STATUS_ERROR;
    CUresult result = cu().cuMemCreate(&cuda, size, &prop, 0);
    // As an allocation: the quarantine goes back first (release_quarantine).
    if (result == CUDA_ERROR_OUT_OF_MEMORY && release_quarantine(pool.agent_index)) {
      result = cu().cuMemCreate(&cuda, size, &prop, 0);
    }
    if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    if (!HSA_CUDA_CHECK(result)) return HSA_STATUS_ERROR;
  }
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  VmemHandle handle;
  handle.cuda = cuda;
  handle.agent_index = pool.agent_index;
  handle.size = size;
  handle.memory_type = static_cast<uint32_t>(type);
  const uint32_t id = v.next_handle_id++;
  v.handles.emplace(id, handle);
  *memory_handle = handle_of(id);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_handle_release(hsa_amd_vmem_alloc_handle_t memory_handle) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  auto it = find_handle(v, memory_handle);
  // Unknown, or released already (its mappings may still keep it alive).
  if (it == v.handles.end() || it->second.ref_count == 0) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  ScopedContext scope(gpu_at(it->second.agent_index).context);
  if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuMemRelease(it->second.cuda))) return HSA_STATUS_ERROR;
  --it->second.ref_count;
  drop_if_unused(v, it);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_map(void* va, size_t size, size_t in_offset,
                          hsa_amd_vmem_alloc_handle_t memory_handle, uint64_t flags) {
  (void)in_offset;  // "currently unsupported": the mapping starts at offset 0
  (void)flags;
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  const size_t granularity = common_granularity();
  if (granularity == 0) return HSA_STATUS_ERROR;
  const hsa_status_t checked =
      hsa_common::vmem_check_map_range(v.reservations, v.mappings, va, size, granularity);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  auto it = find_handle(v, memory_handle);
  if (it == v.handles.end()) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  VmemHandle& handle = it->second;
  if (size > handle.size) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  ScopedContext scope(gpu_at(handle.agent_index).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  CUmemGenericAllocationHandle cuda = 0;
  bool temporary = false;
  if (!cuda_handle_for(v, it->first, handle, &cuda, &temporary)) return HSA_STATUS_ERROR;
  const bool mapped = HSA_CUDA_CHECK(cu().cuMemMap(CUdeviceptr(va), size, 0, cuda, 0));
  if (temporary) HSA_CUDA_CHECK(cu().cuMemRelease(cuda));
  if (!mapped) return HSA_STATUS_ERROR;
  VmemMapping mapping;
  mapping.size = size;
  mapping.handle_id = it->first;
  v.mappings.emplace(reinterpret_cast<uintptr_t>(va), mapping);
  ++handle.map_count;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_unmap(void* va, size_t size) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  hsa_common::VmemMappings::iterator it;
  const hsa_status_t checked = hsa_common::vmem_check_unmap(v.mappings, va, size, &it);
  if (checked != HSA_STATUS_SUCCESS) return checked;
  auto handle = v.handles.find(it->second.handle_id);
  ScopedContext scope(gpu_at(handle->second.agent_index).context);
  if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuMemUnmap(CUdeviceptr(va), size))) {
    return HSA_STATUS_ERROR;
  }
  v.mappings.erase(it);
  --handle->second.map_count;
  drop_if_unused(v, handle);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_set_access(void* va, size_t size, const hsa_amd_memory_access_desc_t* desc,
                                 size_t desc_cnt) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  std::vector<std::pair<uint32_t, uint32_t>> grants;
  hsa_status_t status =
      hsa_common::vmem_read_access_descs(va, desc, desc_cnt, agent_index_from_handle, &grants);
  if (status != HSA_STATUS_SUCCESS) return status;
  std::vector<hsa_common::VmemMappings::iterator> targets;
  status = hsa_common::vmem_set_access_targets(v.reservations, v.mappings,
                                               reinterpret_cast<uintptr_t>(va), size, &targets);
  if (status != HSA_STATUS_SUCCESS) return status;
  // What CUDA cannot do is refused before anything changes (see the top).
  for (const auto& [index, permission] : grants) {
    if (!is_gpu_index(index) && permission != kPermissionNone) {
      std::fprintf(stderr,
                   "hsa_cuda: hsa_amd_vmem_set_access(%p): CUDA cannot give the CPU access to "
                   "device memory from cuMemCreate\n",
                   va);
      return HSA_STATUS_ERROR;
    }
    if (permission == kPermissionWriteOnly) {
      std::fprintf(stderr,
                   "hsa_cuda: hsa_amd_vmem_set_access(%p): CUDA has no write-only mappings\n", va);
      return HSA_STATUS_ERROR;
    }
  }
  ScopedContext scope(gpu_at(1).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  // Mapping by mapping; one that fails stops the walk with the earlier ones
  // changed, as ROCr's VMemorySetAccess stops at its first failing handle.
  for (auto& target : targets) {
    VmemMapping& mapping = target->second;
    VmemAccess access = hsa_common::vmem_access_after(mapping.access, grants);
    const VmemHandle& handle = v.handles.at(mapping.handle_id);
    if (!apply_access(target->first, mapping, handle, mapping.handle_id, v, access)) {
      return HSA_STATUS_ERROR;
    }
    mapping.access = std::move(access);
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_get_access(void* va, hsa_access_permission_t* perms,
                                 hsa_agent_t agent_handle) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (va == nullptr || perms == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *perms = HSA_ACCESS_PERMISSION_NONE;  // as ROCr, whatever follows
  VmemState& v = vmem();
  SharedLock lock(memory_mutex());
  auto mapping = hsa_common::vmem_mapping_containing(v.mappings, reinterpret_cast<uintptr_t>(va));
  if (mapping == v.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent_handle, &index) || !is_gpu_index(index)) {
    return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  uint32_t permission = kPermissionNone;
  const hsa_status_t status =
      hsa_common::vmem_get_access_answer(mapping->second, index, &permission);
  *perms = static_cast<hsa_access_permission_t>(permission);
  return status;
}

hsa_status_t amd_vmem_retain_alloc_handle(hsa_amd_vmem_alloc_handle_t* memory_handle, void* addr) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (memory_handle == nullptr || addr == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  auto mapping = v.mappings.find(reinterpret_cast<uintptr_t>(addr));
  if (mapping == v.mappings.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  auto handle = v.handles.find(mapping->second.handle_id);
  if (handle == v.handles.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  ScopedContext scope(gpu_at(handle->second.agent_index).context);
  CUmemGenericAllocationHandle cuda = 0;
  if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuMemRetainAllocationHandle(&cuda, addr))) {
    return HSA_STATUS_ERROR;
  }
  // CUDA hands back the value the memory was mapped with: the handle's (it
  // may have been released by the application and is referenced again now).
  handle->second.cuda = cuda;
  ++handle->second.ref_count;
  *memory_handle = handle_of(handle->first);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_vmem_get_alloc_properties_from_handle(hsa_amd_vmem_alloc_handle_t memory_handle,
                                                       hsa_amd_memory_pool_t* pool,
                                                       hsa_amd_memory_type_t* type) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (pool == nullptr || type == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  VmemState& v = vmem();
  ExclusiveLock lock(memory_mutex());
  auto it = find_handle(v, memory_handle);
  if (it == v.handles.end()) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  // Asked of the driver, so the answer is where CUDA put the memory.
  ScopedContext scope(gpu_at(it->second.agent_index).context);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  CUmemGenericAllocationHandle cuda = 0;
  bool temporary = false;
  if (!cuda_handle_for(v, it->first, it->second, &cuda, &temporary)) return HSA_STATUS_ERROR;
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  const bool known = HSA_CUDA_CHECK(cu().cuMemGetAllocationPropertiesFromHandle(&prop, cuda));
  if (temporary) HSA_CUDA_CHECK(cu().cuMemRelease(cuda));
  uint32_t index = 0;
  if (!known || prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
      !gpu_index_of_ordinal(prop.location.id, &index)) {
    return HSA_STATUS_ERROR;
  }
  pool->handle = pool_handle(PoolId{index, HSA_CUDA_POOL_DEVICE_COARSE});
  *type = static_cast<hsa_amd_memory_type_t>(it->second.memory_type);
  return HSA_STATUS_SUCCESS;
}

}  // namespace api

}  // namespace hsa_cuda

#endif  // HSA_COMMON_HAVE_VMEM

using namespace hsa_cuda;

// ---- control interface ---------------------------------------------------------------

extern "C" bool hsa_cuda_vmem_supported(void) {
  return HSA_COMMON_HAVE_VMEM && ready() && common_granularity() != 0;
}

extern "C" size_t hsa_cuda_vmem_granularity(hsa_agent_t agent) {
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index) || !is_gpu_index(index)) return 0;
  return gpu_at(index).vmm_granularity;
}

extern "C" uint64_t hsa_cuda_vmem_mapping_count(void) { return vmem_mapping_count(); }

extern "C" uint64_t hsa_cuda_vmem_handle_count(void) { return vmem_handle_count(); }

extern "C" uint64_t hsa_cuda_vmem_reservation_count(void) { return vmem_reservation_count(); }
