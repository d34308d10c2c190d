// sdk_call_sites.cpp: the library at rocprofiler-sdk's own call sites of its
// kernel_replay memory_tracker / memory_snapshot modules, written here in
// their shape (nothing is copied from the SDK), through the two headers that
// replace those modules:
//
//   registration()    registration.cpp's rocprofiler_set_api_table: save the
//                     runtime's tables (first time), or write the saved
//                     originals back (every later time: the SDK's
//                     re-registration), then memory_tracker_init on the core
//                     and the AMD table, as rocprofiler::kernel_replay::...;
//   configure()       callback_tracing.cpp: tracking is enabled when a tool
//                     configures the kernel-replay tracing service;
//   write_interceptor queue.cpp's replay window, inside namespace
//                     rocprofiler::hsa, where the SDK's own
//                     rocprofiler::kernel_replay namespace (replay plans,
//                     callbacks) also lives: snap, run once if declined, else
//                     run the passes with ROCP_FATAL_IF(!restore(snapshot))
//                     between them.
//
// Scenarios: identical inputs in every pass; nothing to capture; every region
// freed during the window; a freed region's address reused by a new
// allocation; one failed restore copy (must abort the program, in a child);
// a declined snapshot (runs once); re-registration in both orders (a window
// between restoring the tables and the second init declines; after it,
// everything is tracked again). ctest runs it under every storage policy.

#include <hsa_api_trace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <kernel_replay/memory_snapshot.hpp>
#include <kernel_replay/memory_tracker.hpp>

#include "check.h"
#include "hsa_rt.h"
#include "storage_policy.h"

// ---- the SDK's logging macros, as a test shim (glog-style streams) ------------------

namespace test_log {
// Collects a streamed message; FATAL aborts when the statement ends.
class line {
 public:
  line(const char* level, const char* file, int lineno, bool fatal) : fatal_(fatal) {
    text_ = std::string(level) + " " + file + ":" + std::to_string(lineno) + ": ";
  }
  ~line() {
    std::fprintf(stderr, "%s\n", text_.c_str());
    if (fatal_) std::abort();
  }
  template <typename T>
  line& operator<<(const T& value) {
    text_ += std::to_string(value);
    return *this;
  }
  line& operator<<(const char* value) {
    text_ += value;
    return *this;
  }

 private:
  std::string text_;
  bool fatal_;
};
}  // namespace test_log

#define ROCP_FATAL_IF(condition) \
  if (!(condition)) {            \
  } else                         \
    ::test_log::line("FATAL", __FILE__, __LINE__, true)
#define ROCP_WARNING ::test_log::line("WARNING", __FILE__, __LINE__, false)

namespace {
}  // namespace

// ---- the SDK's own rocprofiler::kernel_replay namespace -------------------------------

// In the SDK this namespace also holds replay plans, callbacks and the local
// context; the replaced headers must live beside it without clashing.
namespace rocprofiler {
namespace kernel_replay {
struct replay_plan_t {
  bool replay_requested = false;
  uint32_t total_passes = 0;
};

inline replay_plan_t execute_config_phase_enter(uint32_t passes) {
  replay_plan_t plan;
  plan.replay_requested = passes > 1;
  plan.total_passes = passes;
  return plan;
}

inline bool should_continue_replay(const replay_plan_t& plan, uint64_t pass) {
  return pass + 1 < plan.total_passes;
}
}  // namespace kernel_replay
}  // namespace rocprofiler

// ---- registration.cpp ----------------------------------------------------------------------

namespace rocprofiler {
namespace registration {
namespace {
// hsa::copy_table: the runtime's tables as they were before any tool.
CoreApiTable saved_core;
AmdExtTable saved_amd_ext;
bool saved = false;
}  // namespace

// rocprofiler_set_api_table("hsa", ...), reduced to the kernel-replay part.
void set_api_table(HsaApiTable* hsa_api_table, uint64_t lib_instance) {
  if (saved) {
    // hsa::restore_table: the originals back, every wrapper out.
    std::memcpy(hsa_api_table->core_, &saved_core, sizeof(saved_core));
    std::memcpy(hsa_api_table->amd_ext_, &saved_amd_ext, sizeof(saved_amd_ext));
  } else {
    std::memcpy(&saved_core, hsa_api_table->core_, sizeof(saved_core));
    std::memcpy(&saved_amd_ext, hsa_api_table->amd_ext_, sizeof(saved_amd_ext));
    saved = true;
  }
  rocprofiler::kernel_replay::memory_tracker_init(hsa_api_table->core_, lib_instance);
  rocprofiler::kernel_replay::memory_tracker_init(hsa_api_table->amd_ext_, lib_instance);
}

// Only the restore half (to test a window between it and the second init).
void restore_tables(HsaApiTable* hsa_api_table) {
  std::memcpy(hsa_api_table->core_, &saved_core, sizeof(saved_core));
  std::memcpy(hsa_api_table->amd_ext_, &saved_amd_ext, sizeof(saved_amd_ext));
}
}  // namespace registration
}  // namespace rocprofiler

// ---- callback_tracing.cpp ------------------------------------------------------------------

using namespace rocprofiler;  // as SDK sources may: must stay unambiguous

namespace rocprofiler {
namespace callback_tracing {
constexpr int kKernelReplayKind = 42;

int configure_callback_tracing_service(int kind) {
  if (kind == kKernelReplayKind) {
    rocprofiler::kernel_replay::memory_tracker::set_tracking_enabled(true);
  }
  return 0;
}
}  // namespace callback_tracing
}  // namespace rocprofiler

// ---- queue.cpp --------------------------------------------------------------------------------

// What one replay window did.
struct WindowOutcome {
  bool snapshot_ok = false;
  std::size_t regions = 0;
  uint32_t runs = 0;
};

namespace rocprofiler {
namespace hsa {
namespace {
// WriteInterceptor's replay window for one admitted dispatch.
WindowOutcome write_interceptor(hsa_agent_t replay_agent, uint32_t passes,
                                const std::function<void()>& submit_and_drain) {
  WindowOutcome outcome;
  const auto replay_plan = kernel_replay::execute_config_phase_enter(passes);
  if (!replay_plan.replay_requested) {
    submit_and_drain();
    ++outcome.runs;
    return outcome;
  }
  const auto snapshot = kernel_replay::memory_snapshot::snap(replay_agent);
  outcome.snapshot_ok = snapshot.ok;
  outcome.regions = snapshot.size();
  if (!snapshot.ok) {
    ROCP_WARNING << "kernel replay: snapshot capture failed; running this dispatch once";
    submit_and_drain();
    ++outcome.runs;
    return outcome;
  }
  for (uint64_t pass = 0;; ++pass) {
    submit_and_drain();
    ++outcome.runs;
    if (!kernel_replay::should_continue_replay(replay_plan, pass)) break;
    ROCP_FATAL_IF(!kernel_replay::memory_snapshot::restore(snapshot))
        << "kernel replay: restore failed between passes " << pass << " and " << pass + 1;
  }
  return outcome;
}
}  // namespace
}  // namespace hsa
}  // namespace rocprofiler

// ---- the application --------------------------------------------------------------------

namespace {

uint8_t* allocate_coarse(hsa_agent_t gpu, std::size_t size) {
  void* ptr = nullptr;
  const hsa_status_t status = hsa_amd_memory_pool_allocate(
      hsa_rt_pool(gpu, HSA_RT_POOL_DEVICE_COARSE), size, 0, &ptr);
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
  uint8_t* input = nullptr;
  uint8_t* counter = nullptr;
  std::vector<std::vector<uint8_t>> inputs_seen;
  std::vector<uint8_t> counters_seen;

  void operator()() {
    inputs_seen.emplace_back(input, input + kInputBytes);
    counters_seen.push_back(*counter);
    for (std::size_t i = 0; i < kInputBytes; ++i) input[i] = static_cast<uint8_t>(input[i] * 5 + 3);
    ++*counter;
  }
};

AccumulatingDispatch make_dispatch(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch;
  dispatch.input = allocate_coarse(gpu, kInputBytes);
  dispatch.counter = counter;
  for (std::size_t i = 0; i < kInputBytes; ++i) dispatch.input[i] = static_cast<uint8_t>(i);
  *dispatch.counter = 7;
  return dispatch;
}

WindowOutcome window(hsa_agent_t gpu, uint32_t passes, AccumulatingDispatch& dispatch) {
  return rocprofiler::hsa::write_interceptor(gpu, passes, [&] { dispatch(); });
}

// ---- the scenarios ------------------------------------------------------------------------

void every_pass_sees_identical_inputs(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch = make_dispatch(gpu, counter);
  const std::vector<uint8_t> original(dispatch.input, dispatch.input + kInputBytes);
  const uint64_t copies_before = kr_test_copies();
  const WindowOutcome outcome = window(gpu, 4, dispatch);
  CHECK(outcome.snapshot_ok);
  CHECK(outcome.regions == 2);  // the input and the counter variable
  CHECK(outcome.runs == 4);
  for (const auto& seen : dispatch.inputs_seen) CHECK(seen == original);
  CHECK(dispatch.counters_seen == std::vector<uint8_t>(4, 7));
  // One copy per region for the snapshot, and per region for each restore.
  CHECK(kr_test_copies() - copies_before == outcome.regions * (1 + 3));
  CHECK(*dispatch.counter == 8);  // the last pass's result stays
  CHECK(hsa_amd_memory_pool_free(dispatch.input) == HSA_STATUS_SUCCESS);
}

// An agent with nothing tracked and no variables: an empty snapshot is ok
// and restores successfully, so the passes run.
void nothing_to_capture_still_replays(hsa_agent_t other_gpu) {
  uint32_t runs = 0;
  const WindowOutcome outcome =
      rocprofiler::hsa::write_interceptor(other_gpu, 3, [&] { ++runs; });
  CHECK(outcome.snapshot_ok && outcome.regions == 0);
  CHECK(outcome.runs == 3 && runs == 3);
}

// The application frees everything it allocated during the first pass: the
// restores skip the freed regions (and succeed) and never touch them.
void every_region_freed_during_the_window(hsa_agent_t gpu) {
  uint8_t* buffers[2] = {allocate_coarse(gpu, 4096), allocate_coarse(gpu, 8192)};
  std::memset(buffers[0], 1, 4096);
  std::memset(buffers[1], 2, 8192);
  uint32_t runs = 0;
  const WindowOutcome outcome = rocprofiler::hsa::write_interceptor(gpu, 3, [&] {
    if (runs++ == 0) {
      for (uint8_t* buffer : buffers) CHECK(hsa_amd_memory_pool_free(buffer) == HSA_STATUS_SUCCESS);
    }
  });
  CHECK(outcome.snapshot_ok && outcome.runs == 3);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(hsa_rt_quarantine_intact());
}

// A buffer freed in the first pass and its address handed to a new
// allocation: the restore must not write the old bytes into the new owner.
void a_reused_address_is_left_to_its_new_owner(hsa_agent_t gpu) {
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, true);
  uint8_t* old_buffer = allocate_coarse(gpu, 4096);
  std::memset(old_buffer, 0x11, 4096);
  uint8_t* new_buffer = nullptr;
  uint32_t runs = 0;
  const WindowOutcome outcome = rocprofiler::hsa::write_interceptor(gpu, 3, [&] {
    if (runs++ == 0) {
      CHECK(hsa_amd_memory_pool_free(old_buffer) == HSA_STATUS_SUCCESS);
      new_buffer = allocate_coarse(gpu, 4096);
      CHECK(new_buffer == old_buffer);  // the runtime handed the address out again
    }
    std::memset(new_buffer, 0x22, 4096);
  });
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, false);
  CHECK(outcome.snapshot_ok && outcome.runs == 3);
  CHECK(all_bytes(new_buffer, 4096, 0x22));
  CHECK(hsa_amd_memory_pool_free(new_buffer) == HSA_STATUS_SUCCESS);
}

// One restore copy fails: ROCP_FATAL_IF(!restore(...)) must abort rather
// than run the next pass on half-restored memory. The window runs in a fresh
// process (this program, run again with kFailedRestoreCopy), which must die
// of SIGABRT.
constexpr const char* kFailedRestoreCopy = "--failed-restore-copy";

void window_with_a_failed_restore_copy(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch = make_dispatch(gpu, counter);
  uint32_t runs = 0;
  rocprofiler::hsa::write_interceptor(gpu, 3, [&] {
    dispatch();
    // After the first pass, copies into the input fail.
    if (runs++ == 0) hsa_rt_inject(HSA_RT_FAULT_COPIES_INTO, reinterpret_cast<uintptr_t>(dispatch.input), 0);
  });
}

void a_failed_restore_copy_aborts() {
  std::fflush(stdout);
  std::fflush(stderr);
  // This program's path (readlink, not /proc/self/exe itself, which a
  // valgrind run could not execute).
  char self[4096] = {};
  CHECK(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
  const pid_t child = fork();
  if (child == 0) {
    char flag[] = "--failed-restore-copy";
    char* argv[] = {self, flag, nullptr};
    execv(self, argv);
    std::_Exit(127);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

void a_declined_snapshot_runs_the_dispatch_once(hsa_agent_t gpu, uint8_t* counter) {
  AccumulatingDispatch dispatch = make_dispatch(gpu, counter);
  hsa_rt_inject(HSA_RT_FAULT_COPIES_FROM, reinterpret_cast<uintptr_t>(dispatch.counter), 0);  // its capture fails
  const WindowOutcome outcome = window(gpu, 4, dispatch);
  hsa_rt_inject(HSA_RT_FAULT_COPIES_FROM, 0, 0);
  CHECK(!outcome.snapshot_ok);
  CHECK(outcome.runs == 1 && dispatch.inputs_seen.size() == 1);
  CHECK(hsa_amd_memory_pool_free(dispatch.input) == HSA_STATUS_SUCCESS);
}

// registration.cpp runs again (late configuration): between its restore of
// the tables and its second init a window declines, since frees went unseen;
// after the init, windows replay and frees are seen again.
void re_registration_in_both_orders(HsaApiTable* api, hsa_agent_t gpu, uint8_t* counter) {
  uint8_t* freed = allocate_coarse(gpu, 4096);
  rocprofiler::registration::restore_tables(api);
  CHECK(hsa_amd_memory_pool_free(freed) == HSA_STATUS_SUCCESS);  // unseen
  AccumulatingDispatch dispatch = make_dispatch(gpu, counter);  // untracked
  const WindowOutcome declined = window(gpu, 3, dispatch);
  CHECK(!declined.snapshot_ok && declined.runs == 1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(hsa_amd_memory_pool_free(dispatch.input) == HSA_STATUS_SUCCESS);

  rocprofiler::registration::set_api_table(api, 0);  // restore, then init
  every_pass_sees_identical_inputs(gpu, counter);

  // The other order: restore and init together, with an unseen free before
  // the next window.
  uint8_t* also_freed = allocate_coarse(gpu, 4096);
  rocprofiler::registration::restore_tables(api);
  CHECK(hsa_amd_memory_pool_free(also_freed) == HSA_STATUS_SUCCESS);  // unseen
  rocprofiler::registration::set_api_table(api, 0);
  every_pass_sees_identical_inputs(gpu, counter);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(rocprofiler::kernel_replay::memory_tracker::tracked_count(gpu) == 0);
}

}  // namespace

int main(int argc, char** argv) {
  const bool failed_restore_copy_case = argc > 1 && std::strcmp(argv[1], kFailedRestoreCopy) == 0;
  hsa_rt_reset(2);
  const hsa_agent_t gpu = hsa_rt_gpu_agent(0);
  const hsa_agent_t other_gpu = hsa_rt_gpu_agent(1);

  HsaApiTable api{};
  api.core_ = hsa_rt_core_table();
  api.amd_ext_ = hsa_rt_amd_ext_table();
  rocprofiler::registration::set_api_table(&api, 0);
  CHECK(!kernel_replay::memory_tracker::tracking_enabled());  // through `using namespace`
  rocprofiler::callback_tracing::configure_callback_tracing_service(
      rocprofiler::callback_tracing::kKernelReplayKind);
  CHECK(rocprofiler::kernel_replay::memory_tracker::tracking_enabled());
  kr_set_log_level(KR_LOG_ERROR);  // declines and skips warn by design
  const kr_storage_policy_t policy = kr_storage_policy();
  CHECK(policy == kr_test_policy_from_environment());
  const uint64_t live_at_start = hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS);

  // The kernel's code object, loaded before the first dispatch. No
  // executable iterator is set: the library finds the loader's.
  const hsa_executable_t exe = hsa_rt_executable_create();
  uint8_t* counter =
      static_cast<uint8_t*>(hsa_rt_executable_add_variable(exe, gpu, "counter", 1, false));
  CHECK(counter != nullptr);
  if (failed_restore_copy_case) {
    window_with_a_failed_restore_copy(gpu, counter);
    return 0;  // reached only if the failed restore did not abort
  }

  every_pass_sees_identical_inputs(gpu, counter);
  nothing_to_capture_still_replays(other_gpu);
  every_region_freed_during_the_window(gpu);
  a_reused_address_is_left_to_its_new_owner(gpu);
  a_failed_restore_copy_aborts();
  a_declined_snapshot_runs_the_dispatch_once(gpu, counter);
  re_registration_in_both_orders(&api, gpu, counter);

  CHECK(hsa_executable_destroy(exe) == HSA_STATUS_SUCCESS);
  CHECK(rocprofiler::kernel_replay::memory_tracker::tracked_count(gpu) == 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(hsa_rt_quarantine_intact());
  CHECK(kr_test_trim_leaves_nothing_held());
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == live_at_start);
  if (kr_check_failed() != 0) {
    std::fprintf(stderr, "sdk_call_sites (%s): %d check(s) failed\n", kr_test_policy_name(policy),
                 kr_check_failed());
    return 1;
  }
  std::printf("sdk_call_sites (%s): all checks passed\n", kr_test_policy_name(policy));
  return 0;
}
