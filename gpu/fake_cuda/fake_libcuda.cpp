// fake_libcuda.cpp: a stand-in libcuda.so.1 for machines without a GPU, so
// the GPU harness (HSA-on-CUDA, the test, the bench) runs end to end in CI.
//
// It is not an emulator of CUDA's performance or memory model: "device
// memory" is host memory, every operation runs synchronously on the calling
// thread, and a kernel launch runs every thread of the grid one after the
// other on the host (gpu/kernels.cu compiled as C++ through
// kernels_host_shim.h). What it does check, more strictly than the real
// driver where that catches harness bugs:
//   - the driver is initialised, and a context is current, for every call
//     that needs one (the runtime must make its context current itself);
//   - device memory is freed, and streams and functions are used, in the
//     context of the device they belong to;
//   - copies and memsets stay inside live allocations, and touching device
//     memory that was freed is CUDA_ERROR_ILLEGAL_ADDRESS;
//   - releasing a device's primary context for the last time with device
//     allocations still live reports them as leaked (a "fake_cuda: LEAK"
//     line on stderr).
//
// Each module has its own storage for the module variables (as each real
// module has): a launch swaps the module's values into the host-compiled
// kernels' globals and back out afterwards.
//
// Configuration: FAKE_CUDA_DEVICES (default 2; 0 makes cuInit answer
// CUDA_ERROR_NO_DEVICE), FAKE_CUDA_DEVICE_MEMORY_MIB (default 3072),
// FAKE_CUDA_UNMAP_FREED (1: cuMemFree unmaps the block, so the process may get
// its addresses again from mmap or malloc, as seen with the H200's driver;
// otherwise they stay reserved and inaccessible, which turns a use after free
// into a fault).
// Load it with HSA_CUDA_LIBCUDA=/path/to/libcuda.so.1.

#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../hsa_cuda/cuda_driver.h"
#include "kernels_host_shim.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// The built-in variables of the host-compiled kernels (kernels_host_shim.h).
thread_local fake_dim3 threadIdx;
thread_local fake_dim3 blockIdx;
thread_local fake_dim3 blockDim;
thread_local fake_dim3 gridDim;

// gpu/kernels.cu, compiled for the host into this library.
extern "C" void saxpy(float a, const float* x, float* y, unsigned long long n);
extern "C" void bump_pass_counter(unsigned long long* observed);
extern "C" void read_const_table(unsigned int* out, unsigned int count);
extern "C" void fill_pattern(unsigned int* p, unsigned long long n, unsigned int seed);
extern "C" void mutate(unsigned int* p, unsigned long long n, unsigned int salt);
extern "C" void count_mismatches(const unsigned int* p, unsigned long long n, unsigned int seed,
                                 unsigned int mutated, unsigned int salt,
                                 unsigned long long* mismatches);
extern unsigned long long pass_counter;
extern unsigned int const_table[256];

struct CUctx_st {
  int device;
  int retained;
};
struct FakeFunction;
struct CUmod_st {
  int device;
  unsigned long long pass_counter;
  unsigned int const_table[256];
  std::vector<std::unique_ptr<FakeFunction>> functions;
};
struct CUstream_st {
  int device;
};
struct CUevent_st {
  int device;
};

namespace {

constexpr CUresult kInvalidHandle = 400;

struct Kernel {
  const char* name;
  void (*run)(void** params);
};

}  // namespace

// A CUfunction: a kernel of one module.
struct FakeFunction {
  const Kernel* kernel;
  CUmod_st* module;
};

namespace {

template <typename T>
T arg(void** params, int index) {
  T value;
  std::memcpy(&value, params[index], sizeof(T));
  return value;
}

const Kernel kKernels[] = {
    {"saxpy",
     [](void** p) {
       saxpy(arg<float>(p, 0), arg<const float*>(p, 1), arg<float*>(p, 2),
             arg<unsigned long long>(p, 3));
     }},
    {"bump_pass_counter", [](void** p) { bump_pass_counter(arg<unsigned long long*>(p, 0)); }},
    {"read_const_table",
     [](void** p) { read_const_table(arg<unsigned int*>(p, 0), arg<unsigned int>(p, 1)); }},
    {"fill_pattern",
     [](void** p) {
       fill_pattern(arg<unsigned int*>(p, 0), arg<unsigned long long>(p, 1),
                    arg<unsigned int>(p, 2));
     }},
    {"mutate",
     [](void** p) {
       mutate(arg<unsigned int*>(p, 0), arg<unsigned long long>(p, 1), arg<unsigned int>(p, 2));
     }},
    {"count_mismatches",
     [](void** p) {
       count_mismatches(arg<const unsigned int*>(p, 0), arg<unsigned long long>(p, 1),
                        arg<unsigned int>(p, 2), arg<unsigned int>(p, 3), arg<unsigned int>(p, 4),
                        arg<unsigned long long*>(p, 5));
     }},
};

struct Block {
  size_t size = 0;
  int device = -1;  // -1: pinned host memory
};

struct Driver {
  std::recursive_mutex mutex;
  bool initialized = false;
  int devices = 0;
  size_t device_memory = 0;
  // FAKE_CUDA_UNMAP_FREED=1: cuMemFree gives the addresses back (see there).
  bool unmap_freed = false;
  std::vector<std::unique_ptr<CUctx_st>> contexts;  // primary context per device
  std::vector<size_t> used;
  std::map<uintptr_t, Block> blocks;
  std::map<uintptr_t, size_t> freed_device;
  std::set<CUmod_st*> modules;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
};

Driver& driver() {
  static Driver* const d = new Driver;
  return *d;
}

thread_local CUctx_st* t_current = nullptr;

using Lock = std::lock_guard<std::recursive_mutex>;

uintptr_t page_round(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// A loaded module's variable storage is device memory of its device.
bool in_range(uintptr_t address, size_t size, const void* base, size_t extent) {
  const auto start = reinterpret_cast<uintptr_t>(base);
  return address >= start && address - start < extent && size <= extent - (address - start);
}

const CUmod_st* module_holding(const Driver& d, uintptr_t address, size_t size) {
  for (const CUmod_st* module : d.modules) {
    if (in_range(address, size, &module->pass_counter, sizeof(module->pass_counter)) ||
        in_range(address, size, module->const_table, sizeof(module->const_table))) {
      return module;
    }
  }
  return nullptr;
}

// Checks one side of a copy or memset. Unknown memory is host memory.
CUresult check_range(Driver& d, uintptr_t address, size_t size, bool must_be_device) {
  if (module_holding(d, address, size) != nullptr) return CUDA_SUCCESS;
  auto it = d.blocks.upper_bound(address);
  if (it != d.blocks.begin()) {
    --it;
    if (address - it->first < it->second.size) {
      if (size > it->second.size - (address - it->first)) {
        std::fprintf(stderr, "fake_cuda: access of %zu bytes at %#lx runs past its block\n", size,
                     static_cast<unsigned long>(address));
        return CUDA_ERROR_INVALID_VALUE;
      }
      return CUDA_SUCCESS;
    }
  }
  auto freed = d.freed_device.upper_bound(address);
  if (freed != d.freed_device.begin()) {
    --freed;
    if (address - freed->first < freed->second) {
      std::fprintf(stderr, "fake_cuda: access to freed device memory at %#lx\n",
                   static_cast<unsigned long>(address));
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
  }
  return must_be_device ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult need_context(Driver& d) {
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr || t_current->retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult copy(uintptr_t dst, uintptr_t src, size_t size, bool dst_device, bool src_device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_range(d, dst, size, dst_device)) return r;
  if (CUresult r = check_range(d, src, size, src_device)) return r;
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), size);
  return CUDA_SUCCESS;
}

CUresult check_stream(Driver& d, CUstream stream) {
  if (stream == nullptr) return CUDA_SUCCESS;
  if (d.streams.count(stream) == 0) return kInvalidHandle;
  // Stricter than needed in places, and what catches a wrong context: a
  // stream belongs to its context's device.
  return stream->device == t_current->device ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

void* map_memory(size_t bytes) {
  void* p = mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Gives freed device memory's pages back but keeps its addresses reserved,
// as the real driver keeps device virtual addresses: host mallocs never get
// them, so a later access there is always a use after free.
void release_device_memory(uintptr_t base, size_t size) {
  mmap(reinterpret_cast<void*>(base), page_round(size), PROT_NONE,
       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

void forget_freed(Driver& d, uintptr_t base, size_t size) {
  for (auto it = d.freed_device.begin(); it != d.freed_device.end();) {
    const bool overlaps = it->first < base + size && base < it->first + it->second;
    it = overlaps ? d.freed_device.erase(it) : std::next(it);
  }
}

}  // namespace

// ---- errors, version, init ---------------------------------------------------------

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
    case CUDA_ERROR_FILE_NOT_FOUND: *name = "CUDA_ERROR_FILE_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return CUDA_SUCCESS;
    case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return CUDA_SUCCESS;
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char* name = nullptr;
  if (cuGetErrorName(error, &name) != CUDA_SUCCESS) {
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *text = "(fake driver)";
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = driver();
  Lock lock(d.mutex);
  if (d.initialized) return CUDA_SUCCESS;
  const char* devices = std::getenv("FAKE_CUDA_DEVICES");
  const char* memory = std::getenv("FAKE_CUDA_DEVICE_MEMORY_MIB");
  d.devices = devices != nullptr ? std::atoi(devices) : 2;
  d.device_memory = size_t(memory != nullptr ? std::atoll(memory) : 3072) << 20;
  const char* unmap_freed = std::getenv("FAKE_CUDA_UNMAP_FREED");
  d.unmap_freed = unmap_freed != nullptr && std::strcmp(unmap_freed, "1") == 0;
  if (d.devices <= 0) return CUDA_ERROR_NO_DEVICE;
  for (int i = 0; i < d.devices; ++i) d.contexts.push_back(std::make_unique<CUctx_st>(CUctx_st{i, 0}));
  d.used.assign(size_t(d.devices), 0);
  d.initialized = true;
  return CUDA_SUCCESS;
}

// ---- devices and contexts --------------------------------------------------------------

FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = d.devices;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, size_t(length), "Fake CUDA Device %d", device);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = d.device_memory;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* ctx = d.contexts[size_t(device)].get();
  ++ctx->retained;
  *context = ctx;
  return CUDA_SUCCESS;
}

// The last release destroys the context, and with it the device memory
// still allocated in it: reported as a leak.
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* ctx = d.contexts[size_t(device)].get();
  if (ctx->retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--ctx->retained > 0) return CUDA_SUCCESS;
  size_t leaked = 0;
  for (auto it = d.blocks.begin(); it != d.blocks.end();) {
    if (it->second.device == device) {
      ++leaked;
      release_device_memory(it->first, it->second.size);
      it = d.blocks.erase(it);
    } else {
      ++it;
    }
  }
  d.used[size_t(device)] = 0;
  if (leaked != 0) {
    std::fprintf(stderr,
                 "fake_cuda: LEAK: device %d's context destroyed with %zu allocations live\n",
                 device, leaked);
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context != nullptr && context->retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = context;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = t_current;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  Driver& d = driver();
  Lock lock(d.mutex);
  return need_context(d);
}

// ---- memory ------------------------------------------------------------------------------

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const int device = t_current->device;
  if (bytes > d.device_memory - d.used[size_t(device)]) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = map_memory(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto base = reinterpret_cast<uintptr_t>(p);
  forget_freed(d, base, bytes);
  d.blocks[base] = Block{bytes, device};
  d.used[size_t(device)] += bytes;
  *dptr = base;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.blocks.find(uintptr_t(dptr));
  if (it == d.blocks.end() || it->second.device < 0) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.device != t_current->device) {
    std::fprintf(stderr, "fake_cuda: cuMemFree of device %d memory in device %d's context\n",
                 it->second.device, t_current->device);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  d.used[size_t(it->second.device)] -= it->second.size;
  if (d.unmap_freed) {
    // The H200's driver behaviour: the address range goes back to the
    // process, and a later mmap or malloc may be handed it.
    munmap(reinterpret_cast<void*>(it->first), page_round(it->second.size));
  } else {
    d.freed_device[it->first] = it->second.size;
    release_device_memory(it->first, it->second.size);
  }
  d.blocks.erase(it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *total_bytes = d.device_memory;
  *free_bytes = d.device_memory - d.used[size_t(t_current->device)];
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostAlloc(void** host, size_t bytes, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (host == nullptr || bytes == 0 || (flags & ~0x7u) != 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = map_memory(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  d.blocks[reinterpret_cast<uintptr_t>(p)] = Block{bytes, -1};
  *host = p;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFreeHost(void* host) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.blocks.find(reinterpret_cast<uintptr_t>(host));
  if (it == d.blocks.end() || it->second.device >= 0) return CUDA_ERROR_INVALID_VALUE;
  munmap(host, page_round(it->second.size));
  d.blocks.erase(it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto address = uintptr_t(ptr);
  int device = -2;
  if (const CUmod_st* module = module_holding(d, address, 1)) {
    device = module->device;
  } else {
    auto it = d.blocks.upper_bound(address);
    if (it != d.blocks.begin() && address - std::prev(it)->first < std::prev(it)->second.size) {
      device = std::prev(it)->second.device;
    }
  }
  if (device == -2) return CUDA_ERROR_INVALID_VALUE;  // pageable or unknown
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
      const unsigned int type = device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      std::memcpy(data, &type, sizeof(type));
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
      const int ordinal = device >= 0 ? device : 0;
      std::memcpy(data, &ordinal, sizeof(ordinal));
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return copy(uintptr_t(dst), uintptr_t(src), bytes, false, false);
}

FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream) {
  {
    Driver& d = driver();
    Lock lock(d.mutex);
    if (CUresult r = need_context(d)) return r;
    if (CUresult r = check_stream(d, stream)) return r;
  }
  return copy(uintptr_t(dst), uintptr_t(src), bytes, false, false);
}

FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  return copy(uintptr_t(dst), reinterpret_cast<uintptr_t>(src), bytes, true, false);
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  return copy(reinterpret_cast<uintptr_t>(dst), uintptr_t(src), bytes, false, true);
}

FAKE_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return copy(uintptr_t(dst), uintptr_t(src), bytes, true, true);
}

FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_range(d, uintptr_t(dst), count, true)) return r;
  std::memset(reinterpret_cast<void*>(dst), value, count);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_range(d, uintptr_t(dst), count * 4, true)) return r;
  auto* words = reinterpret_cast<unsigned int*>(dst);
  for (size_t i = 0; i < count; ++i) words[i] = value;
  return CUDA_SUCCESS;
}

// ---- modules and launches -------------------------------------------------------------------

FAKE_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* path) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (module == nullptr || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::FILE* file = std::fopen(path, "rb");
  if (file == nullptr) return CUDA_ERROR_FILE_NOT_FOUND;
  std::fclose(file);
  auto* loaded = new CUmod_st{t_current->device, 0, {}, {}};
  d.modules.insert(loaded);
  *module = loaded;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* loaded = new CUmod_st{t_current->device, 0, {}, {}};
  d.modules.insert(loaded);
  *module = loaded;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.modules.erase(module) == 0) return kInvalidHandle;
  // Its storage is gone: touching it later is an illegal address.
  d.freed_device[reinterpret_cast<uintptr_t>(&module->pass_counter)] = sizeof(module->pass_counter);
  d.freed_device[reinterpret_cast<uintptr_t>(module->const_table)] = sizeof(module->const_table);
  // Freed memory is never reused here, so the records stay true: the module
  // object is kept (leaked on purpose, it is small).
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule module,
                                          const char* name) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.modules.count(module) == 0 || name == nullptr) return kInvalidHandle;
  uintptr_t address = 0;
  size_t size = 0;
  if (std::strcmp(name, "pass_counter") == 0) {
    address = reinterpret_cast<uintptr_t>(&module->pass_counter);
    size = sizeof(module->pass_counter);
  } else if (std::strcmp(name, "const_table") == 0) {
    address = reinterpret_cast<uintptr_t>(module->const_table);
    size = sizeof(module->const_table);
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (dptr != nullptr) *dptr = address;
  if (bytes != nullptr) *bytes = size;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d.modules.count(module) == 0) return kInvalidHandle;
  for (const Kernel& kernel : kKernels) {
    if (std::strcmp(kernel.name, name) == 0) {
      module->functions.push_back(std::make_unique<FakeFunction>(FakeFunction{&kernel, module}));
      *function = reinterpret_cast<CUfunction>(module->functions.back().get());
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                    unsigned int grid_z, unsigned int block_x,
                                    unsigned int block_y, unsigned int block_z,
                                    unsigned int shared_bytes, CUstream stream, void** params,
                                    void** extra) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_stream(d, stream)) return r;
  auto* handle = reinterpret_cast<FakeFunction*>(function);
  bool known = false;
  for (CUmod_st* module : d.modules) {
    for (const auto& f : module->functions) known |= f.get() == handle;
  }
  if (!known) return kInvalidHandle;
  CUmod_st* module = handle->module;
  if (module->device != t_current->device) return CUDA_ERROR_INVALID_CONTEXT;
  const Kernel* kernel = handle->kernel;
  if (grid_x == 0 || block_x == 0 || block_x > 1024 || grid_y != 1 || grid_z != 1 ||
      block_y != 1 || block_z != 1 || shared_bytes != 0 || params == nullptr || extra != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  gridDim = fake_dim3{grid_x, 1, 1};
  blockDim = fake_dim3{block_x, 1, 1};
  // The module's variables in, the grid, the variables out.
  pass_counter = module->pass_counter;
  std::memcpy(const_table, module->const_table, sizeof(const_table));
  for (unsigned int b = 0; b < grid_x; ++b) {
    blockIdx = fake_dim3{b, 0, 0};
    for (unsigned int t = 0; t < block_x; ++t) {
      threadIdx = fake_dim3{t, 0, 0};
      kernel->run(params);
    }
  }
  module->pass_counter = pass_counter;
  return CUDA_SUCCESS;
}

// ---- streams and events -----------------------------------------------------------------------

FAKE_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (stream == nullptr || flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  auto* created = new CUstream_st{t_current->device};
  d.streams.insert(created);
  *stream = created;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.streams.erase(stream) == 0) return kInvalidHandle;
  delete stream;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  return check_stream(d, stream);
}

FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* user_data) {
  {
    Driver& d = driver();
    Lock lock(d.mutex);
    if (CUresult r = need_context(d)) return r;
    if (CUresult r = check_stream(d, stream)) return r;
  }
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  fn(user_data);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (event == nullptr || flags > 0xF) return CUDA_ERROR_INVALID_VALUE;
  auto* created = new CUevent_st{t_current->device};
  d.events.insert(created);
  *event = created;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (d.events.erase(event) == 0) return kInvalidHandle;
  delete event;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.events.count(event) == 0) return kInvalidHandle;
  return check_stream(d, stream);
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return d.events.count(event) != 0 ? CUDA_SUCCESS : kInvalidHandle;
}

FAKE_EXPORT CUresult cuEventQuery(CUevent event) { return cuEventSynchronize(event); }

FAKE_EXPORT CUresult cuEventElapsedTime_v2(float* milliseconds, CUevent start, CUevent end) {
  if (milliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (cuEventSynchronize(start) != CUDA_SUCCESS || cuEventSynchronize(end) != CUDA_SUCCESS) {
    return kInvalidHandle;
  }
  *milliseconds = 0.0f;
  return CUDA_SUCCESS;
}
