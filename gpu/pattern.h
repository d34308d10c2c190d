/* pattern.h: the data patterns the GPU tests write and verify, shared by the
 * CUDA kernels (gpu/kernels.cu, compiled by nvcc) and the host programs
 * (g++), so a value computed on either side is bit-identical on the other.
 *
 * kr_pattern(seed, i) is a 32-bit mix of the element index and a seed (a
 * different seed gives an unrelated buffer); kr_mutate is the in-place
 * change the "kernel under replay" applies: a bijection with no practical
 * fixed points (v * m + s == v has no solution for an even m - 1 and an odd
 * s), so a mutated buffer differs from its pattern in every element. */
#ifndef KR_GPU_PATTERN_H
#define KR_GPU_PATTERN_H

#ifdef __CUDACC__
#define KR_PATTERN_FN __host__ __device__ __forceinline__
#else
#define KR_PATTERN_FN inline
#endif

KR_PATTERN_FN unsigned int kr_pattern(unsigned int seed, unsigned long long index) {
  unsigned int x = (static_cast<unsigned int>(index) * 0x9E3779B1u) ^
                   (static_cast<unsigned int>(index >> 32) * 0x85EBCA77u) ^ seed;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}

KR_PATTERN_FN unsigned int kr_mutate(unsigned int value, unsigned int salt) {
  return value * 0x2545F491u + (salt | 1u);
}

#endif /* KR_GPU_PATTERN_H */
