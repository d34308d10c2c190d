/* sim_selftest.cpp: checks the test runtime's semantics on the host backend,
 * calling it only through the real CoreApiTable / AmdExtTable structs, as a
 * tool does (ctest: conformance_host, and its memcheck and ASan runs). Exit
 * status 0 means every check passed. Needs about 300 MiB of memory (the
 * quarantine cap is exercised).
 */

#include <hsa_api_trace.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "hsa_rt.h"
// The library's kernels' arguments, for dispatches as the library makes them.
#include "../../../kernels/replay_kernels.h"

namespace {

#define CHECK_STATUS(expr, expected) CHECK((expr) == (expected))

const CoreApiTable& core() { return *hsa_rt_core_table(); }
const AmdExtTable& amd() { return *hsa_rt_amd_ext_table(); }

constexpr auto kInvalidPool = static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);

hsa_agent_t gpu(uint32_t i) { return hsa_rt_gpu_agent(i); }
hsa_agent_t cpu() { return hsa_rt_cpu_agent(); }
hsa_amd_memory_pool_t pool(hsa_agent_t agent, hsa_rt_pool_kind_t kind) {
  return hsa_rt_pool(agent, kind);
}

void* pool_alloc(hsa_amd_memory_pool_t p, size_t size, uint32_t flags = 0) {
  void* ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(p, size, flags, &ptr), HSA_STATUS_SUCCESS);
  return ptr;
}

void* device_alloc(size_t size, uint32_t gpu_index = 0) {
  return pool_alloc(pool(gpu(gpu_index), HSA_RT_POOL_DEVICE_COARSE), size);
}

hsa_amd_pointer_info_t pointer_info(const void* ptr) {
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(ptr, &info, nullptr, nullptr, nullptr),
               HSA_STATUS_SUCCESS);
  return info;
}

hsa_signal_t make_signal(hsa_signal_value_t value) {
  hsa_signal_t signal{0};
  CHECK_STATUS(core().hsa_signal_create_fn(value, 0, nullptr, &signal), HSA_STATUS_SUCCESS);
  return signal;
}

// Waits (bounded) until the signal reads value.
bool wait_for(hsa_signal_t signal, hsa_signal_value_t value) {
  const uint64_t five_seconds = 5000000000ull;
  return core().hsa_signal_wait_scacquire_fn(signal, HSA_SIGNAL_CONDITION_EQ, value, five_seconds,
                                             HSA_WAIT_STATE_BLOCKED) == value;
}

uint64_t copies(hsa_rt_counter_t direction) { return hsa_rt_count(direction); }

// ---- tables -----------------------------------------------------------------

void test_table_versions() {
  hsa_rt_reset(2);
  CHECK(core().version.major_id == HSA_CORE_API_TABLE_MAJOR_VERSION);
  CHECK(core().version.minor_id == sizeof(CoreApiTable));
  CHECK(core().version.step_id == HSA_CORE_API_TABLE_STEP_VERSION);
  CHECK(amd().version.major_id == HSA_AMD_EXT_API_TABLE_MAJOR_VERSION);
  CHECK(amd().version.minor_id == sizeof(AmdExtTable));
  CHECK(amd().version.step_id == HSA_AMD_EXT_API_TABLE_STEP_VERSION);
  CHECK(hsa_rt_core_table_size() == sizeof(CoreApiTable));
  CHECK(hsa_rt_amd_ext_table_size() == sizeof(AmdExtTable));

  // Implemented entries are set, unimplemented ones NULL.
  CHECK(core().hsa_memory_copy_fn != nullptr);
  CHECK(core().hsa_signal_wait_scacquire_fn != nullptr);
  CHECK(core().hsa_executable_symbol_get_info_fn != nullptr);
  // Queues, ISAs and code-object loading run the library's own kernels.
  CHECK(core().hsa_queue_create_fn != nullptr);
  CHECK(core().hsa_queue_add_write_index_scacq_screl_fn != nullptr);
  CHECK(core().hsa_agent_iterate_isas_fn != nullptr);
  CHECK(core().hsa_executable_load_agent_code_object_fn != nullptr);
  CHECK(core().hsa_executable_get_symbol_by_name_fn != nullptr);
  CHECK(core().hsa_soft_queue_create_fn == nullptr);
  CHECK(core().hsa_executable_load_code_object_fn == nullptr);
  CHECK(amd().hsa_amd_pointer_info_fn != nullptr);
  CHECK(amd().hsa_amd_memory_async_copy_fn != nullptr);
  CHECK(amd().hsa_amd_memory_lock_fn == nullptr);
  CHECK(amd().hsa_amd_memory_async_copy_rect_fn != nullptr);
  CHECK(amd().hsa_amd_signal_async_handler_fn != nullptr);
  CHECK(amd().hsa_amd_async_function_fn == nullptr);
  CHECK(amd().hsa_amd_queue_cu_get_mask_fn == nullptr);

  // A fresh fill equals the runtime's own table.
  CoreApiTable fresh_core;
  AmdExtTable fresh_amd;
  hsa_rt_fill_core_table(&fresh_core);
  hsa_rt_fill_amd_ext_table(&fresh_amd);
  CHECK(std::memcmp(&fresh_core, &core(), sizeof(CoreApiTable)) == 0);
  CHECK(std::memcmp(&fresh_amd, &amd(), sizeof(AmdExtTable)) == 0);

  // A wrapper a tool installs survives reset.
  CoreApiTable* table = hsa_rt_core_table();
  auto original = table->hsa_init_fn;
  static hsa_status_t (*const wrapper)() = [] { return HSA_STATUS_ERROR; };
  table->hsa_init_fn = wrapper;
  hsa_rt_reset(1);
  CHECK(hsa_rt_core_table() == table);
  CHECK(table->hsa_init_fn == wrapper);
  table->hsa_init_fn = original;
  CHECK_STATUS(core().hsa_init_fn(), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_shut_down_fn(), HSA_STATUS_SUCCESS);
}

// ---- topology ---------------------------------------------------------------

hsa_status_t collect_agent(hsa_agent_t agent, void* data) {
  static_cast<std::vector<hsa_agent_t>*>(data)->push_back(agent);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t stop_at_first(hsa_agent_t, void*) { return HSA_STATUS_INFO_BREAK; }

void test_topology() {
  hsa_rt_reset(3);
  CHECK(hsa_rt_gpu_count() == 3);
  std::vector<hsa_agent_t> agents;
  CHECK_STATUS(core().hsa_iterate_agents_fn(collect_agent, &agents), HSA_STATUS_SUCCESS);
  CHECK(agents.size() == 4);
  CHECK(agents.size() == 4 && agents[0].handle == cpu().handle);
  for (uint32_t i = 0; i < 3 && agents.size() == 4; ++i) {
    CHECK(agents[i + 1].handle == gpu(i).handle);
  }
  CHECK(gpu(3).handle == 0);
  CHECK(cpu().handle != 0);
  CHECK_STATUS(core().hsa_iterate_agents_fn(stop_at_first, nullptr), HSA_STATUS_INFO_BREAK);
  CHECK_STATUS(core().hsa_iterate_agents_fn(nullptr, nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  hsa_device_type_t type{};
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_SUCCESS);
  CHECK(type == HSA_DEVICE_TYPE_GPU);
  CHECK_STATUS(core().hsa_agent_get_info_fn(cpu(), HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_SUCCESS);
  CHECK(type == HSA_DEVICE_TYPE_CPU);

  // NAME: exactly 64 bytes, NUL-padded.
  unsigned char name[80];
  std::memset(name, 0xAB, sizeof(name));
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(1), HSA_AGENT_INFO_NAME, name), HSA_STATUS_SUCCESS);
  // Named after its ISA's processor, as ROCr names GPU agents.
  CHECK(std::strcmp(reinterpret_cast<char*>(name), "gfx942") == 0);
  CHECK(name[63] == 0 && name[64] == 0xAB);
  uint32_t node = 99;
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(2), HSA_AGENT_INFO_NODE, &node),
               HSA_STATUS_SUCCESS);
  CHECK(node == 3);
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_DEVICE, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Handles are tagged: a pool handle is not an agent, and old handles die.
  const hsa_agent_t old_gpu = gpu(0);
  const hsa_amd_memory_pool_t old_pool = pool(old_gpu, HSA_RT_POOL_DEVICE_COARSE);
  CHECK_STATUS(core().hsa_agent_get_info_fn(hsa_agent_t{old_pool.handle}, HSA_AGENT_INFO_DEVICE,
                                            &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(core().hsa_agent_get_info_fn(hsa_agent_t{0}, HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  hsa_rt_reset(3);
  CHECK(gpu(0).handle != old_gpu.handle);
  CHECK_STATUS(core().hsa_agent_get_info_fn(old_gpu, HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  size_t size = 0;
  CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(old_pool, HSA_AMD_MEMORY_POOL_INFO_SIZE,
                                                     &size),
               kInvalidPool);

  uint64_t frequency = 0;
  CHECK_STATUS(core().hsa_system_get_info_fn(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency),
               HSA_STATUS_SUCCESS);
  CHECK(frequency == 1000000000ull);
  const char* text = nullptr;
  CHECK_STATUS(core().hsa_status_string_fn(HSA_STATUS_ERROR_INVALID_AGENT, &text),
               HSA_STATUS_SUCCESS);
  CHECK(text != nullptr && std::strstr(text, "INVALID_AGENT") != nullptr);

  hsa_rt_reset(0);
  agents.clear();
  CHECK_STATUS(core().hsa_iterate_agents_fn(collect_agent, &agents), HSA_STATUS_SUCCESS);
  CHECK(agents.size() == 1);
  CHECK(gpu(0).handle == 0);
}

// ---- pools and regions ------------------------------------------------------

hsa_status_t collect_pool(hsa_amd_memory_pool_t p, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(p.handle);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t collect_region(hsa_region_t r, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(r.handle);
  return HSA_STATUS_SUCCESS;
}

hsa_amd_memory_pool_access_t access(hsa_agent_t agent, hsa_amd_memory_pool_t p) {
  hsa_amd_memory_pool_access_t value = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   agent, p, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &value),
               HSA_STATUS_SUCCESS);
  return value;
}

void test_pools_and_regions() {
  hsa_rt_reset(2);
  std::vector<uint64_t> gpu_pools;
  CHECK_STATUS(amd().hsa_amd_agent_iterate_memory_pools_fn(gpu(0), collect_pool, &gpu_pools),
               HSA_STATUS_SUCCESS);
  CHECK(gpu_pools.size() == 2);
  CHECK(gpu_pools.size() == 2 && gpu_pools[0] == pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE).handle);
  CHECK(gpu_pools.size() == 2 && gpu_pools[1] == pool(gpu(0), HSA_RT_POOL_DEVICE_FINE).handle);
  std::vector<uint64_t> cpu_pools;
  CHECK_STATUS(amd().hsa_amd_agent_iterate_memory_pools_fn(cpu(), collect_pool, &cpu_pools),
               HSA_STATUS_SUCCESS);
  CHECK(cpu_pools.size() == 3);
  CHECK(pool(gpu(0), HSA_RT_POOL_SYSTEM_FINE).handle == 0);
  CHECK(pool(cpu(), HSA_RT_POOL_DEVICE_COARSE).handle == 0);
  CHECK(hsa_rt_region(gpu(1), HSA_RT_POOL_DEVICE_FINE).handle ==
        pool(gpu(1), HSA_RT_POOL_DEVICE_FINE).handle);

  // A GPU's regions: its own, then the system ones (as ROCr lists them).
  std::vector<uint64_t> gpu_regions;
  CHECK_STATUS(core().hsa_agent_iterate_regions_fn(gpu(1), collect_region, &gpu_regions),
               HSA_STATUS_SUCCESS);
  CHECK(gpu_regions.size() == 5);
  CHECK(gpu_regions.size() == 5 &&
        gpu_regions[3] == hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_KERNARG).handle);
  CHECK_STATUS(core().hsa_agent_iterate_regions_fn(hsa_agent_t{12345}, collect_region,
                                                   &gpu_regions),
               HSA_STATUS_ERROR_INVALID_AGENT);

  struct Expect {
    hsa_agent_t agent;
    hsa_rt_pool_kind_t kind;
    uint32_t flags;
    bool by_all;
  };
  const Expect expected[] = {
      {gpu(0), HSA_RT_POOL_DEVICE_COARSE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, false},
      {gpu(0), HSA_RT_POOL_DEVICE_FINE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, false},
      {cpu(), HSA_RT_POOL_SYSTEM_FINE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, true},
      {cpu(), HSA_RT_POOL_SYSTEM_KERNARG,
       HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
       true},
      {cpu(), HSA_RT_POOL_SYSTEM_COARSE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, true},
  };
  for (const Expect& e : expected) {
    const hsa_amd_memory_pool_t p = pool(e.agent, e.kind);
    CHECK(p.handle != 0);
    hsa_amd_segment_t segment = HSA_AMD_SEGMENT_GROUP;
    uint32_t flags = 0;
    bool allowed = false;
    bool by_all = !e.by_all;
    size_t granule = 0, alignment = 0, size = 0, max_size = 0;
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
                                                       &segment),
                 HSA_STATUS_SUCCESS);
    CHECK(segment == HSA_AMD_SEGMENT_GLOBAL);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                                                       &flags),
                 HSA_STATUS_SUCCESS);
    CHECK(flags == e.flags);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(
                     p, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed),
                 HSA_STATUS_SUCCESS);
    CHECK(allowed);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(
                     p, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, &granule),
                 HSA_STATUS_SUCCESS);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(
                     p, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT, &alignment),
                 HSA_STATUS_SUCCESS);
    CHECK(granule == 4096 && alignment == 4096);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(p, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size),
                 HSA_STATUS_SUCCESS);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(p, HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE,
                                                       &max_size),
                 HSA_STATUS_SUCCESS);
    CHECK(size > 0 && max_size == size);
    CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(
                     p, HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL, &by_all),
                 HSA_STATUS_SUCCESS);
    CHECK(by_all == e.by_all);

    // The region view of the same memory.
    const hsa_region_t r = hsa_rt_region(e.agent, e.kind);
    hsa_region_segment_t region_segment = HSA_REGION_SEGMENT_GROUP;
    uint32_t region_flags = 0;
    CHECK_STATUS(core().hsa_region_get_info_fn(r, HSA_REGION_INFO_SEGMENT, &region_segment),
                 HSA_STATUS_SUCCESS);
    CHECK(region_segment == HSA_REGION_SEGMENT_GLOBAL);
    CHECK_STATUS(core().hsa_region_get_info_fn(r, HSA_REGION_INFO_GLOBAL_FLAGS, &region_flags),
                 HSA_STATUS_SUCCESS);
    CHECK(region_flags == e.flags);
  }
  CHECK(HSA_REGION_GLOBAL_FLAG_KERNARG == 1 && HSA_REGION_GLOBAL_FLAG_FINE_GRAINED == 2 &&
        HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED == 4);

  // Exactly the documented width: a uint32_t attribute writes 4 bytes.
  unsigned char bytes[16];
  std::memset(bytes, 0xAB, sizeof(bytes));
  CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE),
                                                     HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, bytes),
               HSA_STATUS_SUCCESS);
  CHECK(bytes[4] == 0xAB);

  // Errors.
  uint32_t flags = 0;
  CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(hsa_amd_memory_pool_t{gpu(0).handle},
                                                     HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                                                     &flags),
               kInvalidPool);
  CHECK_STATUS(core().hsa_region_get_info_fn(hsa_region_t{1}, HSA_REGION_INFO_GLOBAL_FLAGS,
                                             &flags),
               HSA_STATUS_ERROR_INVALID_REGION);
  CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE),
                                                     HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                                                     nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // The access table (ROCr's GetAgentPoolInfo).
  const auto allowed = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
  const auto disallowed = HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
  CHECK(access(gpu(0), pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE)) == allowed);
  CHECK(access(gpu(0), pool(gpu(0), HSA_RT_POOL_DEVICE_FINE)) == allowed);
  CHECK(access(gpu(0), pool(gpu(1), HSA_RT_POOL_DEVICE_COARSE)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_FINE)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_COARSE)) == disallowed);
  CHECK(access(cpu(), pool(cpu(), HSA_RT_POOL_SYSTEM_COARSE)) == allowed);
  CHECK(access(cpu(), pool(gpu(1), HSA_RT_POOL_DEVICE_FINE)) == disallowed);
  uint32_t hops = 7;
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   gpu(0), pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE),
                   HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS, &hops),
               HSA_STATUS_SUCCESS);
  CHECK(hops == 0);
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_FINE),
                   HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS, &hops),
               HSA_STATUS_SUCCESS);
  CHECK(hops == 1);
  hsa_amd_memory_pool_access_t value{};
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   hsa_agent_t{3}, pool(cpu(), HSA_RT_POOL_SYSTEM_FINE),
                   HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &value),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   gpu(0), hsa_amd_memory_pool_t{3}, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
                   &value),
               kInvalidPool);
}

// ---- allocation -------------------------------------------------------------

void test_allocation() {
  hsa_rt_reset(2);
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  void* ptr = reinterpret_cast<void*>(0x1);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 0, 0, &ptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 16, 0, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(hsa_amd_memory_pool_t{gpu(0).handle}, 16, 0,
                                                     &ptr),
               kInvalidPool);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, size_t{1} << 40, 0, &ptr),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_region_t{cpu().handle}, 16, &ptr),
               HSA_STATUS_ERROR_INVALID_REGION);
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_FINE), 0,
                                             &ptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);

  // Rounding and alignment.
  void* one = pool_alloc(coarse, 1, 0x5);
  void* more = pool_alloc(coarse, 4097);
  CHECK(reinterpret_cast<uintptr_t>(one) % 4096 == 0);
  CHECK(reinterpret_cast<uintptr_t>(more) % 4096 == 0);
  CHECK(pointer_info(one).sizeInBytes == 4096);
  CHECK(pointer_info(more).sizeInBytes == 8192);
  uint32_t flags = 0;
  CHECK(hsa_rt_allocation_flags(one, &flags) && flags == 0x5);
  CHECK(!hsa_rt_allocation_flags(static_cast<char*>(one) + 1, &flags));
  // Fresh device memory is not cleared: it holds poison, as VRAM holds
  // what was there before.
  CHECK(static_cast<unsigned char*>(more)[8191] == HSA_RT_POISON_BYTE);

  void* region_ptr = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(gpu(1), HSA_RT_POOL_DEVICE_FINE), 10,
                                             &region_ptr),
               HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 3);

  // Frees: NULL is fine, anything but a live base is INVALID_ALLOCATION, and
  // both free entry points accept both kinds of allocation.
  CHECK_STATUS(core().hsa_memory_free_fn(nullptr), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(nullptr), HSA_STATUS_SUCCESS);
  int local = 0;
  CHECK_STATUS(core().hsa_memory_free_fn(&local), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(core().hsa_memory_free_fn(static_cast<char*>(more) + 64),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(core().hsa_memory_free_fn(one), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_free_fn(one), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(region_ptr), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(more), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);

  // A large allocation costs nothing until touched.
  void* big = pool_alloc(coarse, size_t{8} << 30);
  CHECK(big != nullptr);
  CHECK(pointer_info(static_cast<char*>(big) + (size_t{6} << 30)).agentBaseAddress == big);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(big), HSA_STATUS_SUCCESS);
}

// ---- pointer info -----------------------------------------------------------

void test_pointer_info() {
  hsa_rt_reset(2);
  int local = 0;
  CHECK(pointer_info(&local).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  std::vector<char> heap(100);
  CHECK(pointer_info(heap.data()).type == HSA_EXT_POINTER_TYPE_UNKNOWN);

  char* dev = static_cast<char*>(device_alloc(10000, 1));
  hsa_amd_pointer_info_t info = pointer_info(dev + 5000);
  CHECK(info.size == sizeof(hsa_amd_pointer_info_t));
  CHECK(info.type == HSA_EXT_POINTER_TYPE_HSA);
  CHECK(info.agentBaseAddress == dev && info.hostBaseAddress == dev);
  CHECK(info.sizeInBytes == 12288);
  CHECK(info.agentOwner.handle == gpu(1).handle);
  CHECK(info.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
  CHECK(pointer_info(dev + 12287).type == HSA_EXT_POINTER_TYPE_HSA);
  CHECK(pointer_info(dev + 12288).type == HSA_EXT_POINTER_TYPE_UNKNOWN);

  char* kernarg = static_cast<char*>(pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG), 64));
  info = pointer_info(kernarg);
  CHECK(info.agentOwner.handle == cpu().handle);
  CHECK(info.global_flags ==
        (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT |
         HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED));

  // Argument errors.
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(nullptr, &info, nullptr, nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, nullptr, nullptr, nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  info.size = 0;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, nullptr, nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // An older, smaller structure: nothing past its size is written, and size
  // reports what was filled.
  hsa_amd_pointer_info_t partial;
  std::memset(&partial, 0xAB, sizeof(partial));
  partial.size = offsetof(hsa_amd_pointer_info_t, agentOwner);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &partial, nullptr, nullptr, nullptr),
               HSA_STATUS_SUCCESS);
  CHECK(partial.size == offsetof(hsa_amd_pointer_info_t, agentOwner));
  CHECK(partial.sizeInBytes == 12288);
  CHECK(partial.agentOwner.handle == 0xABABABABABABABABull);
  CHECK(partial.global_flags == 0xABABABABu);
  // A bigger (future) structure: size comes back as what the runtime knows.
  unsigned char bigger[sizeof(hsa_amd_pointer_info_t) + 16];
  std::memset(bigger, 0xAB, sizeof(bigger));
  const uint32_t big_size = sizeof(bigger);
  std::memcpy(bigger, &big_size, sizeof(big_size));
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(
                   dev, reinterpret_cast<hsa_amd_pointer_info_t*>(bigger), nullptr, nullptr,
                   nullptr),
               HSA_STATUS_SUCCESS);
  uint32_t reported = 0;
  std::memcpy(&reported, bigger, sizeof(reported));
  CHECK(reported == sizeof(hsa_amd_pointer_info_t));
  CHECK(bigger[sizeof(hsa_amd_pointer_info_t)] == 0xAB);

  // Accessible agents: owner first, then grants; NULL list pointers allowed.
  uint32_t count = 0;
  hsa_agent_t* list = nullptr;
  info.size = sizeof(info);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, std::malloc, &count, &list),
               HSA_STATUS_SUCCESS);
  CHECK(count == 1 && list != nullptr && list[0].handle == gpu(1).handle);
  std::free(list);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, std::malloc, nullptr, nullptr),
               HSA_STATUS_SUCCESS);
  const hsa_agent_t grant[] = {gpu(0), cpu()};
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(2, grant, nullptr, dev), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, grant, nullptr, dev), HSA_STATUS_SUCCESS);
  list = nullptr;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, std::malloc, &count, &list),
               HSA_STATUS_SUCCESS);
  CHECK(count == 3 && list[0].handle == gpu(1).handle && list[1].handle == gpu(0).handle &&
        list[2].handle == cpu().handle);
  std::free(list);

  // allow_access validation, as ROCr: exact base, flags NULL, known agents.
  const uint32_t reserved = 0;
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, grant, &reserved, dev),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(0, grant, nullptr, dev),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, grant, nullptr, dev + 4096),
               HSA_STATUS_ERROR);
  const hsa_agent_t bogus[] = {hsa_agent_t{77}};
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, bogus, nullptr, dev),
               HSA_STATUS_ERROR_INVALID_AGENT);

  // System memory from hsa_memory_allocate is mapped to every GPU.
  void* system = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_COARSE),
                                             100, &system),
               HSA_STATUS_SUCCESS);
  list = nullptr;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(system, &info, std::malloc, &count, &list),
               HSA_STATUS_SUCCESS);
  CHECK(count == 3 && list[0].handle == cpu().handle);
  std::free(list);

  // User data.
  int marker = 0;
  CHECK_STATUS(amd().hsa_amd_pointer_info_set_userdata_fn(dev, &marker), HSA_STATUS_SUCCESS);
  CHECK(pointer_info(dev + 1).userData == &marker);

  // Freed memory is unknown again; the unknown answer writes no list.
  CHECK_STATUS(core().hsa_memory_free_fn(dev), HSA_STATUS_SUCCESS);
  count = 42;
  list = nullptr;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, std::malloc, &count, &list),
               HSA_STATUS_SUCCESS);
  CHECK(info.type == HSA_EXT_POINTER_TYPE_UNKNOWN && count == 42 && list == nullptr);
  CHECK(pointer_info(dev + 100).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_STATUS(core().hsa_memory_free_fn(kernarg), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_free_fn(system), HSA_STATUS_SUCCESS);
}

// ---- copies -----------------------------------------------------------------

void test_copies() {
  hsa_rt_reset(2);
  char* a = static_cast<char*>(device_alloc(100));  // 4096 bytes
  char* b = static_cast<char*>(device_alloc(8192, 1));
  std::vector<char> host(8192, 'h');
  std::vector<char> back(8192, 0);

  CHECK_STATUS(core().hsa_memory_copy_fn(a, host.data(), 4096), HSA_STATUS_SUCCESS);
  CHECK(a[4095] == 'h');
  CHECK_STATUS(core().hsa_memory_copy_fn(b + 100, a, 4096), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 100, 4096), HSA_STATUS_SUCCESS);
  CHECK(back[0] == 'h' && back[4095] == 'h');
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), host.data(), 10), HSA_STATUS_SUCCESS);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 1);
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_HOST) == 1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);

  // Size 0: success, nothing counted.
  CHECK_STATUS(core().hsa_memory_copy_fn(a, host.data(), 0), HSA_STATUS_SUCCESS);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);

  // Violations copy nothing.
  std::memset(a, 'x', 4096);
  CHECK_STATUS(core().hsa_memory_copy_fn(a + 1, host.data(), 4096),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);  // one byte past the end
  CHECK(a[1] == 'x');
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 8000, 200),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(nullptr, host.data(), 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(a, nullptr, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 4);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);

  // Freed memory is a violation in either direction.
  CHECK_STATUS(core().hsa_memory_free_fn(b), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 16, 16),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(b, host.data(), 16), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 6);
  CHECK(hsa_rt_quarantine_intact());
}

// Host-side checks: what would otherwise be a wild access is a violation.
void test_host_side_checks() {
  hsa_rt_reset(1);
  char* dev = static_cast<char*>(device_alloc(4096));
  std::memset(dev, 'd', 4096);

  // A noted host block: a copy may not run past its end.
  std::vector<char> block(1000, 'b');
  hsa_rt_note_host_block(block.data(), block.size());
  CHECK_STATUS(core().hsa_memory_copy_fn(block.data() + 500, dev, 500), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(block.data() + 500, dev, 501),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, block.data() + 999, 2),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 2);
  hsa_rt_forget_host_block(block.data());
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, block.data(), 1000), HSA_STATUS_SUCCESS);

  // Unmapped host memory.
  const long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(gone != MAP_FAILED);
  munmap(gone, static_cast<size_t>(page));
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, gone, 16), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 3);

  // A raw variable symbol with nothing behind it, and one inside live storage.
  hsa_executable_t exe = hsa_rt_executable_create();
  const uint64_t nowhere = 0x7300'0000;
  hsa_rt_executable_add_variable_raw(exe, gpu(0), "unbacked", nowhere, 64);
  hsa_rt_executable_add_variable_raw(exe, gpu(0), "alias", reinterpret_cast<uint64_t>(dev), 64);
  std::vector<char> back(64, 0);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), reinterpret_cast<void*>(nowhere + 8), 8),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), dev, 64), HSA_STATUS_SUCCESS);
  CHECK(back[63] == 'b');  // what the copy from the forgotten block wrote
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 4);
  // Reset forgets the unbacked ranges with the executables.
  hsa_rt_reset(1);
  char* fresh = static_cast<char*>(device_alloc(64));
  CHECK_STATUS(core().hsa_memory_copy_fn(fresh, block.data(), 64), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
}

// ---- quarantine and address reuse -------------------------------------------

void test_quarantine_and_reuse() {
  hsa_rt_reset(1);
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  const hsa_amd_memory_pool_t fine = pool(gpu(0), HSA_RT_POOL_DEVICE_FINE);
  unsigned char* block = static_cast<unsigned char*>(pool_alloc(coarse, 5000));
  std::memset(block, 0x11, 5000);
  CHECK_STATUS(core().hsa_memory_free_fn(block), HSA_STATUS_SUCCESS);
  // The memory stays mapped, all poison.
  CHECK(block[0] == HSA_RT_POISON_BYTE && block[8191] == HSA_RT_POISON_BYTE);
  CHECK(hsa_rt_count(HSA_RT_COUNT_QUARANTINED_BYTES) == 8192);
  CHECK(hsa_rt_quarantine_intact());

  // Without reuse, a new allocation gets fresh memory elsewhere.
  void* other = pool_alloc(coarse, 4096);
  CHECK(other != block);
  CHECK_STATUS(core().hsa_memory_free_fn(other), HSA_STATUS_SUCCESS);

  // With reuse: the newest large-enough block of the same pool comes back,
  // still poisoned.
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, true);
  void* same = pool_alloc(coarse, 8000);
  CHECK(same == block);
  CHECK(block[100] == HSA_RT_POISON_BYTE);
  CHECK(pointer_info(same).sizeInBytes == 8192);
  CHECK(hsa_rt_count(HSA_RT_COUNT_QUARANTINED_BYTES) == 4096);  // `other` is still there
  void* other_again = pool_alloc(coarse, 10);
  CHECK(other_again == other);
  void* from_fine = pool_alloc(fine, 10);  // another pool: never a coarse block
  CHECK(from_fine != block && from_fine != other);
  CHECK_STATUS(core().hsa_memory_free_fn(same), HSA_STATUS_SUCCESS);
  void* too_big = pool_alloc(coarse, 3 * 4096);
  CHECK(too_big != block);
  // A smaller request reuses the bigger block but reports its own size; the
  // rest of the mapping is out of bounds for copies.
  void* small = pool_alloc(coarse, 100);
  CHECK(small == block);
  CHECK(pointer_info(small).sizeInBytes == 4096);
  CHECK(pointer_info(block + 5000).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  char host[16] = {};
  CHECK_STATUS(core().hsa_memory_copy_fn(block + 5000, host, 16),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, false);

  // Writing freed memory behind the runtime's back is detected.
  CHECK_STATUS(core().hsa_memory_free_fn(too_big), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_quarantine_intact());
  static_cast<unsigned char*>(too_big)[5] = 0;
  CHECK(!hsa_rt_quarantine_intact());
  hsa_rt_reset(1);
  CHECK(hsa_rt_quarantine_intact());
  CHECK(hsa_rt_count(HSA_RT_COUNT_QUARANTINED_BYTES) == 0);

  // The byte cap: the oldest block is really released past 256 MiB.
  const hsa_amd_memory_pool_t device = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  void* first = pool_alloc(device, size_t{200} << 20);
  void* second = pool_alloc(device, size_t{100} << 20);
  CHECK_STATUS(core().hsa_memory_free_fn(first), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_QUARANTINED_BYTES) == size_t{200} << 20);
  CHECK_STATUS(core().hsa_memory_free_fn(second), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_QUARANTINED_BYTES) == size_t{100} << 20);
  CHECK(hsa_rt_quarantine_intact());
  hsa_rt_reset(1);
}

// ---- fault injection --------------------------------------------------------

hsa_status_t count_executable(hsa_executable_t, void* data) {
  ++*static_cast<int*>(data);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t count_symbol(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void* data) {
  ++*static_cast<int*>(data);
  return HSA_STATUS_SUCCESS;
}

void test_fault_injection() {
  hsa_rt_reset(1);
  char* dev = static_cast<char*>(device_alloc(3 * 4096));
  std::vector<char> host(4096, 'q');

  // pointer info
  hsa_rt_inject(HSA_RT_FAULT_POINTER_INFO, 0, true);
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, nullptr, nullptr, nullptr),
               HSA_STATUS_ERROR);
  hsa_rt_inject(HSA_RT_FAULT_POINTER_INFO, 0, false);
  CHECK(pointer_info(dev).type == HSA_EXT_POINTER_TYPE_HSA);

  // the n-th device-to-host copy (other directions do not count)
  hsa_rt_inject(HSA_RT_FAULT_NTH_D2H_COPY, 0, 2);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, host.data(), 16), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);
  host[0] = 'z';
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_ERROR);
  CHECK(host[0] == 'z');  // nothing copied
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 3);  // the failed one counts
  hsa_rt_inject(HSA_RT_FAULT_NTH_D2H_COPY, 0, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_D2H_COPY, 0, 0);  // disarms
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);

  // host-to-device copies covering an address
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, reinterpret_cast<uintptr_t>(dev + 4096), 0);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, host.data(), 4096), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4000, host.data(), 97), HSA_STATUS_ERROR);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4096, host.data(), 1), HSA_STATUS_ERROR);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4097, host.data(), 100), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev + 4096, 16), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, 0, 0);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4096, host.data(), 1), HSA_STATUS_SUCCESS);

  // allocations and frees
  hsa_rt_inject(HSA_RT_FAULT_NEXT_ALLOCATIONS, 0, 2);
  void* ptr = nullptr;
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 64, 0, &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(gpu(0), HSA_RT_POOL_DEVICE_COARSE),
                                             64, &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  ptr = pool_alloc(coarse, 64);
  hsa_rt_inject(HSA_RT_FAULT_NEXT_FREES, 0, 1);
  CHECK_STATUS(core().hsa_memory_free_fn(ptr), HSA_STATUS_ERROR);
  CHECK(pointer_info(ptr).type == HSA_EXT_POINTER_TYPE_HSA);  // nothing freed
  CHECK_STATUS(core().hsa_memory_free_fn(ptr), HSA_STATUS_SUCCESS);

  // loader faults
  hsa_executable_t exe = hsa_rt_executable_create();
  hsa_rt_executable_add_variable(exe, gpu(0), "v", 4, false);
  int count = 0;
  hsa_rt_inject(HSA_RT_FAULT_EXECUTABLE_ITERATION, 0, true);
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &count), HSA_STATUS_ERROR);
  CHECK(count == 0);
  hsa_rt_inject(HSA_RT_FAULT_EXECUTABLE_ITERATION, 0, false);
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &count), HSA_STATUS_SUCCESS);
  CHECK(count == 1);

  count = 0;
  hsa_rt_inject(HSA_RT_FAULT_SYMBOL_WALK, exe.handle, true);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(exe, gpu(0), count_symbol, &count),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  CHECK(count == 0);
  hsa_rt_inject(HSA_RT_FAULT_SYMBOL_WALK, exe.handle, false);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(exe, gpu(0), count_symbol, &count),
               HSA_STATUS_SUCCESS);
  CHECK(count == 1);

  struct Found {
    hsa_executable_symbol_t symbol;
  } found{};
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(
                   exe, gpu(0),
                   [](hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t s, void* data) {
                     static_cast<Found*>(data)->symbol = s;
                     return HSA_STATUS_SUCCESS;
                   },
                   &found),
               HSA_STATUS_SUCCESS);
  uint32_t size = 0;
  hsa_rt_inject(HSA_RT_FAULT_SYMBOL_QUERY, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, true);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   found.symbol, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   found.symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_SYMBOL_QUERY, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, false);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   found.symbol, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 4);

  // Reset clears every fault.
  hsa_rt_inject(HSA_RT_FAULT_POINTER_INFO, 0, true);
  hsa_rt_inject(HSA_RT_FAULT_NEXT_ALLOCATIONS, 0, 5);
  hsa_rt_inject(HSA_RT_FAULT_NTH_D2H_COPY, 0, 1);
  hsa_rt_reset(1);
  dev = static_cast<char*>(device_alloc(16));
  CHECK(pointer_info(dev).type == HSA_EXT_POINTER_TYPE_HSA);
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);
}

// ---- loader -----------------------------------------------------------------

struct SymbolList {
  std::vector<hsa_executable_symbol_t> symbols;
  size_t stop_after = SIZE_MAX;
};

hsa_status_t collect_symbol(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t symbol,
                            void* data) {
  auto* list = static_cast<SymbolList*>(data);
  list->symbols.push_back(symbol);
  // Calling back into the runtime from the callback must not deadlock.
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  return list->symbols.size() >= list->stop_after ? HSA_STATUS_INFO_BREAK : HSA_STATUS_SUCCESS;
}

std::string symbol_name(hsa_executable_symbol_t symbol) {
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  std::vector<char> buffer(length + 1, '#');
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME,
                                                        buffer.data()),
               HSA_STATUS_SUCCESS);
  CHECK(buffer[length] == '#');  // not NUL-terminated
  return std::string(buffer.data(), length);
}

// Bytes an attribute writes, measured against a 0xAB-filled buffer.
size_t written_width(hsa_executable_symbol_t symbol, hsa_executable_symbol_info_t attribute) {
  unsigned char buffer[32];
  std::memset(buffer, 0xAB, sizeof(buffer));
  if (core().hsa_executable_symbol_get_info_fn(symbol, attribute, buffer) != HSA_STATUS_SUCCESS) {
    return 0;
  }
  size_t width = sizeof(buffer);
  while (width > 0 && buffer[width - 1] == 0xAB) --width;
  return width;
}

hsa_status_t record_executable(hsa_executable_t exe, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(exe.handle);
  // The loader iterator's callback may use the runtime too.
  SymbolList list;
  core().hsa_executable_iterate_agent_symbols_fn(exe, hsa_rt_gpu_agent(0), collect_symbol, &list);
  return HSA_STATUS_SUCCESS;
}

void test_loader() {
  hsa_rt_reset(2);
  hsa_executable_t first = hsa_rt_executable_create();
  hsa_executable_t second = hsa_rt_executable_create();
  CHECK(first.handle != 0 && first.handle != second.handle);
  auto* var = static_cast<unsigned char*>(
      hsa_rt_executable_add_variable(first, gpu(0), "counter", 24, false));
  auto* constant = static_cast<unsigned char*>(
      hsa_rt_executable_add_variable(first, gpu(0), "table", 8, true));
  hsa_rt_executable_add_kernel(first, gpu(0), "kern.kd");
  hsa_rt_executable_add_variable_raw(first, gpu(0), "raw", 0, 0);
  void* other_gpu = hsa_rt_executable_add_variable(first, gpu(1), "elsewhere", 4, false);
  hsa_rt_executable_add_variable(second, gpu(0), "second", 4, false);
  CHECK(var != nullptr && constant != nullptr && other_gpu != nullptr);
  CHECK(var[0] == 0 && var[23] == 0);  // zeroed storage
  CHECK(hsa_rt_executable_add_variable(hsa_executable_t{1}, gpu(0), "x", 4, false) == nullptr);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);  // storage is not an allocation

  // Symbol walk: only the agent's symbols, in order; a break status stops it.
  SymbolList list;
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, gpu(0), collect_symbol, &list),
               HSA_STATUS_SUCCESS);
  CHECK(list.symbols.size() == 4);
  if (list.symbols.size() != 4) return;
  CHECK(symbol_name(list.symbols[0]) == "counter");
  CHECK(symbol_name(list.symbols[2]) == "kern.kd");
  SymbolList stopped;
  stopped.stop_after = 2;
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, gpu(0), collect_symbol,
                                                              &stopped),
               HSA_STATUS_INFO_BREAK);
  CHECK(stopped.symbols.size() == 2);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, gpu(0), nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(first, hsa_agent_t{5},
                                                              collect_symbol, &list),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(hsa_executable_t{5}, gpu(0),
                                                              collect_symbol, &list),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);

  // get_info widths and values.
  const hsa_executable_symbol_t counter = list.symbols[0];
  const hsa_executable_symbol_t table = list.symbols[1];
  const hsa_executable_symbol_t kernel = list.symbols[2];
  const hsa_executable_symbol_t raw = list.symbols[3];
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE) <= 4);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH) <= 4);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE) <= 4);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST) <= 1);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS) <= 8);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_AGENT) <= 8);
  CHECK(written_width(counter, HSA_EXECUTABLE_SYMBOL_INFO_NAME) == 7);
  hsa_symbol_kind_t kind{};
  uint64_t address = 0;
  uint32_t size = 0;
  bool is_const = true;
  hsa_agent_t agent{};
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_SUCCESS);
  CHECK(kind == HSA_SYMBOL_KIND_VARIABLE);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address),
               HSA_STATUS_SUCCESS);
  CHECK(address == reinterpret_cast<uintptr_t>(var));
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 24);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   counter, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST, &is_const),
               HSA_STATUS_SUCCESS);
  CHECK(!is_const);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   table, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST, &is_const),
               HSA_STATUS_SUCCESS);
  CHECK(is_const);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_AGENT,
                                                        &agent),
               HSA_STATUS_SUCCESS);
  CHECK(agent.handle == gpu(0).handle);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(kernel, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_SUCCESS);
  CHECK(kind == HSA_SYMBOL_KIND_KERNEL);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   kernel, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  uint64_t kernel_object = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   kernel, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &kernel_object),
               HSA_STATUS_SUCCESS);
  CHECK(kernel_object != 0);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   raw, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, &address),
               HSA_STATUS_SUCCESS);
  CHECK(address == 0);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(hsa_executable_symbol_t{counter.handle + 9},
                                                        HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL);

  // Variable storage: exact bounds for copies, reported by pointer info.
  hsa_amd_pointer_info_t info = pointer_info(var + 10);
  CHECK(info.type == HSA_EXT_POINTER_TYPE_HSA && info.agentBaseAddress == var);
  CHECK(info.sizeInBytes == 24 && info.agentOwner.handle == gpu(0).handle);
  CHECK(info.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
  CHECK(pointer_info(var + 24).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  unsigned char host[32] = {1};
  CHECK_STATUS(core().hsa_memory_copy_fn(var, host, 24), HSA_STATUS_SUCCESS);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);
  CHECK_STATUS(core().hsa_memory_copy_fn(var, host, 25), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 1);
  CHECK_STATUS(core().hsa_memory_free_fn(var), HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // Executables in creation order; the callback may re-enter the runtime.
  std::vector<uint64_t> order;
  CHECK_STATUS(hsa_rt_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.size() == 2 && order[0] == first.handle && order[1] == second.handle);
  CHECK_STATUS(hsa_rt_iterate_executables(nullptr, nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Destroy: storage quarantined, handles unknown.
  CHECK_STATUS(core().hsa_executable_destroy_fn(first), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(first), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  CHECK(var[0] == HSA_RT_POISON_BYTE);
  CHECK(pointer_info(var).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_STATUS(core().hsa_memory_copy_fn(host, var, 4), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL);
  order.clear();
  CHECK_STATUS(hsa_rt_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.size() == 1 && order[0] == second.handle);
  hsa_rt_executable_destroy(second);
  CHECK(hsa_rt_quarantine_intact());

  // Reset forgets executables and symbol handles.
  hsa_executable_t third = hsa_rt_executable_create();
  hsa_rt_executable_add_kernel(third, gpu(0), "k");
  hsa_rt_reset(2);
  CHECK_STATUS(core().hsa_executable_destroy_fn(third), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  order.clear();
  CHECK_STATUS(hsa_rt_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.empty());
}

// ---- signals and asynchronous copies ----------------------------------------

void test_signals() {
  hsa_rt_reset(1);
  const uint64_t live_before = hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS);
  hsa_signal_t signal = make_signal(5);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS) == live_before + 1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 5);
  core().hsa_signal_store_screlease_fn(signal, 3);
  CHECK(core().hsa_signal_load_scacquire_fn(signal) == 3);
  core().hsa_signal_subtract_screlease_fn(signal, 1);
  core().hsa_signal_subtract_relaxed_fn(signal, 1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 1);
  core().hsa_signal_add_relaxed_fn(signal, 4);
  CHECK(core().hsa_signal_exchange_relaxed_fn(signal, 9) == 5);
  CHECK(core().hsa_signal_cas_relaxed_fn(signal, 9, 2) == 9);
  CHECK(core().hsa_signal_cas_relaxed_fn(signal, 9, 7) == 2);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 2);

  // Conditions, satisfied at once.
  const uint64_t no_wait = 0;
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_EQ, 2, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_NE, 0, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_LT, 3, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);
  CHECK(core().hsa_signal_wait_relaxed_fn(signal, HSA_SIGNAL_CONDITION_GTE, 2, no_wait,
                                          HSA_WAIT_STATE_ACTIVE) == 2);

  // The timeout is an upper bound.
  const auto start = std::chrono::steady_clock::now();
  const hsa_signal_value_t seen = core().hsa_signal_wait_scacquire_fn(
      signal, HSA_SIGNAL_CONDITION_EQ, 0, 50000000 /* 50 ms */, HSA_WAIT_STATE_BLOCKED);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(seen == 2);
  CHECK(waited >= std::chrono::milliseconds(45) && waited < std::chrono::seconds(5));

  // A store from another thread wakes an unbounded wait.
  std::thread setter([signal] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    core().hsa_signal_store_relaxed_fn(signal, 0);
  });
  CHECK(core().hsa_signal_wait_scacquire_fn(signal, HSA_SIGNAL_CONDITION_EQ, 0, UINT64_MAX,
                                            HSA_WAIT_STATE_BLOCKED) == 0);
  setter.join();

  // Creation and destruction errors.
  hsa_signal_t other{0};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 0, nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_signal_create_fn(0, 1, nullptr, &other),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const hsa_agent_t consumers[] = {cpu(), gpu(0)};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 2, consumers, &other), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_signal_destroy_fn(other), HSA_STATUS_SUCCESS);
  const hsa_agent_t twice[] = {cpu(), cpu()};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 2, twice, &other),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_signal_create_fn(1, 0, nullptr, 0, &other), HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_load_relaxed_fn(other) == 1);
  CHECK_STATUS(core().hsa_signal_destroy_fn(other), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_signal_destroy_fn(other), HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK_STATUS(core().hsa_signal_destroy_fn(hsa_signal_t{0}), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 0);
  CHECK(core().hsa_signal_load_relaxed_fn(other) == 0);
  core().hsa_signal_store_relaxed_fn(other, 1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 2);

  // Waiting for any of several signals.
  hsa_signal_t pair[2] = {make_signal(3), make_signal(3)};
  hsa_signal_condition_t conds[2] = {HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_LT};
  hsa_signal_value_t values[2] = {0, 1};
  hsa_signal_value_t satisfying = 99;
  CHECK(amd().hsa_amd_signal_wait_any_fn(2, pair, conds, values, 20000000, HSA_WAIT_STATE_BLOCKED,
                                         &satisfying) == UINT32_MAX);
  CHECK(satisfying == 99);
  std::thread lower([pair] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    core().hsa_signal_store_relaxed_fn(pair[1], -4);
  });
  CHECK(amd().hsa_amd_signal_wait_any_fn(2, pair, conds, values, UINT64_MAX,
                                         HSA_WAIT_STATE_BLOCKED, &satisfying) == 1);
  CHECK(satisfying == -4);
  lower.join();
  core().hsa_signal_destroy_fn(pair[0]);
  core().hsa_signal_destroy_fn(pair[1]);

  // Signals outlive reset.
  hsa_rt_reset(1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 0);
  CHECK_STATUS(core().hsa_signal_destroy_fn(signal), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS) == live_before);
}

void test_async_copy() {
  hsa_rt_reset(2);
  char* dev = static_cast<char*>(device_alloc(8192));
  std::vector<char> host(8192, 'a');
  std::vector<char> back(8192, 0);
  hsa_signal_t gate = make_signal(1);
  hsa_signal_t done = make_signal(1);

  // Waits for its dependency, then copies and decrements the completion signal.
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 8192, 1, &gate,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 0);
  core().hsa_signal_store_screlease_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(dev[0] == 'a' && dev[8191] == 'a');
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);

  // Back again, no dependencies; submission order is execution order.
  core().hsa_signal_store_relaxed_fn(done, 2);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev + 4096, gpu(0), dev, gpu(0), 4096, 0,
                                                  nullptr, done),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev + 4096, gpu(0), 4096, 0,
                                                  nullptr, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(back[0] == 'a' && back[4095] == 'a');
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 1 && copies(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);

  // Validation.
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(nullptr, gpu(0), host.data(), cpu(), 1, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 1, 1, nullptr,
                                                  done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, hsa_agent_t{9}, host.data(), cpu(), 1, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 1, 0, nullptr,
                                                  hsa_signal_t{0}),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  const hsa_signal_t bogus{12345};
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 1, 1, &bogus,
                                                  done),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  // Size 0 succeeds without touching the completion signal (as ROCr).
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 0, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);

  // Memory freed before the copy runs: a violation at execution time,
  // nothing copied, completion still signalled.
  char* doomed = static_cast<char*>(device_alloc(4096));
  core().hsa_signal_store_relaxed_fn(gate, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(doomed, gpu(0), host.data(), cpu(), 4096, 1,
                                                  &gate, done),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_free_fn(doomed), HSA_STATUS_SUCCESS);
  core().hsa_signal_store_relaxed_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 2);
  CHECK(hsa_rt_quarantine_intact());

  // Injected refusals leave the completion signal alone.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY, 0, 2);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, reinterpret_cast<uintptr_t>(dev + 100), 0);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 200, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == 5);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 2);

  // An injected failure during the copy: nothing copied, completion -1.
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, 0, 0);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION, 0, 1);
  core().hsa_signal_store_relaxed_fn(done, 1);
  std::memset(dev, 'o', 16);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  CHECK(dev[0] == 'o');
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(dev[0] == 'a');

  // Reset drops a copy still blocked on its dependency.
  core().hsa_signal_store_relaxed_fn(done, 1);
  core().hsa_signal_store_relaxed_fn(gate, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 1, &gate,
                                                  done),
               HSA_STATUS_SUCCESS);
  hsa_rt_reset(2);
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == 0);

  core().hsa_signal_destroy_fn(gate);
  core().hsa_signal_destroy_fn(done);
}

void test_strict_async_access() {
  hsa_rt_reset(2);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  char* dev0 = static_cast<char*>(device_alloc(4096, 0));
  char* dev1 = static_cast<char*>(device_alloc(4096, 1));
  char* staging =
      static_cast<char*>(pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), 4096));
  std::vector<char> heap(4096, 's');
  hsa_signal_t done = make_signal(0);

  auto copy = [&](void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent) {
    core().hsa_signal_store_relaxed_fn(done, 1);
    CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dst, dst_agent, src, src_agent, 64, 0,
                                                    nullptr, done),
                 HSA_STATUS_SUCCESS);
    CHECK(wait_for(done, 0));
    return hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS);
  };
  // GPU 0 copies within its own memory: fine.
  CHECK(copy(dev0 + 64, gpu(0), dev0, gpu(0)) == 0);
  // Plain heap memory is not mapped for a GPU engine.
  CHECK(copy(dev0, gpu(0), heap.data(), cpu()) == 1);
  // Nor is restricted system pool memory until access is granted.
  CHECK(copy(dev0, gpu(0), staging, cpu()) == 2);
  const hsa_agent_t gpu0[] = {gpu(0)};
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, gpu0, nullptr, staging),
               HSA_STATUS_SUCCESS);
  CHECK(copy(dev0, gpu(0), staging, cpu()) == 2);
  CHECK(copy(staging, cpu(), dev0, gpu(0)) == 2);
  // Peer memory needs a grant too; the source GPU's engine does the copy.
  CHECK(copy(dev1, gpu(1), dev0, gpu(0)) == 3);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, gpu0, nullptr, dev1), HSA_STATUS_SUCCESS);
  CHECK(copy(dev1, gpu(1), dev0, gpu(0)) == 3);
  // System memory from hsa_memory_allocate is mapped to every GPU.
  void* region_memory = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_FINE),
                                             4096, &region_memory),
               HSA_STATUS_SUCCESS);
  CHECK(copy(region_memory, cpu(), dev1, gpu(1)) == 3);
  // CPU-to-CPU copies run on the CPU, which reaches host memory.
  CHECK(copy(heap.data(), cpu(), staging, cpu()) == 3);
  // Off by default: after reset, heap memory is accepted again.
  hsa_rt_reset(2);
  char* dev = static_cast<char*>(device_alloc(4096));
  CHECK(copy(dev, gpu(0), heap.data(), cpu()) == 0);
  core().hsa_signal_destroy_fn(done);
}

// ---- device memory capacity ---------------------------------------------------

uint64_t memory_avail(uint32_t gpu_index) {
  uint64_t bytes = 0;
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(gpu_index),
                                            static_cast<hsa_agent_info_t>(0xA015), &bytes),
               HSA_STATUS_SUCCESS);
  return bytes;
}

constexpr size_t kGiB = size_t{1} << 30;

void test_device_capacity() {
  hsa_rt_reset(2);
  CHECK(memory_avail(0) == 16 * kGiB && memory_avail(1) == 16 * kGiB);
  // Both device pools of a GPU draw on its 16 GiB; freed memory comes back.
  void* coarse = pool_alloc(pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE), 10 * kGiB);
  CHECK(memory_avail(0) == 6 * kGiB);
  void* fine = pool_alloc(pool(gpu(0), HSA_RT_POOL_DEVICE_FINE), 6 * kGiB - 4096);
  CHECK(memory_avail(0) == 4096);
  void* last = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(gpu(0), HSA_RT_POOL_DEVICE_FINE), 1,
                                             &last),
               HSA_STATUS_SUCCESS);
  CHECK(memory_avail(0) == 0);
  void* ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE), 1, 0,
                                                     &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(gpu(0), HSA_RT_POOL_DEVICE_COARSE), 1,
                                             &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 3);
  // Another GPU and system memory are not affected; a single request over
  // the pool's size stays INVALID_ALLOCATION.
  void* other = pool_alloc(pool(gpu(1), HSA_RT_POOL_DEVICE_COARSE), 4096);
  CHECK(memory_avail(1) == 16 * kGiB - 4096);
  void* system = pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), 20 * kGiB);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE),
                                                     17 * kGiB, 0, &ptr),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(core().hsa_memory_free_fn(last), HSA_STATUS_SUCCESS);
  CHECK(memory_avail(0) == 4096);
  void* again = pool_alloc(pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE), 100);
  CHECK(again != nullptr && memory_avail(0) == 0);
  // Address reuse hands back a quarantined block, counted all the same.
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(again), HSA_STATUS_SUCCESS);
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, true);
  void* reused = pool_alloc(pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE), 4096);
  CHECK(reused == again && memory_avail(0) == 0);
  for (void* p : {coarse, fine, reused, other, system}) {
    CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(p), HSA_STATUS_SUCCESS);
  }
  CHECK(memory_avail(0) == 16 * kGiB && memory_avail(1) == 16 * kGiB);
  // Reset gives everything back.
  pool_alloc(pool(gpu(1), HSA_RT_POOL_DEVICE_FINE), 16 * kGiB);
  CHECK(memory_avail(1) == 0);
  hsa_rt_reset(2);
  CHECK(memory_avail(1) == 16 * kGiB);
}

// ---- rect copies ----------------------------------------------------------------

hsa_status_t rect_copy(const hsa_pitched_ptr_t& dst, hsa_dim3_t dst_offset,
                       const hsa_pitched_ptr_t& src, hsa_dim3_t src_offset, hsa_dim3_t range,
                       hsa_agent_t agent, hsa_amd_copy_direction_t dir, hsa_signal_t done,
                       uint32_t num_deps = 0, const hsa_signal_t* deps = nullptr) {
  return amd().hsa_amd_memory_async_copy_rect_fn(&dst, &dst_offset, &src, &src_offset, &range,
                                                 agent, dir, num_deps, deps, done);
}

void test_async_copy_rect() {
  hsa_rt_reset(2);
  CHECK(amd().hsa_amd_memory_async_copy_rect_fn != nullptr);
  // Device: 3 layers of 4 rows of 64 bytes. Host: 2 layers of 5 rows of 32.
  uint8_t* dev = static_cast<uint8_t*>(device_alloc(3 * 256));
  std::memset(dev, 0, 3 * 256);
  std::vector<uint8_t> host(2 * 160);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i);
  const hsa_pitched_ptr_t dev_ptr{dev, 64, 256};
  const hsa_pitched_ptr_t host_ptr{host.data(), 32, 160};
  hsa_signal_t done = make_signal(1);
  hsa_signal_t gate = make_signal(1);
  const uint64_t accepted = hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES);

  // 12 bytes x 3 rows x 2 layers from host (4, 1, 0) to device (8, 0, 1),
  // after a dependency.
  CHECK_STATUS(rect_copy(dev_ptr, {8, 0, 1}, host_ptr, {4, 1, 0}, {12, 3, 2}, gpu(0),
                         hsaHostToDevice, done, 1, &gate),
               HSA_STATUS_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  core().hsa_signal_store_relaxed_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 1);
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);
  bool exact = true;
  for (size_t z = 0; z < 3; ++z) {
    for (size_t y = 0; y < 4; ++y) {
      for (size_t x = 0; x < 64; ++x) {
        const bool inside = z >= 1 && z < 3 && y < 3 && x >= 8 && x < 20;
        const uint8_t expected =
            inside ? host[(z - 1) * 160 + (y + 1) * 32 + (x - 8 + 4)] : uint8_t{0};
        exact = exact && dev[z * 256 + y * 64 + x] == expected;
      }
    }
  }
  CHECK(exact);

  // Back to a 2-D host buffer with no slice (one layer), device to host.
  std::vector<uint8_t> back(4 * 16, 0xEE);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy({back.data(), 16, 0}, {0, 1, 0}, dev_ptr, {8, 0, 1}, {12, 3, 1}, gpu(1),
                         hsaDeviceToHost, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  // back row 1 + y = device layer 1 row y from byte 8 = host layer 0 row
  // 1 + y from byte 4.
  CHECK(back[16] == host[32 + 4] && back[16 + 11] == host[32 + 15]);
  CHECK(back[3 * 16 + 11] == host[3 * 32 + 15]);
  CHECK(back[0] == 0xEE && back[15] == 0xEE && back[16 + 12] == 0xEE);
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);

  // Argument checks, in ROCr's order.
  const hsa_dim3_t zero{0, 0, 0};
  const hsa_dim3_t box{4, 1, 1};
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_rect_fn(nullptr, &zero, &host_ptr, &zero, &box,
                                                       gpu(0), hsaHostToDevice, 0, nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_rect_fn(&dev_ptr, &zero, &host_ptr, &zero, nullptr,
                                                       gpu(0), hsaHostToDevice, 0, nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToHost, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0),
                         static_cast<hsa_amd_copy_direction_t>(7), done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, cpu(), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, hsa_agent_t{9}, hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_AGENT);
  const hsa_signal_t bogus{12345};
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done, 1,
                         &bogus),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice,
                         hsa_signal_t{0}),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  // A zero range succeeds without touching the signal (even with bad pitches).
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy({dev, 3, 0}, zero, host_ptr, zero, {4, 0, 1}, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_SUCCESS);
  // Geometry (BlitSdma::SubmitCopyRectCommand).
  CHECK_STATUS(rect_copy({dev, 62, 0}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy({dev + 2, 64, 0}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy({dev, 64, 130}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, {61, 0, 0}, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, {0, 4, 0}, {4, 2, 1}, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(rect_copy({dev, 64, 0}, zero, host_ptr, zero, {4, 1, 2}, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  const uint64_t violations = hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS);
  CHECK_STATUS(rect_copy({nullptr, 64, 0}, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice,
                         done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 2);

  // One row out of bounds (the second runs past the allocation's end): the
  // whole copy is one violation, nothing copied, completion still signalled.
  std::memset(dev, 0, 4096);
  CHECK_STATUS(rect_copy({dev + 3968, 96, 0}, zero, {host.data(), 64, 0}, zero, {64, 2, 1},
                         gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 2);
  CHECK(dev[3968] == 0 && dev[4031] == 0);
  // A host buffer too short for its rows: the same.
  core().hsa_signal_store_relaxed_fn(done, 1);
  std::vector<uint8_t> small(40);
  hsa_rt_note_host_block(small.data(), small.size());
  CHECK_STATUS(rect_copy(dev_ptr, zero, {small.data(), 32, 0}, zero, {16, 2, 1}, gpu(0),
                         hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 3);
  hsa_rt_forget_host_block(small.data());

  // Fault injection applies as to linear copies.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY, 0, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION, 0, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, box, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  CHECK(dev[0] == 0);
  // A fault address in the second row only.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_COPIES_INTO, reinterpret_cast<uintptr_t>(dev + 64 + 2), 0);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, {4, 2, 1}, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  CHECK(dev[0] == 0 && dev[64] == 0);
  hsa_rt_inject(HSA_RT_FAULT_COPIES_INTO, 0, 0);
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, reinterpret_cast<uintptr_t>(dev + 64), 0);
  CHECK_STATUS(rect_copy(dev_ptr, zero, host_ptr, zero, {4, 2, 1}, gpu(0), hsaHostToDevice, done),
               HSA_STATUS_ERROR);
  hsa_rt_inject(HSA_RT_FAULT_H2D_COPY_INTO, 0, 0);

  // Strict async access: the copy agent must reach every row.
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, dev_ptr, {0, 1, 0}, {4, 1, 1}, gpu(1), hsaDeviceToDevice,
                         done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 4);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy(dev_ptr, zero, dev_ptr, {0, 1, 0}, {4, 1, 1}, gpu(0), hsaDeviceToDevice,
                         done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 4);
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 1);
  core().hsa_signal_destroy_fn(done);
  core().hsa_signal_destroy_fn(gate);
}

// ---- async signal handlers --------------------------------------------------------

struct HandlerLog {
  std::atomic<int> calls{0};
  std::atomic<hsa_signal_value_t> last{0};
  int stop_after = 1;  // returns false on this call
  hsa_signal_t rearm_signal{0};  // stored back to 1 by the handler, if set
};

bool log_handler(hsa_signal_value_t value, void* arg) {
  auto* log = static_cast<HandlerLog*>(arg);
  log->last = value;
  const int calls = ++log->calls;
  // Handlers may call signal entries: the runtime holds no lock meanwhile.
  if (log->rearm_signal.handle != 0) core().hsa_signal_store_relaxed_fn(log->rearm_signal, 1);
  return calls < log->stop_after;
}

// Polls (bounded) until pred holds.
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

void test_signal_async_handler() {
  hsa_rt_reset(1);
  CHECK(amd().hsa_amd_signal_async_handler_fn != nullptr);
  const auto async_handler = amd().hsa_amd_signal_async_handler_fn;
  const uint64_t armed_before = hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS);
  hsa_signal_t signal = make_signal(1);
  HandlerLog once;
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_EQ, 0, nullptr, &once),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(async_handler(hsa_signal_t{12345}, HSA_SIGNAL_CONDITION_EQ, 0, log_handler, &once),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  CHECK(hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before);

  // Fires once the condition holds, with the value seen; false ends it.
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_GTE, 5, log_handler, &once),
               HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(once.calls == 0);
  core().hsa_signal_store_screlease_fn(signal, 7);
  CHECK(eventually([&] { return once.calls == 1; }));
  CHECK(once.last == 7);
  CHECK(eventually([&] { return hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before; }));
  core().hsa_signal_store_relaxed_fn(signal, 9);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(once.calls == 1);

  // true re-arms with the same parameters: three rounds, then it ends.
  core().hsa_signal_store_relaxed_fn(signal, 1);
  HandlerLog thrice;
  thrice.stop_after = 3;
  thrice.rearm_signal = signal;
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_EQ, 0, log_handler, &thrice),
               HSA_STATUS_SUCCESS);
  for (int round = 1; round <= 3; ++round) {
    core().hsa_signal_store_relaxed_fn(signal, 0);
    CHECK(eventually([&] { return thrice.calls == round; }));
    CHECK(eventually([&] { return core().hsa_signal_load_relaxed_fn(signal) == 1; }));
  }
  CHECK(eventually([&] { return hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before; }));
  core().hsa_signal_store_relaxed_fn(signal, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(thrice.calls == 3);

  // Two registrations on one signal are independent; both fire.
  core().hsa_signal_store_relaxed_fn(signal, 1);
  HandlerLog first, second;
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_LT, 1, log_handler, &first),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(async_handler(signal, HSA_SIGNAL_CONDITION_NE, 1, log_handler, &second),
               HSA_STATUS_SUCCESS);
  core().hsa_signal_store_relaxed_fn(signal, -2);
  CHECK(eventually([&] { return first.calls == 1 && second.calls == 1; }));
  CHECK(first.last == -2 && second.last == -2);

  // A signal destroyed while a handler is armed drops the handler uncalled;
  // handlers survive reset like signals.
  hsa_signal_t doomed = make_signal(1);
  HandlerLog never;
  CHECK_STATUS(async_handler(doomed, HSA_SIGNAL_CONDITION_EQ, 0, log_handler, &never),
               HSA_STATUS_SUCCESS);
  CHECK(eventually([&] { return hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before + 1; }));
  hsa_rt_reset(1);
  CHECK(hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before + 1);
  CHECK_STATUS(core().hsa_signal_destroy_fn(doomed), HSA_STATUS_SUCCESS);
  CHECK(eventually([&] { return hsa_rt_count(HSA_RT_COUNT_SIGNAL_HANDLERS) == armed_before; }));
  CHECK(never.calls == 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_INVALID_SIGNAL_USES) == 0);
  core().hsa_signal_destroy_fn(signal);
}

#if HSA_RT_HAVE_VMEM

// ---- copies on an engine ------------------------------------------------------------

void test_async_copy_on_engine() {
  hsa_rt_reset(2);
  const auto on_engine = amd().hsa_amd_memory_async_copy_on_engine_fn;
  CHECK(on_engine != nullptr);
  char* dev = static_cast<char*>(device_alloc(4096));
  std::vector<char> host(4096, 'e');
  hsa_signal_t done = make_signal(1);
  const uint64_t accepted = hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 4096, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(dev[0] == 'e' && dev[4095] == 'e');
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1 && hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 1);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(on_engine(host.data(), cpu(), dev, gpu(0), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_7, true),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));

  // The engine: one bit, one of the GPU's 8; none for CPU to CPU.
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         static_cast<hsa_amd_sdma_engine_id_t>(0), false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         static_cast<hsa_amd_sdma_engine_id_t>(0x3), false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_8, false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  std::vector<char> other(16);
  CHECK_STATUS(on_engine(other.data(), cpu(), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR);
  // The shared checks first, size 0 before the engine.
  const uint64_t violations = hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS);
  CHECK_STATUS(on_engine(nullptr, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 1);
  CHECK_STATUS(on_engine(dev, hsa_agent_t{9}, host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, hsa_signal_t{0},
                         HSA_AMD_SDMA_ENGINE_0, false),
               HSA_STATUS_ERROR_INVALID_SIGNAL);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 0, 0, nullptr, done,
                         static_cast<hsa_amd_sdma_engine_id_t>(0), false),
               HSA_STATUS_SUCCESS);
  // Faults and violations as for hsa_amd_memory_async_copy.
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY, 0, 1);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_1, false),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_ASYNC_COPY_COMPLETION, 0, 1);
  CHECK_STATUS(on_engine(dev, gpu(0), host.data(), cpu(), 16, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_1, false),
               HSA_STATUS_SUCCESS);
  CHECK(core().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 0, 5000000000ull,
                                            HSA_WAIT_STATE_BLOCKED) == -1);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(on_engine(dev + 4000, gpu(0), host.data(), cpu(), 200, 0, nullptr, done,
                         HSA_AMD_SDMA_ENGINE_1, false),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 2);
  CHECK(hsa_rt_count(HSA_RT_COUNT_ASYNC_COPIES) == accepted + 4);
  core().hsa_signal_destroy_fn(done);
}

// ---- virtual memory -------------------------------------------------------------------

constexpr size_t kPage = 4096;

void* reserve(size_t size) {
  void* va = nullptr;
  CHECK_STATUS(amd().hsa_amd_vmem_address_reserve_fn(&va, size, 0, 0), HSA_STATUS_SUCCESS);
  return va;
}

hsa_amd_vmem_alloc_handle_t create_handle(size_t size, uint32_t gpu_index = 0,
                                          hsa_rt_pool_kind_t kind = HSA_RT_POOL_DEVICE_COARSE) {
  hsa_amd_vmem_alloc_handle_t handle{0};
  CHECK_STATUS(amd().hsa_amd_vmem_handle_create_fn(pool(gpu(gpu_index), kind), size,
                                                   MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_SUCCESS);
  return handle;
}

hsa_status_t map(void* va, size_t size, hsa_amd_vmem_alloc_handle_t handle) {
  return amd().hsa_amd_vmem_map_fn(va, size, 0, handle, 0);
}

hsa_status_t set_access(void* va, size_t size, hsa_agent_t agent,
                        hsa_access_permission_t permission) {
  const hsa_amd_memory_access_desc_t desc{permission, agent};
  return amd().hsa_amd_vmem_set_access_fn(va, size, &desc, 1);
}

// The permission get_access reports, or 99 when it fails.
int access_of(void* va, hsa_agent_t agent) {
  hsa_access_permission_t permission = HSA_ACCESS_PERMISSION_RW;
  if (amd().hsa_amd_vmem_get_access_fn(va, &permission, agent) != HSA_STATUS_SUCCESS) return 99;
  return permission;
}

// What get_access answers for an agent never given access on this
// generation: NONE from the 6.4 headers on, else INVALID_ALLOCATION (99).
constexpr int kNeverGranted = HSA_RT_VMEM_SET_ACCESS_MERGES ? HSA_ACCESS_PERMISSION_NONE : 99;

// The protection of the CPU view at ptr as /proc/self/maps shows it
// ("rw-s"), or "" when nothing is mapped there.
std::string view_protection(const void* ptr) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return "?";
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  char line[512];
  std::string found;
  while (found.empty() && std::fgets(line, sizeof(line), maps) != nullptr) {
    unsigned long long begin = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line, "%llx-%llx %7s", &begin, &end, perms) == 3 && address >= begin &&
        address < end) {
      found = perms;
    }
  }
  std::fclose(maps);
  return found;
}

void test_vmem_lifecycle() {
  hsa_rt_reset(2);
  CHECK(hsa_rt_vmem_supported());
  const AmdExtTable& t = amd();
  // Reservations.
  void* va = nullptr;
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(nullptr, kPage, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&va, 0, 0, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&va, kPage + 1, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  char* base = static_cast<char*>(reserve(8 * kPage));
  CHECK(base != nullptr && reinterpret_cast<uintptr_t>(base) % kPage == 0);
  CHECK(view_protection(base) == "---p");
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 1);
  // An address hint that is free is honoured; an odd one is ignored.
  void* hinted = reserve(kPage);
  const uint64_t wish = reinterpret_cast<uintptr_t>(hinted);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(hinted, kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&hinted, kPage, wish, 0), HSA_STATUS_SUCCESS);
  CHECK(reinterpret_cast<uintptr_t>(hinted) == wish);
  void* odd = nullptr;
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_fn(&odd, kPage, wish + 1, 0), HSA_STATUS_SUCCESS);
  CHECK(odd != nullptr && reinterpret_cast<uintptr_t>(odd) % kPage == 0);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(odd, kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(hinted, kPage), HSA_STATUS_SUCCESS);
#if HSA_RT_HAVE_VMEM_RESERVE_ALIGN
  void* aligned = nullptr;
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_align_fn(&aligned, kPage, 0, size_t{1} << 21, 0),
               HSA_STATUS_SUCCESS);
  CHECK(reinterpret_cast<uintptr_t>(aligned) % (size_t{1} << 21) == 0);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_align_fn(&va, kPage, 0, 3 * kPage, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_reserve_align_fn(&va, kPage, 0, 512, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(aligned, kPage), HSA_STATUS_SUCCESS);
#else
  CHECK(t.hsa_amd_vmem_address_reserve_fn != nullptr);
#endif
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 1);

  // Handles: device pools only, 4096-byte multiples, within the device.
  hsa_amd_vmem_alloc_handle_t handle{0};
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, 0, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, kPage + 512, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, kPage,
                                               static_cast<hsa_amd_memory_type_t>(2), 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), kPage,
                                               MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(hsa_amd_memory_pool_t{gpu(0).handle}, kPage,
                                               MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, kPage, MEMORY_TYPE_NONE, 0, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, 17 * kGiB, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 0);
  handle = create_handle(4 * kPage);
  hsa_amd_vmem_alloc_handle_t pinned{0};
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(pool(gpu(1), HSA_RT_POOL_DEVICE_FINE), kPage,
                                               MEMORY_TYPE_PINNED, 0, &pinned),
               HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK(memory_avail(0) == 16 * kGiB - 4 * kPage && memory_avail(1) == 16 * kGiB - kPage);
  hsa_amd_memory_pool_t owner{0};
  hsa_amd_memory_type_t type = MEMORY_TYPE_PINNED;
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(handle, &owner, &type),
               HSA_STATUS_SUCCESS);
  CHECK(owner.handle == coarse.handle && type == MEMORY_TYPE_NONE);
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(pinned, &owner, &type),
               HSA_STATUS_SUCCESS);
  CHECK(owner.handle == pool(gpu(1), HSA_RT_POOL_DEVICE_FINE).handle &&
        type == MEMORY_TYPE_PINNED);
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(
                   hsa_amd_vmem_alloc_handle_t{coarse.handle}, &owner, &type),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn(handle, nullptr, &type),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Maps: inside one reservation, no overlap, page-aligned, a known handle.
  CHECK_STATUS(map(nullptr, kPage, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, 0, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base + 6 * kPage, 4 * kPage, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  std::vector<char> heap(2 * kPage);
  CHECK_STATUS(map(heap.data(), kPage, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base + 100, kPage, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, kPage, hsa_amd_vmem_alloc_handle_t{12345}),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, 8 * kPage, pinned), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(map(base, 4 * kPage, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(base + 3 * kPage, kPage, pinned), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 1);
  // Nobody has access yet.
  CHECK(view_protection(base) == "---s");
  CHECK(access_of(base, gpu(0)) == kNeverGranted);
  CHECK(access_of(base, cpu()) == 99);  // get_access wants a GPU agent
  CHECK(access_of(base + 4 * kPage, gpu(0)) == 99);  // not mapped
  CHECK(access_of(heap.data(), gpu(0)) == 99);

  // The CPU view follows the CPU agent's permission.
  CHECK_STATUS(set_access(base, 4 * kPage, cpu(), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK(view_protection(base) == "rw-s");
  base[0] = 'v';
  base[4 * kPage - 1] = 'w';
  CHECK_STATUS(set_access(base, 4 * kPage, cpu(), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  CHECK(view_protection(base) == "r--s");
  CHECK(base[0] == 'v');

  // Unmap wants a mapping's start and its size; address_free no mapping.
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(base + kPage, 3 * kPage),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(base, 2 * kPage), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(nullptr, kPage), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * kPage), HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 4 * kPage), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base + kPage, 7 * kPage),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  const char* text = nullptr;
  CHECK_STATUS(core().hsa_status_string_fn(HSA_STATUS_ERROR_RESOURCE_FREE, &text),
               HSA_STATUS_SUCCESS);
  CHECK(text != nullptr && std::strstr(text, "RESOURCE_FREE") != nullptr);

  // Releasing a mapped handle: it lives (and counts) until the last unmap.
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(memory_avail(0) == 16 * kGiB - 4 * kPage);
  CHECK(base[4 * kPage - 1] == 'w');
  // retain_alloc_handle: at a mapping's start only; needs its own release.
  hsa_amd_vmem_alloc_handle_t retained{0};
  CHECK_STATUS(t.hsa_amd_vmem_retain_alloc_handle_fn(&retained, base + kPage),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(t.hsa_amd_vmem_retain_alloc_handle_fn(&retained, base), HSA_STATUS_SUCCESS);
  CHECK(retained.handle == handle.handle);
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(base, 4 * kPage), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  // The range is reserved memory again; the handle keeps its bytes.
  CHECK(view_protection(base) == "---p");
  CHECK_STATUS(map(base + 4 * kPage, 4 * kPage, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(base + 4 * kPage, 4 * kPage, cpu(), HSA_ACCESS_PERMISSION_RW),
               HSA_STATUS_SUCCESS);
  CHECK(base[4 * kPage] == 'v' && base[8 * kPage - 1] == 'w');
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(retained), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(base + 4 * kPage, 4 * kPage), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 1);
  CHECK(memory_avail(0) == 16 * kGiB);
  CHECK_STATUS(map(base, kPage, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);  // gone
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(pinned), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(pinned), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 0 && memory_avail(1) == 16 * kGiB);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(t.hsa_amd_vmem_address_free_fn(base, 8 * kPage),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);

  // Capacity: handles and allocations share the device.
  hsa_amd_vmem_alloc_handle_t big = create_handle(12 * kGiB);
  CHECK(memory_avail(0) == 4 * kGiB);
  void* ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 5 * kGiB, 0, &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_amd_vmem_alloc_handle_t rest = create_handle(4 * kGiB, 0, HSA_RT_POOL_DEVICE_FINE);
  CHECK(memory_avail(0) == 0);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, kPage, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 1, 0, &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(rest), HSA_STATUS_SUCCESS);
  CHECK(memory_avail(0) == 4 * kGiB);

  // Reset releases every reservation, mapping and handle.
  char* left = static_cast<char*>(reserve(2 * kPage));
  CHECK_STATUS(map(left, kPage, create_handle(kPage, 1)), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 1 && hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  hsa_rt_reset(2);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 0 &&
        hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
  CHECK(view_protection(left).empty());
  CHECK(memory_avail(0) == 16 * kGiB && memory_avail(1) == 16 * kGiB);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(big), HSA_STATUS_ERROR_INVALID_ALLOCATION);
}

void test_vmem_set_access() {
  hsa_rt_reset(2);
  const AmdExtTable& t = amd();
  char* base = static_cast<char*>(reserve(4 * kPage));
  char* a = base;
  char* b = base + kPage;
  char* c = base + 3 * kPage;  // after a gap
  CHECK_STATUS(map(a, kPage, create_handle(kPage)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(b, kPage, create_handle(kPage)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(c, kPage, create_handle(kPage)), HSA_STATUS_SUCCESS);

  // Argument checks, before anything changes.
  const hsa_amd_memory_access_desc_t good{HSA_ACCESS_PERMISSION_RW, gpu(0)};
  const hsa_amd_memory_access_desc_t bad_agent[] = {good, {HSA_ACCESS_PERMISSION_RW, {777}}};
  hsa_amd_memory_access_desc_t bad_permission[] = {good, {HSA_ACCESS_PERMISSION_RO, gpu(1)}};
  const uint32_t seven = 7;  // not a permission (written as bytes: no such enumerator)
  std::memcpy(&bad_permission[1].permissions, &seven, sizeof(seven));
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(nullptr, kPage, &good, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, kPage, nullptr, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, kPage, &good, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, kPage, bad_agent, 2),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, kPage, bad_permission, 2),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(access_of(a, gpu(0)) == kNeverGranted);
  CHECK(access_of(a, hsa_agent_t{777}) == 99);

  CHECK_STATUS(set_access(a, kPage, gpu(0), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK(access_of(a, gpu(0)) == HSA_ACCESS_PERMISSION_RW);
  CHECK(access_of(a + 100, gpu(0)) == HSA_ACCESS_PERMISSION_RW);  // anywhere inside
  CHECK(access_of(a, gpu(1)) == kNeverGranted);
  CHECK_STATUS(set_access(a, kPage, gpu(1), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  CHECK(access_of(a, gpu(1)) == HSA_ACCESS_PERMISSION_RO);
#if HSA_RT_VMEM_SET_ACCESS_MERGES
  // 6.4+: merge. gpu(0) keeps its access; a range may span contiguous
  // mappings; a gap or a range leaving the reservation is refused.
  CHECK(access_of(a, gpu(0)) == HSA_ACCESS_PERMISSION_RW);
  CHECK_STATUS(set_access(a, 2 * kPage, cpu(), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK(view_protection(a) == "rw-s" && view_protection(b) == "rw-s");
  CHECK(access_of(a, gpu(0)) == HSA_ACCESS_PERMISSION_RW);
  CHECK_STATUS(set_access(a, kPage + 1, gpu(1), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK(access_of(b, gpu(1)) == HSA_ACCESS_PERMISSION_RW);  // whole mappings
  CHECK_STATUS(set_access(a, 4 * kPage, gpu(0), HSA_ACCESS_PERMISSION_RO),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(b, 4 * kPage, gpu(0), HSA_ACCESS_PERMISSION_RO),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(set_access(a + kPage / 2, kPage, gpu(0), HSA_ACCESS_PERMISSION_RO),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(a, 0, gpu(0), HSA_ACCESS_PERMISSION_RO),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(access_of(a, gpu(0)) == HSA_ACCESS_PERMISSION_RW);  // unchanged by the refusals
  // Explicit NONE is a permission like the others.
  CHECK_STATUS(set_access(a, kPage, gpu(0), HSA_ACCESS_PERMISSION_NONE), HSA_STATUS_SUCCESS);
  CHECK(access_of(a, gpu(0)) == HSA_ACCESS_PERMISSION_NONE);
  CHECK(access_of(a, gpu(1)) == HSA_ACCESS_PERMISSION_RW);
#else
  // 6.0 - 6.2: replace. gpu(0), not listed, lost its access; the range must
  // be exactly one mapping.
  CHECK(access_of(a, gpu(0)) == 99);
  CHECK_STATUS(set_access(a, 2 * kPage, cpu(), HSA_ACCESS_PERMISSION_RW),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(a, kPage / 2, cpu(), HSA_ACCESS_PERMISSION_RW),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(set_access(a + 64, kPage, cpu(), HSA_ACCESS_PERMISSION_RW),
               HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK(access_of(a, gpu(1)) == HSA_ACCESS_PERMISSION_RO);  // unchanged by the refusals
  const hsa_amd_memory_access_desc_t both[] = {{HSA_ACCESS_PERMISSION_RW, cpu()},
                                               {HSA_ACCESS_PERMISSION_RW, gpu(0)}};
  CHECK_STATUS(t.hsa_amd_vmem_set_access_fn(a, kPage, both, 2), HSA_STATUS_SUCCESS);
  CHECK(view_protection(a) == "rw-s" && view_protection(b) == "---s");
  CHECK(access_of(a, gpu(0)) == HSA_ACCESS_PERMISSION_RW && access_of(a, gpu(1)) == 99);
  // The CPU loses its view when it is not listed.
  CHECK_STATUS(set_access(a, kPage, gpu(1), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK(view_protection(a) == "---s" && access_of(a, gpu(0)) == 99);
#endif
  // Other mappings are untouched by a call on one.
  CHECK(access_of(c, gpu(0)) == kNeverGranted);
  hsa_rt_reset(2);
}

void test_vmem_aliasing() {
  hsa_rt_reset(2);
  // One handle at two addresses (in two reservations): the same bytes.
  char* first = static_cast<char*>(reserve(2 * kPage));
  char* second = static_cast<char*>(reserve(2 * kPage));
  hsa_amd_vmem_alloc_handle_t handle = create_handle(2 * kPage);
  CHECK_STATUS(map(first, 2 * kPage, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(second, 2 * kPage, handle), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 2 && hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 1);
  CHECK(memory_avail(0) == 16 * kGiB - 2 * kPage);  // one handle's memory
  CHECK_STATUS(set_access(first, 2 * kPage, cpu(), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(second, 2 * kPage, cpu(), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  std::memcpy(first + 5000, "alias", 6);
  CHECK(std::memcmp(second + 5000, "alias", 6) == 0);
  // A copy into one view shows in the other; permissions are per mapping.
  CHECK_STATUS(core().hsa_memory_copy_fn(first, "copied", 7), HSA_STATUS_SUCCESS);
  CHECK(std::strcmp(second, "copied") == 0);
  CHECK(access_of(first, gpu(0)) == kNeverGranted);
  const hsa_amd_memory_access_desc_t second_access[] = {{HSA_ACCESS_PERMISSION_RO, cpu()},
                                                        {HSA_ACCESS_PERMISSION_RW, gpu(0)}};
  CHECK_STATUS(amd().hsa_amd_vmem_set_access_fn(second, 2 * kPage, second_access, 2),
               HSA_STATUS_SUCCESS);
  CHECK(access_of(second, gpu(0)) == HSA_ACCESS_PERMISSION_RW);
  CHECK(access_of(first, gpu(0)) == kNeverGranted);
  // A mapping of part of a handle shows its first bytes.
  char* third = static_cast<char*>(reserve(kPage));
  CHECK_STATUS(map(third, kPage, handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(third, kPage, cpu(), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  CHECK(std::strcmp(third, "copied") == 0);
  // Released, the handle lives until its last mapping goes.
  CHECK_STATUS(amd().hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_vmem_unmap_fn(first, 2 * kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_vmem_unmap_fn(third, kPage), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 1 && std::strcmp(second, "copied") == 0);
  CHECK_STATUS(amd().hsa_amd_vmem_unmap_fn(second, 2 * kPage), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 0 && memory_avail(0) == 16 * kGiB);
  hsa_rt_reset(2);
}

void test_vmem_copies() {
  hsa_rt_reset(2);
  char* base = static_cast<char*>(reserve(8 * kPage));
  char* rw = base;                  // gpu(0) READ_WRITE, no CPU access
  char* ro = base + 2 * kPage;      // gpu(1) READ_ONLY
  char* none = base + 3 * kPage;    // nobody
  char* unmapped = base + 5 * kPage;
  char* wo = base + 6 * kPage;      // gpu(0) WRITE_ONLY
  CHECK_STATUS(map(rw, 2 * kPage, create_handle(2 * kPage)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(ro, kPage, create_handle(kPage)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(none, 2 * kPage, create_handle(2 * kPage)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(map(wo, kPage, create_handle(kPage)), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(rw, 2 * kPage, gpu(0), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(ro, kPage, gpu(1), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  CHECK_STATUS(set_access(wo, kPage, gpu(0), HSA_ACCESS_PERMISSION_WO), HSA_STATUS_SUCCESS);
  CHECK(view_protection(rw) == "---s");
  std::vector<char> host(2 * kPage, 'h');
  std::vector<char> back(2 * kPage, 0);
  auto copy = [](void* dst, const void* src, size_t size) {
    return core().hsa_memory_copy_fn(dst, src, size);
  };

  // Accessible mappings are device memory; the engine copies through the
  // handle's memory, so the CPU view's PROT_NONE never faults it.
  CHECK_STATUS(copy(rw, host.data(), 2 * kPage), HSA_STATUS_SUCCESS);
  CHECK_STATUS(copy(back.data(), rw + kPage, kPage), HSA_STATUS_SUCCESS);
  CHECK(back[0] == 'h' && back[kPage - 1] == 'h');
  CHECK(copies(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1 && copies(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);
  CHECK_STATUS(copy(back.data(), ro, 64), HSA_STATUS_SUCCESS);      // read-only: a source
  CHECK_STATUS(copy(wo, host.data(), 64), HSA_STATUS_SUCCESS);      // write-only: a destination
  CHECK_STATUS(copy(rw + 100, rw, 100), HSA_STATUS_SUCCESS);        // within one mapping
  char* pool_memory = static_cast<char*>(device_alloc(kPage));
  CHECK_STATUS(copy(pool_memory, rw, kPage), HSA_STATUS_SUCCESS);
  CHECK(pool_memory[kPage - 1] == 'h');
  CHECK(copies(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 2);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);

  // Everything else touching reserved address space: a counted violation,
  // nothing copied.
  uint64_t violations = 0;
  std::memset(back.data(), 'z', back.size());
  auto refused = [&](void* dst, const void* src, size_t size) {
    const bool ok = copy(dst, src, size) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
                    hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == ++violations;
    return ok;
  };
  CHECK(refused(ro, host.data(), 64));                 // read-only destination
  CHECK(refused(back.data(), wo, 64));                 // write-only source
  CHECK(refused(none, host.data(), 64));               // nobody may access
  CHECK(refused(back.data(), none + kPage, 64));
  CHECK(refused(unmapped, host.data(), 64));           // reserved, not mapped
  CHECK(refused(back.data(), unmapped, 64));
  CHECK(refused(rw + kPage, host.data(), 2 * kPage));  // runs past the mapping
  CHECK(refused(back.data(), rw + 2 * kPage - 8, 16)); // into the next one
  CHECK(refused(back.data(), base - 8, 16));           // host range running into it
  CHECK(refused(pool_memory, unmapped, 16));
  CHECK(back[0] == 'z' && back[63] == 'z');  // nothing was copied
  // A mapping given access later becomes copyable; one unmapped stops being.
  CHECK_STATUS(set_access(none, 2 * kPage, gpu(1), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK_STATUS(copy(none, host.data(), 64), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_vmem_unmap_fn(none, 2 * kPage), HSA_STATUS_SUCCESS);
  CHECK(refused(none, host.data(), 64));

  // Asynchronous copies: the same rules at execution time.
  hsa_signal_t done = make_signal(1);
  std::memset(back.data(), 0, back.size());
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), rw, gpu(0), 128, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(back[127] == 'h' && hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(unmapped, gpu(0), host.data(), cpu(), 128, 0,
                                                  nullptr, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == ++violations);
  // In strict mode the copying agent itself needs the permission (staging:
  // system memory every GPU reaches).
  void* staging = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_FINE), 4096,
                                             &staging),
               HSA_STATUS_SUCCESS);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(rw, gpu(0), staging, cpu(), 64, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(staging, cpu(), ro, gpu(0), 64, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);  // gpu(0) has no permission on ro (gpu(1) has)
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == ++violations);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, false);
  // A rect copy whose rows are all inside the mapping, and one whose last row
  // leaves it.
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy({rw, 1024, 0}, {0, 0, 0}, {host.data(), 64, 0}, {0, 0, 0}, {64, 8, 1},
                         gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations);
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(rect_copy({rw, 4096, 0}, {0, 0, 0}, {host.data(), 64, 0}, {0, 0, 0}, {64, 3, 1},
                         gpu(0), hsaHostToDevice, done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == ++violations);
  core().hsa_signal_destroy_fn(done);
  hsa_rt_reset(2);
}

// A pointer-info alloc that counts its calls.
int g_info_allocs = 0;
void* counting_alloc(size_t size) {
  ++g_info_allocs;
  return std::malloc(size == 0 ? 1 : size);
}

void test_vmem_pointer_info() {
  hsa_rt_reset(2);
  char* base = static_cast<char*>(reserve(4 * kPage));
  CHECK_STATUS(map(base + kPage, 2 * kPage, create_handle(2 * kPage, 1)), HSA_STATUS_SUCCESS);
  char* mapped = base + kPage;
  const hsa_amd_pointer_info_t unmapped_info = pointer_info(base + 10);
  const hsa_amd_pointer_info_t mapped_info = pointer_info(mapped + 100);
  CHECK(pointer_info(base + 4 * kPage).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK(pointer_info(base - 1).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  uint32_t count = 99;
  hsa_agent_t* agents = nullptr;
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
#if HSA_RT_HAVE_POINTER_TYPE_HSA_VMEM
  // 7.x: a mapping answers for itself.
  CHECK(mapped_info.type == HSA_EXT_POINTER_TYPE_HSA_VMEM);
  CHECK(mapped_info.agentBaseAddress == mapped + 100 && mapped_info.hostBaseAddress == mapped + 100);
  CHECK(mapped_info.sizeInBytes == 2 * kPage);
  CHECK(mapped_info.agentOwner.handle == gpu(1).handle);
  CHECK(mapped_info.global_flags == 0);
#if HSA_RT_HAVE_POINTER_INFO_REGISTERED
  CHECK(mapped_info.registered && unmapped_info.registered);
#endif
  CHECK(unmapped_info.type == HSA_EXT_POINTER_TYPE_RESERVED_ADDR);
  CHECK(unmapped_info.agentBaseAddress == nullptr && unmapped_info.hostBaseAddress == base);
  CHECK(unmapped_info.sizeInBytes == 4 * kPage && unmapped_info.agentOwner.handle == 0);
  // Accessible agents: those whose permission is not NONE; none: no alloc.
  g_info_allocs = 0;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(mapped, &info, counting_alloc, &count, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(count == 0 && agents == nullptr && g_info_allocs == 0);
  CHECK_STATUS(set_access(mapped, 2 * kPage, gpu(0), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(mapped, &info, counting_alloc, &count, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(count == 1 && agents != nullptr && agents[0].handle == gpu(0).handle);
  std::free(agents);
  agents = nullptr;
  count = 99;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(base, &info, counting_alloc, &count, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(count == 0 && agents == nullptr);
#else
  // 6.x: the reservation's object, mapped or not, as type 5.
  for (const hsa_amd_pointer_info_t& answer : {unmapped_info, mapped_info}) {
    CHECK(answer.type == static_cast<hsa_amd_pointer_type_t>(5));
    CHECK(static_cast<int>(answer.type) == 5);
    CHECK(answer.agentBaseAddress == base && answer.hostBaseAddress == nullptr);
    CHECK(answer.sizeInBytes == 4 * kPage);
    CHECK(answer.agentOwner.handle == cpu().handle);
    CHECK(answer.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED);
    CHECK(answer.userData == nullptr);
  }
  // No mapped nodes: an empty list, alloc(0) still called (as ROCr 6.x).
  CHECK_STATUS(set_access(mapped, 2 * kPage, gpu(0), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  g_info_allocs = 0;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(mapped, &info, counting_alloc, &count, &agents),
               HSA_STATUS_SUCCESS);
  CHECK(count == 0 && g_info_allocs == 1);
  std::free(agents);
#endif
  // The pool allocation interfaces do not know vmem addresses.
  CHECK_STATUS(amd().hsa_amd_pointer_info_set_userdata_fn(mapped, &count),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(mapped), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  hsa_rt_reset(2);
}

void test_vmem_faults() {
  hsa_rt_reset(2);
  const AmdExtTable& t = amd();
  char* base = static_cast<char*>(reserve(4 * kPage));
  hsa_amd_vmem_alloc_handle_t handle{0};
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);

  // HANDLE_CREATE: the n-th valid call fails with OUT_OF_RESOURCES.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE, 0, 2);
  handle = create_handle(kPage);
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, 0, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);  // invalid calls do not count
  hsa_amd_vmem_alloc_handle_t failed{0};
  CHECK_STATUS(t.hsa_amd_vmem_handle_create_fn(coarse, kPage, MEMORY_TYPE_NONE, 0, &failed),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(failed.handle == 0 && hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 1);
  CHECK(memory_avail(0) == 16 * kGiB - kPage);
  hsa_amd_vmem_alloc_handle_t spare = create_handle(kPage);  // disarmed again

  // MAP.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_MAP, 0, 1);
  CHECK_STATUS(map(base + 1, kPage, handle), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(map(base, kPage, handle), HSA_STATUS_ERROR);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && view_protection(base) == "---p");
  CHECK_STATUS(map(base, kPage, handle), HSA_STATUS_SUCCESS);

  // SET_ACCESS: nothing changes.
  CHECK_STATUS(set_access(base, kPage, gpu(0), HSA_ACCESS_PERMISSION_RO), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_SET_ACCESS, 0, 1);
  CHECK_STATUS(set_access(base, kPage, cpu(), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_ERROR);
  CHECK(access_of(base, gpu(0)) == HSA_ACCESS_PERMISSION_RO && view_protection(base) == "---s");
  CHECK_STATUS(set_access(base, kPage, cpu(), HSA_ACCESS_PERMISSION_RW), HSA_STATUS_SUCCESS);
  CHECK(view_protection(base) == "rw-s");
  base[0] = 'k';

  // UNMAP: still mapped, bytes intact.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_UNMAP, 0, 1);
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(base, kPage), HSA_STATUS_ERROR);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 1 && base[0] == 'k');

  // HANDLE_RELEASE: still referenced; the next release works.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_HANDLE_RELEASE, 0, 1);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(spare), HSA_STATUS_ERROR);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 2);
  CHECK_STATUS(t.hsa_amd_vmem_handle_release_fn(spare), HSA_STATUS_SUCCESS);
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 1);

  // 0 disarms; reset disarms all.
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_UNMAP, 0, 1);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_UNMAP, 0, 0);
  CHECK_STATUS(t.hsa_amd_vmem_unmap_fn(base, kPage), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_HANDLE_CREATE, 0, 1);
  hsa_rt_reset(2);
  handle = create_handle(kPage);
  CHECK(handle.handle != 0);
  hsa_rt_reset(2);
}

void test_vmem_table_entries() {
  const AmdExtTable& t = amd();
  CHECK(t.hsa_amd_memory_async_copy_on_engine_fn != nullptr);
  CHECK(t.hsa_amd_vmem_address_reserve_fn != nullptr && t.hsa_amd_vmem_address_free_fn != nullptr);
  CHECK(t.hsa_amd_vmem_handle_create_fn != nullptr && t.hsa_amd_vmem_handle_release_fn != nullptr);
  CHECK(t.hsa_amd_vmem_map_fn != nullptr && t.hsa_amd_vmem_unmap_fn != nullptr);
  CHECK(t.hsa_amd_vmem_set_access_fn != nullptr && t.hsa_amd_vmem_get_access_fn != nullptr);
  CHECK(t.hsa_amd_vmem_retain_alloc_handle_fn != nullptr);
  CHECK(t.hsa_amd_vmem_get_alloc_properties_from_handle_fn != nullptr);
  CHECK(t.hsa_amd_vmem_export_shareable_handle_fn == nullptr);
  CHECK(t.hsa_amd_vmem_import_shareable_handle_fn == nullptr);
  CHECK(t.hsa_amd_memory_copy_engine_status_fn == nullptr);
#if HSA_RT_HAVE_VMEM_RESERVE_ALIGN
  CHECK(t.hsa_amd_vmem_address_reserve_align_fn != nullptr);
#endif
}

#else  // !HSA_RT_HAVE_VMEM

void test_vmem_table_entries() {
  // 5.2 headers: no vmem API; the control interface says so and counts nothing.
  CHECK(!hsa_rt_vmem_supported());
  CHECK(hsa_rt_count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && hsa_rt_count(HSA_RT_COUNT_VMEM_HANDLES) == 0 &&
        hsa_rt_count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_MAP, 0, 1);
  hsa_rt_reset(2);
}

#endif  // HSA_RT_HAVE_VMEM

// ---- concurrency ------------------------------------------------------------

// ---- ISAs -------------------------------------------------------------------

hsa_status_t collect_isa(hsa_isa_t isa, void* data) {
  static_cast<std::vector<hsa_isa_t>*>(data)->push_back(isa);
  return HSA_STATUS_SUCCESS;
}

std::string isa_name(hsa_isa_t isa) {
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_isa_get_info_alt_fn(isa, HSA_ISA_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  std::vector<char> name(length + 8, 'x');
  CHECK_STATUS(core().hsa_isa_get_info_alt_fn(isa, HSA_ISA_INFO_NAME, name.data()),
               HSA_STATUS_SUCCESS);
  // NAME_LENGTH counts the NUL, which NAME writes (ROCr's Isa::GetInfo).
  CHECK(length > 0 && name[length - 1] == '\0' && name[length] == 'x');
  return std::string(name.data());
}

std::vector<hsa_isa_t> agent_isas(hsa_agent_t agent) {
  std::vector<hsa_isa_t> isas;
  CHECK_STATUS(core().hsa_agent_iterate_isas_fn(agent, collect_isa, &isas), HSA_STATUS_SUCCESS);
  return isas;
}

void test_isas() {
  hsa_rt_reset(2);
  const char* kGfx942 = "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-";
  std::vector<hsa_isa_t> isas = agent_isas(gpu(0));
  CHECK(isas.size() == 1);
  if (isas.size() == 1) CHECK(isa_name(isas[0]) == kGfx942);
  // One handle per ISA, shared by agents (ROCr's ISA objects are global).
  CHECK(agent_isas(gpu(1)).size() == 1 && agent_isas(gpu(1))[0].handle == isas[0].handle);
  hsa_isa_t info_isa{0};
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_ISA, &info_isa),
               HSA_STATUS_SUCCESS);
  CHECK(info_isa.handle == isas[0].handle);
  // ROCr's CPU agent has no ISA: the walk calls nothing.
  CHECK(agent_isas(cpu()).empty());
  CHECK_STATUS(core().hsa_agent_get_info_fn(cpu(), HSA_AGENT_INFO_ISA, &info_isa),
               HSA_STATUS_SUCCESS);
  CHECK(info_isa.handle == 0);
  CHECK_STATUS(core().hsa_agent_iterate_isas_fn(gpu(0), nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_agent_iterate_isas_fn(hsa_agent_t{5}, collect_isa, &isas),
               HSA_STATUS_ERROR_INVALID_AGENT);
  uint32_t value = 0;
  CHECK_STATUS(core().hsa_isa_get_info_alt_fn(hsa_isa_t{7}, HSA_ISA_INFO_NAME_LENGTH, &value),
               HSA_STATUS_ERROR_INVALID_ISA);
  CHECK_STATUS(core().hsa_isa_get_info_alt_fn(isas[0], HSA_ISA_INFO_WORKGROUP_MAX_SIZE, &value),
               HSA_STATUS_SUCCESS);
  CHECK(value == 1024);

  // The test hook: another ISA (and agent name), or none.
  CHECK(hsa_rt_set_agent_isa(gpu(1), "amdgcn-amd-amdhsa--gfx1100"));
  isas = agent_isas(gpu(1));
  CHECK(isas.size() == 1);
  if (isas.size() == 1) CHECK(isa_name(isas[0]) == "amdgcn-amd-amdhsa--gfx1100");
  char name[64] = {};
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(1), HSA_AGENT_INFO_NAME, name), HSA_STATUS_SUCCESS);
  CHECK(std::strcmp(name, "gfx1100") == 0);
  CHECK(hsa_rt_set_agent_isa(gpu(1), nullptr));
  CHECK(agent_isas(gpu(1)).empty());
  CHECK(!hsa_rt_set_agent_isa(hsa_agent_t{5}, nullptr));

  // Queue sizes, as ROCr's GpuAgent / CpuAgent report them.
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_QUEUE_MIN_SIZE, &value),
               HSA_STATUS_SUCCESS);
  CHECK(value == 0x40);
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_QUEUE_MAX_SIZE, &value),
               HSA_STATUS_SUCCESS);
  CHECK(value == 0x20000);
  CHECK_STATUS(core().hsa_agent_get_info_fn(cpu(), HSA_AGENT_INFO_QUEUE_MAX_SIZE, &value),
               HSA_STATUS_SUCCESS);
  CHECK(value == 0);
  hsa_rt_reset(2);
  CHECK(agent_isas(gpu(1)).size() == 1);  // reset brings the default back
}

// ---- AMDGPU code objects --------------------------------------------------------

// A minimal AMDGPU code object as the loader sees clang's: ELF64 ET_DYN,
// EM_AMDGPU, OS ABI AMDGPU_HSA; one section of 64-byte kernel descriptors at
// address 0x1000, a .symtab of "name.kd" STT_OBJECT symbols, a .strtab.
struct ElfKernelSpec {
  std::string name;  // without ".kd"
  uint32_t group = 0;
  uint32_t private_size = 0;
  uint32_t kernarg = 0;
};

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, T value) {
  if (out.size() < at + sizeof(T)) out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

constexpr uint32_t kGfx942Any = 0x04c | 0x100 | 0x400;  // xnack any, sramecc any (v4+)

std::vector<uint8_t> build_code_object(const std::vector<ElfKernelSpec>& kernels,
                                       uint32_t e_flags = kGfx942Any, uint8_t abi_version = 3) {
  std::vector<uint8_t> elf(64, 0);
  const uint8_t ident[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 64, abi_version};
  std::memcpy(elf.data(), ident, sizeof(ident));
  put<uint16_t>(elf, 16, 3);    // ET_DYN
  put<uint16_t>(elf, 18, 224);  // EM_AMDGPU
  put<uint32_t>(elf, 20, 1);
  put<uint32_t>(elf, 48, e_flags);
  put<uint16_t>(elf, 52, 64);
  // Descriptors.
  const size_t text = 64;
  for (size_t i = 0; i < kernels.size(); ++i) {
    put<uint32_t>(elf, text + i * 64 + 0, kernels[i].group);
    put<uint32_t>(elf, text + i * 64 + 4, kernels[i].private_size);
    put<uint32_t>(elf, text + i * 64 + 8, kernels[i].kernarg);
    put<uint64_t>(elf, text + i * 64 + 56, 0);
  }
  // String table and symbols.
  std::string strtab(1, '\0');
  std::vector<uint32_t> names;
  for (const ElfKernelSpec& k : kernels) {
    names.push_back(static_cast<uint32_t>(strtab.size()));
    strtab += k.name + ".kd";
    strtab += '\0';
  }
  const size_t symtab = text + kernels.size() * 64;
  put<uint64_t>(elf, symtab + 16, 0);  // the null symbol
  for (size_t i = 0; i < kernels.size(); ++i) {
    const size_t at = symtab + (i + 1) * 24;
    put<uint32_t>(elf, at, names[i]);
    put<uint8_t>(elf, at + 4, 0x11);  // STB_GLOBAL, STT_OBJECT
    put<uint16_t>(elf, at + 6, 1);    // the descriptors' section
    put<uint64_t>(elf, at + 8, 0x1000 + i * 64);
    put<uint64_t>(elf, at + 16, 64);
  }
  const size_t strings = symtab + (kernels.size() + 1) * 24;
  elf.resize(strings + strtab.size());
  std::memcpy(elf.data() + strings, strtab.data(), strtab.size());
  // Section headers: null, descriptors, .symtab, .strtab.
  const size_t shoff = (elf.size() + 7) / 8 * 8;
  const auto section = [&](size_t index, uint32_t type, uint64_t addr, uint64_t offset,
                           uint64_t size, uint32_t link, uint64_t entsize) {
    const size_t at = shoff + index * 64;
    put<uint32_t>(elf, at + 4, type);
    put<uint64_t>(elf, at + 16, addr);
    put<uint64_t>(elf, at + 24, offset);
    put<uint64_t>(elf, at + 32, size);
    put<uint32_t>(elf, at + 40, link);
    put<uint64_t>(elf, at + 56, entsize);
  };
  section(0, 0, 0, 0, 0, 0, 0);
  section(1, 1, 0x1000, text, kernels.size() * 64, 0, 0);
  section(2, 2, 0, symtab, (kernels.size() + 1) * 24, 3, 24);
  section(3, 3, 0, strings, strtab.size(), 0, 0);
  put<uint64_t>(elf, 40, shoff);
  put<uint16_t>(elf, 58, 64);
  put<uint16_t>(elf, 60, 4);
  return elf;
}

// The library's three kernels, as its code objects describe them.
std::vector<ElfKernelSpec> library_kernels() {
  return {{"kr_scatter_copy", 0, 0, sizeof(kr_scatter_copy_args)},
          {"kr_hash_blocks", 0, 0, sizeof(kr_hash_blocks_args)},
          {"kr_compare_copy", 0, 16, sizeof(kr_compare_copy_args)}};
}

// Reader, executable, load, freeze: what the library does. SUCCESS or the
// first failing status.
hsa_status_t load_executable(const std::vector<uint8_t>& object, hsa_agent_t agent,
                             hsa_executable_t* exe) {
  hsa_code_object_reader_t reader{0};
  hsa_status_t status = core().hsa_code_object_reader_create_from_memory_fn(
      object.data(), object.size(), &reader);
  if (status != HSA_STATUS_SUCCESS) return status;
  status = core().hsa_executable_create_alt_fn(HSA_PROFILE_FULL,
                                               HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, nullptr,
                                               exe);
  if (status == HSA_STATUS_SUCCESS) {
    status = core().hsa_executable_load_agent_code_object_fn(*exe, agent, reader, nullptr,
                                                             nullptr);
    if (status == HSA_STATUS_SUCCESS) status = core().hsa_executable_freeze_fn(*exe, nullptr);
    if (status != HSA_STATUS_SUCCESS) core().hsa_executable_destroy_fn(*exe);
  }
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader), HSA_STATUS_SUCCESS);
  return status;
}

uint64_t kernel_object(hsa_executable_t exe, hsa_agent_t agent, const char* name) {
  hsa_executable_symbol_t symbol{0};
  if (core().hsa_executable_get_symbol_by_name_fn(exe, name, &agent, &symbol) !=
      HSA_STATUS_SUCCESS) {
    return 0;
  }
  uint64_t object = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &object),
               HSA_STATUS_SUCCESS);
  return object;
}

void test_code_object_loading() {
  hsa_rt_reset(2);
  const std::vector<uint8_t> object = build_code_object(library_kernels());
  hsa_executable_t exe{0};
  CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_SUCCESS);
  // Listed by the loader's iterator, as ROCr lists a tool's own executables.
  int executables = 0;
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &executables), HSA_STATUS_SUCCESS);
  CHECK(executables == 1);

  // Kernel symbols by their ".kd" names, for that agent only.
  hsa_agent_t agent = gpu(0);
  hsa_executable_symbol_t symbol{0};
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, "kr_compare_copy.kd", &agent,
                                                           &symbol),
               HSA_STATUS_SUCCESS);
  hsa_symbol_kind_t kind = HSA_SYMBOL_KIND_VARIABLE;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(symbol, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_SUCCESS);
  CHECK(kind == HSA_SYMBOL_KIND_KERNEL);
  uint32_t size = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == sizeof(kr_compare_copy_args));
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 16);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 0);
  const uint64_t scatter = kernel_object(exe, gpu(0), "kr_scatter_copy.kd");
  const uint64_t hash = kernel_object(exe, gpu(0), "kr_hash_blocks.kd");
  CHECK(scatter != 0 && hash != 0 && scatter != hash && scatter % 64 == 0);
  CHECK(kernel_object(exe, gpu(0), "kr_scatter_copy") == 0);  // v3+: the name has ".kd"
  CHECK(kernel_object(exe, gpu(1), "kr_scatter_copy.kd") == 0);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, "kr_scatter_copy.kd", nullptr,
                                                           &symbol),
               HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(exe, nullptr, &agent, &symbol),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_get_symbol_by_name_fn(hsa_executable_t{9}, "x", &agent,
                                                           &symbol),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  // A frozen executable takes no more code and freezes once.
  hsa_code_object_reader_t reader{0};
  CHECK_STATUS(core().hsa_code_object_reader_create_from_memory_fn(object.data(), object.size(),
                                                                   &reader),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_load_agent_code_object_fn(exe, gpu(0), reader, nullptr,
                                                               nullptr),
               HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_STATUS(core().hsa_executable_freeze_fn(exe, nullptr), HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
  CHECK_STATUS(core().hsa_executable_load_agent_code_object_fn(exe, gpu(0),
                                                               hsa_code_object_reader_t{3},
                                                               nullptr, nullptr),
               HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_code_object_reader_destroy_fn(reader),
               HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
  CHECK_STATUS(core().hsa_code_object_reader_create_from_memory_fn(object.data(), 0, &reader),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_create_alt_fn(static_cast<hsa_profile_t>(7),
                                                   HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                                   nullptr, &exe),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_destroy_fn(exe), HSA_STATUS_SUCCESS);

  // ISA: the processor must match; a feature the object fixes must be the
  // agent's; the CPU supports no code object.
  hsa_executable_t other{0};
  CHECK_STATUS(load_executable(object, cpu(), &other), HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  hsa_rt_set_agent_isa(gpu(1), "amdgcn-amd-amdhsa--gfx1100");
  CHECK_STATUS(load_executable(object, gpu(1), &other), HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  const uint32_t xnack_on = 0x04c | 0x300 | 0x400;
  const uint32_t sramecc_on = 0x04c | 0x100 | 0xc00;
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), xnack_on), gpu(0), &other),
               HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), sramecc_on), gpu(0), &other),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(other), HSA_STATUS_SUCCESS);
  // Code object v3 names both features a gfx942 supports: sramecc-, xnack-.
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), 0x04c, 1), gpu(0), &other),
               HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  CHECK_STATUS(load_executable(build_code_object(library_kernels(), 0x04c | 0x200, 1), gpu(0),
                               &other),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(other), HSA_STATUS_SUCCESS);

  // Fault injection: the load fails and loads nothing.
  hsa_rt_inject(HSA_RT_FAULT_NEXT_CODE_OBJECT_LOADS, 0, 1);
  CHECK_STATUS(load_executable(object, gpu(0), &other), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(load_executable(object, gpu(0), &other), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(other), HSA_STATUS_SUCCESS);
}

// Deterministic bytes for the malformed-input checks.
uint64_t next_random(uint64_t* state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

void test_malformed_code_objects() {
  hsa_rt_reset(1);
  const std::vector<uint8_t> object = build_code_object(library_kernels());
  hsa_executable_t exe{0};
  // Wrong machine, class, OS ABI, code object version, processor.
  const auto refused = [&](std::vector<uint8_t> bytes) {
    return load_executable(bytes, gpu(0), &exe) == HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  };
  std::vector<uint8_t> bad = object;
  bad[18] = 62;  // EM_X86_64
  CHECK(refused(bad));
  bad = object;
  bad[4] = 1;  // ELFCLASS32
  CHECK(refused(bad));
  bad = object;
  bad[7] = 0;  // OS ABI none
  CHECK(refused(bad));
  bad = object;
  bad[8] = 0;  // code object v2
  CHECK(refused(bad));
  CHECK(refused(build_code_object(library_kernels(), 0x0ee)));  // unknown processor
  bad = object;
  bad[0] = 0;
  CHECK(refused(bad));
  // Every truncation is refused, never read past (ASan and valgrind watch
  // these runs); the buffer is exactly as long as the truncation.
  for (size_t length = 1; length < object.size(); ++length) {
    std::vector<uint8_t> prefix(object.begin(), object.begin() + static_cast<long>(length));
    CHECK(refused(prefix));
  }
  // Random corruption: accepted or refused, never a crash or an overread.
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> mangled = object;
    const int flips = 1 + static_cast<int>(next_random(&seed) % 4);
    for (int i = 0; i < flips; ++i) {
      mangled[next_random(&seed) % mangled.size()] = static_cast<uint8_t>(next_random(&seed));
    }
    const hsa_status_t status = load_executable(mangled, gpu(0), &exe);
    if (status == HSA_STATUS_SUCCESS) core().hsa_executable_destroy_fn(exe);
    CHECK(status == HSA_STATUS_SUCCESS || status == HSA_STATUS_ERROR_INVALID_CODE_OBJECT ||
          status == HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
  }
  int executables = 0;
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &executables), HSA_STATUS_SUCCESS);
  CHECK(executables == 0);
}

// ---- AQL queues -------------------------------------------------------------------

// What a queue's error callback saw.
struct QueueErrors {
  std::atomic<int> calls{0};
  std::atomic<uint32_t> status{0};
  std::atomic<hsa_queue_t*> queue{nullptr};
};

void record_queue_error(hsa_status_t status, hsa_queue_t* queue, void* data) {
  auto* errors = static_cast<QueueErrors*>(data);
  errors->status = static_cast<uint32_t>(status);
  errors->queue = queue;
  ++errors->calls;
}

hsa_queue_t* make_queue(hsa_agent_t agent, QueueErrors* errors, uint32_t size = 64) {
  hsa_queue_t* queue = nullptr;
  CHECK_STATUS(core().hsa_queue_create_fn(agent, size, HSA_QUEUE_TYPE_MULTI, record_queue_error,
                                          errors, UINT32_MAX, UINT32_MAX, &queue),
               HSA_STATUS_SUCCESS);
  return queue;
}

void test_queue_creation() {
  hsa_rt_reset(2);
  const auto create = [](hsa_agent_t agent, uint32_t size, hsa_queue_type32_t type,
                         uint32_t private_size, hsa_queue_t** queue) {
    return core().hsa_queue_create_fn(agent, size, type, nullptr, nullptr, private_size,
                                      UINT32_MAX, queue);
  };
  hsa_queue_t* queue = nullptr;
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_MULTI, 0, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 0, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 100, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 64, 3, 0, &queue), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(hsa_agent_t{5}, 64, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(create(cpu(), 64, HSA_QUEUE_TYPE_MULTI, 0, &queue), HSA_STATUS_ERROR);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_COOPERATIVE, 0, &queue),
               HSA_STATUS_ERROR_INVALID_QUEUE_CREATION);
  CHECK_STATUS(create(gpu(0), 0x40000, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(create(gpu(0), 32, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_MULTI, 300000, &queue),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_rt_inject(HSA_RT_FAULT_NEXT_QUEUE_CREATIONS, 0, 1);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_MULTI, 0, &queue),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_QUEUES) == 0);

  const uint64_t signals_before = hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS);
  CHECK_STATUS(create(gpu(0), 64, HSA_QUEUE_TYPE_SINGLE, UINT32_MAX, &queue), HSA_STATUS_SUCCESS);
  CHECK(queue != nullptr && hsa_rt_count(HSA_RT_COUNT_LIVE_QUEUES) == 1);
  if (queue == nullptr) return;
  CHECK(queue->size == 64 && queue->type == HSA_QUEUE_TYPE_SINGLE);
  CHECK(queue->base_address != nullptr && queue->doorbell_signal.handle != 0);
  CHECK((queue->features & HSA_QUEUE_FEATURE_KERNEL_DISPATCH) != 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS) == signals_before);  // the doorbell is the runtime's
  // Every slot starts INVALID.
  const auto* ring = static_cast<const uint16_t*>(queue->base_address);
  CHECK((ring[0] & 0xff) == HSA_PACKET_TYPE_INVALID && (ring[63 * 32] & 0xff) == HSA_PACKET_TYPE_INVALID);
  // Indices.
  CHECK(core().hsa_queue_load_write_index_relaxed_fn(queue) == 0);
  CHECK(core().hsa_queue_add_write_index_scacq_screl_fn(queue, 3) == 0);
  CHECK(core().hsa_queue_cas_write_index_screlease_fn(queue, 3, 5) == 3);
  CHECK(core().hsa_queue_cas_write_index_relaxed_fn(queue, 3, 9) == 5);
  core().hsa_queue_store_write_index_relaxed_fn(queue, 0);
  CHECK(core().hsa_queue_load_write_index_scacquire_fn(queue) == 0);
  CHECK(core().hsa_queue_load_read_index_scacquire_fn(queue) == 0);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_ERROR_INVALID_QUEUE);
  CHECK_STATUS(core().hsa_queue_destroy_fn(nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_QUEUES) == 0 && hsa_rt_count(HSA_RT_COUNT_LIVE_SIGNALS) == signals_before);

  // Reset retires every queue; a stale pointer is still harmless.
  QueueErrors errors;
  queue = make_queue(gpu(1), &errors);
  hsa_rt_reset(2);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_QUEUES) == 0);
  CHECK(core().hsa_queue_load_write_index_relaxed_fn(queue) == 0);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_ERROR_INVALID_QUEUE);
}

// The library's kernel dispatch: reserve a slot, fill the packet, publish
// header and setup with one release store, ring the doorbell.
void submit_dispatch(hsa_queue_t* queue, uint64_t kernel_object, const void* kernarg,
                     uint32_t workgroups, hsa_signal_t completion,
                     uint16_t workgroup_x = KR_WORKGROUP) {
  const uint64_t index = core().hsa_queue_add_write_index_scacq_screl_fn(queue, 1);
  auto* packet = static_cast<hsa_kernel_dispatch_packet_t*>(queue->base_address) +
                 (index & (queue->size - 1));
  packet->workgroup_size_x = workgroup_x;
  packet->workgroup_size_y = 1;
  packet->workgroup_size_z = 1;
  packet->reserved0 = 0;
  packet->grid_size_x = workgroups * uint32_t{workgroup_x};
  packet->grid_size_y = 1;
  packet->grid_size_z = 1;
  packet->private_segment_size = 0;
  packet->group_segment_size = 0;
  packet->kernel_object = kernel_object;
  packet->kernarg_address = const_cast<void*>(kernarg);
  packet->reserved2 = 0;
  packet->completion_signal = completion;
  const uint16_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                          (1 << HSA_PACKET_HEADER_BARRIER) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
  const uint16_t setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
  __atomic_store_n(reinterpret_cast<uint32_t*>(packet), header | (uint32_t{setup} << 16),
                   __ATOMIC_RELEASE);
  core().hsa_signal_store_screlease_fn(queue->doorbell_signal,
                                       static_cast<hsa_signal_value_t>(index));
}

// Kernel argument memory as the library gets it: the kernarg pool, made
// reachable by the GPU (ROCr's pool allocations are the CPU's until then).
void* kernarg_alloc(size_t size, hsa_agent_t agent) {
  void* ptr = pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG), size);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, &agent, nullptr, ptr), HSA_STATUS_SUCCESS);
  return ptr;
}

// The hash of kernels/replay_kernels.h, computed here independently: lane
// `lane` of NH over the block's words, zero past `len`.
uint64_t reference_lane(const uint8_t* block, uint64_t len, const uint32_t* keys, uint32_t lane) {
  auto word = [&](uint32_t w) {
    uint32_t m = 0;
    for (uint32_t b = 0; b < 4; ++b) {
      const uint64_t at = uint64_t{w} * 4 + b;
      if (at < len) m |= uint32_t{block[at]} << (8 * b);
    }
    return m;
  };
  const uint32_t* k = keys + lane * KR_HASH_SHIFT;
  uint64_t sum = 0;
  for (uint32_t w = 0; w < KR_HASH_WORDS; w += 2) {
    const uint32_t a = word(w) + k[w];
    const uint32_t b = word(w + 1) + k[w + 1];
    sum += uint64_t{a} * b;
  }
  return sum;
}

struct DispatchFixture {
  hsa_executable_t exe{0};
  uint64_t scatter = 0, hash = 0, compare = 0;
  QueueErrors errors;
  hsa_queue_t* queue = nullptr;
  hsa_signal_t done{0};
  uint32_t* keys = nullptr;  // device memory

  bool set_up() {
    hsa_rt_reset(2);
    CHECK_STATUS(load_executable(build_code_object(library_kernels()), gpu(0), &exe),
                 HSA_STATUS_SUCCESS);
    scatter = kernel_object(exe, gpu(0), "kr_scatter_copy.kd");
    hash = kernel_object(exe, gpu(0), "kr_hash_blocks.kd");
    compare = kernel_object(exe, gpu(0), "kr_compare_copy.kd");
    queue = make_queue(gpu(0), &errors);
    done = make_signal(0);
    keys = static_cast<uint32_t*>(device_alloc(KR_HASH_KEYS * sizeof(uint32_t)));
    uint64_t seed = 12345;
    for (uint32_t i = 0; i < KR_HASH_KEYS; ++i) {
      keys[i] = static_cast<uint32_t>(next_random(&seed) >> 16);
    }
    return queue != nullptr && scatter != 0 && hash != 0 && compare != 0;
  }

  // One dispatch, waited for; false when it did not complete.
  bool run(uint64_t kernel, const void* kernarg, uint32_t workgroups) {
    core().hsa_signal_store_screlease_fn(done, 1);
    submit_dispatch(queue, kernel, kernarg, workgroups, done);
    return wait_for(done, 0);
  }

  void tear_down() {
    core().hsa_signal_destroy_fn(done);
    if (queue != nullptr) CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_SUCCESS);
  }
};

void test_dispatch_kernels() {
  DispatchFixture f;
  if (!f.set_up()) return;
  // Scatter: three records between device buffers, in one dispatch.
  auto* src = static_cast<uint8_t*>(device_alloc(3 * 4096));
  auto* dst = static_cast<uint8_t*>(device_alloc(3 * 4096));
  std::memset(dst, 0, 3 * 4096);
  for (int i = 0; i < 3 * 4096; ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  auto* records = static_cast<kr_copy_record*>(kernarg_alloc(3 * sizeof(kr_copy_record), gpu(0)));
  for (uint64_t i = 0; i < 3; ++i) {
    records[i] = kr_copy_record{reinterpret_cast<uintptr_t>(dst + i * 4096),
                                reinterpret_cast<uintptr_t>(src + (2 - i) * 4096), 4096 - i * 100};
  }
  auto* scatter_args =
      static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  *scatter_args = kr_scatter_copy_args{records, 3};
  const uint64_t violations = hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS);
  CHECK(f.run(f.scatter, scatter_args, 3));
  for (uint64_t i = 0; i < 3; ++i) {
    CHECK(std::memcmp(dst + i * 4096, src + (2 - i) * 4096, 4096 - i * 100) == 0);
  }
  CHECK(dst[2 * 4096 - 1] == 0);  // record 1 stopped 100 bytes short
  CHECK(hsa_rt_dispatch_count("kr_scatter_copy") == 1);
  CHECK(hsa_rt_dispatch_count("kr_scatter_copy.kd") == 1);
  CHECK(core().hsa_queue_load_read_index_relaxed_fn(f.queue) == 1);

  // Hash: every block, both lanes, against the reference.
  // Four records (one workgroup's worth), two of them in the dispatch.
  auto* blocks = static_cast<kr_hash_block*>(
      kernarg_alloc(KR_BLOCKS_PER_GROUP * sizeof(kr_hash_block), gpu(0)));
  blocks[0] = kr_hash_block{reinterpret_cast<uintptr_t>(src), 4096};
  blocks[1] = kr_hash_block{reinterpret_cast<uintptr_t>(src + 4096), 1001};  // a short block
  for (uint32_t i = 2; i < KR_BLOCKS_PER_GROUP; ++i) {
    blocks[i] = kr_hash_block{reinterpret_cast<uintptr_t>(src + 2 * 4096), 4096};
  }
  auto* hashes = static_cast<uint64_t*>(device_alloc(2 * KR_BLOCKS_PER_GROUP * sizeof(uint64_t)));
  for (uint32_t i = 0; i < 2 * KR_BLOCKS_PER_GROUP; ++i) hashes[i] = 7;
  auto* hash_args =
      static_cast<kr_hash_blocks_args*>(kernarg_alloc(sizeof(kr_hash_blocks_args), gpu(0)));
  *hash_args = kr_hash_blocks_args{blocks, 2, f.keys, hashes};
  CHECK(f.run(f.hash, hash_args, 1));
  CHECK(hashes[0] == reference_lane(src, 4096, f.keys, 0));
  CHECK(hashes[1] == reference_lane(src, 4096, f.keys, 1));
  CHECK(hashes[2] == reference_lane(src + 4096, 1001, f.keys, 0));
  CHECK(hashes[3] == reference_lane(src + 4096, 1001, f.keys, 1));
  CHECK(hashes[4] == 7 && hashes[6] == 7);  // past count: not written
  // KR_BLOCKS_PER_GROUP blocks per workgroup and none past count: a count
  // larger than the grid touches only the grid's blocks (here the first
  // four).
  hash_args->count = uint64_t{1} << 60;
  hashes[0] = 0;
  CHECK(f.run(f.hash, hash_args, 1));
  CHECK(hashes[0] == reference_lane(src, 4096, f.keys, 0));
  CHECK(hashes[6] == reference_lane(src + 2 * 4096, 4096, f.keys, 0));
  hash_args->count = 2;

  // Compare-and-copy (a restore): live blocks are dst; one changed since the
  // hashes were taken, so only it is copied back from the arena (src).
  auto* live = static_cast<uint8_t*>(device_alloc(2 * 4096));
  std::memcpy(live, src, 2 * 4096);
  auto* pairs = static_cast<kr_block_pair*>(kernarg_alloc(2 * sizeof(kr_block_pair), gpu(0)));
  pairs[0] = kr_block_pair{reinterpret_cast<uintptr_t>(live), reinterpret_cast<uintptr_t>(src),
                           4096};
  pairs[1] = kr_block_pair{reinterpret_cast<uintptr_t>(live + 4096),
                           reinterpret_cast<uintptr_t>(src + 4096), 1001};
  hashes[2] = reference_lane(src + 4096, 1001, f.keys, 0);
  hashes[3] = reference_lane(src + 4096, 1001, f.keys, 1);
  live[4096 + 10] ^= 0xFF;
  live[10] ^= 0x00;
  auto* changed = static_cast<uint64_t*>(device_alloc(sizeof(uint64_t)));
  *changed = 0;
  auto* compare_args =
      static_cast<kr_compare_copy_args*>(kernarg_alloc(sizeof(kr_compare_copy_args), gpu(0)));
  *compare_args = kr_compare_copy_args{pairs, 2, f.keys, hashes, changed, 0, 0};
  CHECK(f.run(f.compare, compare_args, 2));
  CHECK(*changed == 1);
  CHECK(std::memcmp(live, src, 4096 + 1001) == 0);
  CHECK(hsa_rt_dispatch_count(nullptr) == 4);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations);
  CHECK(f.errors.calls == 0);

  // A barrier-AND with a completion signal waits for its dependency.
  hsa_signal_t dependency = make_signal(1);
  hsa_signal_t barrier_done = make_signal(1);
  const uint64_t index = core().hsa_queue_add_write_index_relaxed_fn(f.queue, 1);
  auto* barrier = static_cast<hsa_barrier_and_packet_t*>(f.queue->base_address) +
                  (index & (f.queue->size - 1));
  std::memset(reinterpret_cast<uint8_t*>(barrier) + 4, 0, sizeof(*barrier) - 4);
  barrier->dep_signal[2] = dependency;
  barrier->completion_signal = barrier_done;
  __atomic_store_n(&barrier->header,
                   static_cast<uint16_t>(HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE),
                   __ATOMIC_RELEASE);
  core().hsa_signal_store_relaxed_fn(f.queue->doorbell_signal,
                                     static_cast<hsa_signal_value_t>(index));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(core().hsa_signal_load_relaxed_fn(barrier_done) == 1);
  core().hsa_signal_store_relaxed_fn(dependency, 0);
  CHECK(wait_for(barrier_done, 0));
  core().hsa_signal_destroy_fn(dependency);
  core().hsa_signal_destroy_fn(barrier_done);
  f.tear_down();
}

void test_dispatch_faults() {
  DispatchFixture f;
  if (!f.set_up()) return;
  auto* src = static_cast<uint8_t*>(device_alloc(4096));
  auto* dst = static_cast<uint8_t*>(device_alloc(4096));
  std::memset(dst, 0, 4096);
  std::memset(src, 0x5A, 4096);
  auto* records = static_cast<kr_copy_record*>(kernarg_alloc(2 * sizeof(kr_copy_record), gpu(0)));
  auto* args = static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  const uint64_t violations = hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS);

  // A record whose destination was freed: one violation, nothing written
  // (the quarantine stays poison, the good record is not copied either), the
  // queue suspended, its callback told as ROCr tells a memory fault.
  auto* freed = static_cast<uint8_t*>(device_alloc(4096));
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(freed), HSA_STATUS_SUCCESS);
  records[0] = kr_copy_record{reinterpret_cast<uintptr_t>(dst), reinterpret_cast<uintptr_t>(src), 4096};
  records[1] = kr_copy_record{reinterpret_cast<uintptr_t>(freed), reinterpret_cast<uintptr_t>(src), 64};
  *args = kr_scatter_copy_args{records, 2};
  core().hsa_signal_store_relaxed_fn(f.done, 1);
  submit_dispatch(f.queue, f.scatter, args, 2, f.done);
  CHECK(eventually([&] { return f.errors.calls.load() == 1; }));
  CHECK(f.errors.status == static_cast<uint32_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION));
  CHECK(f.errors.queue == f.queue);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == violations + 1);
  CHECK(hsa_rt_quarantine_intact());
  CHECK(dst[0] == 0);
  CHECK(core().hsa_signal_load_relaxed_fn(f.done) == 1);  // never signalled
  CHECK(core().hsa_queue_load_read_index_relaxed_fn(f.queue) == 0);
  CHECK(hsa_rt_dispatch_count(nullptr) == 0);
  f.tear_down();

  // Each fault in turn, on a fresh queue: what the callback gets.
  const auto fault_status = [&](auto prepare, uint64_t kernel, uint32_t workgroups,
                                uint16_t workgroup_x = KR_WORKGROUP) {
    DispatchFixture g;
    if (!g.set_up()) return HSA_STATUS_SUCCESS;
    const void* kernarg = prepare(g);
    core().hsa_signal_store_relaxed_fn(g.done, 1);
    // 0: kr_scatter_copy, 1: kr_hash_blocks, else that kernel object.
    const uint64_t object = kernel == 0 ? g.scatter : kernel == 1 ? g.hash : kernel;
    submit_dispatch(g.queue, object, kernarg, workgroups, g.done, workgroup_x);
    CHECK(eventually([&] { return g.errors.calls.load() == 1; }));
    const auto status = static_cast<hsa_status_t>(g.errors.status.load());
    g.tear_down();
    return status;
  };
  const auto good_args = [](DispatchFixture&) -> const void* {
    auto* s = static_cast<uint8_t*>(device_alloc(4096));
    auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
    *r = kr_copy_record{reinterpret_cast<uintptr_t>(s + 2048), reinterpret_cast<uintptr_t>(s), 1024};
    auto* a = static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
    *a = kr_scatter_copy_args{r, 1};
    return a;
  };
  hsa_rt_inject(HSA_RT_FAULT_NEXT_DISPATCHES, 0, 1);  // armed before set_up's reset: cleared
  CHECK(fault_status([](DispatchFixture&) -> const void* {
          hsa_rt_inject(HSA_RT_FAULT_NEXT_DISPATCHES, 0, 1);
          auto* s = static_cast<uint8_t*>(device_alloc(4096));
          auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
          *r = kr_copy_record{reinterpret_cast<uintptr_t>(s + 2048),
                              reinterpret_cast<uintptr_t>(s), 1024};
          auto* a = static_cast<kr_scatter_copy_args*>(
              kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
          *a = kr_scatter_copy_args{r, 1};
          return a;
        }, 0, 1) == static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);  // an injected fault is no violation
  // Unknown kernel object; wrong workgroup size.
  CHECK(fault_status(good_args, 64, 1) == HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
  CHECK(fault_status(good_args, 0, 1, 64) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // Kernarg memory the GPU was never given: a violation (ROCr maps pool
  // allocations for the CPU only until hsa_amd_agents_allow_access).
  CHECK(fault_status([](DispatchFixture&) -> const void* {
          return pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG), 64);
        }, 0, 1) == static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 1);
  // A record pointing into host memory the GPU cannot reach.
  static uint8_t host_buffer[256];
  CHECK(fault_status([](DispatchFixture&) -> const void* {
          auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
          auto* d = static_cast<uint8_t*>(device_alloc(4096));
          *r = kr_copy_record{reinterpret_cast<uintptr_t>(d), reinterpret_cast<uintptr_t>(host_buffer),
                              sizeof(host_buffer)};
          auto* a = static_cast<kr_scatter_copy_args*>(
              kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
          *a = kr_scatter_copy_args{r, 1};
          return a;
        }, 0, 1) == static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION));
  // A hash dispatch whose blocks array runs past its allocation (300
  // blocks of 16 bytes in one 4 KiB granule): the read would overrun.
  CHECK(fault_status([](DispatchFixture& g) -> const void* {
          auto* b = static_cast<kr_hash_block*>(kernarg_alloc(4096, gpu(0)));
          auto* d = static_cast<uint8_t*>(device_alloc(4096));
          for (int i = 0; i < 256; ++i) b[i] = kr_hash_block{reinterpret_cast<uintptr_t>(d), 4096};
          auto* a = static_cast<kr_hash_blocks_args*>(
              kernarg_alloc(sizeof(kr_hash_blocks_args), gpu(0)));
          *a = kr_hash_blocks_args{b, 300, g.keys,
                                   static_cast<uint64_t*>(device_alloc(300 * 16))};
          return a;
        }, 1, 300) == static_cast<hsa_status_t>(HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION));
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 1);  // counted since the fixture's reset
  CHECK(hsa_rt_quarantine_intact());
}

// A real code object of the library's kernels, built by CMake with clang-19
// when it is found (KR_TEST_CODE_OBJECT): it loads as ROCr would load it
// and the sim runs a dispatch of it.
void test_real_code_object() {
#ifdef KR_TEST_CODE_OBJECT
  std::FILE* file = std::fopen(KR_TEST_CODE_OBJECT, "rb");
  CHECK(file != nullptr);
  if (file == nullptr) return;
  std::vector<uint8_t> object;
  uint8_t chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof(chunk), file)) > 0;) {
    object.insert(object.end(), chunk, chunk + n);
  }
  std::fclose(file);
  hsa_rt_reset(1);
  hsa_executable_t exe{0};
  CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_SUCCESS);
  const uint64_t scatter = kernel_object(exe, gpu(0), "kr_scatter_copy.kd");
  CHECK(scatter != 0 && kernel_object(exe, gpu(0), "kr_hash_blocks.kd") != 0 &&
        kernel_object(exe, gpu(0), "kr_compare_copy.kd") != 0);
  QueueErrors errors;
  hsa_queue_t* queue = make_queue(gpu(0), &errors);
  auto* s = static_cast<uint8_t*>(device_alloc(8192));
  std::memset(s, 0x42, 4096);
  auto* r = static_cast<kr_copy_record*>(kernarg_alloc(sizeof(kr_copy_record), gpu(0)));
  *r = kr_copy_record{reinterpret_cast<uintptr_t>(s + 4096), reinterpret_cast<uintptr_t>(s), 4096};
  auto* a = static_cast<kr_scatter_copy_args*>(kernarg_alloc(sizeof(kr_scatter_copy_args), gpu(0)));
  *a = kr_scatter_copy_args{r, 1};
  hsa_signal_t done = make_signal(1);
  submit_dispatch(queue, scatter, a, 1, done);
  CHECK(wait_for(done, 0));
  CHECK(s[4096] == 0x42 && s[8191] == 0x42);
  core().hsa_signal_destroy_fn(done);
  CHECK_STATUS(core().hsa_queue_destroy_fn(queue), HSA_STATUS_SUCCESS);
  // The same object on an agent of another processor: refused.
  hsa_rt_set_agent_isa(gpu(0), "amdgcn-amd-amdhsa--gfx1100");
  CHECK_STATUS(load_executable(object, gpu(0), &exe), HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS);
#else
  std::printf("sim_selftest: no gfx942 code object of the kernels (no clang-19 found): "
              "real code object test skipped\n");
#endif
}

void test_threads() {
  hsa_rt_reset(2);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      const hsa_amd_memory_pool_t p = pool(gpu(static_cast<uint32_t>(t % 2)),
                                           HSA_RT_POOL_DEVICE_COARSE);
      std::vector<char> host(4096, static_cast<char>(t));
      for (int i = 0; i < 200; ++i) {
        void* ptr = nullptr;
        if (amd().hsa_amd_memory_pool_allocate_fn(p, 4096, 0, &ptr) != HSA_STATUS_SUCCESS ||
            core().hsa_memory_copy_fn(ptr, host.data(), 4096) != HSA_STATUS_SUCCESS ||
            core().hsa_memory_copy_fn(host.data(), ptr, 4096) != HSA_STATUS_SUCCESS ||
            amd().hsa_amd_memory_pool_free_fn(ptr) != HSA_STATUS_SUCCESS) {
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failures == 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_COPY_VIOLATIONS) == 0);
  CHECK(hsa_rt_count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);
  CHECK(hsa_rt_quarantine_intact());
}

// Leaves a copy blocked on a dependency that never reaches 0: the process
// must still exit normally.
void leave_blocked_copy_at_exit() {
  hsa_rt_reset(1);
  static char host[16];
  void* dev = device_alloc(16);
  hsa_signal_t gate = make_signal(1);
  hsa_signal_t done = make_signal(1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host, cpu(), 16, 1, &gate, done),
               HSA_STATUS_SUCCESS);
  // And an async handler armed on a signal that never satisfies it: its
  // thread stays blocked while the process exits.
  static HandlerLog pending;
  hsa_signal_t never = make_signal(1);
  CHECK_STATUS(amd().hsa_amd_signal_async_handler_fn(never, HSA_SIGNAL_CONDITION_EQ, 0,
                                                     log_handler, &pending),
               HSA_STATUS_SUCCESS);
}

}  // namespace

int main() {
  test_table_versions();
  test_topology();
  test_pools_and_regions();
  test_allocation();
  test_pointer_info();
  test_copies();
  test_host_side_checks();
  test_quarantine_and_reuse();
  test_fault_injection();
  test_loader();
  test_signals();
  test_async_copy();
  test_strict_async_access();
  test_threads();
  test_isas();
  test_code_object_loading();
  test_malformed_code_objects();
  test_queue_creation();
  test_dispatch_kernels();
  test_dispatch_faults();
  test_real_code_object();
  test_device_capacity();
  test_async_copy_rect();
  test_signal_async_handler();
  test_vmem_table_entries();
#if HSA_RT_HAVE_VMEM
  test_async_copy_on_engine();
  test_vmem_lifecycle();
  test_vmem_set_access();
  test_vmem_aliasing();
  test_vmem_copies();
  test_vmem_pointer_info();
  test_vmem_faults();
#endif
  leave_blocked_copy_at_exit();
  return kr_check_summary("conformance (host)");
}
