/* cuda_driver.h: the subset of the CUDA driver API that the HSA-on-CUDA
 * runtime and the GPU harness use, declared here and resolved at run time
 * from libcuda.so.1 (dlopen + dlsym).
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
 * cuMemAlloc_v2 and so on); see hsa_cuda/cuda_driver.cpp for the list.
 *
 * Never include this header together with <cuda.h>: the names collide on
 * purpose, so that code written against it reads like ordinary driver code.
 */
#ifndef HSA_CUDA_CUDA_DRIVER_H
#define HSA_CUDA_CUDA_DRIVER_H

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
typedef void (*CUhostFn)(void* user_data);
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
#define CUDA_ERROR_DEINITIALIZED 4
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_NO_BINARY_FOR_GPU 209
#define CUDA_ERROR_FILE_NOT_FOUND 301
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CUDA_ERROR_NOT_SUPPORTED 801

/* ---- flags and attributes ----------------------------------------------------- */

/* cuMemHostAlloc flags */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04

/* cuStreamCreate flags */
#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1

/* cuEventCreate flags */
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_BLOCKING_SYNC 0x1
#define CU_EVENT_DISABLE_TIMING 0x2

/* CUdevice_attribute values used by the runtime */
#define CU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY 19
#define CU_DEVICE_ATTRIBUTE_PCI_BUS_ID 33
#define CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT 40
#define CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID 34
#define CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING 41
#define CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID 50
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* CUpointer_attribute values */
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9

/* CUmemorytype values (what CU_POINTER_ATTRIBUTE_MEMORY_TYPE reports, as an
 * unsigned int) */
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_ARRAY 3
#define CU_MEMORYTYPE_UNIFIED 4

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

/* ---- entry points ------------------------------------------------------------ */

typedef CUresult (*cuInit_t)(unsigned int flags);
typedef CUresult (*cuDriverGetVersion_t)(int* driver_version);
typedef CUresult (*cuGetErrorString_t)(CUresult error, const char** text);
typedef CUresult (*cuGetErrorName_t)(CUresult error, const char** name);

typedef CUresult (*cuDeviceGetCount_t)(int* count);
typedef CUresult (*cuDeviceGet_t)(CUdevice* device, int ordinal);
typedef CUresult (*cuDeviceGetName_t)(char* name, int length, CUdevice device);
typedef CUresult (*cuDeviceGetAttribute_t)(int* value, int attribute, CUdevice device);
typedef CUresult (*cuDeviceTotalMem_t)(size_t* bytes, CUdevice device);

typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext* context, CUdevice device);
typedef CUresult (*cuDevicePrimaryCtxRelease_t)(CUdevice device);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext context);
typedef CUresult (*cuCtxGetCurrent_t)(CUcontext* context);
typedef CUresult (*cuCtxSynchronize_t)(void);

typedef CUresult (*cuMemAlloc_t)(CUdeviceptr* dptr, size_t bytes);
typedef CUresult (*cuMemFree_t)(CUdeviceptr dptr);
typedef CUresult (*cuMemGetInfo_t)(size_t* free_bytes, size_t* total_bytes);
typedef CUresult (*cuMemHostAlloc_t)(void** host, size_t bytes, unsigned int flags);
typedef CUresult (*cuMemFreeHost_t)(void* host);
typedef CUresult (*cuMemcpy_t)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
typedef CUresult (*cuMemcpyAsync_t)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                    CUstream stream);
typedef CUresult (*cuMemcpyHtoD_t)(CUdeviceptr dst, const void* src, size_t bytes);
typedef CUresult (*cuMemcpyDtoH_t)(void* dst, CUdeviceptr src, size_t bytes);
typedef CUresult (*cuMemcpyDtoD_t)(CUdeviceptr dst, CUdeviceptr src, size_t bytes);
typedef CUresult (*cuMemsetD8_t)(CUdeviceptr dst, unsigned char value, size_t count);
typedef CUresult (*cuMemsetD32_t)(CUdeviceptr dst, unsigned int value, size_t count);
typedef CUresult (*cuPointerGetAttribute_t)(void* data, int attribute, CUdeviceptr ptr);

typedef CUresult (*cuMemAddressReserve_t)(CUdeviceptr* ptr, size_t size, size_t alignment,
                                          CUdeviceptr addr, unsigned long long flags);
typedef CUresult (*cuMemAddressFree_t)(CUdeviceptr ptr, size_t size);
typedef CUresult (*cuMemCreate_t)(CUmemGenericAllocationHandle* handle, size_t size,
                                  const CUmemAllocationProp* prop, unsigned long long flags);
typedef CUresult (*cuMemRelease_t)(CUmemGenericAllocationHandle handle);
typedef CUresult (*cuMemMap_t)(CUdeviceptr ptr, size_t size, size_t offset,
                               CUmemGenericAllocationHandle handle, unsigned long long flags);
typedef CUresult (*cuMemUnmap_t)(CUdeviceptr ptr, size_t size);
typedef CUresult (*cuMemSetAccess_t)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                     size_t count);
typedef CUresult (*cuMemGetAccess_t)(unsigned long long* flags, const CUmemLocation* location,
                                     CUdeviceptr ptr);
typedef CUresult (*cuMemGetAllocationGranularity_t)(size_t* granularity,
                                                    const CUmemAllocationProp* prop, int option);
typedef CUresult (*cuMemRetainAllocationHandle_t)(CUmemGenericAllocationHandle* handle,
                                                  void* addr);
typedef CUresult (*cuMemGetAllocationPropertiesFromHandle_t)(CUmemAllocationProp* prop,
                                                             CUmemGenericAllocationHandle handle);

typedef CUresult (*cuModuleLoad_t)(CUmodule* module, const char* path);
typedef CUresult (*cuModuleLoadData_t)(CUmodule* module, const void* image);
typedef CUresult (*cuModuleUnload_t)(CUmodule module);
typedef CUresult (*cuModuleGetGlobal_t)(CUdeviceptr* dptr, size_t* bytes, CUmodule module,
                                        const char* name);
typedef CUresult (*cuModuleGetFunction_t)(CUfunction* function, CUmodule module,
                                          const char* name);
typedef CUresult (*cuLaunchKernel_t)(CUfunction function, unsigned int grid_x,
                                     unsigned int grid_y, unsigned int grid_z,
                                     unsigned int block_x, unsigned int block_y,
                                     unsigned int block_z, unsigned int shared_bytes,
                                     CUstream stream, void** params, void** extra);

typedef CUresult (*cuFuncGetAttribute_t)(int* value, int attribute, CUfunction function);
/* CUDA 12.4+: the offset and size of a kernel's parameter paramIndex;
 * CUDA_ERROR_INVALID_VALUE past the last one. */
typedef CUresult (*cuFuncGetParamInfo_t)(CUfunction function, size_t param_index,
                                         size_t* param_offset, size_t* param_size);
typedef CUresult (*cuStreamCreate_t)(CUstream* stream, unsigned int flags);
typedef CUresult (*cuStreamDestroy_t)(CUstream stream);
typedef CUresult (*cuStreamSynchronize_t)(CUstream stream);
typedef CUresult (*cuLaunchHostFunc_t)(CUstream stream, CUhostFn fn, void* user_data);
typedef CUresult (*cuEventCreate_t)(CUevent* event, unsigned int flags);
typedef CUresult (*cuEventDestroy_t)(CUevent event);
typedef CUresult (*cuEventRecord_t)(CUevent event, CUstream stream);
typedef CUresult (*cuEventSynchronize_t)(CUevent event);
typedef CUresult (*cuEventQuery_t)(CUevent event);
typedef CUresult (*cuEventElapsedTime_t)(float* milliseconds, CUevent start, CUevent end);

/* The resolved driver. Members are named after the API's plain names; the
 * symbol each one was resolved from is listed in cuda_driver.cpp. Members
 * marked optional may be NULL (an older or newer driver without them);
 * every other member is non-NULL once the driver loaded. */
typedef struct cuda_driver_t {
  cuInit_t cuInit;
  cuDriverGetVersion_t cuDriverGetVersion;
  cuGetErrorString_t cuGetErrorString;
  cuGetErrorName_t cuGetErrorName;

  cuDeviceGetCount_t cuDeviceGetCount;
  cuDeviceGet_t cuDeviceGet;
  cuDeviceGetName_t cuDeviceGetName;
  cuDeviceGetAttribute_t cuDeviceGetAttribute;
  cuDeviceTotalMem_t cuDeviceTotalMem;

  cuDevicePrimaryCtxRetain_t cuDevicePrimaryCtxRetain;
  cuDevicePrimaryCtxRelease_t cuDevicePrimaryCtxRelease;
  cuCtxSetCurrent_t cuCtxSetCurrent;
  cuCtxGetCurrent_t cuCtxGetCurrent;
  cuCtxSynchronize_t cuCtxSynchronize;

  cuMemAlloc_t cuMemAlloc;
  cuMemFree_t cuMemFree;
  cuMemGetInfo_t cuMemGetInfo;
  cuMemHostAlloc_t cuMemHostAlloc;
  cuMemFreeHost_t cuMemFreeHost;
  cuMemcpy_t cuMemcpy;
  cuMemcpyAsync_t cuMemcpyAsync;
  cuMemcpyHtoD_t cuMemcpyHtoD;
  cuMemcpyDtoH_t cuMemcpyDtoH;
  cuMemcpyDtoD_t cuMemcpyDtoD;
  cuMemsetD8_t cuMemsetD8;
  cuMemsetD32_t cuMemsetD32;
  cuPointerGetAttribute_t cuPointerGetAttribute;

  /* Virtual memory management: all optional together (a driver lacking one
   * of them has no usable VMM, and HSA-on-CUDA's vmem entries then answer
   * HSA_STATUS_ERROR); see cuda_driver_has_vmm. */
  cuMemAddressReserve_t cuMemAddressReserve;
  cuMemAddressFree_t cuMemAddressFree;
  cuMemCreate_t cuMemCreate;
  cuMemRelease_t cuMemRelease;
  cuMemMap_t cuMemMap;
  cuMemUnmap_t cuMemUnmap;
  cuMemSetAccess_t cuMemSetAccess;
  cuMemGetAccess_t cuMemGetAccess;
  cuMemGetAllocationGranularity_t cuMemGetAllocationGranularity;
  cuMemRetainAllocationHandle_t cuMemRetainAllocationHandle;
  cuMemGetAllocationPropertiesFromHandle_t cuMemGetAllocationPropertiesFromHandle;

  cuModuleLoad_t cuModuleLoad;
  cuModuleLoadData_t cuModuleLoadData;
  cuModuleUnload_t cuModuleUnload;
  cuModuleGetGlobal_t cuModuleGetGlobal;
  cuModuleGetFunction_t cuModuleGetFunction;
  cuLaunchKernel_t cuLaunchKernel;
  cuFuncGetAttribute_t cuFuncGetAttribute;
  cuFuncGetParamInfo_t cuFuncGetParamInfo; /* optional (CUDA 12.4+) */

  cuStreamCreate_t cuStreamCreate;
  cuStreamDestroy_t cuStreamDestroy;
  cuStreamSynchronize_t cuStreamSynchronize;
  cuLaunchHostFunc_t cuLaunchHostFunc; /* optional */
  cuEventCreate_t cuEventCreate;
  cuEventDestroy_t cuEventDestroy;
  cuEventRecord_t cuEventRecord;
  cuEventSynchronize_t cuEventSynchronize;
  cuEventQuery_t cuEventQuery;
  cuEventElapsedTime_t cuEventElapsedTime; /* optional */
} cuda_driver_t;

/* Whether every virtual memory management entry point resolved. */
static inline int cuda_driver_has_vmm(const cuda_driver_t* d) {
  return d != NULL && d->cuMemAddressReserve != NULL && d->cuMemAddressFree != NULL &&
         d->cuMemCreate != NULL && d->cuMemRelease != NULL && d->cuMemMap != NULL &&
         d->cuMemUnmap != NULL && d->cuMemSetAccess != NULL && d->cuMemGetAccess != NULL &&
         d->cuMemGetAllocationGranularity != NULL && d->cuMemRetainAllocationHandle != NULL &&
         d->cuMemGetAllocationPropertiesFromHandle != NULL;
}

#ifdef __cplusplus
}
#endif

#endif /* HSA_CUDA_CUDA_DRIVER_H */
