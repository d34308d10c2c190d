// backend.cpp: the CUDA backend, the front end's HSA on the CUDA driver API
// (libcuda.so.1, or $HSA_RT_LIBCUDA, loaded at run time: include/cuda_driver.h).
//
//   agents     the CPU, then one GPU per CUDA device in ordinal order, each in
//              its device's primary context; every call makes the right
//              context current and puts the caller's back.
//   memory     device pools: cuMemAlloc (256-byte aligned); system pools:
//              pinned cuMemHostAlloc, PORTABLE (| DEVICEMAP for the fine and
//              kernarg pools, which kernels access in place). Freed device
//              blocks stay allocated in the front end's quarantine (up to 8
//              GiB / 4096 blocks): once the driver has an address back it may
//              map it as host memory (seen on an H200), and a copy there could
//              no longer be told from a late copy into freed memory. Host
//              blocks go back at once. Out of memory, the front end gives the
//              GPU's quarantine back and tries again. Locked host memory:
//              cuMemHostRegister, PORTABLE | DEVICEMAP, once per range.
//   copies     cuMemcpy (unified addressing) in the issuing GPU's context,
//              then a wait for the legacy stream when the destination is
//              device memory (hsa_memory_copy is blocking in ROCr).
//   engines    one per GPU: a non-blocking stream. The front end's engine
//              thread enqueues cuMemcpyAsync (a row each for a rect copy) and
//              flushes a burst with one event; a completer thread per engine
//              waits for the events in order and completes the copies'
//              signals (-1 when the driver reports an error).
//   vmem       cuMemAddressReserve / cuMemCreate / cuMemMap / cuMemSetAccess.
//              A handle holds its one CUDA reference until the front end drops
//              it (its last reference and mapping gone). CUDA cannot map
//              cuMemCreate memory for the host nor write-only: set_access
//              refuses both (HSA_STATUS_ERROR, nothing changed); nor part of
//              a handle: map refuses a size other than the handle's (the same). A GPU losing
//              access is revoked by mapping the handle afresh (the bytes are
//              the handle's), then granting what remains.
//   modules    cuModuleLoadData in the agent's context; symbols by name
//              (cuModuleGetFunction, cuModuleGetGlobal); a kernel's object is
//              its CUfunction, its kernarg size the end of its last parameter
//              (cuFuncGetParamInfo, CUDA 12.4+), else its argument struct's
//              size for the library's kernels. A destroyed executable's
//              module stays loaded until reset, so that its variables'
//              addresses are never handed out again.
//   dispatch   cuLaunchKernel on the queue's stream (dynamic shared memory =
//              group segment less the static), then an event waited for.
//
// Every failed driver call is printed on stderr and counted
// (HSA_RT_COUNT_BACKEND_ERRORS), except an allocation's out of memory,
// which is an answer (OUT_OF_RESOURCES).

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>

#include "cuda_driver.h"
#include "replay_kernels.h"
#include "runtime.h"

namespace hsa_rt::backend {

namespace {

// ---- the driver --------------------------------------------------------------------------------

const cuda_driver_t* g_cu = nullptr;

const cuda_driver_t* load_driver(const char* library, std::string* error) {
  static std::mutex mutex;
  static cuda_driver_t driver;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return &driver;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace. Never
  // closed: the driver's own teardown at exit must find it mapped.
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = std::string("cannot load ") + library + ": " + (why != nullptr ? why : "unknown");
    return nullptr;
  }
  struct Entry {
    size_t offset;
    const char* symbol;
    const char* fallback;
    bool required;
  };
#define CUDA_DRIVER_ENTRY(name, symbol, fallback, required, parameters) \
  Entry{offsetof(cuda_driver_t, name), symbol, fallback, required != 0},
  static const Entry kEntries[] = {CUDA_DRIVER_ENTRIES(CUDA_DRIVER_ENTRY)};
#undef CUDA_DRIVER_ENTRY
  cuda_driver_t resolved;
  std::memset(&resolved, 0, sizeof(resolved));
  for (const Entry& entry : kEntries) {
    void* symbol = dlsym(handle, entry.symbol);
    if (symbol == nullptr && entry.fallback != nullptr) symbol = dlsym(handle, entry.fallback);
    if (symbol == nullptr && entry.required) {
      *error = std::string(library) + " has no " + entry.symbol + " (a driver too old?)";
      dlclose(handle);
      return nullptr;
    }
    // Data and function pointers have one representation wherever dlsym
    // exists; memcpy states the conversion ISO C++ only conditionally has.
    static_assert(sizeof(symbol) == sizeof(cuInit_t), "function pointers are pointer-sized");
    std::memcpy(reinterpret_cast<unsigned char*>(&resolved) + entry.offset, &symbol,
                sizeof(symbol));
  }
  driver = resolved;
  loaded = true;
  return &driver;
}

const cuda_driver_t& cu() { return *g_cu; }

std::string error_text(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cu().cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (cu().cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  return std::to_string(result) + " " + (name != nullptr ? name : "(unknown)") + ": " +
         (text != nullptr ? text : "no description");
}

// True on success; else prints the call and the error, counts it, false.
bool check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return true;
  counters().backend_errors.fetch_add(1);
  std::fprintf(stderr, "hsa_rt: CUDA call failed: %s -> %s\n", call, error_text(result).c_str());
  return false;
}
#define CU_CHECK(call) check((call), #call)

// ---- devices and contexts ----------------------------------------------------------------------

struct Gpu {
  CUdevice device = 0;
  int ordinal = 0;
  CUcontext context = nullptr;
  size_t granularity = 0;  // cuMemGetAllocationGranularity(MINIMUM); 0: no VMM
};
// Written by start / stop only (which nothing races with); index: agent - 1.
std::vector<Gpu>* const g_gpus = new std::vector<Gpu>;
// The primary contexts retained, by ordinal: kept over resets, released at
// shutdown (a reset must not destroy what the program allocated in them).
std::vector<CUcontext>* const g_retained = new std::vector<CUcontext>;
uint64_t g_host_memory = 0;

const Gpu& gpu(uint32_t agent) { return (*g_gpus)[agent - 1]; }

// Makes `target` current for the scope and puts back what was current.
class Scoped {
 public:
  explicit Scoped(CUcontext target) {
    CUcontext current = nullptr;
    if (!CU_CHECK(cu().cuCtxGetCurrent(&current))) return;
    previous_ = current;
    ok_ = current == target || CU_CHECK(cu().cuCtxSetCurrent(target));
    switched_ = ok_ && current != target;
  }
  explicit Scoped(uint32_t agent) : Scoped(gpu(is_gpu(agent) ? agent : 1).context) {}
  ~Scoped() {
    if (switched_) CU_CHECK(cu().cuCtxSetCurrent(previous_));
  }
  Scoped(const Scoped&) = delete;
  Scoped& operator=(const Scoped&) = delete;
  bool ok() const { return ok_; }

 private:
  CUcontext previous_ = nullptr;
  bool ok_ = false, switched_ = false;
};

// ---- the copy engines --------------------------------------------------------------------------

struct Burst {
  CUevent event = nullptr;
  std::vector<hsa_signal_t> completions;
};

struct Engine {
  uint32_t agent = 1;
  CUstream stream = nullptr;
  std::vector<hsa_signal_t> enqueued;  // since the last flush (the engine thread's)
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Burst> in_flight;
  std::vector<CUevent> idle_events;
  bool busy = false, stopping = false;
  std::thread completer;
};
std::vector<std::unique_ptr<Engine>>* const g_engines = new std::vector<std::unique_ptr<Engine>>;

void run_completer(Engine* e) {
  CU_CHECK(cu().cuCtxSetCurrent(gpu(e->agent).context));
  for (;;) {
    Burst burst;
    {
      std::unique_lock<std::mutex> lock(e->mutex);
      e->cv.wait(lock, [&] { return !e->in_flight.empty() || e->stopping; });
      if (e->in_flight.empty()) return;
      burst = std::move(e->in_flight.front());
      e->in_flight.pop_front();
      e->busy = true;
    }
    const bool ok = CU_CHECK(cu().cuEventSynchronize(burst.event));
    for (hsa_signal_t completion : burst.completions) complete_copy(completion, ok);
    std::lock_guard<std::mutex> lock(e->mutex);
    if (ok && e->idle_events.size() < 256) {
      e->idle_events.push_back(burst.event);
    } else {
      CU_CHECK(cu().cuEventDestroy(burst.event));
    }
    e->busy = false;
    e->cv.notify_all();
  }
}

void stop_engines() {
  for (auto& e : *g_engines) {
    {
      std::lock_guard<std::mutex> lock(e->mutex);
      e->stopping = true;
    }
    e->cv.notify_all();
    if (e->completer.joinable()) e->completer.join();
    if (e->stream == nullptr) continue;
    Scoped scope(e->agent);
    for (CUevent event : e->idle_events) CU_CHECK(cu().cuEventDestroy(event));
    CU_CHECK(cu().cuStreamDestroy(e->stream));
  }
  g_engines->clear();
}

// ---- modules -----------------------------------------------------------------------------------

// Destroyed executables' modules, unloaded at reset.
std::mutex g_zombies_mutex;
std::vector<std::pair<uint32_t, CUmodule>>* const g_zombies =
    new std::vector<std::pair<uint32_t, CUmodule>>;

// A kernel's attributes (see the top), in the module's context.
void describe_kernel(CUfunction function, const std::string& name, Symbol* symbol) {
  int value = 0;
  if (CU_CHECK(cu().cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function))) {
    symbol->group_size = uint32_t(value);
  }
  if (CU_CHECK(cu().cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function))) {
    symbol->private_size = uint32_t(value);
  }
  uint32_t by_name = 0;  // the library's kernels take one argument struct
  if (name == "kr_scatter_copy") by_name = sizeof(kr_scatter_copy_args);
  if (name == "kr_hash_blocks") by_name = sizeof(kr_hash_blocks_args);
  if (name == "kr_compare_copy") by_name = sizeof(kr_compare_copy_args);
  if (cu().cuFuncGetParamInfo != nullptr) {
    size_t end = 0, index = 0;
    CUresult result = CUDA_SUCCESS;
    for (;; ++index) {
      size_t offset = 0, size = 0;
      result = cu().cuFuncGetParamInfo(function, index, &offset, &size);
      if (result != CUDA_SUCCESS) break;
      end = std::max(end, offset + size);
    }
    // The first index refused is past the last parameter. A refusal of
    // index 0 is a kernel without parameters only when it is INVALID_VALUE
    // and the name is none of the library's kernels; else the name decides.
    if (index > 0 || (result == CUDA_ERROR_INVALID_VALUE && by_name == 0)) {
      symbol->param_count = int(index);
      symbol->kernarg_size = uint32_t(end);
      if (by_name != 0 && by_name != end) {
        std::fprintf(stderr, "hsa_rt: %s takes %zu bytes of parameters, replay_kernels.h says %u\n",
                     name.c_str(), end, by_name);
      }
      return;
    }
  }
  if (by_name != 0) {
    symbol->param_count = 1;
    symbol->kernarg_size = by_name;
  }
}

// ---- vmem --------------------------------------------------------------------------------------

CUmemGenericAllocationHandle cuda_handle(const VmemHandle& handle) {
  return static_cast<CUmemGenericAllocationHandle>(reinterpret_cast<uintptr_t>(handle.backend));
}

// cuMemSetAccess for the GPUs of `access` not at NONE (of `only` if given).
bool grant(uintptr_t va, size_t size, const VmemAccess& access, const VmemAccess* only) {
  std::vector<CUmemAccessDesc> descs;
  for (const auto& [agent, permission] : access) {
    if (!is_gpu(agent) || permission == kPermissionNone) continue;
    if (only != nullptr && only->count(agent) == 0) continue;
    CUmemAccessDesc desc;
    std::memset(&desc, 0, sizeof(desc));
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = gpu(agent).ordinal;
    desc.flags = permission == kPermissionReadWrite ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                                    : CU_MEM_ACCESS_FLAGS_PROT_READ;
    descs.push_back(desc);
  }
  return descs.empty() || CU_CHECK(cu().cuMemSetAccess(va, size, descs.data(), descs.size()));
}

}  // namespace

// ---- the backend interface ---------------------------------------------------------------------

hsa_rt_backend_t kind() { return HSA_RT_BACKEND_CUDA; }

hsa_rt_init_status_t start(uint32_t wanted, std::vector<AgentDescription>* agents,
                           std::string* message) {
  const char* library = std::getenv("HSA_RT_LIBCUDA");
  if (library == nullptr || library[0] == '\0') library = "libcuda.so.1";
  std::string error;
  g_cu = load_driver(library, &error);
  if (g_cu == nullptr) {
    *message = "no CUDA driver: " + error;
    return HSA_RT_INIT_NO_DRIVER;
  }
  CUresult result = cu().cuInit(0);
  int count = 0;
  if (result == CUDA_SUCCESS) result = cu().cuDeviceGetCount(&count);
  if (result == CUDA_ERROR_NO_DEVICE || (result == CUDA_SUCCESS && count <= 0)) {
    *message = "no CUDA device: " +
               (result == CUDA_SUCCESS ? "cuDeviceGetCount reports 0" : error_text(result));
    return HSA_RT_INIT_NO_DEVICE;
  }
  if (result != CUDA_SUCCESS) {
    *message = "cuInit / cuDeviceGetCount failed: " + error_text(result);
    return HSA_RT_INIT_DRIVER_ERROR;
  }
  g_retained->resize(size_t(count), nullptr);
  const uint32_t gpus = std::max(1u, std::min(uint32_t(count), wanted));
  AgentDescription cpu;
  cpu.name = cpu.product = "HSA-on-CUDA CPU";
  cpu.vendor = "CPU";
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  cpu.compute_units = uint32_t(cpus > 0 ? cpus : 1);
  agents->push_back(cpu);
  std::vector<Gpu> found;
  std::vector<std::pair<int, CUdevice>> fresh;  // contexts retained by this start
  for (int ordinal = 0; ordinal < int(gpus); ++ordinal) {
    Gpu g;
    g.ordinal = ordinal;
    AgentDescription d;
    char name[256] = {};
    int unified = 0, major = 0, minor = 0, sms = 0, warp = 0, engines = 0;
    size_t total = 0;
    result = cu().cuDeviceGet(&g.device, ordinal);
    const std::pair<int, int*> attributes[] = {
        {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, &unified},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &sms},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &warp}};
    for (const auto& [attribute, out] : attributes) {
      if (result == CUDA_SUCCESS) result = cu().cuDeviceGetAttribute(out, attribute, g.device);
    }
    if (result == CUDA_SUCCESS) result = cu().cuDeviceGetName(name, sizeof(name) - 1, g.device);
    if (result == CUDA_SUCCESS) result = cu().cuDeviceTotalMem(&total, g.device);
    CUcontext& retained = (*g_retained)[size_t(ordinal)];
    if (result == CUDA_SUCCESS && unified != 0 && retained == nullptr) {
      // The primary context: the one a CUDA runtime program (and the
      // harness's own launches) use on that device.
      result = cu().cuDevicePrimaryCtxRetain(&retained, g.device);
      if (result == CUDA_SUCCESS) fresh.emplace_back(ordinal, g.device);
      if (result != CUDA_SUCCESS) retained = nullptr;
    }
    if (result != CUDA_SUCCESS || unified == 0) {
      // A failed start holds nothing it took.
      for (const auto& [taken, device] : fresh) {
        cu().cuDevicePrimaryCtxRelease(device);
        (*g_retained)[size_t(taken)] = nullptr;
      }
      *message = "device " + std::to_string(ordinal) +
                 (unified == 0 && result == CUDA_SUCCESS
                      ? " has no unified addressing, which the runtime relies on"
                      : ": " + error_text(result));
      return unified == 0 && result == CUDA_SUCCESS ? HSA_RT_INIT_UNSUPPORTED
                                                    : HSA_RT_INIT_DRIVER_ERROR;
    }
    g.context = retained;
    // Optional answers: without them, one copy engine and no vmem.
    if (cu().cuDeviceGetAttribute(&engines, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, g.device) !=
            CUDA_SUCCESS ||
        engines < 1) {
      engines = 1;
    }
    if (cuda_driver_has_vmm(g_cu)) {
      CUmemAllocationProp prop;
      std::memset(&prop, 0, sizeof(prop));
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location = CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, ordinal};
      if (cu().cuMemGetAllocationGranularity(&g.granularity, &prop,
                                             CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS) {
        g.granularity = 0;
      }
    }
    d.vendor = "NVIDIA";
    d.product = name;
    d.wavefront_size = uint32_t(warp);
    d.compute_units = uint32_t(sms);
    d.isa = "nvptx-nvidia-cuda--sm_" + std::to_string(major) + std::to_string(minor);
    d.memory = total;
    d.engines = uint32_t(engines);
    agents->push_back(d);
    found.push_back(g);
  }
  *g_gpus = std::move(found);
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  g_host_memory = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
  for (uint32_t agent = 1; agent <= g_gpus->size(); ++agent) {
    g_engines->push_back(std::make_unique<Engine>());
    g_engines->back()->agent = agent;
  }
  return HSA_RT_INIT_OK;
}

void stop(bool shutdown) {
  stop_engines();
  {
    std::lock_guard<std::mutex> lock(g_zombies_mutex);
    for (const auto& [agent, module] : *g_zombies) {
      Scoped scope(agent);
      CU_CHECK(cu().cuModuleUnload(module));
    }
    g_zombies->clear();
  }
  if (!shutdown) return;
  for (CUcontext& context : *g_retained) {
    if (context == nullptr) continue;
    const size_t ordinal = size_t(&context - g_retained->data());
    CUdevice device = 0;
    if (CU_CHECK(cu().cuDeviceGet(&device, int(ordinal)))) {
      CU_CHECK(cu().cuDevicePrimaryCtxRelease(device));
    }
    context = nullptr;
  }
}

bool reports_violations() { return true; }

// ---- memory ------------------------------------------------------------------------------------

bool has_pool(hsa_rt_pool_kind_t kind) { return kind != HSA_RT_POOL_DEVICE_FINE; }
size_t pool_alignment(hsa_rt_pool_kind_t kind) { return is_device_kind(kind) ? 256 : 4096; }
uint64_t system_pool_size() { return g_host_memory; }
uint64_t device_capacity(uint32_t) { return 0; }

hsa_status_t memory_avail(uint32_t agent, uint64_t* bytes) {
  Scoped scope(agent);
  size_t free_bytes = 0, total = 0;
  if (!scope.ok() || !CU_CHECK(cu().cuMemGetInfo(&free_bytes, &total))) return HSA_STATUS_ERROR;
  *bytes = free_bytes;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t allocate(PoolId pool, size_t bytes, void** base) {
  Scoped scope(pool.agent);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  CUresult result = CUDA_SUCCESS;
  if (is_device_kind(pool.kind)) {
    CUdeviceptr device = 0;
    result = cu().cuMemAlloc(&device, bytes);
    *base = reinterpret_cast<void*>(device);
  } else {
    // The coarse pool is the staging tier a tool copies through, not memory
    // kernels touch: it is not mapped for the devices.
    result = cu().cuMemHostAlloc(base, bytes,
                                 pool.kind == HSA_RT_POOL_SYSTEM_COARSE
                                     ? CU_MEMHOSTALLOC_PORTABLE
                                     : CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  }
  // Out of memory is an answer, not a fault.
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  return CU_CHECK(result) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

bool release(const Block& block) {
  Scoped scope(block.pool.agent);
  if (!scope.ok()) return false;
  return is_device_kind(block.pool.kind)
             ? CU_CHECK(cu().cuMemFree(reinterpret_cast<CUdeviceptr>(block.base)))
             : CU_CHECK(cu().cuMemFreeHost(block.base));
}

// A lock's range is pinned for every context and mapped for the devices at
// its own address (unified addressing), as ROCr's lock maps it for the
// GPUs. The driver registers a page once: a range meeting one it has
// registered already (an overlapping lock, cuMemHostAlloc memory) stays as
// it is, with nothing for unlock_host to undo; copies need no pinning.
hsa_status_t lock_host(void* base, size_t size, bool* registered) {
  Scoped scope(1u);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  const CUresult result = cu().cuMemHostRegister(
      base, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
  *registered = result == CUDA_SUCCESS;
  if (result == CUDA_SUCCESS || result == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
    return HSA_STATUS_SUCCESS;
  }
  // Out of memory is an answer, not a fault.
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  CU_CHECK(result);
  return HSA_STATUS_ERROR;
}

void unlock_host(void* base) {
  Scoped scope(1u);
  if (scope.ok()) CU_CHECK(cu().cuMemHostUnregister(base));
}

bool quarantines(hsa_rt_pool_kind_t kind) { return is_device_kind(kind); }
uint64_t quarantine_max_bytes() { return uint64_t{8} << 30; }
size_t quarantine_max_blocks() { return 4096; }
bool quarantine_holds_memory() { return true; }
void poison(void*, size_t) {}
bool poison_intact(const void*, size_t) { return true; }

bool zero(uint32_t agent, void* base, size_t bytes) {
  Scoped scope(agent);
  return scope.ok() && CU_CHECK(cu().cuMemsetD8(reinterpret_cast<CUdeviceptr>(base), 0, bytes)) &&
         CU_CHECK(cu().cuCtxSynchronize());
}

bool runtime_memory_is_device() { return false; }

// Pageable host memory (a tool's own buffers) or memory the program got from
// CUDA itself: the driver knows the latter; for the former it answers an
// error, which is expected here and not reported.
Side foreign_side(uintptr_t address, size_t) {
  Scoped scope(1u);
  unsigned int type = 0;
  return scope.ok() &&
                 cu().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) ==
                     CUDA_SUCCESS &&
                 type == CU_MEMORYTYPE_DEVICE
             ? Side::kDevice
             : Side::kHost;
}

bool copy(void* dst, const void* src, size_t size, const CopyPlan& plan) {
  Scoped scope(plan.issuing_agent);
  // cuMemcpy returns before a pageable host-to-device or a device-to-device
  // copy has landed: waiting for the legacy stream closes that gap.
  return scope.ok() &&
         CU_CHECK(cu().cuMemcpy(reinterpret_cast<CUdeviceptr>(dst),
                                reinterpret_cast<CUdeviceptr>(src), size)) &&
         (!plan.dst_device || CU_CHECK(cu().cuStreamSynchronize(nullptr)));
}

// ---- the copy engines --------------------------------------------------------------------------

uint32_t engine_count() { return uint32_t(g_engines->size()); }
uint32_t engine_of(uint32_t copy_agent) { return is_gpu(copy_agent) ? copy_agent - 1 : 0; }

Queued async_copy(uint32_t index, const AsyncJob& job, const CopyPlan&) {
  Engine& e = *(*g_engines)[index];
  Scoped scope(e.agent);
  if (!scope.ok()) return Queued::kFailed;
  // Non-blocking: the engine must not serialise with the legacy stream
  // hsa_memory_copy and the application use; signals order them, as in HSA.
  if (e.stream == nullptr && !CU_CHECK(cu().cuStreamCreate(&e.stream, CU_STREAM_NON_BLOCKING))) {
    return Queued::kFailed;
  }
  for (uint64_t row = 0; row < job.rows(); ++row) {
    if (!CU_CHECK(cu().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(job.dst_row(row)),
                                     reinterpret_cast<CUdeviceptr>(job.src_row(row)), job.size,
                                     e.stream))) {
      return Queued::kFailed;
    }
  }
  e.enqueued.push_back(job.completion);
  return Queued::kLater;
}

// One event behind the copies enqueued since the last flush: copies on one
// stream complete in order, so it completes all of them.
void flush(uint32_t index) {
  Engine& e = *(*g_engines)[index];
  if (e.enqueued.empty()) return;
  Burst burst;
  burst.completions.swap(e.enqueued);
  Scoped scope(e.agent);
  {
    std::lock_guard<std::mutex> lock(e.mutex);
    if (!e.idle_events.empty()) {
      burst.event = e.idle_events.back();
      e.idle_events.pop_back();
    }
  }
  if (burst.event == nullptr &&
      !CU_CHECK(cu().cuEventCreate(&burst.event, CU_EVENT_DISABLE_TIMING))) {
    burst.event = nullptr;
  }
  if (burst.event == nullptr || !CU_CHECK(cu().cuEventRecord(burst.event, e.stream))) {
    // Without an event, wait here: slower, still correct.
    if (burst.event != nullptr) CU_CHECK(cu().cuEventDestroy(burst.event));
    const bool ok = CU_CHECK(cu().cuStreamSynchronize(e.stream));
    for (hsa_signal_t completion : burst.completions) complete_copy(completion, ok);
    return;
  }
  std::lock_guard<std::mutex> lock(e.mutex);
  if (!e.completer.joinable()) e.completer = std::thread(run_completer, &e);
  e.in_flight.push_back(std::move(burst));
  e.cv.notify_all();
}

void drain() {
  for (auto& e : *g_engines) {
    std::unique_lock<std::mutex> lock(e->mutex);
    e->cv.wait(lock, [&] { return e->in_flight.empty() && !e->busy; });
  }
}

// ---- virtual memory ----------------------------------------------------------------------------

size_t vmem_granularity(uint32_t agent) {
  return is_gpu(agent) && agent <= g_gpus->size() ? gpu(agent).granularity : 0;
}

hsa_status_t vmem_reserve(size_t size, uint64_t alignment, uint64_t hint, uintptr_t* base,
                          size_t* bytes) {
  size_t granularity = 0;
  for (uint32_t agent = 1; agent <= g_gpus->size(); ++agent) {
    if (gpu(agent).granularity == 0) return HSA_STATUS_ERROR;  // no VMM
    granularity = std::max(granularity, gpu(agent).granularity);
  }
  // CUDA reserves whole granules; the caller's size stays the reservation's
  // size for every HSA rule. The hint is honoured when it is aligned.
  if (!round_up(size, granularity, bytes)) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const size_t aligned = std::max<size_t>(size_t(alignment), granularity);
  Scoped scope(1u);
  CUdeviceptr va = 0;
  const CUresult result =
      scope.ok() ? cu().cuMemAddressReserve(&va, *bytes, aligned, hint % aligned == 0 ? hint : 0, 0)
                 : CUDA_ERROR_INVALID_CONTEXT;
  if (result != CUDA_ERROR_OUT_OF_MEMORY && !CU_CHECK(result)) return HSA_STATUS_ERROR;
  if (result != CUDA_SUCCESS) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  *base = uintptr_t(va);
  return HSA_STATUS_SUCCESS;
}

void vmem_free(uintptr_t base, const VmemReservation& reservation) {
  Scoped scope(1u);
  CU_CHECK(cu().cuMemAddressFree(base, reservation.bytes));
}

hsa_status_t vmem_create(PoolId pool, size_t size, void** handle) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
  prop.location = CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, gpu(pool.agent).ordinal};
  Scoped scope(pool.agent);
  CUmemGenericAllocationHandle cuda = 0;
  const CUresult result =
      scope.ok() ? cu().cuMemCreate(&cuda, size, &prop, 0) : CUDA_ERROR_INVALID_CONTEXT;
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  if (!CU_CHECK(result)) return HSA_STATUS_ERROR;
  *handle = reinterpret_cast<void*>(uintptr_t(cuda));
  return HSA_STATUS_SUCCESS;
}

void vmem_destroy(const VmemHandle& handle) {
  Scoped scope(handle.pool.agent);
  CU_CHECK(cu().cuMemRelease(cuda_handle(handle)));
}

bool vmem_map(uintptr_t va, size_t size, const VmemHandle& handle) {
  // ROCr maps the first bytes of a handle; CUDA's driver maps only a whole
  // allocation (an H200's driver: CUDA_ERROR_NOT_SUPPORTED), so refused
  // here, nothing changed, rather than counted as a driver error.
  if (size != handle.size) {
    std::fprintf(stderr, "hsa_rt: hsa_amd_vmem_map(%#zx, %zu): CUDA maps only a whole handle (%zu)\n",
                 size_t(va), size, handle.size);
    return false;
  }
  Scoped scope(handle.pool.agent);
  return scope.ok() && CU_CHECK(cu().cuMemMap(va, size, 0, cuda_handle(handle), 0));
}

bool vmem_unmap(uintptr_t va, size_t size, const VmemHandle& handle) {
  Scoped scope(handle.pool.agent);
  return scope.ok() && CU_CHECK(cu().cuMemUnmap(va, size));
}

bool vmem_grantable(uint32_t agent, uint32_t permission, const void* va) {
  const char* why = !is_gpu(agent) && permission != kPermissionNone
                        ? "CUDA cannot give the CPU access to device memory from cuMemCreate"
                    : permission == kPermissionWriteOnly ? "CUDA has no write-only mappings"
                                                         : nullptr;
  if (why != nullptr) std::fprintf(stderr, "hsa_rt: hsa_amd_vmem_set_access(%p): %s\n", va, why);
  return why == nullptr;
}

bool vmem_set_access(uintptr_t va, const VmemMapping& mapping, const VmemHandle& handle,
                     const VmemAccess& after) {
  Scoped scope(handle.pool.agent);
  if (!scope.ok()) return false;
  bool revoked = false;
  VmemAccess raised;  // GPUs whose permission changes to one not NONE
  for (uint32_t agent = 1; agent <= g_gpus->size(); ++agent) {
    const auto was_it = mapping.access.find(agent);
    const auto now_it = after.find(agent);
    const uint32_t was = was_it == mapping.access.end() ? kPermissionNone : was_it->second;
    const uint32_t now = now_it == after.end() ? kPermissionNone : now_it->second;
    for (Role role : {Role::kSource, Role::kDestination}) {
      revoked = revoked || (permission_allows(was, role) && !permission_allows(now, role));
    }
    if (now != was && now != kPermissionNone) raised[agent] = now;
  }
  if (!revoked) return grant(va, mapping.size, after, &raised);
  // CUDA documents cuMemSetAccess for giving access, not for taking it: a
  // new mapping of the same handle starts with none (the bytes stay), then
  // what remains is given back.
  if (!CU_CHECK(cu().cuMemUnmap(va, mapping.size)) ||
      !CU_CHECK(cu().cuMemMap(va, mapping.size, 0, cuda_handle(handle), 0))) {
    std::fprintf(stderr, "hsa_rt: the mapping at %p could not be mapped again to revoke access\n",
                 reinterpret_cast<void*>(va));
    return false;
  }
  if (grant(va, mapping.size, after, nullptr)) return true;
  grant(va, mapping.size, mapping.access, nullptr);  // refused: put the old ones back
  return false;
}

void* vmem_engine_address(const VmemHandle&, size_t) { return nullptr; }

// ---- code objects ------------------------------------------------------------------------------

hsa_status_t load(uint32_t agent, const std::string&, const void* image, size_t, Loaded* out) {
  if (agent == kNoAgent || !is_gpu(agent)) return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
  Scoped scope(agent);
  CUmodule module = nullptr;
  if (!scope.ok() || !CU_CHECK(cu().cuModuleLoadData(&module, image))) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  out->module = module;
  return HSA_STATUS_SUCCESS;
}

void unload(uint32_t agent, void* module) {
  std::lock_guard<std::mutex> lock(g_zombies_mutex);
  g_zombies->emplace_back(agent, static_cast<CUmodule>(module));
}

hsa_status_t find_symbol(uint32_t agent, void* module, const std::string& name, bool kernel,
                         Symbol* out) {
  Scoped scope(agent);
  if (!scope.ok()) return HSA_STATUS_ERROR;
  const auto cuda_module = static_cast<CUmodule>(module);
  const std::string call = (kernel ? "cuModuleGetFunction(\"" : "cuModuleGetGlobal(\"") + name;
  CUresult result = CUDA_SUCCESS;
  if (kernel) {
    CUfunction function = nullptr;
    result = cu().cuModuleGetFunction(&function, cuda_module, name.c_str());
    out->kind = HSA_SYMBOL_KIND_KERNEL;
    out->address = reinterpret_cast<uint64_t>(function);
    out->dispatchable = true;
    if (result == CUDA_SUCCESS) describe_kernel(function, name, out);
  } else {
    CUdeviceptr address = 0;
    size_t bytes = 0;
    result = cu().cuModuleGetGlobal(&address, &bytes, cuda_module, name.c_str());
    // VARIABLE_SIZE is 32 bits.
    if (result == CUDA_SUCCESS && (bytes == 0 || bytes > UINT32_MAX)) {
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
    out->kind = HSA_SYMBOL_KIND_VARIABLE;
    out->address = address;
    out->size = uint32_t(bytes);
  }
  if (result == CUDA_ERROR_NOT_FOUND) return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;
  return check(result, (call + "\")").c_str()) ? HSA_STATUS_SUCCESS : HSA_STATUS_ERROR;
}

// ---- queues and dispatches ---------------------------------------------------------------------

namespace {
struct QueueStream {
  CUstream stream = nullptr;
  CUevent event = nullptr;
};
}  // namespace

hsa_status_t queue_start(uint32_t agent, void** data) {
  Scoped scope(agent);
  auto* q = new QueueStream;
  if (scope.ok() && CU_CHECK(cu().cuStreamCreate(&q->stream, CU_STREAM_NON_BLOCKING))) {
    if (CU_CHECK(cu().cuEventCreate(&q->event, CU_EVENT_DISABLE_TIMING))) {
      *data = q;
      return HSA_STATUS_SUCCESS;
    }
    CU_CHECK(cu().cuStreamDestroy(q->stream));
  }
  delete q;
  return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
}

void queue_stop(uint32_t agent, void* data) {
  auto* q = static_cast<QueueStream*>(data);
  Scoped scope(agent);
  CU_CHECK(cu().cuEventDestroy(q->event));
  CU_CHECK(cu().cuStreamDestroy(q->stream));
  delete q;
}

hsa_status_t dispatch(uint32_t agent, void* data, const hsa_kernel_dispatch_packet_t& p,
                      const KernelInfo& kernel) {
  const auto* q = static_cast<const QueueStream*>(data);
  Scoped scope(agent);
  if (!scope.ok()) return HSA_STATUS_ERROR_EXCEPTION;
  const auto blocks = [](uint32_t grid, uint16_t group) { return (grid + group - 1u) / group; };
  const uint32_t dynamic_shared =
      p.group_segment_size > kernel.group_size ? p.group_segment_size - kernel.group_size : 0;
  // The kernarg segment is the parameters: one by-value parameter (unknown:
  // the library's kernels take one), or a buffer for a kernel of several.
  void* params[1] = {p.kernarg_address};
  size_t kernarg_bytes = kernel.kernarg_size;
  void* extra[] = {reinterpret_cast<void*>(uintptr_t{1}) /* CU_LAUNCH_PARAM_BUFFER_POINTER */,
                   p.kernarg_address,
                   reinterpret_cast<void*>(uintptr_t{2}) /* CU_LAUNCH_PARAM_BUFFER_SIZE */,
                   &kernarg_bytes, nullptr /* CU_LAUNCH_PARAM_END */};
  const CUresult launched = cu().cuLaunchKernel(
      reinterpret_cast<CUfunction>(kernel.object), blocks(p.grid_size_x, p.workgroup_size_x),
      blocks(p.grid_size_y, p.workgroup_size_y), blocks(p.grid_size_z, p.workgroup_size_z),
      p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z, dynamic_shared, q->stream,
      kernel.param_count > 1 || kernel.param_count == 0 ? nullptr : params,
      kernel.param_count > 1 ? extra : nullptr);
  if (!check(launched, ("cuLaunchKernel(" + kernel.name + ") for an AQL dispatch").c_str())) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;  // ROCr's answer to a dispatch it cannot take
  }
  if (!CU_CHECK(cu().cuEventRecord(q->event, q->stream))) return HSA_STATUS_ERROR_EXCEPTION;
  const CUresult finished = cu().cuEventSynchronize(q->event);
  if (check(finished, "cuEventSynchronize after an AQL dispatch")) return HSA_STATUS_SUCCESS;
  return finished == CUDA_ERROR_ILLEGAL_ADDRESS ? kApertureViolation : HSA_STATUS_ERROR_EXCEPTION;
}

const cuda_driver_t* driver() { return g_cu; }
int device(uint32_t agent) { return gpu(agent).ordinal; }
CUctx_st* context(uint32_t agent) { return gpu(agent).context; }

}  // namespace hsa_rt::backend
