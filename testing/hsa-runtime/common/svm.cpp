// svm.cpp: shared virtual memory (hsa_amd_svm_attributes_set / _get,
// hsa_amd_svm_prefetch_async; see hsa_rt.h, "Shared virtual memory"), as
// ROCr's Runtime::SetSvmAttrib / GetSvmAttrib / SvmPrefetch over KFD's SVM
// ranges: per page, each agent's access, the other attributes, where the
// pages are resident and the last prefetch's agent. Bookkeeping only, on
// both backends: SVM memory is host memory the program mapped.
//
// What tests observe: whether a GPU may reach a page (XNACK, the access
// attributes), the migrations accesses cause (a GPU with AGENT_ACCESSIBLE
// and XNACK on pulls pages to itself; the CPU's hsa_memory_copy pulls them
// back), and the bytes of SVM memory each agent moved through the runtime.
//
// Its own lock, a leaf: taken alone or under the memory lock (copies and
// dispatches check access with that held), never the other way.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>

#include "runtime.h"

namespace hsa_rt {

namespace {

constexpr uintptr_t kPage = 4096;
constexpr uint64_t kGlobalFlag = HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG;
constexpr uint64_t kPreferredLocation = HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION;
constexpr uint64_t kPrefetchLocation = HSA_AMD_SVM_ATTRIB_PREFETCH_LOCATION;
constexpr uint64_t kMigrationGranularity = HSA_AMD_SVM_ATTRIB_MIGRATION_GRANULARITY;
// The last attribute set takes a value for: GPU_EXEC (7) from the 6.x
// headers on; 5.2's ends at READ_MOSTLY (6).
constexpr uint64_t kLastValue =
    HSA_RT_INTERFACE_AT_LEAST(1) ? 7 : uint64_t{HSA_AMD_SVM_ATTRIB_READ_MOSTLY};
constexpr uint64_t kAccessible = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE;
constexpr uint64_t kInPlace = HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE;
constexpr uint64_t kNoAccess = HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS;
constexpr uint64_t kQuery = HSA_AMD_SVM_ATTRIB_ACCESS_QUERY;

bool is_access(uint64_t attribute) {
  return attribute == kAccessible || attribute == kInPlace || attribute == kNoAccess;
}
// The attributes set takes besides the access ones (GLOBAL_FLAG .. GPU_EXEC).
bool is_settable_value(uint64_t attribute) {
  return attribute <= kLastValue && attribute != kPrefetchLocation;
}

// One run of pages with the same attributes.
struct SvmRange {
  uintptr_t end = 0;
  std::map<uint32_t, uint64_t> access;  // agent index -> kAccessible / kInPlace / kNoAccess
  std::map<uint64_t, uint64_t> values;  // the other attributes set
  uint32_t location = kCpu;             // where the pages are resident
  uint32_t prefetched = kNoAgent;       // the last prefetch's agent
};

struct Svm {
  std::map<uintptr_t, SvmRange> ranges;  // by start, disjoint
  std::vector<uint64_t> bytes;           // per agent index
};

std::mutex g_svm_mutex;
Svm* const g_svm = new Svm;  // never destroyed

bool xnack() { return mode(HSA_RT_MODE_XNACK); }

// [begin, end) of ptr, size in whole pages; false on overflow.
bool page_span(const void* ptr, size_t size, uintptr_t* begin, uintptr_t* end) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  if (size > std::numeric_limits<uintptr_t>::max() - address - kPage) return false;
  *begin = address & ~(kPage - 1);
  *end = (address + size + kPage - 1) & ~(kPage - 1);
  return true;
}

// Whether [begin, end) is mapped readable and writable. KFD drops a
// range's SVM attributes when it is unmapped; this runtime cannot see the
// munmap, so it looks at the mappings themselves (/proc/self/maps): an
// address unmapped and taken since by a mapping without access (a thread's
// stack guard, a malloc arena's reservation, both seen in the tests) is not
// the SVM memory it was, and a GPU must not be told it may reach it.
bool pages_mapped(uintptr_t begin, uintptr_t end) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return false;
  uintptr_t covered = begin;
  char line[512];
  while (covered < end && std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long low = 0, high = 0;
    char perms[5] = {};
    if (std::sscanf(line, "%lx-%lx %4s", &low, &high, perms) != 3) continue;
    // Mappings are listed in address order: they must meet without a gap.
    if (high <= covered) continue;
    if (low > covered || perms[0] != 'r' || perms[1] != 'w') break;
    covered = high;
  }
  std::fclose(maps);
  return covered >= end;
}

// Splits the range holding `at` (strictly inside it) in two.
void split_at_locked(uintptr_t at) {
  auto& ranges = g_svm->ranges;
  auto it = ranges.upper_bound(at);
  if (it == ranges.begin()) return;
  --it;
  if (it->first >= at || it->second.end <= at) return;
  SvmRange tail = it->second;
  it->second.end = at;
  ranges.emplace(at, std::move(tail));
}

// The ranges covering [begin, end), gaps filled with fresh ranges (no
// attribute set, resident on the host), split at both ends.
std::vector<SvmRange*> cover_locked(uintptr_t begin, uintptr_t end) {
  split_at_locked(begin);
  split_at_locked(end);
  auto& ranges = g_svm->ranges;
  std::vector<SvmRange*> covered;
  uintptr_t at = begin;
  auto it = ranges.lower_bound(begin);
  while (at < end) {
    if (it != ranges.end() && it->first == at) {
      covered.push_back(&it->second);
      at = it->second.end;
      ++it;
      continue;
    }
    const uintptr_t gap_end = it != ranges.end() ? std::min(it->first, end) : end;
    SvmRange fresh;
    fresh.end = gap_end;
    auto inserted = ranges.emplace(at, std::move(fresh)).first;
    covered.push_back(&inserted->second);
    at = gap_end;
    it = std::next(inserted);
  }
  return covered;
}

// Calls f(start, range) for every range meeting [begin, end).
template <typename F>
void each_overlap_locked(uintptr_t begin, uintptr_t end, F f) {
  auto& ranges = g_svm->ranges;
  auto it = ranges.upper_bound(begin);
  if (it != ranges.begin() && std::prev(it)->second.end > begin) --it;
  for (; it != ranges.end() && it->first < end; ++it) f(it->first, it->second);
}

void forget_locked(uintptr_t begin, uintptr_t end) {
  split_at_locked(begin);
  split_at_locked(end);
  auto& ranges = g_svm->ranges;
  ranges.erase(ranges.lower_bound(begin), ranges.lower_bound(end));
}

// An agent's access to a range: what was set, else the default.
uint64_t access_of(const SvmRange& range, uint32_t agent) {
  auto it = range.access.find(agent);
  if (it != range.access.end()) return it->second;
  return xnack() || !is_gpu(agent) ? kAccessible : kNoAccess;
}

void add_bytes_locked(uint32_t agent, uint64_t bytes) {
  std::vector<uint64_t>& all = g_svm->bytes;
  if (all.size() <= agent) all.resize(size_t{agent} + 1, 0);
  all[agent] += bytes;
}

// The common checks of set and get: NULL or empty, then the pairs.
hsa_status_t check_call(void* ptr, size_t size, const hsa_amd_svm_attribute_pair_t* list,
                        size_t count) {
  if (ptr == nullptr || size == 0 || list == nullptr || count == 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return HSA_STATUS_SUCCESS;
}

// Whether [begin, end) meets memory the runtime made (allocations, the
// quarantine, registered reservations): KFD refuses SVM attributes there.
bool meets_runtime_memory(uintptr_t begin, uintptr_t end) {
  SharedLock lock(memory_mutex());
  const Memory& m = memory();
  const size_t size = end - begin;
  const auto block_bytes = [](const Block& block) { return block.bytes; };
  const auto quarantined = [](const Memory::Quarantined& q) { return q.block.bytes; };
  return range_meets(m.live, begin, size, block_bytes) ||
         range_meets(m.quarantine, begin, size, quarantined) ||
         vmem_meets_locked(begin, size);
}

}  // namespace

// ---- shared with the other files ------------------------------------------------------------

bool svm_gpu_may_access(uint32_t agent, uintptr_t address) {
  if (xnack()) return true;
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  bool may = false;
  each_overlap_locked(address, address + 1, [&](uintptr_t, const SvmRange& range) {
    const uint64_t access = access_of(range, agent);
    may = access == kAccessible || access == kInPlace;
  });
  return may;
}

void svm_access(uint32_t agent, const void* ptr, size_t size) {
  uintptr_t begin = 0, end = 0;
  if (size == 0 || !page_span(ptr, size, &begin, &end)) return;
  const auto first = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t last = first + size;
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  if (g_svm->ranges.empty()) return;
  // Only the pages accessed move: the ranges are split at the span's ends.
  split_at_locked(begin);
  split_at_locked(end);
  each_overlap_locked(begin, end, [&](uintptr_t start, SvmRange& range) {
    add_bytes_locked(agent, std::min(last, range.end) - std::max(first, start));
    // The CPU pulls pages resident on a GPU back; a GPU with
    // AGENT_ACCESSIBLE under XNACK pulls pages resident elsewhere to
    // itself (IN_PLACE ones stay; without XNACK nothing faults).
    const bool moves = is_gpu(agent) ? range.location != agent && xnack() &&
                                           access_of(range, agent) == kAccessible
                                     : range.location != kCpu;
    if (moves) {
      range.location = agent;
      counters().svm_migrations.fetch_add(1);
    }
  });
}

void svm_forget(uintptr_t base, size_t size) {
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  forget_locked(base, base + size);
}

void svm_reset() {
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  g_svm->ranges.clear();
  g_svm->bytes.clear();
}

void svm_reset_counters() {
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  g_svm->bytes.clear();
}

uint64_t svm_range_count() {
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  return g_svm->ranges.size();
}

}  // namespace hsa_rt

using namespace hsa_rt;

namespace hsa_rt::api {

hsa_status_t amd_svm_attributes_set(void* ptr, size_t size,
                                    hsa_amd_svm_attribute_pair_t* attribute_list,
                                    size_t attribute_count) {
  HSA_RT_REQUIRE_READY();
  if (take_fault(&Faults::svm_sets)) return HSA_STATUS_ERROR;
  hsa_status_t status = check_call(ptr, size, attribute_list, attribute_count);
  if (status != HSA_STATUS_SUCCESS) return status;
  // Every pair is checked before anything changes (ROCr builds KFD's list
  // first, then makes one call).
  std::vector<uint64_t> attributes;
  std::vector<uint32_t> agents;
  std::vector<std::pair<uint32_t, uint64_t>> access;
  std::vector<std::pair<uint64_t, uint64_t>> values;
  for (size_t i = 0; i < attribute_count; ++i) {
    const uint64_t attribute = attribute_list[i].attribute;
    const uint64_t value = attribute_list[i].value;
    if (is_access(attribute)) {
      uint32_t index = 0;
      if (!agent_index(hsa_agent_t{value}, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
      if (std::find(agents.begin(), agents.end(), index) != agents.end()) {
        return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
      }
      agents.push_back(index);
      access.emplace_back(index, attribute);
      continue;
    }
    if (std::find(attributes.begin(), attributes.end(), attribute) != attributes.end()) {
      return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
    }
    attributes.push_back(attribute);
    if (!is_settable_value(attribute)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    uint32_t index = 0;
    if (attribute == kPreferredLocation && value != 0 && !agent_index(hsa_agent_t{value}, &index)) {
      return HSA_STATUS_ERROR_INVALID_AGENT;
    }
    if (attribute == kGlobalFlag && value != HSA_AMD_SVM_GLOBAL_FLAG_FINE_GRAINED &&
        value != HSA_AMD_SVM_GLOBAL_FLAG_COARSE_GRAINED) {
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    // KFD caps the granularity (log2 pages) at 18.
    values.emplace_back(attribute, attribute == kMigrationGranularity ? std::min<uint64_t>(value, 18)
                                                                        : value);
  }
  uintptr_t begin = 0, end = 0;
  if (!page_span(ptr, size, &begin, &end)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!pages_mapped(begin, end) || meets_runtime_memory(begin, end)) return HSA_STATUS_ERROR;
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  for (SvmRange* range : cover_locked(begin, end)) {
    // A CPU in an access attribute sets host access only: nothing a GPU sees.
    for (const auto& [agent, attribute] : access) {
      if (is_gpu(agent)) range->access[agent] = attribute;
    }
    for (const auto& [attribute, value] : values) range->values[attribute] = value;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_svm_attributes_get(void* ptr, size_t size,
                                    hsa_amd_svm_attribute_pair_t* attribute_list,
                                    size_t attribute_count) {
  HSA_RT_REQUIRE_READY();
  if (take_fault(&Faults::svm_gets)) return HSA_STATUS_ERROR;
  hsa_status_t status = check_call(ptr, size, attribute_list, attribute_count);
  if (status != HSA_STATUS_SUCCESS) return status;
  std::vector<uint32_t> queried(attribute_count, kNoAgent);
  for (size_t i = 0; i < attribute_count; ++i) {
    const uint64_t attribute = attribute_list[i].attribute;
    if (attribute == kQuery) {
      if (!agent_index(hsa_agent_t{attribute_list[i].value}, &queried[i])) {
        return HSA_STATUS_ERROR_INVALID_AGENT;
      }
    } else if (attribute != kPrefetchLocation && !is_settable_value(attribute)) {
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;  // set-only or unknown
    }
  }
  uintptr_t begin = 0, end = 0;
  if (!page_span(ptr, size, &begin, &end)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  if (!pages_mapped(begin, end)) {
    // KFD dropped the range at munmap: so are its attributes.
    forget_locked(begin, end);
    return HSA_STATUS_ERROR;
  }
  // The pages as they are: a gap is a range with nothing set, on the host.
  std::vector<SvmRange> pages;
  uintptr_t at = begin;
  each_overlap_locked(begin, end, [&](uintptr_t start, const SvmRange& range) {
    if (start > at) pages.push_back(SvmRange{});
    pages.push_back(range);
    at = range.end;
  });
  if (at < end) pages.push_back(SvmRange{});
  for (size_t i = 0; i < attribute_count; ++i) {
    hsa_amd_svm_attribute_pair_t& pair = attribute_list[i];
    if (pair.attribute == kQuery) {
      bool any_none = false, any_accessible = false;
      for (const SvmRange& range : pages) {
        const uint64_t access = access_of(range, queried[i]);
        any_none = any_none || access == kNoAccess;
        any_accessible = any_accessible || access == kAccessible;
      }
      pair.attribute = any_none ? kNoAccess : any_accessible ? kAccessible : kInPlace;
      continue;
    }
    if (pair.attribute == kPrefetchLocation) {
      const uint32_t first = pages.front().prefetched;
      const bool uniform = std::all_of(pages.begin(), pages.end(), [&](const SvmRange& range) {
        return range.prefetched == first;
      });
      pair.value = uniform && first != kNoAgent ? agent_handle(first).handle : 0;
      continue;
    }
    const auto value_of = [&](const SvmRange& range) {
      auto it = range.values.find(pair.attribute);
      return it == range.values.end() ? uint64_t{0} : it->second;
    };
    const uint64_t first = value_of(pages.front());
    const bool uniform = std::all_of(pages.begin(), pages.end(), [&](const SvmRange& range) {
      return value_of(range) == first;
    });
    if (pair.attribute == kGlobalFlag) {
      pair.value = uniform ? first : uint64_t{HSA_AMD_SVM_GLOBAL_FLAG_INDETERMINATE};
    } else {
      pair.value = uniform ? first : 0;
    }
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t amd_svm_prefetch_async(void* ptr, size_t size, hsa_agent_t agent,
                                    uint32_t num_dep_signals, const hsa_signal_t* dep_signals,
                                    hsa_signal_t completion_signal) {
  HSA_RT_REQUIRE_READY();
  if (take_fault(&Faults::svm_prefetches)) return HSA_STATUS_ERROR;
  if (ptr == nullptr || size == 0 || (num_dep_signals != 0) != (dep_signals != nullptr)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t index = 0;
  if (!agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  std::vector<hsa_signal_t> deps(dep_signals, dep_signals + num_dep_signals);
  for (hsa_signal_t dep : deps) {
    if (!signal_known(dep)) return HSA_STATUS_ERROR_INVALID_SIGNAL;
  }
  if (completion_signal.handle != 0 && !signal_known(completion_signal)) {
    return HSA_STATUS_ERROR_INVALID_SIGNAL;
  }
  uintptr_t begin = 0, end = 0;
  if (!page_span(ptr, size, &begin, &end)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (!pages_mapped(begin, end) || meets_runtime_memory(begin, end)) return HSA_STATUS_ERROR;
  // The migration runs once every dependency reads 0; done here, in the
  // caller's thread (the completion signal says when, as ROCr's would).
  const std::atomic<bool> never{false};
  dependencies_satisfied(deps, true, never);
  {
    std::lock_guard<std::mutex> lock(g_svm_mutex);
    for (SvmRange* range : cover_locked(begin, end)) {
      range->location = index;
      range->prefetched = index;
    }
  }
  counters().svm_prefetches.fetch_add(1);
  if (completion_signal.handle != 0) complete_copy(completion_signal, true);
  return HSA_STATUS_SUCCESS;
}

}  // namespace hsa_rt::api

// ---- control interface -----------------------------------------------------------------------

extern "C" {

uint64_t hsa_rt_svm_bytes(hsa_agent_t agent) {
  uint32_t index = 0;
  if (!ready() || !agent_index(agent, &index)) return 0;
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  return index < g_svm->bytes.size() ? g_svm->bytes[index] : 0;
}

hsa_agent_t hsa_rt_svm_location(const void* ptr) {
  if (!ready()) return hsa_agent_t{0};
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(g_svm_mutex);
  uint32_t location = kCpu;
  each_overlap_locked(address, address + 1,
                      [&](uintptr_t, const SvmRange& range) { location = range.location; });
  return agent_handle(location);
}

}  // extern "C"
