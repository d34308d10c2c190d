// cxx_replay_window.cpp: kernel_replay.hpp used the way rocprofiler-sdk uses
// its own memory_tracker / memory_snapshot modules.
//
//   tool_on_load()   what registration.cpp does in OnLoad: install the
//                    tracker over the core and AMD tables, turn tracking on;
//   replay_window()  what queue.cpp's WriteInterceptor does around one
//                    dispatch: snap, run once if declined, otherwise run the
//                    passes with a restore before every pass but the first.
//
// The application allocates through the ordinary HSA entry points
// (hsa_sim_app.cpp), i.e. through the wrapped tables. A "dispatch" is a host
// function that reads and accumulates into device memory, which the sim
// keeps in host memory.
//
// ctest runs it under every storage policy (see storage_policy.h): copies are
// counted in every direction, and what snapshots hold is host plus device
// memory, arenas retained for reuse included until kr_trim_retained.

#include <hsa_api_trace.h>

#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "hsa_sim.h"
#include "kernel_replay.hpp"
#include "storage_policy.h"

namespace {

int failures = 0;

void check(bool condition, const char* what, int line) {
  if (!condition) {
    std::fprintf(stderr, "cxx_replay_window.cpp:%d: check failed: %s\n", line, what);
    ++failures;
  }
}
#define CHECK(condition) check((condition), #condition, __LINE__)

// ---- the tool ------------------------------------------------------------------

// registration.cpp's part, given the HsaApiTable ROCr passes to OnLoad.
void tool_on_load(HsaApiTable* table, uint64_t lib_instance) {
  CHECK(kernel_replay::memory_tracker_init(table->core_, lib_instance) == KR_STATUS_SUCCESS);
  CHECK(kernel_replay::memory_tracker_init(table->amd_ext_, lib_instance) == KR_STATUS_SUCCESS);
  // kernel_replay.hpp has no C++ name for this; a tool calls the C function
  // with the loader extension's hsa_ven_amd_loader_iterate_executables.
  kr_set_executable_iterator(hsa_sim_iterate_executables);
  CHECK(kernel_replay::memory_tracker::set_tracking_enabled(true));
}

// What one replay window did.
struct WindowOutcome {
  bool snapshot_ok = false;
  kr_decline_reason_t decline_reason = KR_DECLINE_NONE;
  std::size_t regions = 0;
  std::vector<std::size_t> restored;  // per restore, the regions restored
  uint32_t runs = 0;
};

// queue.cpp's WriteInterceptor, reduced to the replay window.
template <typename RunDispatch>
WindowOutcome replay_window(hsa_agent_t agent, uint32_t passes, RunDispatch&& run_dispatch) {
  WindowOutcome outcome;
  auto snapshot = kernel_replay::memory_snapshot::snap(agent);
  outcome.snapshot_ok = snapshot.ok;
  outcome.decline_reason = snapshot.decline_reason();
  outcome.regions = snapshot.size();
  if (!snapshot.ok) {
    // Declined: restoring a partial capture would corrupt the application,
    // so the dispatch runs exactly once, un-replayed.
    run_dispatch();
    ++outcome.runs;
    return outcome;
  }
  for (uint32_t pass = 0; pass < passes; ++pass) {
    if (pass > 0) outcome.restored.push_back(kernel_replay::memory_snapshot::restore(snapshot));
    run_dispatch();
    ++outcome.runs;
  }
  return outcome;
}

// ---- the application ---------------------------------------------------------------

uint8_t* allocate_coarse(hsa_agent_t gpu, std::size_t size) {
  void* ptr = nullptr;
  const hsa_status_t status = hsa_amd_memory_pool_allocate(
      hsa_sim_pool(gpu, HSA_SIM_POOL_DEVICE_COARSE), size, 0, &ptr);
  CHECK(status == HSA_STATUS_SUCCESS && ptr != nullptr);
  return static_cast<uint8_t*>(ptr);
}

bool all_bytes(const uint8_t* ptr, std::size_t size, uint8_t byte) {
  for (std::size_t i = 0; i < size; ++i) {
    if (ptr[i] != byte) return false;
  }
  return true;
}

constexpr std::size_t kInputBytes = 256;

// A kernel that accumulates into its input and bumps a module-scope counter;
// it records what each run saw on entry.
struct AccumulatingDispatch {
  uint8_t* input;
  uint8_t* counter;
  std::vector<std::vector<uint8_t>> inputs_seen;
  std::vector<uint8_t> counters_seen;

  void operator()() {
    inputs_seen.emplace_back(input, input + kInputBytes);
    counters_seen.push_back(*counter);
    for (std::size_t i = 0; i < kInputBytes; ++i) input[i] = static_cast<uint8_t>(input[i] * 5 + 3);
    ++*counter;
  }
};

// `counter`: the kernel's module variable, in an executable already loaded.
AccumulatingDispatch make_dispatch(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch{allocate_coarse(gpu, kInputBytes), counter, {}, {}};
  for (std::size_t i = 0; i < kInputBytes; ++i) dispatch.input[i] = static_cast<uint8_t>(i);
  *dispatch.counter = 7;
  return dispatch;
}

// ---- the checks ---------------------------------------------------------------------

void every_pass_sees_identical_inputs(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch = make_dispatch(gpu, counter);
  const std::vector<uint8_t> original(dispatch.input, dispatch.input + kInputBytes);
  const uint64_t copies_before = kr_test_copies();

  const WindowOutcome outcome = replay_window(gpu, 4, dispatch);
  CHECK(outcome.snapshot_ok);
  CHECK(outcome.decline_reason == KR_DECLINE_NONE);
  // The input buffer and the counter variable, and the other kernel's
  // counter (loaded, so visible to the agent; its input is not allocated yet).
  CHECK(outcome.regions == 3);
  CHECK(outcome.runs == 4);
  CHECK(outcome.restored == std::vector<std::size_t>(3, outcome.regions));
  CHECK(dispatch.inputs_seen.size() == 4);
  for (const auto& seen : dispatch.inputs_seen) CHECK(seen == original);
  CHECK(dispatch.counters_seen == std::vector<uint8_t>(4, 7));
  // One copy per region for the snapshot, and per region for each restore.
  CHECK(kr_test_copies() - copies_before == outcome.regions * (1 + 3));
  // The last pass's result stays: one ordinary execution's worth.
  CHECK(*dispatch.counter == 8);
  CHECK(dispatch.input[1] == static_cast<uint8_t>(1 * 5 + 3));
  CHECK(kr_test_leased() == 0);  // the window's snapshot was destroyed
  CHECK(kr_test_trim_leaves_nothing_held());

  CHECK(hsa_amd_memory_pool_free(dispatch.input) == HSA_STATUS_SUCCESS);
}

void a_declined_snapshot_runs_the_dispatch_once(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch = make_dispatch(gpu, counter);
  const uint64_t copies_before = kr_test_copies();
  // The capture of this kernel's counter fails, whatever the tier and copy
  // engine.
  hsa_sim_fail_copies_from(dispatch.counter);

  const WindowOutcome outcome = replay_window(gpu, 4, dispatch);
  hsa_sim_fail_copies_from(nullptr);
  CHECK(!outcome.snapshot_ok);
  CHECK(outcome.decline_reason == KR_DECLINE_COPY_FAILED);
  CHECK(outcome.regions == 0);
  CHECK(outcome.runs == 1);
  CHECK(dispatch.inputs_seen.size() == 1);
  CHECK(outcome.restored.empty());
  // At most one capture copy per region (the input and both counters: a
  // blocking capture stops at the failure), and no restore.
  const uint64_t copies = kr_test_copies() - copies_before;
  CHECK(copies >= 1 && copies <= 3);
  CHECK(kr_test_held() == 0);  // the decline gave back what it took, at once

  CHECK(hsa_amd_memory_pool_free(dispatch.input) == HSA_STATUS_SUCCESS);
}

void moves_transfer_ownership_and_destructors_free(hsa_agent_t gpu) {
  namespace snapshot = kernel_replay::memory_snapshot;
  uint8_t* buffer = allocate_coarse(gpu, 4096);
  std::memset(buffer, 0x3C, 4096);
  // What one snapshot holds: its captured bytes (the baseline, exactly), or
  // an arena of at least that size. Freed, a snapshot's arena is retained for
  // the next one, so "freed" is checked on what live snapshots hold.
  {
    auto first = snapshot::snap(gpu);
    CHECK(first.ok);
    const uint64_t footprint = first.bytes();
    CHECK(footprint >= 4096);
    CHECK(kr_test_tier_total(first.get()) == footprint);
    const uint64_t one = kr_test_leased();
    CHECK(one >= footprint);
    if (kr_test_is_baseline()) CHECK(one == footprint && kr_host_bytes_in_use() == footprint);

    auto moved = std::move(first);
    CHECK(!first.ok && first.get() == nullptr && first.empty());  // NOLINT: use after move
    CHECK(snapshot::restore(first) == 0);
    CHECK(moved.ok);
    CHECK(kr_test_leased() == one);  // moved, not copied

    std::memset(buffer, 0x77, 4096);
    CHECK(snapshot::restore(moved) == moved.size());
    CHECK(all_bytes(buffer, 4096, 0x3C));

    auto other = snapshot::snap(gpu);
    CHECK(kr_test_leased() == 2 * one);
    other = std::move(moved);  // frees the snapshot `other` held
    CHECK(kr_test_leased() == one);
    CHECK(other.ok && !moved.ok);
    const kr_restore_report_t report = snapshot::restore_with_report(other);
    CHECK(report.restored == other.size() && report.skipped_not_live == 0 && report.failed == 0);

    // Growing a vector moves its snapshots (noexcept moves are used).
    std::vector<snapshot::device_snapshot_t> history;
    for (int i = 0; i < 5; ++i) history.push_back(snapshot::snap(gpu));
    for (const auto& kept : history) CHECK(kept.ok && kept.size() == other.size());
    CHECK(kr_test_leased() == 6 * one);
  }
  CHECK(kr_test_leased() == 0);  // every destructor freed its snapshot
  CHECK(kr_test_trim_leaves_nothing_held());
  CHECK(hsa_amd_memory_pool_free(buffer) == HSA_STATUS_SUCCESS);
}

}  // namespace

int main() {
  hsa_sim_reset(1);
  const hsa_agent_t gpu = hsa_sim_gpu_agent(0);

  HsaApiTable api{};
  api.core_ = hsa_sim_core_table();
  api.amd_ext_ = hsa_sim_amd_ext_table();
  tool_on_load(&api, 0);
  kr_set_log_level(KR_LOG_ERROR);  // the declined path warns by design
  // ctest runs this program under each policy: make sure it is this one.
  const kr_storage_policy_t policy = kr_storage_policy();
  CHECK(policy == kr_test_policy_from_environment());
  const uint64_t live_at_start = hsa_sim_live_allocation_count();

  // One code object per kernel, both loaded before the first dispatch: a
  // loaded (frozen) executable never gains symbols, and snapshots other than
  // the baseline's walk each loaded executable only once.
  const hsa_executable_t ok_path_exe = hsa_sim_executable_create();
  uint8_t* ok_path_counter = static_cast<uint8_t*>(
      hsa_sim_executable_add_variable(ok_path_exe, gpu, "ok_path_counter", 1, false));
  const hsa_executable_t declined_path_exe = hsa_sim_executable_create();
  uint8_t* declined_path_counter = static_cast<uint8_t*>(hsa_sim_executable_add_variable(
      declined_path_exe, gpu, "declined_path_counter", 1, false));
  CHECK(ok_path_counter != nullptr && declined_path_counter != nullptr);
  every_pass_sees_identical_inputs(gpu, ok_path_counter);
  a_declined_snapshot_runs_the_dispatch_once(gpu, declined_path_counter);
  moves_transfer_ownership_and_destructors_free(gpu);
  hsa_sim_executable_destroy(ok_path_exe);
  hsa_sim_executable_destroy(declined_path_exe);

  CHECK(kernel_replay::memory_tracker::tracked_count(gpu) == 0);
  CHECK(hsa_sim_copy_violations() == 0);
  CHECK(hsa_sim_quarantine_intact());
  CHECK(kr_test_trim_leaves_nothing_held());
  CHECK(hsa_sim_live_allocation_count() == live_at_start);
  if (failures != 0) {
    std::fprintf(stderr, "cxx_replay_window (%s): %d check(s) failed\n",
                 kr_test_policy_name(policy), failures);
    return 1;
  }
  std::printf("cxx_replay_window (%s): all checks passed\n", kr_test_policy_name(policy));
  return 0;
}
