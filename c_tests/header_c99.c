/* header_c99.c: kernel_replay.h as a C99 program sees it.
 *
 * Built with -std=c99 -Wall -Wextra -Wpedantic -Werror against the header
 * alone (its include directory and the HSA headers it includes), and linked
 * to the shared library, so it fails if the header is not valid C99, is not
 * idempotent, declares something the library does not export, or if the
 * library's answers differ from what the header documents:
 *   - every function, enum constant and struct field is referenced;
 *   - the enum values are the ABI the header fixes;
 *   - kr_version() is the project version (KR_EXPECTED_VERSION, from CMake,
 *     which reads it from Cargo.toml);
 *   - every function that takes a pointer accepts NULL as documented.
 * No runtime is installed: this is the library on its own.
 */
#include "kernel_replay.h"
#include "kernel_replay.h" /* twice: the include guard must hold */

#include <stdio.h>
#include <string.h>

#include "check.h"

#ifndef KR_EXPECTED_VERSION
#error "KR_EXPECTED_VERSION must be defined by the build"
#endif


/* Every exported function, so that each must be declared by the header and
 * resolved by the linker. The casts to a common type are allowed in C. */
typedef void (*any_function)(void);
static const any_function every_function[] = {
    (any_function)kr_memory_tracker_init,  (any_function)kr_set_tracking_enabled,
    (any_function)kr_tracking_enabled,     (any_function)kr_finalize,
    (any_function)kr_is_finalized,         (any_function)kr_set_executable_iterator,
    (any_function)kr_snap,                 (any_function)kr_snapshot_ok,
    (any_function)kr_snapshot_decline_reason, (any_function)kr_snapshot_region_count,
    (any_function)kr_snapshot_byte_count,  (any_function)kr_restore,
    (any_function)kr_restore_with_report,  (any_function)kr_snapshot_free,
    (any_function)kr_set_host_budget,      (any_function)kr_host_bytes_in_use,
    (any_function)kr_tracked_count,        (any_function)kr_tracked_bytes,
    (any_function)kr_replay,               (any_function)kr_replay_gate,
    (any_function)kr_set_log_callback,     (any_function)kr_set_log_level,
    (any_function)kr_version,              (any_function)kr_set_storage_policy,
    (any_function)kr_storage_policy,       (any_function)kr_set_device_budget,
    (any_function)kr_set_storage_pools,    (any_function)kr_set_batched_copies,
    (any_function)kr_trim_retained,        (any_function)kr_device_bytes_in_use,
    (any_function)kr_snapshot_tier_bytes,  (any_function)kr_get_stats,
    (any_function)kr_reset_stats,
};

/* The enum values cross the ABI as integers; they may never change. */
static void check_enum_values(void) {
  CHECK(KR_STATUS_SUCCESS == 0);
  CHECK(KR_STATUS_SKIPPED == 1);
  CHECK(KR_STATUS_ALREADY_INSTALLED == 2);
  CHECK(KR_STATUS_ERROR_INVALID_ARGUMENT == 3);
  CHECK(KR_STATUS_ERROR_INCOMPATIBLE_TABLE == 4);
  CHECK(KR_STATUS_ERROR_INTERNAL == 5);

  CHECK(KR_DECLINE_NONE == 0);
  CHECK(KR_DECLINE_NOT_INITIALIZED == 1);
  CHECK(KR_DECLINE_FINALIZED == 2);
  CHECK(KR_DECLINE_NO_EXECUTABLE_ITERATOR == 3);
  CHECK(KR_DECLINE_SYMBOL_ENUMERATION == 4);
  CHECK(KR_DECLINE_METADATA_MEMORY == 5);
  CHECK(KR_DECLINE_HOST_MEMORY == 6);
  CHECK(KR_DECLINE_COPY_FAILED == 7);
  CHECK(KR_DECLINE_DEVICE_MEMORY == 8);

  CHECK(KR_STORAGE_AUTO == 0);
  CHECK(KR_STORAGE_DEVICE == 1);
  CHECK(KR_STORAGE_PINNED == 2);
  CHECK(KR_STORAGE_PAGEABLE == 3);
  CHECK(KR_STORAGE_BASELINE == 4);

  CHECK(KR_TIER_DEVICE == 0);
  CHECK(KR_TIER_PINNED == 1);
  CHECK(KR_TIER_PAGEABLE == 2);

  CHECK(KR_DEVICE_BUDGET_AUTO == UINT64_MAX);

  CHECK(KR_LOG_ERROR == 1);
  CHECK(KR_LOG_WARN == 2);
  CHECK(KR_LOG_INFO == 3);
  CHECK(KR_LOG_DEBUG == 4);
  CHECK(KR_LOG_TRACE == 5);
}

/* Every struct field, and the layouts a C caller allocates. */
static void check_structs(void) {
  kr_restore_report_t report;
  kr_replay_result_t result;
  report.restored = 1;
  report.skipped_not_live = 2;
  report.failed = 3;
  CHECK(report.restored + report.skipped_not_live + report.failed == 6);
  CHECK(sizeof(kr_restore_report_t) == 3 * sizeof(size_t));

  result.replayed = true;
  result.passes_run = 4;
  result.decline_reason = KR_DECLINE_NONE;
  result.restore_failures = 5;
  CHECK(result.replayed && result.passes_run == 4 && result.decline_reason == KR_DECLINE_NONE &&
        result.restore_failures == 5);

  {
    kr_stats_t stats;
    memset(&stats, 0, sizeof stats);
    stats.snapshots = 1;
    stats.declines[KR_DECLINE_DEVICE_MEMORY] = 2;
    stats.bytes_captured = 3;
    stats.snap_ns = 4;
    stats.restores = 5;
    stats.regions_restored = 6;
    stats.regions_skipped = 7;
    stats.regions_failed = 8;
    stats.bytes_restored = 9;
    stats.restore_ns = 10;
    stats.held_bytes[KR_TIER_PAGEABLE] = 11;
    stats.retained_bytes[KR_TIER_PAGEABLE] = 12;
    CHECK(stats.snapshots + stats.declines[KR_DECLINE_DEVICE_MEMORY] + stats.bytes_captured +
              stats.snap_ns + stats.restores + stats.regions_restored + stats.regions_skipped +
              stats.regions_failed + stats.bytes_restored + stats.restore_ns +
              stats.held_bytes[KR_TIER_PAGEABLE] + stats.retained_bytes[KR_TIER_PAGEABLE] ==
          78);
    CHECK(sizeof stats.declines / sizeof stats.declines[0] == 10);
    CHECK(sizeof stats.held_bytes / sizeof stats.held_bytes[0] == 3);
    CHECK(sizeof stats.retained_bytes / sizeof stats.retained_bytes[0] == 3);
    CHECK(sizeof(kr_stats_t) == (1 + 10 + 8 + 3 + 3) * sizeof(uint64_t));
  }
}

static int log_calls = 0;
static kr_log_level_t last_log_level = (kr_log_level_t)0;

static void count_log(kr_log_level_t level, const char* message, void* user_data) {
  (void)user_data;
  CHECK(message != NULL);
  ++log_calls;
  last_log_level = level;
}

static uint32_t passes_seen = 0;

static void count_pass(uint32_t pass, void* user_data) {
  (void)pass;
  (void)user_data;
  ++passes_seen;
}

/* NULL wherever a pointer can be passed, and the documented answer. */
static void check_null_handling(void) {
  const hsa_agent_t agent = {1};
  kr_restore_report_t report = {7, 7, 7};
  kr_replay_result_t result;
  kr_snapshot_t* declined;

  CHECK(kr_memory_tracker_init(NULL, NULL, 0) == KR_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(kr_snapshot_ok(NULL) == false);
  CHECK(kr_snapshot_decline_reason(NULL) == KR_DECLINE_METADATA_MEMORY);
  CHECK(kr_snapshot_region_count(NULL) == 0);
  CHECK(kr_snapshot_byte_count(NULL) == 0);
  CHECK(kr_restore(NULL) == 0);
  CHECK(kr_restore_with_report(NULL, NULL) == 0);
  CHECK(kr_restore_with_report(NULL, &report) == 0);
  CHECK(report.restored == 0 && report.skipped_not_live == 0 && report.failed == 0);
  kr_snapshot_free(NULL);
  kr_set_executable_iterator(NULL);
  kr_set_log_callback(NULL, NULL);

  /* From here the log goes to count_log (NULL user data is allowed). */
  kr_set_log_callback(count_log, NULL);
  kr_set_log_level(KR_LOG_WARN);

  /* Without a pass function kr_replay runs nothing and logs an error; with
   * one and passes <= 1 it runs pass 0 once, without taking a snapshot. */
  result = kr_replay(agent, 3, NULL, NULL);
  CHECK(result.passes_run == 0 && !result.replayed);
  CHECK(log_calls == 1 && last_log_level == KR_LOG_ERROR);
  result = kr_replay(agent, 0, count_pass, NULL);
  CHECK(result.passes_run == 1 && !result.replayed && passes_seen == 1);

  /* Nothing installed: a snapshot is a declined handle, never NULL, and a
   * NULL report pointer on a real handle is fine too. */
  declined = kr_snap(agent);
  CHECK(declined != NULL);
  CHECK(!kr_snapshot_ok(declined));
  CHECK(kr_snapshot_decline_reason(declined) == KR_DECLINE_NOT_INITIALIZED);
  CHECK(kr_snapshot_region_count(declined) == 0 && kr_snapshot_byte_count(declined) == 0);
  CHECK(kr_restore_with_report(declined, NULL) == 0);
  CHECK(log_calls == 2 && last_log_level == KR_LOG_WARN);
  CHECK(kr_snapshot_tier_bytes(declined, KR_TIER_PAGEABLE) == 0);
  kr_snapshot_free(declined);
  kr_set_log_callback(NULL, NULL);
  CHECK(kr_host_bytes_in_use() == 0);

  /* The storage API without a runtime: nothing held, nothing to trim, no
   * pools to choose; the stats accept NULL. */
  CHECK(kr_snapshot_tier_bytes(NULL, KR_TIER_DEVICE) == 0);
  CHECK(kr_device_bytes_in_use() == 0);
  CHECK(kr_trim_retained() == 0);
  CHECK(!kr_set_storage_pools(agent, 1, 2, agent));
  kr_set_device_budget(KR_DEVICE_BUDGET_AUTO);
  kr_set_batched_copies(true);
  {
    const kr_storage_policy_t original = kr_storage_policy();
    CHECK(kr_set_storage_policy(KR_STORAGE_BASELINE));
    CHECK(kr_storage_policy() == KR_STORAGE_BASELINE);
    CHECK(!kr_set_storage_policy((kr_storage_policy_t)99)); /* refused, nothing changed */
    CHECK(kr_storage_policy() == KR_STORAGE_BASELINE);
    CHECK(kr_set_storage_policy(original));
    CHECK(kr_storage_policy() == original);
  }
  kr_get_stats(NULL);
  kr_reset_stats();
  {
    kr_stats_t stats;
    memset(&stats, 0xA5, sizeof stats);
    kr_get_stats(&stats);
    CHECK(stats.snapshots == 0 && stats.restores == 0 && stats.held_bytes[KR_TIER_DEVICE] == 0);
    CHECK(stats.declines[KR_DECLINE_NOT_INITIALIZED] == 0); /* reset after the decline above */
  }
}

int main(void) {
  size_t i;
  const char* version = kr_version();

  for (i = 0; i < sizeof every_function / sizeof every_function[0]; ++i) {
    CHECK(every_function[i] != NULL);
  }
  CHECK(sizeof every_function / sizeof every_function[0] == 33);

  CHECK(version != NULL);
  if (version != NULL && strcmp(version, KR_EXPECTED_VERSION) != 0) {
    fprintf(stderr, "kr_version() is \"%s\", the project version is \"%s\"\n", version,
            KR_EXPECTED_VERSION);
    CHECK(0);
  }
  CHECK(kr_version() == version); /* static storage */

  check_enum_values();
  check_structs();
  check_null_handling();

  if (kr_check_failed() != 0) return kr_check_summary("header_c99");
  printf("header_c99: all checks passed (kernel-replay %s)\n", version);
  return 0;
}
