// hsa_cuda_selfcheck: what can be verified about the GPU harness without a
// GPU, run by ctest on every machine.
//
//   hsa_cuda_selfcheck [--fake-driver LIBCUDA] [PROGRAM...]
//
// 1. The tables: version fields as ROCr fills them, and every entry
//    kernel-replay reads or replaces (and the async-copy and signal entries a
//    tool may use) non-NULL.
// 2. kernel-replay accepts them: kr_memory_tracker_init over fresh copies of
//    the tables succeeds and installs its wrappers, which chain to the
//    runtime (an allocation before init answers NOT_INITIALIZED through them).
// 3. Before hsa_cuda_init every entry answers HSA_STATUS_ERROR_NOT_INITIALIZED.
// 4. hsa_cuda_init with a driver library that does not exist
//    (HSA_CUDA_LIBCUDA) fails cleanly with HSA_CUDA_INIT_NO_DRIVER and a
//    message saying "no CUDA driver", holding nothing.
// 5. Each PROGRAM (the GPU test and bench) run without a driver prints "no
//    CUDA driver" and exits 77; with --fake-driver and no devices
//    (FAKE_CUDA_DEVICES=0), "no CUDA device" and 77.
// 6. Then the real libcuda.so.1, if this machine has one: init succeeds and
//    shows at least one GPU agent with its pool, or reports why not (not a
//    failure: most machines running this have no GPU).

#include <sys/wait.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include "hsa_cuda/hsa_cuda.h"
#include "kernel_replay.h"

namespace {

int g_failures = 0;

void check(bool condition, const char* what) {
  std::printf("  %s %s\n", condition ? "ok  " : "FAIL", what);
  if (!condition) ++g_failures;
}

template <typename Table>
bool entry_set(const Table& table, size_t offset) {
  void* entry = nullptr;
  std::memcpy(&entry, reinterpret_cast<const unsigned char*>(&table) + offset, sizeof(entry));
  return entry != nullptr;
}

#define CHECK_ENTRY(table, field) \
  check(entry_set(table, offsetof(std::remove_reference_t<decltype(table)>, field)), #field " is set")

// Runs a program through the shell with the given environment assignments
// prepended; returns its exit status (-1 if it did not exit) and its output.
int run_program(const std::string& environment, const std::string& program, std::string* output) {
  const std::string command = environment + " '" + program + "' 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void check_program(const std::string& environment, const std::string& program,
                   const char* expected_text) {
  std::string output;
  const int code = run_program(environment, program, &output);
  const std::string what = program + " (" + environment + ") exits 77 saying \"" +
                           expected_text + "\"";
  const bool ok = code == 77 && output.find(expected_text) != std::string::npos;
  check(ok, what.c_str());
  if (!ok) std::printf("       exit %d, output:\n%s\n", code, output.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const char* fake_driver = nullptr;
  std::vector<std::string> programs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fake-driver") == 0 && i + 1 < argc) {
      fake_driver = argv[++i];
    } else {
      programs.emplace_back(argv[i]);
    }
  }

  std::printf("tables\n");
  CoreApiTable core;
  AmdExtTable amd;
  hsa_cuda_fill_core_table(&core);
  hsa_cuda_fill_amd_ext_table(&amd);
  // Which ROCm generation's tables these are (the headers compiled against).
  std::printf("  CoreApiTable major %u, %u bytes, step %u; AmdExtTable major %u, %u bytes, step %u\n",
              core.version.major_id, core.version.minor_id, core.version.step_id,
              amd.version.major_id, amd.version.minor_id, amd.version.step_id);
  check(core.version.major_id == HSA_CORE_API_TABLE_MAJOR_VERSION &&
            core.version.minor_id == sizeof(CoreApiTable) &&
            core.version.step_id == HSA_CORE_API_TABLE_STEP_VERSION,
        "CoreApiTable version: major, minor = sizeof(table), step");
  check(amd.version.major_id == HSA_AMD_EXT_API_TABLE_MAJOR_VERSION &&
            amd.version.minor_id == sizeof(AmdExtTable) &&
            amd.version.step_id == HSA_AMD_EXT_API_TABLE_STEP_VERSION,
        "AmdExtTable version: major, minor = sizeof(table), step");
  check(hsa_cuda_core_table_size() == sizeof(CoreApiTable) &&
            hsa_cuda_amd_ext_table_size() == sizeof(AmdExtTable),
        "table sizes reported by the runtime");
  check(std::memcmp(hsa_cuda_core_table(), &core, sizeof(core)) == 0 &&
            std::memcmp(hsa_cuda_amd_ext_table(), &amd, sizeof(amd)) == 0,
        "the runtime's own tables equal fresh fills");
  CHECK_ENTRY(core, hsa_memory_allocate_fn);
  CHECK_ENTRY(core, hsa_memory_free_fn);
  CHECK_ENTRY(core, hsa_memory_copy_fn);
  CHECK_ENTRY(core, hsa_executable_iterate_agent_symbols_fn);
  CHECK_ENTRY(core, hsa_executable_symbol_get_info_fn);
  CHECK_ENTRY(core, hsa_iterate_agents_fn);
  CHECK_ENTRY(core, hsa_agent_get_info_fn);
  CHECK_ENTRY(core, hsa_signal_create_fn);
  CHECK_ENTRY(core, hsa_signal_destroy_fn);
  CHECK_ENTRY(core, hsa_signal_load_scacquire_fn);
  CHECK_ENTRY(core, hsa_signal_store_relaxed_fn);
  CHECK_ENTRY(core, hsa_signal_wait_scacquire_fn);
  CHECK_ENTRY(core, hsa_system_get_major_extension_table_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_pool_allocate_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_pool_free_fn);
  CHECK_ENTRY(amd, hsa_amd_pointer_info_fn);
  CHECK_ENTRY(amd, hsa_amd_agent_iterate_memory_pools_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_pool_get_info_fn);
  CHECK_ENTRY(amd, hsa_amd_agent_memory_pool_get_info_fn);
  CHECK_ENTRY(amd, hsa_amd_agents_allow_access_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_async_copy_fn);

  std::printf("kernel-replay over the tables\n");
  CoreApiTable core_copy;
  AmdExtTable amd_copy;
  hsa_cuda_fill_core_table(&core_copy);
  hsa_cuda_fill_amd_ext_table(&amd_copy);
  kr_set_log_level(KR_LOG_ERROR);
  check(kr_memory_tracker_init(&core_copy, &amd_copy, 0) == KR_STATUS_SUCCESS,
        "kr_memory_tracker_init accepts the tables");
  check(core_copy.hsa_memory_allocate_fn != core.hsa_memory_allocate_fn &&
            amd_copy.hsa_amd_memory_pool_allocate_fn != amd.hsa_amd_memory_pool_allocate_fn,
        "its allocation wrappers went in");
  void* ptr = nullptr;
  check(amd_copy.hsa_amd_memory_pool_allocate_fn(hsa_amd_memory_pool_t{1}, 64, 0, &ptr) ==
            HSA_STATUS_ERROR_NOT_INITIALIZED,
        "a wrapped allocation before init chains to the runtime: NOT_INITIALIZED");

  std::printf("before hsa_cuda_init\n");
  check(!hsa_cuda_initialized() && hsa_cuda_gpu_count() == 0, "not initialized, no agents");
  check(core.hsa_memory_allocate_fn(hsa_region_t{1}, 64, &ptr) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_memory_allocate: NOT_INITIALIZED");
  char buffer[64];
  check(core.hsa_memory_copy_fn(buffer, buffer + 32, 16) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_memory_copy: NOT_INITIALIZED");
  check(core.hsa_iterate_agents_fn([](hsa_agent_t, void*) { return HSA_STATUS_SUCCESS; },
                                   nullptr) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_iterate_agents: NOT_INITIALIZED");
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  check(amd.hsa_amd_pointer_info_fn(buffer, &info, nullptr, nullptr, nullptr) ==
            HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_amd_pointer_info: NOT_INITIALIZED");
  hsa_signal_t signal{0};
  check(core.hsa_signal_create_fn(0, 0, nullptr, &signal) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_signal_create: NOT_INITIALIZED");
  check(hsa_cuda_iterate_executables([](hsa_executable_t, void*) { return HSA_STATUS_SUCCESS; },
                                     nullptr) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_cuda_iterate_executables: NOT_INITIALIZED");

  std::printf("init without a driver\n");
  setenv("HSA_CUDA_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  check(hsa_cuda_init() == HSA_CUDA_INIT_NO_DRIVER, "hsa_cuda_init: HSA_CUDA_INIT_NO_DRIVER");
  check(std::strncmp(hsa_cuda_init_message(), "no CUDA driver", 14) == 0 &&
            std::strstr(hsa_cuda_init_message(), "/nonexistent/libcuda.so.1") != nullptr,
        "its message says \"no CUDA driver\" and names the library");
  std::printf("       (%s)\n", hsa_cuda_init_message());
  check(!hsa_cuda_initialized() && hsa_cuda_gpu_count() == 0 &&
            hsa_cuda_cpu_agent().handle == 0,
        "nothing is held after the failed init");
  unsetenv("HSA_CUDA_LIBCUDA");

  if (!programs.empty()) std::printf("programs without a GPU\n");
  for (const std::string& program : programs) {
    check_program("HSA_CUDA_LIBCUDA=/nonexistent/libcuda.so.1", program, "no CUDA driver");
    if (fake_driver != nullptr) {
      check_program(std::string("HSA_CUDA_LIBCUDA='") + fake_driver + "' FAKE_CUDA_DEVICES=0",
                    program, "no CUDA device");
    }
  }

  std::printf("this machine's driver\n");
  const hsa_cuda_init_status_t status = hsa_cuda_init();
  if (status == HSA_CUDA_INIT_OK) {
    const uint32_t gpus = hsa_cuda_gpu_count();
    check(gpus >= 1, "at least one GPU agent");
    check(gpus >= 1 && hsa_cuda_pool(hsa_cuda_gpu_agent(0), HSA_CUDA_POOL_DEVICE_COARSE).handle != 0 &&
              hsa_cuda_agent_context(hsa_cuda_gpu_agent(0)) != nullptr,
          "GPU 0 has a device pool and a context");
    std::printf("       %u GPU agent(s)\n", gpus);
    hsa_cuda_shutdown();
    check(!hsa_cuda_initialized(), "shut down");
  } else {
    std::printf("  --   no usable CUDA driver here (%s): the GPU checks are the device run's\n",
                hsa_cuda_init_message());
  }

  std::printf("%s: %d failure(s)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}
