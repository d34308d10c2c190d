// cuda_driver.cpp: loads libcuda.so.1 at run time and resolves the entry
// points declared in cuda_driver.h.
//
// Resolving at run time keeps the whole harness buildable without the CUDA
// toolkit and lets a program without a GPU fail with a clear message instead
// of a loader error. The symbol names are the ones <cuda.h> maps the plain
// API names to (the _v2 entry points of the 64-bit API), so the behaviour is
// that of a program compiled against the toolkit.

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

#include "hsa_cuda_internal.h"

namespace hsa_cuda {

namespace {

// One entry point: where it goes in cuda_driver_t, the symbol to resolve, a
// fallback symbol (NULL for none) and whether init fails without it.
struct Entry {
  size_t offset;
  const char* symbol;
  const char* fallback;
  bool required;
};

#define HSA_CUDA_ENTRY(member, symbol, fallback, required) \
  Entry { offsetof(cuda_driver_t, member), symbol, fallback, required }

// clang-format off
const Entry kEntries[] = {
    HSA_CUDA_ENTRY(cuInit, "cuInit", nullptr, true),
    HSA_CUDA_ENTRY(cuDriverGetVersion, "cuDriverGetVersion", nullptr, true),
    HSA_CUDA_ENTRY(cuGetErrorString, "cuGetErrorString", nullptr, true),
    HSA_CUDA_ENTRY(cuGetErrorName, "cuGetErrorName", nullptr, true),

    HSA_CUDA_ENTRY(cuDeviceGetCount, "cuDeviceGetCount", nullptr, true),
    HSA_CUDA_ENTRY(cuDeviceGet, "cuDeviceGet", nullptr, true),
    HSA_CUDA_ENTRY(cuDeviceGetName, "cuDeviceGetName", nullptr, true),
    HSA_CUDA_ENTRY(cuDeviceGetAttribute, "cuDeviceGetAttribute", nullptr, true),
    HSA_CUDA_ENTRY(cuDeviceTotalMem, "cuDeviceTotalMem_v2", nullptr, true),

    HSA_CUDA_ENTRY(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", nullptr, true),
    // cuda.h (11.0 and later) maps cuDevicePrimaryCtxRelease to the _v2 entry.
    HSA_CUDA_ENTRY(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2",
                   "cuDevicePrimaryCtxRelease", true),
    HSA_CUDA_ENTRY(cuCtxSetCurrent, "cuCtxSetCurrent", nullptr, true),
    HSA_CUDA_ENTRY(cuCtxGetCurrent, "cuCtxGetCurrent", nullptr, true),
    HSA_CUDA_ENTRY(cuCtxSynchronize, "cuCtxSynchronize", nullptr, true),

    HSA_CUDA_ENTRY(cuMemAlloc, "cuMemAlloc_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemFree, "cuMemFree_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemGetInfo, "cuMemGetInfo_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemHostAlloc, "cuMemHostAlloc", nullptr, true),
    HSA_CUDA_ENTRY(cuMemFreeHost, "cuMemFreeHost", nullptr, true),
    // Unified-addressing copies: the plain symbols use the legacy default
    // stream (the _ptds variants would use the per-thread one).
    HSA_CUDA_ENTRY(cuMemcpy, "cuMemcpy", nullptr, true),
    HSA_CUDA_ENTRY(cuMemcpyAsync, "cuMemcpyAsync", nullptr, true),
    HSA_CUDA_ENTRY(cuMemcpyHtoD, "cuMemcpyHtoD_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemcpyDtoH, "cuMemcpyDtoH_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemcpyDtoD, "cuMemcpyDtoD_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemsetD8, "cuMemsetD8_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuMemsetD32, "cuMemsetD32_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuPointerGetAttribute, "cuPointerGetAttribute", nullptr, true),

    // Virtual memory management (CUDA 10.2+): unversioned symbols, optional
    // so that a driver without them still runs everything else.
    HSA_CUDA_ENTRY(cuMemAddressReserve, "cuMemAddressReserve", nullptr, false),
    HSA_CUDA_ENTRY(cuMemAddressFree, "cuMemAddressFree", nullptr, false),
    HSA_CUDA_ENTRY(cuMemCreate, "cuMemCreate", nullptr, false),
    HSA_CUDA_ENTRY(cuMemRelease, "cuMemRelease", nullptr, false),
    HSA_CUDA_ENTRY(cuMemMap, "cuMemMap", nullptr, false),
    HSA_CUDA_ENTRY(cuMemUnmap, "cuMemUnmap", nullptr, false),
    HSA_CUDA_ENTRY(cuMemSetAccess, "cuMemSetAccess", nullptr, false),
    HSA_CUDA_ENTRY(cuMemGetAccess, "cuMemGetAccess", nullptr, false),
    HSA_CUDA_ENTRY(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", nullptr, false),
    HSA_CUDA_ENTRY(cuMemRetainAllocationHandle, "cuMemRetainAllocationHandle", nullptr, false),
    HSA_CUDA_ENTRY(cuMemGetAllocationPropertiesFromHandle,
                   "cuMemGetAllocationPropertiesFromHandle", nullptr, false),

    HSA_CUDA_ENTRY(cuModuleLoad, "cuModuleLoad", nullptr, true),
    HSA_CUDA_ENTRY(cuModuleLoadData, "cuModuleLoadData", nullptr, true),
    HSA_CUDA_ENTRY(cuModuleUnload, "cuModuleUnload", nullptr, true),
    HSA_CUDA_ENTRY(cuModuleGetGlobal, "cuModuleGetGlobal_v2", nullptr, true),
    HSA_CUDA_ENTRY(cuModuleGetFunction, "cuModuleGetFunction", nullptr, true),
    HSA_CUDA_ENTRY(cuLaunchKernel, "cuLaunchKernel", nullptr, true),
    HSA_CUDA_ENTRY(cuFuncGetAttribute, "cuFuncGetAttribute", nullptr, true),
    HSA_CUDA_ENTRY(cuFuncGetParamInfo, "cuFuncGetParamInfo", nullptr, false),

    HSA_CUDA_ENTRY(cuStreamCreate, "cuStreamCreate", nullptr, true),
    HSA_CUDA_ENTRY(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", true),
    HSA_CUDA_ENTRY(cuStreamSynchronize, "cuStreamSynchronize", nullptr, true),
    HSA_CUDA_ENTRY(cuLaunchHostFunc, "cuLaunchHostFunc", nullptr, false),
    HSA_CUDA_ENTRY(cuEventCreate, "cuEventCreate", nullptr, true),
    HSA_CUDA_ENTRY(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy", true),
    HSA_CUDA_ENTRY(cuEventRecord, "cuEventRecord", nullptr, true),
    HSA_CUDA_ENTRY(cuEventSynchronize, "cuEventSynchronize", nullptr, true),
    HSA_CUDA_ENTRY(cuEventQuery, "cuEventQuery", nullptr, true),
    // CUDA 12.8 added cuEventElapsedTime_v2, which cuda.h 13 maps the plain
    // name to; older drivers only have the original.
    HSA_CUDA_ENTRY(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", false),
};
// clang-format on

#undef HSA_CUDA_ENTRY

std::mutex g_load_mutex;
cuda_driver_t g_driver;
bool g_loaded = false;

}  // namespace

bool load_driver(const char* library, std::string* error) {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (g_loaded) return true;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace (nothing
  // else in the process should bind to them by accident).
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    *error = std::string("cannot load ") + library + ": " + (why != nullptr ? why : "unknown error");
    return false;
  }
  cuda_driver_t driver;
  std::memset(&driver, 0, sizeof(driver));
  for (const Entry& entry : kEntries) {
    void* symbol = dlsym(handle, entry.symbol);
    if (symbol == nullptr && entry.fallback != nullptr) symbol = dlsym(handle, entry.fallback);
    if (symbol == nullptr) {
      if (!entry.required) continue;
      *error = std::string(library) + " has no " + entry.symbol +
               " (a CUDA driver older than this harness needs?)";
      dlclose(handle);
      return false;
    }
    // Data and function pointers have the same size and representation on
    // every platform with dlsym; memcpy states the conversion without a cast
    // ISO C++ only conditionally supports.
    static_assert(sizeof(symbol) == sizeof(cuInit_t), "function pointers are pointer-sized");
    std::memcpy(reinterpret_cast<unsigned char*>(&driver) + entry.offset, &symbol, sizeof(symbol));
  }
  g_driver = driver;
  g_loaded = true;
  // The handle is never closed: the driver's own teardown at process exit
  // must find its library still mapped.
  return true;
}

const cuda_driver_t* loaded_driver() {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  return g_loaded ? &g_driver : nullptr;
}

}  // namespace hsa_cuda
