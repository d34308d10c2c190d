// header_cxx.cpp: kernel_replay.h and the C++ headers that mirror
// rocprofiler-sdk's modules (kernel_replay/memory_snapshot.hpp,
// kernel_replay/memory_tracker.hpp) as a C++ program sees them. Built as
// C++17 (what rocprofiler-sdk uses) and as C++11 (the headers' minimum),
// with -Wall -Wextra -Wpedantic -Werror.
//
// Checks that the headers are idempotent and usable without
// <hsa/hsa_api_trace.h>, that they have the SDK's signatures (restore
// returns bool, memory_tracker_init is void, both overloads exist), that
// they declare nothing outside namespace rocprofiler (so `using namespace
// rocprofiler;` stays unambiguous), that device_snapshot_t owns its handle
// the way queue.cpp relies on (move-only, noexcept moves), and what an
// empty snapshot answers. No runtime is installed.

#include "kernel_replay.h"
#include "kernel_replay/memory_snapshot.hpp"
#include "kernel_replay/memory_tracker.hpp"
#include "kernel_replay.h"  // twice each: the include guards must hold
#include "kernel_replay/memory_snapshot.hpp"
#include "kernel_replay/memory_tracker.hpp"

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "check.h"
#include <utility>

// A global name `kernel_replay` would make every `kernel_replay::` in code
// that says `using namespace rocprofiler;` ambiguous: the headers must not
// declare one. This global namespace of that name compiles only if they
// declare no other entity called `kernel_replay` at global scope, and the
// use below resolves only through `rocprofiler`.
namespace kernel_replay {
struct not_the_library {};
}  // namespace kernel_replay

namespace {

using rocprofiler::kernel_replay::memory_snapshot::device_snapshot_t;
namespace ms = rocprofiler::kernel_replay::memory_snapshot;
namespace mt = rocprofiler::kernel_replay::memory_tracker;

// Copying would free one handle twice; moving must never throw, since the
// snapshot is moved out of snap() inside an interceptor that cannot unwind.
static_assert(!std::is_copy_constructible<device_snapshot_t>::value, "move-only");
static_assert(!std::is_copy_assignable<device_snapshot_t>::value, "move-only");
static_assert(std::is_nothrow_move_constructible<device_snapshot_t>::value, "noexcept move");
static_assert(std::is_nothrow_move_assignable<device_snapshot_t>::value, "noexcept move");
static_assert(std::is_nothrow_default_constructible<device_snapshot_t>::value, "noexcept default");

// The SDK's signatures.
static_assert(std::is_same<decltype(ms::snap(std::declval<hsa_agent_t>())),
                           device_snapshot_t>::value,
              "snap(hsa_agent_t) returns device_snapshot_t");
static_assert(std::is_same<decltype(ms::restore(std::declval<const device_snapshot_t&>())),
                           bool>::value,
              "restore returns bool, as the SDK's (ROCP_FATAL_IF(!restore(...)))");
static_assert(std::is_same<decltype(device_snapshot_t::ok), bool>::value,
              "ok is a public bool member");
static_assert(std::is_same<decltype(std::declval<const device_snapshot_t&>().empty()), bool>::value,
              "empty() const");
static_assert(std::is_same<decltype(rocprofiler::kernel_replay::memory_tracker_init(
                               std::declval<CoreApiTable*>(), std::declval<uint64_t>())),
                           void>::value,
              "memory_tracker_init(CoreApiTable*, uint64_t) is void");
static_assert(std::is_same<decltype(rocprofiler::kernel_replay::memory_tracker_init(
                               std::declval<AmdExtTable*>(), std::declval<uint64_t>())),
                           void>::value,
              "memory_tracker_init(AmdExtTable*, uint64_t) is void");
static_assert(std::is_same<decltype(mt::set_tracking_enabled(true)), bool>::value,
              "set_tracking_enabled returns the state in force");
static_assert(std::is_same<decltype(mt::tracking_enabled()), bool>::value, "tracking_enabled");
static_assert(std::is_same<decltype(ms::restore_with_report(
                               std::declval<const device_snapshot_t&>())),
                           kr_restore_report_t>::value,
              "restore_with_report returns the C report");
static_assert(std::is_same<decltype(ms::kind_bytes(std::declval<const device_snapshot_t&>(),
                                                   KR_MEMORY_DEVICE_FINE)),
                           std::uint64_t>::value,
              "kind_bytes returns the bytes of one memory kind");
static_assert(std::is_same<decltype(ms::uncovered_bytes(std::declval<const device_snapshot_t&>(),
                                                        KR_MEMORY_HOST)),
                           std::uint64_t>::value,
              "uncovered_bytes returns the bytes of one memory kind left out");


// As the SDK's: a default-constructed snapshot is ok, empty, and restores
// (nothing) successfully.
void a_default_snapshot_is_ok_empty_and_restores() {
  const device_snapshot_t empty;
  CHECK(empty.ok);
  CHECK(empty.empty());
  CHECK(empty.size() == 0);
  CHECK(empty.bytes() == 0);
  CHECK(empty.get() == nullptr);
  CHECK(empty.decline_reason() == KR_DECLINE_NONE);
  CHECK(ms::restore(empty));
  CHECK(ms::kind_bytes(empty, KR_MEMORY_DEVICE) == 0);
  CHECK(ms::uncovered_bytes(empty, KR_MEMORY_HOST) == 0);
  CHECK(!ms::system_memory_uncovered(empty));
  const kr_restore_report_t report = ms::restore_with_report(empty);
  CHECK(report.restored == 0 && report.skipped_not_live == 0 && report.failed == 0);

  // A NULL handle (kr_snap could not allocate it) is not ok, and not restored.
  const device_snapshot_t from_null(nullptr);
  CHECK(!from_null.ok && from_null.empty());
  CHECK(!ms::restore(from_null));
  CHECK(from_null.decline_reason() == KR_DECLINE_METADATA_MEMORY);
}

void a_snapshot_without_a_runtime_declines_and_moves_its_handle() {
  const hsa_agent_t agent{1};
  kr_set_log_level(static_cast<kr_log_level_t>(0));  // the decline warning is expected
  device_snapshot_t declined = ms::snap(agent);
  CHECK(declined.get() != nullptr);
  CHECK(!declined.ok);
  CHECK(declined.decline_reason() == KR_DECLINE_NOT_INITIALIZED);
  CHECK(!ms::restore(declined));

  const kr_snapshot_t* handle = declined.get();
  device_snapshot_t moved(std::move(declined));
  CHECK(moved.get() == handle);
  CHECK(declined.get() == nullptr && !declined.ok);  // NOLINT(bugprone-use-after-move): the point
  device_snapshot_t assigned;
  assigned = std::move(moved);
  CHECK(assigned.get() == handle && moved.get() == nullptr);
  CHECK(assigned.decline_reason() == KR_DECLINE_NOT_INITIALIZED);
  // What a range replay does: put a fresh snapshot over an old one.
  assigned = device_snapshot_t{};
  CHECK(assigned.ok && assigned.get() == nullptr);
}

// `using namespace rocprofiler;` with a global `kernel_replay` in scope: the
// qualified names still resolve (to rocprofiler's, through the using).
void the_tracker_functions_answer_without_a_runtime() {
  using namespace rocprofiler;
  rocprofiler::kernel_replay::memory_tracker_init(static_cast<CoreApiTable*>(nullptr), 0);
  rocprofiler::kernel_replay::memory_tracker_init(static_cast<AmdExtTable*>(nullptr), 0);
  CHECK(!mt::tracking_enabled());
  // Nothing installed: tracking may be switched, nothing is recorded.
  CHECK(mt::tracked_count(hsa_agent_t{1}) == 0);
  CHECK(mt::tracked_bytes(hsa_agent_t{1}) == 0);
  CHECK(!mt::is_finalized());
  const ::kernel_replay::not_the_library unrelated{};
  (void)unrelated;
}

}  // namespace

int main() {
  a_default_snapshot_is_ok_empty_and_restores();
  a_snapshot_without_a_runtime_declines_and_moves_its_handle();
  the_tracker_functions_answer_without_a_runtime();
  CHECK(std::strcmp(kr_version(), "") != 0);
  CHECK(kr_host_bytes_in_use() == 0);
  if (kr_check_failed() != 0) {
    std::fprintf(stderr, "header_cxx (C++%ld): %d check(s) failed\n", __cplusplus / 100 % 100,
                 kr_check_failed());
    return 1;
  }
  std::printf("header_cxx (C++%ld): all checks passed\n", __cplusplus / 100 % 100);
  return 0;
}
