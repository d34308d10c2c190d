// hsa_cuda_runtime.cpp: initialisation and shutdown, the topology (a CPU
// agent and one GPU agent per CUDA device), agent and system queries, CUDA
// error reporting, context scoping, handles and counters.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <hsa/hsa_ven_amd_loader.h>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

// Written only by hsa_cuda_init / hsa_cuda_shutdown (which must not race
// with anything else); read by every entry point after `g_ready`.
std::mutex g_init_mutex;
std::atomic<bool> g_ready{false};
std::atomic<uint32_t> g_epoch{0};
const cuda_driver_t* g_cu = nullptr;
std::vector<GpuDevice>* g_gpus = new std::vector<GpuDevice>;  // never destroyed
uint64_t g_host_memory = 0;
char g_message[1024] = "";

Counters g_counters;

void set_message(const std::string& text) {
  std::snprintf(g_message, sizeof(g_message), "%s", text.c_str());
}

void write_string(void* out, size_t capacity, const std::string& text) {
  auto* chars = static_cast<char*>(out);
  std::memset(chars, 0, capacity);
  std::memcpy(chars, text.data(), std::min(text.size(), capacity - 1));
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

}  // namespace

// ---- driver access and errors ---------------------------------------------------

const cuda_driver_t& cu() { return *g_cu; }

std::string cuda_error_text(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  const cuda_driver_t* driver = loaded_driver();
  if (driver != nullptr) {
    if (driver->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (driver->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  return std::to_string(result) + " " + (name != nullptr ? name : "(unknown CUresult)") + ": " +
         (text != nullptr ? text : "no description");
}

bool cuda_check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return true;
  g_counters.cuda_errors.fetch_add(1, std::memory_order_relaxed);
  std::fprintf(stderr, "hsa_cuda: CUDA call failed: %s -> %s\n", call,
               cuda_error_text(result).c_str());
  return false;
}

ScopedContext::ScopedContext(CUcontext target) {
  CUcontext current = nullptr;
  if (!HSA_CUDA_CHECK(cu().cuCtxGetCurrent(&current))) return;
  previous_ = current;
  if (current == target) {
    ok_ = true;
    return;
  }
  ok_ = HSA_CUDA_CHECK(cu().cuCtxSetCurrent(target));
  switched_ = ok_;
}

ScopedContext::~ScopedContext() {
  // NULL is a valid previous context: it unbinds, as the caller had it.
  if (switched_) HSA_CUDA_CHECK(cu().cuCtxSetCurrent(previous_));
}

// ---- handles ----------------------------------------------------------------------

uint64_t make_handle(HandleTag tag, uint64_t payload) {
  const uint64_t epoch = g_epoch.load(std::memory_order_relaxed) & 0xFFFF;
  return (uint64_t{static_cast<uint8_t>(tag)} << 56) | (epoch << kPayloadBits) |
         (payload & kPayloadMask);
}

bool decode_handle(uint64_t handle, HandleTag tag, uint64_t* payload) {
  const uint64_t epoch = g_epoch.load(std::memory_order_relaxed) & 0xFFFF;
  if ((handle >> 56) != static_cast<uint8_t>(tag)) return false;
  if (((handle >> kPayloadBits) & 0xFFFF) != epoch) return false;
  *payload = handle & kPayloadMask;
  return true;
}

// ---- topology ---------------------------------------------------------------------

bool ready() { return g_ready.load(std::memory_order_acquire); }

uint32_t gpu_count() { return static_cast<uint32_t>(g_gpus->size()); }

uint32_t agent_count() { return gpu_count() + 1; }

const GpuDevice& gpu_at(uint32_t agent_index) { return (*g_gpus)[agent_index - 1]; }

bool agent_index_from_handle(hsa_agent_t agent, uint32_t* index) {
  uint64_t payload = 0;
  if (!ready() || !decode_handle(agent.handle, HandleTag::kAgent, &payload)) return false;
  if (payload >= agent_count()) return false;
  *index = static_cast<uint32_t>(payload);
  return true;
}

hsa_agent_t agent_handle(uint32_t index) {
  return hsa_agent_t{make_handle(HandleTag::kAgent, index)};
}

uint64_t host_memory_bytes() { return g_host_memory; }

Counters& counters() { return g_counters; }

// ---- entry points ----------------------------------------------------------------

namespace api {

namespace {

// Answers one agent attribute; false for attributes this runtime does not know.
bool write_agent_info(uint32_t index, uint32_t attribute, void* value, hsa_status_t* status) {
  const bool gpu = is_gpu_index(index);
  *status = HSA_STATUS_SUCCESS;
  switch (attribute) {
    case HSA_AGENT_INFO_NAME:
      // ROCr names a GPU agent after its ISA ("gfx90a"); here the SM target.
      write_string(value, 64, gpu ? gpu_at(index).isa : std::string("HSA-on-CUDA CPU"));
      return true;
    case HSA_AGENT_INFO_VENDOR_NAME:
      write_string(value, 64, gpu ? "NVIDIA" : "CPU");
      return true;
    case HSA_AGENT_INFO_FEATURE:
      write_value(value, gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : hsa_agent_feature_t{});
      return true;
    case HSA_AGENT_INFO_MACHINE_MODEL:
      write_value(value, HSA_MACHINE_MODEL_LARGE);
      return true;
    case HSA_AGENT_INFO_PROFILE:
      write_value(value, gpu ? HSA_PROFILE_BASE : HSA_PROFILE_FULL);
      return true;
    case HSA_AGENT_INFO_WAVEFRONT_SIZE:
      write_value(value, gpu ? uint32_t(gpu_at(index).warp_size) : uint32_t{0});
      return true;
    case HSA_AGENT_INFO_QUEUES_MAX:
      // This runtime has no AQL queues: kernels are launched through CUDA.
      write_value(value, uint32_t{0});
      return true;
    case HSA_AGENT_INFO_NODE:
      write_value(value, index);
      return true;
    case HSA_AGENT_INFO_DEVICE:
      write_value(value, gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU);
      return true;
    case HSA_AGENT_INFO_VERSION_MAJOR:
    case HSA_AGENT_INFO_VERSION_MINOR:
      write_value(value, uint16_t{1});
      return true;
    case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID:
      write_value(value, index);
      return true;
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT: {
      const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
      write_value(value, gpu ? uint32_t(gpu_at(index).sm_count) : uint32_t(cpus > 0 ? cpus : 1));
      return true;
    }
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
      write_string(value, 64, gpu ? gpu_at(index).name : std::string("HSA-on-CUDA CPU"));
      return true;
    case HSA_CUDA_AGENT_INFO_MEMORY_AVAIL: {
      // ROCr answers it for GPU agents only (the CPU agent has no such
      // attribute).
      if (!gpu) return false;
      ScopedContext scope(gpu_at(index).context);
      size_t free_bytes = 0;
      size_t total_bytes = 0;
      if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuMemGetInfo(&free_bytes, &total_bytes))) {
        *status = HSA_STATUS_ERROR;
        return true;
      }
      write_value(value, uint64_t(free_bytes));
      return true;
    }
    default:
      return false;
  }
}

const char* status_text(hsa_status_t status) {
  switch (static_cast<uint32_t>(status)) {
    case HSA_STATUS_SUCCESS:
      return "HSA_STATUS_SUCCESS: The function has been executed successfully.";
    case HSA_STATUS_INFO_BREAK:
      return "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted.";
    case HSA_STATUS_ERROR:
      return "HSA_STATUS_ERROR: A generic error has occurred.";
    case HSA_STATUS_ERROR_INVALID_ARGUMENT:
      return "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a "
             "precondition stated in the documentation of the corresponding formal argument.";
    case HSA_STATUS_ERROR_INVALID_ALLOCATION:
      return "HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid.";
    case HSA_STATUS_ERROR_INVALID_AGENT:
      return "HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid.";
    case HSA_STATUS_ERROR_INVALID_REGION:
      return "HSA_STATUS_ERROR_INVALID_REGION: The memory region is invalid.";
    case HSA_STATUS_ERROR_INVALID_SIGNAL:
      return "HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid.";
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
      return "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary "
             "resources.";
    case HSA_STATUS_ERROR_NOT_INITIALIZED:
      return "HSA_STATUS_ERROR_NOT_INITIALIZED: The HSA runtime is not initialized.";
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE:
      return "HSA_STATUS_ERROR_INVALID_EXECUTABLE: The executable is invalid.";
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL:
      return "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: The executable symbol is invalid.";
    case HSA_STATUS_ERROR_INVALID_CODE_OBJECT:
      return "HSA_STATUS_ERROR_INVALID_CODE_OBJECT: The code object is invalid.";
    case HSA_STATUS_ERROR_INVALID_SYMBOL_NAME:
      return "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: There is no symbol with the given name.";
    case HSA_STATUS_ERROR_INVALID_MEMORY_POOL:
      return "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid.";
    default:
      return nullptr;
  }
}

}  // namespace

hsa_status_t init() {
  if (ready()) return HSA_STATUS_SUCCESS;
  switch (hsa_cuda_init()) {
    case HSA_CUDA_INIT_OK:
      return HSA_STATUS_SUCCESS;
    case HSA_CUDA_INIT_NO_DRIVER:
    case HSA_CUDA_INIT_NO_DEVICE:
      // ROCr's answer when it finds no usable device.
      return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    default:
      return HSA_STATUS_ERROR;
  }
}

// hsa_shut_down through the table is a no-op: a tool has installed wrappers
// over this runtime and the harness decides when it goes away
// (hsa_cuda_shutdown).
hsa_status_t shut_down() { return ready() ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR_NOT_INITIALIZED; }

hsa_status_t system_get_info(hsa_system_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attribute) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR:
    case HSA_SYSTEM_INFO_VERSION_MINOR:
      write_value(value, uint16_t{1});
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_TIMESTAMP: {
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      write_value(value, static_cast<uint64_t>(
                             std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
      write_value(value, kTimestampFrequencyHz);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
      write_value(value, UINT64_MAX);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_ENDIANNESS:
      write_value(value, HSA_ENDIANNESS_LITTLE);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_MACHINE_MODEL:
      write_value(value, HSA_MACHINE_MODEL_LARGE);
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

// Only the AMD loader extension, version 1, and in it only the executable
// iterator: that is how a tool finds hsa_ven_amd_loader_iterate_executables
// (README, "How an HSA tool uses it"). Every other loader entry is NULL.
hsa_status_t system_get_major_extension_table(uint16_t extension, uint16_t version_major,
                                              size_t table_length, void* table) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (table == nullptr || table_length == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (extension != HSA_EXTENSION_AMD_LOADER || version_major != 1) return HSA_STATUS_ERROR;
  hsa_ven_amd_loader_1_03_pfn_t loader;
  std::memset(&loader, 0, sizeof(loader));
  loader.hsa_ven_amd_loader_iterate_executables = hsa_cuda_iterate_executables;
  // The caller's table may be an older, shorter version: fill what it holds.
  std::memset(table, 0, table_length);
  std::memcpy(table, &loader, std::min(table_length, sizeof(loader)));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t iterate_agents(hsa_status_t (*callback)(hsa_agent_t, void*), void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // The CPU first, then the GPUs, as ROCr orders them.
  for (uint32_t i = 0; i < agent_count(); ++i) {
    const hsa_status_t status = callback(agent_handle(i), data);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}

hsa_status_t agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  hsa_status_t status = HSA_STATUS_SUCCESS;
  if (!write_agent_info(index, static_cast<uint32_t>(attribute), value, &status)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  return status;
}

hsa_status_t status_string(hsa_status_t status, const char** status_string) {
  if (status_string == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const char* text = status_text(status);
  if (text == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *status_string = text;
  return HSA_STATUS_SUCCESS;
}

}  // namespace api

}  // namespace hsa_cuda

using namespace hsa_cuda;

// ---- control interface: initialisation --------------------------------------------

extern "C" hsa_cuda_init_status_t hsa_cuda_init(void) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (ready()) return HSA_CUDA_INIT_OK;
  set_message("");
  const char* library = std::getenv("HSA_CUDA_LIBCUDA");
  if (library == nullptr || library[0] == '\0') library = "libcuda.so.1";
  std::string error;
  if (!load_driver(library, &error)) {
    set_message("no CUDA driver: " + error);
    return HSA_CUDA_INIT_NO_DRIVER;
  }
  g_cu = loaded_driver();
  const cuda_driver_t& d = *g_cu;

  CUresult result = d.cuInit(0);
  if (result == CUDA_ERROR_NO_DEVICE) {
    set_message("no CUDA device: cuInit(0) -> " + cuda_error_text(result));
    return HSA_CUDA_INIT_NO_DEVICE;
  }
  if (result != CUDA_SUCCESS) {
    set_message("cuInit(0) failed: " + cuda_error_text(result));
    return HSA_CUDA_INIT_DRIVER_ERROR;
  }
  int count = 0;
  result = d.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    set_message("cuDeviceGetCount failed: " + cuda_error_text(result));
    return HSA_CUDA_INIT_DRIVER_ERROR;
  }
  if (count <= 0) {
    set_message("no CUDA device: cuDeviceGetCount reports 0 devices");
    return HSA_CUDA_INIT_NO_DEVICE;
  }

  std::vector<GpuDevice> gpus;
  // On a failure part-way, give back the contexts retained so far: a failed
  // init holds nothing.
  auto fail = [&](hsa_cuda_init_status_t status, const std::string& message) {
    for (const GpuDevice& gpu : gpus) d.cuDevicePrimaryCtxRelease(gpu.device);
    set_message(message);
    return status;
  };
#define HSA_CUDA_INIT_STEP(call)                                                              \
  do {                                                                                        \
    const CUresult step_result = (call);                                                      \
    if (step_result != CUDA_SUCCESS) {                                                        \
      return fail(HSA_CUDA_INIT_DRIVER_ERROR,                                                 \
                  std::string(#call) + " failed: " + cuda_error_text(step_result));           \
    }                                                                                         \
  } while (0)
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    GpuDevice gpu;
    gpu.ordinal = ordinal;
    HSA_CUDA_INIT_STEP(d.cuDeviceGet(&gpu.device, ordinal));
    char name[256] = {};
    HSA_CUDA_INIT_STEP(d.cuDeviceGetName(name, int(sizeof(name) - 1), gpu.device));
    gpu.name = name;
    int unified = 0;
    HSA_CUDA_INIT_STEP(
        d.cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, gpu.device));
    if (unified == 0) {
      return fail(HSA_CUDA_INIT_UNSUPPORTED,
                  "device " + std::to_string(ordinal) + " (" + gpu.name +
                      ") has no unified addressing, which hsa_memory_copy relies on");
    }
    HSA_CUDA_INIT_STEP(d.cuDeviceGetAttribute(
        &gpu.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gpu.device));
    HSA_CUDA_INIT_STEP(d.cuDeviceGetAttribute(
        &gpu.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, gpu.device));
    HSA_CUDA_INIT_STEP(d.cuDeviceGetAttribute(
        &gpu.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, gpu.device));
    HSA_CUDA_INIT_STEP(
        d.cuDeviceGetAttribute(&gpu.warp_size, CU_DEVICE_ATTRIBUTE_WARP_SIZE, gpu.device));
    HSA_CUDA_INIT_STEP(d.cuDeviceTotalMem(&gpu.total_memory, gpu.device));
    gpu.isa = "sm_" + std::to_string(gpu.cc_major) + std::to_string(gpu.cc_minor);
    // One context per device, the primary one: the same context a CUDA
    // runtime program (and the harness's own launches) use on that device.
    HSA_CUDA_INIT_STEP(d.cuDevicePrimaryCtxRetain(&gpu.context, gpu.device));
    gpus.push_back(gpu);
  }
#undef HSA_CUDA_INIT_STEP

  *g_gpus = std::move(gpus);
  g_host_memory = physical_memory_bytes();
  g_epoch.fetch_add(1, std::memory_order_relaxed);
  hsa_cuda_reset_counters();
  signals_start(gpu_count());
  g_ready.store(true, std::memory_order_release);
  return HSA_CUDA_INIT_OK;
}

extern "C" const char* hsa_cuda_init_message(void) { return g_message; }

extern "C" bool hsa_cuda_initialized(void) { return ready(); }

extern "C" void hsa_cuda_shutdown(void) {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (!ready()) return;
  // Copies and waits first (they touch memory and signals), then the modules
  // and the memory, then the contexts that held them.
  signals_shutdown();
  unload_all_executables();
  release_all_memory();
  g_ready.store(false, std::memory_order_release);
  for (const GpuDevice& gpu : *g_gpus) {
    HSA_CUDA_CHECK(g_cu->cuDevicePrimaryCtxRelease(gpu.device));
  }
  g_gpus->clear();
}

extern "C" const cuda_driver_t* hsa_cuda_driver(void) { return loaded_driver(); }

// ---- control interface: topology ------------------------------------------------------

extern "C" uint32_t hsa_cuda_gpu_count(void) { return ready() ? gpu_count() : 0; }

extern "C" hsa_agent_t hsa_cuda_cpu_agent(void) {
  return ready() ? agent_handle(kCpuAgentIndex) : hsa_agent_t{0};
}

extern "C" hsa_agent_t hsa_cuda_gpu_agent(uint32_t index) {
  return ready() && index < gpu_count() ? agent_handle(index + 1) : hsa_agent_t{0};
}

extern "C" int hsa_cuda_agent_device(hsa_agent_t agent) {
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index) || !is_gpu_index(index)) return -1;
  return gpu_at(index).ordinal;
}

extern "C" CUcontext hsa_cuda_agent_context(hsa_agent_t agent) {
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index) || !is_gpu_index(index)) return nullptr;
  return gpu_at(index).context;
}

// ---- control interface: counters ---------------------------------------------------------

extern "C" uint64_t hsa_cuda_copy_count(hsa_cuda_copy_direction_t direction) {
  const auto index = static_cast<uint32_t>(direction);
  return index < 4 ? g_counters.copies[index].load() : 0;
}

extern "C" uint64_t hsa_cuda_copy_bytes(hsa_cuda_copy_direction_t direction) {
  const auto index = static_cast<uint32_t>(direction);
  return index < 4 ? g_counters.bytes[index].load() : 0;
}

extern "C" uint64_t hsa_cuda_async_copy_count(void) { return g_counters.async_copies.load(); }

extern "C" uint64_t hsa_cuda_copy_violations(void) { return g_counters.violations.load(); }

extern "C" uint64_t hsa_cuda_cuda_error_count(void) { return g_counters.cuda_errors.load(); }

extern "C" void hsa_cuda_reset_counters(void) {
  for (int i = 0; i < 4; ++i) {
    g_counters.copies[i].store(0);
    g_counters.bytes[i].store(0);
  }
  g_counters.async_copies.store(0);
  g_counters.violations.store(0);
  g_counters.cuda_errors.store(0);
}

extern "C" uint64_t hsa_cuda_live_allocation_count(void) { return live_allocation_count(); }

extern "C" uint64_t hsa_cuda_live_signal_count(void) { return live_signal_count(); }
