// kernel_replay_gpu_bench: snapshot and restore throughput of kernel-replay
// on a real GPU (through HSA-on-CUDA), next to the copy ceilings of the same
// machine, all measured in one run so the ratios hold.
//
//   kernel_replay_gpu_bench --csv OUT.csv [--table OUT.md] [--gpu N] [--quick]
//                           [--config NAME] [--toolkit "nvcc 13.0 ..."]
//                           [--cubin KERNELS.cubin] [--part policies|kernels|host|all]
//
// Two tables. The first (--part policies) is described here; the second
// (--part kernels, needs --cubin: gpu/kernels.cu's cubin) measures the
// library's own kernels per strategy and tier beside the CUPTI checkpoint
// API, with a correctness column: see "the library's kernels, side by side
// with the CUPTI checkpoint API" below. --part host: only its host-memory
// rows.
//
// For each tracked footprint (64 MiB, 256 MiB, 1 GiB, 4 GiB, 8 GiB as four
// regions each, 10,000 regions of 4 KiB, and, beside the plain allocations of
// the same size, 256 MiB and 1 GiB as a hipMallocAsync-style VM heap: 32 MiB
// chunks of physical memory mapped into one reserved range with
// hsa_amd_vmem_*, each chunk a tracked region) it measures:
//   - the library: kr_snap and kr_restore of GPU 0, each timed with the host's
//     steady clock after cuCtxSynchronize (both calls return only when their
//     copies have landed), median of N repetitions, N chosen from a warm-up
//     run so one operation takes about 0.5 s in total (at least 3, at most
//     50); every snapshot is freed outside the timed region;
//   - the ceilings, region by region with the same layout and one cuMemcpy
//     per region, synchronised once at the end: pinned host <-> device
//     (cuMemHostAlloc buffer), pageable host <-> device (a malloc'd buffer,
//     touched beforehand and reused), device -> fresh pageable host memory
//     (malloc'd per region on every repetition and freed after it, as a
//     snapshot allocates its host copies), and device -> device.
// GB/s are 10^9 bytes per second of footprint copied. For device -> device
// both conventions are given: bytes copied per second, and read + write
// traffic (twice that).
//
// The library is measured as configurations: a named setup run before its
// measurements. With a library that has storage policies there is one per
// policy (baseline: the design's original path; auto, device, pinned,
// pageable); with an older library only the baseline, which is all it does.
// A later setting is one more entry in kConfigs.
//
// The Markdown table comes last on stdout (and in --table); the raw numbers
// go to --csv.

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include "harness.h"

using harness::bytes_text;
using harness::cu;

namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr uint64_t GiB = 1024 * MiB;

// ---- configurations ----------------------------------------------------------

// An optional kr_* entry point, resolved at run time so the bench links
// against libraries that do not have it yet; NULL when absent.
template <typename Fn>
Fn kr_optional(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  Fn function = nullptr;
  static_assert(sizeof(function) == sizeof(address), "function pointers are pointer-sized");
  std::memcpy(&function, &address, sizeof(function));
  return function;
}

struct Config {
  const char* name;
  const char* description;
  // Runs before the configuration's measurements of every footprint; false
  // (with a reason) marks its rows "not available". NULL: nothing to set up.
  bool (*setup)(std::string* why);
  // Undoes setup; NULL: nothing to undo.
  void (*teardown)();
};

// Storage policies of libraries that have them (kr_set_storage_policy,
// resolved at run time): a configuration per policy. Every teardown releases
// the arenas the library retained (kr_trim_retained), so each configuration
// and footprint starts from nothing and leaves nothing behind.
bool set_policy(const char* name, std::string* why) {
  for (const harness::StoragePolicy& policy : harness::storage_policies()) {
    if (policy.name == name) {
      if (harness::set_storage_policy(policy.value)) return true;
      *why = std::string("kr_set_storage_policy refused '") + name + "'";
      return false;
    }
  }
  *why = "this libkernel_replay has no storage policies (kr_set_storage_policy)";
  return false;
}

// The baseline is the library as the design first described it; a library
// without storage policies has no other behaviour, so it needs no setup.
bool setup_baseline(std::string* why) {
  return harness::storage_policies().empty() || set_policy("baseline", why);
}
bool setup_auto(std::string* why) { return set_policy("auto", why); }
bool setup_device(std::string* why) { return set_policy("device", why); }
bool setup_pinned(std::string* why) { return set_policy("pinned", why); }
bool setup_pageable(std::string* why) { return set_policy("pageable", why); }
void release_retained() { harness::trim_retained(); }

// Add configurations here: a name, a description, a setup that may refuse
// with a reason (its rows then say "not available") and a teardown. A new
// kr_* call is resolved with kr_optional() / harness::kr_symbol(), so this
// program still builds and runs against libraries without it. A setting read
// from an environment variable at the library's first use cannot change
// inside one process: run the bench once per value with --config, and say
// in the results that those rows come from separate runs.
const Config kConfigs[] = {
    {"baseline",
     "the design's original path: a fresh pageable buffer and one blocking hsa_memory_copy per "
     "region (KR_STORAGE_BASELINE, or a library without storage policies)",
     setup_baseline, release_retained},
    {"auto", "the library's default: device arena up to its budget, then pinned, then pageable",
     setup_auto, release_retained},
    {"device", "device-memory arena only (device-to-device copies)", setup_device,
     release_retained},
    {"pinned", "pinned host arena only (DMA over the host link)", setup_pinned, release_retained},
    {"pageable", "pageable host arena only (driver-staged copies)", setup_pageable,
     release_retained},
};

// ---- measurements ----------------------------------------------------------------

struct Stats {
  bool ok = false;
  std::string error;
  int reps = 0;
  double median = 0;
  double min = 0;
  double max = 0;
};

// Runs `op` (which returns the seconds it measured, or a negative value on
// failure after printing why) once to warm up and to estimate its cost, then
// enough times to fill about target_seconds.
Stats measure(const std::function<double()>& op, double target_seconds, int min_reps,
              int max_reps) {
  Stats stats;
  const double warm = op();
  if (warm < 0) {
    stats.error = "failed in the warm-up run";
    return stats;
  }
  const int wanted =
      warm > 0 ? static_cast<int>(std::ceil(target_seconds / warm)) : max_reps;
  stats.reps = std::clamp(wanted, min_reps, max_reps);
  std::vector<double> times;
  for (int i = 0; i < stats.reps; ++i) {
    const double t = op();
    if (t < 0) {
      stats.error = "failed in repetition " + std::to_string(i + 1);
      return stats;
    }
    times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  stats.median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  stats.min = times.front();
  stats.max = times.back();
  stats.ok = true;
  return stats;
}

double gb_per_s(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

// ---- the footprint ----------------------------------------------------------------

struct Footprint {
  std::string label;
  uint64_t region_bytes;
  size_t regions;
  // A VM heap: the regions are chunks (hsa_amd_vmem_handle_create) mapped
  // back to back into one reservation, with GPU 0 given read-write access,
  // instead of hsa_amd_memory_pool_allocate blocks.
  bool vm_heap = false;
  uint64_t bytes() const { return region_bytes * regions; }
};

// Ceiling operations, in table order.
enum Ceiling { kPinnedH2D, kPinnedD2H, kPageableH2D, kPageableD2H, kFreshD2H, kD2D, kCeilings };
const char* const kCeilingNames[kCeilings] = {"pinned H2D",   "pinned D2H",        "pageable H2D",
                                              "pageable D2H", "fresh pageable D2H", "D2D"};

struct Row {
  Footprint footprint;
  std::string config;
  std::string unavailable;  // why this row has no library numbers
  Stats snap;
  Stats restore;
  Stats ceilings[kCeilings];
};

class Bench {
 public:
  Bench(const harness::Gpu& gpu, std::FILE* csv) : gpu_(gpu), csv_(csv) {}

  // Measures one footprint: ceilings once, then every selected configuration.
  void run(const Footprint& footprint, const std::vector<const Config*>& configs,
           std::vector<Row>* rows) {
    std::printf("\n== %s: %zu regions of %s\n", footprint.label.c_str(), footprint.regions,
                bytes_text(footprint.region_bytes).c_str());
    std::string why;
    if (!fits(footprint, &why)) {
      std::printf("   skipped: %s\n", why.c_str());
      for (const Config* config : configs) {
        Row row;
        row.footprint = footprint;
        row.config = config->name;
        row.unavailable = "skipped: " + why;
        rows->push_back(row);
      }
      return;
    }
    if (!allocate(footprint)) {
      release();
      for (const Config* config : configs) {
        Row row;
        row.footprint = footprint;
        row.config = config->name;
        row.unavailable = "allocation failed";
        rows->push_back(row);
      }
      return;
    }
    Stats ceilings[kCeilings];
    measure_ceilings(footprint, ceilings);
    for (const Config* config : configs) {
      Row row;
      row.footprint = footprint;
      row.config = config->name;
      std::copy(std::begin(ceilings), std::end(ceilings), std::begin(row.ceilings));
      std::string reason;
      if (config->setup != nullptr && !config->setup(&reason)) {
        row.unavailable = "not available: " + reason;
        std::printf("   %s: %s\n", config->name, row.unavailable.c_str());
      } else {
        measure_library(footprint, config->name, &row);
        if (config->teardown != nullptr) config->teardown();
      }
      rows->push_back(row);
    }
    release();
  }

 private:
  bool fits(const Footprint& f, std::string* why) {
    if (f.vm_heap && !vm_heap_available(f, why)) return false;
    // Device: the footprint, the D2D scratch region, a margin for the driver.
    const uint64_t device_needed = f.bytes() + f.region_bytes + GiB;
    const uint64_t device_free = harness::free_device_memory(gpu_.agent);
    // Host: one snapshot, the pinned and pageable region buffers, a margin.
    const uint64_t host_needed = f.bytes() + 2 * f.region_bytes + 2 * GiB;
    const uint64_t host_free = harness::available_host_memory();
    if (device_free < device_needed) {
      *why = "needs " + bytes_text(device_needed) + " of device memory, " +
             bytes_text(device_free) + " free";
      return false;
    }
    if (host_free != 0 && host_free < host_needed) {
      *why = "needs " + bytes_text(host_needed) + " of host memory, " + bytes_text(host_free) +
             " available";
      return false;
    }
    return true;
  }

  // Why a VM heap cannot be measured here (rows "skipped"), if it cannot.
  bool vm_heap_available(const Footprint& f, std::string* why) {
#if HSA_RT_HAVE_VMEM
    const size_t granularity = hsa_rt_vmem_granularity(gpu_.agent);
    AmdExtTable fresh;
    hsa_rt_fill_amd_ext_table(&fresh);
    if (!hsa_rt_vmem_supported() || granularity == 0) {
      *why = "the CUDA driver has no virtual memory management";
    } else if (f.region_bytes % granularity != 0) {
      *why = "chunks of " + bytes_text(f.region_bytes) + " are not whole granules of " +
             bytes_text(granularity);
    } else if (hsa_rt_amd_ext_table()->hsa_amd_vmem_map_fn == fresh.hsa_amd_vmem_map_fn) {
      *why = "this libkernel_replay does not track vmem mappings";
    } else {
      return true;
    }
#else
    (void)f;
    *why = "built against ROCm 5.2 headers (no hsa_amd_vmem API)";
#endif
    return false;
  }

  // One region: a pool block, or the next chunk of the VM heap.
  bool allocate_region(const Footprint& f, size_t index, void** p) {
    if (!f.vm_heap) {
      // Through the plain HSA name, so through kernel-replay's wrapper: these
      // are the tracked regions.
      return KR_HSA(hsa_amd_memory_pool_allocate(gpu_.vram, f.region_bytes, 0, p));
    }
#if HSA_RT_HAVE_VMEM
    if (index == 0 && !KR_HSA(hsa_amd_vmem_address_reserve(&heap_, f.bytes(), 0, 0))) {
      heap_ = nullptr;
      return false;
    }
    heap_bytes_ = f.bytes();
    hsa_amd_vmem_alloc_handle_t handle{0};
    if (!KR_HSA(hsa_amd_vmem_handle_create(gpu_.vram, f.region_bytes, MEMORY_TYPE_NONE, 0,
                                           &handle))) {
      return false;
    }
    *p = static_cast<char*>(heap_) + index * f.region_bytes;
    // Released once mapped, as pools do: the mapping keeps the memory.
    const bool mapped = KR_HSA(hsa_amd_vmem_map(*p, f.region_bytes, 0, handle, 0));
    KR_HSA(hsa_amd_vmem_handle_release(handle));
    if (!mapped) return false;
    hsa_amd_memory_access_desc_t desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.agent_handle = gpu_.agent;
    desc.permissions = HSA_ACCESS_PERMISSION_RW;
    if (!KR_HSA(hsa_amd_vmem_set_access(*p, f.region_bytes, &desc, 1))) {
      KR_HSA(hsa_amd_vmem_unmap(*p, f.region_bytes));
      return false;
    }
    return true;
#else
    (void)index;
    (void)p;
    return false;
#endif
  }

  bool allocate(const Footprint& f) {
    harness::ContextScope scope(gpu_.context);
    if (!scope.ok()) return false;
    const size_t tracked_before = kr_tracked_count(gpu_.agent);
    regions_.reserve(f.regions);
    vm_heap_ = f.vm_heap;
    region_bytes_ = f.region_bytes;
    for (size_t i = 0; i < f.regions; ++i) {
      void* p = nullptr;
      if (!allocate_region(f, i, &p)) return false;
      regions_.push_back(p);
      if (!KR_CU(cu().cuMemsetD32(reinterpret_cast<CUdeviceptr>(p), 0x01010101u * (i % 251 + 1),
                                  f.region_bytes / 4))) {
        return false;
      }
    }
    if (kr_tracked_count(gpu_.agent) != tracked_before + f.regions) {
      std::printf("   kernel-replay tracks %zu regions, expected %zu\n",
                  kr_tracked_count(gpu_.agent), tracked_before + f.regions);
      return false;
    }
    // Helpers for the ceilings come from CUDA directly: never tracked, never
    // in a snapshot.
    if (!KR_CU(cu().cuMemHostAlloc(&pinned_, f.region_bytes, CU_MEMHOSTALLOC_PORTABLE))) {
      pinned_ = nullptr;
      return false;
    }
    pageable_ = std::malloc(f.region_bytes);
    if (pageable_ == nullptr) return false;
    std::memset(pageable_, 0x5A, f.region_bytes);  // touched: a warm buffer
    if (!KR_CU(cu().cuMemAlloc(&scratch_, f.region_bytes))) {
      scratch_ = 0;
      return false;
    }
    return KR_CU(cu().cuCtxSynchronize());
  }

  void release() {
    harness::ContextScope scope(gpu_.context);
#if HSA_RT_HAVE_VMEM
    if (vm_heap_) {
      // Unmapping a chunk frees it (its handle was released when mapped).
      for (void* p : regions_) KR_HSA(hsa_amd_vmem_unmap(p, region_bytes_));
      if (heap_ != nullptr) KR_HSA(hsa_amd_vmem_address_free(heap_, heap_bytes_));
      heap_ = nullptr;
      regions_.clear();
    }
#endif
    for (void* p : regions_) KR_HSA(hsa_amd_memory_pool_free(p));
    regions_.clear();
    vm_heap_ = false;
    if (pinned_ != nullptr) KR_CU(cu().cuMemFreeHost(pinned_));
    pinned_ = nullptr;
    std::free(pageable_);
    pageable_ = nullptr;
    if (scratch_ != 0) KR_CU(cu().cuMemFree(scratch_));
    scratch_ = 0;
  }

  // One pass over every region with cuMemcpy, synchronised at the end.
  double copy_pass(Ceiling kind, const Footprint& f) {
    harness::ContextScope scope(gpu_.context);
    if (!scope.ok() || !KR_CU(cu().cuCtxSynchronize())) return -1;
    std::vector<void*> fresh;
    if (kind == kFreshD2H) fresh.reserve(f.regions);
    const double start = harness::now_seconds();
    for (void* region : regions_) {
      const auto device = reinterpret_cast<CUdeviceptr>(region);
      CUdeviceptr dst = 0;
      CUdeviceptr src = 0;
      switch (kind) {
        case kPinnedH2D:
          dst = device;
          src = reinterpret_cast<CUdeviceptr>(pinned_);
          break;
        case kPinnedD2H:
          dst = reinterpret_cast<CUdeviceptr>(pinned_);
          src = device;
          break;
        case kPageableH2D:
          dst = device;
          src = reinterpret_cast<CUdeviceptr>(pageable_);
          break;
        case kPageableD2H:
          dst = reinterpret_cast<CUdeviceptr>(pageable_);
          src = device;
          break;
        case kFreshD2H: {
          void* host = std::malloc(f.region_bytes);
          if (host == nullptr) {
            std::printf("   malloc(%s) failed\n", bytes_text(f.region_bytes).c_str());
            for (void* p : fresh) std::free(p);
            return -1;
          }
          fresh.push_back(host);
          dst = reinterpret_cast<CUdeviceptr>(host);
          src = device;
          break;
        }
        case kD2D:
        case kCeilings:
          dst = scratch_;
          src = device;
          break;
      }
      if (!KR_CU(cu().cuMemcpy(dst, src, f.region_bytes))) {
        for (void* p : fresh) std::free(p);
        return -1;
      }
    }
    const bool synced = KR_CU(cu().cuCtxSynchronize());
    const double seconds = harness::now_seconds() - start;
    for (void* p : fresh) std::free(p);
    return synced ? seconds : -1;
  }

  void measure_ceilings(const Footprint& f, Stats* ceilings) {
    for (int kind = 0; kind < kCeilings; ++kind) {
      const auto ceiling = static_cast<Ceiling>(kind);
      ceilings[kind] = measure([&] { return copy_pass(ceiling, f); }, 0.25, 3, 50);
      report(f, "ceiling", kCeilingNames[kind], ceilings[kind]);
    }
  }

  void measure_library(const Footprint& f, const char* config, Row* row) {
    const size_t expected_regions = f.regions;  // no executables are loaded
    int declined = -1;
    row->snap = measure(
        [&]() -> double {
          {
            harness::ContextScope scope(gpu_.context);
            if (!scope.ok() || !KR_CU(cu().cuCtxSynchronize())) return -1;
          }
          const double start = harness::now_seconds();
          kr_snapshot_t* snapshot = kr_snap(gpu_.agent);
          const double seconds = harness::now_seconds() - start;
          if (!kr_snapshot_ok(snapshot)) {
            declined = int(kr_snapshot_decline_reason(snapshot));
            kr_snapshot_free(snapshot);
            return -1;
          }
          const bool ok = kr_snapshot_region_count(snapshot) == expected_regions &&
                          kr_snapshot_byte_count(snapshot) == f.bytes();
          if (!ok) {
            std::printf("   snapshot: %zu regions, %" PRIu64 " bytes; expected %zu, %" PRIu64 "\n",
                        kr_snapshot_region_count(snapshot), kr_snapshot_byte_count(snapshot),
                        expected_regions, f.bytes());
          }
          kr_snapshot_free(snapshot);  // outside the timed region
          return ok ? seconds : -1;
        },
        0.5, 3, 50);
    if (declined >= 0) {
      // The library said no (too little device or host memory for this
      // policy, say): a result, not a failure of the bench.
      row->unavailable = "declined, reason " + std::to_string(declined);
      std::printf("   %-10s snapshot declined (kr_decline_reason_t %d)\n", config, declined);
      if (csv_ != nullptr) {
        std::fprintf(csv_, "\"%s\",%" PRIu64 ",%zu,%" PRIu64 ",%s,\"snap\",declined-%d,0,0,0,0,0\n",
                     f.label.c_str(), f.bytes(), f.regions, f.region_bytes, config, declined);
        std::fflush(csv_);
      }
      return;
    }
    report(f, config, "snap", row->snap);

    kr_snapshot_t* snapshot = kr_snap(gpu_.agent);
    if (!kr_snapshot_ok(snapshot)) {
      row->restore.error = "the snapshot to restore from declined";
      std::printf("   %s\n", row->restore.error.c_str());
    } else {
      const std::string tiers = harness::snapshot_tiers(snapshot);
      if (!tiers.empty()) std::printf("   %-10s snapshot held in: %s\n", config, tiers.c_str());
      row->restore = measure(
          [&]() -> double {
            {
              harness::ContextScope scope(gpu_.context);
              if (!scope.ok() || !KR_CU(cu().cuCtxSynchronize())) return -1;
            }
            kr_restore_report_t result{};
            const double start = harness::now_seconds();
            kr_restore_with_report(snapshot, &result);
            const double seconds = harness::now_seconds() - start;
            if (result.restored != expected_regions || result.failed != 0) {
              std::printf("   restore: %zu restored, %zu skipped, %zu failed\n", result.restored,
                          result.skipped_not_live, result.failed);
              return -1;
            }
            return seconds;
          },
          0.5, 3, 50);
      report(f, config, "restore", row->restore);
    }
    kr_snapshot_free(snapshot);
  }

  void report(const Footprint& f, const char* config, const char* operation, const Stats& s) {
    if (!s.ok) {
      std::printf("   %-10s %-20s FAILED: %s\n", config, operation, s.error.c_str());
    } else {
      std::printf("   %-10s %-20s median %9.4f s over %3d reps = %8.2f GB/s (%.2f us/region)\n",
                  config, operation, s.median, s.reps, gb_per_s(f.bytes(), s.median),
                  s.median / double(f.regions) * 1e6);
    }
    std::fflush(stdout);
    if (csv_ != nullptr) {
      std::fprintf(csv_, "\"%s\",%" PRIu64 ",%zu,%" PRIu64 ",%s,\"%s\",%s,%d,%.9f,%.9f,%.9f,%.4f\n",
                   f.label.c_str(), f.bytes(), f.regions, f.region_bytes, config, operation,
                   s.ok ? "ok" : "failed", s.reps, s.median, s.min, s.max,
                   s.ok ? gb_per_s(f.bytes(), s.median) : 0.0);
      std::fflush(csv_);
    }
  }

  harness::Gpu gpu_;
  std::FILE* csv_;
  std::vector<void*> regions_;
  bool vm_heap_ = false;     // regions_ are chunks of the heap below
  uint64_t region_bytes_ = 0;
  void* heap_ = nullptr;     // the VM heap's reservation
  uint64_t heap_bytes_ = 0;
  void* pinned_ = nullptr;
  void* pageable_ = nullptr;
  CUdeviceptr scratch_ = 0;
};

// ---- output -------------------------------------------------------------------

std::string cell(const Stats& s, uint64_t bytes, double factor = 1.0) {
  if (!s.ok) return "—";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", gb_per_s(bytes, s.median) * factor);
  return text;
}

std::string per_region(const Stats& s, size_t regions) {
  if (!s.ok) return "—";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", s.median / double(regions) * 1e6);
  return text;
}

std::string markdown_table(const std::vector<Row>& rows) {
  std::ostringstream out;
  out << "| footprint | regions | config | snap GB/s | restore GB/s | snap µs/region | "
         "restore µs/region | pinned H2D | pinned D2H | pageable H2D | pageable D2H | "
         "fresh pageable D2H | D2D copied | D2D r+w |\n";
  out << "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::map<std::string, std::string> not_measured;  // configuration -> why
  for (const Row& row : rows) {
    if (row.unavailable.rfind("not available", 0) == 0) {
      not_measured[row.config] = row.unavailable;
      continue;
    }
    const uint64_t bytes = row.footprint.bytes();
    out << "| " << row.footprint.label << " | " << row.footprint.regions << " | " << row.config;
    if (!row.unavailable.empty()) {
      out << " (" << row.unavailable << ")";
    }
    out << " | " << cell(row.snap, bytes) << " | " << cell(row.restore, bytes) << " | "
        << per_region(row.snap, row.footprint.regions) << " | "
        << per_region(row.restore, row.footprint.regions);
    for (int kind = 0; kind < kCeilings; ++kind) out << " | " << cell(row.ceilings[kind], bytes);
    out << " | " << cell(row.ceilings[kD2D], bytes, 2.0) << " |\n";
  }
  out << "\nGB/s = 10^9 bytes of footprint per second, median of the repetitions in the CSV. "
         "Library: kr_snap / kr_restore of the whole footprint, host steady clock. Ceilings: one "
         "cuMemcpy per region with the same layout, synchronised once; \"pageable\" reuses one "
         "touched malloc'd buffer, \"fresh pageable\" mallocs every region's buffer anew each "
         "repetition (as a snapshot does). D2D copied = bytes copied per second; D2D r+w counts "
         "the read and the write (2x).\n";
  for (const auto& [config, why] : not_measured) {
    out << "\nConfiguration " << config << " was " << why << ".\n";
  }
  return out.str();
}

// ---- the library's kernels, side by side with the CUPTI checkpoint API ----------------
//
// A second table, one row per (case, footprint, tier, method):
//   cases   "all written": every byte of the footprint rewritten before each
//           restore (the worst case for dirty blocks); "1% written": a fixed
//           set of 1% of its 4 KiB blocks (every 100th) mutated before each
//           restore; "1%, moving set": a different 1% on every pass (the
//           case CUPTI's OPT_TRANSFER caches wrongly); "consecutive snaps":
//           1% mutated, then a snapshot, repeatedly, the previous snapshot
//           freed (its arena retained) each time: the incremental snapshot.
//   methods the library under each strategy (kr_set_strategy, resolved at run
//           time; without it only the one KERNEL_REPLAY_STRATEGY chose), in
//           the device and pinned tiers (kr_set_storage_policy), and the CUPTI
//           checkpoint API (libcheckpoint, dlopen'd at run time: $CUPTI_CHECKPOINT_LIB,
//           libcheckpoint.so, /usr/local/cuda/extras/CUPTI/lib64) with
//           OPT_NONE and with OPT_TRANSFER.
// Every restore is checked on the device (count_mismatches over every word
// of every region, against the pattern the footprint was filled with when
// it was saved); the "correct" column says whether every pass matched. The
// data is written by the application's kernels (gpu/kernels.cu: fill_pattern,
// mutate_blocks), so this table needs --cubin. Times: host steady clock
// around kr_snap / kr_restore (or cuptiCheckpointSave / Restore) and a
// cuCtxSynchronize, median of kKernelReps passes.

// Passes per row (2 with --quick).
int kKernelReps = 5;
constexpr uint64_t kBlockBytes = 4 * KiB;
constexpr uint64_t kDirtyStride = 100;  // every 100th block: 1%

// cupti_checkpoint.h's CUpti_Checkpoint, declared here with its documented
// layout (the GPU machine's CUDA install has the header, this build needs
// none): the size field covers everything up to and including pPriv.
struct CuptiCheckpoint {
  size_t structSize;
  CUcontext ctx;
  size_t reserveDeviceMB;
  size_t reserveHostMB;
  uint8_t allowOverwrite;
  uint8_t optimizations;
  void* pPriv;
};
constexpr size_t kCuptiCheckpointStructSize = offsetof(CuptiCheckpoint, pPriv) + sizeof(void*);
constexpr uint8_t kCuptiOptTransfer = 1;  // CUPTI_CHECKPOINT_OPT_TRANSFER
using CuptiCheckpointFn = int (*)(CuptiCheckpoint*);

struct Cupti {
  CuptiCheckpointFn save = nullptr;
  CuptiCheckpointFn restore = nullptr;
  CuptiCheckpointFn free = nullptr;
  std::string library;  // what was loaded, or why nothing was
  bool ok() const { return save != nullptr && restore != nullptr && free != nullptr; }
};

Cupti load_cupti() {
  Cupti cupti;
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("CUPTI_CHECKPOINT_LIB")) candidates.emplace_back(path);
  candidates.insert(candidates.end(),
                    {"libcheckpoint.so", "/usr/local/cuda/extras/CUPTI/lib64/libcheckpoint.so",
                     "/usr/local/cuda/lib64/libcheckpoint.so",
                     "/usr/local/cuda/targets/x86_64-linux/lib/libcheckpoint.so"});
  std::string tried;
  for (const std::string& candidate : candidates) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried += "\n     " + candidate + ": " + (why != nullptr ? why : "not loaded");
      continue;
    }
    const auto resolve = [&](const char* name) {
      CuptiCheckpointFn fn = nullptr;
      void* address = dlsym(handle, name);
      std::memcpy(&fn, &address, sizeof(fn));
      return fn;
    };
    cupti.save = resolve("cuptiCheckpointSave");
    cupti.restore = resolve("cuptiCheckpointRestore");
    cupti.free = resolve("cuptiCheckpointFree");
    if (cupti.ok()) {
      cupti.library = candidate;
      return cupti;
    }
    tried += "\n     " + candidate + ": no cuptiCheckpointSave/Restore/Free";
  }
  cupti = Cupti{};
  cupti.library = "CUPTI's checkpoint library was not found:" + tried;
  return cupti;
}

// The application's kernels the table writes and checks memory with.
struct AppKernels {
  hsa_executable_t executable{0};
  CUfunction fill = nullptr;
  CUfunction mutate_blocks = nullptr;
  CUfunction count_mismatches = nullptr;
};

struct KernelRow {
  std::string kind;  // case
  std::string footprint;
  uint64_t bytes = 0;
  size_t regions = 0;
  uint64_t region_bytes = 0;
  std::string tier;
  std::string method;
  Stats snap;
  Stats restore;
  std::string correct;  // "yes", "NO (...)", "—"
  std::string note;
};

Stats stats_of(std::vector<double> times, const std::string& error) {
  Stats s;
  if (!error.empty() || times.empty()) {
    s.error = error.empty() ? "no measurement" : error;
    return s;
  }
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  s.reps = int(n);
  s.median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  s.min = times.front();
  s.max = times.back();
  s.ok = true;
  return s;
}

// The strategies (kr_strategy_t: AUTO 0, COPIES 1, SCATTER 2, DIRTY_BLOCKS 3).
struct StrategyChoice {
  const char* name;
  int code;  // -1: whatever KERNEL_REPLAY_STRATEGY chose
};

class KernelBench {
 public:
  KernelBench(const harness::Gpu& gpu, const AppKernels& app, const Cupti& cupti, std::FILE* csv)
      : gpu_(gpu), app_(app), cupti_(cupti), csv_(csv) {
    set_strategy_ = kr_optional<bool (*)(uint32_t)>("kr_set_strategy");
    if (set_strategy_ != nullptr) {
      strategies_ = {{"copies", 1}, {"scatter", 2}, {"dirty", 3}, {"auto", 0}};
    } else {
      const char* env = std::getenv("KERNEL_REPLAY_STRATEGY");
      env_strategy_ = std::string("env:") + (env != nullptr ? env : "unset");
      strategies_ = {{env_strategy_.c_str(), -1}};
    }
  }

  // `host_only`: only the host-memory rows (--part host).
  void run(bool quick, bool host_only, std::vector<KernelRow>* rows) {
    if (quick) kKernelReps = 2;
    std::printf("\n== the library's kernels and the CUPTI checkpoint API\n");
    if (set_strategy_ == nullptr) {
      std::printf("   this library has no kr_set_strategy: one strategy, %s\n",
                  env_strategy_.c_str());
    }
    std::printf("   CUPTI checkpoint: %s%s\n", cupti_.library.c_str(),
                cupti_.ok() ? "" : "\n   (its rows are skipped)");
    struct Shape {
      const char* label;
      uint64_t region_bytes;
      size_t regions;
    };
    // --quick (the fake driver runs kernels on one host thread): smaller.
    const Shape small = quick ? Shape{"16 MiB", 4 * MiB, 4} : Shape{"64 MiB", 16 * MiB, 4};
    const Shape large = quick ? Shape{"64 MiB", 16 * MiB, 4} : Shape{"4 GiB", 1 * GiB, 4};
    const Shape many{quick ? "1,000 x 4 KiB" : "10,000 x 4 KiB", 4 * KiB, quick ? 1000u : 10000u};
    const Shape shapes[] = {small, many, large};
    for (size_t index = 0; index < (host_only ? 0 : 3); ++index) {
      const Shape& shape = shapes[index];
      if (!allocate(shape.label, shape.region_bytes, shape.regions)) {
        std::printf("   %s: allocation failed, skipped\n", shape.label);
        release();
        continue;
      }
      const bool is_large = index == 2;
      for (const StrategyChoice& s : strategies_) library_case(rows, "all written", "device", s);
      cupti_case(rows, "all written", false);
      cupti_case(rows, "all written", true);
      if (is_large) {
        for (const char* tier : {"device", "pinned"}) {
          for (const StrategyChoice& s : strategies_) library_case(rows, "1% written", tier, s);
          for (const StrategyChoice& s : strategies_) {
            library_case(rows, "1%, moving set", tier, s);
          }
          for (const StrategyChoice& s : strategies_) {
            library_case(rows, "consecutive snaps", tier, s);
          }
        }
        cupti_case(rows, "1% written", false);
        cupti_case(rows, "1% written", true);
        cupti_case(rows, "1%, moving set", false);
        cupti_case(rows, "1%, moving set", true);
      }
      release();
    }
    // Host memory a kernel writes (issue 19): pinned (a CPU pool's memory
    // granted to the GPU: hipHostMalloc) and registered (malloc'd memory
    // locked for it: hipHostRegister). The library copies it with the CPU
    // under every strategy; beside it the CPU's memcpy and the copy
    // engine's (cuMemcpy from a pinned copy) of the same bytes, and CUPTI.
    // --quick: small, the stand-in driver's time goes to the test command.
    const Shape host_shapes[] = {quick ? Shape{"4 MiB", 1 * MiB, 4} : Shape{"64 MiB", 16 * MiB, 4},
                                 quick ? Shape{"16 MiB", 4 * MiB, 4} : Shape{"1 GiB", 256 * MiB, 4}};
    for (Memory memory : {Memory::PinnedHost, Memory::Registered}) {
      for (const Shape& shape : host_shapes) {
        const std::string label = std::string(shape.label) + " " + memory_name(memory);
        if (!allocate(label.c_str(), shape.region_bytes, shape.regions, memory)) {
          std::printf("   %s: allocation failed, skipped\n", label.c_str());
          release();
          continue;
        }
        library_case(rows, "all written", "auto", strategies_.front());
        ceiling_case(rows, false);
        ceiling_case(rows, true);
        cupti_case(rows, "all written", false);
        release();
      }
    }
    if (set_strategy_ != nullptr) set_strategy_(0);
  }

 private:
  enum class Memory { Device, PinnedHost, Registered };

  static const char* memory_name(Memory memory) {
    switch (memory) {
      case Memory::Device:
        return "device";
      case Memory::PinnedHost:
        return "pinned host";
      case Memory::Registered:
        return "registered host";
    }
    return "?";
  }

  bool allocate(const char* label, uint64_t region_bytes, size_t regions,
                Memory memory = Memory::Device) {
    label_ = label;
    region_bytes_ = region_bytes;
    memory_ = memory;
    harness::ContextScope scope(gpu_.context);
    if (!scope.ok()) return false;
    const uint64_t needed = region_bytes * regions + GiB;
    if (memory == Memory::Device && harness::free_device_memory(gpu_.agent) < needed) return false;
    const hsa_amd_memory_pool_t fine = hsa_rt_pool(hsa_rt_cpu_agent(), HSA_RT_POOL_SYSTEM_FINE);
    for (size_t i = 0; i < regions; ++i) {
      void* p = nullptr;
      switch (memory) {
        case Memory::Device:
          if (!KR_HSA(hsa_amd_memory_pool_allocate(gpu_.vram, region_bytes, 0, &p))) return false;
          break;
        case Memory::PinnedHost:
          if (!KR_HSA(hsa_amd_memory_pool_allocate(fine, region_bytes, 0, &p))) return false;
          regions_.push_back(p);
          if (!KR_HSA(hsa_amd_agents_allow_access(1, &gpu_.agent, nullptr, p))) return false;
          continue;
        case Memory::Registered: {
          p = std::aligned_alloc(4096, region_bytes);
          if (p == nullptr) return false;
          void* agent_ptr = nullptr;
          if (!KR_HSA(hsa_amd_memory_lock_to_pool(p, region_bytes, &gpu_.agent, 1, fine, 0,
                                                  &agent_ptr))) {
            std::free(p);
            return false;
          }
          break;
        }
      }
      regions_.push_back(p);
    }
    return KR_CU(cu().cuMemAlloc(&counter_, sizeof(unsigned long long)));
  }

  void release() {
    harness::ContextScope scope(gpu_.context);
    for (void* p : regions_) {
      if (memory_ == Memory::Registered) {
        KR_HSA(hsa_amd_memory_unlock(p));
        std::free(p);
      } else {
        KR_HSA(hsa_amd_memory_pool_free(p));
      }
    }
    regions_.clear();
    if (counter_ != 0) KR_CU(cu().cuMemFree(counter_));
    counter_ = 0;
    harness::trim_retained();
  }

  uint64_t bytes() const { return region_bytes_ * regions_.size(); }

  bool launch(CUfunction f, void** params, uint64_t items) {
    const uint64_t blocks = std::min<uint64_t>((items + 255) / 256, 4096);
    return KR_CU(cu().cuLaunchKernel(f, unsigned(std::max<uint64_t>(blocks, 1)), 1, 1, 256, 1, 1,
                                     0, nullptr, params, nullptr));
  }

  // Every region i filled with kr_pattern(seed + i, word).
  bool fill(unsigned int seed) {
    harness::ContextScope scope(gpu_.context);
    for (size_t i = 0; i < regions_.size(); ++i) {
      CUdeviceptr p = reinterpret_cast<CUdeviceptr>(regions_[i]);
      unsigned long long n = region_bytes_ / 4;
      unsigned int s = seed + unsigned(i);
      void* params[] = {&p, &n, &s};
      if (!launch(app_.fill, params, n)) return false;
    }
    return KR_CU(cu().cuCtxSynchronize());
  }

  // Every 100th 4 KiB block of every region from block `first`, mutated;
  // returns the words changed.
  uint64_t mutate(unsigned long long first, unsigned int salt) {
    harness::ContextScope scope(gpu_.context);
    unsigned long long blocks = region_bytes_ / kBlockBytes;
    unsigned long long stride = kDirtyStride;
    unsigned int block_words = unsigned(kBlockBytes / 4);
    uint64_t words = 0;
    for (void* region : regions_) {
      CUdeviceptr p = reinterpret_cast<CUdeviceptr>(region);
      void* params[] = {&p, &blocks, &first, &stride, &block_words, &salt};
      const uint64_t selected = blocks > first ? (blocks - first + stride - 1) / stride : 0;
      if (selected == 0) continue;
      if (!launch(app_.mutate_blocks, params, selected * block_words)) return 0;
      words += selected * block_words;
    }
    KR_CU(cu().cuCtxSynchronize());
    return words;
  }

  // Words of the footprint that differ from the pattern filled with `seed`.
  uint64_t mismatches(unsigned int seed) {
    harness::ContextScope scope(gpu_.context);
    unsigned long long zero = 0;
    if (!KR_CU(cu().cuMemcpyHtoD(counter_, &zero, sizeof(zero)))) return UINT64_MAX;
    for (size_t i = 0; i < regions_.size(); ++i) {
      CUdeviceptr p = reinterpret_cast<CUdeviceptr>(regions_[i]);
      unsigned long long n = region_bytes_ / 4;
      unsigned int s = seed + unsigned(i);
      unsigned int mutated = 0;
      unsigned int salt = 0;
      CUdeviceptr out = counter_;
      void* params[] = {&p, &n, &s, &mutated, &salt, &out};
      if (!launch(app_.count_mismatches, params, n)) return UINT64_MAX;
    }
    unsigned long long found = 0;
    if (!KR_CU(cu().cuMemcpyDtoH(&found, counter_, sizeof(found)))) return UINT64_MAX;
    return found;
  }

  bool synchronize() {
    harness::ContextScope scope(gpu_.context);
    return scope.ok() && KR_CU(cu().cuCtxSynchronize());
  }

  // What a case writes before pass `pass` (0-based); returns the words
  // changed (the whole footprint for "all written").
  uint64_t write_before(const std::string& kind, int pass) {
    if (kind == "all written") return fill(1000) ? bytes() / 4 : 0;
    const unsigned long long first = kind == "1% written" ? 7 : 7 + pass;
    return mutate(first, unsigned(pass) + 1);
  }

  void library_case(std::vector<KernelRow>* rows, const std::string& kind, const char* tier,
                    const StrategyChoice& strategy) {
    KernelRow row = start_row(kind, tier, std::string("library ") + strategy.name);
    std::string why;
    if (!set_policy(tier, &why)) {
      row.note = why;
      finish(rows, row);
      return;
    }
    if (strategy.code >= 0 && !set_strategy_(uint32_t(strategy.code))) {
      row.note = "kr_set_strategy refused it";
      finish(rows, row);
      return;
    }
    harness::trim_retained();
    if (!fill(1)) {
      row.note = "fill failed";
      finish(rows, row);
      return;
    }
    std::vector<double> snaps, restores;
    std::string error;
    bool correct = true;
    std::string detail;
    kr_snapshot_t* snapshot = nullptr;
    if (kind == "consecutive snaps") {
      // The first snapshot is a full one; the passes' are incremental.
      kr_snapshot_t* first = kr_snap(gpu_.agent);
      if (!kr_snapshot_ok(first)) error = "the first snapshot declined";
      kr_snapshot_free(first);
      uint64_t changed = 0;
      for (int pass = 0; error.empty() && pass < kKernelReps; ++pass) {
        changed += write_before(kind, pass);
        synchronize();
        const double start = harness::now_seconds();
        kr_snapshot_t* s = kr_snap(gpu_.agent);
        synchronize();
        snaps.push_back(harness::now_seconds() - start);
        if (!kr_snapshot_ok(s)) {
          error = "a snapshot declined";
          kr_snapshot_free(s);
          break;
        }
        if (pass + 1 < kKernelReps) {
          kr_snapshot_free(s);
        } else {
          snapshot = s;
        }
      }
      // The last snapshot must hold every pass's writes: reset everything,
      // restore it, and exactly the words mutated so far differ from the
      // pattern (the passes' block sets are disjoint).
      if (snapshot != nullptr) {
        fill(1);
        kr_restore_report_t report{};
        kr_restore_with_report(snapshot, &report);
        const uint64_t found = mismatches(1);
        correct = found == changed;
        if (!correct) {
          detail = std::to_string(found) + " words differ, " + std::to_string(changed) +
                   " expected";
        }
        kr_snapshot_free(snapshot);
      }
    } else {
      const double start = harness::now_seconds();
      snapshot = kr_snap(gpu_.agent);
      synchronize();
      snaps.push_back(harness::now_seconds() - start);
      if (!kr_snapshot_ok(snapshot)) error = "the snapshot declined";
      for (int pass = 0; error.empty() && pass < kKernelReps; ++pass) {
        write_before(kind, pass);
        synchronize();
        kr_restore_report_t report{};
        const double t0 = harness::now_seconds();
        kr_restore_with_report(snapshot, &report);
        synchronize();
        restores.push_back(harness::now_seconds() - t0);
        if (report.failed != 0 || report.restored != regions_.size()) {
          error = "restore: " + std::to_string(report.restored) + " restored, " +
                  std::to_string(report.failed) + " failed";
        }
        const uint64_t found = mismatches(1);
        if (found != 0 && correct) {
          correct = false;
          detail = std::to_string(found) + " words differ after pass " + std::to_string(pass + 1);
        }
      }
      kr_snapshot_free(snapshot);
    }
    row.snap = stats_of(snaps, error);
    if (kind != "consecutive snaps") row.restore = stats_of(restores, error);
    row.correct = !error.empty() ? "—" : correct ? "yes" : "NO (" + detail + ")";
    if (!error.empty()) row.note = error;
    // The arenas go back, and the runtime's quarantine of freed blocks with
    // them, so the next row's device budget is what this one's was.
    harness::trim_retained();
    hsa_rt_release_quarantine();
    finish(rows, row);
  }

  // The same bytes copied into a copy and back by the CPU (memcpy from a
  // touched malloc'd copy) or by the copy engine (cuMemcpy from a pinned
  // copy, cuMemHostAlloc): what a host-memory snapshot and restore compare
  // with. Correct when every word reads back the filled pattern.
  void ceiling_case(std::vector<KernelRow>* rows, bool engine) {
    KernelRow row = start_row("all written", "—", engine ? "copy engine (cuMemcpy)" : "CPU memcpy");
    if (!fill(1)) {
      row.note = "fill failed";
      finish(rows, row);
      return;
    }
    harness::ContextScope scope(gpu_.context);
    std::vector<void*> copies;
    std::string error;
    for (size_t i = 0; i < regions_.size() && error.empty(); ++i) {
      void* copy = nullptr;
      if (engine) {
        if (!KR_CU(cu().cuMemHostAlloc(&copy, region_bytes_, 0))) copy = nullptr;
      } else {
        copy = std::malloc(region_bytes_);
        if (copy != nullptr) std::memset(copy, 0, region_bytes_);
      }
      if (copy == nullptr) error = "no memory for the copy";
      copies.push_back(copy);
    }
    const auto copy_all = [&](bool back) {
      for (size_t i = 0; i < regions_.size(); ++i) {
        void* dst = back ? regions_[i] : copies[i];
        const void* src = back ? copies[i] : regions_[i];
        if (engine) {
          KR_CU(cu().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(dst),
                                   reinterpret_cast<CUdeviceptr>(src), region_bytes_, nullptr));
        } else {
          std::memcpy(dst, src, region_bytes_);
        }
      }
      if (engine) KR_CU(cu().cuCtxSynchronize());
    };
    std::vector<double> snaps, restores;
    bool correct = true;
    if (error.empty()) {
      const double start = harness::now_seconds();
      copy_all(false);
      snaps.push_back(harness::now_seconds() - start);
      for (int pass = 0; pass < kKernelReps; ++pass) {
        write_before("all written", pass);
        synchronize();
        const double t0 = harness::now_seconds();
        copy_all(true);
        restores.push_back(harness::now_seconds() - t0);
        correct = correct && mismatches(1) == 0;
      }
    }
    for (void* copy : copies) {
      if (copy == nullptr) continue;
      if (engine) {
        KR_CU(cu().cuMemFreeHost(copy));
      } else {
        std::free(copy);
      }
    }
    row.snap = stats_of(snaps, error);
    row.restore = stats_of(restores, error);
    row.correct = error.empty() ? (correct ? "yes" : "NO") : "—";
    row.note = error;
    finish(rows, row);
  }

  void cupti_case(std::vector<KernelRow>* rows, const std::string& kind, bool transfer) {
    KernelRow row = start_row(kind, "CUPTI", transfer ? "CUPTI OPT_TRANSFER" : "CUPTI OPT_NONE");
    if (!cupti_.ok()) {
      row.note = "skipped: CUPTI's checkpoint library was not found";
      finish(rows, row);
      return;
    }
    // CUPTI saves every allocation of the context: nothing of the library's
    // and none of the runtime's quarantined blocks may be there.
    harness::trim_retained();
    hsa_rt_release_quarantine();
    if (!fill(1)) {
      row.note = "fill failed";
      finish(rows, row);
      return;
    }
    CuptiCheckpoint cp;
    std::memset(&cp, 0, sizeof(cp));
    cp.structSize = kCuptiCheckpointStructSize;
    cp.ctx = gpu_.context;
    cp.optimizations = transfer ? kCuptiOptTransfer : 0;
    std::vector<double> snaps, restores;
    std::string error;
    bool correct = true;
    std::string detail;
    {
      harness::ContextScope scope(gpu_.context);
      const double start = harness::now_seconds();
      const int saved = cupti_.save(&cp);
      KR_CU(cu().cuCtxSynchronize());
      snaps.push_back(harness::now_seconds() - start);
      if (saved != 0) error = "cuptiCheckpointSave: CUptiResult " + std::to_string(saved);
    }
    for (int pass = 0; error.empty() && pass < kKernelReps; ++pass) {
      write_before(kind, pass);
      harness::ContextScope scope(gpu_.context);
      KR_CU(cu().cuCtxSynchronize());
      const double t0 = harness::now_seconds();
      const int restored = cupti_.restore(&cp);
      KR_CU(cu().cuCtxSynchronize());
      restores.push_back(harness::now_seconds() - t0);
      if (restored != 0) {
        error = "cuptiCheckpointRestore: CUptiResult " + std::to_string(restored);
        break;
      }
      const uint64_t found = mismatches(1);
      if (found != 0 && correct) {
        correct = false;
        detail = std::to_string(found) + " words differ after pass " + std::to_string(pass + 1);
      }
    }
    {
      harness::ContextScope scope(gpu_.context);
      cupti_.free(&cp);
    }
    row.snap = stats_of(snaps, error.rfind("cuptiCheckpointSave", 0) == 0 ? error : "");
    row.restore = stats_of(restores, error);
    row.correct = !restores.empty() ? (correct ? "yes" : "NO (" + detail + ")") : "—";
    if (!error.empty()) row.note = error;
    finish(rows, row);
  }

  bool set_policy(const char* tier, std::string* why) {
    for (const harness::StoragePolicy& policy : harness::storage_policies()) {
      if (policy.name == tier) {
        if (harness::set_storage_policy(policy.value)) return true;
        *why = std::string("kr_set_storage_policy refused ") + tier;
        return false;
      }
    }
    *why = "this library has no storage policies";
    return false;
  }

  KernelRow start_row(const std::string& kind, const std::string& tier, const std::string& method) {
    KernelRow row;
    row.kind = kind;
    row.footprint = label_;
    row.bytes = bytes();
    row.regions = regions_.size();
    row.region_bytes = region_bytes_;
    row.tier = tier;
    row.method = method;
    return row;
  }

  void finish(std::vector<KernelRow>* rows, const KernelRow& row) {
    const auto ms = [](const Stats& s) { return s.ok ? s.median * 1e3 : -1.0; };
    std::printf("   %-18s %-14s %-7s %-20s snap %9.3f ms  restore %9.3f ms  correct: %s%s%s\n",
                row.kind.c_str(), row.footprint.c_str(), row.tier.c_str(), row.method.c_str(),
                ms(row.snap), ms(row.restore), row.correct.empty() ? "—" : row.correct.c_str(),
                row.note.empty() ? "" : "  ", row.note.c_str());
    std::fflush(stdout);
    if (csv_ != nullptr) {
      for (const auto& [operation, s] : {std::pair<const char*, const Stats*>{"snap", &row.snap},
                                         {"restore", &row.restore}}) {
        std::fprintf(csv_,
                     "\"%s\",%" PRIu64 ",%zu,%" PRIu64 ",\"%s/%s\",\"%s %s\",%s,%d,%.9f,%.9f,%.9f,%.4f\n",
                     row.footprint.c_str(), row.bytes, row.regions, row.region_bytes,
                     row.method.c_str(), row.tier.c_str(), row.kind.c_str(), operation,
                     s->ok ? (row.correct == "yes" ? "ok" : "incorrect") : "failed", s->reps,
                     s->median, s->min, s->max, s->ok ? gb_per_s(row.bytes, s->median) : 0.0);
      }
      std::fflush(csv_);
    }
    rows->push_back(row);
  }

  harness::Gpu gpu_;
  AppKernels app_;
  Cupti cupti_;
  std::FILE* csv_;
  bool (*set_strategy_)(uint32_t) = nullptr;
  std::string env_strategy_;
  std::vector<StrategyChoice> strategies_;
  std::string label_;
  uint64_t region_bytes_ = 0;
  std::vector<void*> regions_;
  Memory memory_ = Memory::Device;
  CUdeviceptr counter_ = 0;
};

std::string kernel_table(const std::vector<KernelRow>& rows) {
  std::ostringstream out;
  out << "| case | footprint | regions | tier | method | snap ms | restore ms | restore µs/region "
         "| restore GB/s | correct | note |\n";
  out << "|---|---|---:|---|---|---:|---:|---:|---:|---|---|\n";
  for (const KernelRow& row : rows) {
    const auto ms = [](const Stats& s) {
      if (!s.ok) return std::string("—");
      char text[32];
      std::snprintf(text, sizeof(text), "%.3f", s.median * 1e3);
      return std::string(text);
    };
    out << "| " << row.kind << " | " << row.footprint << " | " << row.regions << " | " << row.tier
        << " | " << row.method << " | " << ms(row.snap) << " | " << ms(row.restore) << " | "
        << per_region(row.restore, row.regions) << " | " << cell(row.restore, row.bytes) << " | "
        << (row.correct.empty() ? "—" : row.correct) << " | " << row.note << " |\n";
  }
  out << "\nMedian of " << kKernelReps
      << " passes (a snapshot column of the restore cases: the one snapshot taken). \"all "
         "written\": every byte rewritten before each restore; \"1% written\": every 100th 4 KiB "
         "block, the same set each pass; \"1%, moving set\": a different set each pass (what "
         "CUPTI_CHECKPOINT_OPT_TRANSFER caches); \"consecutive snaps\": 1% mutated then a "
         "snapshot, the previous one freed (arena retained), the snap column timing the "
         "incremental snapshots. \"correct\": every word of every region compared on the device "
         "after every restore (for consecutive snaps, once, after restoring the last).\n";
  return out.str();
}

void log_to_stdout(kr_log_level_t level, const char* message, void*) {
  std::printf("   [kernel-replay %s] %s\n", level == KR_LOG_ERROR ? "ERROR" : "WARN", message);
}

void usage(const char* program) {
  std::printf(
      "usage: %s --csv PATH [--table PATH] [--gpu N] [--quick] [--config NAME] "
      "[--toolkit TEXT] [--cubin PATH] [--part policies|kernels|host|all]\n",
      program);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const int no_runtime = harness::start_runtime("kernel_replay_gpu_bench");
  if (no_runtime >= 0) return no_runtime;

  const char* csv_path = nullptr;
  const char* table_path = nullptr;
  const char* only_config = nullptr;
  const char* cubin = nullptr;
  std::string part = "all";
  std::string toolkit = "not given (--toolkit)";
  uint32_t gpu_index = 0;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (arg == "--table" && i + 1 < argc) {
      table_path = argv[++i];
    } else if (arg == "--gpu" && i + 1 < argc) {
      gpu_index = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (arg == "--config" && i + 1 < argc) {
      only_config = argv[++i];
    } else if (arg == "--toolkit" && i + 1 < argc) {
      toolkit = argv[++i];
    } else if (arg == "--cubin" && i + 1 < argc) {
      cubin = argv[++i];
    } else if (arg == "--part" && i + 1 < argc) {
      part = argv[++i];
    } else if (arg == "--quick") {
      quick = true;
    } else {
      usage(argv[0]);
      hsa_rt_shutdown();
      return 2;
    }
  }
  const std::vector<harness::Gpu> gpus = harness::gpus();
  if (csv_path == nullptr || gpu_index >= gpus.size() ||
      (part != "all" && part != "policies" && part != "kernels" && part != "host")) {
    usage(argv[0]);
    hsa_rt_shutdown();
    return 2;
  }
  std::FILE* csv = std::fopen(csv_path, "w");
  if (csv == nullptr) {
    std::printf("cannot write %s: %s\n", csv_path, std::strerror(errno));
    hsa_rt_shutdown();
    return 1;
  }
  std::fprintf(csv,
               "footprint,footprint_bytes,regions,region_bytes,config,operation,status,reps,"
               "median_s,min_s,max_s,median_GBps\n");

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const harness::Gpu& gpu = gpus[gpu_index];
  std::ostringstream header;
  header << "date: " << harness::utc_date() << "\n"
         << "command: " << command << "\n"
         << "device: " << gpu.name << " (CUDA device " << gpu.ordinal << ", "
         << bytes_text(harness::free_device_memory(gpu.agent)) << " free), " << gpus.size()
         << " GPU(s) in the machine\n"
         << "driver: kernel module " << harness::kernel_module_version()
         << ", CUDA driver API " << harness::cuda_driver_api_version() << "\n"
         << "toolkit: " << toolkit << "\n"
         << "host: " << host << ", " << harness::cpu_model() << ", "
         << bytes_text(harness::available_host_memory()) << " available\n"
         << "library: kernel-replay " << kr_version() << " (libkernel_replay.so, unchanged)\n";
  std::printf("%s", header.str().c_str());

  if (!harness::install_kernel_replay(log_to_stdout, nullptr)) {
    std::fclose(csv);
    hsa_rt_shutdown();
    return 1;
  }
  kr_set_log_level(KR_LOG_WARN);

  std::vector<Footprint> footprints;
  if (quick) {
    footprints = {{"64 MiB", 16 * MiB, 4},
                  {"256 MiB", 64 * MiB, 4},
                  {"256 MiB VM heap", 32 * MiB, 8, true},
                  {"1,000 x 4 KiB", 4 * KiB, 1000}};
  } else {
    // Each VM heap right after the plain allocations of the same size.
    footprints = {{"64 MiB", 16 * MiB, 4},
                  {"256 MiB", 64 * MiB, 4},
                  {"256 MiB VM heap", 32 * MiB, 8, true},
                  {"1 GiB", 256 * MiB, 4},
                  {"1 GiB VM heap", 32 * MiB, 32, true},
                  {"4 GiB", 1 * GiB, 4},
                  {"8 GiB", 2 * GiB, 4},
                  {"10,000 x 4 KiB", 4 * KiB, 10000}};
  }
  std::vector<const Config*> configs;
  for (const Config& config : kConfigs) {
    if (only_config == nullptr || std::strcmp(only_config, config.name) == 0) {
      configs.push_back(&config);
    }
  }
  if (configs.empty()) {
    std::printf("no configuration named %s\n", only_config);
    std::fclose(csv);
    hsa_rt_shutdown();
    return 2;
  }
  std::printf("configurations:\n");
  for (const Config* config : configs) std::printf("  %s: %s\n", config->name, config->description);

  const double started = harness::now_seconds();
  std::vector<Row> rows;
  if (part != "kernels" && part != "host") {
    Bench bench(gpu, csv);
    for (const Footprint& footprint : footprints) bench.run(footprint, configs, &rows);
  }
  std::vector<KernelRow> kernel_rows;
  std::string kernels_skipped;
  if (part != "policies") {
    AppKernels app;
    if (cubin == nullptr) {
      kernels_skipped = "the kernels table needs --cubin (gpu/kernels.cu's cubin)";
    } else if (!KR_HSA(hsa_rt_executable_load_file(gpu.agent, cubin, &app.executable)) ||
               !KR_HSA(harness::register_kernel(app.executable, "fill_pattern",
                                                           &app.fill)) ||
               !KR_HSA(harness::register_kernel(app.executable, "mutate_blocks",
                                                           &app.mutate_blocks)) ||
               !KR_HSA(harness::register_kernel(app.executable, "count_mismatches",
                                                           &app.count_mismatches))) {
      kernels_skipped = std::string("cannot load the application's kernels from ") + cubin;
    } else {
      const Cupti cupti = load_cupti();
      header << "CUPTI checkpoint: "
             << (cupti.ok() ? cupti.library : std::string("not found (rows skipped)")) << "\n";
      KernelBench kernel_bench(gpu, app, cupti, csv);
      kernel_bench.run(quick, part == "host", &kernel_rows);
    }
    if (app.executable.handle != 0) hsa_rt_executable_destroy(app.executable);
    if (!kernels_skipped.empty()) std::printf("\n%s\n", kernels_skipped.c_str());
  }
  std::fclose(csv);

  std::printf("\n");
  bool failed = false;
  for (const Row& row : rows) {
    failed |= row.unavailable.empty() && (!row.snap.ok || !row.restore.ok);
  }
  // The library must be right in every row; CUPTI's rows report, not fail.
  for (const KernelRow& row : kernel_rows) {
    failed |= row.method.rfind("library", 0) == 0 && row.correct.rfind("NO", 0) == 0;
  }
  const uint64_t cuda_errors = hsa_rt_count(HSA_RT_COUNT_BACKEND_ERRORS);
  const uint64_t violations = hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS);
  failed |= cuda_errors != 0 || violations != 0;
  for (const Row& row : rows) {
    if (row.footprint.regions >= 1000 && row.restore.ok) {
      std::printf("per-region cost at %s, %s: restore %.2f us/region, snap %.2f us/region\n",
                  row.footprint.label.c_str(), row.config.c_str(),
                  row.restore.median / double(row.footprint.regions) * 1e6,
                  row.snap.median / double(row.footprint.regions) * 1e6);
    }
  }
  std::printf("\nbench time %.0f s; runtime CUDA errors %" PRIu64 ", refused copies %" PRIu64
              "\n",
              harness::now_seconds() - started, cuda_errors, violations);

  kr_finalize();
  hsa_rt_shutdown();

  std::string table =
      part != "kernels" && part != "host" ? markdown_table(rows) : std::string();
  if (part != "policies") {
    table += "\n" + (kernels_skipped.empty() ? kernel_table(kernel_rows)
                                               : "Kernels table: " + kernels_skipped + ".\n");
  }
  if (table_path != nullptr) {
    std::ofstream out(table_path);
    out << header.str() << "\n" << table;
    if (!out) std::printf("cannot write %s\n", table_path);
  }
  std::printf("\n%s", table.c_str());
  return failed ? 1 : 0;
}
