// hsa_cuda_runtime.cpp: initialisation and shutdown, the topology (a CPU
// agent and one GPU agent per CUDA device), agent queries, CUDA error
// reporting, context scoping, handles and counters. System info, status
// strings and the agent attributes both runtimes answer alike are shared with
// the sim (testing/hsa-runtime/common).

#include <unistd.h>

#include <algorithm>
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

namespace {
using Handles = hsa_common::HandleLayout<16>;
}  // namespace

uint64_t handle_epoch() { return g_epoch.load(std::memory_order_relaxed); }

uint64_t make_handle(HandleTag tag, uint64_t payload) {
  return Handles::make(tag, handle_epoch(), payload);
}

bool decode_handle(uint64_t handle, HandleTag tag, uint64_t* payload) {
  return Handles::decode(handle, tag, handle_epoch(), payload);
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

// What this runtime says about agent `index` (the CPU, or a CUDA device).
hsa_common::AgentDescription describe_agent(uint32_t index) {
  hsa_common::AgentDescription agent;
  if (is_gpu_index(index)) {
    const GpuDevice& gpu = gpu_at(index);
    // ROCr names a GPU agent after its ISA ("gfx90a"); here the SM target.
    agent.name = gpu.isa;
    agent.vendor_name = "NVIDIA";
    agent.product_name = gpu.name;
    agent.wavefront_size = uint32_t(gpu.warp_size);
    agent.compute_unit_count = uint32_t(gpu.sm_count);
  } else {
    agent.name = "HSA-on-CUDA CPU";
    agent.vendor_name = "CPU";
    agent.product_name = "HSA-on-CUDA CPU";
    agent.wavefront_size = 0;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    agent.compute_unit_count = uint32_t(cpus > 0 ? cpus : 1);
  }
  // GPUs run AQL queues (hsa_cuda_queues.cpp); the CPU agent has none.
  agent.queues_max = is_gpu_index(index) ? 128 : 0;
  // No HSA_AMD_AGENT_INFO_UUID (agent.has_uuid stays false).
  return agent;
}

// HSA_AMD_AGENT_INFO_MEMORY_AVAIL for a GPU: cuMemGetInfo's free bytes.
hsa_status_t write_memory_avail(uint32_t index, void* value) {
  ScopedContext scope(gpu_at(index).context);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  if (!scope.ok() || !HSA_CUDA_CHECK(cu().cuMemGetInfo(&free_bytes, &total_bytes))) {
    return HSA_STATUS_ERROR;
  }
  write_value(value, uint64_t(free_bytes));
  return HSA_STATUS_SUCCESS;
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

// Only the AMD loader extension, version 1, and in it only the executable
// iterator: that is how a tool (and kernel-replay, when no iterator is set)
// finds hsa_ven_amd_loader_iterate_executables. Every other loader entry is
// NULL. ROCr's answers otherwise (hsa_common::loader_extension_table).
hsa_status_t system_get_major_extension_table(uint16_t extension, uint16_t version_major,
                                              size_t table_length, void* table) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  return hsa_common::loader_extension_table(extension, version_major, table_length, table,
                                            hsa_cuda_iterate_executables);
}

hsa_status_t iterate_agents(hsa_status_t (*callback)(hsa_agent_t, void*), void* data) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (callback == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  // The CPU first, then the GPUs, as ROCr orders them.
  std::vector<hsa_agent_t> agents;
  for (uint32_t i = 0; i < agent_count(); ++i) agents.push_back(agent_handle(i));
  return hsa_common::call_each(agents, [&](hsa_agent_t agent) { return callback(agent, data); });
}

hsa_status_t agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void* value) {
  if (!ready()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint32_t index = 0;
  if (!agent_index_from_handle(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (static_cast<uint32_t>(attribute) == hsa_common::kAgentInfoMemoryAvail) {
    // ROCr answers it for GPU agents only (the CPU agent has no such
    // attribute).
    if (!is_gpu_index(index)) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    return write_memory_avail(index, value);
  }
  if (write_queue_agent_info(index, static_cast<uint32_t>(attribute), value)) {
    return HSA_STATUS_SUCCESS;
  }
  return hsa_common::write_agent_info(index, describe_agent(index),
                                      static_cast<uint32_t>(attribute), value);
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
    // Optional answers: a driver that lacks them still runs everything but
    // engine selection (one engine assumed) and the vmem API (unsupported).
    int engines = 0;
    if (d.cuDeviceGetAttribute(&engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, gpu.device) ==
            CUDA_SUCCESS &&
        engines > 0) {
      gpu.copy_engines = static_cast<uint32_t>(engines);
    }
    if (cuda_driver_has_vmm(&d)) {
      CUmemAllocationProp prop;
      std::memset(&prop, 0, sizeof(prop));
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = ordinal;
      size_t granularity = 0;
      if (d.cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
          CUDA_SUCCESS) {
        gpu.vmm_granularity = granularity;
      }
    }
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
  // The queues' packet processors first (they launch kernels and complete
  // signals), then copies and waits (they touch memory and signals), then
  // the modules and the memory, then the contexts that held them.
  queues_shutdown();
  signals_shutdown();
  unload_all_executables();
  release_all_code_object_readers();
  vmem_release_all();
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
  g_counters.aql_dispatches.store(0);
}

extern "C" uint64_t hsa_cuda_live_allocation_count(void) { return live_allocation_count(); }

extern "C" uint64_t hsa_cuda_live_signal_count(void) { return live_signal_count(); }

extern "C" uint64_t hsa_cuda_live_queue_count(void) { return live_queue_count(); }

extern "C" uint64_t hsa_cuda_aql_dispatch_count(void) { return g_counters.aql_dispatches.load(); }
