/* kernels_host_shim.h: lets gpu/kernels.cu compile as ordinary host C++ for
 * the fake driver (g++ -include kernels_host_shim.h -x c++ kernels.cu).
 *
 * The CUDA qualifiers become nothing, the built-in index variables become
 * thread-local variables the fake cuLaunchKernel sets while it runs every
 * thread of the grid one after the other, and atomicAdd is a plain add (one
 * host thread runs a launch). Only what kernels.cu uses is here. */
#ifndef KR_FAKE_CUDA_KERNELS_HOST_SHIM_H
#define KR_FAKE_CUDA_KERNELS_HOST_SHIM_H

#define __global__
#define __device__
#define __constant__
#define __host__
#define __forceinline__ inline

struct fake_dim3 {
  unsigned int x, y, z;
};

extern thread_local fake_dim3 threadIdx;
extern thread_local fake_dim3 blockIdx;
extern thread_local fake_dim3 blockDim;
extern thread_local fake_dim3 gridDim;

inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
  const unsigned long long old = *address;
  *address = old + value;
  return old;
}

#endif /* KR_FAKE_CUDA_KERNELS_HOST_SHIM_H */
