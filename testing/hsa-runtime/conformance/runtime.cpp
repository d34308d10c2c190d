// runtime.cpp: the tables, the runtime before init (CUDA), topology, agent
// and pool attributes, ISAs.

#include <cstdlib>

#include "conformance.h"

using namespace conformance;

namespace {

hsa_status_t collect_agent(hsa_agent_t agent, void* data) {
  static_cast<std::vector<hsa_agent_t>*>(data)->push_back(agent);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t collect_handle(uint64_t handle, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(handle);
  return HSA_STATUS_SUCCESS;
}
hsa_status_t collect_pool(hsa_amd_memory_pool_t p, void* data) {
  return collect_handle(p.handle, data);
}
hsa_status_t collect_region(hsa_region_t r, void* data) { return collect_handle(r.handle, data); }
hsa_status_t collect_isa(hsa_isa_t isa, void* data) {
  static_cast<std::vector<hsa_isa_t>*>(data)->push_back(isa);
  return HSA_STATUS_SUCCESS;
}

hsa_amd_memory_pool_access_t access(hsa_agent_t agent, hsa_amd_memory_pool_t p) {
  hsa_amd_memory_pool_access_t value = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
  CHECK_STATUS(amd().hsa_amd_agent_memory_pool_get_info_fn(
                   agent, p, HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &value),
               HSA_STATUS_SUCCESS);
  return value;
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

template <typename Table>
bool entry_set(const Table& table, size_t offset) {
  void* entry = nullptr;
  std::memcpy(&entry, reinterpret_cast<const unsigned char*>(&table) + offset, sizeof(entry));
  return entry != nullptr;
}
#define ENTRY_SET(table, field) \
  CHECKF(entry_set(table, offsetof(std::remove_reference_t<decltype(table)>, field)), #field)

}  // namespace

CASE("tables: versions as ROCr fills them, the entries set, a tool's wrapper kept", kBoth) {
  hsa_rt_reset(1);
  CHECK(core().version.major_id == HSA_CORE_API_TABLE_MAJOR_VERSION);
  CHECK(core().version.minor_id == sizeof(CoreApiTable));
  CHECK(core().version.step_id == HSA_CORE_API_TABLE_STEP_VERSION);
  CHECK(amd().version.major_id == HSA_AMD_EXT_API_TABLE_MAJOR_VERSION);
  CHECK(amd().version.minor_id == sizeof(AmdExtTable));
  CHECK(amd().version.step_id == HSA_AMD_EXT_API_TABLE_STEP_VERSION);
  CHECK(hsa_rt_core_table_size() == sizeof(CoreApiTable));
  CHECK(hsa_rt_amd_ext_table_size() == sizeof(AmdExtTable));
  // Every entry the library reads or replaces, and those a tool may use.
  const CoreApiTable& c = core();
  const AmdExtTable& a = amd();
  ENTRY_SET(c, hsa_memory_allocate_fn);
  ENTRY_SET(c, hsa_memory_free_fn);
  ENTRY_SET(c, hsa_memory_copy_fn);
  ENTRY_SET(c, hsa_iterate_agents_fn);
  ENTRY_SET(c, hsa_agent_get_info_fn);
  ENTRY_SET(c, hsa_signal_create_fn);
  ENTRY_SET(c, hsa_signal_destroy_fn);
  ENTRY_SET(c, hsa_signal_load_scacquire_fn);
  ENTRY_SET(c, hsa_signal_store_relaxed_fn);
  ENTRY_SET(c, hsa_signal_wait_scacquire_fn);
  ENTRY_SET(c, hsa_system_get_major_extension_table_fn);
  ENTRY_SET(c, hsa_executable_iterate_agent_symbols_fn);
  ENTRY_SET(c, hsa_executable_symbol_get_info_fn);
  ENTRY_SET(c, hsa_queue_create_fn);
  ENTRY_SET(c, hsa_queue_add_write_index_scacq_screl_fn);
  ENTRY_SET(c, hsa_agent_iterate_isas_fn);
  ENTRY_SET(c, hsa_executable_load_agent_code_object_fn);
  ENTRY_SET(c, hsa_executable_get_symbol_by_name_fn);
  ENTRY_SET(a, hsa_amd_memory_pool_allocate_fn);
  ENTRY_SET(a, hsa_amd_memory_pool_free_fn);
  ENTRY_SET(a, hsa_amd_pointer_info_fn);
  ENTRY_SET(a, hsa_amd_agent_iterate_memory_pools_fn);
  ENTRY_SET(a, hsa_amd_memory_pool_get_info_fn);
  ENTRY_SET(a, hsa_amd_agent_memory_pool_get_info_fn);
  ENTRY_SET(a, hsa_amd_agents_allow_access_fn);
  ENTRY_SET(a, hsa_amd_memory_lock_fn);
  ENTRY_SET(a, hsa_amd_memory_lock_to_pool_fn);
  ENTRY_SET(a, hsa_amd_memory_unlock_fn);
  ENTRY_SET(a, hsa_amd_memory_async_copy_fn);
  ENTRY_SET(a, hsa_amd_memory_async_copy_rect_fn);
  ENTRY_SET(a, hsa_amd_signal_async_handler_fn);
#if HSA_RT_HAVE_VMEM
  // The generations with the vmem API fill it, as ROCr does.
  ENTRY_SET(a, hsa_amd_memory_async_copy_on_engine_fn);
  ENTRY_SET(a, hsa_amd_vmem_address_reserve_fn);
  ENTRY_SET(a, hsa_amd_vmem_address_free_fn);
  ENTRY_SET(a, hsa_amd_vmem_handle_create_fn);
  ENTRY_SET(a, hsa_amd_vmem_handle_release_fn);
  ENTRY_SET(a, hsa_amd_vmem_map_fn);
  ENTRY_SET(a, hsa_amd_vmem_unmap_fn);
  ENTRY_SET(a, hsa_amd_vmem_set_access_fn);
  ENTRY_SET(a, hsa_amd_vmem_get_access_fn);
  ENTRY_SET(a, hsa_amd_vmem_retain_alloc_handle_fn);
  ENTRY_SET(a, hsa_amd_vmem_get_alloc_properties_from_handle_fn);
  CHECK(a.hsa_amd_vmem_export_shareable_handle_fn == nullptr);
  CHECK(a.hsa_amd_vmem_import_shareable_handle_fn == nullptr);
  CHECK(a.hsa_amd_memory_copy_engine_status_fn == nullptr);
#else
  // 5.2 headers: no vmem API; the control interface says so and counts nothing.
  CHECK(!hsa_rt_vmem_supported());
  CHECK(count(HSA_RT_COUNT_VMEM_MAPPINGS) == 0 && count(HSA_RT_COUNT_VMEM_HANDLES) == 0 &&
        count(HSA_RT_COUNT_VMEM_RESERVATIONS) == 0);
  hsa_rt_inject(HSA_RT_FAULT_NTH_VMEM_MAP, 0, 1);  // exists, changes nothing
#endif
#if HSA_RT_HAVE_VMEM_RESERVE_ALIGN
  ENTRY_SET(a, hsa_amd_vmem_address_reserve_align_fn);
#endif
  // Unimplemented entries are NULL.
  CHECK(c.hsa_soft_queue_create_fn == nullptr);
  CHECK(c.hsa_executable_load_code_object_fn == nullptr);
  CHECK(a.hsa_amd_memory_fill_fn == nullptr);
  CHECK(a.hsa_amd_async_function_fn == nullptr);
  CHECK(a.hsa_amd_queue_cu_get_mask_fn == nullptr);

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

CASE("runtime: before init every entry answers NOT_INITIALIZED", kCuda | kBeforeInit) {
  CHECK(!hsa_rt_initialized() && hsa_rt_gpu_count() == 0 && hsa_rt_cpu_agent().handle == 0);
  void* ptr = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_region_t{1}, 64, &ptr),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  char buffer[64];
  CHECK_STATUS(core().hsa_memory_copy_fn(buffer, buffer + 32, 16),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(core().hsa_iterate_agents_fn(collect_agent, nullptr),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(buffer, &info, nullptr, nullptr, nullptr),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  hsa_signal_t signal{0};
  CHECK_STATUS(core().hsa_signal_create_fn(0, 0, nullptr, &signal),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, nullptr),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(buffer, 64, nullptr, 0, &ptr),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(buffer), HSA_STATUS_ERROR_NOT_INITIALIZED);
#if HSA_RT_HAVE_VMEM
  void* va = nullptr;
  CHECK_STATUS(amd().hsa_amd_vmem_address_reserve_fn(&va, 4096, 0, 0),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(amd().hsa_amd_vmem_unmap_fn(buffer, 4096), HSA_STATUS_ERROR_NOT_INITIALIZED);
#endif
}

CASE("runtime: init without a driver fails cleanly, saying so, holding nothing",
     kCuda | kBeforeInit) {
  const char* configured = std::getenv("HSA_RT_LIBCUDA");
  const std::string previous = configured != nullptr ? configured : "";
  setenv("HSA_RT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  CHECK(hsa_rt_init() == HSA_RT_INIT_NO_DRIVER);
  CHECK(std::strncmp(hsa_rt_init_message(), "no CUDA driver", 14) == 0 &&
        std::strstr(hsa_rt_init_message(), "/nonexistent/libcuda.so.1") != nullptr);
  CHECK(!hsa_rt_initialized() && hsa_rt_gpu_count() == 0 && hsa_rt_cpu_agent().handle == 0 &&
        hsa_rt_cuda_driver() == nullptr);
  if (configured != nullptr) {
    setenv("HSA_RT_LIBCUDA", previous.c_str(), 1);
  } else {
    unsetenv("HSA_RT_LIBCUDA");
  }
}

CASE("topology: the CPU then the GPUs, agent attributes, handles per epoch", kBoth) {
  if (!reset(3)) return;
  CHECK(hsa_rt_gpu_count() == 3);
  std::vector<hsa_agent_t> agents;
  CHECK_STATUS(core().hsa_iterate_agents_fn(collect_agent, &agents), HSA_STATUS_SUCCESS);
  CHECK(agents.size() == 4 && agents[0].handle == cpu().handle);
  for (uint32_t i = 0; i < 3 && agents.size() == 4; ++i) {
    CHECK(agents[i + 1].handle == gpu(i).handle);
  }
  CHECK(gpu(3).handle == 0);
  CHECK(cpu().handle != 0);
  const auto stop = [](hsa_agent_t, void*) { return HSA_STATUS_INFO_BREAK; };
  CHECK_STATUS(core().hsa_iterate_agents_fn(stop, nullptr),
               HSA_STATUS_INFO_BREAK);
  CHECK_STATUS(core().hsa_iterate_agents_fn(nullptr, nullptr), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  hsa_device_type_t type{};
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_SUCCESS);
  CHECK(type == HSA_DEVICE_TYPE_GPU);
  CHECK_STATUS(core().hsa_agent_get_info_fn(cpu(), HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_SUCCESS);
  CHECK(type == HSA_DEVICE_TYPE_CPU);

  // NAME: exactly 64 bytes, NUL-padded; a GPU is named after its ISA's
  // processor, as ROCr names GPU agents.
  unsigned char name[80];
  std::memset(name, 0xAB, sizeof(name));
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(1), HSA_AGENT_INFO_NAME, name), HSA_STATUS_SUCCESS);
  const auto* text = reinterpret_cast<const char*>(name);
  CHECK(on_host() ? std::strcmp(text, "gfx942") == 0 : std::strncmp(text, "sm_", 3) == 0);
  CHECK(name[63] == 0 && name[64] == 0xAB);
  uint32_t node = 99;
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(2), HSA_AGENT_INFO_NODE, &node),
               HSA_STATUS_SUCCESS);
  CHECK(node == 3);
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(0), HSA_AGENT_INFO_DEVICE, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // MEMORY_AVAIL: GPUs only (host: 16 GiB; CUDA: the driver's free bytes).
  CHECK(on_host() ? memory_avail(0) == 16 * kGiB : memory_avail(0) > 0);
  uint64_t avail = 0;
  CHECK_STATUS(core().hsa_agent_get_info_fn(
                   cpu(), static_cast<hsa_agent_info_t>(HSA_RT_AGENT_INFO_MEMORY_AVAIL), &avail),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  // The CUDA backend's devices: an ordinal and a primary context each.
  if (on_host()) {
    CHECK(hsa_rt_cuda_driver() == nullptr && hsa_rt_cuda_device(gpu(0)) == -1 &&
          hsa_rt_cuda_context(gpu(0)) == nullptr);
  } else {
    CHECK(hsa_rt_cuda_driver() != nullptr && hsa_rt_cuda_device(gpu(1)) == 1 &&
          hsa_rt_cuda_context(gpu(0)) != nullptr && hsa_rt_cuda_device(cpu()) == -1);
  }

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
  const char* status_text = nullptr;
  CHECK_STATUS(core().hsa_status_string_fn(HSA_STATUS_ERROR_INVALID_AGENT, &status_text),
               HSA_STATUS_SUCCESS);
  CHECK(status_text != nullptr && std::strstr(status_text, "INVALID_AGENT") != nullptr);

  // No GPU at all (the host backend; the CUDA backend keeps one).
  hsa_rt_reset(0);
  agents.clear();
  CHECK_STATUS(core().hsa_iterate_agents_fn(collect_agent, &agents), HSA_STATUS_SUCCESS);
  CHECK(agents.size() == (on_host() ? 1u : 2u));
  CHECK(on_host() ? gpu(0).handle == 0 : gpu(0).handle != 0);
}

CASE("pools and regions: per agent, their attributes, the access table", kBoth) {
  if (!reset(2)) return;
  // GPU pools: DEVICE_COARSE, and DEVICE_FINE on the host backend.
  const size_t own = on_host() ? 2 : 1;
  std::vector<uint64_t> gpu_pools;
  CHECK_STATUS(amd().hsa_amd_agent_iterate_memory_pools_fn(gpu(0), collect_pool, &gpu_pools),
               HSA_STATUS_SUCCESS);
  CHECK(gpu_pools.size() == own);
  CHECK(gpu_pools.size() == own && gpu_pools[0] == pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE).handle);
  CHECK(gpu_pools.size() == own &&
        gpu_pools.back() == pool(gpu(0), fine_device_kind()).handle);
  CHECK(on_host() || pool(gpu(0), HSA_RT_POOL_DEVICE_FINE).handle == 0);
  std::vector<uint64_t> cpu_pools;
  CHECK_STATUS(amd().hsa_amd_agent_iterate_memory_pools_fn(cpu(), collect_pool, &cpu_pools),
               HSA_STATUS_SUCCESS);
  CHECK(cpu_pools.size() == 3);
  CHECK(pool(gpu(0), HSA_RT_POOL_SYSTEM_FINE).handle == 0);
  CHECK(pool(cpu(), HSA_RT_POOL_DEVICE_COARSE).handle == 0);
  CHECK(hsa_rt_region(gpu(1), fine_device_kind()).handle ==
        pool(gpu(1), fine_device_kind()).handle);

  // A GPU's regions: its own, then the system ones (as ROCr lists them).
  std::vector<uint64_t> gpu_regions;
  CHECK_STATUS(core().hsa_agent_iterate_regions_fn(gpu(1), collect_region, &gpu_regions),
               HSA_STATUS_SUCCESS);
  CHECK(gpu_regions.size() == own + 3);
  CHECK(gpu_regions.size() == own + 3 &&
        gpu_regions[own + 1] == hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_KERNARG).handle);
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
    if (p.handle == 0 && !on_host() && e.kind == HSA_RT_POOL_DEVICE_FINE) continue;
    CHECK(p.handle != 0);
    const auto get = [&](hsa_amd_memory_pool_info_t attribute, void* value) {
      return amd().hsa_amd_memory_pool_get_info_fn(p, attribute, value);
    };
    hsa_amd_segment_t segment = HSA_AMD_SEGMENT_GROUP;
    uint32_t flags = 0;
    bool allowed = false;
    bool by_all = !e.by_all;
    size_t granule = 0, alignment = 0, size = 0, max_size = 0;
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment), HSA_STATUS_SUCCESS);
    CHECK(segment == HSA_AMD_SEGMENT_GLOBAL);
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags), HSA_STATUS_SUCCESS);
    CHECK(flags == e.flags);
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed),
                 HSA_STATUS_SUCCESS);
    CHECK(allowed);
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, &granule),
                 HSA_STATUS_SUCCESS);
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT, &alignment),
                 HSA_STATUS_SUCCESS);
    // What each allocator guarantees: cuMemAlloc 256 bytes, pages elsewhere.
    const bool cuda_device = !on_host() && e.agent.handle != cpu().handle;
    CHECK(granule == 4096 && alignment == (cuda_device ? 256 : 4096));
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_SIZE, &size), HSA_STATUS_SUCCESS);
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE, &max_size), HSA_STATUS_SUCCESS);
    CHECK(size > 0 && max_size == size);
    CHECK_STATUS(get(HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL, &by_all), HSA_STATUS_SUCCESS);
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
  CHECK(access(gpu(0), pool(gpu(0), fine_device_kind())) == allowed);
  CHECK(access(gpu(0), pool(gpu(1), HSA_RT_POOL_DEVICE_COARSE)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_FINE)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_KERNARG)) == disallowed);
  CHECK(access(gpu(0), pool(cpu(), HSA_RT_POOL_SYSTEM_COARSE)) == disallowed);
  CHECK(access(cpu(), pool(cpu(), HSA_RT_POOL_SYSTEM_COARSE)) == allowed);
  CHECK(access(cpu(), pool(gpu(1), fine_device_kind())) == disallowed);
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

CASE("ISAs: one per GPU and none for the CPU, their attributes, queue sizes", kBoth) {
  if (!reset(2)) return;
  std::vector<hsa_isa_t> isas = agent_isas(gpu(0));
  CHECK(isas.size() == 1);
  if (isas.size() != 1) return;
  const std::string name = isa_name(isas[0]);
  CHECK(on_host() ? name == "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"
                  : name.compare(0, 22, "nvptx-nvidia-cuda--sm_") == 0 &&
                        (!on_fake_driver() || name == "nvptx-nvidia-cuda--sm_90"));
  // One handle per ISA, shared by agents (ROCr's ISA objects are global),
  // found by its name too.
  CHECK(agent_isas(gpu(1)).size() == 1 && agent_isas(gpu(1))[0].handle == isas[0].handle);
  hsa_isa_t found{0};
  CHECK_STATUS(core().hsa_isa_from_name_fn(name.c_str(), &found), HSA_STATUS_SUCCESS);
  CHECK(found.handle == isas[0].handle);
  CHECK_STATUS(core().hsa_isa_from_name_fn("amdgcn-amd-amdhsa--gfx000", &found),
               HSA_STATUS_ERROR_INVALID_ISA_NAME);
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
  CHECK_STATUS(core().hsa_isa_get_info_fn(isas[0], HSA_ISA_INFO_WORKGROUP_MAX_SIZE, 1, &value),
               HSA_STATUS_ERROR_INVALID_INDEX);

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
}

CASE("ISAs: the test hook sets another ISA (and agent name), or none", kHost) {
  hsa_rt_reset(2);
  CHECK(hsa_rt_set_agent_isa(gpu(1), "amdgcn-amd-amdhsa--gfx1100"));
  std::vector<hsa_isa_t> isas = agent_isas(gpu(1));
  CHECK(isas.size() == 1);
  if (isas.size() == 1) CHECK(isa_name(isas[0]) == "amdgcn-amd-amdhsa--gfx1100");
  char name[64] = {};
  CHECK_STATUS(core().hsa_agent_get_info_fn(gpu(1), HSA_AGENT_INFO_NAME, name), HSA_STATUS_SUCCESS);
  CHECK(std::strcmp(name, "gfx1100") == 0);
  CHECK(hsa_rt_set_agent_isa(gpu(1), nullptr));
  CHECK(agent_isas(gpu(1)).empty());
  CHECK(!hsa_rt_set_agent_isa(hsa_agent_t{5}, nullptr));
  hsa_rt_reset(2);
  CHECK(agent_isas(gpu(1)).size() == 1);  // reset brings the default back
}
