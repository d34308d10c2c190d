// kernel_replay_gpu_test: kernel-replay against real device memory and real
// kernels, on an NVIDIA GPU through the test runtime's CUDA backend
// (testing/hsa-runtime, "HSA-on-CUDA").
//
// The program is a tool and an application in one process, like the demo:
// the tool half installs libkernel_replay.so (unchanged, built on a Rust
// machine) over HSA-on-CUDA's tables; the application half allocates through
// the plain HSA names (so through kernel-replay's wrappers), loads a cubin
// per GPU and launches CUDA kernels that mutate their inputs in place. Each
// check is a named test that prints PASS / FAIL / SKIP with its details; the
// exit code is 0 when nothing failed, 1 otherwise, 77 without a GPU.
//
//   kernel_replay_gpu_test --cubin gpu/out/kernels.cubin [--only TEXT]
//                          [--storage auto,device,pinned,pageable,baseline]
//                          [--quick]   (smaller buffers, for the fake driver)
//   kernel_replay_gpu_test --before-init    (no driver needed: kernel-replay
//                          installs over the runtime's tables before init)
//
// When the library has storage policies (kr_set_storage_policy, resolved at
// run time), the replay tests run once per policy (all of them unless
// --storage names some); with an older library, once with its behaviour.
//
// Readbacks use cuMemcpy (unified addressing) straight from the driver, never
// the runtime under test, so a wrong copy in the runtime cannot hide itself.

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include "check.h"
#include "harness.h"
#include "pattern.h"

using harness::bytes_text;
using harness::cu;

namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr uint64_t GiB = 1024 * MiB;
constexpr uint32_t kSalt = 0x5A17;
constexpr uint32_t kConstTableWords = 256;
// Module variables every snapshot of a GPU captures: pass_counter (8 bytes)
// and const_table (1 KiB).
constexpr size_t kModuleVariables = 2;
constexpr uint64_t kModuleVariableBytes = 8 + kConstTableWords * 4;

// Copies the tests make the runtime refuse on purpose; the final accounting
// expects exactly these.
uint64_t g_expected_violations = 0;
// --quick (CI on the fake driver, which runs kernels on the host): test c's
// largest buffer is 16 MiB instead of 256 MiB.
bool g_quick = false;

// Copies the runtime refused (HSA_RT_COUNT_COPY_VIOLATIONS).
uint64_t refused_copies() { return hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS); }

// ---- reporting ----------------------------------------------------------------

// Named tests on check.h's cases (testing/check.h): PASS / FAIL / SKIP per
// test, the failed and skipped names in the summary.
class Reporter {
 public:
  void begin(const std::string& name) {
    started_ = harness::now_seconds();
    kr_case_begin(name.c_str());
  }

  __attribute__((format(printf, 2, 3))) void note(const char* format, ...) {
    std::va_list args;
    va_start(args, format);
    std::printf("      ");
    std::vprintf(format, args);
    std::printf("\n");
    std::fflush(stdout);
    va_end(args);
  }

  __attribute__((format(printf, 2, 3))) void fail(const char* format, ...) {
    std::va_list args;
    va_start(args, format);
    kr_checkv(0, nullptr, 0, format, args);
    va_end(args);
  }

  __attribute__((format(printf, 3, 4))) bool expect(bool condition, const char* format, ...) {
    std::va_list args;
    va_start(args, format);
    kr_checkv(condition, nullptr, 0, format, args);
    va_end(args);
    return condition;
  }

  __attribute__((format(printf, 2, 3))) void skip(const char* format, ...) {
    char reason[512];
    std::va_list args;
    va_start(args, format);
    std::vsnprintf(reason, sizeof(reason), format, args);
    va_end(args);
    kr_case_skip("%s", reason);
  }

  bool cuda(CUresult result, const char* call, int line) {
    return kr_checkf(harness::cuda_ok(result, call, __FILE__, line), __FILE__, line, "%s", call);
  }

  bool hsa(hsa_status_t status, const char* call, int line) {
    return kr_checkf(harness::hsa_ok(status, call, __FILE__, line), __FILE__, line, "%s", call);
  }

  bool failed() const { return kr_case_failed(); }

  void end() {
    note("(%.2f s)", harness::now_seconds() - started_);
    kr_case_end();
  }

  int summary() const { return kr_case_summary("kernel_replay_gpu_test"); }

 private:
  double started_ = 0;
};

#define T_CU(r, call) (r).cuda((call), #call, __LINE__)
#define T_HSA(r, call) (r).hsa((call), #call, __LINE__)
#define T_CU_REQUIRE(r, call) \
  do {                        \
    if (!T_CU(r, call)) return; \
  } while (0)
#define T_HSA_REQUIRE(r, call) \
  do {                         \
    if (!T_HSA(r, call)) return; \
  } while (0)

// ---- kernel-replay's log ------------------------------------------------------------

std::mutex g_log_mutex;
std::vector<std::string> g_log;

void on_log(kr_log_level_t level, const char* message, void*) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  std::printf("      [kernel-replay %s] %s\n",
              level == KR_LOG_ERROR ? "ERROR" : level == KR_LOG_WARN ? "WARN" : "INFO", message);
  std::fflush(stdout);
  g_log.emplace_back(message);
}

size_t log_size() {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  return g_log.size();
}

// True when a message logged since `from` contains `text`.
bool logged_since(size_t from, const char* text) {
  std::lock_guard<std::mutex> lock(g_log_mutex);
  for (size_t i = from; i < g_log.size(); ++i) {
    if (g_log[i].find(text) != std::string::npos) return true;
  }
  return false;
}

// ---- per-GPU module and scratch --------------------------------------------------------

struct Module {
  harness::Gpu gpu;
  hsa_executable_t executable{0};
  CUstream stream = nullptr;
  CUfunction saxpy = nullptr;
  CUfunction bump_pass_counter = nullptr;
  CUfunction read_const_table = nullptr;
  CUfunction fill_pattern = nullptr;
  CUfunction mutate = nullptr;
  CUfunction count_mismatches = nullptr;
  uint64_t pass_counter = 0;  // device address of the __device__ variable
  uint64_t const_table = 0;   // device address of the __constant__ table
  // Scratch straight from CUDA (not from the runtime, so never tracked and
  // never in a snapshot). The mismatch counter is device memory: kernels add
  // to it atomically, and atomics on mapped host memory are not guaranteed
  // over every host link. Pinned host memory holds what kernels only store:
  // the counter values they observed and the constant table as they read it.
  CUdeviceptr counter = 0;
  unsigned char* scratch = nullptr;
  // Test h's AQL queue, kernarg buffer and completion signal (made on first
  // use, through the runtime's tables, as HIP makes them).
  hsa_queue_t* queue = nullptr;
  void* kernarg = nullptr;
  hsa_signal_t completion{0};
  unsigned long long* observed() const {
    return reinterpret_cast<unsigned long long*>(scratch + 64);
  }
  unsigned int* const_copy() const { return reinterpret_cast<unsigned int*>(scratch + 4096); }
};
constexpr size_t kScratchBytes = 64 * KiB;
constexpr uint32_t kMaxObservedPasses = 16;

std::vector<Module> g_modules;

bool load_module(Reporter& r, const harness::Gpu& gpu, const char* cubin, Module* m) {
  m->gpu = gpu;
  if (!T_HSA(r, hsa_rt_executable_load_file(gpu.agent, cubin, &m->executable))) return false;
  uint32_t size = 0;
  if (!T_HSA(r, hsa_rt_executable_register_variable(m->executable, "pass_counter", false,
                                                      &m->pass_counter, &size))) {
    return false;
  }
  if (!r.expect(size == 8, "pass_counter is %u bytes, expected 8", size)) return false;
  if (!T_HSA(r, hsa_rt_executable_register_variable(m->executable, "const_table", true,
                                                      &m->const_table, &size))) {
    return false;
  }
  if (!r.expect(size == kConstTableWords * 4, "const_table is %u bytes, expected %u", size,
                kConstTableWords * 4)) {
    return false;
  }
  const struct {
    const char* name;
    CUfunction* function;
  } kernels[] = {{"saxpy", &m->saxpy},
                 {"bump_pass_counter", &m->bump_pass_counter},
                 {"read_const_table", &m->read_const_table},
                 {"fill_pattern", &m->fill_pattern},
                 {"mutate", &m->mutate},
                 {"count_mismatches", &m->count_mismatches}};
  for (const auto& kernel : kernels) {
    if (!T_HSA(r, harness::register_kernel(m->executable, kernel.name,
                                                      kernel.function))) {
      return false;
    }
  }
  harness::ContextScope scope(gpu.context);
  if (!scope.ok()) return false;
  if (!T_CU(r, cu().cuStreamCreate(&m->stream, CU_STREAM_DEFAULT))) return false;
  void* scratch = nullptr;
  if (!T_CU(r, cu().cuMemHostAlloc(&scratch, kScratchBytes,
                                   CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP))) {
    return false;
  }
  m->scratch = static_cast<unsigned char*>(scratch);
  std::memset(m->scratch, 0, kScratchBytes);
  return T_CU(r, cu().cuMemAlloc(&m->counter, sizeof(unsigned long long)));
}

// Test h's queue, kernarg buffer and signal (before the final accounting,
// which expects none).
void release_aql(Module& m) {
  if (m.queue != nullptr) KR_HSA(hsa_rt_core_table()->hsa_queue_destroy_fn(m.queue));
  if (m.kernarg != nullptr) KR_HSA(hsa_amd_memory_pool_free(m.kernarg));
  if (m.completion.handle != 0) KR_HSA(hsa_signal_destroy(m.completion));
  m.queue = nullptr;
  m.kernarg = nullptr;
  m.completion = hsa_signal_t{0};
}

void unload_module(Module& m) {
  release_aql(m);
  harness::ContextScope scope(m.gpu.context);
  if (m.counter != 0) KR_CU(cu().cuMemFree(m.counter));
  if (m.scratch != nullptr) KR_CU(cu().cuMemFreeHost(m.scratch));
  if (m.stream != nullptr) KR_CU(cu().cuStreamDestroy(m.stream));
  // Through the table, as an application unloads: a tool's wrapper (the
  // library wraps hsa_executable_destroy when it tracks unloads) sees it.
  if (m.executable.handle != 0) KR_HSA(hsa_executable_destroy(m.executable));
  m = Module{};
}

// ---- launches ------------------------------------------------------------------------

// Launches a grid-stride kernel over n elements on the module's stream and
// waits for it; any launch or execution error fails the test.
bool launch(Reporter& r, const Module& m, CUfunction function, unsigned long long n,
            void** params, const char* what) {
  harness::ContextScope scope(m.gpu.context);
  if (!scope.ok()) return false;
  const unsigned int block = 256;
  const unsigned long long blocks = std::max<unsigned long long>(1, (n + block - 1) / block);
  const auto grid = static_cast<unsigned int>(std::min<unsigned long long>(blocks, 32768));
  const CUresult launched =
      cu().cuLaunchKernel(function, grid, 1, 1, block, 1, 1, 0, m.stream, params, nullptr);
  if (!r.cuda(launched, what, __LINE__)) return false;
  return r.cuda(cu().cuStreamSynchronize(m.stream), what, __LINE__);
}

bool fill(Reporter& r, const Module& m, void* p, uint64_t bytes, uint32_t seed) {
  unsigned long long n = bytes / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
  unsigned int s = seed;
  void* params[] = {&ptr, &n, &s};
  return launch(r, m, m.fill_pattern, n, params, "fill_pattern");
}

bool mutate(Reporter& r, const Module& m, void* p, uint64_t bytes) {
  unsigned long long n = bytes / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
  unsigned int salt = kSalt;
  void* params[] = {&ptr, &n, &salt};
  return launch(r, m, m.mutate, n, params, "mutate");
}

// Elements of the buffer that differ from the pattern (or from the mutated
// pattern); UINT64_MAX on a launch error (already reported).
uint64_t mismatches(Reporter& r, const Module& m, const void* p, uint64_t bytes, uint32_t seed,
                    bool mutated) {
  harness::ContextScope scope(m.gpu.context);
  // On the legacy stream, which the kernel's (blocking) stream waits for.
  if (!T_CU(r, cu().cuMemsetD32(m.counter, 0, 2))) return UINT64_MAX;
  unsigned long long n = bytes / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
  unsigned int s = seed;
  unsigned int is_mutated = mutated ? 1 : 0;
  unsigned int salt = kSalt;
  CUdeviceptr out = m.counter;
  void* params[] = {&ptr, &n, &s, &is_mutated, &salt, &out};
  if (!launch(r, m, m.count_mismatches, n, params, "count_mismatches")) return UINT64_MAX;
  unsigned long long count = 0;
  if (!T_CU(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(&count), m.counter, sizeof(count)))) {
    return UINT64_MAX;
  }
  return count;
}

uint32_t expected_word(uint32_t seed, uint64_t index, bool mutated) {
  const uint32_t value = kr_pattern(seed, index);
  return mutated ? kr_mutate(value, kSalt) : value;
}

// Reads windows of the buffer back with cuMemcpy (first, last, and `windows`
// pseudo-random ones of up to 4 KiB) and compares them on the host.
bool sampled_check(Reporter& r, const Module& m, const void* p, uint64_t bytes, uint32_t seed,
                   bool mutated, int windows, const char* what) {
  harness::ContextScope scope(m.gpu.context);
  if (!scope.ok()) return false;
  const uint64_t words = bytes / 4;
  const uint64_t window = std::min<uint64_t>(1024, words);
  std::vector<uint64_t> starts{0, words - window};
  uint64_t state = 0x9E3779B97F4A7C15ull ^ seed;
  for (int i = 0; i < windows; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    starts.push_back(words > window ? (state >> 11) % (words - window + 1) : 0);
  }
  std::vector<uint32_t> host(window);
  for (uint64_t start : starts) {
    const auto source = reinterpret_cast<CUdeviceptr>(p) + start * 4;
    if (!T_CU(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()), source, window * 4))) {
      return false;
    }
    for (uint64_t i = 0; i < window; ++i) {
      const uint32_t expected = expected_word(seed, start + i, mutated);
      if (host[i] != expected) {
        r.fail("%s: word %" PRIu64 " reads 0x%08x, expected 0x%08x (%s pattern, seed 0x%x)", what,
               start + i, host[i], expected, mutated ? "mutated" : "original", seed);
        return false;
      }
    }
  }
  return true;
}

// Both checks: on the device over every element, and sampled on the host.
bool verify(Reporter& r, const Module& m, const void* p, uint64_t bytes, uint32_t seed,
            bool mutated, const char* what) {
  const uint64_t bad = mismatches(r, m, p, bytes, seed, mutated);
  if (bad == UINT64_MAX) return false;
  if (!r.expect(bad == 0, "%s (%s): %" PRIu64 " of %" PRIu64 " words differ from the %s pattern",
                what, bytes_text(bytes).c_str(), bad, bytes / 4,
                mutated ? "mutated" : "original")) {
    return false;
  }
  return sampled_check(r, m, p, bytes, seed, mutated, 14, what);
}

// ---- memory -----------------------------------------------------------------------------

// A block from an HSA pool, allocated and freed through the application's
// plain HSA names, so through kernel-replay's wrappers.
class PoolBuffer {
 public:
  PoolBuffer() = default;
  ~PoolBuffer() { reset(); }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  PoolBuffer(PoolBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
  }

  bool allocate(Reporter& r, hsa_amd_memory_pool_t pool, uint64_t bytes) {
    reset();
    if (!T_HSA(r, hsa_amd_memory_pool_allocate(pool, bytes, 0, &ptr_))) {
      r.note("(allocating %s)", bytes_text(bytes).c_str());
      ptr_ = nullptr;
      return false;
    }
    bytes_ = bytes;
    return true;
  }

  void reset() {
    if (ptr_ != nullptr) KR_HSA(hsa_amd_memory_pool_free(ptr_));
    ptr_ = nullptr;
  }

  void* get() const { return ptr_; }
  uint64_t bytes() const { return bytes_; }
  CUdeviceptr dptr() const { return reinterpret_cast<CUdeviceptr>(ptr_); }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

// A snapshot freed on scope exit.
struct Snapshot {
  kr_snapshot_t* s = nullptr;
  explicit Snapshot(kr_snapshot_t* snapshot) : s(snapshot) {}
  ~Snapshot() { kr_snapshot_free(s); }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;
};

// Checks a fresh snapshot: complete, with exactly the agent's tracked
// allocations plus the module variables.
bool expect_complete(Reporter& r, const Snapshot& snapshot, hsa_agent_t agent) {
  if (!r.expect(kr_snapshot_ok(snapshot.s), "snapshot declined (reason %d)",
                static_cast<int>(kr_snapshot_decline_reason(snapshot.s)))) {
    return false;
  }
  const size_t regions = kr_tracked_count(agent) + kModuleVariables;
  const uint64_t bytes = kr_tracked_bytes(agent) + kModuleVariableBytes;
  bool ok = r.expect(kr_snapshot_region_count(snapshot.s) == regions,
                     "snapshot has %zu regions, expected %zu (tracked + 2 module variables)",
                     kr_snapshot_region_count(snapshot.s), regions);
  ok &= r.expect(kr_snapshot_byte_count(snapshot.s) == bytes,
                 "snapshot holds %" PRIu64 " bytes, expected %" PRIu64,
                 kr_snapshot_byte_count(snapshot.s), bytes);
  return ok;
}

bool expect_report(Reporter& r, const kr_restore_report_t& report, size_t restored,
                   size_t skipped) {
  return r.expect(report.restored == restored && report.skipped_not_live == skipped &&
                      report.failed == 0,
                  "restore report: %zu restored, %zu skipped, %zu failed; expected %zu, %zu, 0",
                  report.restored, report.skipped_not_live, report.failed, restored, skipped);
}

// ---- (h) the runtime itself ----------------------------------------------------------------

hsa_status_t collect_pool(hsa_amd_memory_pool_t pool, void* data) {
  static_cast<std::vector<hsa_amd_memory_pool_t>*>(data)->push_back(pool);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t count_region(hsa_region_t, void* data) {
  ++*static_cast<size_t*>(data);
  return HSA_STATUS_SUCCESS;
}

void test_runtime(Reporter& r, const Module& m) {
  const hsa_agent_t gpu = m.gpu.agent;
  const hsa_agent_t cpu = hsa_rt_cpu_agent();
  hsa_device_type_t type = HSA_DEVICE_TYPE_CPU;
  T_HSA_REQUIRE(r, hsa_agent_get_info(gpu, HSA_AGENT_INFO_DEVICE, &type));
  r.expect(type == HSA_DEVICE_TYPE_GPU, "GPU agent reports device type %d", int(type));
  char name[64] = {};
  T_HSA_REQUIRE(r, hsa_agent_get_info(gpu, HSA_AGENT_INFO_NAME, name));
  r.note("GPU agent %s (%s), %s free", name, m.gpu.name.c_str(),
         bytes_text(harness::free_device_memory(gpu)).c_str());
  r.expect(std::strncmp(name, "sm_", 3) == 0, "GPU agent name '%s' is not an sm_ target", name);

  // Pools: one coarse-grained pool on the GPU, fine / kernarg / coarse on the CPU.
  std::vector<hsa_amd_memory_pool_t> gpu_pools, cpu_pools;
  T_HSA_REQUIRE(r, hsa_amd_agent_iterate_memory_pools(gpu, collect_pool, &gpu_pools));
  T_HSA_REQUIRE(r, hsa_amd_agent_iterate_memory_pools(cpu, collect_pool, &cpu_pools));
  r.expect(gpu_pools.size() == 1 && cpu_pools.size() == 3, "pools: GPU %zu, CPU %zu (want 1, 3)",
           gpu_pools.size(), cpu_pools.size());
  const uint32_t expected_cpu_flags[] = {
      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED};
  for (size_t i = 0; i < cpu_pools.size() && i < 3; ++i) {
    uint32_t flags = 0;
    T_HSA(r, hsa_amd_memory_pool_get_info(cpu_pools[i], HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                                          &flags));
    r.expect(flags == expected_cpu_flags[i], "CPU pool %zu flags 0x%x, expected 0x%x", i, flags,
             expected_cpu_flags[i]);
  }
  hsa_amd_memory_pool_access_t access = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
  T_HSA(r, hsa_amd_agent_memory_pool_get_info(gpu, m.gpu.vram,
                                              HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
  r.expect(access == HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT, "GPU -> own pool access %d",
           int(access));
  T_HSA(r, hsa_amd_agent_memory_pool_get_info(gpu, cpu_pools.at(0),
                                              HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
  r.expect(access == HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT,
           "GPU -> system pool access %d", int(access));
  size_t regions = 0;
  T_HSA(r, hsa_agent_iterate_regions(gpu, count_region, &regions));
  r.expect(regions == 4, "GPU lists %zu regions, expected its own + 3 system", regions);

  // Pointer info from the runtime's map; device memory is tracked, and host
  // memory of either grain (owned by the CPU); kernarg is not.
  const size_t tracked_gpu = kr_tracked_count(gpu);
  const size_t tracked_cpu = kr_tracked_count(cpu);
  PoolBuffer device, fine, kernarg, coarse_host;
  if (!device.allocate(r, m.gpu.vram, MiB + 100) ||
      !fine.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_FINE), 64 * KiB) ||
      !kernarg.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_KERNARG), 4 * KiB) ||
      !coarse_host.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_COARSE), 64 * KiB)) {
    return;
  }
  r.expect(kr_tracked_count(gpu) == tracked_gpu + 1, "device block not tracked once");
  r.expect(kr_tracked_count(cpu) == tracked_cpu + 2,
           "CPU agent tracks %zu new blocks, expected 2 (the fine and coarse host blocks)",
           kr_tracked_count(cpu) - tracked_cpu);
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  const auto* interior = static_cast<const char*>(device.get()) + 12345;
  T_HSA_REQUIRE(r, hsa_amd_pointer_info(interior, &info, nullptr, nullptr, nullptr));
  r.expect(info.type == HSA_EXT_POINTER_TYPE_HSA && info.agentBaseAddress == device.get() &&
               info.sizeInBytes == MiB + 4096 && info.agentOwner.handle == gpu.handle &&
               info.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
           "pointer info of an interior pointer: type %d base %p size %zu owner 0x%" PRIx64
           " flags 0x%x",
           int(info.type), info.agentBaseAddress, info.sizeInBytes, info.agentOwner.handle,
           info.global_flags);
  int on_stack = 0;
  info = hsa_amd_pointer_info_t{};
  info.size = sizeof(info);
  T_HSA(r, hsa_amd_pointer_info(&on_stack, &info, nullptr, nullptr, nullptr));
  r.expect(info.type == HSA_EXT_POINTER_TYPE_UNKNOWN, "a stack address is type %d, not UNKNOWN",
           int(info.type));
  T_HSA(r, hsa_amd_agents_allow_access(1, &cpu, nullptr, device.get()));
  uint32_t count = 0;
  hsa_agent_t* agents = nullptr;
  info.size = sizeof(info);
  T_HSA(r, hsa_amd_pointer_info(device.get(), &info, std::malloc, &count, &agents));
  r.expect(count == 2 && agents != nullptr && agents[0].handle == gpu.handle &&
               agents[1].handle == cpu.handle,
           "accessible agents after a grant: %u", count);
  std::free(agents);

  // hsa_memory_copy both ways, pageable host memory on the host side.
  std::vector<uint32_t> out(MiB / 4), back(MiB / 4, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = kr_pattern(7, i);
  const uint64_t h2d = hsa_rt_count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE);
  const uint64_t d2h = hsa_rt_count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST);
  T_HSA_REQUIRE(r, hsa_memory_copy(device.get(), out.data(), MiB));
  T_HSA_REQUIRE(r, hsa_memory_copy(back.data(), device.get(), MiB));
  r.expect(back == out, "hsa_memory_copy round trip through device memory changed the data");
  r.expect(hsa_rt_count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == h2d + 1 &&
               hsa_rt_count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == d2h + 1,
           "copy counters did not see one H2D and one D2H copy");
  const uint64_t violations = refused_copies();
  r.note("a copy past the end of an allocation must be refused (the runtime prints why):");
  r.expect(hsa_memory_copy(back.data(), device.get(), MiB + 8192) ==
               HSA_STATUS_ERROR_INVALID_ARGUMENT,
           "a copy running past the end of an allocation was not refused");
  r.expect(refused_copies() == violations + 1, "the refused copy was not counted");
  ++g_expected_violations;

  // An asynchronous copy waits for its dependency and then signals.
  hsa_signal_t dependency{0}, completion{0};
  T_HSA_REQUIRE(r, hsa_signal_create(1, 0, nullptr, &dependency));
  T_HSA(r, hsa_signal_create(1, 0, nullptr, &completion));
  for (size_t i = 0; i < 64 * KiB / 4; ++i) static_cast<uint32_t*>(fine.get())[i] = kr_pattern(9, i);
  if (T_HSA(r, hsa_amd_memory_async_copy(device.get(), gpu, fine.get(), cpu, 64 * KiB, 1,
                                         &dependency, completion))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    r.expect(hsa_signal_load_scacquire(completion) == 1,
             "the async copy completed before its dependency was satisfied");
    hsa_signal_store_screlease(dependency, 0);
    const hsa_signal_value_t value = hsa_signal_wait_scacquire(
        completion, HSA_SIGNAL_CONDITION_LT, 1, 10ull * 1000 * 1000 * 1000, HSA_WAIT_STATE_BLOCKED);
    r.expect(value == 0, "async copy completion signal reads %" PRId64 ", expected 0",
             int64_t(value));
    sampled_check(r, m, device.get(), 64 * KiB, 9, false, 4, "async copy destination");
  }
  T_HSA(r, hsa_signal_destroy(dependency));
  T_HSA(r, hsa_signal_destroy(completion));
}

// ---- (a) saxpy accumulating into y --------------------------------------------------

struct SaxpyState {
  const Module* m = nullptr;
  // Test h: dispatch saxpy through the module's AQL queue instead of
  // cuLaunchKernel.
  Module* aql = nullptr;
  CUdeviceptr x = 0;
  CUdeviceptr y = 0;
  unsigned long long n = 0;
  float a = 2.0f;
  std::vector<float> y0;                // y as pass 0 found it
  std::vector<int> entry_matches;       // per pass: 1 if y == y0 at entry
  std::vector<std::string> errors;
  uint32_t passes = 0;
};

// saxpy as HIP dispatches it on ROCm: its arguments in kernarg memory (the
// kernarg pool), a KERNEL_DISPATCH packet naming the kernel's KERNEL_OBJECT
// on an AQL queue, the doorbell, a wait on the completion signal.
CUresult saxpy_through_aql(Module& m, float a, CUdeviceptr x, CUdeviceptr y, unsigned long long n,
                           unsigned int grid) {
  const CoreApiTable& t = *hsa_rt_core_table();
  if (m.queue == nullptr) {
    if (t.hsa_queue_create_fn(m.gpu.agent, 64, HSA_QUEUE_TYPE_MULTI, nullptr, nullptr, UINT32_MAX,
                              UINT32_MAX, &m.queue) != HSA_STATUS_SUCCESS ||
        hsa_amd_memory_pool_allocate(hsa_rt_pool(hsa_rt_cpu_agent(),
                                                   HSA_RT_POOL_SYSTEM_KERNARG),
                                     64, 0, &m.kernarg) != HSA_STATUS_SUCCESS ||
        hsa_signal_create(0, 0, nullptr, &m.completion) != HSA_STATUS_SUCCESS) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  // saxpy(float a, const float* x, float* y, unsigned long long n): the
  // kernarg segment with each argument at its natural alignment.
  auto* args = static_cast<unsigned char*>(m.kernarg);
  std::memset(args, 0, 64);
  std::memcpy(args, &a, sizeof(a));
  std::memcpy(args + 8, &x, sizeof(x));
  std::memcpy(args + 16, &y, sizeof(y));
  std::memcpy(args + 24, &n, sizeof(n));
  t.hsa_signal_store_screlease_fn(m.completion, 1);
  // The packet as HIP writes it (the runtime's helper: slot, body, header
  // with one release store, doorbell), through the live tables.
  hsa_rt_submit_dispatch(m.queue, reinterpret_cast<uint64_t>(m.saxpy), m.kernarg, grid * 256,
                         256, 0, m.completion);
  const hsa_signal_value_t left =
      t.hsa_signal_wait_scacquire_fn(m.completion, HSA_SIGNAL_CONDITION_LT, 1,
                                     60ull * 1000 * 1000 * 1000, HSA_WAIT_STATE_BLOCKED);
  return left == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

void saxpy_pass(uint32_t pass, void* user_data) {
  auto& s = *static_cast<SaxpyState*>(user_data);
  ++s.passes;
  harness::ContextScope scope(s.m->gpu.context);
  std::vector<float> entry(s.n);
  const CUresult read = cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(entry.data()), s.y,
                                      s.n * sizeof(float));
  if (read != CUDA_SUCCESS) {
    s.errors.push_back("pass " + std::to_string(pass) + ": reading y: " +
                       harness::cuda_error_text(read));
    return;
  }
  if (s.entry_matches.size() <= pass) s.entry_matches.resize(pass + 1, 0);
  s.entry_matches[pass] = std::memcmp(entry.data(), s.y0.data(), s.n * sizeof(float)) == 0;
  float a = s.a;
  CUdeviceptr x = s.x;
  CUdeviceptr y = s.y;
  unsigned long long n = s.n;
  void* params[] = {&a, &x, &y, &n};
  const unsigned int grid = 4096;
  CUresult result = CUDA_SUCCESS;
  if (s.aql != nullptr) {
    result = saxpy_through_aql(*s.aql, a, x, y, n, grid);
  } else {
    result =
        cu().cuLaunchKernel(s.m->saxpy, grid, 1, 1, 256, 1, 1, 0, s.m->stream, params, nullptr);
    if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(s.m->stream);
  }
  if (result != CUDA_SUCCESS) {
    s.errors.push_back("pass " + std::to_string(pass) + ": saxpy: " +
                       harness::cuda_error_text(result));
  }
}

void test_saxpy(Reporter& r, const Module& m, Module* aql = nullptr) {
  const unsigned long long n = 4 * MiB;  // 16 MiB per vector
  const uint64_t bytes = n * sizeof(float);
  PoolBuffer x, y;
  if (!x.allocate(r, m.gpu.vram, bytes) || !y.allocate(r, m.gpu.vram, bytes)) return;
  // Small integers and halves: every a * x + y below is exact in float, with
  // or without FMA contraction, so host and device agree bit for bit.
  std::vector<float> hx(n), hy(n);
  for (unsigned long long i = 0; i < n; ++i) {
    hx[i] = static_cast<float>(i % 13) * 0.5f;
    hy[i] = static_cast<float>(i % 7) + 0.25f;
  }
  T_HSA_REQUIRE(r, hsa_memory_copy(x.get(), hx.data(), bytes));
  T_HSA_REQUIRE(r, hsa_memory_copy(y.get(), hy.data(), bytes));

  SaxpyState s;
  s.m = &m;
  s.aql = aql;
  s.x = x.dptr();
  s.y = y.dptr();
  s.n = n;
  s.y0 = hy;
  const uint32_t passes = 5;
  const kr_replay_result_t result = kr_replay(m.gpu.agent, passes, saxpy_pass, &s);
  r.expect(result.replayed && result.passes_run == passes &&
               result.decline_reason == KR_DECLINE_NONE && result.restore_failures == 0,
           "kr_replay: replayed %d, passes %u, decline %d, restore failures %zu",
           int(result.replayed), result.passes_run, int(result.decline_reason),
           result.restore_failures);
  for (const std::string& error : s.errors) r.fail("%s", error.c_str());
  r.expect(s.passes == passes, "%u passes ran, expected %u", s.passes, passes);
  for (uint32_t pass = 0; pass < s.entry_matches.size(); ++pass) {
    r.expect(s.entry_matches[pass] == 1, "pass %u saw a y different from pass 0's", pass);
  }
  // After the window y holds exactly one pass's effect on pass 0's input.
  harness::ContextScope scope(m.gpu.context);
  std::vector<float> after(n);
  T_CU_REQUIRE(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(after.data()), y.dptr(), bytes));
  unsigned long long wrong = 0;
  for (unsigned long long i = 0; i < n; ++i) wrong += after[i] != s.a * hx[i] + hy[i] ? 1 : 0;
  r.expect(wrong == 0, "%llu elements of y after the window are not y0 + a*x", wrong);

  // The control: the same passes without restores see a different y from
  // pass 1 on, so the comparison above really detects an unrestored input.
  T_HSA_REQUIRE(r, hsa_memory_copy(y.get(), hy.data(), bytes));
  SaxpyState control = s;
  control.entry_matches.clear();
  control.errors.clear();
  control.passes = 0;
  saxpy_pass(0, &control);
  saxpy_pass(1, &control);
  for (const std::string& error : control.errors) r.fail("control: %s", error.c_str());
  r.expect(control.entry_matches.size() == 2 && control.entry_matches[0] == 1 &&
               control.entry_matches[1] == 0,
           "without a restore, pass 1 should see a y different from pass 0's");
  r.note("5 passes replayed over %s of x and y; each pass saw pass 0's y",
         bytes_text(2 * bytes).c_str());
}

// ---- (b) __device__ counter and __constant__ table ----------------------------------------

struct CounterState {
  const Module* m = nullptr;
  std::vector<uint32_t> table;
  std::vector<std::string> errors;
  std::vector<unsigned long long> counter_at_entry;  // read from the host
  std::vector<int> table_matches;                    // as kernels read it
  uint32_t passes = 0;
};

void counter_pass(uint32_t pass, void* user_data) {
  auto& s = *static_cast<CounterState*>(user_data);
  const Module& m = *s.m;
  ++s.passes;
  harness::ContextScope scope(m.gpu.context);
  auto error = [&](const char* what, CUresult result) {
    s.errors.push_back("pass " + std::to_string(pass) + ": " + what + ": " +
                       harness::cuda_error_text(result));
  };
  unsigned long long counter = ~0ull;
  CUresult result = cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(&counter), m.pass_counter, 8);
  if (result != CUDA_SUCCESS) return error("reading pass_counter", result);
  s.counter_at_entry.push_back(counter);
  // The constant table as a kernel sees it.
  unsigned int* out = m.const_copy();
  std::memset(out, 0, kConstTableWords * 4);
  unsigned int words = kConstTableWords;
  void* read_params[] = {&out, &words};
  result = cu().cuLaunchKernel(m.read_const_table, 1, 1, 1, 256, 1, 1, 0, m.stream, read_params,
                               nullptr);
  if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(m.stream);
  if (result != CUDA_SUCCESS) return error("read_const_table", result);
  s.table_matches.push_back(std::memcmp(out, s.table.data(), kConstTableWords * 4) == 0);
  // The kernel under replay: reports the counter it found and bumps it.
  unsigned long long* observed = m.observed() + std::min(pass, kMaxObservedPasses - 1);
  void* bump_params[] = {&observed};
  result = cu().cuLaunchKernel(m.bump_pass_counter, 1, 1, 1, 32, 1, 1, 0, m.stream, bump_params,
                               nullptr);
  if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(m.stream);
  if (result != CUDA_SUCCESS) return error("bump_pass_counter", result);
  // Constant memory is written by the host only; the pass overwrites it so
  // the next pass sees the snapshot's table only if restore wrote it back.
  std::vector<uint32_t> scribble(kConstTableWords);
  for (uint32_t i = 0; i < kConstTableWords; ++i) scribble[i] = ~s.table[i];
  result = cu().cuMemcpy(m.const_table, reinterpret_cast<CUdeviceptr>(scribble.data()),
                         kConstTableWords * 4);
  if (result != CUDA_SUCCESS) return error("overwriting const_table", result);
}

void test_module_variables(Reporter& r, const Module& m) {
  harness::ContextScope scope(m.gpu.context);
  std::vector<uint32_t> table(kConstTableWords);
  for (uint32_t i = 0; i < kConstTableWords; ++i) table[i] = kr_pattern(0xC0DE, i);
  const unsigned long long zero = 0;
  T_CU_REQUIRE(r, cu().cuMemcpy(m.const_table, reinterpret_cast<CUdeviceptr>(table.data()),
                                kConstTableWords * 4));
  T_CU_REQUIRE(r, cu().cuMemcpy(m.pass_counter, reinterpret_cast<CUdeviceptr>(&zero), 8));
  std::memset(m.observed(), 0xFF, kMaxObservedPasses * 8);

  {
    // The snapshot captures both variables as regions of their own.
    Snapshot snapshot(kr_snap(m.gpu.agent));
    expect_complete(r, snapshot, m.gpu.agent);
    r.note("snapshot of %s: %zu regions (%zu tracked allocations + pass_counter + const_table)",
           m.gpu.name.c_str(), kr_snapshot_region_count(snapshot.s),
           kr_tracked_count(m.gpu.agent));
  }

  CounterState s;
  s.m = &m;
  s.table = table;
  const uint32_t passes = 5;
  const kr_replay_result_t result = kr_replay(m.gpu.agent, passes, counter_pass, &s);
  r.expect(result.replayed && result.passes_run == passes && result.restore_failures == 0,
           "kr_replay: replayed %d, passes %u, restore failures %zu", int(result.replayed),
           result.passes_run, result.restore_failures);
  for (const std::string& error : s.errors) r.fail("%s", error.c_str());
  r.expect(s.passes == passes, "%u passes ran, expected %u", s.passes, passes);
  for (uint32_t pass = 0; pass < s.counter_at_entry.size(); ++pass) {
    r.expect(s.counter_at_entry[pass] == 0, "pass %u: pass_counter reads %llu at entry", pass,
             s.counter_at_entry[pass]);
    r.expect(m.observed()[pass] == 0, "pass %u: the kernel found pass_counter = %llu", pass,
             m.observed()[pass]);
  }
  for (uint32_t pass = 0; pass < s.table_matches.size(); ++pass) {
    r.expect(s.table_matches[pass] == 1, "pass %u: kernels saw a different const_table", pass);
  }
  // After the window: one bump, and the last pass's scribble (no restore
  // follows the last pass).
  unsigned long long counter = 0;
  T_CU_REQUIRE(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(&counter), m.pass_counter, 8));
  r.expect(counter == 1, "pass_counter is %llu after the window, expected 1", counter);
  std::vector<uint32_t> now(kConstTableWords);
  T_CU_REQUIRE(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(now.data()), m.const_table,
                                kConstTableWords * 4));
  r.expect(now[0] == ~table[0], "const_table was not left as the last pass wrote it");
  T_CU(r, cu().cuMemcpy(m.const_table, reinterpret_cast<CUdeviceptr>(table.data()),
                        kConstTableWords * 4));
  T_CU(r, cu().cuMemcpy(m.pass_counter, reinterpret_cast<CUdeviceptr>(&zero), 8));
}

// ---- (c) several buffers, and memory left alone ---------------------------------------------

void test_buffers(Reporter& r, const Module& m, const Module* peer) {
  const uint64_t sizes[] = {4 * KiB, 64 * KiB + 4, MiB, 16 * MiB, g_quick ? 16 * MiB : 256 * MiB};
  uint64_t total = 0;
  for (uint64_t size : sizes) total += size;
  const uint64_t free_bytes = harness::free_device_memory(m.gpu.agent);
  if (free_bytes < total + GiB) {
    r.skip("%s has %s free; this test needs %s", m.gpu.name.c_str(),
           bytes_text(free_bytes).c_str(), bytes_text(total + GiB).c_str());
    return;
  }
  const hsa_agent_t cpu = hsa_rt_cpu_agent();
  std::vector<PoolBuffer> tracked(std::size(sizes));
  for (size_t k = 0; k < tracked.size(); ++k) {
    if (!tracked[k].allocate(r, m.gpu.vram, sizes[k])) return;
    if (!fill(r, m, tracked[k].get(), sizes[k], 0x100 + uint32_t(k))) return;
  }
  // Left alone by a snapshot of this GPU: host memory of both grains
  // (tracked, owned by the CPU agent, but never granted to this GPU) and a
  // block on the other GPU.
  PoolBuffer fine, coarse_host, other;
  const uint64_t side = MiB;
  if (!fine.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_FINE), side) ||
      !coarse_host.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_COARSE), side)) {
    return;
  }
  if (!fill(r, m, fine.get(), side, 0x200)) return;
  auto* coarse_words = static_cast<uint32_t*>(coarse_host.get());
  for (uint64_t i = 0; i < side / 4; ++i) coarse_words[i] = kr_pattern(0x201, i);
  if (peer != nullptr) {
    if (!other.allocate(r, peer->gpu.vram, side) || !fill(r, *peer, other.get(), side, 0x202)) {
      return;
    }
  }

  Snapshot snapshot(kr_snap(m.gpu.agent));
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  const size_t regions = kr_snapshot_region_count(snapshot.s);
  r.note("snapshot of %s: %zu regions, %s", m.gpu.name.c_str(), regions,
         bytes_text(kr_snapshot_byte_count(snapshot.s)).c_str());

  // The "kernel" writes everything, tracked or not.
  for (size_t k = 0; k < tracked.size(); ++k) {
    if (!mutate(r, m, tracked[k].get(), sizes[k])) return;
  }
  if (!mutate(r, m, fine.get(), side)) return;
  for (uint64_t i = 0; i < side / 4; ++i) coarse_words[i] = kr_mutate(coarse_words[i], kSalt);
  if (peer != nullptr && !mutate(r, *peer, other.get(), side)) return;
  for (size_t k = 0; k < tracked.size(); ++k) {
    if (!verify(r, m, tracked[k].get(), sizes[k], 0x100 + uint32_t(k), true, "mutated buffer")) {
      return;
    }
  }

  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, regions, 0);
  for (size_t k = 0; k < tracked.size(); ++k) {
    const std::string what = "restored " + bytes_text(sizes[k]) + " buffer";
    verify(r, m, tracked[k].get(), sizes[k], 0x100 + uint32_t(k), false, what.c_str());
  }
  verify(r, m, fine.get(), side, 0x200, true, "fine-grained host buffer (left alone)");
  uint64_t coarse_wrong = 0;
  for (uint64_t i = 0; i < side / 4; ++i) {
    coarse_wrong += coarse_words[i] != kr_mutate(kr_pattern(0x201, i), kSalt) ? 1 : 0;
  }
  r.expect(coarse_wrong == 0, "coarse host buffer (CPU agent's) changed by the GPU restore");
  if (peer != nullptr) verify(r, *peer, other.get(), side, 0x202, true, "other GPU's buffer");
}

// ---- (q) host memory a kernel writes --------------------------------------------------------

// Host memory granted or locked to the GPU, written by the GPU's kernel in
// every pass: hipHostMalloc (a CPU pool's allocation + allow_access, both
// grains) and hipHostRegister (malloc'd memory locked to the fine pool for
// the GPU). Each pass must see the bytes of the first; at the last unlock
// the registered range is retired.
void test_host_memory(Reporter& r, const Module& m) {
  const uint64_t size = g_quick ? 4 * MiB : 64 * MiB;
  const hsa_agent_t cpu = hsa_rt_cpu_agent();
  hsa_agent_t gpu = m.gpu.agent;
  const hsa_amd_memory_pool_t fine_pool = hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_FINE);
  PoolBuffer fine, coarse;
  if (!fine.allocate(r, fine_pool, size) ||
      !coarse.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_COARSE), size)) {
    return;
  }
  T_HSA(r, hsa_amd_agents_allow_access(1, &gpu, nullptr, fine.get()));
  T_HSA(r, hsa_amd_agents_allow_access(1, &gpu, nullptr, coarse.get()));
  void* registered = std::aligned_alloc(4096, size);
  if (!r.expect(registered != nullptr, "aligned_alloc of %s", bytes_text(size).c_str())) return;
  void* agent_ptr = nullptr;
  if (!T_HSA(r, hsa_amd_memory_lock_to_pool(registered, size, &gpu, 1, fine_pool, 0, &agent_ptr))) {
    std::free(registered);
    return;
  }
  struct Host {
    void* p;
    uint32_t seed;
    const char* what;
  } const host[] = {{fine.get(), 0x500, "fine-grained host pool buffer"},
                    {coarse.get(), 0x501, "coarse-grained host pool buffer"},
                    {agent_ptr, 0x502, "registered (locked) host memory"}};
  bool ok = true;
  // Each step names the buffer it failed on.
  const auto step = [&](bool done, const Host& h, const char* what, int pass) {
    if (!done) r.note("(%s of the %s, pass %d)", what, h.what, pass);
    ok = ok && done;
  };
  for (const Host& h : host) {
    if (ok) step(fill(r, m, h.p, size, h.seed), h, "filling", 0);
  }
  if (ok) {
    // The estimate counts the host memory granted to the GPU as well.
    const kr_footprint_t estimate = kr_estimate_footprint(gpu);
    Snapshot snapshot(kr_snap(gpu));
    if (r.expect(kr_snapshot_ok(snapshot.s), "snapshot declined (reason %d)",
                 static_cast<int>(kr_snapshot_decline_reason(snapshot.s))) &&
        r.expect(kr_snapshot_region_count(snapshot.s) == estimate.regions &&
                     kr_snapshot_byte_count(snapshot.s) == estimate.bytes,
                 "snapshot of %zu regions, %" PRIu64 " bytes; estimated %zu, %" PRIu64,
                 kr_snapshot_region_count(snapshot.s), kr_snapshot_byte_count(snapshot.s),
                 estimate.regions, estimate.bytes)) {
      r.expect(kr_snapshot_kind_bytes(snapshot.s, KR_MEMORY_HOST) == 2 * size &&
                   kr_snapshot_kind_bytes(snapshot.s, KR_MEMORY_LOCKED) == size,
               "host %" PRIu64 " and locked %" PRIu64 " bytes captured, expected %" PRIu64
               " and %" PRIu64,
               kr_snapshot_kind_bytes(snapshot.s, KR_MEMORY_HOST),
               kr_snapshot_kind_bytes(snapshot.s, KR_MEMORY_LOCKED), 2 * size, size);
      const size_t regions = kr_snapshot_region_count(snapshot.s);
      for (int pass = 0; pass < 3 && ok; ++pass) {
        // The pass: the kernel writes every host buffer in place.
        for (const Host& h : host) {
          if (ok) step(mutate(r, m, h.p, size), h, "writing", pass);
        }
        for (const Host& h : host) {
          if (ok) step(verify(r, m, h.p, size, h.seed, true, h.what), h, "checking", pass);
        }
        kr_restore_report_t report{};
        kr_restore_with_report(snapshot.s, &report);
        ok = ok && expect_report(r, report, regions, 0);
        for (const Host& h : host) {
          if (ok) step(verify(r, m, h.p, size, h.seed, false, h.what), h, "restoring", pass);
        }
      }
      // The last unlock retires the registered range: the next restore
      // skips it and leaves what the host wrote there since (no GPU may
      // touch it once unlocked).
      T_HSA(r, hsa_amd_memory_unlock(registered));
      if (ok) {
        std::memset(registered, 0x5A, size);
        kr_restore_report_t report{};
        kr_restore_with_report(snapshot.s, &report);
        expect_report(r, report, regions - 1, 1);
        const auto* bytes = static_cast<const uint8_t*>(registered);
        r.expect(std::all_of(bytes, bytes + size, [](uint8_t b) { return b == 0x5A; }),
                 "unlocked host memory written by the restore");
      }
    }
  } else {
    T_HSA(r, hsa_amd_memory_unlock(registered));
  }
  std::free(registered);
}

void test_two_agents(Reporter& r, const Module& m0, const Module& m1) {
  const uint64_t size = 16 * MiB;
  PoolBuffer a0, a1;
  if (!a0.allocate(r, m0.gpu.vram, size) || !a1.allocate(r, m1.gpu.vram, size)) return;
  if (!fill(r, m0, a0.get(), size, 0x300) || !fill(r, m1, a1.get(), size, 0x301)) return;
  Snapshot s0(kr_snap(m0.gpu.agent));
  Snapshot s1(kr_snap(m1.gpu.agent));
  if (!expect_complete(r, s0, m0.gpu.agent) || !expect_complete(r, s1, m1.gpu.agent)) return;
  if (!mutate(r, m0, a0.get(), size) || !mutate(r, m1, a1.get(), size)) return;
  kr_restore_report_t report{};
  kr_restore_with_report(s0.s, &report);
  expect_report(r, report, kr_snapshot_region_count(s0.s), 0);
  verify(r, m0, a0.get(), size, 0x300, false, "GPU 0 buffer after GPU 0's restore");
  verify(r, m1, a1.get(), size, 0x301, true, "GPU 1 buffer after GPU 0's restore (left alone)");
  kr_restore_with_report(s1.s, &report);
  expect_report(r, report, kr_snapshot_region_count(s1.s), 0);
  verify(r, m1, a1.get(), size, 0x301, false, "GPU 1 buffer after GPU 1's restore");
}

// ---- (d) freed between snap and restore ------------------------------------------------------

void test_freed_buffer(Reporter& r, const Module& m) {
  PoolBuffer a, b;
  if (!a.allocate(r, m.gpu.vram, MiB) || !b.allocate(r, m.gpu.vram, MiB)) return;
  if (!fill(r, m, a.get(), MiB, 0x400) || !fill(r, m, b.get(), MiB, 0x401)) return;
  Snapshot snapshot(kr_snap(m.gpu.agent));
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  const size_t regions = kr_snapshot_region_count(snapshot.s);
  void* freed = b.get();
  b.reset();  // hsa_amd_memory_pool_free: the block goes back to CUDA
  if (!mutate(r, m, a.get(), MiB)) return;
  const uint64_t violations = refused_copies();
  const size_t log_mark = log_size();
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, regions - 1, 1);
  // The runtime refuses (and counts) any copy into memory freed through it,
  // whatever the direction or tier the library copies from.
  r.expect(refused_copies() == violations,
           "restore tried to copy into freed memory (%p)", freed);
  r.expect(logged_since(log_mark, "skipped"), "no log line about the skipped region");
  verify(r, m, a.get(), MiB, 0x400, false, "the buffer still allocated");
  harness::ContextScope scope(m.gpu.context);
  T_CU(r, cu().cuCtxSynchronize());  // nothing faulted on the device
}

// ---- (e) a reused address is not written ---------------------------------------------------------

struct AddressReuse {
  AddressReuse() { hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, true); }
  ~AddressReuse() { hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, false); }
};

void test_address_reuse(Reporter& r, const Module& m) {
  AddressReuse reuse;
  const uint64_t size = 2 * MiB;
  PoolBuffer first;
  if (!first.allocate(r, m.gpu.vram, size) || !fill(r, m, first.get(), size, 0x500)) return;
  Snapshot snapshot(kr_snap(m.gpu.agent));
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  const size_t regions = kr_snapshot_region_count(snapshot.s);
  void* const old_address = first.get();
  first.reset();
  PoolBuffer second;
  if (!second.allocate(r, m.gpu.vram, size)) return;
  if (!r.expect(second.get() == old_address,
                "address reuse mode gave %p, not the freed %p: cannot test reuse", second.get(),
                old_address)) {
    return;
  }
  if (!fill(r, m, second.get(), size, 0x501)) return;  // the new owner's data
  const uint64_t violations = refused_copies();
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, regions - 1, 1);
  r.expect(refused_copies() == violations, "restore copy refused by the runtime");
  verify(r, m, second.get(), size, 0x501, false, "the new allocation at the reused address");
  r.note("%p was freed and handed out again; restore left the new owner's data alone",
         old_address);
}

// A freed block the runtime gives back to CUDA (its quarantine released) is
// forgotten with it. The runtime remembers freed ranges to refuse copies into
// them, so it must keep such a range allocated for as long as it remembers
// it: the H200's driver hands a freed device range back to the process, and
// malloc may then make it a tool's pageable buffer, whose copies would be
// refused as use after free.
void test_reuse_cache_release(Reporter& r, const Module& m) {
  const uint64_t size = 2 * MiB;
  // First, so that the driver cannot give it the freed block's addresses.
  PoolBuffer source;
  if (!source.allocate(r, m.gpu.vram, size) || !fill(r, m, source.get(), size, 0x520)) return;
  void* freed_address = nullptr;
  {
    AddressReuse reuse;
    PoolBuffer block;
    if (!block.allocate(r, m.gpu.vram, size)) return;
    freed_address = block.get();
  }  // freed into the quarantine (address-reuse mode changes nothing there)
  hsa_rt_release_quarantine();  // given back to the driver
  // Claim the range as pageable host memory, as a malloc may once the driver
  // has it back.
  void* host = mmap(freed_address, size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (host == MAP_FAILED) {
    r.expect(errno == EEXIST, "mmap at %p: %s", freed_address, std::strerror(errno));
    r.note("%p is still reserved after the quarantine went back to the driver", freed_address);
    return;
  }
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { munmap(p, n); }
  } unmap{host, size};
  if (host != freed_address) {
    // A kernel without MAP_FIXED_NOREPLACE takes the address as a hint only.
    r.note("mmap placed the buffer at %p, not %p: nothing to check", host, freed_address);
    return;
  }
  const uint64_t violations = refused_copies();
  const hsa_status_t status = hsa_memory_copy(host, source.get(), size);
  if (!r.expect(status == HSA_STATUS_SUCCESS && refused_copies() == violations,
                "a copy into pageable memory at %p, a range the driver gave back, was refused "
                "(status 0x%x)",
                freed_address, unsigned(status))) {
    return;
  }
  const auto* words = static_cast<const uint32_t*>(host);
  uint64_t wrong = 0;
  for (uint64_t i = 0; i < size / 4; ++i) wrong += words[i] != expected_word(0x520, i, false);
  r.expect(wrong == 0, "the copy into %p: %" PRIu64 " words wrong", host, wrong);
  r.note("%p came back from the driver as host memory; copies into it are accepted",
         freed_address);
}

// ---- (f) a footprint of at least 4 GiB -------------------------------------------------------------

void test_large_footprint(Reporter& r, const Module& m) {
  constexpr int kBuffers = 4;
  const uint64_t wanted = 5 * GiB / kBuffers;  // 1.25 GiB each
  const uint64_t free_bytes = harness::free_device_memory(m.gpu.agent);
  const uint64_t host_bytes = harness::available_host_memory();
  const uint64_t margin = GiB;
  uint64_t each = wanted;
  if (free_bytes < kBuffers * each + margin) {
    each = free_bytes > margin ? (free_bytes - margin) / kBuffers / (2 * MiB) * (2 * MiB) : 0;
  }
  const uint64_t footprint = kBuffers * each;
  r.note("%s free on %s, %s available on the host; footprint %s (%d x %s)",
         bytes_text(free_bytes).c_str(), m.gpu.name.c_str(), bytes_text(host_bytes).c_str(),
         bytes_text(footprint).c_str(), kBuffers, bytes_text(each).c_str());
  if (footprint < 4 * GiB) {
    r.skip("not enough free device memory for a 4 GiB footprint");
    return;
  }
  if (host_bytes != 0 && host_bytes < footprint + 2 * GiB) {
    r.skip("not enough host memory to hold a %s snapshot", bytes_text(footprint).c_str());
    return;
  }
  std::vector<PoolBuffer> buffers(kBuffers);
  for (int k = 0; k < kBuffers; ++k) {
    if (!buffers[k].allocate(r, m.gpu.vram, each)) return;
    if (!fill(r, m, buffers[k].get(), each, 0x600 + uint32_t(k))) return;
  }
  {
    harness::ContextScope scope(m.gpu.context);
    T_CU_REQUIRE(r, cu().cuCtxSynchronize());
  }
  double start = harness::now_seconds();
  Snapshot snapshot(kr_snap(m.gpu.agent));
  const double snap_seconds = harness::now_seconds() - start;
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  const uint64_t captured = kr_snapshot_byte_count(snapshot.s);
  r.note("snap: %s in %.2f s (%.2f GB/s)", bytes_text(captured).c_str(), snap_seconds,
         static_cast<double>(captured) / snap_seconds / 1e9);
  for (int k = 0; k < kBuffers; ++k) {
    if (!mutate(r, m, buffers[k].get(), each)) return;
    // kr_mutate has no fixed point: every word must have changed.
    const uint64_t changed = mismatches(r, m, buffers[k].get(), each, 0x600 + uint32_t(k), false);
    if (!r.expect(changed == each / 4, "mutation changed %" PRIu64 " of %" PRIu64 " words",
                  changed, each / 4)) {
      return;
    }
  }
  start = harness::now_seconds();
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  const double restore_seconds = harness::now_seconds() - start;
  expect_report(r, report, kr_snapshot_region_count(snapshot.s), 0);
  r.note("restore: %s in %.2f s (%.2f GB/s)", bytes_text(captured).c_str(), restore_seconds,
         static_cast<double>(captured) / restore_seconds / 1e9);
  for (int k = 0; k < kBuffers; ++k) {
    const std::string what = "restored buffer " + std::to_string(k);
    if (!verify(r, m, buffers[k].get(), each, 0x600 + uint32_t(k), false, what.c_str())) break;
    // More host-side samples on the big buffers: 64 windows of 4 KiB each.
    sampled_check(r, m, buffers[k].get(), each, 0x600 + uint32_t(k), false, 64, what.c_str());
  }
}

// ---- (g) a declined snapshot runs the dispatch once ----------------------------------------------

struct CountingPass {
  const Module* m = nullptr;
  uint32_t passes = 0;
  std::string error;
};

void counting_pass(uint32_t, void* user_data) {
  auto& s = *static_cast<CountingPass*>(user_data);
  ++s.passes;
  harness::ContextScope scope(s.m->gpu.context);
  unsigned long long* observed = s.m->observed();
  void* params[] = {&observed};
  CUresult result = cu().cuLaunchKernel(s.m->bump_pass_counter, 1, 1, 1, 32, 1, 1, 0, s.m->stream,
                                        params, nullptr);
  if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(s.m->stream);
  if (result != CUDA_SUCCESS) s.error = harness::cuda_error_text(result);
}

// A tool's executable iterator that fails: the snapshot cannot find module
// variables and declines.
hsa_status_t failing_iterator(hsa_status_t (*)(hsa_executable_t, void*), void*) {
  return HSA_STATUS_ERROR;
}

void test_declined(Reporter& r, const Module& m) {
  harness::ContextScope scope(m.gpu.context);
  unsigned long long before = 0;
  T_CU_REQUIRE(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(&before), m.pass_counter, 8));
  const size_t log_mark = log_size();
  kr_set_executable_iterator(failing_iterator);  // snapshots now decline
  CountingPass s;
  s.m = &m;
  const kr_replay_result_t result = kr_replay(m.gpu.agent, 5, counting_pass, &s);
  kr_set_executable_iterator(nullptr);  // back to the loader's own
  r.expect(!result.replayed && result.passes_run == 1 &&
               result.decline_reason == KR_DECLINE_SYMBOL_ENUMERATION,
           "kr_replay: replayed %d, passes %u, decline %d (expected 0, 1, %d)",
           int(result.replayed), result.passes_run, int(result.decline_reason),
           int(KR_DECLINE_SYMBOL_ENUMERATION));
  r.expect(s.passes == 1, "the pass function ran %u times, expected once", s.passes);
  if (!s.error.empty()) r.fail("bump_pass_counter: %s", s.error.c_str());
  unsigned long long after = 0;
  T_CU_REQUIRE(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(&after), m.pass_counter, 8));
  r.expect(after == before + 1, "pass_counter went from %llu to %llu, expected one launch",
           before, after);
  r.expect(logged_since(log_mark, "declined"), "the decline was not logged");
  const unsigned long long zero = 0;
  T_CU(r, cu().cuMemcpy(m.pass_counter, reinterpret_cast<CUdeviceptr>(&zero), 8));
  Snapshot again(kr_snap(m.gpu.agent));
  r.expect(kr_snapshot_ok(again.s), "a snapshot after restoring the iterator declined");
}

// ---- (i) an executable unloaded between snap and restore --------------------------------------------

// True when the library wrapped hsa_executable_destroy in the runtime's table
// (it tracks unloads); older libraries restore module variables unchecked.
bool library_tracks_unloads() {
  CoreApiTable fresh;
  hsa_rt_fill_core_table(&fresh);
  return hsa_rt_core_table()->hsa_executable_destroy_fn != fresh.hsa_executable_destroy_fn;
}

void test_unloaded_executable(Reporter& r, const Module& m, const char* cubin) {
  if (!library_tracks_unloads()) {
    r.skip("this libkernel_replay does not wrap hsa_executable_destroy (module variables are "
           "restored unchecked, as the design allows)");
    return;
  }
  // Every policy, the baseline included, checks the registry when the
  // library wraps hsa_executable_destroy.
  // A second executable on the same GPU: its own pass_counter and const_table.
  hsa_executable_t second{0};
  T_HSA_REQUIRE(r, hsa_rt_executable_load_file(m.gpu.agent, cubin, &second));
  uint64_t counter = 0;
  uint64_t table = 0;
  bool registered =
      T_HSA(r, hsa_rt_executable_register_variable(second, "pass_counter", false, &counter,
                                                     nullptr)) &&
      T_HSA(r, hsa_rt_executable_register_variable(second, "const_table", true, &table, nullptr));
  if (!registered) {
    KR_HSA(hsa_executable_destroy(second));
    return;
  }
  PoolBuffer buffer;
  if (!buffer.allocate(r, m.gpu.vram, MiB) || !fill(r, m, buffer.get(), MiB, 0x700)) {
    KR_HSA(hsa_executable_destroy(second));
    return;
  }
  Snapshot snapshot(kr_snap(m.gpu.agent));
  const size_t regions = kr_tracked_count(m.gpu.agent) + 2 * kModuleVariables;
  const bool complete =
      r.expect(kr_snapshot_ok(snapshot.s) && kr_snapshot_region_count(snapshot.s) == regions,
               "snapshot with two executables: ok %d, %zu regions, expected %zu",
               int(kr_snapshot_ok(snapshot.s)), kr_snapshot_region_count(snapshot.s), regions);
  // Unloaded through the table, so through the library's wrapper.
  T_HSA(r, hsa_executable_destroy(second));
  if (!complete || !mutate(r, m, buffer.get(), MiB)) return;
  const uint64_t violations = refused_copies();
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, regions - kModuleVariables, kModuleVariables);
  r.expect(refused_copies() == violations,
           "restore wrote the unloaded module's variables (0x%" PRIx64 ", 0x%" PRIx64 ")", counter,
           table);
  verify(r, m, buffer.get(), MiB, 0x700, false, "the buffer next to the unloaded module");
}

// ---- virtual memory (j, k, l): the application's side ------------------------------------

// Host copies of device bytes, read with cuMemcpy straight from the driver in
// the GPU's context (which has access to every mapping these tests make).
bool read_bytes(Reporter& r, const Module& m, const void* p, size_t bytes,
                std::vector<uint8_t>* out) {
  harness::ContextScope scope(m.gpu.context);
  if (!scope.ok()) return false;
  out->resize(bytes);
  return T_CU(r, cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(out->data()),
                               reinterpret_cast<CUdeviceptr>(p), bytes));
}

#if !HSA_RT_HAVE_VMEM

// Why the vmem tests cannot run here.
const char* vmem_unavailable() {
  return "built against ROCm 5.2 headers, which have no hsa_amd_vmem API";
}

#else

// True when the library wrapped the vmem entries in the runtime's table (it
// tracks mappings: built against 6.0+ headers).
bool library_wraps_vmem() {
  AmdExtTable fresh;
  hsa_rt_fill_amd_ext_table(&fresh);
  return hsa_rt_amd_ext_table()->hsa_amd_vmem_map_fn != fresh.hsa_amd_vmem_map_fn;
}

// Why a vmem test cannot run here, or NULL.
const char* vmem_unavailable() {
  if (!hsa_rt_vmem_supported()) return "the CUDA driver has no virtual memory management";
  if (!library_wraps_vmem()) {
    return "this libkernel_replay does not wrap hsa_amd_vmem_map (built against ROCm 5.2 headers?)";
  }
  return nullptr;
}

// Compares device bytes with an earlier host copy; reports the first
// differing byte.
bool same_bytes(Reporter& r, const Module& m, const void* p, const std::vector<uint8_t>& expected,
                const char* what) {
  std::vector<uint8_t> now;
  if (!read_bytes(r, m, p, expected.size(), &now)) return false;
  if (now == expected) return true;
  size_t first = 0;
  while (first < now.size() && now[first] == expected[first]) ++first;
  r.fail("%s: %s differ from the expected bytes, first at offset %zu", what,
         bytes_text(expected.size()).c_str(), first);
  return false;
}


// A reservation of the application's, freed on scope exit (once empty).
class Reservation {
 public:
  Reservation() = default;
  ~Reservation() {
    if (base_ != nullptr) KR_HSA(hsa_amd_vmem_address_free(base_, bytes_));
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  bool reserve(Reporter& r, size_t bytes) {
    bytes_ = bytes;
    return T_HSA(r, hsa_amd_vmem_address_reserve(&base_, bytes, 0, 0));
  }
  char* at(size_t offset) const { return static_cast<char*>(base_) + offset; }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// Physical memory on a GPU, mapped at one or more addresses with the GPU's
// read-write access, the way hipMemCreate + hipMemMap + hipMemSetAccess do
// it; unmapped and released on scope exit (whatever is left).
class VmemChunk {
 public:
  VmemChunk() = default;
  ~VmemChunk() { reset(); }
  VmemChunk(const VmemChunk&) = delete;
  VmemChunk& operator=(const VmemChunk&) = delete;
  VmemChunk(VmemChunk&& other) noexcept
      : handle_(other.handle_), bytes_(other.bytes_), held_(other.held_),
        views_(std::move(other.views_)) {
    other.held_ = false;
    other.views_.clear();
  }

  bool create(Reporter& r, const Module& m, size_t bytes) {
    bytes_ = bytes;
    held_ = T_HSA(r, hsa_amd_vmem_handle_create(m.gpu.vram, bytes, MEMORY_TYPE_NONE, 0, &handle_));
    return held_;
  }
  bool map(Reporter& r, const Module& m, void* va) {
    if (!T_HSA(r, hsa_amd_vmem_map(va, bytes_, 0, handle_, 0))) return false;
    views_.push_back(va);
    hsa_amd_memory_access_desc_t desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.agent_handle = m.gpu.agent;
    desc.permissions = HSA_ACCESS_PERMISSION_RW;
    return T_HSA(r, hsa_amd_vmem_set_access(va, bytes_, &desc, 1));
  }
  bool create_and_map(Reporter& r, const Module& m, size_t bytes, void* va) {
    return create(r, m, bytes) && map(r, m, va);
  }
  bool unmap(Reporter& r, void* va) {
    auto it = std::find(views_.begin(), views_.end(), va);
    if (it == views_.end()) return false;
    views_.erase(it);
    return T_HSA(r, hsa_amd_vmem_unmap(va, bytes_));
  }
  // The application's reference; the memory lives while it is mapped.
  bool release(Reporter& r) {
    if (!held_) return true;
    held_ = false;
    return T_HSA(r, hsa_amd_vmem_handle_release(handle_));
  }
  void reset() {
    for (void* va : views_) KR_HSA(hsa_amd_vmem_unmap(va, bytes_));
    views_.clear();
    if (held_) KR_HSA(hsa_amd_vmem_handle_release(handle_));
    held_ = false;
  }
  size_t bytes() const { return bytes_; }

 private:
  hsa_amd_vmem_alloc_handle_t handle_{0};
  size_t bytes_ = 0;
  bool held_ = false;
  std::vector<void*> views_;
};

size_t round_up_to(size_t value, size_t granule) { return (value + granule - 1) / granule * granule; }

// ---- (j) a hipMallocAsync-style heap ------------------------------------------------------

// hipMallocAsync's pool maps physical chunks of 32 MiB into one reserved
// range and hands out sub-blocks of 256-byte granules; kernels write the
// sub-blocks in place. A chunk trimmed from the pool (unmapped, its handle
// released) while a snapshot is held must be skipped by the restore, which
// must write every other chunk back byte for byte and never touch the
// unmapped range, nor a new chunk mapped there later.
void test_vm_heap(Reporter& r, const Module& m) {
  const size_t g = hsa_rt_vmem_granularity(m.gpu.agent);
  const size_t chunk = round_up_to(32 * MiB, g);
  const size_t chunks = g_quick ? 4 : 8;
  Reservation heap;
  if (!heap.reserve(r, chunks * chunk)) return;
  std::vector<VmemChunk> mapped(chunks);
  const size_t tracked = kr_tracked_count(m.gpu.agent);
  for (size_t c = 0; c < chunks; ++c) {
    if (!mapped[c].create_and_map(r, m, chunk, heap.at(c * chunk))) return;
    // Chunk background, then the sub-blocks with patterns of their own.
    if (!fill(r, m, heap.at(c * chunk), chunk, 0x900 + uint32_t(c))) return;
  }
  r.expect(kr_tracked_count(m.gpu.agent) == tracked + chunks,
           "kernel-replay tracks %zu new regions, expected one per mapped chunk (%zu)",
           kr_tracked_count(m.gpu.agent) - tracked, chunks);
  // The pool's sub-blocks: 256-byte multiples, packed from each chunk's start.
  struct SubBlock {
    char* p;
    size_t bytes;
    uint32_t seed;
  };
  std::vector<SubBlock> blocks;
  for (size_t c = 0; c < chunks; ++c) {
    size_t offset = 0;
    for (uint32_t k = 0; k < 12; ++k) {
      const size_t bytes = 256 * (1 + (k * 37 + c * 11) % 48);
      blocks.push_back({heap.at(c * chunk + offset), bytes, 0x9100 + uint32_t(c * 16 + k)});
      offset += bytes + 256 * (k % 3);  // gaps the pool left free
    }
  }
  for (const SubBlock& b : blocks) {
    if (!fill(r, m, b.p, b.bytes, b.seed)) return;
  }
  std::vector<std::vector<uint8_t>> before(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    if (!read_bytes(r, m, heap.at(c * chunk), chunk, &before[c])) return;
  }

  Snapshot snapshot(kr_snap(m.gpu.agent));
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  const size_t regions = kr_snapshot_region_count(snapshot.s);
  // What a tool asks before admitting a replay counts the mapped chunks
  // exactly as the snapshot took them, and the module variables a snapshot
  // has discovered into the library's cache. A baseline snapshot fills no
  // cache: under the baseline policy the estimate is the tracked regions
  // alone, or with the variables if a snapshot under another policy (an
  // earlier test's) discovered them.
  const kr_footprint_t estimate = kr_estimate_footprint(m.gpu.agent);
  const bool with_variables =
      estimate.regions == regions && estimate.bytes == kr_snapshot_byte_count(snapshot.s);
  const bool tracked_only = estimate.regions == kr_tracked_count(m.gpu.agent) &&
                            estimate.bytes == kr_tracked_bytes(m.gpu.agent);
  const bool baseline = harness::storage_policy_is_baseline();
  r.expect(with_variables || (baseline && tracked_only),
           "kr_estimate_footprint: %zu regions, %" PRIu64 " bytes; the snapshot took %zu, %" PRIu64
           "%s",
           estimate.regions, estimate.bytes, regions, kr_snapshot_byte_count(snapshot.s),
           baseline ? " (baseline: or the tracked regions alone)" : "");
  // The dispatch: every sub-block written in place.
  for (const SubBlock& b : blocks) {
    if (!mutate(r, m, b.p, b.bytes)) return;
  }
  for (const SubBlock& b : blocks) {
    if (!verify(r, m, b.p, b.bytes, b.seed, true, "a mutated sub-block")) return;
  }
  // The pool trims chunk 1 while the snapshot is held.
  const size_t trimmed = 1;
  void* const trimmed_va = heap.at(trimmed * chunk);
  if (!mapped[trimmed].unmap(r, trimmed_va) || !mapped[trimmed].release(r)) return;
  r.expect(kr_tracked_count(m.gpu.agent) == tracked + chunks - 1,
           "the unmapped chunk is still tracked");
  const uint64_t violations = refused_copies();
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, regions - 1, 1);
  for (size_t c = 0; c < chunks; ++c) {
    if (c == trimmed) continue;
    const std::string what = "chunk " + std::to_string(c) + " after the restore";
    same_bytes(r, m, heap.at(c * chunk), before[c], what.c_str());
  }
  r.expect(refused_copies() == violations,
           "the restore copied into the unmapped chunk's range (refused by the runtime)");
  // The pool grows again at the same address with new memory: the held
  // snapshot must skip it too and leave the new chunk's data alone.
  VmemChunk regrown;
  if (!regrown.create_and_map(r, m, chunk, trimmed_va) ||
      !fill(r, m, trimmed_va, chunk, 0x9F00)) {
    return;
  }
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, regions - 1, 1);
  verify(r, m, trimmed_va, chunk, 0x9F00, false, "the new chunk at the trimmed chunk's address");
  r.expect(refused_copies() == violations, "a restore copy was refused by the runtime");
  // The pool grows while a tool has tracking off: that chunk is not
  // captured, and kr_untracked_summary says so.
  const kr_untracked_t untracked_before = kr_untracked_summary(m.gpu.agent);
  Reservation more;
  VmemChunk unseen;
  kr_set_tracking_enabled(false);
  const bool mapped_unseen =
      more.reserve(r, chunk) && unseen.create_and_map(r, m, chunk, more.at(0));
  kr_set_tracking_enabled(true);
  if (!mapped_unseen) return;
  const kr_untracked_t untracked_after = kr_untracked_summary(m.gpu.agent);
  r.expect(untracked_after.vmem_regions == untracked_before.vmem_regions + 1 &&
               untracked_after.vmem_bytes == untracked_before.vmem_bytes + chunk,
           "kr_untracked_summary: %zu mappings, %s not captured (before: %zu, %s); expected one "
           "more chunk",
           untracked_after.vmem_regions, bytes_text(untracked_after.vmem_bytes).c_str(),
           untracked_before.vmem_regions, bytes_text(untracked_before.vmem_bytes).c_str());
  r.expect(untracked_after.known && untracked_after.bytes >= chunk,
           "kr_untracked_summary: known %d, %s untracked device memory, at least the chunk (%s) "
           "expected",
           int(untracked_after.known), bytes_text(untracked_after.bytes).c_str(),
           bytes_text(chunk).c_str());
  {
    Snapshot without(kr_snap(m.gpu.agent));
    expect_complete(r, without, m.gpu.agent);  // the tracked regions only
  }
  unseen.reset();
  r.expect(kr_untracked_summary(m.gpu.agent).vmem_regions == untracked_before.vmem_regions,
           "the unmapped untracked chunk is still reported");
  r.note("%zu chunks of %s, %zu sub-blocks; chunk %zu unmapped under the snapshot: skipped, the "
         "others byte-exact; a chunk mapped with tracking off reported as untracked",
         chunks, bytes_text(chunk).c_str(), blocks.size(), trimmed);
}

// ---- (k) expandable segments ------------------------------------------------------------------

// PyTorch's expandable segments: one reserved range per stream, grown page by
// page (2 MiB pages for small blocks, 20 MiB for large), each page mapped and
// given access as it comes; tensors may span pages; the range shrinks by
// unmapping its tail pages when the cache is trimmed. Every pass of every
// dispatch must see byte-identical memory, across growth and shrinking.
struct SegmentPass {
  const Module* m = nullptr;
  const char* base = nullptr;
  size_t mapped = 0;  // bytes mapped from base, all compared at entry
  std::vector<uint8_t> expected;
  std::vector<std::pair<char*, size_t>> tensors;
  uint32_t passes = 0;
  std::vector<uint32_t> mismatched_passes;
  std::vector<std::string> errors;
};

void segment_pass(uint32_t pass, void* user_data) {
  auto& s = *static_cast<SegmentPass*>(user_data);
  ++s.passes;
  harness::ContextScope scope(s.m->gpu.context);
  std::vector<uint8_t> entry(s.mapped);
  CUresult result = cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(entry.data()),
                                  reinterpret_cast<CUdeviceptr>(s.base), s.mapped);
  if (result != CUDA_SUCCESS) {
    s.errors.push_back("pass " + std::to_string(pass) + ": " + harness::cuda_error_text(result));
    return;
  }
  if (entry != s.expected) s.mismatched_passes.push_back(pass);
  for (const auto& [p, bytes] : s.tensors) {
    unsigned long long n = bytes / 4;
    CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
    unsigned int salt = kSalt + pass;  // a different write each pass
    void* params[] = {&ptr, &n, &salt};
    result = cu().cuLaunchKernel(s.m->mutate, 1024, 1, 1, 256, 1, 1, 0, s.m->stream, params,
                                 nullptr);
    if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(s.m->stream);
    if (result != CUDA_SUCCESS) {
      s.errors.push_back("pass " + std::to_string(pass) + ": mutate: " +
                         harness::cuda_error_text(result));
      return;
    }
  }
}

// One replay window over the segment as it is now.
bool replay_segment(Reporter& r, const Module& m, SegmentPass* s, uint32_t passes,
                    const char* what) {
  s->passes = 0;
  s->mismatched_passes.clear();
  s->errors.clear();
  if (!read_bytes(r, m, s->base, s->mapped, &s->expected)) return false;
  const kr_replay_result_t result = kr_replay(m.gpu.agent, passes, segment_pass, s);
  bool ok = r.expect(result.replayed && result.passes_run == passes &&
                         result.restore_failures == 0,
                     "%s: kr_replay replayed %d, passes %u, restore failures %zu", what,
                     int(result.replayed), result.passes_run, result.restore_failures);
  for (const std::string& error : s->errors) r.fail("%s: %s", what, error.c_str());
  ok &= s->errors.empty();
  for (uint32_t pass : s->mismatched_passes) {
    r.fail("%s: pass %u saw memory different from pass 0's", what, pass);
  }
  return ok && s->mismatched_passes.empty();
}

void test_expandable_segments(Reporter& r, const Module& m) {
  const size_t g = hsa_rt_vmem_granularity(m.gpu.agent);
  const size_t small = round_up_to(2 * MiB, g);
  const size_t large = round_up_to(20 * MiB, g);
  Reservation segment;
  if (!segment.reserve(r, 3 * small + 6 * large)) return;
  // Grown page by page: three small pages, then three large ones.
  std::vector<VmemChunk> pages;
  std::vector<size_t> page_at;
  size_t end = 0;
  auto grow = [&](size_t bytes) {
    pages.emplace_back();
    page_at.push_back(end);
    if (!pages.back().create_and_map(r, m, bytes, segment.at(end))) return false;
    end += bytes;
    return true;
  };
  for (size_t bytes : {small, small, small, large, large, large}) {
    if (!grow(bytes)) return;
  }
  if (!fill(r, m, segment.at(0), end, 0xA00)) return;
  // Tensors written in place: one across pages 0-1, one across 2-4, one in 5.
  SegmentPass s;
  s.m = &m;
  s.base = segment.at(0);
  s.tensors = {{segment.at(small / 2), small + small / 4},
               {segment.at(page_at[2] + small / 2), page_at[4] + large / 2 - page_at[2] - small / 2},
               {segment.at(page_at[5] + large / 4), large / 2}};
  s.mapped = end;
  if (!replay_segment(r, m, &s, 4, "dispatch 1 (6 pages)")) return;

  // The cache is trimmed while a snapshot of the whole segment is held: the
  // tail page goes (its tensor was freed).
  Snapshot held(kr_snap(m.gpu.agent));
  if (!expect_complete(r, held, m.gpu.agent)) return;
  std::vector<uint8_t> at_snapshot;
  if (!read_bytes(r, m, segment.at(0), page_at[5], &at_snapshot)) return;
  const size_t tracked = kr_tracked_count(m.gpu.agent);
  if (!pages[5].unmap(r, segment.at(page_at[5])) || !pages[5].release(r)) return;
  end = page_at[5];
  r.expect(kr_tracked_count(m.gpu.agent) == tracked - 1, "the trimmed page is still tracked");
  if (!mutate(r, m, s.tensors[0].first, s.tensors[0].second)) return;
  const uint64_t violations = refused_copies();
  kr_restore_report_t report{};
  kr_restore_with_report(held.s, &report);
  expect_report(r, report, kr_snapshot_region_count(held.s) - 1, 1);
  same_bytes(r, m, segment.at(0), at_snapshot, "the 5 pages left, restored from the held snapshot");
  r.expect(refused_copies() == violations,
           "the restore copied into the trimmed page (refused by the runtime)");

  s.tensors.pop_back();
  s.mapped = end;
  if (!replay_segment(r, m, &s, 3, "dispatch 2 (shrunk to 5 pages)")) return;

  // Grown again: a new large page where the old one was, a new tensor in it.
  if (!grow(large) || !fill(r, m, segment.at(page_at.back()), large, 0xA55)) return;
  s.tensors.push_back({segment.at(page_at.back() + large / 8), large / 2});
  s.mapped = end;
  if (!replay_segment(r, m, &s, 3, "dispatch 3 (grown back to 6 pages)")) return;
  // The held snapshot predates the new page: it is skipped, untouched.
  std::vector<uint8_t> new_page;
  if (!read_bytes(r, m, segment.at(page_at.back()), large, &new_page)) return;
  kr_restore_with_report(held.s, &report);
  expect_report(r, report, kr_snapshot_region_count(held.s) - 1, 1);
  same_bytes(r, m, segment.at(page_at.back()), new_page,
             "the page mapped after the held snapshot, left alone by its restore");
  r.expect(refused_copies() == violations, "a restore copy was refused by the runtime");
  r.note("pages of %s and %s (granularity %s); 3 dispatches, grown and shrunk in between",
         bytes_text(small).c_str(), bytes_text(large).c_str(), bytes_text(g).c_str());
}

// ---- (l) one handle mapped at two addresses -------------------------------------------------

struct TwoViewPass {
  const Module* m = nullptr;
  char* views[2] = {nullptr, nullptr};
  size_t bytes = 0;
  std::vector<uint8_t> expected;
  std::vector<std::string> errors;
  uint32_t passes = 0;
};

void two_view_pass(uint32_t pass, void* user_data) {
  auto& s = *static_cast<TwoViewPass*>(user_data);
  ++s.passes;
  harness::ContextScope scope(s.m->gpu.context);
  for (int v = 0; v < 2; ++v) {
    std::vector<uint8_t> entry(s.bytes);
    const CUresult read = cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(entry.data()),
                                        reinterpret_cast<CUdeviceptr>(s.views[v]), s.bytes);
    if (read != CUDA_SUCCESS || entry != s.expected) {
      s.errors.push_back("pass " + std::to_string(pass) + ": view " + std::to_string(v) +
                         (read != CUDA_SUCCESS ? ": " + harness::cuda_error_text(read)
                                               : " differs from pass 0's"));
    }
  }
  // The kernel writes through one view, the other view sees it.
  unsigned long long n = s.bytes / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(s.views[pass % 2]);
  unsigned int salt = kSalt;
  void* params[] = {&ptr, &n, &salt};
  CUresult result =
      cu().cuLaunchKernel(s.m->mutate, 1024, 1, 1, 256, 1, 1, 0, s.m->stream, params, nullptr);
  if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(s.m->stream);
  if (result != CUDA_SUCCESS) s.errors.push_back("mutate: " + harness::cuda_error_text(result));
}

void test_two_views(Reporter& r, const Module& m) {
  const size_t g = hsa_rt_vmem_granularity(m.gpu.agent);
  const size_t bytes = round_up_to(4 * MiB, g);
  Reservation first, second;
  if (!first.reserve(r, bytes) || !second.reserve(r, bytes)) return;
  const size_t tracked = kr_tracked_count(m.gpu.agent);
  const uint64_t tracked_bytes = kr_tracked_bytes(m.gpu.agent);
  VmemChunk chunk;
  if (!chunk.create_and_map(r, m, bytes, first.at(0)) || !chunk.map(r, m, second.at(0))) return;
  r.expect(kr_tracked_count(m.gpu.agent) == tracked + 2 &&
               kr_tracked_bytes(m.gpu.agent) == tracked_bytes + 2 * bytes,
           "two views of one handle should be two tracked regions of %s each",
           bytes_text(bytes).c_str());
  if (!fill(r, m, first.at(0), bytes, 0xB00)) return;
  if (!verify(r, m, second.at(0), bytes, 0xB00, false, "the second view after a fill of the first")) {
    return;
  }
  TwoViewPass s;
  s.m = &m;
  s.views[0] = first.at(0);
  s.views[1] = second.at(0);
  s.bytes = bytes;
  if (!read_bytes(r, m, first.at(0), bytes, &s.expected)) return;
  const kr_replay_result_t result = kr_replay(m.gpu.agent, 4, two_view_pass, &s);
  r.expect(result.replayed && result.passes_run == 4 && result.restore_failures == 0,
           "kr_replay: replayed %d, passes %u, restore failures %zu", int(result.replayed),
           result.passes_run, result.restore_failures);
  for (const std::string& error : s.errors) r.fail("%s", error.c_str());
  // The second view goes; the first still shows the handle and is restored.
  Snapshot snapshot(kr_snap(m.gpu.agent));
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  std::vector<uint8_t> captured;
  if (!read_bytes(r, m, first.at(0), bytes, &captured)) return;
  if (!chunk.unmap(r, second.at(0)) || !mutate(r, m, first.at(0), bytes)) return;
  const uint64_t violations = refused_copies();
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, kr_snapshot_region_count(snapshot.s) - 1, 1);
  same_bytes(r, m, first.at(0), captured, "the view still mapped");
  // Released while mapped: the mapping, and its tracking, live on.
  if (!chunk.release(r) || !mutate(r, m, first.at(0), bytes)) return;
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, kr_snapshot_region_count(snapshot.s) - 1, 1);
  same_bytes(r, m, first.at(0), captured, "the view of a released handle");
  r.expect(refused_copies() == violations,
           "a restore copy into the unmapped view was refused by the runtime");
}

#endif  // HSA_RT_HAVE_VMEM

// ---- (m) an application async copy in flight ---------------------------------------------------

// True when the library wrapped hsa_amd_memory_async_copy (the copy fence).
bool library_fences_copies() {
  AmdExtTable fresh;
  hsa_rt_fill_amd_ext_table(&fresh);
  return hsa_rt_amd_ext_table()->hsa_amd_memory_async_copy_fn !=
         fresh.hsa_amd_memory_async_copy_fn;
}

kr_stats2_t stats2() {
  kr_stats2_t stats;
  std::memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  kr_get_stats2(&stats);
  return stats;
}

// An application copy into a tracked buffer, held by a dependency signal
// that another thread releases after a delay, as a copy waiting on another
// stream's work is.
struct HeldCopy {
  hsa_signal_t dependency{0};
  hsa_signal_t completion{0};
  std::thread releaser;

  bool submit(Reporter& r, const Module& m, void* dst, const void* src, size_t bytes,
              int release_after_ms) {
    if (!T_HSA(r, hsa_signal_create(1, 0, nullptr, &dependency)) ||
        !T_HSA(r, hsa_signal_create(1, 0, nullptr, &completion))) {
      return false;
    }
    const hsa_agent_t cpu = hsa_rt_cpu_agent();
    if (!T_HSA(r, hsa_amd_memory_async_copy(dst, m.gpu.agent, src, cpu, bytes, 1, &dependency,
                                            completion))) {
      return false;
    }
    if (release_after_ms >= 0) {
      releaser = std::thread([this, release_after_ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(release_after_ms));
        hsa_signal_store_screlease(dependency, 0);
      });
    }
    return true;
  }
  void release_now() { hsa_signal_store_screlease(dependency, 0); }
  // Waits for the copy as the application would; true when it completed.
  bool wait() {
    if (releaser.joinable()) releaser.join();
    if (completion.handle == 0) return true;
    return hsa_signal_wait_scacquire(completion, HSA_SIGNAL_CONDITION_LT, 1,
                                     30ull * 1000 * 1000 * 1000, HSA_WAIT_STATE_BLOCKED) == 0;
  }
  void destroy() {
    if (releaser.joinable()) releaser.join();
    if (dependency.handle != 0) hsa_signal_destroy(dependency);
    if (completion.handle != 0) hsa_signal_destroy(completion);
    dependency.handle = 0;
    completion.handle = 0;
  }
  ~HeldCopy() { destroy(); }
};

struct FencePass {
  const Module* m = nullptr;
  void* buffer = nullptr;
  size_t bytes = 0;
  const void* source = nullptr;  // pinned host memory the copies read
  size_t copy_offset = 0;
  size_t copy_bytes = 0;
  std::vector<uint8_t> expected;
  std::unique_ptr<HeldCopy> previous;
  std::vector<std::string> errors;
  Reporter* r = nullptr;
};

constexpr int kCopyDelayMs = 300;

void fence_pass(uint32_t pass, void* user_data) {
  auto& s = *static_cast<FencePass*>(user_data);
  // The application waits for its last copy before the next dispatch: had
  // the restore not waited for it, the copy would land now, over the
  // restored bytes.
  if (s.previous != nullptr && !s.previous->wait()) {
    s.errors.push_back("pass " + std::to_string(pass) + ": the previous copy never completed");
  }
  s.previous.reset();
  harness::ContextScope scope(s.m->gpu.context);
  std::vector<uint8_t> entry(s.bytes);
  CUresult result = cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(entry.data()),
                                  reinterpret_cast<CUdeviceptr>(s.buffer), s.bytes);
  if (result != CUDA_SUCCESS || entry != s.expected) {
    s.errors.push_back("pass " + std::to_string(pass) + ": the buffer at entry " +
                       (result != CUDA_SUCCESS ? harness::cuda_error_text(result)
                                               : std::string("differs from pass 0's")));
  }
  unsigned long long n = s.bytes / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(s.buffer);
  unsigned int salt = kSalt;
  void* params[] = {&ptr, &n, &salt};
  result = cu().cuLaunchKernel(s.m->mutate, 1024, 1, 1, 256, 1, 1, 0, s.m->stream, params, nullptr);
  if (result == CUDA_SUCCESS) result = cu().cuStreamSynchronize(s.m->stream);
  if (result != CUDA_SUCCESS) s.errors.push_back("mutate: " + harness::cuda_error_text(result));
  // Then the application starts a copy into the buffer that is still held
  // when the pass returns (and the restore begins).
  s.previous = std::make_unique<HeldCopy>();
  if (!s.previous->submit(*s.r, *s.m, static_cast<char*>(s.buffer) + s.copy_offset, s.source,
                          s.copy_bytes, kCopyDelayMs)) {
    s.errors.push_back("pass " + std::to_string(pass) + ": the async copy was refused");
  }
}

void test_copy_fence(Reporter& r, const Module& m) {
  if (!library_fences_copies()) {
    r.skip("this libkernel_replay does not wrap hsa_amd_memory_async_copy (no copy fence)");
    return;
  }
  const size_t bytes = 4 * MiB;
  const size_t copy_bytes = MiB;
  PoolBuffer buffer, source;
  const hsa_agent_t cpu = hsa_rt_cpu_agent();
  if (!buffer.allocate(r, m.gpu.vram, bytes) || !fill(r, m, buffer.get(), bytes, 0xC00) ||
      !source.allocate(r, hsa_rt_pool(cpu, HSA_RT_POOL_SYSTEM_FINE), copy_bytes)) {
    return;
  }
  auto* words = static_cast<uint32_t*>(source.get());
  for (size_t i = 0; i < copy_bytes / 4; ++i) words[i] = kr_pattern(0xC01, i);

  // A window of 4 passes, each ending with a copy still held for 300 ms.
  FencePass s;
  s.m = &m;
  s.r = &r;
  s.buffer = buffer.get();
  s.bytes = bytes;
  s.source = source.get();
  s.copy_offset = MiB;
  s.copy_bytes = copy_bytes;
  if (!read_bytes(r, m, buffer.get(), bytes, &s.expected)) return;
  const kr_stats2_t before = stats2();
  const uint32_t passes = 4;
  // HSA-on-CUDA runs one GPU's async copies in order on one stream, so a
  // restore's batched copies would queue behind the held application copy
  // and land after it, fence or no fence. Blocking copies do not queue
  // there: with them only the fence makes the restore wait.
  kr_set_batched_copies(false);
  const double started = harness::now_seconds();
  const kr_replay_result_t result = kr_replay(m.gpu.agent, passes, fence_pass, &s);
  const double seconds = harness::now_seconds() - started;
  kr_set_batched_copies(true);
  const kr_stats2_t after = stats2();
  r.expect(result.replayed && result.passes_run == passes && result.restore_failures == 0,
           "kr_replay: replayed %d, passes %u, restore failures %zu", int(result.replayed),
           result.passes_run, result.restore_failures);
  for (const std::string& error : s.errors) r.fail("%s", error.c_str());
  r.expect(after.fenced_copies - before.fenced_copies == passes,
           "%" PRIu64 " copies went through the fence, expected %u",
           after.fenced_copies - before.fenced_copies, passes);
  r.expect(after.fence_waits - before.fence_waits == passes - 1,
           "%" PRIu64 " restores waited for a copy in flight, expected %u",
           after.fence_waits - before.fence_waits, passes - 1);
  r.expect(after.fence_timeouts == before.fence_timeouts, "a fence wait timed out");
  // The last pass's copy has no restore after it: it lands, completing the
  // application's signal exactly as the runtime would have.
  if (!r.expect(s.previous != nullptr && s.previous->wait(),
                "the last pass's copy never completed")) {
    return;
  }
  std::vector<uint8_t> landed;
  if (read_bytes(r, m, static_cast<char*>(buffer.get()) + s.copy_offset, copy_bytes, &landed)) {
    r.expect(std::memcmp(landed.data(), source.get(), copy_bytes) == 0,
             "the application's last copy did not land");
  }
  r.note("%u passes in %.2f s, each restore waiting for a copy held %d ms", passes, seconds,
         kCopyDelayMs);
  s.previous.reset();

  // A short timeout: a copy held past it makes a snapshot decline and a
  // restore write nothing.
  if (!fill(r, m, buffer.get(), bytes, 0xC00)) return;
  Snapshot held(kr_snap(m.gpu.agent));
  if (!expect_complete(r, held, m.gpu.agent)) return;
  const size_t regions = kr_snapshot_region_count(held.s);
  if (!mutate(r, m, buffer.get(), bytes)) return;
  kr_set_copy_fence_timeout(50ull * 1000 * 1000);
  HeldCopy stuck;
  if (!stuck.submit(r, m, static_cast<char*>(buffer.get()) + MiB, source.get(), copy_bytes, -1)) {
    kr_set_copy_fence_timeout(5ull * 1000 * 1000 * 1000);
    return;
  }
  const kr_stats2_t before_timeout = stats2();
  {
    Snapshot declined(kr_snap(m.gpu.agent));
    r.expect(!kr_snapshot_ok(declined.s) &&
                 kr_snapshot_decline_reason(declined.s) == KR_DECLINE_COPIES_IN_FLIGHT,
             "a snapshot with a copy held past the timeout: ok %d, reason %d (expected %d)",
             int(kr_snapshot_ok(declined.s)), int(kr_snapshot_decline_reason(declined.s)),
             int(KR_DECLINE_COPIES_IN_FLIGHT));
  }
  kr_restore_report_t report{};
  kr_restore_with_report(held.s, &report);
  r.expect(report.restored == 0 && report.failed == regions,
           "a restore with a copy held past the timeout: %zu restored, %zu failed (expected 0, "
           "%zu)",
           report.restored, report.failed, regions);
  const kr_stats2_t after_timeout = stats2();
  r.expect(after_timeout.fence_timeouts - before_timeout.fence_timeouts == 2,
           "%" PRIu64 " fence timeouts counted, expected 2 (the snapshot and the restore)",
           after_timeout.fence_timeouts - before_timeout.fence_timeouts);
  r.expect(after_timeout.declines[KR_DECLINE_COPIES_IN_FLIGHT] ==
               before_timeout.declines[KR_DECLINE_COPIES_IN_FLIGHT] + 1,
           "the decline was not counted under KR_DECLINE_COPIES_IN_FLIGHT");
  // The restore wrote nothing: the buffer is still mutated (outside the
  // copy's range, which the copy has not written yet).
  verify(r, m, buffer.get(), MiB, 0xC00, true, "the buffer's first MiB after the declined restore");
  stuck.release_now();
  r.expect(stuck.wait(), "the held copy never completed once released");
  kr_set_copy_fence_timeout(5ull * 1000 * 1000 * 1000);
  kr_restore_with_report(held.s, &report);
  expect_report(r, report, regions, 0);
  verify(r, m, buffer.get(), bytes, 0xC00, false, "the buffer restored once the copy landed");
}

// ---- (n) the device nearly full ------------------------------------------------------------------

// A retained device arena is memory the application cannot have: when the
// device is nearly full and an application allocation is refused for lack
// of memory, the library must release the arena and retry, once.
void test_device_nearly_full(Reporter& r, const Module& m) {
  const std::vector<harness::StoragePolicy> policies = harness::storage_policies();
  int device_policy = -1;
  for (const auto& policy : policies) {
    if (policy.name == "device") device_policy = policy.value;
  }
  if (device_policy < 0) {
    r.skip("this libkernel_replay has no device storage tier");
    return;
  }
  harness::trim_retained();
  harness::set_storage_policy(device_policy);
  uint64_t pool_bytes = 0;
  hsa_amd_memory_pool_get_info(m.gpu.vram, HSA_AMD_MEMORY_POOL_INFO_SIZE, &pool_bytes);
  // The budget may not be what refuses the arena: this device will be full.
  kr_set_device_budget(pool_bytes);
  struct Restore {
    ~Restore() {
      kr_set_device_budget(KR_DEVICE_BUDGET_AUTO);
      harness::trim_retained();
    }
  } restore_settings;

  const size_t bytes = g_quick ? 64 * MiB : 256 * MiB;
  PoolBuffer tracked;
  if (!tracked.allocate(r, m.gpu.vram, bytes) || !fill(r, m, tracked.get(), bytes, 0xD00)) return;
  {
    Snapshot snapshot(kr_snap(m.gpu.agent));
    if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  }  // freed: its device arena is retained
  kr_stats_t held{};
  kr_get_stats(&held);
  if (!r.expect(held.retained_bytes[KR_TIER_DEVICE] >= bytes,
                "the snapshot's device arena was not retained (%s retained)",
                bytes_text(held.retained_bytes[KR_TIER_DEVICE]).c_str())) {
    return;
  }

  // The rest of the process fills the device: allocations the library does
  // not see (the runtime's own table), halving the size on each refusal down
  // to a granule.
  AmdExtTable raw;
  hsa_rt_fill_amd_ext_table(&raw);
  std::vector<void*> ballast;
  uint64_t ballast_bytes = 0;
  for (uint64_t chunk = GiB; chunk >= 2 * MiB;) {
    void* p = nullptr;
    if (raw.hsa_amd_memory_pool_allocate_fn(m.gpu.vram, chunk, 0, &p) == HSA_STATUS_SUCCESS) {
      ballast.push_back(p);
      ballast_bytes += chunk;
    } else {
      chunk /= 2;
    }
  }
  struct FreeBallast {
    AmdExtTable* raw;
    std::vector<void*>* blocks;
    ~FreeBallast() {
      for (void* p : *blocks) raw->hsa_amd_memory_pool_free_fn(p);
    }
  } free_ballast{&raw, &ballast};
  r.note("device filled: %s of ballast, %s free, %s retained by the library",
         bytes_text(ballast_bytes).c_str(),
         bytes_text(harness::free_device_memory(m.gpu.agent)).c_str(),
         bytes_text(held.retained_bytes[KR_TIER_DEVICE]).c_str());
  void* probe = nullptr;
  if (raw.hsa_amd_memory_pool_allocate_fn(m.gpu.vram, bytes, 0, &probe) == HSA_STATUS_SUCCESS) {
    raw.hsa_amd_memory_pool_free_fn(probe);
    r.fail("%s still fit beside the ballast: the device is not full", bytes_text(bytes).c_str());
    return;
  }

  const kr_stats2_t before = stats2();
  PoolBuffer application;
  const bool granted = application.allocate(r, m.gpu.vram, bytes);
  const kr_stats2_t after = stats2();
  r.expect(granted, "the application's allocation failed although the retained arena would make "
                    "room");
  r.expect(after.application_retries - before.application_retries == 1,
           "application_retries went up by %" PRIu64 ", expected 1",
           after.application_retries - before.application_retries);
  r.expect(after.bytes_released_for_application - before.bytes_released_for_application >= bytes,
           "%s released for the application, expected at least %s",
           bytes_text(after.bytes_released_for_application - before.bytes_released_for_application)
               .c_str(),
           bytes_text(bytes).c_str());
  r.expect(after.base.retained_bytes[KR_TIER_DEVICE] == 0, "%s still retained on the device",
           bytes_text(after.base.retained_bytes[KR_TIER_DEVICE]).c_str());
  // Kernels need the device's memory back before they run.
  for (void* p : ballast) raw.hsa_amd_memory_pool_free_fn(p);
  ballast.clear();
  if (granted && fill(r, m, application.get(), bytes, 0xD01)) {
    verify(r, m, application.get(), bytes, 0xD01, false, "the application's new allocation");
  }
  verify(r, m, tracked.get(), bytes, 0xD00, false, "the tracked buffer, untouched");
}

// ---- (o) consecutive dispatches: the next snapshot copies only what changed ---------------

kr_stats2_t stats2_now() {
  kr_stats2_t stats{};
  stats.struct_size = sizeof(stats);
  kr_get_stats2(&stats);
  return stats;
}

void test_incremental(Reporter& r, const Module& m) {
  const uint64_t size = 8 * MiB;
  PoolBuffer a, b;
  if (!a.allocate(r, m.gpu.vram, size) || !b.allocate(r, m.gpu.vram, size)) return;
  if (!fill(r, m, a.get(), size, 0x700) || !fill(r, m, b.get(), size, 0x701)) return;
  {
    Snapshot first(kr_snap(m.gpu.agent));
    if (!expect_complete(r, first, m.gpu.agent)) return;
  }
  // The next dispatch rewrites a; b stays as it was.
  if (!mutate(r, m, a.get(), size)) return;
  const kr_stats2_t before = stats2_now();
  Snapshot second(kr_snap(m.gpu.agent));
  if (!expect_complete(r, second, m.gpu.agent)) return;
  const kr_stats2_t after = stats2_now();
  const uint64_t copied = after.blocks_copied - before.blocks_copied;
  const uint64_t a_blocks = size / 4096;
  if (kr_snapshot_copy_method(second.s) == KR_COPY_METHOD_DIRTY_BLOCKS) {
    r.expect(kr_snapshot_incremental(second.s),
             "a dirty-block snapshot of the same regions into the retained arenas is incremental");
    // Every block of a changed; b's did not (module variables may add a few).
    r.expect(copied >= a_blocks && copied < a_blocks + 64,
             "the incremental snapshot copied %" PRIu64 " blocks; a has %" PRIu64, copied,
             a_blocks);
  } else {
    r.expect(!kr_snapshot_incremental(second.s), "only dirty blocks snapshot incrementally");
  }
  r.note("strategy %d, incremental %d, %" PRIu64 " blocks copied",
         static_cast<int>(kr_snapshot_copy_method(second.s)),
         static_cast<int>(kr_snapshot_incremental(second.s)), copied);
  // Both overwritten; the restore brings back a as rewritten, b as before.
  if (!fill(r, m, a.get(), size, 0x7FF) || !fill(r, m, b.get(), size, 0x7FE)) return;
  kr_restore_report_t report{};
  kr_restore_with_report(second.s, &report);
  expect_report(r, report, kr_snapshot_region_count(second.s), 0);
  verify(r, m, a.get(), size, 0x700, true, "a: as the dispatch before the snapshot left it");
  verify(r, m, b.get(), size, 0x701, false, "b: unchanged since the first snapshot");
}

// ---- (p) a tool's batch copy moves the regions --------------------------------------------

struct ToolCopies {
  int captures = 0;
  int restores = 0;
  size_t regions = 0;
};

// A tool's batch copy, as an SDK would write one: every region submitted
// as an async copy on one completion signal, waited for once.
hsa_status_t tool_batch_copy(hsa_agent_t agent, const kr_copy_region_t* regions, size_t count,
                             kr_copy_direction_t direction, void* data) {
  auto* seen = static_cast<ToolCopies*>(data);
  (direction == KR_COPY_RESTORE ? seen->restores : seen->captures) += 1;
  seen->regions += count;
  hsa_signal_t done{0};
  hsa_status_t status = hsa_signal_create(hsa_signal_value_t(count), 0, nullptr, &done);
  if (status != HSA_STATUS_SUCCESS) return status;
  size_t submitted = 0;
  for (; submitted < count; ++submitted) {
    const kr_copy_region_t& region = regions[submitted];
    status = hsa_amd_memory_async_copy(reinterpret_cast<void*>(uintptr_t(region.dst)), agent,
                                       reinterpret_cast<const void*>(uintptr_t(region.src)),
                                       agent, region.size, 0, nullptr, done);
    if (status != HSA_STATUS_SUCCESS) break;
  }
  // Wait for what was submitted (the rest never will signal).
  hsa_signal_subtract_screlease(done, hsa_signal_value_t(count - submitted));
  const hsa_signal_value_t left = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1,
                                                            UINT64_MAX, HSA_WAIT_STATE_BLOCKED);
  hsa_signal_destroy(done);
  if (status != HSA_STATUS_SUCCESS) return status;
  return left == 0 ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

void test_batch_copy(Reporter& r, const Module& m) {
  const char* forced = std::getenv("KERNEL_REPLAY_STRATEGY");
  const bool copies = forced != nullptr && std::strcmp(forced, "copies") == 0;
  ToolCopies seen;
  kr_set_batch_copy(tool_batch_copy, &seen);
  struct Unregister {
    ~Unregister() { kr_set_batch_copy(nullptr, nullptr); }
  } unregister;
  const uint64_t size = 4 * MiB;
  PoolBuffer big;
  std::vector<PoolBuffer> small(32);
  if (!big.allocate(r, m.gpu.vram, size) || !fill(r, m, big.get(), size, 0x800)) return;
  for (size_t i = 0; i < small.size(); ++i) {
    if (!small[i].allocate(r, m.gpu.vram, 64 * 1024) ||
        !fill(r, m, small[i].get(), 64 * 1024, 0x810 + uint32_t(i))) {
      return;
    }
  }
  const kr_stats2_t before = stats2_now();
  Snapshot snapshot(kr_snap(m.gpu.agent));
  if (!expect_complete(r, snapshot, m.gpu.agent)) return;
  const kr_copy_method_t expected = copies ? KR_COPY_METHOD_COPIES : KR_COPY_METHOD_BATCH_COPY;
  r.expect(kr_snapshot_copy_method(snapshot.s) == expected, "the snapshot ran copy method %d, not %d",
           static_cast<int>(kr_snapshot_copy_method(snapshot.s)), static_cast<int>(expected));
  if (!mutate(r, m, big.get(), size)) return;
  for (size_t i = 0; i < small.size(); ++i) {
    if (!mutate(r, m, small[i].get(), 64 * 1024)) return;
  }
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.s, &report);
  expect_report(r, report, kr_snapshot_region_count(snapshot.s), 0);
  verify(r, m, big.get(), size, 0x800, false, "the 4 MiB buffer, restored by the tool");
  for (size_t i = 0; i < small.size(); ++i) {
    verify(r, m, small[i].get(), 64 * 1024, 0x810 + uint32_t(i), false, "a 64 KiB buffer");
  }
  const kr_stats2_t after = stats2_now();
  const int calls = copies ? 0 : 1;
  r.expect(seen.captures == calls && seen.restores == calls,
           "the tool was called %d times to capture and %d to restore; expected %d each",
           seen.captures, seen.restores, calls);
  r.expect(after.batch_copy_calls - before.batch_copy_calls == uint64_t(2 * calls) &&
               after.batch_copy_failures == before.batch_copy_failures,
           "stats: %" PRIu64 " batch-copy calls, %" PRIu64 " failed",
           after.batch_copy_calls - before.batch_copy_calls,
           after.batch_copy_failures - before.batch_copy_failures);
  r.note("the tool copied %zu regions in %d calls", seen.regions, seen.captures + seen.restores);
}

// ---- final accounting ------------------------------------------------------------------------------

// The library's kernel and verify counters (kr_stats2_t's fields of issue
// 12), read where the header the test is built against has them, so the
// test builds against libraries with and without them.
template <typename S, typename = void>
struct HasKernelStats : std::false_type {};
template <typename S>
struct HasKernelStats<S, std::void_t<decltype(S::scatter_dispatches),
                                     decltype(S::dirty_block_dispatches),
                                     decltype(S::blocks_compared), decltype(S::blocks_copied),
                                     decltype(S::kernel_fallbacks),
                                     decltype(S::verified_restores),
                                     decltype(S::verify_mismatched_regions),
                                     decltype(S::verify_mismatched_bytes)>> : std::true_type {};

template <typename S>
void report_kernel_stats(Reporter& r, const S& stats) {
  if constexpr (HasKernelStats<S>::value) {
    r.note("library kernels: %" PRIu64 " scatter dispatches, %" PRIu64
           " dirty-block dispatches (%" PRIu64 " blocks compared, %" PRIu64
           " copied), %" PRIu64 " fallbacks to copies; %" PRIu64 " restores verified",
           uint64_t(stats.scatter_dispatches), uint64_t(stats.dirty_block_dispatches),
           uint64_t(stats.blocks_compared), uint64_t(stats.blocks_copied),
           uint64_t(stats.kernel_fallbacks), uint64_t(stats.verified_restores));
    r.expect(stats.verify_mismatched_regions == 0 && stats.verify_mismatched_bytes == 0,
             "verify mode found %" PRIu64 " regions (%" PRIu64 " bytes) different from their "
             "snapshot after a restore",
             uint64_t(stats.verify_mismatched_regions), uint64_t(stats.verify_mismatched_bytes));
  } else {
    (void)stats;
    r.note("library kernels: this library's kr_stats2_t has no kernel or verify counters");
  }
}

// Runs after kr_finalize and kr_trim_retained: nothing of the library's
// (arenas, signals, snapshot buffers) may remain in the runtime, nor any
// vmem object of the tests'.
void test_accounting(Reporter& r) {
  r.expect(refused_copies() == g_expected_violations,
           "the runtime refused %" PRIu64 " copies (freed or out-of-bounds memory), %" PRIu64
           " on purpose",
           refused_copies(), g_expected_violations);
  r.expect(hsa_rt_count(HSA_RT_COUNT_BACKEND_ERRORS) == 0,
           "%" PRIu64 " CUDA calls failed inside the runtime",
           hsa_rt_count(HSA_RT_COUNT_BACKEND_ERRORS));
  r.expect(kr_host_bytes_in_use() == 0, "snapshots still hold %" PRIu64 " host bytes",
           kr_host_bytes_in_use());
  r.expect(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0, "%" PRIu64 " allocations still live",
           hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS));
  r.expect(hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS) == 0, "%" PRIu64 " signals still live",
           hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS));
  r.expect(hsa_rt_count(HSA_RT_COUNT_LIVE_QUEUES) == 0, "%" PRIu64 " AQL queues still live",
           hsa_rt_count(HSA_RT_COUNT_LIVE_QUEUES));
  r.expect(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 &&
               hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 0 &&
               hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0,
           "vmem objects left: %" PRIu64 " mappings, %" PRIu64 " handles, %" PRIu64
           " reservations",
           hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS), hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES),
           hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS));
  r.expect(kr_tracked_count(hsa_rt_cpu_agent()) == 0, "the CPU agent still has tracked blocks");
  for (const Module& m : g_modules) {
    r.expect(kr_tracked_count(m.gpu.agent) == 0, "%s still has %zu tracked blocks",
             m.gpu.name.c_str(), kr_tracked_count(m.gpu.agent));
  }
  r.note("copies issued by the runtime: H2D %" PRIu64 " (%s), D2H %" PRIu64 " (%s), D2D %" PRIu64
         ", H2H %" PRIu64,
         hsa_rt_count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE),
         bytes_text(hsa_rt_count(HSA_RT_COUNT_COPY_BYTES_HOST_TO_DEVICE)).c_str(),
         hsa_rt_count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST),
         bytes_text(hsa_rt_count(HSA_RT_COUNT_COPY_BYTES_DEVICE_TO_HOST)).c_str(),
         hsa_rt_count(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE),
         hsa_rt_count(HSA_RT_COUNT_COPIES_HOST_TO_HOST));
  r.note("AQL dispatches run by the runtime's packet processors: %" PRIu64,
         hsa_rt_count(HSA_RT_COUNT_DISPATCHES));
  report_kernel_stats(r, stats2());
}

void usage(const char* program) {
  std::printf("usage: %s --cubin PATH [--only TEXT] [--storage NAME[,NAME...]] [--quick]\n"
              "       %s --before-init\n",
              program, program);
}

// --before-init (no driver needed): kernel-replay installs over fresh copies
// of the runtime's tables before the runtime is up, and its wrappers chain to
// the runtime (an allocation answers NOT_INITIALIZED through them).
int check_before_init() {
  CoreApiTable core;
  AmdExtTable amd;
  hsa_rt_fill_core_table(&core);
  hsa_rt_fill_amd_ext_table(&amd);
  kr_set_log_level(KR_LOG_ERROR);
  CHECK(kr_memory_tracker_init(&core, &amd, 0) == KR_STATUS_SUCCESS);
  CHECK(core.hsa_memory_allocate_fn != hsa_rt_core_table()->hsa_memory_allocate_fn &&
        amd.hsa_amd_memory_pool_allocate_fn !=
            hsa_rt_amd_ext_table()->hsa_amd_memory_pool_allocate_fn);
  void* ptr = nullptr;
  CHECK(amd.hsa_amd_memory_pool_allocate_fn(hsa_amd_memory_pool_t{1}, 64, 0, &ptr) ==
        HSA_STATUS_ERROR_NOT_INITIALIZED);
  return kr_check_summary("kernel_replay_gpu_test --before-init");
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc == 2 && std::strcmp(argv[1], "--before-init") == 0) return check_before_init();
  // First, so that a machine without a GPU exits 77 whatever the arguments.
  const int no_runtime = harness::start_runtime("kernel_replay_gpu_test");
  if (no_runtime >= 0) return no_runtime;

  const char* cubin = nullptr;
  const char* only = nullptr;
  std::string storage;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cubin") == 0 && i + 1 < argc) {
      cubin = argv[++i];
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--storage") == 0 && i + 1 < argc) {
      storage = std::string(",") + argv[++i] + ",";
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      g_quick = true;
    } else {
      usage(argv[0]);
      hsa_rt_shutdown();
      return 2;
    }
  }
  if (cubin == nullptr) {
    usage(argv[0]);
    hsa_rt_shutdown();
    return 2;
  }

  std::printf("kernel-replay %s on HSA-on-CUDA; CUDA driver API %s, kernel module %s\n",
              kr_version(), harness::cuda_driver_api_version().c_str(),
              harness::kernel_module_version().c_str());
  const auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : "(unset)";
  };
  std::printf("KERNEL_REPLAY_STRATEGY=%s KERNEL_REPLAY_VERIFY=%s KERNEL_REPLAY_CODE_OBJECT=%s\n",
              env("KERNEL_REPLAY_STRATEGY"), env("KERNEL_REPLAY_VERIFY"),
              env("KERNEL_REPLAY_CODE_OBJECT"));
  const std::vector<harness::Gpu> gpus = harness::gpus();
  for (const harness::Gpu& gpu : gpus) {
    std::printf("GPU %u: %s (CUDA device %d), %s free\n", gpu.index, gpu.name.c_str(),
                gpu.ordinal, bytes_text(harness::free_device_memory(gpu.agent)).c_str());
  }
  // Storage policies to run the replay tests under.
  std::vector<harness::StoragePolicy> policies;
  for (const harness::StoragePolicy& policy : harness::storage_policies()) {
    if (storage.empty() || storage.find("," + policy.name + ",") != std::string::npos) {
      policies.push_back(policy);
    }
  }
  const bool have_policies = !policies.empty();
  if (!have_policies) policies.push_back({"library default", -1});
  std::printf("storage policies: ");
  for (const auto& policy : policies) std::printf("%s ", policy.name.c_str());
  std::printf("%s\n\n", have_policies ? "" : "(kr_set_storage_policy not in this library)");

  Reporter r;
  r.begin("setup: install kernel-replay, load the cubin on every GPU");
  bool ready = harness::install_kernel_replay(on_log, nullptr);
  if (!ready) r.fail("kernel-replay could not be installed over HSA-on-CUDA's tables");
  for (size_t i = 0; ready && i < gpus.size(); ++i) {
    Module m;
    ready = load_module(r, gpus[i], cubin, &m);
    g_modules.push_back(m);
  }
  r.end();
  if (!ready) {
    for (Module& m : g_modules) unload_module(m);
    hsa_rt_shutdown();
    r.summary();
    return 1;
  }

  auto run = [&](const std::string& name, auto&& body) {
    if (only != nullptr && name.find(only) == std::string::npos) return;
    r.begin(name);
    body();
    r.end();
  };
  const Module& m0 = g_modules[0];
  // The vmem tests skip, saying why, where the headers, the driver or the
  // library lack the API.
#if HSA_RT_HAVE_VMEM
#define KR_VMEM_TEST(test)                     \
  [&] {                                        \
    if (const char* why = vmem_unavailable()) { \
      r.skip("%s", why);                       \
    } else {                                   \
      test(r, m0);                             \
    }                                          \
  }
#else
#define KR_VMEM_TEST(test) [&] { r.skip("%s", vmem_unavailable()); }
#endif
  run("runtime: pools, pointer info, copies, async copy", [&] { test_runtime(r, m0); });
  run("runtime: a range freed through the runtime is reserved while it is remembered",
      [&] { test_reuse_cache_release(r, m0); });
  for (const harness::StoragePolicy& policy : policies) {
    const std::string tag = have_policies ? " [storage " + policy.name + "]" : "";
    if (have_policies && !harness::set_storage_policy(policy.value)) {
      run("storage policy " + policy.name,
          [&] { r.fail("kr_set_storage_policy(%d) refused", policy.value); });
      continue;
    }
    run("a: saxpy accumulating into y, 5 passes" + tag, [&] { test_saxpy(r, m0); });
    // The same, the application dispatching saxpy through an AQL queue of
    // the runtime (kernarg pool, dispatch packet, doorbell, completion
    // signal), as HIP does on ROCm.
    run("h: saxpy dispatched through an AQL queue, 5 passes" + tag,
        [&] {
          test_saxpy(r, m0, &g_modules[0]);
          release_aql(g_modules[0]);
        });
    run("b: __device__ counter restored, __constant__ table captured" + tag,
        [&] { test_module_variables(r, m0); });
    for (size_t i = 0; i < g_modules.size(); ++i) {
      const Module* peer =
          g_modules.size() > 1 ? &g_modules[(i + 1) % g_modules.size()] : nullptr;
      run("c: buffers of 4 KiB..256 MiB on GPU " + std::to_string(i) +
              ", host and peer memory left alone" + tag,
          [&] { test_buffers(r, g_modules[i], peer); });
    }
    if (g_modules.size() >= 2) {
      run("c: two GPU agents, each snapshot restores only its own" + tag,
          [&] { test_two_agents(r, g_modules[0], g_modules[1]); });
    }
    run("q: pinned and registered host memory written by the kernel, restored each pass" + tag,
        [&] { test_host_memory(r, m0); });
    run("d: a buffer freed between snap and restore is skipped" + tag,
        [&] { test_freed_buffer(r, m0); });
    run("e: an address reused by a new allocation is not written" + tag,
        [&] { test_address_reuse(r, m0); });
    run("f: a footprint of at least 4 GiB restored exactly" + tag,
        [&] { test_large_footprint(r, m0); });
    run("g: a declined snapshot runs the dispatch once" + tag, [&] { test_declined(r, m0); });
    run("i: an executable unloaded between snap and restore is skipped" + tag,
        [&] { test_unloaded_executable(r, m0, cubin); });
    run("j: a hipMallocAsync-style heap of 32 MiB chunks, one unmapped under a held snapshot" + tag,
        KR_VMEM_TEST(test_vm_heap));
    run("k: expandable segments grown by 2 MiB and 20 MiB pages, shrunk between dispatches" + tag,
        KR_VMEM_TEST(test_expandable_segments));
    run("l: one handle mapped at two addresses, both views restored" + tag,
        KR_VMEM_TEST(test_two_views));
    // Arenas kept for reuse go back between policies, so each starts afresh.
    harness::trim_retained();
  }

  // Not per policy: the fence does not depend on where snapshots live, and
  // the nearly-full device forces the device tier itself.
  for (const harness::StoragePolicy& policy : policies) {
    if (policy.name == "auto") harness::set_storage_policy(policy.value);
  }
  run("m: an application async copy in flight: restores wait for it, a short timeout declines",
      [&] { test_copy_fence(r, m0); });
  run("n: the device nearly full: the retained arena makes room for the application",
      [&] { test_device_nearly_full(r, m0); });
  run("o: consecutive dispatches: the next snapshot copies only the blocks that changed",
      [&] { test_incremental(r, m0); });
  run("p: a tool's batch copy (kr_set_batch_copy) moves the regions, async copies of its own",
      [&] { test_batch_copy(r, m0); });
  harness::trim_retained();

  // Teardown as a tool's finalizer would: the guard first (the library then
  // releases what it keeps), then what the application holds, then the
  // runtime.
  kr_finalize();
  harness::trim_retained();
  run("accounting: no refused copies, no CUDA errors, nothing left over",
      [&] { test_accounting(r); });
  for (Module& m : g_modules) unload_module(m);
  hsa_rt_shutdown();
  return r.summary();
}
