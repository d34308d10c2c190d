// concurrency_test.cpp: allocation churn through the application's HSA entry
// points on four threads, with address reuse on, while two other threads
// snapshot and restore the same agent in a loop.
//
// A snapshot may hold regions that are freed, or whose address is handed to
// a new allocation, before its restore runs. The library must then skip
// them: the test runtime counts any copy that touches freed memory or runs past an
// allocation (HSA_RT_COUNT_COPY_VIOLATIONS) and checks that freed memory still
// holds its poison (hsa_rt_quarantine_intact). Long-lived buffers must be
// restored by every restore.
//
// A failing check never stops a thread early without telling the others:
// every snapshot thread lowers the churn's run flag when it leaves, on every
// path, so the test cannot hang on a failure.
//
// ctest runs it under every storage policy (see storage_policy.h). Arenas are
// runtime allocations from the same device pool the churn uses (device tier)
// or from a host pool (pinned), so they take part in the address reuse too.

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "check.h"
#include "hsa_rt.h"
#include "kernel_replay.h"
#include "storage_policy.h"

namespace {


constexpr int kChurnThreads = 4;
constexpr int kSnapshotThreads = 2;
constexpr int kSnapshotIterations = 300;
constexpr int kStableBuffers = 4;
constexpr std::size_t kStableBytes = 8192;
constexpr std::size_t kMaxLivePerChurnThread = 6;

uint8_t stable_byte(int index) { return static_cast<uint8_t>(0x40 + index); }

bool all_bytes(const uint8_t* ptr, std::size_t size, uint8_t byte) {
  for (std::size_t i = 0; i < size; ++i) {
    if (ptr[i] != byte) return false;
  }
  return true;
}

// Lowers the churn's run flag when the last snapshot thread leaves, however
// it leaves.
class SnapshotThreadExit {
 public:
  SnapshotThreadExit(std::atomic<int>& running, std::atomic<bool>& churn) noexcept
      : running_(running), churn_(churn) {}
  ~SnapshotThreadExit() {
    if (running_.fetch_sub(1) == 1) churn_.store(false);
  }
  SnapshotThreadExit(const SnapshotThreadExit&) = delete;
  SnapshotThreadExit& operator=(const SnapshotThreadExit&) = delete;

 private:
  std::atomic<int>& running_;
  std::atomic<bool>& churn_;
};

// Allocates buffers of varying size, fills them, and frees them in a
// shuffled order, so that freed addresses come back for new allocations.
void churn(hsa_amd_memory_pool_t pool, int worker, const std::atomic<bool>& keep_going) {
  std::vector<void*> live;
  for (uint32_t round = 1; keep_going.load(); ++round) {
    const std::size_t size = 4096 * (1 + round % 3);
    void* ptr = nullptr;
    if (hsa_amd_memory_pool_allocate(pool, size, 0, &ptr) != HSA_STATUS_SUCCESS) {
      CHECKF(false, "hsa_amd_memory_pool_allocate failed");
      break;
    }
    std::memset(ptr, static_cast<int>((worker * 31 + round) & 0xFF), size);
    live.push_back(ptr);
    if (live.size() > kMaxLivePerChurnThread) {
      const std::size_t victim = round % live.size();
      CHECK(hsa_amd_memory_pool_free(live[victim]) == HSA_STATUS_SUCCESS);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    // Lets the other threads in between rounds. Natively this costs a
    // syscall; under valgrind, which runs one thread at a time and hands the
    // runtime's mutex unfairly, four churn threads that never yield starve
    // the snapshot threads for minutes.
    std::this_thread::yield();
  }
  for (void* ptr : live) CHECK(hsa_amd_memory_pool_free(ptr) == HSA_STATUS_SUCCESS);
}

// Holds threads until open() is called (blocking, not spinning).
class StartGate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    opened_.wait(lock, [this] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = true;
    }
    opened_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false;
};

struct RestoreTotals {
  std::atomic<uint64_t> restored{0};
  std::atomic<uint64_t> skipped{0};
};

void snapshot_and_restore(hsa_agent_t gpu, RestoreTotals& totals) {
  for (int i = 0; i < kSnapshotIterations; ++i) {
    kr_snapshot_t* snapshot = kr_snap(gpu);
    CHECK(snapshot != nullptr);
    CHECK(kr_snapshot_ok(snapshot));
    kr_restore_report_t report{};
    kr_restore_with_report(snapshot, &report);
    kr_snapshot_free(snapshot);
    CHECK(report.failed == 0);
    // The stable buffers are live from before the first snapshot to after
    // the last restore: every restore writes them back.
    CHECK(report.restored >= static_cast<std::size_t>(kStableBuffers));
    totals.restored.fetch_add(report.restored);
    totals.skipped.fetch_add(report.skipped_not_live);
  }
}

}  // namespace

int main() {
  hsa_rt_reset(2);
  const hsa_agent_t gpu = hsa_rt_gpu_agent(0);
  const hsa_amd_memory_pool_t pool = hsa_rt_pool(gpu, HSA_RT_POOL_DEVICE_COARSE);
  if (kr_memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0) !=
      KR_STATUS_SUCCESS) {
    std::fprintf(stderr, "concurrency_test: kr_memory_tracker_init failed\n");
    return 1;
  }
  kr_set_executable_iterator(hsa_rt_iterate_executables);
  kr_set_tracking_enabled(true);
  kr_set_log_level(KR_LOG_ERROR);  // skipped regions warn by design
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, true);
  // ctest runs this program under each policy: make sure it is this one.
  const kr_storage_policy_t policy = kr_storage_policy();
  CHECK(policy == kr_test_policy_from_environment());

  std::vector<uint8_t*> stable;
  for (int i = 0; i < kStableBuffers; ++i) {
    void* ptr = nullptr;
    if (hsa_amd_memory_pool_allocate(pool, kStableBytes, 0, &ptr) != HSA_STATUS_SUCCESS) {
      std::fprintf(stderr, "concurrency_test: stable allocation failed\n");
      return 1;
    }
    std::memset(ptr, stable_byte(i), kStableBytes);
    stable.push_back(static_cast<uint8_t*>(ptr));
  }

  kr_reset_stats();
  std::atomic<bool> churn_runs{true};
  std::atomic<int> snapshot_threads_running{kSnapshotThreads};
  RestoreTotals totals;
  // Every thread starts only once all exist: under valgrind, which runs one
  // thread at a time, churn threads already running could starve the main
  // thread long enough that the snapshot threads (whose end stops the churn)
  // were never created.
  StartGate gate;
  std::vector<std::thread> threads;
  for (int worker = 0; worker < kChurnThreads; ++worker) {
    threads.emplace_back([&, worker] {
      gate.wait();
      churn(pool, worker, churn_runs);
    });
  }
  for (int i = 0; i < kSnapshotThreads; ++i) {
    threads.emplace_back([&] {
      const SnapshotThreadExit on_exit(snapshot_threads_running, churn_runs);
      gate.wait();
      snapshot_and_restore(gpu, totals);
    });
  }
  gate.open();
  for (std::thread& thread : threads) thread.join();

  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(hsa_rt_quarantine_intact());
  CHECK(totals.restored.load() >=
        static_cast<uint64_t>(kSnapshotThreads) * kSnapshotIterations * kStableBuffers);
  for (int i = 0; i < kStableBuffers; ++i) {
    CHECK(all_bytes(stable[i], kStableBytes, stable_byte(i)));
    CHECK(hsa_amd_memory_pool_free(stable[i]) == HSA_STATUS_SUCCESS);
  }
  CHECK(kr_tracked_count(gpu) == 0);
  // Every snapshot was freed: trimming what they left for reuse leaves
  // nothing held, and nothing of the library's in the runtime.
  CHECK(kr_test_leased() == 0);
  CHECK(kr_test_trim_leaves_nothing_held());
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);
  // The counters saw every snapshot and restore of both threads.
  const kr_stats_t stats = kr_test_stats();
  constexpr uint64_t kSnapshots = static_cast<uint64_t>(kSnapshotThreads) * kSnapshotIterations;
  CHECK(stats.snapshots == kSnapshots);
  for (uint64_t declines : stats.declines) CHECK(declines == 0);
  CHECK(stats.restores == kSnapshots);
  CHECK(stats.regions_restored == totals.restored.load());
  CHECK(stats.regions_skipped == totals.skipped.load());
  CHECK(stats.regions_failed == 0);

  std::printf("concurrency_test (%s): restored %llu regions, skipped %llu freed or reused\n",
              kr_test_policy_name(policy),
              static_cast<unsigned long long>(totals.restored.load()),
              static_cast<unsigned long long>(totals.skipped.load()));
  if (kr_check_failed() != 0) {
    std::fprintf(stderr, "concurrency_test (%s): %d check(s) failed\n",
                 kr_test_policy_name(policy), kr_check_failed());
    return 1;
  }
  return 0;
}
