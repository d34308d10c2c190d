/* harness.h: what the GPU test and the GPU bench share: starting HSA-on-CUDA
 * (with the "no GPU" exit code), installing kernel-replay over its tables the
 * way a tool's OnLoad does, checked CUDA / HSA calls, contexts, and a few
 * formatting and machine-description helpers. */
#ifndef KR_GPU_HARNESS_H
#define KR_GPU_HARNESS_H

#include <cstdint>
#include <string>
#include <vector>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include "cuda_driver.h"
#include "hsa_rt.h"
#include "kernel_replay.h"

namespace harness {

/* What a program returns when there is no CUDA driver or no CUDA device:
 * ctest's "skipped" code, so a machine without a GPU skips instead of failing. */
constexpr int kExitNoGpu = 77;

/* The resolved driver (valid after start_runtime succeeded). */
const cuda_driver_t& cu();

/* Checked calls: true on success, else print the call, where, the code, its
 * name and description, and return false. */
bool cuda_ok(CUresult result, const char* call, const char* file, int line);
bool hsa_ok(hsa_status_t status, const char* call, const char* file, int line);
#define KR_CU(call) ::harness::cuda_ok((call), #call, __FILE__, __LINE__)
#define KR_HSA(call) ::harness::hsa_ok((call), #call, __FILE__, __LINE__)

std::string cuda_error_text(CUresult result);
std::string hsa_status_text(hsa_status_t status);

/* Starts HSA-on-CUDA. Returns -1 when it is up; otherwise prints why and
 * returns the exit code: kExitNoGpu ("no CUDA driver" / "no CUDA device"),
 * or 1 for any other failure. */
int start_runtime(const char* program);

/* Installs kernel-replay over the runtime's tables as a tool's OnLoad does
 * (kr_memory_tracker_init, the loader extension's executable iterator,
 * tracking on), with log messages going to `log`. Prints and returns false
 * on any failure. */
bool install_kernel_replay(kr_log_callback_t log, void* user_data);

/* hsa_rt_executable_register_kernel, the kernel object being the CUfunction
 * on the CUDA backend. */
hsa_status_t register_kernel(hsa_executable_t executable, const char* name, CUfunction* function);

struct Gpu {
  uint32_t index = 0;  // 0-based GPU index (agent index - 1)
  hsa_agent_t agent{0};
  CUcontext context = nullptr;
  int ordinal = -1;
  std::string name;
  hsa_amd_memory_pool_t vram{0};
};
std::vector<Gpu> gpus();

/* Makes a context current for the scope; puts the previous one back. */
class ContextScope {
 public:
  explicit ContextScope(CUcontext context);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  bool ok() const { return ok_; }

 private:
  CUcontext previous_ = nullptr;
  bool ok_ = false;
};

/* Free device memory of a GPU agent (HSA_RT_AGENT_INFO_MEMORY_AVAIL); 0 on error. */
uint64_t free_device_memory(hsa_agent_t agent);
/* MemAvailable from /proc/meminfo, in bytes; 0 if unknown. */
uint64_t available_host_memory();

/* kernel-replay's storage policies (kr_set_storage_policy), resolved at run
 * time so the harness runs against libraries with and without them. */
struct StoragePolicy {
  std::string name;  // "auto", "device", "pinned", "pageable", "baseline"
  int value;         // kr_storage_policy_t
};
/* Every policy, when the library has kr_set_storage_policy; else empty. */
std::vector<StoragePolicy> storage_policies();
/* kr_set_storage_policy(value); false if absent or refused. */
bool set_storage_policy(int value);
/* kr_storage_policy() is KR_STORAGE_BASELINE; false if the library has no
 * storage policies. */
bool storage_policy_is_baseline();
/* kr_trim_retained(); 0 if the library has no such call. */
uint64_t trim_retained();
/* kr_snapshot_tier_bytes(snapshot, tier) for tiers 0..2, as "device 1 GiB,
 * pinned 0 B, pageable 0 B"; "" if the library has no tiers. */
std::string snapshot_tiers(const kr_snapshot_t* snapshot);
/* An optional kr_* entry point by name; NULL when the library lacks it. */
void* kr_symbol(const char* name);

double now_seconds();  // steady clock
std::string bytes_text(uint64_t bytes);  // "1.25 GiB", "4 KiB"
std::string utc_date();                  // "2025-01-31 12:34:56 UTC"

/* "13.0" from cuDriverGetVersion, the kernel module's version line from
 * /proc/driver/nvidia/version, the host's CPU model. */
std::string cuda_driver_api_version();
std::string kernel_module_version();
std::string cpu_model();

}  // namespace harness

#endif /* KR_GPU_HARNESS_H */
