// replay_demo: an HSA tool and an application in one process, on the
// software HSA runtime, showing what kernel-replay captures and restores.
//
// The "tool" half does what rocprofiler-sdk does: in OnLoad it installs the
// allocation wrappers over the runtime's API tables, turns tracking on and
// hands over the loader's executable iterator; around a dispatch it replays
// the kernel several times with a restore between passes. The "application"
// half allocates device memory through the ordinary HSA entry points and
// runs a kernel that accumulates into its output and bumps a __device__
// counter, so without restores every pass would see different inputs.
//
// The runtime keeps "device memory" in host memory, so the kernel is a
// host function standing in for the GPU's loads and stores.
//
// Where a snapshot keeps its copies depends on the storage policy
// (KERNEL_REPLAY_STORAGE=auto|device|pinned|pageable|baseline, default auto:
// device memory while it fits); the demo prints where they went.

#include <hsa/hsa.h>
#include <hsa/hsa_api_trace.h>
#include <hsa/hsa_ext_amd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hsa_rt.h"
#include "kernel_replay.h"

namespace {

// ---- the tool ---------------------------------------------------------------

void log_to_stdout(kr_log_level_t level, const char* message, void*) {
  std::printf("  [kernel-replay log, level %d] %s\n", static_cast<int>(level), message);
}

// What a tool's OnLoad does with the tables ROCr passes.
bool tool_on_load(HsaApiTable* table) {
  kr_set_log_callback(log_to_stdout, nullptr);
  kr_status_t status = kr_memory_tracker_init(table->core_, table->amd_ext_, /*lib_instance=*/0);
  if (status != KR_STATUS_SUCCESS) {
    std::printf("kr_memory_tracker_init failed: %d\n", static_cast<int>(status));
    return false;
  }
  // No executable iterator to set: snapshots find the runtime loader's own
  // (hsa_ven_amd_loader_iterate_executables) through the core table.
  kr_set_tracking_enabled(true);
  return true;
}

// ---- the application ----------------------------------------------------------

constexpr size_t kElements = 1 << 16;

struct Saxpy {
  float* x;
  float* y;
  uint32_t* launches;  // a __device__ counter the kernel bumps
  float a;
};

// y = a * x + y, in place: each pass changes the next pass's input.
void saxpy_kernel(const Saxpy& k) {
  for (size_t i = 0; i < kElements; ++i) k.y[i] = k.a * k.x[i] + k.y[i];
  *k.launches += 1;
}

double checksum(const float* v) {
  double sum = 0;
  for (size_t i = 0; i < kElements; ++i) sum += v[i];
  return sum;
}

void run_pass(uint32_t pass, void* user_data) {
  const Saxpy& k = *static_cast<const Saxpy*>(user_data);
  std::printf("  pass %u: sees sum(y) = %.1f, launches = %u", pass, checksum(k.y), *k.launches);
  saxpy_kernel(k);
  std::printf("  ->  leaves sum(y) = %.1f, launches = %u\n", checksum(k.y), *k.launches);
}

template <typename T>
T* device_alloc(hsa_amd_memory_pool_t pool, size_t count) {
  void* ptr = nullptr;
  if (hsa_amd_memory_pool_allocate(pool, count * sizeof(T), 0, &ptr) != HSA_STATUS_SUCCESS) {
    std::printf("device allocation failed\n");
    std::exit(1);
  }
  return static_cast<T*>(ptr);
}

const char* policy_name(kr_storage_policy_t policy) {
  switch (policy) {
    case KR_STORAGE_AUTO:
      return "auto";
    case KR_STORAGE_DEVICE:
      return "device";
    case KR_STORAGE_PINNED:
      return "pinned";
    case KR_STORAGE_PAGEABLE:
      return "pageable";
    case KR_STORAGE_BASELINE:
      return "baseline";
  }
  return "unknown";
}

// Memory the library holds for snapshots: live snapshots' copies, and
// arenas kept for reuse by the next snapshot (kr_trim_retained frees those).
void print_memory_held(const char* when, const char* note) {
  std::printf("%s: %" PRIu64 " bytes of host memory and %" PRIu64
              " bytes of device memory held for snapshots%s\n",
              when, kr_host_bytes_in_use(), kr_device_bytes_in_use(), note);
}

}  // namespace

int main() {
  hsa_rt_reset(/*gpu_count=*/1);
  HsaApiTable table{};
  table.core_ = hsa_rt_core_table();
  table.amd_ext_ = hsa_rt_amd_ext_table();
  std::printf("kernel-replay %s on the software HSA runtime\n", kr_version());
  if (!tool_on_load(&table)) return 1;
  std::printf("storage policy: %s\n\n", policy_name(kr_storage_policy()));

  const hsa_agent_t gpu = hsa_rt_gpu_agent(0);
  const hsa_amd_memory_pool_t vram = hsa_rt_pool(gpu, HSA_RT_POOL_DEVICE_COARSE);
  const hsa_amd_memory_pool_t kernarg = hsa_rt_pool(hsa_rt_cpu_agent(), HSA_RT_POOL_SYSTEM_KERNARG);

  Saxpy k{};
  k.x = device_alloc<float>(vram, kElements);
  k.y = device_alloc<float>(vram, kElements);
  k.a = 2.0f;
  void* args = device_alloc<char>(kernarg, 256);  // kernarg: never captured
  hsa_executable_t exe = hsa_rt_executable_create();
  k.launches = static_cast<uint32_t*>(
      hsa_rt_executable_add_variable(exe, gpu, "launches", sizeof(uint32_t), false));
  hsa_rt_executable_add_kernel(exe, gpu, "saxpy");
  for (size_t i = 0; i < kElements; ++i) {
    k.x[i] = 1.0f;
    k.y[i] = static_cast<float>(i % 7);
  }

  std::printf("tracked on the GPU: %zu allocations, %" PRIu64 " bytes (kernarg excluded)\n",
              kr_tracked_count(gpu), kr_tracked_bytes(gpu));

  // The tool's replay window around one dispatch of saxpy.
  const uint32_t passes = 4;
  if (!kr_replay_gate(/*packets=*/1, /*dispatches=*/1, /*graph_launch_active=*/false)) return 1;
  std::printf("\nreplaying the dispatch %u times:\n", passes);
  kr_snapshot_t* snapshot = kr_snap(gpu);
  std::printf("  snapshot: ok = %s, %zu regions, %" PRIu64 " bytes captured\n",
              kr_snapshot_ok(snapshot) ? "true" : "false", kr_snapshot_region_count(snapshot),
              kr_snapshot_byte_count(snapshot));
  std::printf("  copies kept in device memory: %" PRIu64 " bytes, in pinned host memory: %" PRIu64
              " bytes, in pageable host memory: %" PRIu64 " bytes\n",
              kr_snapshot_tier_bytes(snapshot, KR_TIER_DEVICE),
              kr_snapshot_tier_bytes(snapshot, KR_TIER_PINNED),
              kr_snapshot_tier_bytes(snapshot, KR_TIER_PAGEABLE));
  print_memory_held("  held now", "");
  for (uint32_t pass = 0; pass < passes; ++pass) {
    if (pass > 0) {
      kr_restore_report_t report{};
      kr_restore_with_report(snapshot, &report);
      std::printf("  restore: %zu restored, %zu skipped, %zu failed\n", report.restored,
                  report.skipped_not_live, report.failed);
    }
    run_pass(pass, &k);
  }
  kr_snapshot_free(snapshot);
  const bool kept = kr_host_bytes_in_use() + kr_device_bytes_in_use() > 0;
  print_memory_held("  snapshot freed",
                    kept ? " (its arena, kept for the next snapshot)" : "");

  // A snapshot outlives an allocation: the application frees x (and
  // allocates a new one) while an older snapshot is still held. Restoring
  // that snapshot skips x: it is no longer the allocation it captured.
  std::printf("\nthe application frees x and allocates a new x while a snapshot is held:\n");
  kr_snapshot_t* held = kr_snap(gpu);
  hsa_amd_memory_pool_free(k.x);
  k.x = device_alloc<float>(vram, kElements);
  for (size_t i = 0; i < kElements; ++i) k.x[i] = 1.0f;
  kr_restore_report_t stale{};
  kr_restore_with_report(held, &stale);
  std::printf("  restore of the older snapshot: %zu restored, %zu skipped (the freed x), %zu failed\n",
              stale.restored, stale.skipped_not_live, stale.failed);
  kr_snapshot_free(held);

  // The same window through the helper: the new x is tracked and captured.
  std::printf("\nreplaying again with kr_replay (%zu allocations tracked):\n", kr_tracked_count(gpu));
  kr_replay_result_t result = kr_replay(gpu, 3, run_pass, &k);
  std::printf("  replayed = %s, passes = %u, restore failures = %zu\n",
              result.replayed ? "true" : "false", result.passes_run, result.restore_failures);

  std::printf("\nwith snapshots held to pageable host memory under a 1 KiB host budget,\n"
              "the snapshot cannot be taken whole, so it declines and the dispatch runs once:\n");
  kr_set_storage_policy(KR_STORAGE_PAGEABLE);
  kr_set_host_budget(1024);
  result = kr_replay(gpu, 3, run_pass, &k);
  kr_set_host_budget(0);
  kr_set_storage_policy(KR_STORAGE_AUTO);
  std::printf("  replayed = %s, passes = %u, decline reason = %d\n",
              result.replayed ? "true" : "false", result.passes_run,
              static_cast<int>(result.decline_reason));

  hsa_amd_memory_pool_free(k.x);
  hsa_amd_memory_pool_free(k.y);
  hsa_amd_memory_pool_free(args);
  kr_finalize();
  std::printf("\n");
  print_memory_held("after kr_finalize", "");
  std::printf("copy violations seen by the runtime: %" PRIu64 "\n", hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS));
  const bool released = kr_host_bytes_in_use() == 0 && kr_device_bytes_in_use() == 0;
  return hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0 && released ? 0 : 1;
}
