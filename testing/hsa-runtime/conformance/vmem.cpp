// vmem.cpp: the virtual memory API (hsa_amd_vmem_*, 6.0+ headers) per header
// generation: reservations, handles, mappings, set_access / get_access,
// aliasing, copies, pointer info, faults; and what the CUDA backend cannot do
// and how the driver sees its mappings. Sizes are in the backend's
// granularity g (host: the page; CUDA: the driver's, 2 MiB on an H200).

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "conformance.h"
#include "pattern.h"  // gpu/: fill_pattern's words

#if HSA_RT_HAVE_VMEM

using namespace conformance;

namespace {

constexpr size_t kPage = 4096;
// What get_access answers for an agent never given access on this
// generation: NONE from the 6.4 headers on, else INVALID_ALLOCATION.
constexpr long long kInvalidAgent = -static_cast<long long>(HSA_STATUS_ERROR_INVALID_AGENT);
constexpr long long kInvalidAllocation =
    -static_cast<long long>(HSA_STATUS_ERROR_INVALID_ALLOCATION);
constexpr long long kNeverGranted = HSA_RT_VMEM_SET_ACCESS_MERGES ? 0 : kInvalidAllocation;

size_t g = kPage;  // the granularity of the case running

bool vmem_case(uint32_t gpus, uint32_t needed) {
  if (!reset(gpus, needed)) return false;
  if (!hsa_rt_vmem_supported()) {
    kr_case_skip("the driver has no virtual memory management");
    return false;
  }
  g = hsa_rt_vmem_granularity(gpu(0));
  return CHECK(g == (on_host() ? kPage : on_fake_driver() ? size_t{2} << 20 : g) &&
               hsa_rt_vmem_granularity(cpu()) == 0);
}

void* reserve(size_t size) {
  void* va = nullptr;
  CHECK_STATUS(amd().hsa_amd_vmem_address_reserve_fn(&va, size, 0, 0), HSA_STATUS_SUCCESS);
  return va;
}

hsa_amd_vmem_alloc_handle_t create_handle(size_t size, uint32_t gpu_index = 0,
                                          hsa_rt_pool_kind_t kind = HSA_RT_POOL_DEVICE_COARSE) {
  hsa_amd_vmem_alloc_handle_t handle{0};
  CHECK_STATUS(amd().hsa_amd_vmem_handle_create_fn(pool(gpu(gpu_index), kind), size,
                                                   MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_SUCCESS);
  return handle;
}

hsa_status_t map(void* va, size_t size, hsa_amd_vmem_alloc_handle_t handle) {
  return amd().hsa_amd_vmem_map_fn(va, size, 0, handle, 0);
}

hsa_status_t unmap(void* va, size_t size) { return amd().hsa_amd_vmem_unmap_fn(va, size); }

// The device memory a GPU has left, where the backend keeps exact books
// (host: 16 GiB less its pools and handles; the stand-in driver's free bytes).
bool exact_books() { return on_host() || on_fake_driver(); }

// The protection of the host backend's CPU view at ptr as /proc/self/maps
// shows it ("rw-s"), or "" when nothing is mapped there.
std::string view_protection(const void* ptr) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return "?";
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  char line[512];
  std::string found;
  while (found.empty() && std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long long begin = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%llx-%llx %7s", &begin, &end, perms) == 3 && address >= begin &&
        address < end) {
      found = perms;
    }
  }
  std::fclose(maps);
  return found;
}

// What CUDA itself says of a GPU's access to a mapped address
// (cuMemGetAccess), so the checks see the driver, not only the runtime's
// records; -1 when the driver cannot say.
long long cuda_access(hsa_agent_t agent, const void* address) {
  const cuda_driver_t* d = hsa_rt_cuda_driver();
  const CUmemLocation location{CU_MEM_LOCATION_TYPE_DEVICE, hsa_rt_cuda_device(agent)};
  unsigned long long flags = 0;
  return d->cuCtxSetCurrent(hsa_rt_cuda_context(agent)) == CUDA_SUCCESS &&
                 d->cuMemGetAccess(&flags, &location, reinterpret_cast<CUdeviceptr>(address)) ==
                     CUDA_SUCCESS
             ? static_cast<long long>(flags)
             : -1;
}

// Bytes at a mapping some GPU may read and write, through the runtime.
std::vector<uint8_t> read_back(const void* va, size_t size) {
  std::vector<uint8_t> bytes(size);
  CHECK_STATUS(core().hsa_memory_copy_fn(bytes.data(), va, size), HSA_STATUS_SUCCESS);
  return bytes;
}

std::vector<uint8_t> pattern(size_t size, uint8_t seed) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 31 + seed);
  return bytes;
}

}  // namespace

CASE("vmem: reservations: arguments, hints, alignment, reserved memory", kBoth) {
  if (!vmem_case(1, 1)) return;
  const AmdExtTable& t = amd();
  void* va = nullptr;
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(nullptr, kPage, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&va, 0, 0, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&va, kPage + 1, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  char* base = static_cast<char*>(reserve(8 * g));
  CHECK(base != nullptr && reinterpret_cast<uintptr_t>(base) % kPage == 0);
  CHECK(!on_host() || view_protection(base) == "---p");
  CHECK(count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 1);
  // An address hint that is free is honoured (host; the driver may not);
  // an odd one is ignored.
  void* hinted = reserve(kPage);
  const uint64_t wish = reinterpret_cast<uintptr_t>(hinted);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(hinted, kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&hinted, kPage, wish, 0), HSA_STATUS_SUCCESS);
  CHECK(!on_host() || reinterpret_cast<uintptr_t>(hinted) == wish);
  void* odd = nullptr;
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&odd, kPage, wish + 1, 0), HSA_STATUS_SUCCESS);
  CHECK(odd != nullptr && reinterpret_cast<uintptr_t>(odd) % kPage == 0);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(odd, kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(hinted, kPage), HSA_STATUS_SUCCESS);
#if HSA_RT_HAVE_VMEM_RESERVE_ALIGN
  void* aligned = nullptr;
  const size_t alignment = 4 * std::max(g, size_t{1} << 19);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_align_fn(&aligned, kPage, 0, alignment, 0),
               HSA_STATUS_SUCCESS);
  CHECK(reinterpret_cast<uintptr_t>(aligned) % alignment == 0);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_align_fn(&va, kPage, 0, 3 * kPage, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_align_fn(&va, kPage, 0, 512, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(aligned, kPage), HSA_STATUS_SUCCESS);
#endif
  CHECK(count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 1);
  // Free: a reservation's start and its size.
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(nullptr, kPage), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 4 * g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base + g, 7 * g),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * g), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * g), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
}

CASE("vmem: handles: arguments, whole granules, their pool and type, device memory", kBoth) {
  if (!vmem_case(2, 2)) return;
  const AmdExtTable& t = amd();
  hsa_amd_vmem_alloc_handle_t handle{0};
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, 0, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, g + 512, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(on_host() || t.hsa_amd_vmem_handle_create_fn(coarse, g + kPage, MEMORY_TYPE_NONE, 0,
                                                     &handle) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, g, static_cast<hsa_amd_memory_type_t>(2), 0,
                                               &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), g,
                                               MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(hsa_amd_memory_pool_t{gpu(0).handle}, g,
                                               MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, g, MEMORY_TYPE_NONE, 0, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  size_t pool_bytes = 0;
  amd().hsa_amd_memory_pool_get_info_fn(coarse, HSA_AMD_MEMORY_POOL_INFO_SIZE, &pool_bytes);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, (pool_bytes / g + 1) * g, MEMORY_TYPE_NONE,
                                               0, &handle),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 0);
  const uint64_t free0 = memory_avail(0), free1 = memory_avail(1);
  handle = create_handle(4 * g);
  hsa_amd_vmem_alloc_handle_t pinned{0};
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(pool(gpu(1), fine_device_kind()), g,
                                               MEMORY_TYPE_PINNED, 0, &pinned),
               HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK(!exact_books() || (memory_avail(0) == free0 - 4 * g && memory_avail(1) == free1 - g));
  hsa_amd_memory_pool_t owner{0};
  hsa_amd_memory_type_t type = MEMORY_TYPE_PINNED;
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(handle, &owner, &type),
               HSA_STATUS_SUCCESS);
  CHECK(owner.handle == coarse.handle && type == MEMORY_TYPE_NONE);
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(pinned, &owner, &type),
               HSA_STATUS_SUCCESS);
  CHECK(owner.handle == pool(gpu(1), fine_device_kind()).handle && type == MEMORY_TYPE_PINNED);
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(
                   hsa_amd_vmem_alloc_handle_t{coarse.handle}, &owner, &type),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(handle, nullptr, &type),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(pinned), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(pinned), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 1 && (!exact_books() || memory_avail(1) == free1));
  if (on_host()) {
    // Capacity: handles and allocations share the host backend's 16 GiB.
    hsa_amd_vmem_alloc_handle_t big = create_handle(12 * kGiB - 4 * g);
    CHECK(memory_avail(0) == 4 * kGiB);
    void* ptr = nullptr;
    CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 5 * kGiB, 0, &ptr),
                 HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    hsa_amd_vmem_alloc_handle_t rest = create_handle(4 * kGiB, 0, HSA_RT_POOL_DEVICE_FINE);
    CHECK(memory_avail(0) == 0);
    CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, g, MEMORY_TYPE_NONE, 0, &handle),
                 HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 1, 0, &ptr),
                 HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(rest), HSA_STATUS_SUCCESS);
    CHECK(memory_avail(0) == 4 * kGiB);
    CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(big), HSA_STATUS_SUCCESS);
  }
  // Reset releases every reservation, mapping and handle.
  char* left = static_cast<char*>(reserve(2 * g));
  CHECK_STATUS(map(left, g, create_handle(g, 1)), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 1 && count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  hsa_rt_reset(2);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && count(HSA_RT_COUNT_VMEM_HANDLES) == 0 &&
        count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
  CHECK(!on_host() || view_protection(left).empty());
  CHECK(!exact_books() || (memory_avail(0) == free0 && memory_avail(1) == free1));
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_ERROR_INVALID_ALLOCATION);
}

CASE("vmem: mappings: arguments, no access at first, unmap and free, release, retain", kBoth) {
  if (!vmem_case(2, 1)) return;
  const AmdExtTable& t = amd();
  char* base = static_cast<char*>(reserve(8 * g));
  const hsa_amd_vmem_alloc_handle_t handle = create_handle(4 * g);
  const hsa_amd_vmem_alloc_handle_t small = create_handle(g, last_gpu());
  CHECK_STATUS(map(nullptr, g, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, 0, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base + 6 * g, 4 * g, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  std::vector<char> heap(2 * kPage);
  CHECK_STATUS(map(heap.data(), g, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base + 100, g, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(on_host() || map(base + kPage, g, handle) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, g, hsa_amd_vmem_alloc_handle_t{12345}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, 8 * g, small), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(map(base, 4 * g, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(base + 3 * g, g, small), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 1);
  // Nobody has access yet: a copy is refused, get_access per generation.
  CHECK(!on_host() || view_protection(base) == "---s");
  CHECK(on_host() || cuda_access(gpu(0), base) == CU_MEM_ACCESS_FLAGS_PROT_NONE);
  const std::vector<uint8_t> data = pattern(4 * g, 7);
  CHECK_STATUS(core().hsa_memory_copy_fn(base, data.data(), 64), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 1);
  CHECK(get_access(base, gpu(0)) == kNeverGranted);
  CHECK(get_access(base, cpu()) == kInvalidAgent);  // get_access wants a GPU agent
  CHECK(get_access(base + 4 * g, gpu(0)) == kInvalidAllocation);  // not mapped
  CHECK(get_access(heap.data(), gpu(0)) == kInvalidAllocation);
  CHECK(get_access(base, hsa_agent_t{777}) == kInvalidAgent);
  CHECK_STATUS(set_access(base, 4 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK(get_access(base + g + 100, gpu(0)) == kReadWrite);  // anywhere inside
  CHECK(on_host() || cuda_access(gpu(0), base) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CHECK_STATUS(core().hsa_memory_copy_fn(base, data.data(), 4 * g), HSA_STATUS_SUCCESS);
  if (on_host()) {
    // The CPU view follows the CPU agent's permission.
    CHECK_STATUS(set_access(base, 4 * g, cpu(), kReadWrite), HSA_STATUS_SUCCESS);
    CHECK(view_protection(base) == "rw-s" && base[4 * g - 1] == char(data[4 * g - 1]));
    base[0] = 'v';
    CHECK(read_back(base, 1)[0] == 'v');  // the CPU's store is the device's byte
    base[0] = static_cast<char>(data[0]);
    CHECK_STATUS(set_access(base, 4 * g, cpu(), kReadOnly), HSA_STATUS_SUCCESS);
    CHECK(view_protection(base) == "r--s" && base[0] == static_cast<char>(data[0]));
  }

  // Unmap wants a mapping's start and its size; address_free no mapping.
  CHECK_STATUS(unmap(base + g, 3 * g), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(unmap(base, 2 * g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(unmap(nullptr, g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * g), HSA_STATUS_ERROR_RESOURCE_FREE);
  const char* text = nullptr;
  CHECK_STATUS(core().hsa_status_string_fn(HSA_STATUS_ERROR_RESOURCE_FREE, &text),
               HSA_STATUS_SUCCESS);
  CHECK(text != nullptr && std::strstr(text, "RESOURCE_FREE") != nullptr);

  // Releasing a mapped handle: it lives (and counts) until the last unmap.
  const uint64_t free0 = memory_avail(0);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(!exact_books() || memory_avail(0) == free0);
  CHECK(read_back(base, 4 * g) == data);
  hsa_amd_memory_pool_t owner{0};
  hsa_amd_memory_type_t type = MEMORY_TYPE_PINNED;
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(handle, &owner, &type),
               HSA_STATUS_SUCCESS);
  CHECK(owner.handle == pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE).handle);
  // retain_alloc_handle: at a mapping's start only; needs its own release.
  hsa_amd_vmem_alloc_handle_t retained{0};
  CHECK_STATUS(t.hsa_amd_vmem_retain_alloc_handle_fn(&retained, base + g),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(t.hsa_amd_vmem_retain_alloc_handle_fn(nullptr, base),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_retain_alloc_handle_fn(&retained, base), HSA_STATUS_SUCCESS);
  CHECK(retained.handle == handle.handle);
  CHECK_STATUS(unmap(base, 4 * g), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  // The range is reserved memory again; the handle keeps its bytes.
  CHECK(!on_host() || view_protection(base) == "---p");
  CHECK_STATUS(map(base + 4 * g, 4 * g, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(base + 4 * g, 4 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK(read_back(base + 4 * g, 4 * g) == data);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(retained), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK_STATUS(unmap(base + 4 * g, 4 * g), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 1);
  CHECK(!exact_books() || memory_avail(0) == free0 + 4 * g);
  CHECK_STATUS(map(base, g, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);  // gone
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(small), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * g), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 0 && count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
}

CASE("vmem: set_access: checks first, then merge (6.4+) or replace (6.0 - 6.2)", kBoth) {
  if (!vmem_case(2, 2)) return;
  const AmdExtTable& t = amd();
  char* base = static_cast<char*>(reserve(4 * g));
  char* a = base;
  char* b = base + g;
  char* c = base + 3 * g;  // after a gap
  CHECK_STATUS(map(a, g, create_handle(g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(b, g, create_handle(g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(c, g, create_handle(g)), HSA_STATUS_SUCCESS);

  // Argument checks, before anything changes.
  const hsa_amd_memory_access_desc_t good = access_desc(gpu(0), kReadWrite);
  const hsa_amd_memory_access_desc_t bad_agent[] = {good, access_desc(hsa_agent_t{777}, 3)};
  const hsa_amd_memory_access_desc_t bad_permission[] = {good, access_desc(gpu(1), 7)};
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(nullptr, g, &good, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, g, nullptr, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, g, &good, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, g, bad_agent, 2), HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, g, bad_permission, 2),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(get_access(a, gpu(0)) == kNeverGranted);

  CHECK_STATUS(set_access(a, g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK(get_access(a, gpu(0)) == kReadWrite);
  CHECK(get_access(a, gpu(1)) == kNeverGranted);
  CHECK_STATUS(set_access(a, g, gpu(1), kReadOnly), HSA_STATUS_SUCCESS);
  CHECK(get_access(a, gpu(1)) == kReadOnly);
#if HSA_RT_VMEM_SET_ACCESS_MERGES
  // 6.4+: merge. gpu(0) keeps its access; a range may span contiguous
  // mappings; a gap or a range leaving the reservation is refused.
  CHECK(get_access(a, gpu(0)) == kReadWrite);
  CHECK_STATUS(set_access(a, 2 * g, gpu(1), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK(get_access(b, gpu(1)) == kReadWrite && get_access(a, gpu(0)) == kReadWrite);
  CHECK(on_host() || (cuda_access(gpu(0), a) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
                      cuda_access(gpu(1), b) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
  if (on_host()) {
    CHECK_STATUS(set_access(a, 2 * g, cpu(), kReadWrite), HSA_STATUS_SUCCESS);
    CHECK(view_protection(a) == "rw-s" && view_protection(b) == "rw-s");
  }
  CHECK_STATUS(set_access(a, g + 1, gpu(1), kReadWrite), HSA_STATUS_SUCCESS);  // whole mappings
  CHECK_STATUS(set_access(a, 4 * g, gpu(0), kReadOnly), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(b, 4 * g, gpu(0), kReadOnly), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set_access(a + g / 2, g, gpu(0), kReadOnly), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(a, 0, gpu(0), kReadOnly), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(get_access(a, gpu(0)) == kReadWrite);  // unchanged by the refusals
  // Explicit NONE is a permission like the others (CUDA: revoked in the driver).
  CHECK_STATUS(set_access(a, g, gpu(0), kNone), HSA_STATUS_SUCCESS);
  CHECK(get_access(a, gpu(0)) == kNone && get_access(a, gpu(1)) == kReadWrite);
  CHECK(on_host() || (cuda_access(gpu(0), a) == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
                      cuda_access(gpu(1), a) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE));
#else
  // 6.0 - 6.2: replace. gpu(0), not listed, lost its access (in the driver
  // too); the range must be exactly one mapping.
  CHECK(get_access(a, gpu(0)) == kInvalidAllocation);
  CHECK(on_host() || cuda_access(gpu(0), a) == CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CHECK_STATUS(set_access(a, 2 * g, gpu(1), kReadWrite), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(a, g / 2, gpu(1), kReadWrite), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(a + 64, g, gpu(1), kReadWrite), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(get_access(a, gpu(1)) == kReadOnly);  // unchanged by the refusals
  if (on_host()) {
    const hsa_amd_memory_access_desc_t both[] = {access_desc(cpu(), kReadWrite), good};
    CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, g, both, 2), HSA_STATUS_SUCCESS);
    CHECK(view_protection(a) == "rw-s" && view_protection(b) == "---s");
    CHECK(get_access(a, gpu(0)) == kReadWrite && get_access(a, gpu(1)) == kInvalidAllocation);
    // The CPU loses its view when it is not listed.
    CHECK_STATUS(set_access(a, g, gpu(1), kReadWrite), HSA_STATUS_SUCCESS);
    CHECK(view_protection(a) == "---s" && get_access(a, gpu(0)) == kInvalidAllocation);
  }
#endif
  // Other mappings are untouched by a call on one.
  CHECK(get_access(c, gpu(0)) == kNeverGranted);
}

CASE("vmem: what CUDA cannot give (the CPU, write-only) is refused, nothing changed", kCuda) {
  if (!vmem_case(1, 1)) return;
  char* va = static_cast<char*>(reserve(2 * g));
  CHECK_STATUS(map(va, 2 * g, create_handle(2 * g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(va, 2 * g, cpu(), kReadWrite), HSA_STATUS_ERROR);
  CHECK_STATUS(set_access(va, 2 * g, gpu(0), kWriteOnly), HSA_STATUS_ERROR);
  CHECK(get_access(va, gpu(0)) == kNeverGranted &&
        cuda_access(gpu(0), va) == CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CHECK_STATUS(set_access(va, 2 * g, cpu(), kNone), HSA_STATUS_SUCCESS);  // nothing to give
  CHECK(get_access(va, cpu()) == kInvalidAgent);
  // Read-only is the driver's PROT_READ (the stand-in has it); a driver
  // without it refuses, nothing changed.
  const std::vector<uint8_t> data = pattern(2 * g, 3);
  CHECK_STATUS(set_access(va, 2 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(va, data.data(), 2 * g), HSA_STATUS_SUCCESS);
  const hsa_status_t status = set_access(va, 2 * g, gpu(0), kReadOnly);
  CHECK(status == HSA_STATUS_SUCCESS || (!on_fake_driver() && status == HSA_STATUS_ERROR));
  if (status == HSA_STATUS_SUCCESS) {
    CHECK(get_access(va, gpu(0)) == kReadOnly &&
          cuda_access(gpu(0), va) == CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK(read_back(va, 2 * g) == data);  // revoked and remapped: the bytes are the handle's
    CHECK_STATUS(core().hsa_memory_copy_fn(va, data.data(), 64),
                 HSA_STATUS_ERROR_INVALID_ARGUMENT);
  } else {
    CHECK(get_access(va, gpu(0)) == kReadWrite &&
          cuda_access(gpu(0), va) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    hsa_rt_reset_counters();  // the driver's refusal, counted as a backend error
  }
  CHECK(count(HSA_RT_COUNT_BACKEND_ERRORS) == 0);
}

CASE("vmem: one handle mapped at several addresses shows the same bytes", kBoth) {
  if (!vmem_case(1, 1)) return;
  char* first = static_cast<char*>(reserve(2 * g));
  char* second = static_cast<char*>(reserve(2 * g));
  const uint64_t free0 = memory_avail(0);
  hsa_amd_vmem_alloc_handle_t handle = create_handle(2 * g);
  CHECK_STATUS(map(first, 2 * g, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(second, 2 * g, handle), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 2 && count(HSA_RT_COUNT_VMEM_HANDLES) == 1);
  CHECK(!exact_books() || memory_avail(0) == free0 - 2 * g);  // one handle's memory
  CHECK_STATUS(set_access(first, 2 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  std::vector<uint8_t> data = pattern(2 * g, 11);
  CHECK_STATUS(core().hsa_memory_copy_fn(first, data.data(), 2 * g), HSA_STATUS_SUCCESS);
  // Permissions are per mapping: the second view has none of its own yet.
  CHECK(get_access(second, gpu(0)) == kNeverGranted);
  std::vector<uint8_t> sink(64);
  CHECK_STATUS(core().hsa_memory_copy_fn(sink.data(), second, 64),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set_access(second, 2 * g, gpu(0), kReadOnly), HSA_STATUS_SUCCESS);
  CHECK(read_back(second, 2 * g) == data);
  if (on_host()) {
    CHECK_STATUS(set_access(first, 2 * g, cpu(), kReadWrite), HSA_STATUS_SUCCESS);
    CHECK_STATUS(set_access(second, 2 * g, cpu(), kReadOnly), HSA_STATUS_SUCCESS);
    std::memcpy(first + 5000, "alias", 6);
    CHECK(std::memcmp(second + 5000, "alias", 6) == 0);
    std::memcpy(data.data() + 5000, "alias", 6);
  }
  // A mapping of part of a handle shows its first bytes (ROCr); CUDA's
  // driver maps only a whole allocation: refused, nothing changed.
  char* third = static_cast<char*>(reserve(g));
  if (on_host()) {
    CHECK_STATUS(map(third, g, handle), HSA_STATUS_SUCCESS);
    CHECK_STATUS(set_access(third, g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
    CHECK(read_back(third, 64) == std::vector<uint8_t>(data.begin(), data.begin() + 64));
  } else {
    CHECK_STATUS(map(third, g, handle), HSA_STATUS_ERROR);
    CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 2);
  }
  // Released, the handle lives until its last mapping goes.
  CHECK_STATUS(amd().hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(unmap(first, 2 * g), HSA_STATUS_SUCCESS);
  if (on_host()) CHECK_STATUS(unmap(third, g), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 1 && read_back(second, 2 * g) == data);
  // Revoking and granting again on a released handle's last mapping keeps
  // its bytes (CUDA remaps the handle to revoke).
  CHECK_STATUS(set_access(second, 2 * g, gpu(0), kNone), HSA_STATUS_SUCCESS);
  CHECK(on_host() || cuda_access(gpu(0), second) == CU_MEM_ACCESS_FLAGS_PROT_NONE);
  CHECK_STATUS(set_access(second, 2 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK(read_back(second, 2 * g) == data);
  CHECK_STATUS(unmap(second, 2 * g), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 0 && (!exact_books() || memory_avail(0) == free0));
  CHECK(violations() == 1 && count(HSA_RT_COUNT_BACKEND_ERRORS) == 0);
}

namespace {

hsa_status_t rect(const hsa_pitched_ptr_t& dst, const hsa_pitched_ptr_t& src, hsa_dim3_t range,
                  hsa_signal_t done) {
  const hsa_dim3_t zero{0, 0, 0};
  return amd().hsa_amd_memory_async_copy_rect_fn(&dst, &zero, &src, &zero, &range, gpu(0),
                                                 hsaHostToDevice, 0, nullptr, done);
}

}  // namespace

CASE("vmem: copies: device memory only inside a mapping someone may access that way", kBoth) {
  if (!vmem_case(2, 2)) return;
  char* base = static_cast<char*>(reserve(8 * g));
  char* rw = base;              // gpu(0) READ_WRITE, no CPU access
  char* ro = base + 2 * g;      // gpu(1) READ_ONLY
  char* none = base + 3 * g;    // nobody
  char* unmapped = base + 5 * g;
  char* wo = base + 6 * g;      // gpu(0) WRITE_ONLY (the host backend's)
  CHECK_STATUS(map(rw, 2 * g, create_handle(2 * g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(ro, g, create_handle(g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(none, 2 * g, create_handle(2 * g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(wo, g, create_handle(g)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(rw, 2 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(ro, g, gpu(1), kReadOnly), HSA_STATUS_SUCCESS);
  if (on_host()) CHECK_STATUS(set_access(wo, g, gpu(0), kWriteOnly), HSA_STATUS_SUCCESS);
  CHECK(!on_host() || view_protection(rw) == "---s");
  const std::vector<uint8_t> host = pattern(2 * g, 5);
  std::vector<uint8_t> back(2 * g, 0);
  auto copy = [](void* dst, const void* src, size_t size) {
    return core().hsa_memory_copy_fn(dst, src, size);
  };

  // Accessible mappings are device memory; the host backend's engine copies
  // through the handle's memory, so the CPU view's PROT_NONE never faults it.
  CHECK_STATUS(copy(rw, host.data(), 2 * g), HSA_STATUS_SUCCESS);
  CHECK_STATUS(copy(back.data(), rw + g, g), HSA_STATUS_SUCCESS);
  CHECK(back[0] == host[g] && back[g - 1] == host[2 * g - 1]);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1 &&
        count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);
  CHECK_STATUS(copy(back.data(), ro, 64), HSA_STATUS_SUCCESS);  // read-only: a source
  if (on_host()) CHECK_STATUS(copy(wo, host.data(), 64), HSA_STATUS_SUCCESS);  // a destination
  CHECK_STATUS(copy(rw + 100, rw, 100), HSA_STATUS_SUCCESS);    // within one mapping
  char* pool_memory = static_cast<char*>(device_alloc(kPage));
  CHECK_STATUS(copy(pool_memory, rw, kPage), HSA_STATUS_SUCCESS);
  CHECK(dev_byte(pool_memory, kPage - 1) == host[kPage - 1]);
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 2);
  CHECK(violations() == 0);

  // Everything else touching reserved address space: a counted violation,
  // nothing copied.
  uint64_t refused_count = 0;
  std::fill(back.begin(), back.end(), 'z');
  auto refused = [&](void* dst, const void* src, size_t size) {
    return copy(dst, src, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
           violations() == ++refused_count;
  };
  CHECK(refused(ro, host.data(), 64));                // read-only destination
  CHECK(!on_host() || refused(back.data(), wo, 64));  // write-only source
  CHECK(refused(none, host.data(), 64));              // nobody may access
  CHECK(refused(back.data(), none + g, 64));
  CHECK(refused(unmapped, host.data(), 64));          // reserved, not mapped
  CHECK(refused(back.data(), unmapped, 64));
  CHECK(refused(rw + g, host.data(), 2 * g));         // runs past the mapping
  CHECK(refused(back.data(), rw + 2 * g - 8, 16));    // into the next one
  CHECK(refused(back.data(), base - 8, 16));          // host range running into it
  CHECK(refused(pool_memory, unmapped, 16));
  CHECK(back[0] == 'z' && back[63] == 'z');  // nothing was copied
  // A mapping given access later becomes copyable; one unmapped stops being.
  CHECK_STATUS(set_access(none, 2 * g, gpu(1), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK_STATUS(copy(none, host.data(), 64), HSA_STATUS_SUCCESS);
  CHECK_STATUS(unmap(none, 2 * g), HSA_STATUS_SUCCESS);
  CHECK(refused(none, host.data(), 64));

  // Asynchronous copies: the same rules at execution time.
  hsa_signal_t done = make_signal(1);
  std::fill(back.begin(), back.end(), 0);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), rw, gpu(0), 128, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(back[127] == host[27] && violations() == refused_count);  // rw + 100 holds rw's start
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(unmapped, gpu(0), host.data(), cpu(), 128, 0,
                                                  nullptr, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == ++refused_count);
  // On an engine, into a mapping.
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_on_engine_fn(rw + g, gpu(0), host.data(), cpu(),
                                                            g, 0, nullptr, done,
                                                            HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(read_back(rw + g, g) == std::vector<uint8_t>(host.begin(), host.begin() + g));
  // In strict mode the copying agent itself needs the permission (staging:
  // system memory every GPU reaches).
  void* staging = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_FINE), 4096,
                                             &staging),
               HSA_STATUS_SUCCESS);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(rw, gpu(0), staging, cpu(), 64, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused_count);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(staging, cpu(), ro, gpu(0), 64, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);  // gpu(0) has no permission on ro (gpu(1) has)
  CHECK(wait_for(done, 0));
  CHECK(violations() == ++refused_count);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, false);
  // A rect copy whose rows are all inside the mapping (every row where it
  // belongs, the bytes between rows untouched), and one whose last rows
  // leave it (one violation, nothing copied).
  const uint32_t row_count = static_cast<uint32_t>(std::min<size_t>(64, 2 * g / 512));
  std::vector<uint8_t> rows(row_count * 1024);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::vector<uint8_t> before = read_back(rw, 2 * g);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect({rw, 512, 0}, {rows.data(), 1024, 0}, {256, row_count, 1}, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == refused_count);
  std::vector<uint8_t> expected = before;
  for (size_t row = 0; row < row_count; ++row) {
    std::memcpy(expected.data() + row * 512, rows.data() + row * 1024, 256);
  }
  CHECK(read_back(rw, 2 * g) == expected);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect({rw + 2 * g - 512 * (row_count / 2), 512, 0}, {rows.data(), 1024, 0},
                    {256, row_count, 1}, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(violations() == ++refused_count && read_back(rw, 2 * g) == expected);
  core().hsa_signal_destroy_fn(done);
}

CASE("vmem: pointer info per generation: mapped, reserved, the accessible agents", kBoth) {
  if (!vmem_case(2, 1)) return;
  char* base = static_cast<char*>(reserve(4 * g));
  CHECK_STATUS(map(base + g, 2 * g, create_handle(2 * g, last_gpu())), HSA_STATUS_SUCCESS);
  char* mapped = base + g;
  const hsa_amd_pointer_info_t unmapped_info = pointer_info(base + 10);
  const hsa_amd_pointer_info_t mapped_info = pointer_info(mapped + 100);
  CHECK(pointer_info(base + 4 * g).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK(pointer_info(base - 1).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  uint32_t listed = 99;
  hsa_agent_t* agents = nullptr;
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  static int allocs = 0;
  const auto counting_alloc = [](size_t size) {
    ++allocs;
    return std::malloc(size == 0 ? 1 : size);
  };
#if HSA_RT_HAVE_POINTER_TYPE_HSA_VMEM
  // 7.x: a mapping answers for itself.
  CHECK(mapped_info.type == HSA_EXT_POINTER_TYPE_HSA_VMEM);
  CHECK(mapped_info.agentBaseAddress == mapped + 100 &&
        mapped_info.hostBaseAddress == mapped + 100);
  CHECK(mapped_info.sizeInBytes == 2 * g);
  CHECK(mapped_info.agentOwner.handle == gpu(last_gpu()).handle);
  CHECK(mapped_info.global_flags == 0);
#if HSA_RT_HAVE_POINTER_INFO_REGISTERED
  CHECK(mapped_info.registered && unmapped_info.registered);
#endif
  CHECK(unmapped_info.type == HSA_EXT_POINTER_TYPE_RESERVED_ADDR);
  CHECK(unmapped_info.agentBaseAddress == nullptr && unmapped_info.hostBaseAddress == base);
  CHECK(unmapped_info.sizeInBytes == 4 * g && unmapped_info.agentOwner.handle == 0);
  // Accessible agents: those whose permission is not NONE; none: no alloc.
  allocs = 0;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(mapped, &info, counting_alloc, &listed, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(listed == 0 && agents == nullptr && allocs == 0);
  CHECK_STATUS(set_access(mapped, 2 * g, gpu(0), kReadOnly), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(mapped, &info, counting_alloc, &listed, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(listed == 1 && agents != nullptr && agents[0].handle == gpu(0).handle);
  std::free(agents);
  agents = nullptr;
  listed = 99;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(base, &info, counting_alloc, &listed, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(listed == 0 && agents == nullptr);
#else
  // 6.x: the reservation's object, mapped or not, as type 5 (RESERVED_ADDR).
  for (const hsa_amd_pointer_info_t& answer : {unmapped_info, mapped_info}) {
    CHECK(static_cast<int>(answer.type) == 5);
    CHECK(answer.agentBaseAddress == base && answer.hostBaseAddress == nullptr);
    CHECK(answer.sizeInBytes == 4 * g);
    CHECK(answer.agentOwner.handle == cpu().handle);
    CHECK(answer.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED);
    CHECK(answer.userData == nullptr);
  }
  // No mapped nodes: an empty list, alloc(0) still called (as ROCr 6.x).
  CHECK_STATUS(set_access(mapped, 2 * g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  allocs = 0;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(mapped, &info, counting_alloc, &listed, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(listed == 0 && allocs == 1);
  std::free(agents);
#endif
  // The pool allocation interfaces do not know vmem addresses.
  CHECK_STATUS(amd().hsa_amd_pointer_info_set_userdata_fn(mapped, &listed),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(mapped), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  const hsa_agent_t gpu0 = gpu(0);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, &gpu0, nullptr, mapped), HSA_STATUS_ERROR);
}

CASE("vmem: the n-th call of each operation fails, changing nothing; reset disarms", kBoth) {
  if (!vmem_case(1, 1)) return;
  const AmdExtTable& t = amd();
  char* base = static_cast<char*>(reserve(4 * g));
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  const uint64_t free0 = memory_avail(0);

  // HANDLE_CREATE: the n-th valid call fails with OUT_OF_RESOURCES.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE, 0, 2);
  hsa_amd_vmem_alloc_handle_t handle = create_handle(g);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, 0, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);  // invalid calls do not count
  hsa_amd_vmem_alloc_handle_t failed{0};
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, g, MEMORY_TYPE_NONE, 0, &failed),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(failed.handle == 0 && count(HSA_RT_COUNT_VMEM_HANDLES) == 1);
  CHECK(!exact_books() || memory_avail(0) == free0 - g);
  hsa_amd_vmem_alloc_handle_t spare = create_handle(g);  // disarmed again

  // MAP.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_MAP, 0, 1);
  CHECK_STATUS(map(base + 1, g, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, g, handle), HSA_STATUS_ERROR);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && (!on_host() || view_protection(base) == "---p"));
  CHECK_STATUS(map(base, g, handle), HSA_STATUS_SUCCESS);

  // SET_ACCESS: nothing changes.
  CHECK_STATUS(set_access(base, g, gpu(0), kReadOnly), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_SET_ACCESS, 0, 1);
  CHECK_STATUS(set_access(base, g, gpu(0), kReadWrite), HSA_STATUS_ERROR);
  CHECK(get_access(base, gpu(0)) == kReadOnly);
  CHECK(on_host() || cuda_access(gpu(0), base) == CU_MEM_ACCESS_FLAGS_PROT_READ);
  CHECK_STATUS(set_access(base, g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  const std::vector<uint8_t> data = pattern(g, 9);
  CHECK_STATUS(core().hsa_memory_copy_fn(base, data.data(), g), HSA_STATUS_SUCCESS);

  // UNMAP: still mapped, bytes intact.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_UNMAP, 0, 1);
  CHECK_STATUS(unmap(base, g), HSA_STATUS_ERROR);
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 1 && read_back(base, g) == data);

  // HANDLE_RELEASE: still referenced; the next release works.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_HANDLE_RELEASE, 0, 1);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(spare), HSA_STATUS_ERROR);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(spare), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_HANDLES) == 1);

  // 0 disarms; reset disarms all.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_UNMAP, 0, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_UNMAP, 0, 0);
  CHECK_STATUS(unmap(base, g), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE, 0, 1);
  hsa_rt_reset(1);
  CHECK(create_handle(g).handle != 0);
}

// The stand-in driver's strictness, which the GPU tests rely on to catch a
// runtime that touches memory it has no access to.
CASE("vmem: a kernel touching a mapping its GPU may not touch faults (stand-in driver)",
     kCuda) {
  if (!vmem_case(2, 2)) return;
  if (!on_fake_driver()) {
    kr_case_skip("needs gpu/kernels.cu's fill_pattern: the stand-in driver's only");
    return;
  }
  const cuda_driver_t* d = hsa_rt_cuda_driver();
  hsa_executable_t exe{0}, other{0};
  uint64_t fill = 0, fill1 = 0;
  const std::vector<uint8_t> image(64, 0x7F);  // the stand-in takes any image
  CHECK_STATUS(hsa_rt_executable_load(gpu(0), image.data(), image.size(), &exe),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_rt_executable_register_kernel(exe, "fill_pattern", &fill), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_rt_executable_load(gpu(1), image.data(), image.size(), &other),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_rt_executable_register_kernel(other, "fill_pattern", &fill1),
               HSA_STATUS_SUCCESS);
  char* va = static_cast<char*>(reserve(g));
  CHECK_STATUS(map(va, g, create_handle(g)), HSA_STATUS_SUCCESS);
  unsigned long long n = g / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(va);
  unsigned int seed = 77;
  void* params[] = {&ptr, &n, &seed};
  const auto launch = [&](uint32_t index, uint64_t function) {
    return d->cuCtxSetCurrent(hsa_rt_cuda_context(gpu(index))) == CUDA_SUCCESS
               ? d->cuLaunchKernel(reinterpret_cast<CUfunction>(function), 4, 1, 1, 256, 1, 1, 0,
                                   nullptr, params, nullptr)
               : CUDA_ERROR_INVALID_CONTEXT;
  };
  CHECK(launch(0, fill) == CUDA_ERROR_ILLEGAL_ADDRESS);  // before set_access
  CHECK_STATUS(set_access(va, g, gpu(0), kReadOnly), HSA_STATUS_SUCCESS);
  CHECK(launch(0, fill) == CUDA_ERROR_ILLEGAL_ADDRESS);  // read-only
  CHECK_STATUS(set_access(va, g, gpu(0), kReadWrite), HSA_STATUS_SUCCESS);
  CHECK(launch(0, fill) == CUDA_SUCCESS);
  const std::vector<uint8_t> words = read_back(va, g);
  bool filled = true;
  for (size_t i = 0; filled && i < g / 4; ++i) {
    uint32_t word = 0;
    std::memcpy(&word, words.data() + 4 * i, 4);
    filled = word == uint32_t(kr_pattern(seed, i));
  }
  CHECK(filled);
  CHECK(launch(1, fill1) == CUDA_ERROR_ILLEGAL_ADDRESS);  // access is per device
}

#endif  // HSA_RT_HAVE_VMEM
