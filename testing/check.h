/* check.h: the one check harness of every C/C++ test of this repository
 * (the library's tests in c_tests/, the test runtime's conformance suite in
 * testing/hsa-runtime/conformance/, the GPU harness in gpu/).
 *
 *   CHECK(condition)                 counts the check; on failure prints
 *                                    "file:line: check failed: condition" and
 *                                    counts the failure; evaluates to the
 *                                    condition (so `if (!CHECK(x)) return;`)
 *   CHECKF(condition, format, ...)   the same, printing the printf-style
 *                                    message instead of the expression
 *   REQUIRE(condition)               a check the rest of the program cannot do
 *                                    without: on failure, the summary and exit(1)
 *   kr_check_summary(name)           "name: N checks, M failed" on stderr;
 *                                    the exit status (0 when nothing failed)
 *
 * Named cases, for programs made of many (the conformance suite, the GPU
 * test), on stdout:
 *   kr_case_begin(name)              "[ RUN  ] name"
 *   kr_case_skip(format, ...)        "      SKIPPED: why"; the case is
 *                                    skipped unless one of its checks failed
 *   kr_case_failed()                 whether a check failed since the begin
 *   kr_case_end()                    "[ PASS ]", "[ FAIL ]" or "[ SKIP ]" name
 *   kr_case_summary(name)            "N passed, M failed, K skipped", the
 *                                    failed and skipped names, then
 *                                    kr_check_summary(name)
 * A check without a place (file NULL: kr_checkf(ok, NULL, 0, ...)) prints
 * "      FAILED: message", as a case's own failures read.
 *
 * C99 and C++11 and later, warning-free under -Wall -Wextra -Wpedantic. The
 * counters are one pair per program whatever the number of translation
 * units including this (weak definitions), and thread-safe (atomic adds), so
 * threads of a concurrency test may check too. */
#ifndef KR_CHECK_H
#define KR_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Checks made and checks failed, program-wide. */
__attribute__((weak)) int kr_check_count = 0;
__attribute__((weak)) int kr_check_failures = 0;

static inline int kr_check_failed(void) {
  return __atomic_load_n(&kr_check_failures, __ATOMIC_RELAXED);
}

__attribute__((format(printf, 4, 0))) static inline int kr_checkv(int ok, const char* file,
                                                                   int line, const char* format,
                                                                   va_list args) {
  __atomic_fetch_add(&kr_check_count, 1, __ATOMIC_RELAXED);
  if (ok) return 1;
  __atomic_fetch_add(&kr_check_failures, 1, __ATOMIC_RELAXED);
  fflush(stdout);
  if (file != NULL) {
    fprintf(stderr, "%s:%d: check failed: ", file, line);
  } else {
    fprintf(stderr, "      FAILED: ");
  }
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  fflush(stderr);
  return 0;
}

__attribute__((format(printf, 4, 5))) static inline int kr_checkf(int ok, const char* file,
                                                                  int line, const char* format,
                                                                  ...) {
  va_list args;
  va_start(args, format);
  const int result = kr_checkv(ok, file, line, format, args);
  va_end(args);
  return result;
}

/* Prints "name: N checks, M failed" (stderr) and returns the exit status. */
static inline int kr_check_summary(const char* name) {
  const int failed = kr_check_failed();
  fprintf(stderr, "%s: %d checks, %d failed\n", name,
          __atomic_load_n(&kr_check_count, __ATOMIC_RELAXED), failed);
  return failed == 0 ? 0 : 1;
}

/* ---- named cases ---------------------------------------------------------- */

struct kr_cases {
  char name[160];
  int failures_at_begin, skipped;
  int passed, failed, skips;
  char failed_names[4096], skipped_names[4096];
};
__attribute__((weak)) struct kr_cases kr_cases;

static inline void kr_case_begin(const char* name) {
  snprintf(kr_cases.name, sizeof(kr_cases.name), "%s", name);
  kr_cases.failures_at_begin = kr_check_failed();
  kr_cases.skipped = 0;
  printf("[ RUN  ] %s\n", name);
  fflush(stdout);
}

static inline int kr_case_failed(void) {
  return kr_check_failed() != kr_cases.failures_at_begin;
}

__attribute__((format(printf, 1, 2))) static inline void kr_case_skip(const char* format, ...) {
  va_list args;
  va_start(args, format);
  printf("      SKIPPED: ");
  vprintf(format, args);
  printf("\n");
  fflush(stdout);
  va_end(args);
  kr_cases.skipped = 1;
}

/* Appends "  LABEL: name\n" to a list of names (truncated when full). */
static inline void kr_case_list(char* list, size_t capacity, const char* label, const char* name) {
  const size_t used = strlen(list);
  if (used + 1 < capacity) snprintf(list + used, capacity - used, "  %s: %s\n", label, name);
}

static inline void kr_case_end(void) {
  const char* tag = "[ PASS ]";
  if (kr_case_failed()) {
    tag = "[ FAIL ]";
    ++kr_cases.failed;
    kr_case_list(kr_cases.failed_names, sizeof(kr_cases.failed_names), "FAILED", kr_cases.name);
  } else if (kr_cases.skipped) {
    tag = "[ SKIP ]";
    ++kr_cases.skips;
    kr_case_list(kr_cases.skipped_names, sizeof(kr_cases.skipped_names), "skipped",
                 kr_cases.name);
  } else {
    ++kr_cases.passed;
  }
  printf("%s %s\n", tag, kr_cases.name);
  fflush(stdout);
}

static inline int kr_case_summary(const char* name) {
  printf("\n%d passed, %d failed, %d skipped\n%s%s", kr_cases.passed, kr_cases.failed,
         kr_cases.skips, kr_cases.failed_names, kr_cases.skipped_names);
  fflush(stdout);
  return kr_check_summary(name);
}

#ifdef __cplusplus
}
#endif

#define CHECK(condition) kr_checkf(!!(condition), __FILE__, __LINE__, "%s", #condition)
#define CHECKF(condition, ...) kr_checkf(!!(condition), __FILE__, __LINE__, __VA_ARGS__)
#define REQUIRE(condition)                                  \
  do {                                                      \
    if (!CHECK(condition)) exit(kr_check_summary("required check failed")); \
  } while (0)

#endif /* KR_CHECK_H */
