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
 * C99 and C++11 and later, warning-free under -Wall -Wextra -Wpedantic. The
 * counters are one pair per program whatever the number of translation
 * units including this (weak definitions), and thread-safe (atomic adds), so
 * threads of a concurrency test may check too. */
#ifndef KR_CHECK_H
#define KR_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

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
  fprintf(stderr, "%s:%d: check failed: ", file, line);
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
