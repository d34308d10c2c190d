// kr_host_standin.cpp: TEMPORARY. A stand-in for kr_host_dispatch until
// kernels/replay_kernels.cu (branch `kernels`) is merged; the builds compile
// it only while that file does not exist, and it goes once it does. It runs
// the three kernels as kernels/replay_kernels.h describes them, one record
// or block per workgroup.

#include <cstring>

#include "../../kernels/replay_kernels.h"

namespace {

constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;

// (a * b) mod p for a < p, b < 2^32, without 128-bit types: split a.
uint64_t mul_mod(uint64_t a, uint64_t b) {
  const uint64_t low = (a & 0xffffffffu) * b % kPrime;
  uint64_t high = ((a >> 32) * b) % kPrime;  // times 2^32 below
  for (int i = 0; i < 32; ++i) high = (high * 2) % kPrime;
  return (low + high) % kPrime;
}

uint64_t hash_lane(const uint8_t* block, uint64_t len, const uint64_t* keys) {
  uint64_t sum = 0;
  for (uint32_t w = 0; w < KR_HASH_WORDS; ++w) {
    uint32_t word = 0;
    const uint64_t at = uint64_t{w} * 4;
    if (at < len) std::memcpy(&word, block + at, len - at < 4 ? len - at : 4);
    sum = (sum + mul_mod(keys[w], word)) % kPrime;
  }
  return sum;
}

void hash_block(const uint8_t* block, uint64_t len, const uint64_t* keys, uint64_t out[2]) {
  out[0] = hash_lane(block, len, keys);
  out[1] = hash_lane(block, len, keys + KR_HASH_WORDS);
}

}  // namespace

extern "C" int kr_host_dispatch(const char* kernel, const void* kernarg, uint32_t workgroups) {
  if (std::strcmp(kernel, "kr_scatter_copy") == 0) {
    const auto* args = static_cast<const kr_scatter_copy_args*>(kernarg);
    for (uint64_t i = 0; i < args->count && i < workgroups; ++i) {
      const kr_copy_record& r = args->records[i];
      std::memmove(reinterpret_cast<void*>(r.dst), reinterpret_cast<const void*>(r.src), r.size);
    }
    return 0;
  }
  if (std::strcmp(kernel, "kr_hash_blocks") == 0) {
    const auto* args = static_cast<const kr_hash_blocks_args*>(kernarg);
    for (uint64_t i = 0; i < args->count && i < workgroups; ++i) {
      const kr_hash_block& b = args->blocks[i];
      hash_block(reinterpret_cast<const uint8_t*>(b.addr), b.len, args->keys, args->hashes + 2 * i);
    }
    return 0;
  }
  if (std::strcmp(kernel, "kr_compare_copy") == 0) {
    const auto* args = static_cast<const kr_compare_copy_args*>(kernarg);
    for (uint64_t i = 0; i < args->count && i < workgroups; ++i) {
      const kr_block_pair& p = args->pairs[i];
      const uint64_t hashed = (args->flags & KR_COMPARE_HASH_SRC) != 0 ? p.src : p.dst;
      uint64_t now[2];
      hash_block(reinterpret_cast<const uint8_t*>(hashed), p.len, args->keys, now);
      uint64_t* expected = args->hashes + 2 * i;
      if (now[0] == expected[0] && now[1] == expected[1]) continue;
      std::memmove(reinterpret_cast<void*>(p.dst), reinterpret_cast<const void*>(p.src), p.len);
      ++*args->changed;
      if ((args->flags & KR_COMPARE_UPDATE_HASH) != 0) {
        expected[0] = now[0];
        expected[1] = now[1];
      }
    }
    return 0;
  }
  return -1;
}
