/* cuda_driver.h: the subset of the CUDA driver API that the test runtime's
 * CUDA backend and the GPU harness use, declared here and resolved at run
 * time from libcuda.so.1 (dlopen + dlsym).
 *
 * Why not <cuda.h>: the harness must compile on machines without the CUDA
 * toolkit (CI, the Rust build machine), and the GPU machine's toolkit is only
 * needed for nvcc. Every declaration below is written from NVIDIA's public
 * driver API documentation; only the types, constants and entry points the
 * harness calls are present. Enumerations are plain ints here: the driver's
 * enums are int-sized, so the calling convention is the same.
 *
 * Where the driver exports several versions of an entry point, the versioned
 * symbol that <cuda.h> maps the plain name to is resolved (cuMemAlloc ->
 * cuMemAlloc_v2 and so on): CUDA_DRIVER_ENTRIES below.
 *
 * Never include this header together with <cuda.h>: the names collide on
 * purpose, so that code written against it reads like ordinary driver code.
 */
#ifndef HSA_RT_CUDA_DRIVER_H
#define HSA_RT_CUDA_DRIVER_H

#ifdef __cuda_cuda_h__
#error "cuda_driver.h declares its own subset of the CUDA driver API; do not include <cuda.h> with it"
#endif

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- types ------------------------------------------------------------------ */

typedef int CUresult;                   /* enum cudaError_enum */
typedef int CUdevice;                   /* CUdevice_v1 */
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 */
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUevent_st* CUevent;
/* Virtual memory management (CUDA 10.2 and later). */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUmemLocation_st {
  int type; /* CUmemLocationType */
  int id;   /* the device ordinal for CU_MEM_LOCATION_TYPE_DEVICE */
} CUmemLocation;
typedef struct CUmemAllocationProp_st {
  int type;                 /* CUmemAllocationType */
  int requestedHandleTypes; /* CUmemAllocationHandleType */
  CUmemLocation location;
  void* win32HandleMetaData; /* must be NULL outside Windows */
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} CUmemAllocationProp;
typedef struct CUmemAccessDesc_st {
  CUmemLocation location;
  int flags; /* CUmemAccess_flags */
} CUmemAccessDesc;

/* ---- CUresult values -------------------------------------------------------- */

#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_FILE_NOT_FOUND 301
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712
#define CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED 713
#define CUDA_ERROR_NOT_SUPPORTED 801

/* ---- flags and attributes ----------------------------------------------------- */

/* cuMemHostAlloc flags */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

/* cuMemHostRegister flags */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02

/* cuStreamCreate flags */
#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1

/* cuEventCreate flags */
#define CU_EVENT_DISABLE_TIMING 0x2

/* CUdevice_attribute values used by the runtime */
#define CU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY 19
#define CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT 40
#define CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING 41
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* CUpointer_attribute values */
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

/* CUmemorytype values (what CU_POINTER_ATTRIBUTE_MEMORY_TYPE reports, as an
 * unsigned int) */
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2

/* CUfunction_attribute values (cuFuncGetAttribute) */
#define CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES 3
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* CUmemAllocationType, CUmemLocationType, CUmemAccess_flags,
 * CUmemAllocationGranularity_flags, CUmemAllocationHandleType */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_LOCATION_TYPE_HOST 0x2
#define CU_MEM_ACCESS_FLAGS_PROT_NONE 0x0
#define CU_MEM_ACCESS_FLAGS_PROT_READ 0x1
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM 0x0
#define CU_MEM_ALLOC_GRANULARITY_RECOMMENDED 0x1
#define CU_MEM_HANDLE_TYPE_NONE 0x0

/* ---- entry points ------------------------------------------------------------
 *
 * X(name, symbol, fallback, required, parameters): one line per entry point,
 * the symbol <cuda.h> maps the plain name to, a fallback symbol (NULL: none)
 * and whether a driver without either is refused. From this one list come
 * the function types (name##_t), the members of cuda_driver_t (named after
 * the plain names) and cuda_driver.cpp's table of symbols. */
#define CUDA_DRIVER_ENTRIES(X)                                                                  \
  X(cuInit, "cuInit", NULL, 1, (unsigned int flags))                                            \
  X(cuDriverGetVersion, "cuDriverGetVersion", NULL, 1, (int* driver_version))                   \
  X(cuGetErrorString, "cuGetErrorString", NULL, 1, (CUresult error, const char** text))          \
  X(cuGetErrorName, "cuGetErrorName", NULL, 1, (CUresult error, const char** name))              \
  X(cuDeviceGetCount, "cuDeviceGetCount", NULL, 1, (int* count))                                \
  X(cuDeviceGet, "cuDeviceGet", NULL, 1, (CUdevice * device, int ordinal))                      \
  X(cuDeviceGetName, "cuDeviceGetName", NULL, 1, (char* name, int length, CUdevice device))     \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL, 1,                                      \
    (int* value, int attribute, CUdevice device))                                               \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL, 1, (size_t * bytes, CUdevice device))         \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, 1,                              \
    (CUcontext * context, CUdevice device))                                                     \
  /* cuda.h (11.0 and later) maps cuDevicePrimaryCtxRelease to the _v2 entry. */                \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", 1,  \
    (CUdevice device))                                                                          \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", NULL, 1, (CUcontext context))                           \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", NULL, 1, (CUcontext * context))                         \
  X(cuCtxSynchronize, "cuCtxSynchronize", NULL, 1, (void))                                      \
  X(cuMemAlloc, "cuMemAlloc_v2", NULL, 1, (CUdeviceptr * dptr, size_t bytes))                   \
  X(cuMemFree, "cuMemFree_v2", NULL, 1, (CUdeviceptr dptr))                                     \
  X(cuMemGetInfo, "cuMemGetInfo_v2", NULL, 1, (size_t * free_bytes, size_t * total_bytes))       \
  X(cuMemHostAlloc, "cuMemHostAlloc", NULL, 1, (void** host, size_t bytes, unsigned int flags)) \
  X(cuMemFreeHost, "cuMemFreeHost", NULL, 1, (void* host))                                      \
  /* Pinning of memory the program allocated (hsa_amd_memory_lock). */                          \
  X(cuMemHostRegister, "cuMemHostRegister_v2", "cuMemHostRegister", 1,                          \
    (void* host, size_t bytes, unsigned int flags))                                             \
  X(cuMemHostUnregister, "cuMemHostUnregister", NULL, 1, (void* host))                          \
  /* Unified-addressing copies: the plain symbols use the legacy default                        \
   * stream (the _ptds variants would use the per-thread one). */                               \
  X(cuMemcpy, "cuMemcpy", NULL, 1, (CUdeviceptr dst, CUdeviceptr src, size_t bytes))            \
  X(cuMemcpyAsync, "cuMemcpyAsync", NULL, 1,                                                    \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                          \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL, 1, (CUdeviceptr dst, const void* src, size_t bytes)) \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL, 1, (void* dst, CUdeviceptr src, size_t bytes))       \
  X(cuMemsetD8, "cuMemsetD8_v2", NULL, 1,                                                       \
    (CUdeviceptr dst, unsigned char value, size_t count))                                       \
  X(cuMemsetD32, "cuMemsetD32_v2", NULL, 1, (CUdeviceptr dst, unsigned int value, size_t count)) \
  X(cuPointerGetAttribute, "cuPointerGetAttribute", NULL, 1,                                    \
    (void* data, int attribute, CUdeviceptr ptr))                                               \
  /* Virtual memory management (CUDA 10.2+): optional together, so that a                       \
   * driver without them still runs everything else (cuda_driver_has_vmm). */                   \
  X(cuMemAddressReserve, "cuMemAddressReserve", NULL, 0,                                        \
    (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                        \
     unsigned long long flags))                                                                 \
  X(cuMemAddressFree, "cuMemAddressFree", NULL, 0, (CUdeviceptr ptr, size_t size))              \
  X(cuMemCreate, "cuMemCreate", NULL, 0,                                                        \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,       \
     unsigned long long flags))                                                                 \
  X(cuMemRelease, "cuMemRelease", NULL, 0, (CUmemGenericAllocationHandle handle))               \
  X(cuMemMap, "cuMemMap", NULL, 0,                                                              \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,          \
     unsigned long long flags))                                                                 \
  X(cuMemUnmap, "cuMemUnmap", NULL, 0, (CUdeviceptr ptr, size_t size))                          \
  X(cuMemSetAccess, "cuMemSetAccess", NULL, 0,                                                  \
    (CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count))                  \
  X(cuMemGetAccess, "cuMemGetAccess", NULL, 0,                                                  \
    (unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr))                \
  X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", NULL, 0,                    \
    (size_t * granularity, const CUmemAllocationProp* prop, int option))                        \
  X(cuModuleLoadData, "cuModuleLoadData", NULL, 1, (CUmodule * module, const void* image))      \
  X(cuModuleUnload, "cuModuleUnload", NULL, 1, (CUmodule module))                               \
  X(cuModuleGetGlobal, "cuModuleGetGlobal_v2", NULL, 1,                                         \
    (CUdeviceptr * dptr, size_t * bytes, CUmodule module, const char* name))                    \
  X(cuModuleGetFunction, "cuModuleGetFunction", NULL, 1,                                        \
    (CUfunction * function, CUmodule module, const char* name))                                 \
  X(cuLaunchKernel, "cuLaunchKernel", NULL, 1,                                                  \
    (CUfunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,        \
     unsigned int block_x, unsigned int block_y, unsigned int block_z,                          \
     unsigned int shared_bytes, CUstream stream, void** params, void** extra))                  \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", NULL, 1,                                          \
    (int* value, int attribute, CUfunction function))                                           \
  /* CUDA 12.4+: the offset and size of a kernel's parameter param_index;                       \
   * CUDA_ERROR_INVALID_VALUE past the last one. */                                             \
  X(cuFuncGetParamInfo, "cuFuncGetParamInfo", NULL, 0,                                          \
    (CUfunction function, size_t param_index, size_t* param_offset, size_t* param_size))        \
  X(cuStreamCreate, "cuStreamCreate", NULL, 1, (CUstream * stream, unsigned int flags))         \
  X(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", 1, (CUstream stream))             \
  X(cuStreamSynchronize, "cuStreamSynchronize", NULL, 1, (CUstream stream))                     \
  X(cuEventCreate, "cuEventCreate", NULL, 1, (CUevent * event, unsigned int flags))             \
  X(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy", 1, (CUevent event))                  \
  X(cuEventRecord, "cuEventRecord", NULL, 1, (CUevent event, CUstream stream))                  \
  X(cuEventSynchronize, "cuEventSynchronize", NULL, 1, (CUevent event))

#define CUDA_DRIVER_TYPEDEF(name, symbol, fallback, required, parameters) \
  typedef CUresult(*name##_t) parameters;
CUDA_DRIVER_ENTRIES(CUDA_DRIVER_TYPEDEF)
#undef CUDA_DRIVER_TYPEDEF

/* The resolved driver. Members marked optional (required 0) may be NULL (an
 * older or newer driver without them); every other member is non-NULL once
 * the driver loaded. */
typedef struct cuda_driver_t {
#define CUDA_DRIVER_MEMBER(name, symbol, fallback, required, parameters) name##_t name;
  CUDA_DRIVER_ENTRIES(CUDA_DRIVER_MEMBER)
#undef CUDA_DRIVER_MEMBER
} cuda_driver_t;

/* Whether every virtual memory management entry point resolved. */
static inline int cuda_driver_has_vmm(const cuda_driver_t* d) {
  return d != NULL && d->cuMemAddressReserve != NULL && d->cuMemAddressFree != NULL &&
         d->cuMemCreate != NULL && d->cuMemRelease != NULL && d->cuMemMap != NULL &&
         d->cuMemUnmap != NULL && d->cuMemSetAccess != NULL && d->cuMemGetAccess != NULL &&
         d->cuMemGetAllocationGranularity != NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* HSA_RT_CUDA_DRIVER_H */
