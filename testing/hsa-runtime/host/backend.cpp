// backend.cpp: the host backend. "Device memory" is anonymous host memory
// mapped per allocation (zero-filled and committed lazily, so a large
// allocation costs nothing until touched); freed blocks stay mapped, filled
// with HSA_RT_POISON_BYTE, in the front end's quarantine. Copies are
// memmoves through the engine addresses (a vmem mapping's handle memory,
// whatever the CPU view's protection). Virtual memory: a reservation is
// PROT_NONE memory, a handle a memfd also mapped read-write at a private
// address (its shadow) for the copy engine, a mapping the memfd MAP_SHARED
// at the address; the CPU agent's permission is the user view's protection.
// Code objects are AMDGPU ELF (elf.cpp); a dispatch runs the library's
// kernels on the CPU (kr_host_dispatch, kernels/replay_kernels.cu built with
// KR_HOST) once every range it will touch passed the copy checks and is
// reachable by the dispatching GPU. Every GPU has 16 GiB, its device pools
// and vmem handles share them.

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "host.h"
#include "replay_kernels.h"
#include "runtime.h"

namespace hsa_rt::backend {

namespace {

constexpr size_t kDeviceBytes = size_t{16} << 30;
constexpr const char* kDefaultGpuIsa = "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-";

size_t page_size() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// A handle's memory: a memfd, and its read-write shadow for the engine.
struct HostHandle {
  int fd = -1;
  uint8_t* shadow = nullptr;
};

// A loaded code object's kernels; each one's address is its kernel object,
// as ROCr's is the address of the loaded descriptor.
struct alignas(64) LoadedKernel {
  uint8_t descriptor[64] = {};
};
struct Module {
  std::vector<std::unique_ptr<LoadedKernel>> kernels;
};

uint32_t descriptor_field(const uint8_t* descriptor, size_t offset) {
  uint32_t value = 0;
  std::memcpy(&value, descriptor + offset, sizeof(value));
  return value;
}

// Puts reserved (PROT_NONE anonymous) memory at [address, address + size).
bool map_reserved(uintptr_t address, size_t size) {
  return mmap(reinterpret_cast<void*>(address), size, PROT_NONE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != MAP_FAILED;
}

int protection_of(uint32_t permission) {
  return permission == kPermissionReadOnly    ? PROT_READ
         : permission == kPermissionWriteOnly ? PROT_WRITE
         : permission == kPermissionReadWrite ? PROT_READ | PROT_WRITE
                                              : PROT_NONE;
}

}  // namespace

hsa_rt_backend_t kind() { return HSA_RT_BACKEND_HOST; }

hsa_rt_init_status_t start(uint32_t wanted, std::vector<AgentDescription>* agents,
                           std::string* /*message*/) {
  const uint32_t gpus = wanted == UINT32_MAX ? 2 : wanted;
  AgentDescription cpu;
  cpu.name = cpu.product = "HSA Sim CPU";
  cpu.vendor = "CPU";
  cpu.compute_units = 16;
  cpu.has_uuid = true;
  cpu.uuid = "CPU-XX";  // CPUs have no UUID
  agents->push_back(cpu);
  for (uint32_t i = 1; i <= gpus; ++i) {
    AgentDescription gpu;
    gpu.vendor = "AMD";
    gpu.product = "HSA Sim GPU " + std::to_string(i);
    gpu.wavefront_size = 64;
    gpu.compute_units = 104;
    gpu.has_uuid = true;
    char uuid[32];
    std::snprintf(uuid, sizeof(uuid), "GPU-%016x", i);
    gpu.uuid = uuid;
    gpu.isa = kDefaultGpuIsa;
    gpu.memory = kDeviceBytes;
    gpu.engines = 8;  // an MI250X GCD: 2 SDMA + 6 xGMI SDMA engines
    agents->push_back(gpu);
  }
  return HSA_RT_INIT_OK;
}

void stop(bool /*shutdown*/) {}
bool reports_violations() { return false; }

// ---- memory --------------------------------------------------------------------------------

bool has_pool(hsa_rt_pool_kind_t) { return true; }
size_t pool_alignment(hsa_rt_pool_kind_t) { return kGranule; }
uint64_t system_pool_size() { return uint64_t{64} << 30; }  // bounds single requests only
uint64_t device_capacity(uint32_t agent) { return is_gpu(agent) ? kDeviceBytes : 0; }
hsa_status_t memory_avail(uint32_t, uint64_t*) { return HSA_STATUS_ERROR; }

hsa_status_t allocate(PoolId pool, size_t bytes, void** base) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  // Fresh device memory holds whatever was there before (an H200 showed
  // garbage where a buffer was assumed zero), so code that reads before it
  // writes is caught here. Only the first 64 KiB: small buffers whole, and
  // the tests' multi-GiB footprints are not all touched.
  if (is_device_kind(pool.kind)) {
    std::memset(p, HSA_RT_POISON_BYTE, std::min<size_t>(bytes, size_t{64} << 10));
  }
  *base = p;
  return HSA_STATUS_SUCCESS;
}

bool release(const Block& block) { return munmap(block.base, block.bytes) == 0; }

// Locked memory needs no pinning: the GPUs are this process. The front end's
// record of the range is all there is.
hsa_status_t lock_host(void*, size_t, bool* registered) {
  *registered = false;
  return HSA_STATUS_SUCCESS;
}
void unlock_host(void*) {}

bool quarantines(hsa_rt_pool_kind_t) { return true; }
uint64_t quarantine_max_bytes() { return uint64_t{256} << 20; }
size_t quarantine_max_blocks() { return 65536; }
bool quarantine_holds_memory() { return false; }
void poison(void* base, size_t bytes) { std::memset(base, HSA_RT_POISON_BYTE, bytes); }

bool poison_intact(const void* base, size_t bytes) {
  const auto* begin = static_cast<const uint8_t*>(base);
  return std::all_of(begin, begin + bytes, [](uint8_t b) { return b == HSA_RT_POISON_BYTE; });
}

bool zero(uint32_t, void* base, size_t bytes) {
  std::memset(base, 0, bytes);
  return true;
}

// The library's tests count every copy into or out of runtime memory as a
// device copy (system pools included).
bool runtime_memory_is_device() { return true; }
Side foreign_side(uintptr_t, size_t) { return Side::kHost; }

bool copy(void* dst, const void* src, size_t size, const CopyPlan&) {
  std::memmove(engine_address_locked(dst), engine_address_locked(src), size);
  return true;
}

// ---- the copy engine: one for every agent, copying at execution ---------------------------

uint32_t engine_count() { return 1; }
uint32_t engine_of(uint32_t) { return 0; }

Queued async_copy(uint32_t, const AsyncJob& job, const CopyPlan&) {
  for (uint64_t row = 0; row < job.rows(); ++row) {
    std::memmove(engine_address_locked(job.dst_row(row)), engine_address_locked(job.src_row(row)),
                 job.size);
  }
  return Queued::kDone;
}

void flush(uint32_t) {}
void drain() {}

// ---- virtual memory ----------------------------------------------------------------------------

size_t vmem_granularity(uint32_t agent) { return is_gpu(agent) ? page_size() : 0; }

hsa_status_t vmem_reserve(size_t size, uint64_t alignment, uint64_t hint, uintptr_t* base,
                          size_t* bytes) {
  // Over-reserve by the alignment and trim, so that any alignment can be
  // met; the hint is used when it is aligned (and free).
  const size_t page = page_size();
  size_t span = 0;
  if (__builtin_add_overflow(size, static_cast<size_t>(alignment) - page, &span)) {
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  void* wish = hint % alignment == 0 ? reinterpret_cast<void*>(hint) : nullptr;
  void* raw = mmap(wish, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + (alignment - 1)) & ~static_cast<uintptr_t>(alignment - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = aligned + size;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  *base = aligned;
  *bytes = size;
  return HSA_STATUS_SUCCESS;
}

// Unmapping a reservation also removes the mappings inside it.
void vmem_free(uintptr_t base, const VmemReservation& r) {
  munmap(reinterpret_cast<void*>(base), r.bytes);
}

hsa_status_t vmem_create(PoolId, size_t size, void** handle) {
  auto memory = std::make_unique<HostHandle>();
  memory->fd = memfd_create("hsa_rt_vmem", MFD_CLOEXEC);
  if (memory->fd >= 0 && ftruncate(memory->fd, static_cast<off_t>(size)) == 0) {
    void* shadow = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memory->fd, 0);
    if (shadow != MAP_FAILED) memory->shadow = static_cast<uint8_t*>(shadow);
  }
  if (memory->shadow == nullptr) {
    if (memory->fd >= 0) close(memory->fd);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  *handle = memory.release();
  return HSA_STATUS_SUCCESS;
}

void vmem_destroy(const VmemHandle& handle) {
  auto* memory = static_cast<HostHandle*>(handle.backend);
  munmap(memory->shadow, handle.size);
  close(memory->fd);
  delete memory;
}

// The handle's first size bytes at va, with no access yet (PROT_NONE).
bool vmem_map(uintptr_t va, size_t size, const VmemHandle& handle) {
  void* mapped = mmap(reinterpret_cast<void*>(va), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                      static_cast<HostHandle*>(handle.backend)->fd, 0);
  if (mapped != MAP_FAILED) return true;
  map_reserved(va, size);
  return false;
}

bool vmem_unmap(uintptr_t va, size_t size, const VmemHandle&) { return map_reserved(va, size); }
bool vmem_grantable(uint32_t, uint32_t, const void*) { return true; }

bool vmem_set_access(uintptr_t va, const VmemMapping& mapping, const VmemHandle&,
                     const VmemAccess& after) {
  auto cpu = after.find(kCpu);
  const uint32_t permission = cpu == after.end() ? kPermissionNone : cpu->second;
  return mprotect(reinterpret_cast<void*>(va), mapping.size, protection_of(permission)) == 0;
}

void* vmem_engine_address(const VmemHandle& handle, size_t offset) {
  return static_cast<HostHandle*>(handle.backend)->shadow + offset;
}

// ---- code objects -------------------------------------------------------------------------------

hsa_status_t load(uint32_t agent, const std::string& agent_isa, const void* image, size_t size,
                  Loaded* out) {
  host::CodeObject object;
  if (!host::read_code_object(static_cast<const uint8_t*>(image), size, &object)) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  // An agent without an ISA (the CPU, an unknown one) supports none.
  if (agent_isa.empty() || !host::isa_compatible(object.isa, agent_isa)) {
    return HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
  }
  auto module = std::make_unique<Module>();
  for (const host::ElfKernel& kernel : object.kernels) {
    module->kernels.push_back(std::make_unique<LoadedKernel>());
    LoadedKernel& loaded = *module->kernels.back();
    std::memcpy(loaded.descriptor, kernel.descriptor, sizeof(loaded.descriptor));
    // The symbol ROCr's loader reports: "name.kd", its kernel object the
    // descriptor's address, the segment sizes at offsets 0, 4, 8.
    Symbol symbol;
    symbol.kind = HSA_SYMBOL_KIND_KERNEL;
    symbol.name = kernel.name;
    symbol.address = reinterpret_cast<uintptr_t>(&loaded);
    symbol.group_size = descriptor_field(kernel.descriptor, 0);
    symbol.private_size = descriptor_field(kernel.descriptor, 4);
    symbol.kernarg_size = descriptor_field(kernel.descriptor, 8);
    symbol.agent = agent;
    symbol.dispatchable = true;
    out->kernels.push_back(symbol);
  }
  out->module = module.release();
  return HSA_STATUS_SUCCESS;
}

void unload(uint32_t, void* module) { delete static_cast<Module*>(module); }

hsa_status_t find_symbol(uint32_t, void*, const std::string&, bool, Symbol*) {
  return HSA_STATUS_ERROR_INVALID_SYMBOL_NAME;  // an ELF's kernels are all listed at load
}

// ---- dispatches ---------------------------------------------------------------------------------

namespace {

enum Access : uint32_t { kRead = 1, kWrite = 2 };

// Checks the ranges one dispatch touches (memory_mutex() held) and gives
// the address the CPU runs the kernel on. The first range that fails makes
// the whole dispatch a violation.
class Reach {
 public:
  explicit Reach(uint32_t agent) : agent_(agent) {
    with_faults([&](Faults& f) {
      into_ = f.copies_into;
      from_ = f.copies_from;
      h2d_ = f.h2d_into;
      return 0;
    });
  }

  bool ok() const { return ok_; }
  // Every range reached, as (address, size).
  const std::vector<std::pair<uint64_t, uint64_t>>& touched() const { return touched_; }
  // The ranges were valid, but one meets an address a test made copies fail
  // at (HSA_RT_FAULT_COPIES_INTO / _FROM / H2D_COPY_INTO): a fault.
  bool injected_fault() const { return injected_; }

  // A host-to-device move a kernel makes, into an H2D_COPY_INTO address.
  void host_to_device(uint64_t dst, uint64_t src, uint64_t size) {
    if (!ok_ || size == 0) return;
    uint32_t owner = 0;
    const char* why = "";
    if (covers(h2d_, reinterpret_cast<const void*>(dst), size) &&
        classify_locked(reinterpret_cast<const void*>(src), size, Role::kSource, &owner, &why) ==
            Side::kHost) {
      injected_ = true;
    }
  }

  void* operator()(uint64_t address, uint64_t size, uint32_t access) {
    if (!ok_ || size == 0) return reinterpret_cast<void*>(address);
    const auto* ptr = reinterpret_cast<const void*>(address);
    if (((access & kWrite) != 0 && covers(into_, ptr, size)) ||
        ((access & kRead) != 0 && covers(from_, ptr, size))) {
      injected_ = true;
    }
    uint32_t owner = 0;
    const char* why = "";
    if (((access & kRead) != 0 &&
         classify_locked(ptr, size, Role::kSource, &owner, &why) == Side::kViolation) ||
        ((access & kWrite) != 0 &&
         classify_locked(ptr, size, Role::kDestination, &owner, &why) == Side::kViolation) ||
        !agent_may(ptr, access)) {
      ok_ = false;
      return nullptr;
    }
    touched_.emplace_back(address, size);
    return engine_address_locked(ptr);
  }

  // An array of count elements of `element` bytes, false on overflow.
  void* array(uint64_t address, uint64_t count, uint64_t element, uint32_t access) {
    if (count > UINT64_MAX / element) ok_ = false;
    return (*this)(address, count * element, access);
  }

 private:
  // A kernel reads and writes through its GPU's page tables: a vmem
  // permission must allow the access; other memory must be mapped for it
  // (owner or granted; memory the runtime does not own never is).
  bool agent_may(const void* ptr, uint32_t access) const {
    uint32_t permission = 0;
    if (vmem_permission_locked(reinterpret_cast<uintptr_t>(ptr), agent_, &permission)) {
      return ((access & kRead) == 0 || permission_allows(permission, Role::kSource)) &&
             ((access & kWrite) == 0 || permission_allows(permission, Role::kDestination));
    }
    return agent_can_access_locked(agent_, ptr);
  }

  uint32_t agent_;
  std::vector<uintptr_t> into_, from_, h2d_;
  std::vector<std::pair<uint64_t, uint64_t>> touched_;
  bool ok_ = true;
  bool injected_ = false;
};

// The kernel arguments with every address the kernel follows replaced by
// the one the CPU runs it on, and the record arrays copied (translated) here.
struct Prepared {
  kr_scatter_copy_args scatter{};
  kr_hash_blocks_args hash{};
  kr_compare_copy_args compare{};
  std::vector<kr_copy_record> records;
  std::vector<kr_hash_block> blocks;
  std::vector<kr_block_pair> pairs;
  const void* kernarg = nullptr;
};

template <typename Args>
bool read_kernarg(Reach& reach, const void* kernarg, Args* out) {
  const void* at = reach(reinterpret_cast<uintptr_t>(kernarg), sizeof(Args), kRead);
  if (!reach.ok()) return false;
  std::memcpy(out, at, sizeof(Args));
  return true;
}

template <typename Element>
bool read_array(Reach& reach, uint64_t address, uint64_t count, std::vector<Element>* out) {
  const void* at = reach.array(address, count, sizeof(Element), kRead);
  if (!reach.ok()) return false;
  out->resize(count);
  if (count != 0) std::memcpy(out->data(), at, count * sizeof(Element));
  return true;
}

constexpr uint64_t kKeyBytes = uint64_t{KR_HASH_KEYS} * sizeof(uint32_t);
constexpr uint64_t kHashBytesPerBlock = 2 * sizeof(uint64_t);

// A kernel runs `per_group` records per workgroup and none past count
// (replay_kernels.cu): it touches the first min(count, groups * per_group).
uint64_t touched(uint64_t count, uint32_t workgroups, uint64_t per_group) {
  return std::min<uint64_t>(count, uint64_t{workgroups} * per_group);
}

// The hashing kernels read at most KR_BLOCK_BYTES of a block.
uint64_t block_bytes(uint64_t len) { return std::min<uint64_t>(len, KR_BLOCK_BYTES); }

bool prepare_scatter(Reach& reach, const void* kernarg, uint32_t workgroups, Prepared* p) {
  kr_scatter_copy_args& args = p->scatter;
  if (!read_kernarg(reach, kernarg, &args) ||
      !read_array(reach, reinterpret_cast<uintptr_t>(args.records),
                  touched(args.count, workgroups, 1), &p->records)) {
    return false;
  }
  for (kr_copy_record& record : p->records) {
    reach.host_to_device(record.dst, record.src, record.size);
    record.dst = reinterpret_cast<uintptr_t>(reach(record.dst, record.size, kWrite));
    record.src = reinterpret_cast<uintptr_t>(reach(record.src, record.size, kRead));
  }
  args.records = p->records.data();
  p->kernarg = &args;
  return reach.ok();
}

bool prepare_hash(Reach& reach, const void* kernarg, uint32_t workgroups, Prepared* p) {
  kr_hash_blocks_args& args = p->hash;
  if (!read_kernarg(reach, kernarg, &args) ||
      !read_array(reach, reinterpret_cast<uintptr_t>(args.blocks),
                  touched(args.count, workgroups, KR_BLOCKS_PER_GROUP), &p->blocks)) {
    return false;
  }
  for (kr_hash_block& block : p->blocks) {
    block.addr = reinterpret_cast<uintptr_t>(reach(block.addr, block_bytes(block.len), kRead));
  }
  args.blocks = p->blocks.data();
  args.keys = static_cast<const uint32_t*>(
      reach(reinterpret_cast<uintptr_t>(args.keys), kKeyBytes, kRead));
  args.hashes = static_cast<uint64_t*>(reach.array(reinterpret_cast<uintptr_t>(args.hashes),
                                                   p->blocks.size(), kHashBytesPerBlock, kWrite));
  p->kernarg = &args;
  return reach.ok();
}

bool prepare_compare(Reach& reach, const void* kernarg, uint32_t workgroups, Prepared* p) {
  kr_compare_copy_args& args = p->compare;
  if (!read_kernarg(reach, kernarg, &args) ||
      !read_array(reach, reinterpret_cast<uintptr_t>(args.pairs),
                  touched(args.count, workgroups, KR_BLOCKS_PER_GROUP), &p->pairs)) {
    return false;
  }
  // With KR_COMPARE_SWAP the pair's src is the side written (and maybe
  // hashed); the other is read.
  const bool swap = (args.flags & KR_COMPARE_SWAP) != 0;
  for (kr_block_pair& pair : p->pairs) {
    const uint64_t len = block_bytes(pair.len);
    if (swap) {
      reach.host_to_device(pair.src, pair.dst, len);
    } else {
      reach.host_to_device(pair.dst, pair.src, len);
    }
    pair.dst = reinterpret_cast<uintptr_t>(
        reach(pair.dst, len, swap ? uint32_t{kRead} : uint32_t{kRead | kWrite}));
    pair.src = reinterpret_cast<uintptr_t>(
        reach(pair.src, len, swap ? uint32_t{kRead | kWrite} : uint32_t{kRead}));
  }
  args.pairs = p->pairs.data();
  args.keys = static_cast<const uint32_t*>(
      reach(reinterpret_cast<uintptr_t>(args.keys), kKeyBytes, kRead));
  const uint32_t hash_access =
      (args.flags & KR_COMPARE_UPDATE_HASH) != 0 ? uint32_t{kRead | kWrite} : uint32_t{kRead};
  args.hashes = static_cast<uint64_t*>(reach.array(reinterpret_cast<uintptr_t>(args.hashes),
                                                   p->pairs.size(), kHashBytesPerBlock,
                                                   hash_access));
  args.changed = static_cast<uint64_t*>(
      reach(reinterpret_cast<uintptr_t>(args.changed), sizeof(uint64_t), kRead | kWrite));
  p->kernarg = &args;
  return reach.ok();
}

}  // namespace

hsa_status_t queue_start(uint32_t, void** data) {
  *data = nullptr;
  return HSA_STATUS_SUCCESS;
}

void queue_stop(uint32_t, void*) {}

hsa_status_t dispatch(uint32_t agent, void*, const hsa_kernel_dispatch_packet_t& p,
                      const KernelInfo& kernel) {
  // The shape the library's kernels need: 1-D, KR_WORKGROUP work-items per
  // workgroup, whole workgroups (a GPU would run any shape and compute
  // garbage; here an invalid work-group size).
  if (p.workgroup_size_x != KR_WORKGROUP || p.workgroup_size_y != 1 || p.workgroup_size_z != 1 ||
      p.grid_size_y != 1 || p.grid_size_z != 1 || p.grid_size_x % KR_WORKGROUP != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  const uint32_t workgroups = p.grid_size_x / KR_WORKGROUP;
  // Under the memory lock: a free cannot slip in between the checks and
  // the kernel.
  SharedLock lock(memory_mutex());
  Reach reach(agent);
  Prepared prepared;
  bool ready = false;
  if (kernel.name == "kr_scatter_copy") {
    ready = prepare_scatter(reach, p.kernarg_address, workgroups, &prepared);
  } else if (kernel.name == "kr_hash_blocks") {
    ready = prepare_hash(reach, p.kernarg_address, workgroups, &prepared);
  } else if (kernel.name == "kr_compare_copy") {
    ready = prepare_compare(reach, p.kernarg_address, workgroups, &prepared);
  } else {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;  // no host build of it
  }
  if (!ready) {
    // One violation, as a copy's; nothing was touched.
    count_violation("a kernel dispatch", nullptr, nullptr, 0, "kernel",
                    "touches memory it may not");
    return kApertureViolation;
  }
  // A page a test made copies fail on faults a kernel too, before anything
  // is written (a GPU's fault would leave the dispatch half done; the
  // library must not rely on either).
  if (reach.injected_fault()) return kApertureViolation;
  if (kr_host_dispatch(kernel.name.c_str(), prepared.kernarg, workgroups) != 0) {
    return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  // The GPU reached every range through its page tables: SVM pages count,
  // and may move to it.
  for (const auto& [address, size] : reach.touched()) {
    svm_access(agent, reinterpret_cast<const void*>(address), size);
  }
  return HSA_STATUS_SUCCESS;
}

const cuda_driver_t* driver() { return nullptr; }
int device(uint32_t) { return -1; }
CUctx_st* context(uint32_t) { return nullptr; }

}  // namespace hsa_rt::backend
