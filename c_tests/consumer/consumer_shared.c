/* consumer_shared.c: a C program built against an installed kernel-replay
 * (shared library). Exits 0 only if the library answers as documented. */
#include <kernel_replay.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  int failures = 0;
  const char* version = kr_version();
  kr_restore_report_t report = {5, 5, 5};

  if (version == NULL || strcmp(version, KR_EXPECTED_VERSION) != 0) {
    fprintf(stderr, "kr_version() is %s, the package says %s\n", version ? version : "NULL",
            KR_EXPECTED_VERSION);
    ++failures;
  }
  if (kr_memory_tracker_init(NULL, NULL, 0) != KR_STATUS_ERROR_INVALID_ARGUMENT) {
    fprintf(stderr, "kr_memory_tracker_init(NULL, NULL, 0) is not INVALID_ARGUMENT\n");
    ++failures;
  }
  if (kr_snapshot_ok(NULL) || kr_restore(NULL) != 0 ||
      kr_restore_with_report(NULL, &report) != 0 || report.restored != 0 ||
      report.skipped_not_live != 0 || report.failed != 0) {
    fprintf(stderr, "a NULL snapshot is not handled as documented\n");
    ++failures;
  }
  kr_snapshot_free(NULL);
  if (kr_host_bytes_in_use() != 0) {
    fprintf(stderr, "host bytes in use without any snapshot\n");
    ++failures;
  }
  if (failures != 0) return 1;
  printf("consumer_shared: kernel-replay %s OK\n", version);
  return 0;
}
