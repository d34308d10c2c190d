// teardown_test.cpp: an application whose static objects free device memory
// in their destructors, at exit, through the wrapped HSA entry points, and
// a snapshot that is restored and freed even later. This is the shape that
// crashed the C++ original at process teardown.
//
//   teardown_test finalize     the tool calls kr_finalize() at exit before
//                              the static destructors run (an atexit handler
//                              registered after the statics were built runs
//                              before their destructors)
//   teardown_test no-finalize  the tool never finalizes
//
// Exits 0 when every free succeeded and the library behaved as documented in
// both cases; on any failure the last exit handler ends the process with
// status 1.
//
// ctest runs both modes under every storage policy (see storage_policy.h).
// The kept snapshot's arena (device or pinned: a runtime allocation) goes
// back to the runtime when the snapshot is freed after kr_finalize; without
// it, the freed snapshot's arena is retained until kr_trim_retained.

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check.h"
#include "hsa_rt.h"
#include "kernel_replay/memory_snapshot.hpp"
#include "kernel_replay/memory_tracker.hpp"
#include "storage_policy.h"

namespace {

// Plain globals: still valid while the static destructors run.
bool finalize_at_exit = false;
hsa_agent_t gpu{0};
uint64_t signals_at_start = 0;


// Device memory an application object owns for the whole run.
class StaticDeviceBuffer {
 public:
  StaticDeviceBuffer(std::size_t size, uint8_t byte) {
    const hsa_status_t status = hsa_amd_memory_pool_allocate(
        hsa_rt_pool(gpu, HSA_RT_POOL_DEVICE_COARSE), size, 0, &ptr_);
    CHECK(status == HSA_STATUS_SUCCESS);
    if (ptr_ != nullptr) std::memset(ptr_, byte, size);
  }
  ~StaticDeviceBuffer() {
    const std::size_t tracked_before = kr_tracked_count(gpu);
    CHECK(kr_is_finalized() == finalize_at_exit);
    CHECK(hsa_amd_memory_pool_free(ptr_) == HSA_STATUS_SUCCESS);
    if (finalize_at_exit) {
      CHECK(tracked_before == 0);  // finalize emptied the inventory
    } else {
      CHECK(tracked_before >= 1);
      CHECK(kr_tracked_count(gpu) == tracked_before - 1);  // the free was seen
    }
  }
  StaticDeviceBuffer(const StaticDeviceBuffer&) = delete;
  StaticDeviceBuffer& operator=(const StaticDeviceBuffer&) = delete;

 private:
  void* ptr_ = nullptr;
};

// A snapshot a tool keeps in a static, destroyed after the buffers it
// captured were freed: its restore must write nothing.
struct StaticSnapshot {
  rocprofiler::kernel_replay::memory_snapshot::device_snapshot_t snapshot;
  ~StaticSnapshot() {
    const uint64_t copies_before = kr_test_copies();
    const kr_restore_report_t report =
        rocprofiler::kernel_replay::memory_snapshot::restore_with_report(snapshot);
    CHECK(report.restored == 0);
    CHECK(report.skipped_not_live == snapshot.size());  // freed, or everything after finalize
    CHECK(report.failed == 0);
    CHECK(kr_test_copies() == copies_before);
  }
};

// The tool's finalizer.
void finalize_the_tool() {
  rocprofiler::kernel_replay::memory_tracker::finalize();
  CHECK(kr_is_finalized());
  CHECK(!rocprofiler::kernel_replay::memory_tracker::set_tracking_enabled(true));
  const auto after = rocprofiler::kernel_replay::memory_snapshot::snap(gpu);
  CHECK(!after.ok && after.decline_reason() == KR_DECLINE_FINALIZED);
}

// Registered before any static below exists, so it runs after all their
// destructors: the verdict.
void verdict_at_exit() {
  const char* mode = finalize_at_exit ? "finalize" : "no-finalize";
  const char* policy = kr_test_policy_name(kr_storage_policy());
  if (finalize_at_exit) {
    // kr_finalize released what was retained and its copy signals; the kept
    // snapshot's storage went back when it was freed, after finalize.
    CHECK(kr_test_held() == 0);
    CHECK(kr_trim_retained() == 0);
    CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS) == signals_at_start);
  } else {
    // The freed snapshot's arena is retained for reuse until trimmed.
    CHECK(kr_test_leased() == 0);
    CHECK(kr_test_trim_leaves_nothing_held());
  }
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(hsa_rt_quarantine_intact());
  CHECK(kr_tracked_count(gpu) == 0);
  if (kr_check_failed() != 0) {
    std::fprintf(stderr, "teardown_test (%s, %s): %d check(s) failed\n", mode, policy, kr_check_failed());
    std::_Exit(1);
  }
  std::printf("teardown_test (%s, %s): all checks passed\n", mode, policy);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || (std::strcmp(argv[1], "finalize") != 0 &&
                    std::strcmp(argv[1], "no-finalize") != 0)) {
    std::fprintf(stderr, "usage: %s finalize|no-finalize\n", argv[0]);
    return 2;
  }
  finalize_at_exit = std::strcmp(argv[1], "finalize") == 0;

  hsa_rt_reset(1);
  gpu = hsa_rt_gpu_agent(0);
  signals_at_start = hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS);
  if (kr_memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0) !=
      KR_STATUS_SUCCESS) {
    std::fprintf(stderr, "teardown_test: kr_memory_tracker_init failed\n");
    return 1;
  }
  kr_set_executable_iterator(hsa_rt_iterate_executables);
  rocprofiler::kernel_replay::memory_tracker::set_tracking_enabled(true);
  kr_set_log_level(KR_LOG_ERROR);  // skipped regions and the decline warn by design
  // ctest runs this program under each policy: make sure it is this one.
  CHECK(kr_storage_policy() == kr_test_policy_from_environment());
  std::atexit(verdict_at_exit);

  // Destroyed in reverse order: the buffers first, then the snapshot.
  static StaticSnapshot kept;
  static StaticDeviceBuffer weights(1 << 16, 0x5A);
  static StaticDeviceBuffer activations(4096, 0xA5);
  kept.snapshot = rocprofiler::kernel_replay::memory_snapshot::snap(gpu);
  CHECK(kept.snapshot.ok && kept.snapshot.size() == 2);
  CHECK(kr_tracked_count(gpu) == 2);
  CHECK(kr_test_tier_total(kept.snapshot.get()) == kept.snapshot.bytes());
  CHECK(kr_test_leased() >= kept.snapshot.bytes());
  // The two buffers, and the snapshot's arena if the runtime holds it.
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 2 + kr_test_runtime_arenas(kr_storage_policy()));

  if (finalize_at_exit) std::atexit(finalize_the_tool);  // runs before the destructors
  return 0;
}
