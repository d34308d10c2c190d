/* replay_kernels.cu: kernel-replay's device kernels — scatter copy, block
 * hashing and compare-and-copy of changed blocks — the one source of every
 * build (replay_kernels.h holds their ABI and says what each computes):
 *
 *   AMD GPUs (the library's build script, one code object per target):
 *     clang -x hip --cuda-device-only --no-gpu-bundle-output -nogpuinc
 *       -nogpulib -O3 --offload-arch=gfx942 -o replay_kernels.hsaco
 *   NVIDIA GPUs (HSA-on-CUDA): nvcc -cubin -arch=sm_90 replay_kernels.cu
 *   the CPU (the software HSA runtime, and the library's tests):
 *     c++ -DKR_HOST -x c++ -c replay_kernels.cu   (kr_host_dispatch)
 *
 * How one source serves all three. A kernel is written as phases separated
 * by workgroup barriers. KR_FOR_ITEMS(t) { ... } is one phase: on a GPU the
 * body runs once, in each work-item, with t its index in the workgroup; on
 * the CPU it is a loop over the KR_WORKGROUP work-items, and KR_SYNC() is
 * nothing, because the loop has finished every work-item's phase before the
 * next starts. So:
 *   - a value that lives across phases is either uniform (the same in every
 *     work-item, computed outside KR_FOR_ITEMS: on the CPU it exists once per
 *     workgroup) or kept in a KR_SHARED array indexed by the work-item;
 *   - code with KR_FOR_ITEMS runs uniformly (every work-item or none), and a
 *     `return` is taken only on a uniform condition;
 *   - inside KR_FOR_ITEMS, `continue` ends this work-item's phase in both
 *     builds; `break` and `return` do not mean the same and are not used.
 *
 * The kernels never read blockDim or gridDim: the workgroup size is
 * KR_WORKGROUP by contract and the grid is one workgroup per record, so the
 * code objects need no hidden kernel arguments and the kernarg segment is
 * exactly the argument struct (checked against the code objects' metadata by
 * the library's tests). */

#include "replay_kernels.h"

/* ---- the three builds --------------------------------------------------
 *
 * KR_KERNEL(name, Args, a)  a kernel taking its argument struct by value
 * KR_DEVICE                 a function the kernels call
 * KR_SHARED                 workgroup-shared storage (LDS)
 * KR_SYNC()                 workgroup barrier, with workgroup-scope fences
 * KR_GROUP_ID()             the workgroup's index in the grid: the record
 * KR_FOR_ITEMS(t)           one phase, for work-item t (above)
 * kr_count_one(p)           atomically *p += 1, visible beyond the device
 *                           (the counter may live in host memory) */
#if defined(KR_HOST)

#include <cstring>

/* The workgroup index is the kernel's second parameter, given by
 * kr_host_dispatch's loop. */
#define KR_KERNEL(name, Args, a) static void name(Args a, uint32_t kr_group_id)
#define KR_DEVICE static inline
/* Automatic storage: each call runs one workgroup, and concurrent calls
 * (several simulated queues) each have their own. */
#define KR_SHARED
#define KR_SYNC() ((void)0)
#define KR_GROUP_ID() kr_group_id
#define KR_FOR_ITEMS(t) for (uint32_t t = 0; t < KR_WORKGROUP; ++t)

static inline void kr_count_one(uint64_t* p) { __atomic_fetch_add(p, 1, __ATOMIC_RELAXED); }

/* Memory the kernels read and write is raw bytes the caller owns; memcpy
 * keeps the host build free of type-punning (it compiles to plain loads and
 * stores). */
template <typename T>
static inline T kr_load(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
static inline void kr_store(void* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

#elif defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN__)

/* clang's HIP without the HIP headers (-nogpuinc): the attributes the
 * headers would spell __global__, __device__, __shared__ and
 * __launch_bounds__, and the builtins their indexing and __syncthreads use.
 * extern "C": the code object's symbols are the plain names plus ".kd".
 * amdgpu_flat_work_group_size(N, N): every dispatch uses exactly N
 * work-items, which the metadata records and the register allocation uses. */
#define KR_KERNEL(name, Args, a)                                                       \
  extern "C" __attribute__((global, amdgpu_flat_work_group_size(KR_WORKGROUP, KR_WORKGROUP))) \
  void name(Args a)
#define KR_DEVICE static __attribute__((device)) inline
#define KR_SHARED __attribute__((shared))
#define KR_SYNC()                                          \
  do {                                                     \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); \
    __builtin_amdgcn_s_barrier();                          \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); \
  } while (0)
#define KR_GROUP_ID() __builtin_amdgcn_workgroup_id_x()
#define KR_FOR_ITEMS(t) \
  for (uint32_t t = __builtin_amdgcn_workitem_id_x(), kr_once = 1; kr_once; kr_once = 0)

KR_DEVICE void kr_count_one(uint64_t* p) {
  __hip_atomic_fetch_add(p, (uint64_t)1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
template <typename T>
KR_DEVICE T kr_load(const void* p) {
  return *(const T*)p;
}
template <typename T>
KR_DEVICE void kr_store(void* p, T v) {
  *(T*)p = v;
}

#elif defined(__CUDACC__) || defined(__CUDA__)

/* CUDA: nvcc (both its passes), or clang's CUDA. */
#define KR_KERNEL(name, Args, a) \
  extern "C" __global__ void __launch_bounds__(KR_WORKGROUP) name(Args a)
#define KR_DEVICE static __device__ __forceinline__
#define KR_SHARED __shared__
#define KR_SYNC() __syncthreads()
#define KR_FOR_ITEMS(t) for (uint32_t t = threadIdx.x, kr_once = 1; kr_once; kr_once = 0)
#define KR_GROUP_ID() blockIdx.x

#if !defined(__CUDACC__)
/* clang's CUDA without a CUDA installation (-nocudainc), only to check this
 * file where nvcc is not installed: the few names the CUDA headers would
 * declare, from clang's NVPTX builtins. */
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline))
#define __launch_bounds__(n) __attribute__((launch_bounds(n)))
#undef KR_FOR_ITEMS
#undef KR_GROUP_ID
#define KR_FOR_ITEMS(t) \
  for (uint32_t t = __nvvm_read_ptx_sreg_tid_x(), kr_once = 1; kr_once; kr_once = 0)
#define KR_GROUP_ID() ((uint32_t)__nvvm_read_ptx_sreg_ctaid_x())
#define atomicAdd(p, v) __nvvm_atom_add_gen_ll((long long*)(p), (long long)(v))
#endif

KR_DEVICE void kr_count_one(uint64_t* p) {
  /* Device-wide atomics reach host-mapped memory as well on the GPUs the
   * harness runs on (sm_70 and later). */
  atomicAdd((unsigned long long*)p, 1ull);
}
template <typename T>
KR_DEVICE T kr_load(const void* p) {
  return *(const T*)p;
}
template <typename T>
KR_DEVICE void kr_store(void* p, T v) {
  *(T*)p = v;
}

#else
#error "replay_kernels.cu: build with KR_HOST, as HIP for amdgcn, or as CUDA"
#endif

/* ---- copies ------------------------------------------------------------ */

/* The widest access: 16 bytes, one global_load_dwordx4 / ld.v2.u64. */
struct alignas(16) kr_u128 {
  uint64_t lo, hi;
};

KR_DEVICE uint8_t* kr_ptr(uint64_t address) { return (uint8_t*)(uintptr_t)address; }

/* Work-item t's share of copying `size` bytes, for dst and src that have the
 * same address modulo sizeof(U): up to sizeof(U) - 1 head bytes one per
 * work-item until dst is aligned, then U-sized units strided over the
 * workgroup (adjacent work-items, adjacent units: coalesced), then the tail
 * bytes. sizeof(U) <= 16 < KR_WORKGROUP, so one byte per work-item covers
 * each end. */
template <typename U>
KR_DEVICE void kr_copy_units(uint8_t* dst, const uint8_t* src, uint64_t size, uint32_t t) {
  uint64_t head = (sizeof(U) - (uintptr_t)dst % sizeof(U)) % sizeof(U);
  if (head > size) head = size;
  if (t < head) dst[t] = src[t];
  const uint64_t units = (size - head) / sizeof(U);
  uint8_t* d = dst + head;
  const uint8_t* s = src + head;
  for (uint64_t i = t; i < units; i += KR_WORKGROUP)
    kr_store<U>(d + i * sizeof(U), kr_load<U>(s + i * sizeof(U)));
  const uint64_t done = head + units * sizeof(U);
  if (t < size - done) dst[done + t] = src[done + t];
}

/* Work-item t's share of copying `size` bytes from src to dst (not
 * overlapping), with the widest unit both addresses allow. */
KR_DEVICE void kr_copy_share(uint8_t* dst, const uint8_t* src, uint64_t size, uint32_t t) {
  const uintptr_t skew = (uintptr_t)dst ^ (uintptr_t)src;
  if (skew % 16 == 0)
    kr_copy_units<kr_u128>(dst, src, size, t);
  else if (skew % 8 == 0)
    kr_copy_units<uint64_t>(dst, src, size, t);
  else if (skew % 4 == 0)
    kr_copy_units<uint32_t>(dst, src, size, t);
  else
    kr_copy_units<uint8_t>(dst, src, size, t);
}

/* ---- the hash (replay_kernels.h) --------------------------------------- */

/* Word w of a block of `len` bytes at p, little-endian, bytes past the end
 * reading as zero; a full word at an aligned address is one load. */
KR_DEVICE uint32_t kr_block_word(const uint8_t* p, uint64_t len, uint32_t w) {
  const uint64_t at = 4ull * w;
  if (at + 4 <= len && (uintptr_t)p % 4 == 0) return kr_load<uint32_t>(p + at);
  uint32_t m = 0;
  for (uint32_t b = 0; b < 4; ++b)
    if (at + b < len) m |= (uint32_t)p[at + b] << (8 * b);
  return m;
}

/* One NH term: (a + ka mod 2^32) * (b + kb mod 2^32), exact in 64 bits. */
KR_DEVICE uint64_t kr_nh(uint32_t a, uint32_t ka, uint32_t b, uint32_t kb) {
  return (uint64_t)(uint32_t)(a + ka) * (uint64_t)(uint32_t)(b + kb);
}

/* Both lanes of one block's hash. */
struct kr_hash_pair {
  uint64_t lane0, lane1;
};

/* Words per work-item: 4, so a whole aligned block is one 16-byte load
 * each, adjacent work-items reading adjacent bytes (coalesced). */
#define KR_WORDS_PER_ITEM (KR_HASH_WORDS / KR_WORKGROUP)

/* The hash of the block of `len` (<= KR_BLOCK_BYTES) bytes at p, called by
 * the whole workgroup; every work-item gets the result. Work-item t hashes
 * words 4t..4t+3 (two NH terms per lane, keys 4t.. and 4t+4..); the 256
 * partial sums per lane are added by 16 work-items, 16 each, and every
 * work-item then adds those 16 itself: two barriers per block. Every
 * work-item has finished reading the block once the first barrier is
 * passed, so the caller may write the block afterwards. */
KR_DEVICE kr_hash_pair kr_block_hash(const uint8_t* p, uint64_t len, const uint32_t* keys) {
  KR_SHARED uint64_t item0[KR_WORKGROUP];
  KR_SHARED uint64_t item1[KR_WORKGROUP];
  KR_SHARED uint64_t group0[KR_HASH_FAN_IN];
  KR_SHARED uint64_t group1[KR_HASH_FAN_IN];
  const bool whole = len == KR_BLOCK_BYTES && (uintptr_t)p % 16 == 0;

  KR_FOR_ITEMS(t) {
    const uint32_t first = t * KR_WORDS_PER_ITEM;
    uint32_t m[KR_WORDS_PER_ITEM];
    if (whole) {
      const kr_u128 v = kr_load<kr_u128>(p + 16ull * t);
      m[0] = (uint32_t)v.lo;
      m[1] = (uint32_t)(v.lo >> 32);
      m[2] = (uint32_t)v.hi;
      m[3] = (uint32_t)(v.hi >> 32);
    } else {
      for (uint32_t j = 0; j < KR_WORDS_PER_ITEM; ++j) m[j] = kr_block_word(p, len, first + j);
    }
    const uint32_t* k = keys + first;
    const uint32_t* k1 = k + KR_HASH_SHIFT;
    item0[t] = kr_nh(m[0], k[0], m[1], k[1]) + kr_nh(m[2], k[2], m[3], k[3]);
    item1[t] = kr_nh(m[0], k1[0], m[1], k1[1]) + kr_nh(m[2], k1[2], m[3], k1[3]);
  }
  KR_SYNC();
  KR_FOR_ITEMS(t) {
    if (t < KR_HASH_FAN_IN) {
      uint64_t s0 = 0, s1 = 0;
      for (uint32_t j = 0; j < KR_HASH_FAN_IN; ++j) {
        s0 += item0[t * KR_HASH_FAN_IN + j];
        s1 += item1[t * KR_HASH_FAN_IN + j];
      }
      group0[t] = s0;
      group1[t] = s1;
    }
  }
  KR_SYNC();
  /* Uniform: every work-item adds the same 16 values. */
  kr_hash_pair h = {0, 0};
  for (uint32_t j = 0; j < KR_HASH_FAN_IN; ++j) {
    h.lane0 += group0[j];
    h.lane1 += group1[j];
  }
  return h;
}

/* ---- the kernels ------------------------------------------------------- */

/* One workgroup per record: copy records[i].size bytes. */
KR_KERNEL(kr_scatter_copy, kr_scatter_copy_args, a) {
  const uint64_t i = KR_GROUP_ID();
  if (i >= a.count) return;
  const kr_copy_record r = a.records[i];
  if (r.size == 0) return;
  KR_FOR_ITEMS(t) { kr_copy_share(kr_ptr(r.dst), kr_ptr(r.src), r.size, t); }
}

/* One workgroup per block: hashes[2i], hashes[2i + 1] = its two lanes. A
 * block longer than KR_BLOCK_BYTES (outside the contract) is hashed over
 * its first KR_BLOCK_BYTES only: there are no keys past them. */
KR_KERNEL(kr_hash_blocks, kr_hash_blocks_args, a) {
  const uint64_t i = KR_GROUP_ID();
  if (i >= a.count) return;
  const kr_hash_block b = a.blocks[i];
  if (b.len == 0) return; /* uniform: skipped, its hash left as it was */
  const uint64_t len = b.len < KR_BLOCK_BYTES ? b.len : KR_BLOCK_BYTES;
  const kr_hash_pair h = kr_block_hash(kr_ptr(b.addr), len, a.keys);
  KR_FOR_ITEMS(t) {
    if (t == 0) {
      a.hashes[2 * i] = h.lane0;
      a.hashes[2 * i + 1] = h.lane1;
    }
  }
}

/* One workgroup per pair (after KR_COMPARE_SWAP trades its sides): hash
 * dst (or src, KR_COMPARE_HASH_SRC); when it differs from
 * hashes[2i..2i+1], or always with KR_COMPARE_FORCE_COPY, copy src to dst,
 * count the block, and with KR_COMPARE_UPDATE_HASH store the hash just
 * computed (with KR_COMPARE_HASH_SRC, that of the content both sides now
 * hold). A pair of length 0 is skipped. Blocks are clamped to
 * KR_BLOCK_BYTES, for the hash and the copy alike. */
KR_KERNEL(kr_compare_copy, kr_compare_copy_args, a) {
  const uint64_t i = KR_GROUP_ID();
  if (i >= a.count) return;
  const kr_block_pair given = a.pairs[i];
  if (given.len == 0) return; /* uniform: a freed region's block */
  const bool swap = (a.flags & KR_COMPARE_SWAP) != 0;
  const uint64_t dst = swap ? given.src : given.dst;
  const uint64_t src = swap ? given.dst : given.src;
  const uint64_t len = given.len < KR_BLOCK_BYTES ? given.len : KR_BLOCK_BYTES;
  /* Read before the hash's barriers: work-item 0 may overwrite them below,
   * and every work-item must decide on the value it had. */
  const uint64_t want0 = a.hashes[2 * i];
  const uint64_t want1 = a.hashes[2 * i + 1];
  const bool hash_src = (a.flags & KR_COMPARE_HASH_SRC) != 0;
  const bool force = (a.flags & KR_COMPARE_FORCE_COPY) != 0;
  const kr_hash_pair h = kr_block_hash(kr_ptr(hash_src ? src : dst), len, a.keys);
  /* Uniform: the same hash and flags in every work-item. */
  if (!force && h.lane0 == want0 && h.lane1 == want1) return;
  /* The hash's barriers are behind every work-item's reads of the block, so
   * writing dst now cannot change what another work-item hashed. */
  KR_FOR_ITEMS(t) {
    kr_copy_share(kr_ptr(dst), kr_ptr(src), len, t);
    if (t == 0) {
      kr_count_one(a.changed);
      if (a.flags & KR_COMPARE_UPDATE_HASH) {
        a.hashes[2 * i] = h.lane0;
        a.hashes[2 * i + 1] = h.lane1;
      }
    }
  }
}

/* ---- host dispatch ----------------------------------------------------- */

#if defined(KR_HOST)
/* Runs each kernel's workgroups one after another; the arguments are copied
 * out of the kernarg bytes (which need not be aligned). */
template <typename Args>
static void kr_run(void (*kernel)(Args, uint32_t), const void* kernarg, uint32_t workgroups) {
  Args a;
  std::memcpy(&a, kernarg, sizeof a);
  for (uint32_t g = 0; g < workgroups; ++g) kernel(a, g);
}

extern "C" int kr_host_dispatch(const char* kernel, const void* kernarg, uint32_t workgroups) {
  if (kernel == nullptr || kernarg == nullptr) return -1;
  if (std::strcmp(kernel, "kr_scatter_copy") == 0)
    kr_run(kr_scatter_copy, kernarg, workgroups);
  else if (std::strcmp(kernel, "kr_hash_blocks") == 0)
    kr_run(kr_hash_blocks, kernarg, workgroups);
  else if (std::strcmp(kernel, "kr_compare_copy") == 0)
    kr_run(kr_compare_copy, kernarg, workgroups);
  else
    return -1;
  return 0;
}
#endif
