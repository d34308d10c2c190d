// header_cxx.cpp: kernel_replay.h and kernel_replay.hpp as a C++ program sees
// them. Built as C++17 (what rocprofiler-sdk uses) and as C++11 (the .hpp's
// minimum), with -Wall -Wextra -Wpedantic -Werror.
//
// Checks that both headers are idempotent and usable without
// <hsa/hsa_api_trace.h>, that device_snapshot_t owns its handle the way
// queue.cpp relies on (move-only, noexcept moves), and what an empty
// snapshot answers. No runtime is installed.

#include "kernel_replay.h"
#include "kernel_replay.hpp"
#include "kernel_replay.h"  // twice each: the include guards must hold
#include "kernel_replay.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

namespace {

using kernel_replay::memory_snapshot::device_snapshot_t;

// Copying would free one handle twice; moving must never throw, since the
// snapshot is moved out of snap() inside an interceptor that cannot unwind.
static_assert(!std::is_copy_constructible<device_snapshot_t>::value, "move-only");
static_assert(!std::is_copy_assignable<device_snapshot_t>::value, "move-only");
static_assert(std::is_nothrow_move_constructible<device_snapshot_t>::value, "noexcept move");
static_assert(std::is_nothrow_move_assignable<device_snapshot_t>::value, "noexcept move");
static_assert(std::is_nothrow_default_constructible<device_snapshot_t>::value, "noexcept default");

// The C++ layer must hand back the C ABI's types unchanged.
static_assert(std::is_same<decltype(kernel_replay::memory_snapshot::restore(
                               std::declval<const device_snapshot_t&>())),
                           std::size_t>::value,
              "restore returns the region count");
static_assert(std::is_same<decltype(kernel_replay::memory_snapshot::restore_with_report(
                               std::declval<const device_snapshot_t&>())),
                           kr_restore_report_t>::value,
              "restore_with_report returns the C report");

int failures = 0;

void check(bool condition, const char* what, int line) {
  if (!condition) {
    std::fprintf(stderr, "header_cxx.cpp:%d: check failed: %s\n", line, what);
    ++failures;
  }
}
#define CHECK(condition) check((condition), #condition, __LINE__)

void empty_snapshots_are_not_ok_and_restore_nothing() {
  const device_snapshot_t empty;
  CHECK(!empty.ok);
  CHECK(empty.empty());
  CHECK(empty.size() == 0);
  CHECK(empty.bytes() == 0);
  CHECK(empty.get() == nullptr);
  CHECK(empty.decline_reason() == KR_DECLINE_METADATA_MEMORY);
  CHECK(kernel_replay::memory_snapshot::restore(empty) == 0);
  const kr_restore_report_t report = kernel_replay::memory_snapshot::restore_with_report(empty);
  CHECK(report.restored == 0 && report.skipped_not_live == 0 && report.failed == 0);

  const device_snapshot_t from_null(nullptr);
  CHECK(!from_null.ok && from_null.empty());
}

void a_snapshot_without_a_runtime_declines_and_moves_its_handle() {
  const hsa_agent_t agent{1};
  kr_set_log_level(static_cast<kr_log_level_t>(0));  // the decline warning is expected
  device_snapshot_t declined = kernel_replay::memory_snapshot::snap(agent);
  CHECK(declined.get() != nullptr);
  CHECK(!declined.ok);
  CHECK(declined.decline_reason() == KR_DECLINE_NOT_INITIALIZED);

  const kr_snapshot_t* handle = declined.get();
  device_snapshot_t moved(std::move(declined));
  CHECK(moved.get() == handle);
  CHECK(declined.get() == nullptr);  // NOLINT(bugprone-use-after-move): the point
  device_snapshot_t assigned;
  assigned = std::move(moved);
  CHECK(assigned.get() == handle && moved.get() == nullptr);
  CHECK(assigned.decline_reason() == KR_DECLINE_NOT_INITIALIZED);
}

void the_tracker_functions_answer_without_a_runtime() {
  CHECK(kernel_replay::memory_tracker_init(static_cast<CoreApiTable*>(nullptr), 0) ==
        KR_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(kernel_replay::memory_tracker_init(static_cast<AmdExtTable*>(nullptr), 0) ==
        KR_STATUS_ERROR_INVALID_ARGUMENT);
  // Nothing installed and no table: tracking may be switched, nothing recorded.
  CHECK(kernel_replay::memory_tracker::tracked_count(hsa_agent_t{1}) == 0);
  CHECK(kernel_replay::memory_tracker::tracked_bytes(hsa_agent_t{1}) == 0);
  CHECK(!kernel_replay::memory_tracker::is_finalized());
}

}  // namespace

int main() {
  empty_snapshots_are_not_ok_and_restore_nothing();
  a_snapshot_without_a_runtime_declines_and_moves_its_handle();
  the_tracker_functions_answer_without_a_runtime();
  CHECK(std::strcmp(kr_version(), "") != 0);
  CHECK(kr_host_bytes_in_use() == 0);
  if (failures != 0) {
    std::fprintf(stderr, "header_cxx (C++%ld): %d check(s) failed\n", __cplusplus / 100 % 100,
                 failures);
    return 1;
  }
  std::printf("header_cxx (C++%ld): all checks passed\n", __cplusplus / 100 % 100);
  return 0;
}
