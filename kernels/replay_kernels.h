/* replay_kernels.h: the ABI of kernel-replay's device kernels — the records
 * they read, their kernel arguments, the block size and the hash — shared
 * by the kernel source (replay_kernels.cu), the software HSA runtime and
 * HSA-on-CUDA (which run or launch them), and mirrored by the library
 * (src/memory_snapshot/device/abi.rs, generated from this file by bindgen,
 * and checked against the AMD code objects' metadata).
 *
 * Plain C: every struct is 8-byte aligned with no padding, so its layout is
 * the same in C, C++, CUDA, HIP and Rust (#[repr(C)]).
 *
 * The hash: NH, UMAC's hash (Black, Halevi, Krawczyk, Krovetz, Rogaway,
 * CRYPTO 1999; RFC 4418), in two Toeplitz lanes. A block of KR_BLOCK_BYTES
 * bytes is read as KR_HASH_WORDS little-endian 32-bit words m[0..] (bytes
 * past the block's length read as zero). With KR_HASH_KEYS random 32-bit
 * keys k[], lane l (0 or 1) uses the keys from k[KR_HASH_SHIFT * l]:
 *
 *     h_l = sum_i ((m[2i] + k[2i + 4l]) mod 2^32)
 *                * ((m[2i+1] + k[2i+1 + 4l]) mod 2^32)     mod 2^64
 *
 * For two different blocks of the same length, over the random keys, one
 * lane collides with probability at most 2^-32, and the Toeplitz lanes
 * (keys shifted by four words, as RFC 4418's L1 hash shifts them) together
 * with at most 2^-64: a changed block goes unnoticed with probability at
 * most 2^-64 (the design's bound). The arithmetic is 32 x 32 -> 64-bit
 * multiplies and 64-bit adds, which a GPU does at full rate, so hashing
 * runs at memory speed; the sums of any partition of the words add up to
 * the same hash, so work-items sum their own words and add the sums.
 * The keys are drawn from the OS at the library's first use of the
 * kernels, never written anywhere a program could read them back
 * predictably. */
#ifndef KERNEL_REPLAY_KERNELS_H
#define KERNEL_REPLAY_KERNELS_H

#ifdef __cplusplus
#include <cstdint>
#else
#include <stdint.h>
#endif

/* Bytes per hashed block (one page). */
#define KR_BLOCK_BYTES 4096u
/* 32-bit words per block. */
#define KR_HASH_WORDS (KR_BLOCK_BYTES / 4u)
/* How far lane 1's keys are shifted from lane 0's, in words. */
#define KR_HASH_SHIFT 4u
/* 32-bit keys: one lane's KR_HASH_WORDS, and the shift. */
#define KR_HASH_KEYS (KR_HASH_WORDS + KR_HASH_SHIFT)
/* Work-items per workgroup for every kernel. The dispatch must use exactly
 * this size. kr_scatter_copy: one workgroup per record. */
#define KR_WORKGROUP 256u
/* kr_hash_blocks and kr_compare_copy: KR_BLOCK_ITEMS work-items per block,
 * so one workgroup takes KR_BLOCKS_PER_GROUP consecutive blocks (the grid
 * is the block count / KR_BLOCKS_PER_GROUP, rounded up). Each work-item
 * reads four 16-byte pieces of its block, all in flight at once: on an
 * H200 a 4 GiB dirty-block restore ran at 1 TB/s with one piece per
 * work-item, 2.5 TB/s with four, 2.1 TB/s with sixteen. */
#define KR_BLOCK_ITEMS 64u
#define KR_BLOCKS_PER_GROUP (KR_WORKGROUP / KR_BLOCK_ITEMS)
/* A block's work-items' partial sums are added in two steps of
 * KR_HASH_FAN_IN each (KR_BLOCK_ITEMS = KR_HASH_FAN_IN^2), in LDS: the
 * hashing kernels' LDS is 2 lanes x (KR_WORKGROUP + KR_BLOCKS_PER_GROUP x
 * KR_HASH_FAN_IN) u64 of sums, and 2 x KR_BLOCKS_PER_GROUP u64 of hashes,
 * with the blocks' addresses and lengths (see the code objects' test). */
#define KR_HASH_FAN_IN 8u
/* The largest copy record the library emits (it splits larger regions), so
 * no workgroup copies for long. */
#define KR_MAX_RECORD_BYTES (256u * 1024u)

/* kr_compare_copy flags. */
/* Hash the source (an incremental snapshot: is the live memory still what
 * the arena holds?) rather than the destination (a restore: is the live
 * memory still what was captured?). */
#define KR_COMPARE_HASH_SRC 1u
/* Store the new hash of a changed block (an incremental snapshot): the hash
 * just computed of the side hashed, so with KR_COMPARE_HASH_SRC the hash of
 * what both sides hold after the copy. */
#define KR_COMPARE_UPDATE_HASH 2u
/* Copy every block, changed or not (the first capture: no hash is known
 * yet); with KR_COMPARE_UPDATE_HASH every block's hash is stored. */
#define KR_COMPARE_FORCE_COPY 4u
/* Each pair's dst and src trade places before anything else: the library
 * keeps one array of (live, kept) pairs per snapshot, written for restore,
 * and captures through the same array with this flag. */
#define KR_COMPARE_SWAP 8u

/* In every kernel a record, block or pair of length 0 is skipped: nothing
 * is read, written, hashed or counted (the library zeroes the length of a
 * region's blocks once the region is freed). */

/* kr_scatter_copy: one copy of `size` bytes (at most KR_MAX_RECORD_BYTES). */
typedef struct kr_copy_record {
  uint64_t dst;
  uint64_t src;
  uint64_t size;
} kr_copy_record;

/* kr_hash_blocks: one block of `len` bytes (at most KR_BLOCK_BYTES). */
typedef struct kr_hash_block {
  uint64_t addr;
  uint64_t len;
} kr_hash_block;

/* kr_compare_copy: one block of `len` bytes (at most KR_BLOCK_BYTES). */
typedef struct kr_block_pair {
  uint64_t dst;
  uint64_t src;
  uint64_t len;
} kr_block_pair;

/* Kernel arguments, in the order the kernels take them (the kernarg
 * segment's layout: the kernels take exactly these fields). */
typedef struct kr_scatter_copy_args {
  const kr_copy_record* records;
  uint64_t count;
} kr_scatter_copy_args;

typedef struct kr_hash_blocks_args {
  const kr_hash_block* blocks;
  uint64_t count;
  /* KR_HASH_KEYS keys. */
  const uint32_t* keys;
  /* 2 per block: lane 0, lane 1. */
  uint64_t* hashes;
} kr_hash_blocks_args;

typedef struct kr_compare_copy_args {
  const kr_block_pair* pairs;
  uint64_t count;
  const uint32_t* keys;
  /* In: the hash each block must have; with KR_COMPARE_UPDATE_HASH, out:
   * the new hash of each changed block. */
  uint64_t* hashes;
  /* Incremented once per block copied. */
  uint64_t* changed;
  uint32_t flags;
  uint32_t reserved;
} kr_compare_copy_args;

/* Host execution, for the software HSA runtime: replay_kernels.cu compiled
 * as plain C++ (KR_HOST defined) runs one dispatch of `kernel` (the kernel's
 * symbol name without ".kd") on the CPU over `workgroups` workgroups of
 * KR_WORKGROUP work-items, reading the arguments from `kernarg`. The same
 * source as the device builds; only the thread indexing differs. Returns 0,
 * or -1 for a kernel name it does not know. */
#ifdef __cplusplus
extern "C" {
#endif
int kr_host_dispatch(const char* kernel, const void* kernarg, uint32_t workgroups);
#ifdef __cplusplus
}
#endif

#endif /* KERNEL_REPLAY_KERNELS_H */
