/* sim_selftest.cpp: checks the software HSA runtime's own semantics, calling
 * it only through the real CoreApiTable / AmdExtTable structs, as a tool does.
 *
 * Build and run (from c_tests/sim; no Makefile on purpose, CMake/ctest will
 * wire it up):
 *
 *   g++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -DAMD_INTERNAL_BUILD \
 *       -I/usr/include/hsa -I/usr/include -I. \
 *       sim_selftest.cpp hsa_sim.cpp hsa_sim_memory.cpp hsa_sim_signals.cpp \
 *       hsa_sim_loader.cpp hsa_sim_tables.cpp -pthread -o sim_selftest
 *   ./sim_selftest
 *
 * Add -g -fsanitize=address,undefined -fno-sanitize-recover=all for the
 * sanitizer run, or run the plain binary under
 *   valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
 * Exit status 0 means every check passed. Needs about 300 MiB of memory (the
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
#include <string>
#include <thread>
#include <vector>

#include "hsa_sim.h"

namespace {

// ---- a minimal check harness ------------------------------------------------

int g_failures = 0;
int g_checks = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    ++g_checks;                                                                \
    if (!(cond)) {                                                             \
      ++g_failures;                                                            \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (false)

#define CHECK_STATUS(expr, expected) CHECK((expr) == (expected))

const CoreApiTable& core() { return *hsa_sim_core_table(); }
const AmdExtTable& amd() { return *hsa_sim_amd_ext_table(); }

constexpr auto kInvalidPool = static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);

hsa_agent_t gpu(uint32_t i) { return hsa_sim_gpu_agent(i); }
hsa_agent_t cpu() { return hsa_sim_cpu_agent(); }
hsa_amd_memory_pool_t pool(hsa_agent_t agent, hsa_sim_pool_kind_t kind) {
  return hsa_sim_pool(agent, kind);
}

void* pool_alloc(hsa_amd_memory_pool_t p, size_t size, uint32_t flags = 0) {
  void* ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(p, size, flags, &ptr), HSA_STATUS_SUCCESS);
  return ptr;
}

void* device_alloc(size_t size, uint32_t gpu_index = 0) {
  return pool_alloc(pool(gpu(gpu_index), HSA_SIM_POOL_DEVICE_COARSE), size);
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

uint64_t copies(hsa_sim_copy_direction_t direction) { return hsa_sim_copy_count(direction); }

// ---- tables -----------------------------------------------------------------

void test_table_versions() {
  hsa_sim_reset(2);
  CHECK(core().version.major_id == HSA_CORE_API_TABLE_MAJOR_VERSION);
  CHECK(core().version.minor_id == sizeof(CoreApiTable));
  CHECK(core().version.step_id == HSA_CORE_API_TABLE_STEP_VERSION);
  CHECK(amd().version.major_id == HSA_AMD_EXT_API_TABLE_MAJOR_VERSION);
  CHECK(amd().version.minor_id == sizeof(AmdExtTable));
  CHECK(amd().version.step_id == HSA_AMD_EXT_API_TABLE_STEP_VERSION);
  CHECK(hsa_sim_core_table_size() == sizeof(CoreApiTable));
  CHECK(hsa_sim_amd_ext_table_size() == sizeof(AmdExtTable));

  // Implemented entries are set, unimplemented ones NULL.
  CHECK(core().hsa_memory_copy_fn != nullptr);
  CHECK(core().hsa_signal_wait_scacquire_fn != nullptr);
  CHECK(core().hsa_executable_symbol_get_info_fn != nullptr);
  CHECK(core().hsa_queue_create_fn == nullptr);
  CHECK(core().hsa_executable_load_agent_code_object_fn == nullptr);
  CHECK(amd().hsa_amd_pointer_info_fn != nullptr);
  CHECK(amd().hsa_amd_memory_async_copy_fn != nullptr);
  CHECK(amd().hsa_amd_memory_lock_fn == nullptr);
  CHECK(amd().hsa_amd_queue_cu_get_mask_fn == nullptr);

  // A fresh fill equals the runtime's own table.
  CoreApiTable fresh_core;
  AmdExtTable fresh_amd;
  hsa_sim_fill_core_table(&fresh_core);
  hsa_sim_fill_amd_ext_table(&fresh_amd);
  CHECK(std::memcmp(&fresh_core, &core(), sizeof(CoreApiTable)) == 0);
  CHECK(std::memcmp(&fresh_amd, &amd(), sizeof(AmdExtTable)) == 0);

  // A wrapper a tool installs survives reset.
  CoreApiTable* table = hsa_sim_core_table();
  auto original = table->hsa_init_fn;
  static hsa_status_t (*const wrapper)() = [] { return HSA_STATUS_ERROR; };
  table->hsa_init_fn = wrapper;
  hsa_sim_reset(1);
  CHECK(hsa_sim_core_table() == table);
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
  hsa_sim_reset(3);
  CHECK(hsa_sim_gpu_count() == 3);
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
  CHECK(std::strcmp(reinterpret_cast<char*>(name), "gfx90a") == 0);
  CHECK(name[63] == 0 && name[64] == 0xAB);
  uint32_t node = 99;
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(2), HSA_AGENT_INFO_NODE, &node),
               HSA_STATUS_SUCCESS);
  CHECK(node == 3);
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_DEVICE, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Handles are tagged: a pool handle is not an agent, and old handles die.
  const hsa_agent_t old_gpu = gpu(0);
  const hsa_amd_memory_pool_t old_pool = pool(old_gpu, HSA_SIM_POOL_DEVICE_COARSE);
  CHECK_STATUS(core().hsa_agent_get_info_fn(hsa_agent_t{old_pool.handle}, HSA_AGENT_INFO_DEVICE,
                                            &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(core().hsa_agent_get_info_fn(hsa_agent_t{0}, HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  hsa_sim_reset(3);
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

  hsa_sim_reset(0);
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
  hsa_sim_reset(2);
  std::vector<uint64_t> gpu_pools;
  CHECK_STATUS(amd().hsa_amd_agent_iterate_memory_pools_fn(gpu(0), collect_pool, &gpu_pools),
               HSA_STATUS_SUCCESS);
  CHECK(gpu_pools.size() == 2);
  CHECK(gpu_pools.size() == 2 && gpu_pools[0] == pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE).handle);
  CHECK(gpu_pools.size() == 2 && gpu_pools[1] == pool(gpu(0), HSA_SIM_POOL_DEVICE_FINE).handle);
  std::vector<uint64_t> cpu_pools;
  CHECK_STATUS(amd().hsa_amd_agent_iterate_memory_pools_fn(cpu(), collect_pool, &cpu_pools),
               HSA_STATUS_SUCCESS);
  CHECK(cpu_pools.size() == 3);
  CHECK(pool(gpu(0), HSA_SIM_POOL_SYSTEM_FINE).handle == 0);
  CHECK(pool(cpu(), HSA_SIM_POOL_DEVICE_COARSE).handle == 0);
  CHECK(hsa_sim_region(gpu(1), HSA_SIM_POOL_DEVICE_FINE).handle ==
        pool(gpu(1), HSA_SIM_POOL_DEVICE_FINE).handle);

  // A GPU's regions: its own, then the system ones (as ROCr lists them).
  std::vector<uint64_t> gpu_regions;
  CHECK_STATUS(core().hsa_agent_iterate_regions_fn(gpu(1), collect_region, &gpu_regions),
               HSA_STATUS_SUCCESS);
  CHECK(gpu_regions.size() == 5);
  CHECK(gpu_regions.size() == 5 &&
        gpu_regions[3] == hsa_sim_region(cpu(), HSA_SIM_POOL_SYSTEM_KERNARG).handle);
  CHECK_STATUS(core().hsa_agent_iterate_regions_fn(hsa_agent_t{12345}, collect_region,
                                                   &gpu_regions),
               HSA_STATUS_ERROR_INVALID_AGENT);

  struct Expect {
    hsa_agent_t agent;
    hsa_sim_pool_kind_t kind;
    uint32_t flags;
    bool by_all;
  };
  const Expect expected[] = {
      {gpu(0), HSA_SIM_POOL_DEVICE_COARSE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, false},
      {gpu(0), HSA_SIM_POOL_DEVICE_FINE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, false},
      {cpu(), HSA_SIM_POOL_SYSTEM_FINE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, true},
      {cpu(), HSA_SIM_POOL_SYSTEM_KERNARG,
       HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
       true},
      {cpu(), HSA_SIM_POOL_SYSTEM_COARSE, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, true},
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
    const hsa_region_t r = hsa_sim_region(e.agent, e.kind);
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
  CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(pool(cpu(), HSA_SIM_POOL_SYSTEM_FINE),
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
  CHECK_STATUS(amd().hsa_amd_memory_pool_get_info_fn(pool(cpu(), HSA_SIM_POOL_SYSTEM_FINE),
                                                     HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                                                     nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // The access table (ROCr's GetAgentPoolInfo).
  const auto allowed = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
  const auto disallowed = HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
  CHECK(access(gpu(0), pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE)) == allowed);
  CHECK(access(gpu(0), pool(gpu(0), HSA_SIM_POOL_DEVICE_FINE)) == allowed);
  CHECK(access(gpu(0), pool(gpu(1), HSA_SIM_POOL_DEVICE_COARSE)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_SIM_POOL_SYSTEM_FINE)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_SIM_POOL_SYSTEM_KERNARG)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_SIM_POOL_SYSTEM_COARSE)) == disallowed);
  CHECK(access(cpu(), pool(cpu(), HSA_SIM_POOL_SYSTEM_COARSE)) == allowed);
  CHECK(access(cpu(), pool(gpu(1), HSA_SIM_POOL_DEVICE_FINE)) == disallowed);
  uint32_t hops = 7;
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   gpu(0), pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE),
                   HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS, &hops),
               HSA_STATUS_SUCCESS);
  CHECK(hops == 0);
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   gpu(0), pool(cpu(), HSA_SIM_POOL_SYSTEM_FINE),
                   HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS, &hops),
               HSA_STATUS_SUCCESS);
  CHECK(hops == 1);
  hsa_amd_memory_pool_access_t value{};
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   hsa_agent_t{3}, pool(cpu(), HSA_SIM_POOL_SYSTEM_FINE),
                   HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &value),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   gpu(0), hsa_amd_memory_pool_t{3}, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
                   &value),
               kInvalidPool);
}

// ---- allocation -------------------------------------------------------------

void test_allocation() {
  hsa_sim_reset(2);
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE);
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
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_sim_region(cpu(), HSA_SIM_POOL_SYSTEM_FINE), 0,
                                             &ptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_sim_live_allocation_count() == 0);

  // Rounding and alignment.
  void* one = pool_alloc(coarse, 1, 0x5);
  void* more = pool_alloc(coarse, 4097);
  CHECK(reinterpret_cast<uintptr_t>(one) % 4096 == 0);
  CHECK(reinterpret_cast<uintptr_t>(more) % 4096 == 0);
  CHECK(pointer_info(one).sizeInBytes == 4096);
  CHECK(pointer_info(more).sizeInBytes == 8192);
  uint32_t flags = 0;
  CHECK(hsa_sim_allocation_flags(one, &flags) && flags == 0x5);
  CHECK(!hsa_sim_allocation_flags(static_cast<char*>(one) + 1, &flags));
  CHECK(static_cast<unsigned char*>(more)[8191] == 0);  // fresh memory is zeroed

  void* region_ptr = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_sim_region(gpu(1), HSA_SIM_POOL_DEVICE_FINE), 10,
                                             &region_ptr),
               HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_live_allocation_count() == 3);

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
  CHECK(hsa_sim_live_allocation_count() == 0);

  // A large allocation costs nothing until touched.
  void* big = pool_alloc(coarse, size_t{8} << 30);
  CHECK(big != nullptr);
  CHECK(pointer_info(static_cast<char*>(big) + (size_t{6} << 30)).agentBaseAddress == big);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(big), HSA_STATUS_SUCCESS);
}

// ---- pointer info -----------------------------------------------------------

void test_pointer_info() {
  hsa_sim_reset(2);
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

  char* kernarg = static_cast<char*>(pool_alloc(pool(cpu(), HSA_SIM_POOL_SYSTEM_KERNARG), 64));
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
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_sim_region(cpu(), HSA_SIM_POOL_SYSTEM_COARSE),
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
  hsa_sim_reset(2);
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
  CHECK(copies(HSA_SIM_COPY_HOST_TO_DEVICE) == 1);
  CHECK(copies(HSA_SIM_COPY_DEVICE_TO_DEVICE) == 1);
  CHECK(copies(HSA_SIM_COPY_DEVICE_TO_HOST) == 1);
  CHECK(copies(HSA_SIM_COPY_HOST_TO_HOST) == 1);
  CHECK(hsa_sim_copy_violations() == 0);

  // Size 0: success, nothing counted.
  CHECK_STATUS(core().hsa_memory_copy_fn(a, host.data(), 0), HSA_STATUS_SUCCESS);
  CHECK(copies(HSA_SIM_COPY_HOST_TO_DEVICE) == 1);

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
  CHECK(hsa_sim_copy_violations() == 4);
  CHECK(copies(HSA_SIM_COPY_HOST_TO_DEVICE) == 1);

  // Freed memory is a violation in either direction.
  CHECK_STATUS(core().hsa_memory_free_fn(b), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 16, 16),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(b, host.data(), 16), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_sim_copy_violations() == 6);
  CHECK(hsa_sim_quarantine_intact());
}

// Host-side checks: what would otherwise be a wild access is a violation.
void test_host_side_checks() {
  hsa_sim_reset(1);
  char* dev = static_cast<char*>(device_alloc(4096));
  std::memset(dev, 'd', 4096);

  // A noted host block: a copy may not run past its end.
  std::vector<char> block(1000, 'b');
  hsa_sim_note_host_block(block.data(), block.size());
  CHECK_STATUS(core().hsa_memory_copy_fn(block.data() + 500, dev, 500), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(block.data() + 500, dev, 501),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, block.data() + 999, 2),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_sim_copy_violations() == 2);
  hsa_sim_forget_host_block(block.data());
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, block.data(), 1000), HSA_STATUS_SUCCESS);

  // Unmapped host memory.
  const long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(gone != MAP_FAILED);
  munmap(gone, static_cast<size_t>(page));
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, gone, 16), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_sim_copy_violations() == 3);

  // A raw variable symbol with nothing behind it, and one inside live storage.
  hsa_executable_t exe = hsa_sim_executable_create();
  const uint64_t nowhere = 0x7300'0000;
  hsa_sim_executable_add_variable_raw(exe, gpu(0), "unbacked", nowhere, 64);
  hsa_sim_executable_add_variable_raw(exe, gpu(0), "alias", reinterpret_cast<uint64_t>(dev), 64);
  std::vector<char> back(64, 0);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), reinterpret_cast<void*>(nowhere + 8), 8),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), dev, 64), HSA_STATUS_SUCCESS);
  CHECK(back[63] == 'b');  // what the copy from the forgotten block wrote
  CHECK(hsa_sim_copy_violations() == 4);
  // Reset forgets the unbacked ranges with the executables.
  hsa_sim_reset(1);
  char* fresh = static_cast<char*>(device_alloc(64));
  CHECK_STATUS(core().hsa_memory_copy_fn(fresh, block.data(), 64), HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_copy_violations() == 0);
}

// ---- quarantine and address reuse -------------------------------------------

void test_quarantine_and_reuse() {
  hsa_sim_reset(1);
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE);
  const hsa_amd_memory_pool_t fine = pool(gpu(0), HSA_SIM_POOL_DEVICE_FINE);
  unsigned char* block = static_cast<unsigned char*>(pool_alloc(coarse, 5000));
  std::memset(block, 0x11, 5000);
  CHECK_STATUS(core().hsa_memory_free_fn(block), HSA_STATUS_SUCCESS);
  // The memory stays mapped, all poison.
  CHECK(block[0] == HSA_SIM_POISON_BYTE && block[8191] == HSA_SIM_POISON_BYTE);
  CHECK(hsa_sim_quarantined_bytes() == 8192);
  CHECK(hsa_sim_quarantine_intact());

  // Without reuse, a new allocation gets fresh memory elsewhere.
  void* other = pool_alloc(coarse, 4096);
  CHECK(other != block);
  CHECK_STATUS(core().hsa_memory_free_fn(other), HSA_STATUS_SUCCESS);

  // With reuse: the newest large-enough block of the same pool comes back,
  // still poisoned.
  hsa_sim_set_address_reuse(true);
  void* same = pool_alloc(coarse, 8000);
  CHECK(same == block);
  CHECK(block[100] == HSA_SIM_POISON_BYTE);
  CHECK(pointer_info(same).sizeInBytes == 8192);
  CHECK(hsa_sim_quarantined_bytes() == 4096);  // `other` is still there
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
  hsa_sim_set_address_reuse(false);

  // Writing freed memory behind the runtime's back is detected.
  CHECK_STATUS(core().hsa_memory_free_fn(too_big), HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_quarantine_intact());
  static_cast<unsigned char*>(too_big)[5] = 0;
  CHECK(!hsa_sim_quarantine_intact());
  hsa_sim_reset(1);
  CHECK(hsa_sim_quarantine_intact());
  CHECK(hsa_sim_quarantined_bytes() == 0);

  // The byte cap: the oldest block is really released past 256 MiB.
  const hsa_amd_memory_pool_t device = pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE);
  void* first = pool_alloc(device, size_t{200} << 20);
  void* second = pool_alloc(device, size_t{100} << 20);
  CHECK_STATUS(core().hsa_memory_free_fn(first), HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_quarantined_bytes() == size_t{200} << 20);
  CHECK_STATUS(core().hsa_memory_free_fn(second), HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_quarantined_bytes() == size_t{100} << 20);
  CHECK(hsa_sim_quarantine_intact());
  hsa_sim_reset(1);
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
  hsa_sim_reset(1);
  char* dev = static_cast<char*>(device_alloc(3 * 4096));
  std::vector<char> host(4096, 'q');

  // pointer info
  hsa_sim_fail_pointer_info(true);
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, nullptr, nullptr, nullptr),
               HSA_STATUS_ERROR);
  hsa_sim_fail_pointer_info(false);
  CHECK(pointer_info(dev).type == HSA_EXT_POINTER_TYPE_HSA);

  // the n-th device-to-host copy (other directions do not count)
  hsa_sim_fail_nth_d2h_copy(2);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, host.data(), 16), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);
  host[0] = 'z';
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_ERROR);
  CHECK(host[0] == 'z');  // nothing copied
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);
  CHECK(copies(HSA_SIM_COPY_DEVICE_TO_HOST) == 3);  // the failed one counts
  hsa_sim_fail_nth_d2h_copy(1);
  hsa_sim_fail_nth_d2h_copy(0);  // disarms
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev, 16), HSA_STATUS_SUCCESS);

  // host-to-device copies covering an address
  hsa_sim_fail_h2d_copy_into(dev + 4096);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, host.data(), 4096), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4000, host.data(), 97), HSA_STATUS_ERROR);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4096, host.data(), 1), HSA_STATUS_ERROR);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4097, host.data(), 100), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(host.data(), dev + 4096, 16), HSA_STATUS_SUCCESS);
  hsa_sim_fail_h2d_copy_into(nullptr);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev + 4096, host.data(), 1), HSA_STATUS_SUCCESS);

  // allocations and frees
  hsa_sim_fail_next_allocations(2);
  void* ptr = nullptr;
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_SIM_POOL_DEVICE_COARSE);
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(coarse, 64, 0, &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_sim_region(gpu(0), HSA_SIM_POOL_DEVICE_COARSE),
                                             64, &ptr),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  ptr = pool_alloc(coarse, 64);
  hsa_sim_fail_next_frees(1);
  CHECK_STATUS(core().hsa_memory_free_fn(ptr), HSA_STATUS_ERROR);
  CHECK(pointer_info(ptr).type == HSA_EXT_POINTER_TYPE_HSA);  // nothing freed
  CHECK_STATUS(core().hsa_memory_free_fn(ptr), HSA_STATUS_SUCCESS);

  // loader faults
  hsa_executable_t exe = hsa_sim_executable_create();
  hsa_sim_executable_add_variable(exe, gpu(0), "v", 4, false);
  int count = 0;
  hsa_sim_fail_executable_iteration(true);
  CHECK_STATUS(hsa_sim_iterate_executables(count_executable, &count), HSA_STATUS_ERROR);
  CHECK(count == 0);
  hsa_sim_fail_executable_iteration(false);
  CHECK_STATUS(hsa_sim_iterate_executables(count_executable, &count), HSA_STATUS_SUCCESS);
  CHECK(count == 1);

  count = 0;
  hsa_sim_refuse_symbol_walk(exe, true);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(exe, gpu(0), count_symbol, &count),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  CHECK(count == 0);
  hsa_sim_refuse_symbol_walk(exe, false);
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
  hsa_sim_fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, true);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   found.symbol, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  uint32_t length = 0;
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   found.symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &length),
               HSA_STATUS_SUCCESS);
  hsa_sim_fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, false);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(
                   found.symbol, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, &size),
               HSA_STATUS_SUCCESS);
  CHECK(size == 4);

  // Reset clears every fault.
  hsa_sim_fail_pointer_info(true);
  hsa_sim_fail_next_allocations(5);
  hsa_sim_fail_nth_d2h_copy(1);
  hsa_sim_reset(1);
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
  core().hsa_executable_iterate_agent_symbols_fn(exe, hsa_sim_gpu_agent(0), collect_symbol, &list);
  return HSA_STATUS_SUCCESS;
}

void test_loader() {
  hsa_sim_reset(2);
  hsa_executable_t first = hsa_sim_executable_create();
  hsa_executable_t second = hsa_sim_executable_create();
  CHECK(first.handle != 0 && first.handle != second.handle);
  auto* var = static_cast<unsigned char*>(
      hsa_sim_executable_add_variable(first, gpu(0), "counter", 24, false));
  auto* constant = static_cast<unsigned char*>(
      hsa_sim_executable_add_variable(first, gpu(0), "table", 8, true));
  hsa_sim_executable_add_kernel(first, gpu(0), "kern.kd");
  hsa_sim_executable_add_variable_raw(first, gpu(0), "raw", 0, 0);
  void* other_gpu = hsa_sim_executable_add_variable(first, gpu(1), "elsewhere", 4, false);
  hsa_sim_executable_add_variable(second, gpu(0), "second", 4, false);
  CHECK(var != nullptr && constant != nullptr && other_gpu != nullptr);
  CHECK(var[0] == 0 && var[23] == 0);  // zeroed storage
  CHECK(hsa_sim_executable_add_variable(hsa_executable_t{1}, gpu(0), "x", 4, false) == nullptr);
  CHECK(hsa_sim_live_allocation_count() == 0);  // storage is not an allocation

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
  CHECK(copies(HSA_SIM_COPY_HOST_TO_DEVICE) == 1);
  CHECK_STATUS(core().hsa_memory_copy_fn(var, host, 25), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_sim_copy_violations() == 1);
  CHECK_STATUS(core().hsa_memory_free_fn(var), HSA_STATUS_ERROR_INVALID_ALLOCATION);

  // Executables in creation order; the callback may re-enter the runtime.
  std::vector<uint64_t> order;
  CHECK_STATUS(hsa_sim_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.size() == 2 && order[0] == first.handle && order[1] == second.handle);
  CHECK_STATUS(hsa_sim_iterate_executables(nullptr, nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  // Destroy: storage quarantined, handles unknown.
  CHECK_STATUS(core().hsa_executable_destroy_fn(first), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_executable_destroy_fn(first), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  CHECK(var[0] == HSA_SIM_POISON_BYTE);
  CHECK(pointer_info(var).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK_STATUS(core().hsa_memory_copy_fn(host, var, 4), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_executable_symbol_get_info_fn(counter, HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
                                                        &kind),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL);
  order.clear();
  CHECK_STATUS(hsa_sim_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.size() == 1 && order[0] == second.handle);
  hsa_sim_executable_destroy(second);
  CHECK(hsa_sim_quarantine_intact());

  // Reset forgets executables and symbol handles.
  hsa_executable_t third = hsa_sim_executable_create();
  hsa_sim_executable_add_kernel(third, gpu(0), "k");
  hsa_sim_reset(2);
  CHECK_STATUS(core().hsa_executable_destroy_fn(third), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  order.clear();
  CHECK_STATUS(hsa_sim_iterate_executables(record_executable, &order), HSA_STATUS_SUCCESS);
  CHECK(order.empty());
}

// ---- signals and asynchronous copies ----------------------------------------

void test_signals() {
  hsa_sim_reset(1);
  const uint64_t live_before = hsa_sim_live_signal_count();
  hsa_signal_t signal = make_signal(5);
  CHECK(hsa_sim_live_signal_count() == live_before + 1);
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
  CHECK(hsa_sim_invalid_signal_uses() == 0);
  CHECK(core().hsa_signal_load_relaxed_fn(other) == 0);
  core().hsa_signal_store_relaxed_fn(other, 1);
  CHECK(hsa_sim_invalid_signal_uses() == 2);

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
  hsa_sim_reset(1);
  CHECK(core().hsa_signal_load_relaxed_fn(signal) == 0);
  CHECK(hsa_sim_invalid_signal_uses() == 0);
  CHECK_STATUS(core().hsa_signal_destroy_fn(signal), HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_live_signal_count() == live_before);
}

void test_async_copy() {
  hsa_sim_reset(2);
  char* dev = static_cast<char*>(device_alloc(8192));
  std::vector<char> host(8192, 'a');
  std::vector<char> back(8192, 0);
  hsa_signal_t gate = make_signal(1);
  hsa_signal_t done = make_signal(1);

  // Waits for its dependency, then copies and decrements the completion signal.
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 8192, 1, &gate,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(hsa_sim_async_copy_count() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(copies(HSA_SIM_COPY_HOST_TO_DEVICE) == 0);
  core().hsa_signal_store_screlease_fn(gate, 0);
  CHECK(wait_for(done, 0));
  CHECK(dev[0] == 'a' && dev[8191] == 'a');
  CHECK(copies(HSA_SIM_COPY_HOST_TO_DEVICE) == 1);

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
  CHECK(copies(HSA_SIM_COPY_DEVICE_TO_DEVICE) == 1 && copies(HSA_SIM_COPY_DEVICE_TO_HOST) == 1);

  // Validation.
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(nullptr, gpu(0), host.data(), cpu(), 1, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(hsa_sim_copy_violations() == 1);
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
  CHECK(hsa_sim_copy_violations() == 2);
  CHECK(hsa_sim_quarantine_intact());

  // Injected refusals leave the completion signal alone.
  core().hsa_signal_store_relaxed_fn(done, 1);
  hsa_sim_fail_nth_async_copy(2);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  core().hsa_signal_store_relaxed_fn(done, 1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(back.data(), cpu(), dev, gpu(0), 16, 0, nullptr,
                                                  done),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_sim_fail_h2d_copy_into(dev + 100);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host.data(), cpu(), 200, 0,
                                                  nullptr, done),
               HSA_STATUS_ERROR);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(hsa_sim_async_copy_count() == 5);
  CHECK(hsa_sim_copy_violations() == 2);

  // An injected failure during the copy: nothing copied, completion -1.
  hsa_sim_fail_h2d_copy_into(nullptr);
  hsa_sim_fail_nth_async_copy_completion(1);
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
  hsa_sim_reset(2);
  CHECK(core().hsa_signal_load_relaxed_fn(done) == 1);
  CHECK(hsa_sim_async_copy_count() == 0);

  core().hsa_signal_destroy_fn(gate);
  core().hsa_signal_destroy_fn(done);
}

void test_strict_async_access() {
  hsa_sim_reset(2);
  hsa_sim_set_strict_async_access(true);
  char* dev0 = static_cast<char*>(device_alloc(4096, 0));
  char* dev1 = static_cast<char*>(device_alloc(4096, 1));
  char* staging =
      static_cast<char*>(pool_alloc(pool(cpu(), HSA_SIM_POOL_SYSTEM_FINE), 4096));
  std::vector<char> heap(4096, 's');
  hsa_signal_t done = make_signal(0);

  auto copy = [&](void* dst, hsa_agent_t dst_agent, const void* src, hsa_agent_t src_agent) {
    core().hsa_signal_store_relaxed_fn(done, 1);
    CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dst, dst_agent, src, src_agent, 64, 0,
                                                    nullptr, done),
                 HSA_STATUS_SUCCESS);
    CHECK(wait_for(done, 0));
    return hsa_sim_copy_violations();
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
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_sim_region(cpu(), HSA_SIM_POOL_SYSTEM_FINE),
                                             4096, &region_memory),
               HSA_STATUS_SUCCESS);
  CHECK(copy(region_memory, cpu(), dev1, gpu(1)) == 3);
  // CPU-to-CPU copies run on the CPU, which reaches host memory.
  CHECK(copy(heap.data(), cpu(), staging, cpu()) == 3);
  // Off by default: after reset, heap memory is accepted again.
  hsa_sim_reset(2);
  char* dev = static_cast<char*>(device_alloc(4096));
  CHECK(copy(dev, gpu(0), heap.data(), cpu()) == 0);
  core().hsa_signal_destroy_fn(done);
}

// ---- concurrency ------------------------------------------------------------

void test_threads() {
  hsa_sim_reset(2);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      const hsa_amd_memory_pool_t p = pool(gpu(static_cast<uint32_t>(t % 2)),
                                           HSA_SIM_POOL_DEVICE_COARSE);
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
  CHECK(hsa_sim_copy_violations() == 0);
  CHECK(hsa_sim_live_allocation_count() == 0);
  CHECK(hsa_sim_quarantine_intact());
}

// Leaves a copy blocked on a dependency that never reaches 0: the process
// must still exit normally.
void leave_blocked_copy_at_exit() {
  hsa_sim_reset(1);
  static char host[16];
  void* dev = device_alloc(16);
  hsa_signal_t gate = make_signal(1);
  hsa_signal_t done = make_signal(1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dev, gpu(0), host, cpu(), 16, 1, &gate, done),
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
  leave_blocked_copy_at_exit();
  std::printf("sim_selftest: %d checks, %d failures\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
