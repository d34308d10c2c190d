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
 * KR_WORKGROUP by contract and the grid is one workgroup per record (or
 * per KR_BLOCKS_PER_GROUP blocks), so the
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
/* always_inline: kr_hash_group takes pointers to the kernels' LDS arrays;
 * inlined, the compiler sees they are LDS, while a call would pass flat
 * pointers whose LDS aperture the kernel then reads from hidden kernel
 * arguments, which this kernarg layout has none of (the code objects' test
 * checks that). */
#define KR_DEVICE static __attribute__((device, always_inline)) inline
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

/* Work-item t's share (of n work-items) of copying `size` bytes, for dst
 * and src that have the same address modulo sizeof(U): up to sizeof(U) - 1
 * head bytes one per work-item until dst is aligned, then U-sized units
 * strided over the n work-items (adjacent work-items, adjacent units:
 * coalesced), then the tail bytes. Each end has fewer than sizeof(U) <= 16
 * <= n bytes, so one byte per work-item covers it. */
template <typename U>
KR_DEVICE void kr_copy_units(uint8_t* dst, const uint8_t* src, uint64_t size, uint32_t t,
                             uint32_t n) {
  uint64_t head = (sizeof(U) - (uintptr_t)dst % sizeof(U)) % sizeof(U);
  if (head > size) head = size;
  if (t < head) dst[t] = src[t];
  const uint64_t units = (size - head) / sizeof(U);
  uint8_t* d = dst + head;
  const uint8_t* s = src + head;
  for (uint64_t i = t; i < units; i += n)
    kr_store<U>(d + i * sizeof(U), kr_load<U>(s + i * sizeof(U)));
  const uint64_t done = head + units * sizeof(U);
  if (t < size - done) dst[done + t] = src[done + t];
}

/* Work-item t's share (of n) of copying `size` bytes from src to dst (not
 * overlapping), with the widest unit both addresses allow. */
KR_DEVICE void kr_copy_share(uint8_t* dst, const uint8_t* src, uint64_t size, uint32_t t,
                             uint32_t n) {
  const uintptr_t skew = (uintptr_t)dst ^ (uintptr_t)src;
  if (skew % 16 == 0)
    kr_copy_units<kr_u128>(dst, src, size, t, n);
  else if (skew % 8 == 0)
    kr_copy_units<uint64_t>(dst, src, size, t, n);
  else if (skew % 4 == 0)
    kr_copy_units<uint32_t>(dst, src, size, t, n);
  else
    kr_copy_units<uint8_t>(dst, src, size, t, n);
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

/* 16-byte pieces per work-item of a block: 4, at piece k * KR_BLOCK_ITEMS
 * + u for the block's work-item u, so each load is coalesced across the
 * block's work-items and all are in flight at once. */
#define KR_PIECES (KR_BLOCK_BYTES / 16 / KR_BLOCK_ITEMS)

/* The hashes of the workgroup's KR_BLOCKS_PER_GROUP blocks: block b is the
 * len[b] bytes (clamped to KR_BLOCK_BYTES; 0: skipped, no memory read) at
 * addr[b]; both lanes go to h0[b], h1[b]. addr, len, h0, h1 are in shared
 * memory. Called by the whole workgroup. Block b's work-items (t /
 * KR_BLOCK_ITEMS == b) each sum the NH terms of their 16 words; the 64
 * partial sums per lane are added by 8 work-items, 8 each, then by one.
 * Ends with a barrier: every work-item has finished reading the blocks and
 * sees every hash, so the caller may write the blocks afterwards. */
KR_DEVICE void kr_hash_group(const uint64_t* addr, const uint64_t* len, const uint32_t* keys,
                             uint64_t* h0, uint64_t* h1) {
  KR_SHARED uint64_t item0[KR_WORKGROUP];
  KR_SHARED uint64_t item1[KR_WORKGROUP];
  KR_SHARED uint64_t part0[KR_BLOCKS_PER_GROUP * KR_HASH_FAN_IN];
  KR_SHARED uint64_t part1[KR_BLOCKS_PER_GROUP * KR_HASH_FAN_IN];

  KR_FOR_ITEMS(t) {
    const uint32_t b = t / KR_BLOCK_ITEMS;
    const uint32_t u = t % KR_BLOCK_ITEMS;
    const uint64_t n = len[b] < KR_BLOCK_BYTES ? len[b] : KR_BLOCK_BYTES;
    uint64_t s0 = 0, s1 = 0;
    if (n != 0) {
      const uint8_t* p = kr_ptr(addr[b]);
      uint32_t m[KR_PIECES][4];
      if (n == KR_BLOCK_BYTES && (uintptr_t)p % 16 == 0) {
        kr_u128 v[KR_PIECES];
        for (uint32_t k = 0; k < KR_PIECES; ++k)
          v[k] = kr_load<kr_u128>(p + 16ull * (k * KR_BLOCK_ITEMS + u));
        for (uint32_t k = 0; k < KR_PIECES; ++k) {
          m[k][0] = (uint32_t)v[k].lo;
          m[k][1] = (uint32_t)(v[k].lo >> 32);
          m[k][2] = (uint32_t)v[k].hi;
          m[k][3] = (uint32_t)(v[k].hi >> 32);
        }
      } else {
        for (uint32_t k = 0; k < KR_PIECES; ++k)
          for (uint32_t j = 0; j < 4; ++j) m[k][j] = kr_block_word(p, n, 4 * (k * KR_BLOCK_ITEMS + u) + j);
      }
      for (uint32_t k = 0; k < KR_PIECES; ++k) {
        const uint32_t* k0 = keys + 4 * (k * KR_BLOCK_ITEMS + u);
        const uint32_t* k1 = k0 + KR_HASH_SHIFT;
        s0 += kr_nh(m[k][0], k0[0], m[k][1], k0[1]) + kr_nh(m[k][2], k0[2], m[k][3], k0[3]);
        s1 += kr_nh(m[k][0], k1[0], m[k][1], k1[1]) + kr_nh(m[k][2], k1[2], m[k][3], k1[3]);
      }
    }
    item0[t] = s0;
    item1[t] = s1;
  }
  KR_SYNC();
  KR_FOR_ITEMS(t) {
    const uint32_t b = t / KR_BLOCK_ITEMS;
    const uint32_t u = t % KR_BLOCK_ITEMS;
    if (u < KR_HASH_FAN_IN) {
      uint64_t s0 = 0, s1 = 0;
      for (uint32_t j = 0; j < KR_HASH_FAN_IN; ++j) {
        s0 += item0[b * KR_BLOCK_ITEMS + u * KR_HASH_FAN_IN + j];
        s1 += item1[b * KR_BLOCK_ITEMS + u * KR_HASH_FAN_IN + j];
      }
      part0[b * KR_HASH_FAN_IN + u] = s0;
      part1[b * KR_HASH_FAN_IN + u] = s1;
    }
  }
  KR_SYNC();
  KR_FOR_ITEMS(t) {
    if (t < KR_BLOCKS_PER_GROUP) {
      uint64_t s0 = 0, s1 = 0;
      for (uint32_t j = 0; j < KR_HASH_FAN_IN; ++j) {
        s0 += part0[t * KR_HASH_FAN_IN + j];
        s1 += part1[t * KR_HASH_FAN_IN + j];
      }
      h0[t] = s0;
      h1[t] = s1;
    }
  }
  KR_SYNC();
}

/* ---- the kernels ------------------------------------------------------- */

/* One workgroup per record: copy records[i].size bytes. */
KR_KERNEL(kr_scatter_copy, kr_scatter_copy_args, a) {
  const uint64_t i = KR_GROUP_ID();
  if (i >= a.count) return;
  const kr_copy_record r = a.records[i];
  if (r.size == 0) return;
  KR_FOR_ITEMS(t) { kr_copy_share(kr_ptr(r.dst), kr_ptr(r.src), r.size, t, KR_WORKGROUP); }
}

/* KR_BLOCKS_PER_GROUP blocks per workgroup: hashes[2i], hashes[2i + 1] =
 * block i's two lanes; a block of length 0 (or past count) is skipped, its
 * hash left as it was. A block longer than KR_BLOCK_BYTES (outside the
 * contract) is hashed over its first KR_BLOCK_BYTES only: there are no
 * keys past them. */
KR_KERNEL(kr_hash_blocks, kr_hash_blocks_args, a) {
  KR_SHARED uint64_t addr[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t len[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t h0[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t h1[KR_BLOCKS_PER_GROUP];
  const uint64_t first = (uint64_t)KR_GROUP_ID() * KR_BLOCKS_PER_GROUP;
  KR_FOR_ITEMS(t) {
    if (t < KR_BLOCKS_PER_GROUP) {
      const bool in = first + t < a.count;
      addr[t] = in ? a.blocks[first + t].addr : 0;
      len[t] = in ? a.blocks[first + t].len : 0;
    }
  }
  KR_SYNC();
  kr_hash_group(addr, len, a.keys, h0, h1);
  KR_FOR_ITEMS(t) {
    if (t < KR_BLOCKS_PER_GROUP && len[t] != 0) {
      a.hashes[2 * (first + t)] = h0[t];
      a.hashes[2 * (first + t) + 1] = h1[t];
    }
  }
}

/* KR_BLOCKS_PER_GROUP pairs per workgroup; for each (after KR_COMPARE_SWAP
 * trades its sides): hash dst (or src, KR_COMPARE_HASH_SRC); when it
 * differs from hashes[2i..2i+1], or always with KR_COMPARE_FORCE_COPY,
 * copy src to dst, count the block, and with KR_COMPARE_UPDATE_HASH store
 * the hash just computed (with KR_COMPARE_HASH_SRC, that of the content
 * both sides now hold). A pair of length 0 (or past count) is skipped.
 * Blocks are clamped to KR_BLOCK_BYTES, for the hash and the copy alike. */
KR_KERNEL(kr_compare_copy, kr_compare_copy_args, a) {
  KR_SHARED uint64_t dst[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t src[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t len[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t want0[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t want1[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t h0[KR_BLOCKS_PER_GROUP];
  KR_SHARED uint64_t h1[KR_BLOCKS_PER_GROUP];
  const uint64_t first = (uint64_t)KR_GROUP_ID() * KR_BLOCKS_PER_GROUP;
  const bool swap = (a.flags & KR_COMPARE_SWAP) != 0;
  const bool hash_src = (a.flags & KR_COMPARE_HASH_SRC) != 0;
  const bool force = (a.flags & KR_COMPARE_FORCE_COPY) != 0;
  const bool update = (a.flags & KR_COMPARE_UPDATE_HASH) != 0;
  /* The pairs and the hashes they must have, read once per block before
   * anything is written (the hashes may be overwritten below). */
  KR_FOR_ITEMS(t) {
    if (t < KR_BLOCKS_PER_GROUP) {
      const uint64_t i = first + t;
      kr_block_pair given = {0, 0, 0};
      if (i < a.count) given = a.pairs[i];
      dst[t] = swap ? given.src : given.dst;
      src[t] = swap ? given.dst : given.src;
      len[t] = given.len < KR_BLOCK_BYTES ? given.len : KR_BLOCK_BYTES;
      want0[t] = len[t] != 0 ? a.hashes[2 * i] : 0;
      want1[t] = len[t] != 0 ? a.hashes[2 * i + 1] : 0;
    }
  }
  KR_SYNC();
  kr_hash_group(hash_src ? src : dst, len, a.keys, h0, h1);
  /* kr_hash_group's last barrier is behind every work-item's reads of the
   * blocks, so writing dst now cannot change what another one hashed. */
  KR_FOR_ITEMS(t) {
    const uint32_t b = t / KR_BLOCK_ITEMS;
    const uint32_t u = t % KR_BLOCK_ITEMS;
    if (len[b] == 0) continue;
    if (!force && h0[b] == want0[b] && h1[b] == want1[b]) continue;
    kr_copy_share(kr_ptr(dst[b]), kr_ptr(src[b]), len[b], u, KR_BLOCK_ITEMS);
    if (u == 0) {
      kr_count_one(a.changed);
      if (update) {
        a.hashes[2 * (first + b)] = h0[b];
        a.hashes[2 * (first + b) + 1] = h1[b];
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
