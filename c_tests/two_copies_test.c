/* two_copies_test.c: one copy of kernel-replay per process.
 *
 * A process can end up with two copies of the library: the C++ SDK loads
 * the .so while a Rust component links the rlib, or the .so is loaded under
 * two paths. Such copies share no symbols, so each has its own inventory;
 * if both installed their wrappers, every allocation would be tracked twice.
 * The first copy's install leaves a process-wide marker (an environment
 * variable naming the process), and a second copy's kr_memory_tracker_init
 * then installs nothing and answers KR_STATUS_ALREADY_INSTALLED.
 *
 * Here the two copies are the same build under two file names, dlopen'ed
 * with RTLD_LOCAL (nothing of either is visible to the other or to this
 * program, which reaches them through dlsym only). The tables are the
 * software runtime's, linked into this program; the application allocates
 * through its ordinary entry points, which call through those tables. A
 * child process (fork and exec of this program) inherits the marker in its
 * environment and must still install its own copy.
 *
 *   two_copies_test <first copy> <second copy>
 *   two_copies_test --child <copy>          (the child's side)
 */
#define _POSIX_C_SOURCE 200809L /* fork, exec, dlopen under -std=c11 */

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hsa_rt.h"
#include "kernel_replay.h"


/* ---- one loaded copy, reached through dlsym -------------------------------------- */

typedef struct copy {
  const char* path;
  void* handle;
  kr_status_t (*memory_tracker_init)(struct CoreApiTable*, struct AmdExtTable*, uint64_t);
  bool (*set_tracking_enabled)(bool);
  size_t (*tracked_count)(hsa_agent_t);
  void (*set_log_callback)(kr_log_callback_t, void*);
  void (*set_log_level)(kr_log_level_t);
  void (*finalize)(void);
  const char* (*version)(void);
  kr_snapshot_t* (*snap)(hsa_agent_t);
  kr_decline_reason_t (*decline_reason)(const kr_snapshot_t*);
  void (*snapshot_free)(kr_snapshot_t*);
} copy;

/* dlsym's object pointer into a function pointer, without the conversion
 * ISO C leaves undefined (POSIX guarantees the representation). */
static void resolve(const copy* c, const char* name, void* function_pointer, size_t size) {
  void* symbol = dlsym(c->handle, name);
  if (symbol == NULL) {
    fprintf(stderr, "%s: no %s: %s\n", c->path, name, dlerror());
    exit(1);
  }
  memcpy(function_pointer, &symbol, size);
}
#define RESOLVE(c, field, name) resolve(c, name, &(c)->field, sizeof((c)->field))

static copy load(const char* path) {
  copy c;
  memset(&c, 0, sizeof c);
  c.path = path;
  c.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (c.handle == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    exit(1);
  }
  RESOLVE(&c, memory_tracker_init, "kr_memory_tracker_init");
  RESOLVE(&c, set_tracking_enabled, "kr_set_tracking_enabled");
  RESOLVE(&c, tracked_count, "kr_tracked_count");
  RESOLVE(&c, set_log_callback, "kr_set_log_callback");
  RESOLVE(&c, set_log_level, "kr_set_log_level");
  RESOLVE(&c, finalize, "kr_finalize");
  RESOLVE(&c, version, "kr_version");
  RESOLVE(&c, snap, "kr_snap");
  RESOLVE(&c, decline_reason, "kr_snapshot_decline_reason");
  RESOLVE(&c, snapshot_free, "kr_snapshot_free");
  return c;
}

/* ---- each copy's log ---------------------------------------------------------------- */

enum { kMaxLogLines = 16, kMaxLogLine = 512 };

typedef struct captured_log {
  int count;
  int warnings;
  char lines[kMaxLogLines][kMaxLogLine];
} captured_log;

static void capture_log(kr_log_level_t level, const char* message, void* user_data) {
  captured_log* log = user_data;
  if (log->count < kMaxLogLines) snprintf(log->lines[log->count], kMaxLogLine, "%s", message);
  ++log->count;
  if (level == KR_LOG_WARN) ++log->warnings;
}

static int lines_containing(const captured_log* log, const char* needle) {
  int found = 0;
  for (int i = 0; i < log->count && i < kMaxLogLines; ++i) {
    if (strstr(log->lines[i], needle) != NULL) ++found;
  }
  return found;
}

static void print_log(const char* name, const captured_log* log) {
  for (int i = 0; i < log->count && i < kMaxLogLines; ++i) {
    fprintf(stderr, "  %s log[%d]: %s\n", name, i, log->lines[i]);
  }
}

/* ---- the application's allocation ------------------------------------------------- */

static void* device_allocate(hsa_agent_t gpu, size_t size) {
  void* ptr = NULL;
  const hsa_status_t status = hsa_amd_memory_pool_allocate(
      hsa_rt_pool(gpu, HSA_RT_POOL_DEVICE_COARSE), size, 0, &ptr);
  if (status != HSA_STATUS_SUCCESS || ptr == NULL) {
    fprintf(stderr, "hsa_amd_memory_pool_allocate failed (%d)\n", (int)status);
    exit(1);
  }
  return ptr;
}

/* ---- the child: its own process, its own copy ------------------------------------------ */

static int child(const char* path) {
  const char* inherited = getenv("KERNEL_REPLAY_INSTALLED");
  CHECK(inherited != NULL); /* the parent's marker, naming the parent */
  hsa_rt_reset(1);
  const hsa_agent_t gpu = hsa_rt_gpu_agent(0);
  copy only = load(path);
  CHECK(only.memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0) ==
        KR_STATUS_SUCCESS);
  CHECK(only.set_tracking_enabled(true));
  void* buffer = device_allocate(gpu, 4096);
  CHECK(only.tracked_count(gpu) == 1);
  CHECK(hsa_amd_memory_pool_free(buffer) == HSA_STATUS_SUCCESS);
  CHECK(only.tracked_count(gpu) == 0);
  only.finalize();
  if (kr_check_failed() != 0) return kr_check_summary("two_copies_test (child)");
  return 0;
}

/* Runs this program again, with fork and exec, as `--child <path>`. */
static bool child_installs_its_own_copy(const char* self, const char* path) {
  fflush(NULL);
  const pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return false;
  }
  if (pid == 0) {
    execl(self, self, "--child", path, (char*)NULL);
    perror("exec");
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    perror("waitpid");
    return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ---- the parent: two copies in one process --------------------------------------------- */

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  if (argc != 3) {
    fprintf(stderr, "usage: %s <first copy> <second copy>\n", argv[0]);
    return 2;
  }
  hsa_rt_reset(1);
  const hsa_agent_t gpu = hsa_rt_gpu_agent(0);

  copy first = load(argv[1]);
  copy second = load(argv[2]);
  /* Really two copies: two mappings, each with its own functions. */
  if (first.handle == second.handle ||
      memcmp(&first.memory_tracker_init, &second.memory_tracker_init,
             sizeof first.memory_tracker_init) == 0) {
    fprintf(stderr, "the loader mapped %s and %s once\n", argv[1], argv[2]);
    return 1;
  }

  static captured_log first_log, second_log;
  first.set_log_callback(capture_log, &first_log);
  first.set_log_level(KR_LOG_WARN);
  second.set_log_callback(capture_log, &second_log);
  second.set_log_level(KR_LOG_WARN);

  /* The first copy installs; the second finds its marker and touches
   * nothing: the tables are byte for byte what the first left. */
  CHECK(getenv("KERNEL_REPLAY_INSTALLED") == NULL);
  CHECK(first.memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0) ==
        KR_STATUS_SUCCESS);
  CHECK(getenv("KERNEL_REPLAY_INSTALLED") != NULL);
  const size_t core_size = hsa_rt_core_table_size();
  const size_t amd_size = hsa_rt_amd_ext_table_size();
  unsigned char* core_before = malloc(core_size);
  unsigned char* amd_before = malloc(amd_size);
  if (core_before == NULL || amd_before == NULL) return 1;
  memcpy(core_before, hsa_rt_core_table(), core_size);
  memcpy(amd_before, hsa_rt_amd_ext_table(), amd_size);
  CHECK(second.memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0) ==
        KR_STATUS_ALREADY_INSTALLED);
  CHECK(memcmp(core_before, hsa_rt_core_table(), core_size) == 0);
  CHECK(memcmp(amd_before, hsa_rt_amd_ext_table(), amd_size) == 0);
  free(core_before);
  free(amd_before);

  /* One WARN line from the second copy, naming the first's version; none
   * from the first. */
  CHECK(second_log.warnings == 1);
  CHECK(lines_containing(&second_log, "another copy of kernel-replay") == 1);
  CHECK(lines_containing(&second_log, first.version()) == 1);
  CHECK(first_log.warnings == 0);

  /* An allocation goes through the first copy's wrappers only, and only
   * the first copy can snapshot it. */
  CHECK(first.set_tracking_enabled(true));
  CHECK(second.set_tracking_enabled(true));
  void* buffer = device_allocate(gpu, 4096);
  CHECK(first.tracked_count(gpu) == 1);
  CHECK(second.tracked_count(gpu) == 0);
  kr_snapshot_t* snapshot = second.snap(gpu);
  CHECK(snapshot != NULL && second.decline_reason(snapshot) == KR_DECLINE_NOT_INITIALIZED);
  second.snapshot_free(snapshot);
  CHECK(hsa_amd_memory_pool_free(buffer) == HSA_STATUS_SUCCESS);
  CHECK(first.tracked_count(gpu) == 0);

  /* The first copy still owns the tables once finalized. */
  first.finalize();
  CHECK(second.memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0) ==
        KR_STATUS_ALREADY_INSTALLED);

  /* A child process inherits the marker but is a process of its own. */
  CHECK(child_installs_its_own_copy(argv[0], argv[1]));

  if (kr_check_failed() != 0) {
    kr_check_summary("two_copies_test");
    print_log("first", &first_log);
    print_log("second", &second_log);
    return 1;
  }
  printf("two_copies_test: the second copy stood aside (kernel-replay %s)\n", first.version());
  return 0;
}
