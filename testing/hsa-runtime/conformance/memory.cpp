// memory.cpp: allocation, pointer info, access grants, hsa_memory_copy and
// its checks, locked host memory, the quarantine and address reuse, device
// capacity, fault injection, threads.

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "conformance.h"

using namespace conformance;

namespace {

// The agents pointer info lists as able to reach ptr, in its order.
std::vector<uint64_t> accessible(const void* ptr) {
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  uint32_t count = 0;
  hsa_agent_t* list = nullptr;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(ptr, &info, std::malloc, &count, &list),
               HSA_STATUS_SUCCESS);
  std::vector<uint64_t> handles;
  for (uint32_t i = 0; i < count && list != nullptr; ++i) handles.push_back(list[i].handle);
  std::free(list);
  return handles;
}

hsa_status_t allow(std::initializer_list<hsa_agent_t> agents, const void* ptr) {
  const std::vector<hsa_agent_t> list(agents);
  return amd().hsa_amd_agents_allow_access_fn(static_cast<uint32_t>(list.size()), list.data(),
                                              nullptr, ptr);
}

// Whether GPU gpu_index may read src, as its engine does in strict mode: an
// asynchronous copy of 64 bytes from src (the CPU's side) into its memory dst
// that is not a violation.
bool gpu_reaches(uint32_t gpu_index, void* dst, const void* src) {
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, true);
  const uint64_t before = violations();
  hsa_signal_t done = make_signal(1);
  CHECK_STATUS(amd().hsa_amd_memory_async_copy_fn(dst, gpu(gpu_index), src, cpu(), 64, 0, nullptr,
                                                  done),
               HSA_STATUS_SUCCESS);
  CHECK(wait_for(done, 0));
  core().hsa_signal_destroy_fn(done);
  hsa_rt_set_mode(HSA_RT_MODE_STRICT_ASYNC_ACCESS, false);
  return violations() == before;
}

hsa_status_t lock_host(void* host, size_t size, std::initializer_list<hsa_agent_t> agents,
                       void** out) {
  std::vector<hsa_agent_t> list(agents);
  return amd().hsa_amd_memory_lock_fn(host, size, list.empty() ? nullptr : list.data(),
                                      static_cast<int>(list.size()), out);
}

// Whether the driver has host memory registered (CUDA: it tells pinned host
// memory from pageable); the host backend has nothing to ask.
bool driver_pinned(const void* ptr) {
  if (on_host()) return true;
  const cuda_driver_t* d = hsa_rt_cuda_driver();
  unsigned int type = 0;
  return d->cuCtxSetCurrent(hsa_rt_cuda_context(gpu(0))) == CUDA_SUCCESS &&
         d->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(ptr)) == CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_HOST;
}

}  // namespace

CASE("memory: allocation: argument checks, rounding, alignment, frees", kBoth) {
  if (!reset(2, 1)) return;
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
  CHECK(count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);

  // Rounding and alignment.
  void* one = pool_alloc(coarse, 1, 0x5);
  void* more = pool_alloc(coarse, 4097);
  const uintptr_t alignment = on_host() ? 4096 : 256;  // the pool's RUNTIME_ALLOC_ALIGNMENT
  CHECK(reinterpret_cast<uintptr_t>(one) % alignment == 0);
  CHECK(reinterpret_cast<uintptr_t>(more) % alignment == 0);
  CHECK(pointer_info(one).sizeInBytes == 4096);
  CHECK(pointer_info(more).sizeInBytes == 8192);
  uint32_t flags = 0;
  CHECK(hsa_rt_allocation_flags(one, &flags) && flags == 0x5);
  CHECK(!hsa_rt_allocation_flags(static_cast<char*>(one) + 1, &flags));
  // Fresh host-backend device memory is not cleared: it holds poison, as
  // VRAM holds what was there before.
  CHECK(!on_host() || static_cast<unsigned char*>(more)[8191] == HSA_RT_POISON_BYTE);

  void* region_ptr = nullptr;
  const hsa_region_t region = hsa_rt_region(gpu(last_gpu()), fine_device_kind());
  CHECK_STATUS(core().hsa_memory_allocate_fn(region, 10, &region_ptr),
               HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 3);

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
  CHECK(count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);

  // A large allocation costs nothing until touched (host: 16 GiB devices).
  if (!on_host()) return;
  void* big = pool_alloc(coarse, size_t{8} << 30);
  CHECK(big != nullptr);
  CHECK(pointer_info(static_cast<char*>(big) + (size_t{6} << 30)).agentBaseAddress == big);
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(big), HSA_STATUS_SUCCESS);
}

CASE("memory: pointer info: allocations, grants, user data, struct sizes", kBoth) {
  if (!reset(2)) return;
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

  // Accessible agents: owner first, then the last call's grants; NULL list
  // pointers allowed.
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
  list = nullptr;
  CHECK_STATUS(amd().hsa_amd_pointer_info_fn(dev, &info, std::malloc, &count, &list),
               HSA_STATUS_SUCCESS);
  CHECK(count == 3 && list[0].handle == gpu(1).handle && list[1].handle == gpu(0).handle &&
        list[2].handle == cpu().handle);
  std::free(list);
  CHECK_STATUS(amd().hsa_amd_agents_allow_access_fn(1, grant, nullptr, dev), HSA_STATUS_SUCCESS);
  CHECK(accessible(dev) == (std::vector<uint64_t>{gpu(1).handle, gpu(0).handle}));

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

// ROCr's MemoryRegion::AllowAccess maps an allocation for exactly the agents
// listed (and its owner): a second call replaces the first's grants.
CASE("memory: allow_access replaces the grants: the owner and the agents listed", kBoth) {
  if (!reset(2)) return;
  using Agents = std::vector<uint64_t>;
  const uint64_t host = cpu().handle, gpu0 = gpu(0).handle, gpu1 = gpu(1).handle;
  char* dev0 = static_cast<char*>(device_alloc(4096, 0));
  char* dev1 = static_cast<char*>(device_alloc(4096, 1));

  // System memory of a CPU pool: the CPU's alone, then GPU 0's, then GPU 1's
  // only: GPU 0 loses it, in pointer info and for its engine.
  char* system = static_cast<char*>(pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_COARSE), 4096));
  CHECK(accessible(system) == Agents{host});
  CHECK_STATUS(allow({gpu(0)}, system), HSA_STATUS_SUCCESS);
  CHECK(accessible(system) == (Agents{host, gpu0}));
  CHECK(gpu_reaches(0, dev0, system) && !gpu_reaches(1, dev1, system));
  CHECK_STATUS(allow({gpu(1)}, system), HSA_STATUS_SUCCESS);
  CHECK(accessible(system) == (Agents{host, gpu1}));
  CHECK(!gpu_reaches(0, dev0, system) && gpu_reaches(1, dev1, system));
  // CPU agents only: no GPU is left.
  CHECK_STATUS(allow({gpu(0), gpu(1)}, system), HSA_STATUS_SUCCESS);
  CHECK_STATUS(allow({cpu()}, system), HSA_STATUS_SUCCESS);
  CHECK(accessible(system) == Agents{host});
  CHECK(!gpu_reaches(0, dev0, system) && !gpu_reaches(1, dev1, system));

  // hsa_memory_allocate's system memory starts mapped for every GPU; a grant
  // replaces that too.
  void* region_memory = nullptr;
  CHECK_STATUS(core().hsa_memory_allocate_fn(hsa_rt_region(cpu(), HSA_RT_POOL_SYSTEM_FINE), 4096,
                                             &region_memory),
               HSA_STATUS_SUCCESS);
  CHECK(accessible(region_memory) == (Agents{host, gpu0, gpu1}));
  CHECK_STATUS(allow({gpu(1)}, region_memory), HSA_STATUS_SUCCESS);
  CHECK(accessible(region_memory) == (Agents{host, gpu1}));

  // Device memory keeps its owner whatever the list says.
  CHECK_STATUS(allow({gpu(1)}, dev0), HSA_STATUS_SUCCESS);
  CHECK(accessible(dev0) == (Agents{gpu0, gpu1}));
  CHECK_STATUS(allow({cpu()}, dev0), HSA_STATUS_SUCCESS);
  CHECK(accessible(dev0) == (Agents{gpu0, host}));
  CHECK_STATUS(allow({gpu(1), gpu(0)}, dev0), HSA_STATUS_SUCCESS);
  CHECK(accessible(dev0) == (Agents{gpu0, gpu1}));
  // A refused call changes nothing.
  CHECK_STATUS(allow({cpu(), hsa_agent_t{77}}, dev0), HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(accessible(dev0) == (Agents{gpu0, gpu1}));
  for (void* p : {static_cast<void*>(dev0), static_cast<void*>(dev1), static_cast<void*>(system),
                  region_memory}) {
    CHECK_STATUS(core().hsa_memory_free_fn(p), HSA_STATUS_SUCCESS);
  }
  CHECK(violations() == 4);  // the refused strict-mode copies above
}

CASE("memory: hsa_memory_copy: directions counted, violations copy nothing", kBoth) {
  if (!reset(2, 1)) return;
  char* a = static_cast<char*>(device_alloc(100));  // 4096 bytes
  char* b = static_cast<char*>(device_alloc(8192, last_gpu()));
  std::vector<char> host(8192, 'h');
  std::vector<char> back(8192, 0);

  CHECK_STATUS(core().hsa_memory_copy_fn(a, host.data(), 4096), HSA_STATUS_SUCCESS);
  CHECK(dev_byte(a, 4095) == 'h');
  CHECK_STATUS(core().hsa_memory_copy_fn(b + 100, a, 4096), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 100, 4096), HSA_STATUS_SUCCESS);
  CHECK(back[0] == 'h' && back[4095] == 'h');
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), host.data(), 10), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_DEVICE) == 1);
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 1);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_HOST) == 1);
  CHECK(violations() == 0);

  // Size 0: success, nothing counted.
  CHECK_STATUS(core().hsa_memory_copy_fn(a, host.data(), 0), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);

  // Violations copy nothing.
  dev_fill(a, 'x', 4096);
  CHECK_STATUS(core().hsa_memory_copy_fn(a + 1, host.data(), 4096),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);  // one byte past the end
  CHECK(dev_byte(a, 1) == 'x');
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 8000, 200),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(nullptr, host.data(), 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(a, nullptr, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 4);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == 1);

  // Freed memory is a violation in either direction.
  CHECK_STATUS(core().hsa_memory_free_fn(b), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), b + 16, 16),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(b, host.data(), 16), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 6);
  CHECK(hsa_rt_quarantine_intact());
}

// Host-side checks: what would otherwise be a wild access is a violation.
CASE("memory: copies into noted host blocks, unmapped host memory, raw variables", kBoth) {
  hsa_rt_reset(1);
  char* dev = static_cast<char*>(device_alloc(4096));
  dev_fill(dev, 'd', 4096);

  // A noted host block: a copy may not run past its end.
  std::vector<char> block(1000, 'b');
  hsa_rt_note_host_block(block.data(), block.size());
  CHECK_STATUS(core().hsa_memory_copy_fn(block.data() + 500, dev, 500), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(block.data() + 500, dev, 501),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, block.data() + 999, 2),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 2);
  hsa_rt_forget_host_block(block.data());
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, block.data(), 1000), HSA_STATUS_SUCCESS);

  // Unmapped host memory.
  const long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(gone != MAP_FAILED);
  munmap(gone, static_cast<size_t>(page));
  CHECK_STATUS(core().hsa_memory_copy_fn(dev, gone, 16), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 3);

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
  CHECK(violations() == 4);
  // Reset forgets the unbacked ranges with the executables.
  hsa_rt_reset(1);
  char* fresh = static_cast<char*>(device_alloc(64));
  CHECK_STATUS(core().hsa_memory_copy_fn(fresh, block.data(), 64), HSA_STATUS_SUCCESS);
  CHECK(violations() == 0);
}

// hsa_amd_memory_lock / _lock_to_pool / unlock (ROCr's MemoryRegion::Lock):
// the checks in ROCr's order, *agent_ptr reset once the first passed.
CASE("locks: argument checks in ROCr's order, lists without a GPU, injected faults", kBoth) {
  if (!reset(2, 1)) return;
  std::vector<char> host(8192, 'h');
  void* const marker = reinterpret_cast<void*>(0x1);
  void* out = marker;
  hsa_agent_t gpu0[] = {gpu(0)};  // lock takes a non-const list
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(nullptr, 64, nullptr, 0, &out),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(host.data(), 0, nullptr, 0, &out),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(host.data(), 64, nullptr, 0, nullptr),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(out == marker);  // not reached
  // A list without a count, a count without a list: *agent_ptr is NULL by then.
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(host.data(), 64, gpu0, 0, &out),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  out = marker;
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(host.data(), 64, nullptr, 1, &out),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  CHECK_STATUS(amd().hsa_amd_memory_lock_fn(host.data(), 64, gpu0, -1, &out),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(lock_host(host.data(), 64, {gpu(0), hsa_agent_t{77}}, &out),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK(out == nullptr && count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
  // Unmapped host memory cannot be registered.
  const long page = sysconf(_SC_PAGESIZE);
  void* gone = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(gone != MAP_FAILED);
  munmap(gone, static_cast<size_t>(page));
  CHECK_STATUS(lock_host(gone, 64, {}, &out), HSA_STATUS_ERROR);
  // CPUs only: nothing to map, nothing locked, the host pointer back (for
  // the CPU, even unmapped memory).
  CHECK_STATUS(lock_host(host.data(), 64, {cpu()}, &out), HSA_STATUS_SUCCESS);
  CHECK(out == host.data() && count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
  CHECK_STATUS(lock_host(gone, 64, {cpu()}, &out), HSA_STATUS_SUCCESS);
  CHECK(out == gone && pointer_info(host.data()).type == HSA_EXT_POINTER_TYPE_UNKNOWN);

  // _lock_to_pool: flags with the first checks, then a pool a CPU owns.
  const hsa_amd_memory_pool_t fine = pool(cpu(), HSA_RT_POOL_SYSTEM_FINE);
  const auto to_pool = [&](hsa_amd_memory_pool_t p, uint32_t flags) {
    return amd().hsa_amd_memory_lock_to_pool_fn(host.data(), 4096, gpu0, 1, p, flags, &out);
  };
  out = marker;
  CHECK_STATUS(to_pool(fine, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(out == marker);
  CHECK_STATUS(to_pool(pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE), 0), kInvalidPool);
  CHECK(out == nullptr);
  CHECK_STATUS(to_pool(hsa_amd_memory_pool_t{gpu(0).handle}, 0), kInvalidPool);
  CHECK_STATUS(to_pool(hsa_amd_memory_pool_t{0}, 0), kInvalidPool);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0 && (on_host() || !driver_pinned(host.data())));
  CHECK_STATUS(to_pool(fine, 0), HSA_STATUS_SUCCESS);
  CHECK(out == host.data() && count(HSA_RT_COUNT_LOCKED_RANGES) == 1);
  CHECK(driver_pinned(host.data()));  // CUDA: registered with the driver
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host.data()), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0 && (on_host() || !driver_pinned(host.data())));
  // Every call counts, the refused ones too.
  CHECK(count(HSA_RT_COUNT_LOCKS) == 15 && count(HSA_RT_COUNT_UNLOCKS) == 1);

  // Injected faults: HSA_STATUS_ERROR before anything (the checks included),
  // still counted; then the next call works.
  hsa_rt_inject(HSA_RT_FAULT_LOCKS, 0, 2);
  out = marker;
  CHECK_STATUS(lock_host(host.data(), 4096, {}, &out), HSA_STATUS_ERROR);
  CHECK_STATUS(amd().hsa_amd_memory_lock_to_pool_fn(nullptr, 0, nullptr, 0, fine, 0, &out),
               HSA_STATUS_ERROR);
  CHECK(out == marker && count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
  CHECK_STATUS(lock_host(host.data(), 4096, {}, &out), HSA_STATUS_SUCCESS);
  hsa_rt_inject(HSA_RT_FAULT_UNLOCKS, 0, 1);
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host.data()), HSA_STATUS_ERROR);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 1);  // nothing unlocked
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host.data()), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
  CHECK(count(HSA_RT_COUNT_LOCKS) == 18 && count(HSA_RT_COUNT_UNLOCKS) == 3);
  // Reset disarms them and clears the counts.
  hsa_rt_inject(HSA_RT_FAULT_LOCKS, 0, 1);
  hsa_rt_inject(HSA_RT_FAULT_UNLOCKS, 0, 1);
  hsa_rt_reset(1);
  CHECK(count(HSA_RT_COUNT_LOCKS) == 0 && count(HSA_RT_COUNT_UNLOCKS) == 0);
  CHECK_STATUS(lock_host(host.data(), 4096, {}, &out), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host.data()), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
}

CASE("locks: every GPU or those named, once per lock, reachable until the last unlock", kBoth) {
  if (!reset(2)) return;
  char* dev0 = static_cast<char*>(device_alloc(4096, 0));
  char* dev1 = static_cast<char*>(device_alloc(4096, 1));
  std::vector<char> buffer(3 * 8192, 'h');
  char* host = buffer.data();
  void* out = nullptr;
  // Host memory the runtime does not own: no GPU's engine reaches it.
  CHECK(!gpu_reaches(0, dev0, host) && !gpu_reaches(1, dev1, host));
  CHECK(on_host() || !driver_pinned(host));

  // No list: every GPU, at the host address (ROCm 5.6 on).
  CHECK_STATUS(lock_host(host, 8192, {}, &out), HSA_STATUS_SUCCESS);
  CHECK(out == host && count(HSA_RT_COUNT_LOCKED_RANGES) == 1 && driver_pinned(host));
  CHECK(gpu_reaches(0, dev0, host + 4096) && gpu_reaches(1, dev1, host));
  CHECK(!gpu_reaches(0, dev0, host + 8192));  // past the range
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0 && (on_host() || !driver_pinned(host)));
  CHECK(!gpu_reaches(0, dev0, host) && !gpu_reaches(1, dev1, host));

  // Once per GPU, as HIP locks: each lock adds its GPU, each needs its unlock.
  CHECK_STATUS(lock_host(host, 8192, {gpu(0), cpu()}, &out), HSA_STATUS_SUCCESS);
  CHECK(gpu_reaches(0, dev0, host) && !gpu_reaches(1, dev1, host));
  CHECK_STATUS(lock_host(host, 8192, {gpu(1)}, &out), HSA_STATUS_SUCCESS);
  CHECK(out == host && count(HSA_RT_COUNT_LOCKED_RANGES) == 1);
  CHECK(gpu_reaches(0, dev0, host) && gpu_reaches(1, dev1, host));

  // Pointer info per generation: ROCm 5.2's thunk knows the registered user
  // pointer (LOCKED, owned by the CPU); the SVM ranges of 5.6 on are unknown.
  hsa_amd_pointer_info_t info = pointer_info(host + 100);
#if HSA_RT_POINTER_INFO_KNOWS_LOCKED
  CHECK(info.type == HSA_EXT_POINTER_TYPE_LOCKED);
  CHECK(info.agentBaseAddress == host && info.hostBaseAddress == host);
  CHECK(info.sizeInBytes == 8192 && info.agentOwner.handle == cpu().handle);
  CHECK(info.global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED);
  CHECK(accessible(host) == (std::vector<uint64_t>{gpu(0).handle, gpu(1).handle}));
  CHECK(pointer_info(host + 8192).type == HSA_EXT_POINTER_TYPE_UNKNOWN);
#else
  CHECK(info.type == HSA_EXT_POINTER_TYPE_UNKNOWN);
  CHECK(accessible(host).empty());
#endif

  // An unlock of an address locked by nobody (inside the range, elsewhere,
  // NULL): SUCCESS, nothing changed.
  int local = 0;
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host + 64), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(&local), HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(nullptr), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 1);
  // The first unlock leaves it locked for both; the second ends it.
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host), HSA_STATUS_SUCCESS);
  CHECK(gpu_reaches(0, dev0, host) && gpu_reaches(1, dev1, host) && driver_pinned(host));
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0 && (on_host() || !driver_pinned(host)));
  CHECK(!gpu_reaches(0, dev0, host) && !gpu_reaches(1, dev1, host));
  CHECK(pointer_info(host).type == HSA_EXT_POINTER_TYPE_UNKNOWN);

  // Overlapping locks are separate ranges, each reachable by its GPUs.
  CHECK_STATUS(lock_host(host, 16384, {gpu(0)}, &out), HSA_STATUS_SUCCESS);
  CHECK_STATUS(lock_host(host + 8192, 16384, {gpu(1)}, &out), HSA_STATUS_SUCCESS);
  CHECK(out == host + 8192 && count(HSA_RT_COUNT_LOCKED_RANGES) == 2);
  CHECK(gpu_reaches(0, dev0, host + 12288) && gpu_reaches(1, dev1, host + 12288));
  CHECK(!gpu_reaches(1, dev1, host) && !gpu_reaches(0, dev0, host + 20480));
#if HSA_RT_POINTER_INFO_KNOWS_LOCKED
  CHECK(pointer_info(host + 12288).agentBaseAddress == host + 8192);  // the nearer start
  CHECK(pointer_info(host + 4096).agentBaseAddress == host);
#endif
  CHECK_STATUS(amd().hsa_amd_memory_unlock_fn(host), HSA_STATUS_SUCCESS);
  CHECK(gpu_reaches(1, dev1, host + 12288) && !gpu_reaches(0, dev0, host + 12288));

  // _lock_to_pool records its pool's grain.
  hsa_agent_t gpu0[] = {gpu(0)};  // lock takes a non-const list
  CHECK_STATUS(amd().hsa_amd_memory_lock_to_pool_fn(host, 4096, gpu0, 1,
                                                    pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), 0, &out),
               HSA_STATUS_SUCCESS);
#if HSA_RT_POINTER_INFO_KNOWS_LOCKED
  CHECK(pointer_info(host).global_flags == HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED);
#endif
  CHECK(gpu_reaches(0, dev0, host) && count(HSA_RT_COUNT_LOCKED_RANGES) == 2);

  // Copies of locked memory are host copies as before; reset unlocks
  // everything (CUDA: unregistered in the driver).
  const uint64_t host_to_device = count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE);
  CHECK_STATUS(core().hsa_memory_copy_fn(dev0, host, 64), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_COPIES_HOST_TO_DEVICE) == host_to_device + 1);
  CHECK(count(HSA_RT_COUNT_LOCKS) == 6 && count(HSA_RT_COUNT_UNLOCKS) == 7);
  hsa_rt_reset(2);
  CHECK(count(HSA_RT_COUNT_LOCKED_RANGES) == 0);
  CHECK(on_host() || (!driver_pinned(host) && !driver_pinned(host + 8192)));
  CHECK(violations() == 0);
}

CASE("memory: the host quarantine: poison, address reuse, intact check, byte cap", kHost) {
  hsa_rt_reset(1);
  const hsa_amd_memory_pool_t coarse = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  const hsa_amd_memory_pool_t fine = pool(gpu(0), HSA_RT_POOL_DEVICE_FINE);
  unsigned char* block = static_cast<unsigned char*>(pool_alloc(coarse, 5000));
  std::memset(block, 0x11, 5000);
  CHECK_STATUS(core().hsa_memory_free_fn(block), HSA_STATUS_SUCCESS);
  // The memory stays mapped, all poison.
  CHECK(block[0] == HSA_RT_POISON_BYTE && block[8191] == HSA_RT_POISON_BYTE);
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == 8192);
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
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == 4096);  // `other` is still there
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
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == 0);

  // The byte cap: the oldest block is really released past 256 MiB.
  const hsa_amd_memory_pool_t device = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  void* first = pool_alloc(device, size_t{200} << 20);
  void* second = pool_alloc(device, size_t{100} << 20);
  CHECK_STATUS(core().hsa_memory_free_fn(first), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == size_t{200} << 20);
  CHECK_STATUS(core().hsa_memory_free_fn(second), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == size_t{100} << 20);
  CHECK(hsa_rt_quarantine_intact());
  hsa_rt_reset(1);
}

CASE("memory: the CUDA quarantine holds freed device blocks only; reuse takes them back", kCuda) {
  hsa_rt_reset(1);
  auto* block = static_cast<char*>(device_alloc(5000));
  auto* host_block = static_cast<char*>(pool_alloc(pool(cpu(), HSA_RT_POOL_SYSTEM_FINE), 4096));
  CHECK_STATUS(core().hsa_memory_free_fn(block), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_free_fn(host_block), HSA_STATUS_SUCCESS);
  // Only the device block is kept (pinned host memory goes back to the OS).
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == 8192);
  char host[16] = {};
  CHECK_STATUS(core().hsa_memory_copy_fn(block + 100, host, 16),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK(violations() == 1 && hsa_rt_quarantine_intact());
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, true);
  void* same = device_alloc(8000);
  CHECK(same == block && count(HSA_RT_COUNT_QUARANTINED_BYTES) == 0);
  CHECK_STATUS(core().hsa_memory_copy_fn(block + 100, host, 16), HSA_STATUS_SUCCESS);
  hsa_rt_set_mode(HSA_RT_MODE_ADDRESS_REUSE, false);
  CHECK_STATUS(core().hsa_memory_free_fn(same), HSA_STATUS_SUCCESS);
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == 8192);
  hsa_rt_release_quarantine();
  CHECK(count(HSA_RT_COUNT_QUARANTINED_BYTES) == 0);
}

// The quarantine of freed device blocks never makes an allocation fail: out
// of memory, the runtime gives it back to the driver and tries again. On the
// stand-in driver, whose devices are small (FAKE_CUDA_DEVICE_MEMORY_MIB).
CASE("memory: a full device: OUT_OF_RESOURCES, and the quarantine gives way", kCuda) {
  hsa_rt_reset(1);
  if (!on_fake_driver()) {
    kr_case_skip("fills the device: the stand-in driver's only");
    return;
  }
  const hsa_amd_memory_pool_t vram = pool(gpu(0), HSA_RT_POOL_DEVICE_COARSE);
  const size_t block = size_t{256} << 20;
  std::vector<void*> blocks;
  void* p = nullptr;
  while (blocks.size() < 1024 &&
         amd().hsa_amd_memory_pool_allocate_fn(vram, block, 0, &p) == HSA_STATUS_SUCCESS) {
    blocks.push_back(p);
  }
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(vram, block, 0, &p),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  if (!CHECK(blocks.size() >= 2)) return;
  // Freed, it sits in the runtime's quarantine: still allocated in CUDA.
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(blocks.back()), HSA_STATUS_SUCCESS);
  blocks.pop_back();
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(vram, block, 0, &p), HSA_STATUS_SUCCESS);
  // The new block is usable (its address is not remembered as freed).
  std::vector<uint32_t> words(1024, 0xC0FFEEu), back(1024, 0);
  CHECK_STATUS(core().hsa_memory_copy_fn(p, words.data(), 4096), HSA_STATUS_SUCCESS);
  CHECK_STATUS(core().hsa_memory_copy_fn(back.data(), p, 4096), HSA_STATUS_SUCCESS);
  CHECK(back == words && violations() == 0);
#if HSA_RT_HAVE_VMEM
  // handle_create too gets the quarantine back when the device is full.
  CHECK_STATUS(amd().hsa_amd_memory_pool_free_fn(p), HSA_STATUS_SUCCESS);
  hsa_amd_vmem_alloc_handle_t handle{0};
  CHECK_STATUS(amd().hsa_amd_vmem_handle_create_fn(vram, block, MEMORY_TYPE_NONE, 0, &handle),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(amd().hsa_amd_vmem_handle_release_fn(handle), HSA_STATUS_SUCCESS);
#else
  blocks.push_back(p);
#endif
  for (void* b : blocks) amd().hsa_amd_memory_pool_free_fn(b);
}

CASE("memory: 16 GiB per host-backend GPU, shared by its pools, given back", kHost) {
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
  CHECK(count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 3);
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

CASE("faults: pointer info, copies, allocations, frees, the loader; reset clears them", kBoth) {
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
  CHECK(count(HSA_RT_COUNT_COPIES_DEVICE_TO_HOST) == 3);  // the failed one counts
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
  int calls = 0;
  hsa_rt_inject(HSA_RT_FAULT_EXECUTABLE_ITERATION, 0, true);
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &calls), HSA_STATUS_ERROR);
  CHECK(calls == 0);
  hsa_rt_inject(HSA_RT_FAULT_EXECUTABLE_ITERATION, 0, false);
  CHECK_STATUS(hsa_rt_iterate_executables(count_executable, &calls), HSA_STATUS_SUCCESS);
  CHECK(calls == 1);

  calls = 0;
  hsa_rt_inject(HSA_RT_FAULT_SYMBOL_WALK, exe.handle, true);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(exe, gpu(0), count_symbol, &calls),
               HSA_STATUS_ERROR_INVALID_EXECUTABLE);
  CHECK(calls == 0);
  hsa_rt_inject(HSA_RT_FAULT_SYMBOL_WALK, exe.handle, false);
  CHECK_STATUS(core().hsa_executable_iterate_agent_symbols_fn(exe, gpu(0), count_symbol, &calls),
               HSA_STATUS_SUCCESS);
  CHECK(calls == 1);

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

CASE("memory: allocate, copy and free from four threads at once", kBoth) {
  if (!reset(2, 1)) return;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &failures] {
      const hsa_amd_memory_pool_t p = pool(gpu(static_cast<uint32_t>(t) % hsa_rt_gpu_count()),
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
  CHECK(violations() == 0);
  CHECK(count(HSA_RT_COUNT_LIVE_ALLOCATIONS) == 0);
  CHECK(hsa_rt_quarantine_intact());
}
