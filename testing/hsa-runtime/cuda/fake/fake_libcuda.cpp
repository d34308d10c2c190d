// fake_libcuda.cpp: a stand-in libcuda.so.1 for machines without a GPU, so
// the GPU harness (HSA-on-CUDA, the test, the bench) runs end to end in CI.
//
// It is not an emulator of CUDA's performance or memory model: "device
// memory" is host memory, every operation runs synchronously on the calling
// thread, and a kernel launch runs every thread of the grid one after the
// other on the host (gpu/kernels.cu compiled as C++ through
// kernels_host_shim.h). What it does check, more strictly than the real
// driver where that catches harness bugs:
//   - the driver is initialised, and a context is current, for every call
//     that needs one (the runtime must make its context current itself);
//   - device memory is freed, and streams and functions are used, in the
//     context of the device they belong to;
//   - copies and memsets stay inside live allocations, and touching device
//     memory that was freed is CUDA_ERROR_ILLEGAL_ADDRESS;
//   - releasing a device's primary context for the last time with device
//     allocations (or virtual memory handles) still live reports them as
//     leaked (a "fake_cuda: LEAK" line on stderr);
//   - cuMemHostRegister pins a range once: one meeting a registered range or
//     cuMemHostAlloc memory is CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
//     device memory CUDA_ERROR_INVALID_VALUE; cuMemHostUnregister takes a
//     registered range's start only (else ..._NOT_REGISTERED);
//   - virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
//     cuMemSetAccess, ...) is a model of the real thing: a reservation is
//     PROT_NONE address space, a handle is a memfd (counted in its device's
//     memory), a mapping puts the memfd there MAP_SHARED, so one handle
//     mapped at two addresses shows the same bytes at both. Sizes and
//     addresses must be multiples of the granularity (2 MiB, as an H200's);
//     mapping outside a reservation, over another mapping or with a released
//     handle, unmapping or setting access on anything but whole mappings, and
//     freeing a reservation with mappings inside are
//     CUDA_ERROR_INVALID_VALUE. Access is per device and starts with none: a
//     copy or memset into a mapping the current context's device may not
//     write (read, for a source) is CUDA_ERROR_ILLEGAL_ADDRESS, and the host
//     view of every mapping stays PROT_NONE except while a kernel of a device
//     with access runs, so a kernel touching a mapping its device may not
//     touch faults; the fault is caught and the launch answers
//     CUDA_ERROR_ILLEGAL_ADDRESS. Access to device memory for the host
//     (CU_MEM_LOCATION_TYPE_HOST) is CUDA_ERROR_NOT_SUPPORTED.
//
// The library's own kernels (kernels/replay_kernels.cu, built with KR_HOST
// into this library when the build has it: FAKE_CUDA_REPLAY_KERNELS) are in
// every module too: a launch of kr_scatter_copy, kr_hash_blocks or
// kr_compare_copy runs the whole grid through kr_host_dispatch, with the one
// parameter (the argument struct) as its kernarg bytes; it must use
// KR_WORKGROUP threads per block. cuFuncGetAttribute answers their static
// shared memory (two lanes of KR_WORKGROUP 64-bit sums) and
// cuFuncGetParamInfo their one parameter; the other kernels have no shared
// memory, and their parameters are not described (CUDA_ERROR_NOT_SUPPORTED)
// except saxpy's, which a launch may also pass as one buffer
// (CU_LAUNCH_PARAM_BUFFER_POINTER, as an AQL dispatch of it does).
// Dynamic shared memory up to 48 KiB is accepted and unused.
//
// Each module has its own storage for the module variables (as each real
// module has): a launch swaps the module's values into the host-compiled
// kernels' globals and back out afterwards.
//
// Configuration: FAKE_CUDA_DEVICES (default 2; 0 makes cuInit answer
// CUDA_ERROR_NO_DEVICE), FAKE_CUDA_DEVICE_MEMORY_MIB (default 3072),
// FAKE_CUDA_UNMAP_FREED (1: cuMemFree unmaps the block, so the process may get
// its addresses again from mmap or malloc, as seen with the H200's driver;
// otherwise they stay reserved and inaccessible, which turns a use after free
// into a fault).
// Load it with HSA_RT_LIBCUDA=/path/to/libcuda.so.1.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_driver.h"
#include "kernels_host_shim.h"
#if FAKE_CUDA_REPLAY_KERNELS
#include "replay_kernels.h"
#endif

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

// The built-in variables of the host-compiled kernels (kernels_host_shim.h).
thread_local fake_dim3 threadIdx;
thread_local fake_dim3 blockIdx;
thread_local fake_dim3 blockDim;
thread_local fake_dim3 gridDim;

// gpu/kernels.cu, compiled for the host into this library.
extern "C" void saxpy(float a, const float* x, float* y, unsigned long long n);
extern "C" void bump_pass_counter(unsigned long long* observed);
extern "C" void read_const_table(unsigned int* out, unsigned int count);
extern "C" void fill_pattern(unsigned int* p, unsigned long long n, unsigned int seed);
extern "C" void mutate(unsigned int* p, unsigned long long n, unsigned int salt);
extern "C" void count_mismatches(const unsigned int* p, unsigned long long n, unsigned int seed,
                                 unsigned int mutated, unsigned int salt,
                                 unsigned long long* mismatches);
extern "C" void mutate_blocks(unsigned int* p, unsigned long long blocks, unsigned long long first,
                              unsigned long long stride, unsigned int block_words,
                              unsigned int salt);
extern unsigned long long pass_counter;
extern unsigned int const_table[256];

struct CUctx_st {
  int device;
  int retained;
};
struct FakeFunction;
struct CUmod_st {
  int device;
  unsigned long long pass_counter;
  unsigned int const_table[256];
  std::vector<std::unique_ptr<FakeFunction>> functions;
};
struct CUstream_st {
  int device;
};
struct CUevent_st {
  int device;
};

namespace {

constexpr CUresult kInvalidHandle = 400;

struct Kernel {
  const char* name;
  // Runs one thread of the grid (threadIdx, blockIdx set).
  void (*run)(void** params);
  // Or, for the library's kernels, the whole grid at once: the argument
  // struct's size (its one parameter).
  size_t replay_args = 0;
  unsigned int static_shared = 0;
  // The parameters' offsets and sizes, where cuFuncGetParamInfo describes
  // them and a launch may pass them as one buffer (CU_LAUNCH_PARAM_*).
  std::vector<std::pair<size_t, size_t>> params = {};
};

}  // namespace

// A CUfunction: a kernel of one module.
struct FakeFunction {
  const Kernel* kernel;
  CUmod_st* module;
};

namespace {

template <typename T>
T arg(void** params, int index) {
  T value;
  std::memcpy(&value, params[index], sizeof(T));
  return value;
}

const Kernel kKernels[] = {
    {"saxpy",
     [](void** p) {
       saxpy(arg<float>(p, 0), arg<const float*>(p, 1), arg<float*>(p, 2),
             arg<unsigned long long>(p, 3));
     },
     0, 0, {{0, 4}, {8, 8}, {16, 8}, {24, 8}}},
    {"bump_pass_counter", [](void** p) { bump_pass_counter(arg<unsigned long long*>(p, 0)); }},
    {"read_const_table",
     [](void** p) { read_const_table(arg<unsigned int*>(p, 0), arg<unsigned int>(p, 1)); }},
    {"fill_pattern",
     [](void** p) {
       fill_pattern(arg<unsigned int*>(p, 0), arg<unsigned long long>(p, 1),
                    arg<unsigned int>(p, 2));
     }},
    {"mutate",
     [](void** p) {
       mutate(arg<unsigned int*>(p, 0), arg<unsigned long long>(p, 1), arg<unsigned int>(p, 2));
     }},
    {"count_mismatches",
     [](void** p) {
       count_mismatches(arg<const unsigned int*>(p, 0), arg<unsigned long long>(p, 1),
                        arg<unsigned int>(p, 2), arg<unsigned int>(p, 3), arg<unsigned int>(p, 4),
                        arg<unsigned long long*>(p, 5));
     }},
    {"mutate_blocks",
     [](void** p) {
       mutate_blocks(arg<unsigned int*>(p, 0), arg<unsigned long long>(p, 1),
                     arg<unsigned long long>(p, 2), arg<unsigned long long>(p, 3),
                     arg<unsigned int>(p, 4), arg<unsigned int>(p, 5));
     }},
#if FAKE_CUDA_REPLAY_KERNELS
    {"kr_scatter_copy", nullptr, sizeof(kr_scatter_copy_args), 0},
    {"kr_hash_blocks", nullptr, sizeof(kr_hash_blocks_args), 2 * KR_WORKGROUP * 8},
    {"kr_compare_copy", nullptr, sizeof(kr_compare_copy_args), 2 * KR_WORKGROUP * 8},
#endif
};

// The largest dynamic shared memory a launch may ask for (a real GPU's
// default limit).
constexpr unsigned int kMaxDynamicShared = 48 * 1024;

struct Block {
  size_t size = 0;
  int device = -1;  // -1: pinned host memory
};

// Virtual memory management.
constexpr size_t kVmmGranularity = size_t{2} << 20;
struct VmmHandle {
  int fd = -1;
  size_t size = 0;
  int device = 0;
  unsigned char* shadow = nullptr;  // the fake's own read-write view
  unsigned refs = 1;                // cuMemCreate
  unsigned maps = 0;
};
struct VmmMapping {
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  std::map<int, int> access;  // device -> CU_MEM_ACCESS_FLAGS_PROT_READ / _READWRITE
};

struct Driver {
  std::recursive_mutex mutex;
  bool initialized = false;
  int devices = 0;
  size_t device_memory = 0;
  // FAKE_CUDA_UNMAP_FREED=1: cuMemFree gives the addresses back (see there).
  bool unmap_freed = false;
  std::vector<std::unique_ptr<CUctx_st>> contexts;  // primary context per device
  std::vector<size_t> used;
  std::map<uintptr_t, Block> blocks;
  std::map<uintptr_t, size_t> registered;  // cuMemHostRegister: start -> size
  std::map<uintptr_t, size_t> freed_device;
  std::set<CUmod_st*> modules;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::map<uintptr_t, size_t> reservations;  // start -> size
  std::map<CUmemGenericAllocationHandle, VmmHandle> vmm_handles;
  CUmemGenericAllocationHandle next_vmm_handle = 0x7000;
  std::map<uintptr_t, VmmMapping> mappings;  // start -> mapping
};

Driver& driver() {
  static Driver* const d = new Driver;
  return *d;
}

thread_local CUctx_st* t_current = nullptr;

using Lock = std::lock_guard<std::recursive_mutex>;

uintptr_t page_round(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// A loaded module's variable storage is device memory of its device.
bool in_range(uintptr_t address, size_t size, const void* base, size_t extent) {
  const auto start = reinterpret_cast<uintptr_t>(base);
  return address >= start && address - start < extent && size <= extent - (address - start);
}

const CUmod_st* module_holding(const Driver& d, uintptr_t address, size_t size) {
  for (const CUmod_st* module : d.modules) {
    if (in_range(address, size, &module->pass_counter, sizeof(module->pass_counter)) ||
        in_range(address, size, module->const_table, sizeof(module->const_table))) {
      return module;
    }
  }
  return nullptr;
}

size_t extent(size_t size) { return size; }
size_t extent(const VmmMapping& mapping) { return mapping.size; }

// The entry of a start-keyed map whose range holds address, or end().
template <typename Map>
typename Map::const_iterator containing(const Map& map, uintptr_t address) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address - it->first < extent(it->second) ? it : map.end();
}

bool meets_reservation(const Driver& d, uintptr_t address, size_t size) {
  if (d.reservations.empty()) return false;
  if (containing(d.reservations, address) != d.reservations.end()) return true;
  auto next = d.reservations.upper_bound(address);
  return next != d.reservations.end() && next->first - address < (size == 0 ? 1 : size);
}

// One side of a copy or memset in reserved address space: it must be
// covered by contiguous mappings (as the GPU sees them: one range, whatever
// the pages behind it) that the current context's device may access that
// way (`write`).
CUresult check_vmm(Driver& d, uintptr_t address, size_t size, bool write) {
  for (uintptr_t at = address; at < address + (size == 0 ? 1 : size);) {
    auto mapping = containing(d.mappings, at);
    if (mapping == d.mappings.end()) {
      std::fprintf(stderr,
                   "fake_cuda: access of %zu bytes at %#lx: reserved virtual memory that is not "
                   "mapped at %#lx\n",
                   size, static_cast<unsigned long>(address), static_cast<unsigned long>(at));
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto granted = mapping->second.access.find(t_current->device);
    const bool allowed = granted != mapping->second.access.end() &&
                         (!write || granted->second == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    if (!allowed) {
      std::fprintf(stderr,
                   "fake_cuda: device %d %s a virtual memory mapping at %#lx without access\n",
                   t_current->device, write ? "writes" : "reads",
                   static_cast<unsigned long>(mapping->first));
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    at = mapping->first + mapping->second.size;
  }
  return CUDA_SUCCESS;
}

// Where the fake reads or writes an address, and how many bytes from there
// are contiguous: a mapping's bytes through its handle's own view (the host
// view of a mapping is PROT_NONE), up to the mapping's end; anything else
// itself, without end.
uintptr_t effective_address(const Driver& d, uintptr_t address, size_t* run) {
  *run = SIZE_MAX;
  if (d.mappings.empty()) return address;
  auto mapping = containing(d.mappings, address);
  if (mapping == d.mappings.end()) return address;
  const size_t offset = address - mapping->first;
  *run = mapping->second.size - offset;
  return reinterpret_cast<uintptr_t>(d.vmm_handles.at(mapping->second.handle).shadow) + offset;
}

// Checks one side of a copy or memset. Unknown memory is host memory.
CUresult check_range(Driver& d, uintptr_t address, size_t size, bool must_be_device, bool write) {
  if (meets_reservation(d, address, size)) return check_vmm(d, address, size, write);
  if (module_holding(d, address, size) != nullptr) return CUDA_SUCCESS;
  auto it = d.blocks.upper_bound(address);
  if (it != d.blocks.begin()) {
    --it;
    if (address - it->first < it->second.size) {
      if (size > it->second.size - (address - it->first)) {
        std::fprintf(stderr, "fake_cuda: access of %zu bytes at %#lx runs past its block\n", size,
                     static_cast<unsigned long>(address));
        return CUDA_ERROR_INVALID_VALUE;
      }
      return CUDA_SUCCESS;
    }
  }
  auto freed = d.freed_device.upper_bound(address);
  if (freed != d.freed_device.begin()) {
    --freed;
    if (address - freed->first < freed->second) {
      std::fprintf(stderr, "fake_cuda: access to freed device memory at %#lx\n",
                   static_cast<unsigned long>(address));
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
  }
  return must_be_device ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult need_context(Driver& d) {
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (t_current == nullptr || t_current->retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

CUresult copy(uintptr_t dst, uintptr_t src, size_t size, bool dst_device, bool src_device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_range(d, dst, size, dst_device, true)) return r;
  if (CUresult r = check_range(d, src, size, src_device, false)) return r;
  // Piece by piece where either side crosses from one mapping to the next.
  for (size_t done = 0; done < size;) {
    size_t to_run = 0;
    size_t from_run = 0;
    const uintptr_t to = effective_address(d, dst + done, &to_run);
    const uintptr_t from = effective_address(d, src + done, &from_run);
    const size_t piece = std::min({size - done, to_run, from_run});
    std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), piece);
    done += piece;
  }
  return CUDA_SUCCESS;
}

CUresult check_stream(Driver& d, CUstream stream) {
  if (stream == nullptr) return CUDA_SUCCESS;
  if (d.streams.count(stream) == 0) return kInvalidHandle;
  // Stricter than needed in places, and what catches a wrong context: a
  // stream belongs to its context's device.
  return stream->device == t_current->device ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

void* map_memory(size_t bytes) {
  void* p = mmap(nullptr, page_round(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Gives freed device memory's pages back but keeps its addresses reserved,
// as the real driver keeps device virtual addresses: host mallocs never get
// them, so a later access there is always a use after free.
void release_device_memory(uintptr_t base, size_t size) {
  mmap(reinterpret_cast<void*>(base), page_round(size), PROT_NONE,
       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

// ---- kernels touching virtual memory ----

// Set while a launch runs kernels on this thread: where a fault in reserved
// address space jumps back to.
thread_local sigjmp_buf* t_launch_fault = nullptr;
thread_local uintptr_t t_fault_address = 0;
struct sigaction g_previous_segv;

int host_protection(int flags) {
  return flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
         : flags == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                     : PROT_NONE;
}

void open_mappings_for(Driver& d, int device) {
  for (const auto& [base, mapping] : d.mappings) {
    auto granted = mapping.access.find(device);
    if (granted == mapping.access.end()) continue;
    mprotect(reinterpret_cast<void*>(base), mapping.size, host_protection(granted->second));
  }
}

void close_mappings(Driver& d) {
  for (const auto& [base, mapping] : d.mappings) {
    if (!mapping.access.empty()) mprotect(reinterpret_cast<void*>(base), mapping.size, PROT_NONE);
  }
}

// A fault inside a launch, in reserved address space, is a kernel touching
// virtual memory its device may not touch: back to the launch. Anything else
// goes to whoever handled SIGSEGV before (by default: the crash it is).
void on_fault(int signal, siginfo_t* info, void* context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  // The driver's lock is held by the launch on this thread: the map is stable.
  if (t_launch_fault != nullptr && meets_reservation(driver(), address, 1)) {
    t_fault_address = address;
    siglongjmp(*t_launch_fault, 1);
  }
  if (g_previous_segv.sa_flags & SA_SIGINFO) {
    if (g_previous_segv.sa_sigaction != nullptr) {
      g_previous_segv.sa_sigaction(signal, info, context);
      return;
    }
  } else if (g_previous_segv.sa_handler != SIG_DFL && g_previous_segv.sa_handler != SIG_IGN) {
    g_previous_segv.sa_handler(signal);
    return;
  }
  // Default action: restore it and return; the faulting access runs again
  // and kills the process as it would have.
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
}

void install_fault_handler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous_segv);
}

void forget_freed(Driver& d, uintptr_t base, size_t size) {
  for (auto it = d.freed_device.begin(); it != d.freed_device.end();) {
    const bool overlaps = it->first < base + size && base < it->first + it->second;
    it = overlaps ? d.freed_device.erase(it) : std::next(it);
  }
}

}  // namespace

// ---- errors, version, init ---------------------------------------------------------

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; return CUDA_SUCCESS;
    case CUDA_ERROR_FILE_NOT_FOUND: *name = "CUDA_ERROR_FILE_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return CUDA_SUCCESS;
    case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return CUDA_SUCCESS;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
      *name = "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED";
      return CUDA_SUCCESS;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
      *name = "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED";
      return CUDA_SUCCESS;
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  if (text == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const char* name = nullptr;
  if (cuGetErrorName(error, &name) != CUDA_SUCCESS) {
    *text = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *text = "(fake driver)";
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Driver& d = driver();
  Lock lock(d.mutex);
  if (d.initialized) return CUDA_SUCCESS;
  install_fault_handler();
  const char* devices = std::getenv("FAKE_CUDA_DEVICES");
  const char* memory = std::getenv("FAKE_CUDA_DEVICE_MEMORY_MIB");
  d.devices = devices != nullptr ? std::atoi(devices) : 2;
  d.device_memory = size_t(memory != nullptr ? std::atoll(memory) : 3072) << 20;
  const char* unmap_freed = std::getenv("FAKE_CUDA_UNMAP_FREED");
  d.unmap_freed = unmap_freed != nullptr && std::strcmp(unmap_freed, "1") == 0;
  if (d.devices <= 0) return CUDA_ERROR_NO_DEVICE;
  for (int i = 0; i < d.devices; ++i) d.contexts.push_back(std::make_unique<CUctx_st>(CUctx_st{i, 0}));
  d.used.assign(size_t(d.devices), 0);
  d.initialized = true;
  return CUDA_SUCCESS;
}

// ---- devices and contexts --------------------------------------------------------------

FAKE_EXPORT CUresult cuDeviceGetCount(int* count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = d.devices;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, size_t(length), "Fake CUDA Device %d", device);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *value = 2; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = d.device_memory;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* ctx = d.contexts[size_t(device)].get();
  ++ctx->retained;
  *context = ctx;
  return CUDA_SUCCESS;
}

// The last release destroys the context, and with it the device memory
// still allocated in it: reported as a leak.
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= d.devices) return CUDA_ERROR_INVALID_DEVICE;
  CUctx_st* ctx = d.contexts[size_t(device)].get();
  if (ctx->retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--ctx->retained > 0) return CUDA_SUCCESS;
  size_t leaked = 0;
  for (auto it = d.blocks.begin(); it != d.blocks.end();) {
    if (it->second.device == device) {
      ++leaked;
      release_device_memory(it->first, it->second.size);
      it = d.blocks.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = d.vmm_handles.begin(); it != d.vmm_handles.end();) {
    if (it->second.device == device) {
      ++leaked;
      it = d.vmm_handles.erase(it);
    } else {
      ++it;
    }
  }
  d.used[size_t(device)] = 0;
  if (leaked != 0) {
    std::fprintf(stderr,
                 "fake_cuda: LEAK: device %d's context destroyed with %zu allocations or virtual "
                 "memory handles live\n",
                 device, leaked);
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext context) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context != nullptr && context->retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  t_current = context;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* context) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *context = t_current;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  Driver& d = driver();
  Lock lock(d.mutex);
  return need_context(d);
}

// ---- memory ------------------------------------------------------------------------------

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const int device = t_current->device;
  if (bytes > d.device_memory - d.used[size_t(device)]) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = map_memory(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto base = reinterpret_cast<uintptr_t>(p);
  forget_freed(d, base, bytes);
  d.blocks[base] = Block{bytes, device};
  d.used[size_t(device)] += bytes;
  *dptr = base;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.blocks.find(uintptr_t(dptr));
  if (it == d.blocks.end() || it->second.device < 0) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.device != t_current->device) {
    std::fprintf(stderr, "fake_cuda: cuMemFree of device %d memory in device %d's context\n",
                 it->second.device, t_current->device);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  d.used[size_t(it->second.device)] -= it->second.size;
  if (d.unmap_freed) {
    // The H200's driver behaviour: the address range goes back to the
    // process, and a later mmap or malloc may be handed it.
    munmap(reinterpret_cast<void*>(it->first), page_round(it->second.size));
  } else {
    d.freed_device[it->first] = it->second.size;
    release_device_memory(it->first, it->second.size);
  }
  d.blocks.erase(it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *total_bytes = d.device_memory;
  *free_bytes = d.device_memory - d.used[size_t(t_current->device)];
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostAlloc(void** host, size_t bytes, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (host == nullptr || bytes == 0 || (flags & ~0x7u) != 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = map_memory(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  d.blocks[reinterpret_cast<uintptr_t>(p)] = Block{bytes, -1};
  *host = p;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFreeHost(void* host) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.blocks.find(reinterpret_cast<uintptr_t>(host));
  if (it == d.blocks.end() || it->second.device >= 0) return CUDA_ERROR_INVALID_VALUE;
  munmap(host, page_round(it->second.size));
  d.blocks.erase(it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostRegister_v2(void* host, size_t bytes, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (host == nullptr || bytes == 0 || (flags & ~0xFu) != 0) return CUDA_ERROR_INVALID_VALUE;
  const auto base = reinterpret_cast<uintptr_t>(host);
  const auto meets = [&](uintptr_t start, size_t size) {
    return start < base + bytes && base < start + size;
  };
  for (const auto& [start, size] : d.registered) {
    if (meets(start, size)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  for (const auto& [start, block] : d.blocks) {
    if (meets(start, block.size)) {
      return block.device < 0 ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
                              : CUDA_ERROR_INVALID_VALUE;
    }
  }
  d.registered[base] = bytes;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostUnregister(void* host) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.registered.erase(reinterpret_cast<uintptr_t>(host)) == 0) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto address = uintptr_t(ptr);
  int device = -2;
  if (meets_reservation(d, address, 1)) {
    // Only a mapped address is device memory (of its handle's device).
    auto mapping = containing(d.mappings, address);
    if (mapping != d.mappings.end()) device = d.vmm_handles.at(mapping->second.handle).device;
  } else if (const CUmod_st* module = module_holding(d, address, 1)) {
    device = module->device;
  } else {
    auto it = d.blocks.upper_bound(address);
    if (it != d.blocks.begin() && address - std::prev(it)->first < std::prev(it)->second.size) {
      device = std::prev(it)->second.device;
    } else if (containing(d.registered, address) != d.registered.end()) {
      device = -1;  // registered host memory
    }
  }
  if (device == -2) return CUDA_ERROR_INVALID_VALUE;  // pageable or unknown
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
      const unsigned int type = device >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
      std::memcpy(data, &type, sizeof(type));
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: {
      const int ordinal = device >= 0 ? device : 0;
      std::memcpy(data, &ordinal, sizeof(ordinal));
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return copy(uintptr_t(dst), uintptr_t(src), bytes, false, false);
}

FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                   CUstream stream) {
  {
    Driver& d = driver();
    Lock lock(d.mutex);
    if (CUresult r = need_context(d)) return r;
    if (CUresult r = check_stream(d, stream)) return r;
  }
  return copy(uintptr_t(dst), uintptr_t(src), bytes, false, false);
}

FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  return copy(uintptr_t(dst), reinterpret_cast<uintptr_t>(src), bytes, true, false);
}

FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  return copy(reinterpret_cast<uintptr_t>(dst), uintptr_t(src), bytes, false, true);
}

FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_range(d, uintptr_t(dst), count, true, true)) return r;
  for (size_t done = 0; done < count;) {
    size_t run = 0;
    const uintptr_t to = effective_address(d, uintptr_t(dst) + done, &run);
    const size_t piece = std::min(count - done, run);
    std::memset(reinterpret_cast<void*>(to), value, piece);
    done += piece;
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_range(d, uintptr_t(dst), count * 4, true, true)) return r;
  // Piece by piece across mappings; they are whole granules, so no word
  // straddles two of them.
  for (size_t done = 0; done < count;) {
    size_t run = 0;
    auto* words = reinterpret_cast<unsigned int*>(
        effective_address(d, uintptr_t(dst) + 4 * done, &run));
    const size_t piece = std::min(count - done, run / 4);
    for (size_t i = 0; i < piece; ++i) words[i] = value;
    done += piece;
  }
  return CUDA_SUCCESS;
}

// ---- modules and launches -------------------------------------------------------------------

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* loaded = new CUmod_st{t_current->device, 0, {}, {}};
  d.modules.insert(loaded);
  *module = loaded;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.modules.erase(module) == 0) return kInvalidHandle;
  // Its storage is gone: touching it later is an illegal address.
  d.freed_device[reinterpret_cast<uintptr_t>(&module->pass_counter)] = sizeof(module->pass_counter);
  d.freed_device[reinterpret_cast<uintptr_t>(module->const_table)] = sizeof(module->const_table);
  // Freed memory is never reused here, so the records stay true: the module
  // object is kept (leaked on purpose, it is small).
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule module,
                                          const char* name) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.modules.count(module) == 0 || name == nullptr) return kInvalidHandle;
  uintptr_t address = 0;
  size_t size = 0;
  if (std::strcmp(name, "pass_counter") == 0) {
    address = reinterpret_cast<uintptr_t>(&module->pass_counter);
    size = sizeof(module->pass_counter);
  } else if (std::strcmp(name, "const_table") == 0) {
    address = reinterpret_cast<uintptr_t>(module->const_table);
    size = sizeof(module->const_table);
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  if (dptr != nullptr) *dptr = address;
  if (bytes != nullptr) *bytes = size;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (function == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d.modules.count(module) == 0) return kInvalidHandle;
  for (const Kernel& kernel : kKernels) {
    if (std::strcmp(kernel.name, name) == 0) {
      module->functions.push_back(std::make_unique<FakeFunction>(FakeFunction{&kernel, module}));
      *function = reinterpret_cast<CUfunction>(module->functions.back().get());
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

enum class LaunchOutcome { kDone, kInvalid, kFault };

// Runs a launch's grid on the CPU; a touch of memory the device has no
// access to longjmps back here (on_fault) and ends it as a fault. Kept apart
// from cuLaunchKernel so that nothing lives across the sigsetjmp but these
// arguments, which are never written after it.
static LaunchOutcome run_grid(const Kernel* kernel, void** params, unsigned int grid_x,
                       unsigned int block_x) {
  sigjmp_buf fault;
  if (sigsetjmp(fault, 1) != 0) {
    t_launch_fault = nullptr;
    return LaunchOutcome::kFault;
  }
  t_launch_fault = &fault;
  LaunchOutcome outcome = LaunchOutcome::kDone;
#if FAKE_CUDA_REPLAY_KERNELS
  if (kernel->replay_args != 0) {
    if (kr_host_dispatch(kernel->name, params[0], grid_x) != 0) outcome = LaunchOutcome::kInvalid;
    t_launch_fault = nullptr;
    return outcome;
  }
#endif
  for (unsigned int b = 0; b < grid_x; ++b) {
    blockIdx = fake_dim3{b, 0, 0};
    for (unsigned int t = 0; t < block_x; ++t) {
      threadIdx = fake_dim3{t, 0, 0};
      kernel->run(params);
    }
  }
  t_launch_fault = nullptr;
  return outcome;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                                    unsigned int grid_z, unsigned int block_x,
                                    unsigned int block_y, unsigned int block_z,
                                    unsigned int shared_bytes, CUstream stream, void** params,
                                    void** extra) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (CUresult r = check_stream(d, stream)) return r;
  auto* handle = reinterpret_cast<FakeFunction*>(function);
  bool known = false;
  for (CUmod_st* module : d.modules) {
    for (const auto& f : module->functions) known |= f.get() == handle;
  }
  if (!known) return kInvalidHandle;
  CUmod_st* module = handle->module;
  if (module->device != t_current->device) return CUDA_ERROR_INVALID_CONTEXT;
  const Kernel* kernel = handle->kernel;
  // The parameters as one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER, buffer,
  // CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END), for a kernel
  // whose layout the fake knows: unpacked into the usual pointers.
  std::vector<void*> unpacked;
  if (extra != nullptr) {
    if (params != nullptr || kernel->params.empty() || extra[0] != reinterpret_cast<void*>(1) ||
        extra[2] != reinterpret_cast<void*>(2) || extra[4] != nullptr || extra[3] == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto* buffer = static_cast<unsigned char*>(extra[1]);
    const size_t size = *static_cast<const size_t*>(extra[3]);
    for (const auto& [offset, bytes] : kernel->params) {
      if (offset + bytes > size) return CUDA_ERROR_INVALID_VALUE;
      unpacked.push_back(buffer + offset);
    }
    params = unpacked.data();
  }
  if (grid_x == 0 || block_x == 0 || block_x > 1024 || grid_y != 1 || grid_z != 1 ||
      block_y != 1 || block_z != 1 || shared_bytes > kMaxDynamicShared || params == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
#if FAKE_CUDA_REPLAY_KERNELS
  // The library's kernels are written for exactly KR_WORKGROUP work-items.
  if (kernel->replay_args != 0 && block_x != KR_WORKGROUP) return CUDA_ERROR_INVALID_VALUE;
#endif
  gridDim = fake_dim3{grid_x, 1, 1};
  blockDim = fake_dim3{block_x, 1, 1};
  // The module's variables in, the grid, the variables out.
  pass_counter = module->pass_counter;
  std::memcpy(const_table, module->const_table, sizeof(const_table));
  // Virtual memory mappings open to this device for the launch, each as its
  // access allows; a touch of anything else faults, and the fault ends the
  // launch with CUDA_ERROR_ILLEGAL_ADDRESS (on_fault).
  open_mappings_for(d, t_current->device);
  const LaunchOutcome outcome = run_grid(kernel, params, grid_x, block_x);
  CUresult result = CUDA_SUCCESS;
  if (outcome == LaunchOutcome::kInvalid) result = CUDA_ERROR_INVALID_VALUE;
  if (outcome == LaunchOutcome::kFault) {
    std::fprintf(stderr,
                 "fake_cuda: a kernel of device %d touched virtual memory at %#lx it has no "
                 "access to\n",
                 t_current->device, static_cast<unsigned long>(t_fault_address));
    result = CUDA_ERROR_ILLEGAL_ADDRESS;
  }
  close_mappings(d);
  module->pass_counter = pass_counter;
  return result;
}

namespace {

// The function behind a handle, if it belongs to a loaded module.
const FakeFunction* known_function(const Driver& d, CUfunction function) {
  auto* handle = reinterpret_cast<const FakeFunction*>(function);
  for (CUmod_st* module : d.modules) {
    for (const auto& f : module->functions) {
      if (f.get() == handle) return handle;
    }
  }
  return nullptr;
}

}  // namespace

FAKE_EXPORT CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction function) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const FakeFunction* f = known_function(d, function);
  if (f == nullptr) return kInvalidHandle;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *value = int(f->kernel->static_shared);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
      *value = 0;
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = int(kMaxDynamicShared);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

FAKE_EXPORT CUresult cuFuncGetParamInfo(CUfunction function, size_t index, size_t* offset,
                                        size_t* size) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  const FakeFunction* f = known_function(d, function);
  if (f == nullptr) return kInvalidHandle;
  if (offset == nullptr || size == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!f->kernel->params.empty()) {
    if (index >= f->kernel->params.size()) return CUDA_ERROR_INVALID_VALUE;
    *offset = f->kernel->params[index].first;
    *size = f->kernel->params[index].second;
    return CUDA_SUCCESS;
  }
  if (f->kernel->replay_args == 0) return CUDA_ERROR_NOT_SUPPORTED;
  if (index != 0) return CUDA_ERROR_INVALID_VALUE;
  *offset = 0;
  *size = f->kernel->replay_args;
  return CUDA_SUCCESS;
}

// ---- streams and events -----------------------------------------------------------------------

FAKE_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (stream == nullptr || flags > CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  auto* created = new CUstream_st{t_current->device};
  d.streams.insert(created);
  *stream = created;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.streams.erase(stream) == 0) return kInvalidHandle;
  delete stream;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  return check_stream(d, stream);
}

FAKE_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (event == nullptr || flags > 0xF) return CUDA_ERROR_INVALID_VALUE;
  auto* created = new CUevent_st{t_current->device};
  d.events.insert(created);
  *event = created;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (d.events.erase(event) == 0) return kInvalidHandle;
  delete event;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (d.events.count(event) == 0) return kInvalidHandle;
  return check_stream(d, stream);
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  return d.events.count(event) != 0 ? CUDA_SUCCESS : kInvalidHandle;
}

// ---- virtual memory management ----------------------------------------------------------------

namespace {

bool device_location_valid(const Driver& d, const CUmemLocation& location) {
  return location.type == CU_MEM_LOCATION_TYPE_DEVICE && location.id >= 0 &&
         location.id < d.devices;
}

// What cuMemCreate accepts here: pinned device memory on a known device, no
// shareable handle types, nothing Windows-specific.
bool properties_valid(const Driver& d, const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         device_location_valid(d, prop->location) &&
         prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_NONE &&
         prop->win32HandleMetaData == nullptr;
}

void free_vmm_handle(Driver& d, std::map<CUmemGenericAllocationHandle, VmmHandle>::iterator it) {
  VmmHandle& handle = it->second;
  munmap(handle.shadow, handle.size);
  close(handle.fd);
  d.used[size_t(handle.device)] -= handle.size;
  d.vmm_handles.erase(it);
}

// Puts reserved, inaccessible address space back over [base, base + size).
void reserve_again(uintptr_t base, size_t size) {
  mmap(reinterpret_cast<void*>(base), size, PROT_NONE,
       MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

// The mappings exactly covering [ptr, ptr + size), in order; false if the
// range is not a run of whole, contiguous mappings.
bool whole_mappings(Driver& d, uintptr_t ptr, size_t size,
                    std::vector<std::map<uintptr_t, VmmMapping>::iterator>* found) {
  if (size == 0) return false;
  for (uintptr_t at = ptr; at < ptr + size;) {
    auto it = d.mappings.find(at);
    if (it == d.mappings.end() || it->second.size > ptr + size - at) return false;
    found->push_back(it);
    at += it->second.size;
  }
  return true;
}

}  // namespace

FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                   const CUmemAllocationProp* prop, int option) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (granularity == nullptr || !properties_valid(d, prop) ||
      (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
       option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                         CUdeviceptr addr, unsigned long long flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (ptr == nullptr || size == 0 || size % kVmmGranularity != 0 || flags != 0 ||
      (alignment & (alignment - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t align = std::max(alignment, kVmmGranularity);
  // Over-reserve and trim, so that the alignment can be met; the hint is a
  // hint only.
  const size_t span = size + align;
  void* raw = mmap(reinterpret_cast<void*>(addr), span, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + align - 1) & ~(uintptr_t(align) - 1);
  if (base > start) munmap(raw, base - start);
  if (start + span > base + size) {
    munmap(reinterpret_cast<void*>(base + size), start + span - (base + size));
  }
  d.reservations[base] = size;
  *ptr = base;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.reservations.find(uintptr_t(ptr));
  if (it == d.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  auto inside = d.mappings.lower_bound(uintptr_t(ptr));
  if (inside != d.mappings.end() && inside->first < uintptr_t(ptr) + size) {
    std::fprintf(stderr, "fake_cuda: cuMemAddressFree(%#llx) with mappings inside\n", ptr);
    return CUDA_ERROR_INVALID_VALUE;
  }
  munmap(reinterpret_cast<void*>(ptr), size);
  d.reservations.erase(it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                 const CUmemAllocationProp* prop, unsigned long long flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (handle == nullptr || size == 0 || size % kVmmGranularity != 0 || flags != 0 ||
      !properties_valid(d, prop)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const int device = prop->location.id;
  if (size > d.device_memory - d.used[size_t(device)]) return CUDA_ERROR_OUT_OF_MEMORY;
  VmmHandle created;
  created.size = size;
  created.device = device;
  created.fd = memfd_create("fake_cuda_vmm", MFD_CLOEXEC);
  if (created.fd < 0 || ftruncate(created.fd, off_t(size)) != 0) {
    if (created.fd >= 0) close(created.fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  void* shadow = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, created.fd, 0);
  if (shadow == MAP_FAILED) {
    close(created.fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  created.shadow = static_cast<unsigned char*>(shadow);
  d.used[size_t(device)] += size;
  const CUmemGenericAllocationHandle value = d.next_vmm_handle++;
  d.vmm_handles.emplace(value, created);
  *handle = value;
  return CUDA_SUCCESS;
}

// The memory goes once every reference is released and every mapping gone.
FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.vmm_handles.find(handle);
  if (it == d.vmm_handles.end() || it->second.refs == 0) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.refs == 0 && it->second.maps == 0) free_vmm_handle(d, it);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  auto it = d.vmm_handles.find(handle);
  // A released handle is no longer a handle, even while its memory lives on
  // in other mappings.
  if (it == d.vmm_handles.end() || it->second.refs == 0) {
    std::fprintf(stderr, "fake_cuda: cuMemMap of unknown or released handle %#llx\n", handle);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const auto base = uintptr_t(ptr);
  auto reservation = containing(d.reservations, base);
  const bool inside = reservation != d.reservations.end() &&
                      size <= reservation->second - (base - reservation->first);
  auto next = d.mappings.lower_bound(base);
  auto before = next == d.mappings.begin() ? d.mappings.end() : std::prev(next);
  const bool overlaps = (next != d.mappings.end() && next->first < base + size) ||
                        (before != d.mappings.end() && before->first + before->second.size > base);
  if (offset != 0 || flags != 0 || size == 0 || base % kVmmGranularity != 0 ||
      size % kVmmGranularity != 0 || !inside || overlaps || size > it->second.size) {
    std::fprintf(stderr, "fake_cuda: cuMemMap(%#llx, %zu) refused\n", ptr, size);
    return CUDA_ERROR_INVALID_VALUE;
  }
  // As an H200's driver answers a mapping of part of an allocation.
  if (size != it->second.size) return CUDA_ERROR_NOT_SUPPORTED;
  void* mapped = mmap(reinterpret_cast<void*>(base), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                      it->second.fd, 0);
  if (mapped == MAP_FAILED) {
    reserve_again(base, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  VmmMapping mapping;
  mapping.size = size;
  mapping.handle = handle;
  d.mappings.emplace(base, mapping);
  ++it->second.maps;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  std::vector<std::map<uintptr_t, VmmMapping>::iterator> found;
  if (!whole_mappings(d, uintptr_t(ptr), size, &found)) {
    std::fprintf(stderr, "fake_cuda: cuMemUnmap(%#llx, %zu): not whole mappings\n", ptr, size);
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (auto mapping : found) {
    reserve_again(mapping->first, mapping->second.size);
    auto handle = d.vmm_handles.find(mapping->second.handle);
    d.mappings.erase(mapping);
    if (--handle->second.maps == 0 && handle->second.refs == 0) free_vmm_handle(d, handle);
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                    size_t count) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (CUresult r = need_context(d)) return r;
  if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::map<uintptr_t, VmmMapping>::iterator> found;
  if (!whole_mappings(d, uintptr_t(ptr), size, &found)) {
    std::fprintf(stderr, "fake_cuda: cuMemSetAccess(%#llx, %zu): not whole mappings\n", ptr, size);
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type == CU_MEM_LOCATION_TYPE_HOST) return CUDA_ERROR_NOT_SUPPORTED;
    if (!device_location_valid(d, desc[i].location)) return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (auto mapping : found) {
    for (size_t i = 0; i < count; ++i) {
      if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE) {
        mapping->second.access.erase(desc[i].location.id);
      } else {
        mapping->second.access[desc[i].location.id] = desc[i].flags;
      }
    }
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location,
                                    CUdeviceptr ptr) {
  Driver& d = driver();
  Lock lock(d.mutex);
  if (!d.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (flags == nullptr || location == nullptr || !device_location_valid(d, *location)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto mapping = containing(d.mappings, uintptr_t(ptr));
  if (mapping == d.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
  auto granted = mapping->second.access.find(location->id);
  *flags = granted == mapping->second.access.end() ? CU_MEM_ACCESS_FLAGS_PROT_NONE
                                                   : (unsigned long long)granted->second;
  return CUDA_SUCCESS;
}

