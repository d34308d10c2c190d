// svm.cpp: shared virtual memory (hsa_rt.h, "Shared virtual memory"): the
// attribute calls' checks, what get answers over ranges split by set, the
// XNACK switch and what system info says of it, prefetches, migrations by
// access and the SVM bytes each agent moves, injected faults, and 7.x's
// NO_REGISTER reservations.

#include <sys/mman.h>

#include "conformance.h"

using namespace conformance;

namespace {

constexpr size_t kPage = 4096;
constexpr uint64_t kAccessible = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE;
constexpr uint64_t kInPlace = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE;
constexpr uint64_t kNoAccess = HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS;
constexpr uint64_t kQuery = HSA_AMD_SVM_ATTRIB_ACCESS_QUERY;

// Anonymous read-write pages (ROCm 6.x's managed memory), filled.
char* map_pages(size_t pages, char byte) {
  void* p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                 0);
  if (p == MAP_FAILED) return nullptr;
  std::memset(p, byte, pages * kPage);
  return static_cast<char*>(p);
}

hsa_status_t set(void* ptr, size_t size, std::vector<hsa_amd_svm_attribute_pair_t> list) {
  return amd().hsa_amd_svm_attributes_set_fn(ptr, size, list.data(), list.size());
}

// ACCESS_QUERY of one agent: the attribute answered, or 0 when the call fails.
uint64_t access_of(void* ptr, size_t size, hsa_agent_t agent) {
  hsa_amd_svm_attribute_pair_t pair{kQuery, agent.handle};
  return amd().hsa_amd_svm_attributes_get_fn(ptr, size, &pair, 1) == HSA_STATUS_SUCCESS
             ? pair.attribute
             : 0;
}

uint64_t get_value(void* ptr, size_t size, uint64_t attribute) {
  hsa_amd_svm_attribute_pair_t pair{attribute, 0};
  return amd().hsa_amd_svm_attributes_get_fn(ptr, size, &pair, 1) == HSA_STATUS_SUCCESS
             ? pair.value
             : UINT64_MAX;
}

hsa_status_t prefetch(void* ptr, size_t size, hsa_agent_t agent, hsa_signal_t done = {0}) {
  return amd().hsa_amd_svm_prefetch_async_fn(ptr, size, agent, 0, nullptr, done);
}

// One async copy of size bytes, waited for; the completion's value.
hsa_signal_value_t copy_async(void* dst, hsa_agent_t dst_agent, const void* src,
                              hsa_agent_t src_agent, size_t size) {
  hsa_signal_t done = make_signal(1);
  hsa_signal_value_t value = -2;
  if (amd().hsa_amd_memory_async_copy_fn(dst, dst_agent, src, src_agent, size, 0, nullptr,
                                         done) == HSA_STATUS_SUCCESS) {
    wait_for(done, 0);
    value = core().hsa_signal_load_scacquire_fn(done);
  }
  core().hsa_signal_destroy_fn(done);
  return value;
}

}  // namespace

CASE("svm: attributes_set / _get argument checks, duplicates, unknown attributes, faults",
     kBoth) {
  if (!reset(1)) return;
  char* p = map_pages(2, 'a');
  CHECK(p != nullptr);
  const uint64_t g = gpu(0).handle;
  CHECK_STATUS(set(nullptr, kPage, {{kAccessible, g}}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set(p, 0, {{kAccessible, g}}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_svm_attributes_set_fn(p, kPage, nullptr, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set(p, kPage, {}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // One agent twice (whatever the attributes), one attribute twice.
  CHECK_STATUS(set(p, kPage, {{kAccessible, g}, {kNoAccess, g}}),
               HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  CHECK_STATUS(set(p, kPage,
                   {{HSA_AMD_SVM_ATTRIB_READ_MOSTLY, 1}, {HSA_AMD_SVM_ATTRIB_READ_MOSTLY, 0}}),
               HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  // Unknown, and get-only, attributes; unknown agents; a bad model.
  CHECK_STATUS(set(p, kPage, {{0x1234, 0}}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set(p, kPage, {{kQuery, g}}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set(p, kPage, {{HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION, g}}),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set(p, kPage, {{kAccessible, 12345}}), HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(set(p, kPage, {{HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION, 12345}}),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(set(p, kPage, {{HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG,
                               HSA_AMD_SVM_GLOBAL_FLAG_INDETERMINATE}}),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // Nothing changed by a refused call.
  CHECK(access_of(p, kPage, gpu(0)) == kNoAccess);
  CHECK(count(HSA_RT_COUNT_SVM_RANGES) == 0);
  // get: set-only and unknown attributes, unknown agents.
  hsa_amd_svm_attribute_pair_t pair{kAccessible, g};
  CHECK_STATUS(amd().hsa_amd_svm_attributes_get_fn(p, kPage, &pair, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  pair = {kQuery, 12345};
  CHECK_STATUS(amd().hsa_amd_svm_attributes_get_fn(p, kPage, &pair, 1),
               HSA_STATUS_ERROR_INVALID_AGENT);
  // Runtime memory takes no SVM attribute.
  void* dev = device_alloc(kPage);
  CHECK_STATUS(set(dev, kPage, {{kAccessible, g}}), HSA_STATUS_ERROR);
  // Injected faults: the next call fails before anything is checked or set.
  hsa_rt_inject(HSA_RT_FAULT_SVM_ATTRIBUTES_SET, 0, 1);
  CHECK_STATUS(set(p, kPage, {{kAccessible, g}}), HSA_STATUS_ERROR);
  CHECK(access_of(p, kPage, gpu(0)) == kNoAccess);
  CHECK_STATUS(set(p, kPage, {{kAccessible, g}}), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_SVM_ATTRIBUTES_GET, 0, 1);
  CHECK(access_of(p, kPage, gpu(0)) == 0);
  CHECK(access_of(p, kPage, gpu(0)) == kAccessible);
  hsa_rt_inject(HSA_RT_FAULT_SVM_PREFETCH, 0, 1);
  CHECK_STATUS(prefetch(p, kPage, gpu(0)), HSA_STATUS_ERROR);
  CHECK(count(HSA_RT_COUNT_SVM_PREFETCHES) == 0);
  CHECK(hsa_rt_svm_location(p).handle == cpu().handle);
  munmap(p, 2 * kPage);
}

CASE("svm: get answers per page: ACCESS_QUERY, GLOBAL_FLAG, PREFETCH_LOCATION; munmap forgets",
     kBoth) {
  if (!reset(2, 1)) return;
  char* p = map_pages(4, 'b');
  const hsa_agent_t g = gpu(0);
  // Unaligned: ptr down, ptr + size up to pages (pages 1 and 2).
  CHECK_STATUS(set(p + kPage + 100, kPage, {{kAccessible, g.handle}}), HSA_STATUS_SUCCESS);
  CHECK(access_of(p + kPage, 2 * kPage, g) == kAccessible);
  CHECK(access_of(p, kPage, g) == kNoAccess);
  CHECK(access_of(p + 3 * kPage, kPage, g) == kNoAccess);
  // Pages that differ: NO_ACCESS wins, then ACCESSIBLE, then IN_PLACE.
  CHECK(access_of(p, 3 * kPage, g) == kNoAccess);
  CHECK_STATUS(set(p + 2 * kPage, kPage, {{kInPlace, g.handle}}), HSA_STATUS_SUCCESS);
  CHECK(access_of(p + kPage, 2 * kPage, g) == kAccessible);
  CHECK(access_of(p + 2 * kPage, kPage, g) == kInPlace);
  CHECK(count(HSA_RT_COUNT_SVM_RANGES) == 2);
  // The CPU may always; a CPU in an access attribute changes nothing.
  CHECK(access_of(p, 4 * kPage, cpu()) == kAccessible);
  CHECK_STATUS(set(p, kPage, {{kNoAccess, cpu().handle}}), HSA_STATUS_SUCCESS);
  CHECK(access_of(p, kPage, cpu()) == kAccessible);
  // GLOBAL_FLAG: FINE by default, INDETERMINATE where pages differ.
  CHECK(get_value(p, kPage, HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG) == HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED);
  CHECK_STATUS(set(p, kPage, {{HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG, HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED}}),
               HSA_STATUS_SUCCESS);
  CHECK(get_value(p, kPage, HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG) ==
        HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED);
  CHECK(get_value(p, 2 * kPage, HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG) ==
        HSA_AMD_SVM_GLOBAL_FLAG_INDETERMINATE);
  // PREFETCH_LOCATION: the last prefetch's agent where uniform, else 0.
  CHECK(get_value(p, kPage, HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION) == 0);
  CHECK_STATUS(prefetch(p, 2 * kPage, g), HSA_STATUS_SUCCESS);
  CHECK(get_value(p, 2 * kPage, HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION) == g.handle);
  CHECK(get_value(p, 3 * kPage, HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION) == 0);
  // Unmapped behind the runtime's back: get fails, the attributes are gone.
  munmap(p + 3 * kPage, kPage);
  CHECK(access_of(p + 3 * kPage, kPage, g) == 0);
  CHECK_STATUS(set(p + 3 * kPage, kPage, {{kAccessible, g.handle}}), HSA_STATUS_ERROR);
  munmap(p, 3 * kPage);
  CHECK(access_of(p, kPage, g) == 0);
}

CASE("svm: XNACK: system info answers it; GPU access needs an access attribute without it",
     kBoth) {
  if (!reset(1)) return;
  bool flag = false;
  CHECK_STATUS(core().hsa_system_get_info_fn(HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED, &flag),
               HSA_STATUS_SUCCESS);
  CHECK(flag);
  for (bool on : {false, true}) {
    hsa_rt_set_mode(HSA_RT_MODE_XNACK, on);
    flag = !on;
    CHECK_STATUS(
        core().hsa_system_get_info_fn(HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT, &flag),
        HSA_STATUS_SUCCESS);
    CHECK(flag == on);
#if HSA_RT_HAVE_XNACK_ENABLED
    flag = !on;
    CHECK_STATUS(core().hsa_system_get_info_fn(HSA_AMD_SYSTEM_INFO_XNACK_ENABLED, &flag),
                 HSA_STATUS_SUCCESS);
    CHECK(flag == on);
#endif
  }
  hsa_rt_set_mode(HSA_RT_MODE_XNACK, false);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  char* p = map_pages(1, 'c');
  void* dev = device_alloc(kPage);
  // XNACK off, no attribute: the GPU's engine faults (a violation).
  const uint64_t before = violations();
  copy_async(dev, gpu(0), p, gpu(0), kPage);
  CHECK(violations() == before + 1);
  CHECK(dev_byte(dev) != 'c');
  CHECK(access_of(p, kPage, gpu(0)) == kNoAccess);
  // With AGENT_ACCESSIBLE it may.
  CHECK_STATUS(set(p, kPage, {{kAccessible, gpu(0).handle}}), HSA_STATUS_SUCCESS);
  CHECK(copy_async(dev, gpu(0), p, gpu(0), kPage) == 0);
  CHECK(dev_byte(dev) == 'c');
  // XNACK on: any system memory, and the default access is ACCESSIBLE.
  char* q = map_pages(1, 'd');
  hsa_rt_set_mode(HSA_RT_MODE_XNACK, true);
  CHECK(access_of(q, kPage, gpu(0)) == kAccessible);
  CHECK(copy_async(dev, gpu(0), q, gpu(0), kPage) == 0);
  CHECK(dev_byte(dev) == 'd');
  CHECK(violations() == before + 1);
  // Reset turns it off.
  CHECK(reset(1));
  flag = true;
  core().hsa_system_get_info_fn(HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT, &flag);
  CHECK(!flag);
  munmap(p, kPage);
  munmap(q, kPage);
}

CASE("svm: prefetch moves a range; accesses migrate it and count its bytes per agent", kBoth) {
  if (!reset(1)) return;
  char* p = map_pages(2, 'e');
  void* dev = device_alloc(2 * kPage);
  const hsa_agent_t g = gpu(0);
  // Argument checks.
  CHECK_STATUS(prefetch(nullptr, kPage, g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(prefetch(p, 0, g), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_svm_prefetch_async_fn(p, kPage, g, 1, nullptr, {0}),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(prefetch(p, kPage, hsa_agent_t{12345}), HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(prefetch(p, kPage, g, hsa_signal_t{12345}), HSA_STATUS_ERROR_INVALID_SIGNAL);
  // To the GPU; its completion signal decremented.
  CHECK_STATUS(set(p, 2 * kPage, {{kAccessible, g.handle}}), HSA_STATUS_SUCCESS);
  hsa_signal_t done = make_signal(1);
  CHECK_STATUS(prefetch(p, 2 * kPage, g, done), HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  core().hsa_signal_destroy_fn(done);
  CHECK(hsa_rt_svm_location(p).handle == g.handle);
  CHECK(count(HSA_RT_COUNT_SVM_PREFETCHES) == 1);
  CHECK(count(HSA_RT_COUNT_SVM_MIGRATIONS) == 0);
  // The GPU copying its own resident pages: bytes counted, nothing moves.
  CHECK(copy_async(dev, g, p, g, 2 * kPage) == 0);
  CHECK(hsa_rt_svm_bytes(g) == 2 * kPage);
  CHECK(count(HSA_RT_COUNT_SVM_MIGRATIONS) == 0);
  // The CPU copying (hsa_memory_copy) pulls what it touches back.
  char byte = 0;
  CHECK_STATUS(core().hsa_memory_copy_fn(&byte, p + kPage, 1), HSA_STATUS_SUCCESS);
  CHECK(byte == 'e');
  CHECK(hsa_rt_svm_bytes(cpu()) == 1);
  CHECK(count(HSA_RT_COUNT_SVM_MIGRATIONS) == 1);
  CHECK(hsa_rt_svm_location(p + kPage).handle == cpu().handle);
  CHECK(hsa_rt_svm_location(p).handle == g.handle);
  // A GPU access to ACCESSIBLE pages resident elsewhere: no move without
  // XNACK (nothing faults), a move with it; IN_PLACE pages never move.
  CHECK(copy_async(dev, g, p + kPage, g, kPage) == 0);
  CHECK(hsa_rt_svm_location(p + kPage).handle == cpu().handle);
  hsa_rt_set_mode(HSA_RT_MODE_XNACK, true);
  CHECK(copy_async(dev, g, p + kPage, g, kPage) == 0);
  CHECK(hsa_rt_svm_location(p + kPage).handle == g.handle);
  CHECK(count(HSA_RT_COUNT_SVM_MIGRATIONS) == 2);
  CHECK_STATUS(core().hsa_memory_copy_fn(&byte, p + kPage, 1), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set(p + kPage, kPage, {{kInPlace, g.handle}}), HSA_STATUS_SUCCESS);
  CHECK(copy_async(dev, g, p + kPage, g, kPage) == 0);
  CHECK(hsa_rt_svm_location(p + kPage).handle == cpu().handle);
  CHECK(count(HSA_RT_COUNT_SVM_MIGRATIONS) == 3);
  // Cleared with the event counters; the ranges stay.
  hsa_rt_reset_counters();
  CHECK(hsa_rt_svm_bytes(g) == 0 && count(HSA_RT_COUNT_SVM_MIGRATIONS) == 0);
  CHECK(count(HSA_RT_COUNT_SVM_RANGES) > 0);
  hsa_rt_set_mode(HSA_RT_MODE_XNACK, false);
  munmap(p, 2 * kPage);
}

#if HSA_RT_HAVE_VMEM_NO_REGISTER
CASE("svm: NO_REGISTER reservations (7.x): host memory, RESERVED_ADDR unregistered, freed", kBoth) {
  if (!reset(1)) return;
  void* va = nullptr;
  CHECK_STATUS(amd().hsa_amd_vmem_address_reserve_fn(&va, 2 * kPage, 0,
                                                     HSA_AMD_VMEM_ADDRESS_NO_REGISTER),
               HSA_STATUS_SUCCESS);
  auto* p = static_cast<char*>(va);
  std::memset(p, 'f', 2 * kPage);  // read-write host memory
  const hsa_amd_pointer_info_t info = pointer_info(p + 100);
  CHECK(info.type == static_cast<hsa_amd_pointer_type_t>(5));  // RESERVED_ADDR
  CHECK(info.hostBaseAddress == p && info.agentBaseAddress == nullptr);
  CHECK(info.sizeInBytes == 2 * kPage && info.agentOwner.handle == 0);
#if HSA_RT_HAVE_POINTER_INFO_REGISTERED
  CHECK(!info.registered);
#endif
  // Copies see host memory; nothing maps into it.
  void* dev = device_alloc(kPage);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, p, kPage), HSA_STATUS_SUCCESS);
  CHECK(dev_byte(dev) == 'f');
  CHECK(count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 1);
  CHECK_STATUS(set(p, 2 * kPage, {{kAccessible, gpu(0).handle}}), HSA_STATUS_SUCCESS);
  CHECK(access_of(p, 2 * kPage, gpu(0)) == kAccessible);
  // Freed: unmapped, its attributes forgotten.
  CHECK_STATUS(amd().hsa_amd_vmem_address_free_fn(p, 2 * kPage), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
  CHECK(count(HSA_RT_COUNT_SVM_RANGES) == 0);
  CHECK(pointer_info(p).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
}
#endif
