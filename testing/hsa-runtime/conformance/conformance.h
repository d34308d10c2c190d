/* conformance.h: what the conformance suite's files share. The suite checks
 * the test runtime's ROCr semantics through the real CoreApiTable /
 * AmdExtTable, as a tool calls them, and is built once per backend
 * (conformance_host, conformance_cuda: CMakeLists.txt; gpu/run.sh on a GPU).
 * A case says which backends it holds for; CONFORMANCE.md lists every case
 * and what it checks. */
#ifndef HSA_RT_CONFORMANCE_H
#define HSA_RT_CONFORMANCE_H

#include <hsa_api_trace.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "cuda_driver.h"
#include "hsa_rt.h"
#include "replay_kernels.h"

namespace conformance {

// Which backends a case runs on, and when: before the runtime is up (CUDA:
// nothing is initialised until hsa_rt_init), or after every other case.
enum : unsigned { kHost = 1, kCuda = 2, kBoth = 3, kBeforeInit = 4, kLast = 8 };
bool add(const char* title, unsigned flags, void (*run)());

#define CONFORMANCE_JOIN2(a, b) a##b
#define CONFORMANCE_JOIN(a, b) CONFORMANCE_JOIN2(a, b)
#define CONFORMANCE_CASE_AT(title, flags, fn)                                               \
  static void fn();                                                                         \
  [[maybe_unused]] static const bool CONFORMANCE_JOIN(fn, _added) =                         \
      ::conformance::add(title, flags, fn);                                                 \
  static void fn()
// CASE("area: what it checks", kBoth) { ... }
#define CASE(title, flags) CONFORMANCE_CASE_AT(title, flags, CONFORMANCE_JOIN(case_, __LINE__))
#define CHECK_STATUS(expr, expected) CHECK((expr) == (expected))

inline const CoreApiTable& core() { return *hsa_rt_core_table(); }
inline const AmdExtTable& amd() { return *hsa_rt_amd_ext_table(); }
inline bool on_host() { return hsa_rt_backend() == HSA_RT_BACKEND_HOST; }
// The CUDA backend on the stand-in driver (testing/hsa-runtime/cuda/fake).
bool on_fake_driver();
inline hsa_agent_t gpu(uint32_t index) { return hsa_rt_gpu_agent(index); }
inline hsa_agent_t cpu() { return hsa_rt_cpu_agent(); }
inline hsa_amd_memory_pool_t pool(hsa_agent_t agent, hsa_rt_pool_kind_t kind) {
  return hsa_rt_pool(agent, kind);
}
inline uint64_t count(hsa_rt_counter_t counter) { return hsa_rt_count(counter); }
inline uint64_t violations() { return hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS); }

constexpr auto kInvalidPool = static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
constexpr auto kAperture = static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION);
constexpr size_t kGiB = size_t{1} << 30;
constexpr uint32_t kNone = 0, kReadOnly = 1, kWriteOnly = 2, kReadWrite = 3;

// Resets the runtime with `gpus` GPU agents (CUDA: as many as it has, up to
// that); false, the case skipped, when that is fewer than `needed`.
bool reset(uint32_t gpus, uint32_t needed);
inline bool reset(uint32_t gpus) { return reset(gpus, gpus); }
// The last GPU: the second where there are two, else the first.
inline uint32_t last_gpu() { return hsa_rt_gpu_count() - 1; }
// A pool of the first GPU other backends may lack (host: DEVICE_FINE), else
// its coarse pool.
hsa_rt_pool_kind_t fine_device_kind();

void* pool_alloc(hsa_amd_memory_pool_t pool, size_t size, uint32_t flags = 0);
void* device_alloc(size_t size, uint32_t gpu_index = 0);
hsa_amd_pointer_info_t pointer_info(const void* ptr);
hsa_signal_t make_signal(hsa_signal_value_t value);
// Waits (five seconds at most) until the signal reads value.
bool wait_for(hsa_signal_t signal, hsa_signal_value_t value);
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}
// Callbacks counting their calls in an int at data.
hsa_status_t count_executable(hsa_executable_t, void* data);
hsa_status_t count_symbol(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void* data);
// HSA_AMD_AGENT_INFO_MEMORY_AVAIL of a GPU.
uint64_t memory_avail(uint32_t gpu_index);

// Device memory read and written behind the runtime's back (its counters
// and checks untouched): directly on the host backend, through the driver
// (cuMemcpy, GPU 0's context) on the CUDA backend.
void dev_write(void* dst, const void* src, size_t size);
void dev_read(void* dst, const void* src, size_t size);
void dev_fill(void* dst, int byte, size_t size);
uint8_t dev_byte(const void* ptr, size_t offset = 0);

#if HSA_RT_HAVE_VMEM
// A vmem access descriptor, and set_access / get_access of one agent
// (get_access: the permission, or minus the status when it fails).
hsa_amd_memory_access_desc_t access_desc(hsa_agent_t agent, uint32_t permission);
hsa_status_t set_access(void* va, size_t size, hsa_agent_t agent, uint32_t permission);
long long get_access(void* va, hsa_agent_t agent);
#endif

// A dispatch's view of a kernel of an executable (get_symbol_by_name).
struct Kernel {
  uint64_t object = 0;
  uint32_t kernarg_size = 0, group_size = 0, private_size = 0;
};
bool find_kernel(hsa_executable_t executable, hsa_agent_t agent, const char* name, Kernel* out);
// The library's kernels (kr_scatter_copy, kr_hash_blocks, kr_compare_copy)
// in an executable of the agent, made through a code object reader as a
// tool makes one: host: an AMDGPU ELF with their descriptors; CUDA:
// $KERNEL_REPLAY_CODE_OBJECT (a cubin), or any bytes on the stand-in driver.
// Empty when there is none (the caller skips).
std::vector<uint8_t> library_code_object();
// An AMDGPU code object as the host backend's loader sees clang's (ELF64
// ET_DYN, EM_AMDGPU, OS ABI AMDGPU_HSA, one section of 64-byte kernel
// descriptors, "name.kd" symbols); e_flags gfx942 with xnack and sramecc
// "any" by default (loader.cpp).
struct ElfKernelSpec {
  std::string name;  // without ".kd"
  uint32_t group = 0, private_size = 0, kernarg = 0;
};
constexpr uint32_t kGfx942Any = 0x04c | 0x100 | 0x400;
std::vector<uint8_t> build_code_object(const std::vector<ElfKernelSpec>& kernels,
                                       uint32_t e_flags = kGfx942Any, uint8_t abi_version = 3);
// The library's three kernels, as its code objects describe them.
std::vector<ElfKernelSpec> library_kernels();
// Reader, executable, load, freeze, as the library does: SUCCESS or the
// first failing status (nothing left behind then).
hsa_status_t load_executable(const std::vector<uint8_t>& object, hsa_agent_t agent,
                             hsa_executable_t* exe);
// Deterministic bytes (xorshift).
inline uint64_t next_random(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}
// replay_kernels.h's hash of one block on the host (both lanes).
void reference_hash(const uint8_t* block, size_t len, const uint32_t* keys, uint64_t out[2]);

}  // namespace conformance

#endif /* HSA_RT_CONFORMANCE_H */
