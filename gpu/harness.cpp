// harness.cpp: see harness.h.

#include "harness.h"

#include <dlfcn.h>
#include <hsa/hsa_ven_amd_loader.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace harness {

const cuda_driver_t& cu() { return *hsa_rt_cuda_driver(); }

std::string cuda_error_text(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  const cuda_driver_t* driver = hsa_rt_cuda_driver();
  if (driver != nullptr) {
    if (driver->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (driver->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  return std::to_string(result) + " " + (name != nullptr ? name : "(unknown CUresult)") + ": " +
         (text != nullptr ? text : "no description");
}

std::string hsa_status_text(hsa_status_t status) {
  const char* text = nullptr;
  char code[32];
  std::snprintf(code, sizeof(code), "0x%x", static_cast<unsigned>(status));
  if (hsa_status_string(status, &text) != HSA_STATUS_SUCCESS || text == nullptr) {
    return std::string(code);
  }
  return std::string(code) + " " + text;
}

bool cuda_ok(CUresult result, const char* call, const char* file, int line) {
  if (result == CUDA_SUCCESS) return true;
  std::printf("      CUDA call failed at %s:%d: %s -> %s\n", file, line, call,
              cuda_error_text(result).c_str());
  std::fflush(stdout);
  return false;
}

bool hsa_ok(hsa_status_t status, const char* call, const char* file, int line) {
  if (status == HSA_STATUS_SUCCESS) return true;
  std::printf("      HSA call failed at %s:%d: %s -> %s\n", file, line, call,
              hsa_status_text(status).c_str());
  std::fflush(stdout);
  return false;
}

int start_runtime(const char* program) {
  const hsa_rt_init_status_t status = hsa_rt_init();
  switch (status) {
    case HSA_RT_INIT_OK:
      return -1;
    case HSA_RT_INIT_NO_DRIVER:
      // hsa_rt_init_message() starts with "no CUDA driver: ".
      std::printf("%s: %s; nothing to run without a GPU (exit %d)\n", program,
                  hsa_rt_init_message(), kExitNoGpu);
      return kExitNoGpu;
    case HSA_RT_INIT_NO_DEVICE:
      std::printf("%s: %s; nothing to run without a GPU (exit %d)\n", program,
                  hsa_rt_init_message(), kExitNoGpu);
      return kExitNoGpu;
    default:
      std::printf("%s: HSA-on-CUDA failed to start (status %d): %s\n", program,
                  static_cast<int>(status), hsa_rt_init_message());
      return 1;
  }
}

bool install_kernel_replay(kr_log_callback_t log, void* user_data) {
  kr_set_log_callback(log, user_data);
  const kr_status_t status =
      kr_memory_tracker_init(hsa_rt_core_table(), hsa_rt_amd_ext_table(), 0);
  if (status != KR_STATUS_SUCCESS) {
    std::printf("kr_memory_tracker_init refused the HSA-on-CUDA tables: status %d\n",
                static_cast<int>(status));
    return false;
  }
  // The library finds the loader's executable iterator itself (no
  // kr_set_executable_iterator, as under rocprofiler-sdk); check that the
  // runtime's loader extension table carries it.
  hsa_ven_amd_loader_1_03_pfn_t loader;
  std::memset(&loader, 0, sizeof(loader));
  if (!KR_HSA(hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1, sizeof(loader),
                                                   &loader))) {
    return false;
  }
  if (loader.hsa_ven_amd_loader_iterate_executables != hsa_rt_iterate_executables) {
    std::printf("the loader extension table does not carry hsa_rt_iterate_executables\n");
    return false;
  }
  if (!kr_set_tracking_enabled(true)) {
    std::printf("kr_set_tracking_enabled(true) left tracking off\n");
    return false;
  }
  return true;
}

hsa_status_t register_kernel(hsa_executable_t executable, const char* name, CUfunction* function) {
  uint64_t object = 0;
  const hsa_status_t status = hsa_rt_executable_register_kernel(executable, name, &object);
  if (status == HSA_STATUS_SUCCESS) *function = reinterpret_cast<CUfunction>(object);
  return status;
}

std::vector<Gpu> gpus() {
  std::vector<Gpu> list;
  for (uint32_t i = 0; i < hsa_rt_gpu_count(); ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.agent = hsa_rt_gpu_agent(i);
    gpu.context = hsa_rt_cuda_context(gpu.agent);
    gpu.ordinal = hsa_rt_cuda_device(gpu.agent);
    gpu.vram = hsa_rt_pool(gpu.agent, HSA_RT_POOL_DEVICE_COARSE);
    char name[64] = {};
    if (hsa_agent_get_info(gpu.agent, static_cast<hsa_agent_info_t>(HSA_AMD_AGENT_INFO_PRODUCT_NAME),
                           name) == HSA_STATUS_SUCCESS) {
      gpu.name = std::string(name, strnlen(name, sizeof(name)));
    }
    list.push_back(gpu);
  }
  return list;
}

ContextScope::ContextScope(CUcontext context) {
  if (!KR_CU(cu().cuCtxGetCurrent(&previous_))) return;
  ok_ = KR_CU(cu().cuCtxSetCurrent(context));
}

ContextScope::~ContextScope() {
  if (ok_) KR_CU(cu().cuCtxSetCurrent(previous_));
}

uint64_t free_device_memory(hsa_agent_t agent) {
  uint64_t free_bytes = 0;
  if (!KR_HSA(hsa_agent_get_info(
          agent, static_cast<hsa_agent_info_t>(HSA_RT_AGENT_INFO_MEMORY_AVAIL), &free_bytes))) {
    return 0;
  }
  return free_bytes;
}

uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t value = 0;
  std::string unit;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

void* kr_symbol(const char* name) { return dlsym(RTLD_DEFAULT, name); }

namespace {

// Converts a dlsym result to a function pointer without the cast ISO C++
// only conditionally supports.
template <typename Fn>
Fn kr_function(const char* name) {
  void* address = kr_symbol(name);
  Fn function = nullptr;
  static_assert(sizeof(function) == sizeof(address), "function pointers are pointer-sized");
  std::memcpy(&function, &address, sizeof(function));
  return function;
}

// The policy values: from the header when it has them (its
// KR_DEVICE_BUDGET_AUTO came with kr_storage_policy_t), else the values that
// header assigns, for a library newer than the header compiled against.
#ifdef KR_DEVICE_BUDGET_AUTO
constexpr int kStorageAuto = KR_STORAGE_AUTO;
constexpr int kStorageDevice = KR_STORAGE_DEVICE;
constexpr int kStoragePinned = KR_STORAGE_PINNED;
constexpr int kStoragePageable = KR_STORAGE_PAGEABLE;
constexpr int kStorageBaseline = KR_STORAGE_BASELINE;
#else
constexpr int kStorageAuto = 0;
constexpr int kStorageDevice = 1;
constexpr int kStoragePinned = 2;
constexpr int kStoragePageable = 3;
constexpr int kStorageBaseline = 4;
#endif

}  // namespace

std::vector<StoragePolicy> storage_policies() {
  if (kr_symbol("kr_set_storage_policy") == nullptr) return {};
  return {{"auto", kStorageAuto},
          {"device", kStorageDevice},
          {"pinned", kStoragePinned},
          {"pageable", kStoragePageable},
          {"baseline", kStorageBaseline}};
}

bool set_storage_policy(int value) {
  // bool kr_set_storage_policy(kr_storage_policy_t): the enum is int-sized.
  auto set = kr_function<bool (*)(int)>("kr_set_storage_policy");
  return set != nullptr && set(value);
}

bool storage_policy_is_baseline() {
  // kr_storage_policy_t kr_storage_policy(void): the enum is int-sized.
  auto get = kr_function<int (*)(void)>("kr_storage_policy");
  return get != nullptr && get() == kStorageBaseline;
}

uint64_t trim_retained() {
  auto trim = kr_function<uint64_t (*)(void)>("kr_trim_retained");
  return trim != nullptr ? trim() : 0;
}

std::string snapshot_tiers(const kr_snapshot_t* snapshot) {
  auto tier_bytes =
      kr_function<uint64_t (*)(const kr_snapshot_t*, int)>("kr_snapshot_tier_bytes");
  if (tier_bytes == nullptr) return "";
  static const char* const names[] = {"device", "pinned", "pageable"};
  std::string text;
  for (int tier = 0; tier < 3; ++tier) {
    if (tier > 0) text += ", ";
    text += std::string(names[tier]) + " " + bytes_text(tier_bytes(snapshot, tier));
  }
  return text;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string bytes_text(uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (value == static_cast<double>(static_cast<uint64_t>(value))) {
    std::snprintf(text, sizeof(text), "%" PRIu64 " %s", static_cast<uint64_t>(value), units[unit]);
  } else {
    std::snprintf(text, sizeof(text), "%.2f %s", value, units[unit]);
  }
  return text;
}

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[64];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}

std::string cuda_driver_api_version() {
  int version = 0;
  if (hsa_rt_cuda_driver() == nullptr || !KR_CU(cu().cuDriverGetVersion(&version))) {
    return "unknown";
  }
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

std::string kernel_module_version() {
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  if (!std::getline(file, line)) return "unknown";
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul ..." or
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release
  // Build ...": the first word made of digits and dots.
  std::istringstream words(line);
  std::string word;
  while (words >> word) {
    const bool version = !word.empty() && word.find('.') != std::string::npos &&
                         word.find_first_not_of("0123456789.") == std::string::npos;
    if (version) return word;
  }
  return line;
}

std::string cpu_model() {
  std::ifstream file("/proc/cpuinfo");
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace harness
