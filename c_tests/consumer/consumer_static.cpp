// consumer_static.cpp: a C++ program built against an installed
// kernel-replay (static library) through the headers that mirror
// rocprofiler-sdk's modules. Exits 0 only if the library answers as
// documented.
#include <kernel_replay/memory_snapshot.hpp>
#include <kernel_replay/memory_tracker.hpp>

#include <cstdio>
#include <cstring>

int main() {
  int failures = 0;
  if (std::strcmp(kr_version(), KR_EXPECTED_VERSION) != 0) {
    std::fprintf(stderr, "kr_version() is %s, the package says %s\n", kr_version(),
                 KR_EXPECTED_VERSION);
    ++failures;
  }
  namespace kr = rocprofiler::kernel_replay;
  kr::memory_tracker_init(static_cast<CoreApiTable*>(nullptr), 0);  // logged, nothing installed
  if (kr::memory_tracker::tracking_enabled()) {
    std::fprintf(stderr, "tracking is on without being enabled\n");
    ++failures;
  }
  const kr::memory_snapshot::device_snapshot_t empty;
  if (!empty.ok || !empty.empty() || !kr::memory_snapshot::restore(empty)) {
    std::fprintf(stderr, "an empty snapshot is not handled as documented\n");
    ++failures;
  }
  if (kr_host_bytes_in_use() != 0) {
    std::fprintf(stderr, "host bytes in use without any snapshot\n");
    ++failures;
  }
  if (failures != 0) return 1;
  std::printf("consumer_static: kernel-replay %s OK\n", kr_version());
  return 0;
}
