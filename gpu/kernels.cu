// kernels.cu: the device code of the GPU harness, compiled on the GPU machine
// by gpu/run.sh (nvcc -cubin -arch=sm_90) and loaded at run time with
// cuModuleLoad through the HSA-on-CUDA runtime, one module per GPU.
//
// Kernels are extern "C" so cuModuleGetFunction finds them by their plain
// names; the module-scope variables are at global namespace scope, where
// C++ does not mangle variable names, so cuModuleGetGlobal finds
// "pass_counter" and "const_table". Every kernel uses a grid-stride loop, so
// any launch size covers any element count.

#include "pattern.h"

// A __device__ variable the replayed kernel mutates: a pass must see it at 0.
__device__ unsigned long long pass_counter;

// A __constant__ table the host writes before the replay window; the
// snapshot must capture it (it lives in the module, not in any allocation).
__constant__ unsigned int const_table[256];

namespace {

__device__ __forceinline__ unsigned long long first_index() {
  return static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long grid_stride() {
  return static_cast<unsigned long long>(gridDim.x) * blockDim.x;
}

}  // namespace

// y = a * x + y, in place: each pass changes the next pass's input.
extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* y,
                                 unsigned long long n) {
  for (unsigned long long i = first_index(); i < n; i += grid_stride()) y[i] = a * x[i] + y[i];
}

// Reports the counter as this launch found it, then bumps it. One thread:
// the point is the value at entry, not throughput.
extern "C" __global__ void bump_pass_counter(unsigned long long* observed) {
  if (first_index() == 0) {
    *observed = pass_counter;
    pass_counter = pass_counter + 1;
  }
}

// Copies the constant table out, so the host sees what kernels see.
extern "C" __global__ void read_const_table(unsigned int* out, unsigned int count) {
  for (unsigned long long i = first_index(); i < count; i += grid_stride()) {
    out[i] = const_table[i];
  }
}

// p[i] = kr_pattern(seed, i)
extern "C" __global__ void fill_pattern(unsigned int* p, unsigned long long n, unsigned int seed) {
  for (unsigned long long i = first_index(); i < n; i += grid_stride()) p[i] = kr_pattern(seed, i);
}

// p[i] = kr_mutate(p[i], salt): the in-place write of the "kernel under replay".
extern "C" __global__ void mutate(unsigned int* p, unsigned long long n, unsigned int salt) {
  for (unsigned long long i = first_index(); i < n; i += grid_stride()) p[i] = kr_mutate(p[i], salt);
}

// Counts the elements that differ from kr_pattern(seed, i) (mutated == 0) or
// from kr_mutate(kr_pattern(seed, i), salt) (mutated != 0) into *mismatches,
// which the caller zeroes. One atomic per thread that found any.
extern "C" __global__ void count_mismatches(const unsigned int* p, unsigned long long n,
                                            unsigned int seed, unsigned int mutated,
                                            unsigned int salt, unsigned long long* mismatches) {
  unsigned long long local = 0;
  for (unsigned long long i = first_index(); i < n; i += grid_stride()) {
    unsigned int expected = kr_pattern(seed, i);
    if (mutated != 0) expected = kr_mutate(expected, salt);
    local += p[i] != expected ? 1ull : 0ull;
  }
  if (local != 0) atomicAdd(mismatches, local);
}

// Mutates (kr_mutate) every stride-th block of block_words words, from block
// `first`, of a buffer of `blocks` blocks: the bench's scattered 1% writes.
extern "C" __global__ void mutate_blocks(unsigned int* p, unsigned long long blocks,
                                         unsigned long long first, unsigned long long stride,
                                         unsigned int block_words, unsigned int salt) {
  const unsigned long long selected = blocks > first ? (blocks - first + stride - 1) / stride : 0;
  for (unsigned long long i = first_index(); i < selected * block_words; i += grid_stride()) {
    const unsigned long long word = (first + (i / block_words) * stride) * block_words + i % block_words;
    p[word] = kr_mutate(p[word], salt);
  }
}
