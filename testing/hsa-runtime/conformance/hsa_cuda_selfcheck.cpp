// hsa_cuda_selfcheck: what can be verified about the GPU harness without a
// GPU, run by ctest on every machine.
//
//   hsa_cuda_selfcheck [--fake-driver LIBCUDA] [PROGRAM...]
//
// 1. The tables: version fields as ROCr fills them, and every entry
//    kernel-replay reads or replaces (and the async-copy and signal entries a
//    tool may use) non-NULL.
// 2. kernel-replay accepts them: kr_memory_tracker_init over fresh copies of
//    the tables succeeds and installs its wrappers, which chain to the
//    runtime (an allocation before init answers NOT_INITIALIZED through them).
// 3. Before hsa_cuda_init every entry answers HSA_STATUS_ERROR_NOT_INITIALIZED.
// 4. hsa_cuda_init with a driver library that does not exist
//    (HSA_CUDA_LIBCUDA) fails cleanly with HSA_CUDA_INIT_NO_DRIVER and a
//    message saying "no CUDA driver", holding nothing.
// 5. Each PROGRAM (the GPU test and bench) run without a driver prints "no
//    CUDA driver" and exits 77; with --fake-driver and no devices
//    (FAKE_CUDA_DEVICES=0), "no CUDA device" and 77.
// 6. Then the real libcuda.so.1, if this machine has one: init succeeds and
//    shows at least one GPU agent with its pool, or reports why not (not a
//    failure: most machines running this have no GPU); with a GPU, the
//    runtime checks of 7. run on it.
// 7. The runtime on a driver (the real one when there is one, else, with
//    --fake-driver, the stand-in with two devices): with 6.0+ headers the
//    vmem entries on CUDA's virtual memory management, every status code the
//    sim gives (hsa_common_vmem.h) and what the driver itself then says
//    (cuMemGetAccess): reservations, handles (sizes in granules), mappings,
//    one handle at two addresses, no access before set_access, the CPU and
//    write-only refused with nothing changed, per-generation merge or
//    replace, revocation keeping the bytes, read-only, whole-mapping unmaps,
//    a handle released while mapped living until its last unmap, retain,
//    pointer info per generation; copy_on_engine and copy_rect (a row in
//    unmapped memory is one violation, nothing copied); async handlers; and
//    on the fake driver only, a kernel touching a mapping its device may not
//    touch faulting (CUDA_ERROR_ILLEGAL_ADDRESS), and an allocation that
//    fits only once the runtime's quarantine of freed blocks goes back to the
//    driver succeeding.
// 8. On the same driver, what the library's own kernels need (the calls it
//    makes on ROCm): the GPU's ISA and its name, hsa_queue_create's
//    argument checks, an executable made from a code object reader
//    (create_alt, load_agent_code_object, freeze, get_symbol_by_name
//    "name.kd", the kernel attributes, the loader iterator listing it), one
//    dispatch of each of kr_scatter_copy, kr_hash_blocks and kr_compare_copy
//    through an AQL queue (doorbell, completion signal) checked against a
//    reference on the host, a barrier-AND packet, and the queue's error
//    callback on a launch the driver refuses and on a packet naming no
//    kernel. The code object is $KERNEL_REPLAY_CODE_OBJECT (gpu/run.sh sets
//    it to the cubin of kernels/replay_kernels.cu); the fake driver takes any
//    bytes; on a real driver without it these checks are skipped, saying so.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include <fstream>
#include <iterator>

#include "hsa_common.h"
#include "hsa_cuda.h"
#include "kernel_replay.h"
#include "pattern.h"
#include "replay_kernels.h"

namespace {

int g_failures = 0;

bool check(bool condition, const char* what) {
  std::printf("  %s %s\n", condition ? "ok  " : "FAIL", what);
  if (!condition) ++g_failures;
  return condition;
}

template <typename Table>
bool entry_set(const Table& table, size_t offset) {
  void* entry = nullptr;
  std::memcpy(&entry, reinterpret_cast<const unsigned char*>(&table) + offset, sizeof(entry));
  return entry != nullptr;
}

#define CHECK_ENTRY(table, field) \
  check(entry_set(table, offsetof(std::remove_reference_t<decltype(table)>, field)), #field " is set")

// Runs a program through the shell with the given environment assignments
// prepended; returns its exit status (-1 if it did not exit) and its output.
int run_program(const std::string& environment, const std::string& program, std::string* output) {
  const std::string command = environment + " '" + program + "' 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void check_program(const std::string& environment, const std::string& program,
                   const char* expected_text) {
  std::string output;
  const int code = run_program(environment, program, &output);
  const std::string what = program + " (" + environment + ") exits 77 saying \"" +
                           expected_text + "\"";
  const bool ok = code == 77 && output.find(expected_text) != std::string::npos;
  check(ok, what.c_str());
  if (!ok) std::printf("       exit %d, output:\n%s\n", code, output.c_str());
}

// ---- the runtime on a driver: vmem, copy variants, async handlers, OOM ---------

bool on_fake_driver() {
  char name[64] = {};
  hsa_agent_get_info(hsa_cuda_gpu_agent(0),
                     static_cast<hsa_agent_info_t>(HSA_AMD_AGENT_INFO_PRODUCT_NAME), name);
  return std::strncmp(name, "Fake CUDA Device", 16) == 0;
}

#if HSA_COMMON_HAVE_VMEM
// Makes a context current for the scope (the selfcheck's thread has none).
class CurrentContext {
 public:
  explicit CurrentContext(CUcontext context) {
    const cuda_driver_t* d = hsa_cuda_driver();
    ok_ = d->cuCtxGetCurrent(&previous_) == CUDA_SUCCESS &&
          d->cuCtxSetCurrent(context) == CUDA_SUCCESS;
  }
  ~CurrentContext() {
    if (ok_) hsa_cuda_driver()->cuCtxSetCurrent(previous_);
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;

 private:
  CUcontext previous_ = nullptr;
  bool ok_ = false;
};

uint64_t free_bytes(hsa_agent_t agent) {
  uint64_t bytes = 0;
  hsa_agent_get_info(agent, static_cast<hsa_agent_info_t>(HSA_CUDA_AGENT_INFO_MEMORY_AVAIL), &bytes);
  return bytes;
}

// What CUDA itself says of a device's access to a mapped address
// (cuMemGetAccess), so the checks see the driver, not only the runtime's
// records; -1 if the driver cannot say.
long long cuda_access(hsa_agent_t gpu, const void* address) {
  const cuda_driver_t* d = hsa_cuda_driver();
  CUmemLocation location{CU_MEM_LOCATION_TYPE_DEVICE, hsa_cuda_agent_device(gpu)};
  unsigned long long flags = 0;
  CurrentContext scope(hsa_cuda_agent_context(gpu));
  return d->cuMemGetAccess(&flags, &location, reinterpret_cast<CUdeviceptr>(address)) ==
                 CUDA_SUCCESS
             ? static_cast<long long>(flags)
             : -1;
}

struct Fill {
  std::vector<uint32_t> words;
  Fill(size_t bytes, uint32_t seed) : words(bytes / 4) {
    for (size_t i = 0; i < words.size(); ++i) words[i] = uint32_t(i * 2654435761u) ^ seed;
  }
};

// Reads `bytes` at a device address back through hsa_memory_copy.
std::vector<uint32_t> read_back(const void* address, size_t bytes, hsa_status_t* status) {
  std::vector<uint32_t> words(bytes / 4);
  *status = hsa_memory_copy(words.data(), address, bytes);
  return words;
}

hsa_amd_memory_access_desc_t access_desc(hsa_agent_t agent, uint32_t permission) {
  hsa_amd_memory_access_desc_t desc;
  std::memset(&desc, 0, sizeof(desc));
  desc.agent_handle = agent;
  std::memcpy(&desc.permissions, &permission, sizeof(permission));
  return desc;
}

hsa_status_t set_access(void* va, size_t size, hsa_agent_t agent, uint32_t permission) {
  const hsa_amd_memory_access_desc_t desc = access_desc(agent, permission);
  return hsa_amd_vmem_set_access(va, size, &desc, 1);
}

// get_access's permission, or -status when it fails.
long long get_access(void* va, hsa_agent_t agent) {
  hsa_access_permission_t permission = HSA_ACCESS_PERMISSION_NONE;
  const hsa_status_t status = hsa_amd_vmem_get_access(va, &permission, agent);
  return status == HSA_STATUS_SUCCESS ? static_cast<long long>(permission)
                                      : -static_cast<long long>(status);
}

constexpr uint32_t kNone = 0, kReadOnly = 1, kWriteOnly = 2, kReadWrite = 3;
// What get_access answers for a GPU never given access, per generation.
constexpr long long kNeverGiven =
    HSA_COMMON_VMEM_SET_ACCESS_MERGES ? 0 : -static_cast<long long>(HSA_STATUS_ERROR_INVALID_ALLOCATION);

// Returns the CUDA calls the runtime saw fail on purpose (a driver refusing
// read-only mappings).
uint64_t check_vmem(bool fake) {
  std::printf("virtual memory\n");
  const hsa_agent_t gpu0 = hsa_cuda_gpu_agent(0);
  const hsa_agent_t gpu1 = hsa_cuda_gpu_count() > 1 ? hsa_cuda_gpu_agent(1) : gpu0;
  const bool two_gpus = hsa_cuda_gpu_count() > 1;
  const hsa_agent_t cpu = hsa_cuda_cpu_agent();
  const hsa_amd_memory_pool_t vram0 = hsa_cuda_pool(gpu0, HSA_CUDA_POOL_DEVICE_COARSE);
  const hsa_amd_memory_pool_t fine = hsa_cuda_pool(cpu, HSA_CUDA_POOL_SYSTEM_FINE);
  check(hsa_cuda_vmem_supported(), "hsa_cuda_vmem_supported");
  const size_t g = hsa_cuda_vmem_granularity(gpu0);
  std::printf("       granularity %zu KiB\n", g / 1024);
  check(g != 0 && hsa_cuda_vmem_granularity(cpu) == 0, "a GPU has a vmem granularity, the CPU none");
  if (fake) check(g == size_t{2} << 20, "the fake driver's granularity is 2 MiB (an H200's)");
  if (g == 0) return 0;
  uint64_t refused_by_driver = 0;
  const uint64_t violations = hsa_cuda_copy_violations();
  uint64_t expected_violations = violations;

  // Reservations.
  void* r = nullptr;
  check(hsa_amd_vmem_address_reserve(nullptr, 16 * g, 0, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_address_reserve(&r, 0, 0, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_address_reserve(&r, 4097, 0, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "address_reserve: NULL va, size 0, size not whole pages: INVALID_ARGUMENT");
#if HSA_COMMON_HAVE_VMEM_RESERVE_ALIGN
  check(hsa_amd_vmem_address_reserve_align(&r, 16 * g, 0, 3 * 4096, 0) ==
            HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "address_reserve_align: an alignment that is not a power of two: INVALID_ARGUMENT");
  void* aligned = nullptr;
  check(hsa_amd_vmem_address_reserve_align(&aligned, 4096, 0, 4 * g, 0) == HSA_STATUS_SUCCESS &&
            reinterpret_cast<uintptr_t>(aligned) % (4 * g) == 0,
        "address_reserve_align: one page at an alignment of 4 granules");
  check(hsa_amd_vmem_address_free(aligned, 4096) == HSA_STATUS_SUCCESS, "address_free of it");
#endif
  if (!check(hsa_amd_vmem_address_reserve(&r, 32 * g, 0, 0) == HSA_STATUS_SUCCESS && r != nullptr,
             "address_reserve: 32 granules")) {
    return 0;
  }
  auto at = [&](size_t granules) { return static_cast<char*>(r) + granules * g; };

  // Handles.
  hsa_amd_vmem_alloc_handle_t h1{0}, h2{0}, h3{0}, bogus{0x1234};
  check(hsa_amd_vmem_handle_create(vram0, 0, MEMORY_TYPE_NONE, 0, &h1) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_handle_create(vram0, g, MEMORY_TYPE_NONE, 0, nullptr) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_handle_create(vram0, g, static_cast<hsa_amd_memory_type_t>(7), 0, &h1) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "handle_create: size 0, NULL handle, unknown type: INVALID_ARGUMENT");
  check(hsa_amd_vmem_handle_create(fine, g, MEMORY_TYPE_NONE, 0, &h1) ==
            HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "handle_create in a system pool (ROCr: device memory only): INVALID_ARGUMENT");
  check(hsa_amd_vmem_handle_create(vram0, g + 4096, MEMORY_TYPE_NONE, 0, &h1) ==
            HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "handle_create of whole pages but not whole granules: INVALID_ARGUMENT");
  size_t pool_bytes = 0;
  hsa_amd_memory_pool_get_info(vram0, HSA_AMD_MEMORY_POOL_INFO_SIZE, &pool_bytes);
  check(hsa_amd_vmem_handle_create(vram0, (pool_bytes / g + 1) * g, MEMORY_TYPE_NONE, 0, &h1) ==
            HSA_STATUS_ERROR_INVALID_ALLOCATION,
        "handle_create larger than the pool: INVALID_ALLOCATION");
  const uint64_t free_before = free_bytes(gpu0);
  if (!check(hsa_amd_vmem_handle_create(vram0, 2 * g, MEMORY_TYPE_NONE, 0, &h1) ==
                     HSA_STATUS_SUCCESS &&
                 hsa_amd_vmem_handle_create(vram0, g, MEMORY_TYPE_PINNED, 0, &h2) ==
                     HSA_STATUS_SUCCESS,
             "handle_create: 2 granules and 1 granule on GPU 0")) {
    return 0;
  }
  if (fake) {
    check(free_bytes(gpu0) == free_before - 3 * g,
          "the handles take their bytes from the device's free memory");
  }
  hsa_amd_memory_pool_t pool{0};
  hsa_amd_memory_type_t type = MEMORY_TYPE_PINNED;
  check(hsa_amd_vmem_get_alloc_properties_from_handle(h1, &pool, &type) == HSA_STATUS_SUCCESS &&
            pool.handle == vram0.handle && type == MEMORY_TYPE_NONE,
        "get_alloc_properties_from_handle: GPU 0's pool (asked of CUDA), the type created");
  check(hsa_amd_vmem_get_alloc_properties_from_handle(bogus, &pool, &type) ==
                HSA_STATUS_ERROR_INVALID_ALLOCATION &&
            hsa_amd_vmem_get_alloc_properties_from_handle(h1, nullptr, &type) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "get_alloc_properties_from_handle: unknown handle INVALID_ALLOCATION, NULL INVALID_ARGUMENT");
  if (two_gpus) {
    check(hsa_amd_vmem_handle_create(hsa_cuda_pool(gpu1, HSA_CUDA_POOL_DEVICE_COARSE), g,
                                     MEMORY_TYPE_NONE, 0, &h3) == HSA_STATUS_SUCCESS &&
              hsa_amd_vmem_get_alloc_properties_from_handle(h3, &pool, &type) ==
                  HSA_STATUS_SUCCESS &&
              pool.handle == hsa_cuda_pool(gpu1, HSA_CUDA_POOL_DEVICE_COARSE).handle,
          "a handle on GPU 1 maps back to GPU 1's pool");
  }

  // Mappings.
  int outside = 0;
  check(hsa_amd_vmem_map(&outside, g, 0, h1, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_map(at(0) + 4096, g, 0, h2, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_map(at(31), 2 * g, 0, h1, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_map(at(0), g, 0, bogus, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "map outside a reservation, off the granularity, past the reservation's end, of an "
        "unknown handle: INVALID_ARGUMENT");
  check(hsa_amd_vmem_map(at(0), 2 * g, 0, h2, 0) == HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        "map of more than the handle holds: OUT_OF_RESOURCES");
  if (!check(hsa_amd_vmem_map(at(0), 2 * g, 0, h1, 0) == HSA_STATUS_SUCCESS &&
                 hsa_amd_vmem_map(at(2), g, 0, h2, 0) == HSA_STATUS_SUCCESS &&
                 hsa_amd_vmem_map(at(8), 2 * g, 0, h1, 0) == HSA_STATUS_SUCCESS,
             "map h1 at +0 and (a second view) at +8 granules, h2 at +2")) {
    return 0;
  }
  check(hsa_amd_vmem_map(at(1), g, 0, h2, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "map over another mapping: INVALID_ARGUMENT");
  check(hsa_cuda_vmem_mapping_count() == 3 && hsa_cuda_vmem_reservation_count() == 1,
        "the runtime counts 3 mappings and 1 reservation");

  // Before set_access, nobody may touch it.
  const Fill data(2 * g, 0xA11CE);
  check(hsa_memory_copy(at(0), data.words.data(), 2 * g) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "hsa_memory_copy into a mapping before set_access: refused");
  check(hsa_memory_copy(at(20), data.words.data(), 4096) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "hsa_memory_copy into reserved, unmapped memory: refused");
  expected_violations += 2;
  check(get_access(at(0), gpu0) == kNeverGiven, "get_access before set_access: per generation");
  check(cuda_access(gpu0, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_NONE,
        "CUDA: no device has access to a new mapping");
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  uint32_t count = 99;
  hsa_agent_t* agents = reinterpret_cast<hsa_agent_t*>(&outside);
  check(hsa_amd_pointer_info(at(1), &info, std::malloc, &count, &agents) == HSA_STATUS_SUCCESS,
        "pointer info of a mapped address");
#if HSA_COMMON_HAVE_POINTER_TYPE_HSA_VMEM
  check(info.type == HSA_EXT_POINTER_TYPE_HSA_VMEM && info.agentBaseAddress == at(1) &&
            info.sizeInBytes == 2 * g && info.agentOwner.handle == gpu0.handle && count == 0 &&
            agents == nullptr,
        "7.x: HSA_VMEM, base = the address, the mapping's size, owner GPU 0, no agents (no alloc)");
#else
  check(info.type == hsa_common::kPointerTypeReservedAddr && info.agentBaseAddress == r &&
            info.sizeInBytes == 32 * g && info.agentOwner.handle == cpu.handle,
        "6.x: RESERVED_ADDR, the whole reservation, owned by the CPU");
  std::free(agents);
#endif

  // set_access: checks first, then what CUDA cannot do, then per generation.
  const hsa_amd_memory_access_desc_t rw0 = access_desc(gpu0, kReadWrite);
  const hsa_amd_memory_access_desc_t unknown = access_desc(hsa_agent_t{0x42}, kReadWrite);
  const hsa_amd_memory_access_desc_t bad = access_desc(gpu0, 7);
  check(hsa_amd_vmem_set_access(at(0), 2 * g, nullptr, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_set_access(at(0), 2 * g, &rw0, 0) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_set_access(at(0), 2 * g, &unknown, 1) == HSA_STATUS_ERROR_INVALID_AGENT &&
            hsa_amd_vmem_set_access(at(0), 2 * g, &bad, 1) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "set_access: NULL desc, count 0, unknown agent, unknown permission");
  check(set_access(at(0), 2 * g, cpu, kReadWrite) == HSA_STATUS_ERROR &&
            set_access(at(0), 2 * g, gpu0, kWriteOnly) == HSA_STATUS_ERROR &&
            get_access(at(0), gpu0) == kNeverGiven &&
            cuda_access(gpu0, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_NONE,
        "set_access for the CPU, or write-only: HSA_STATUS_ERROR, nothing changed");
  check(set_access(at(0), 2 * g, cpu, kNone) == HSA_STATUS_SUCCESS,
        "set_access giving the CPU NONE is accepted");
  check(get_access(at(0), cpu) == -static_cast<long long>(HSA_STATUS_ERROR_INVALID_AGENT),
        "get_access for the CPU: INVALID_AGENT");
  if (!check(set_access(at(0), 2 * g, gpu0, kReadWrite) == HSA_STATUS_SUCCESS &&
                 get_access(at(1), gpu0) == kReadWrite &&
                 cuda_access(gpu0, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
             "set_access GPU 0 read-write: get_access (an interior address) and CUDA agree")) {
    return 0;
  }
  hsa_status_t status = hsa_memory_copy(at(0), data.words.data(), 2 * g);
  check(status == HSA_STATUS_SUCCESS, "hsa_memory_copy into the mapping");
  std::vector<uint32_t> sink(4096 / 4);
  check(hsa_memory_copy(sink.data(), at(8), 4096) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "the second view has no access of its own yet: a copy from it is refused");
  ++expected_violations;
  check(set_access(at(8), 2 * g, gpu0, kReadWrite) == HSA_STATUS_SUCCESS &&
            read_back(at(8), 2 * g, &status) == data.words && status == HSA_STATUS_SUCCESS,
        "one handle mapped at two addresses: the second view shows the first's bytes");
  info = hsa_amd_pointer_info_t{};
  info.size = sizeof(info);
  agents = nullptr;
  hsa_amd_pointer_info(at(0), &info, std::malloc, &count, &agents);
#if HSA_COMMON_HAVE_POINTER_TYPE_HSA_VMEM
  check(count == 1 && agents != nullptr && agents[0].handle == gpu0.handle,
        "7.x pointer info: GPU 0 is the accessible agent");
#endif
  std::free(agents);

  // Spanning two mappings, and what happens to an agent not named.
  if (two_gpus) {
    status = set_access(at(0), 3 * g, gpu1, kReadWrite);
#if HSA_COMMON_VMEM_SET_ACCESS_MERGES
    check(status == HSA_STATUS_SUCCESS && get_access(at(0), gpu1) == kReadWrite &&
              get_access(at(2), gpu1) == kReadWrite && get_access(at(0), gpu0) == kReadWrite &&
              cuda_access(gpu0, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE &&
              cuda_access(gpu1, at(2)) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
          "6.4+: a set_access spanning two mappings reaches both; GPU 0 keeps its access");
    // Revoking: GPU 0 NONE; the bytes stay (they are the handle's).
    check(set_access(at(0), 2 * g, gpu0, kNone) == HSA_STATUS_SUCCESS &&
              get_access(at(0), gpu0) == kNone && get_access(at(0), gpu1) == kReadWrite &&
              cuda_access(gpu0, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
              cuda_access(gpu1, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
          "set_access GPU 0 NONE revokes it in CUDA too; GPU 1 keeps read-write");
#else
    check(status == HSA_STATUS_ERROR_INVALID_ALLOCATION,
          "6.0-6.2: a set_access spanning two mappings: INVALID_ALLOCATION");
    // Replace: naming only GPU 1 takes GPU 0's access away.
    check(set_access(at(0), 2 * g, gpu1, kReadWrite) == HSA_STATUS_SUCCESS &&
              get_access(at(0), gpu1) == kReadWrite && get_access(at(0), gpu0) == kNeverGiven &&
              cuda_access(gpu0, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
              cuda_access(gpu1, at(0)) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
          "6.0-6.2: set_access replaces: GPU 0, not named, loses its access in CUDA too");
#endif
    check(read_back(at(0), 2 * g, &status) == data.words && status == HSA_STATUS_SUCCESS,
          "the bytes survive the revocation (read through GPU 1's access)");
    check(set_access(at(0), 2 * g, gpu0, kReadWrite) == HSA_STATUS_SUCCESS,
          "GPU 0 read-write again");
  }

  // Read-only: PROT_READ where the driver has it; else HSA_STATUS_ERROR with
  // nothing changed (the documented alternative).
  const Fill small(g, 0x5EED);
  check(set_access(at(2), g, gpu0, kReadWrite) == HSA_STATUS_SUCCESS &&
            hsa_memory_copy(at(2), small.words.data(), g) == HSA_STATUS_SUCCESS,
        "h2's mapping: GPU 0 read-write, filled");
  status = set_access(at(2), g, gpu0, kReadOnly);
  if (status == HSA_STATUS_SUCCESS) {
    std::printf("       (the driver maps read-only)\n");
    const bool others_write = two_gpus && get_access(at(2), gpu1) == kReadWrite;
    check(get_access(at(2), gpu0) == kReadOnly &&
              cuda_access(gpu0, at(2)) == CU_MEM_ACCESS_FLAGS_PROT_READ,
          "set_access read-only: get_access and CUDA say read-only");
    check(read_back(at(2), g, &status) == small.words && status == HSA_STATUS_SUCCESS,
          "a read-only mapping reads");
    if (!others_write) {
      check(hsa_memory_copy(at(2), sink.data(), 4096) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
            "a read-only mapping nobody may write: a copy into it is refused");
      ++expected_violations;
    }
  } else {
    std::printf("       (the driver refused a read-only mapping)\n");
    refused_by_driver = 1;
    check(status == HSA_STATUS_ERROR && get_access(at(2), gpu0) == kReadWrite &&
              cuda_access(gpu0, at(2)) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
          "set_access read-only refused by the driver: HSA_STATUS_ERROR, still read-write");
  }
  if (fake) check(status == HSA_STATUS_SUCCESS, "the fake driver maps read-only");

  // Unmap and free: whole mappings only; a reservation with mappings stays.
  check(hsa_amd_vmem_unmap(nullptr, g) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_unmap(at(0), g) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_unmap(at(1), g) == HSA_STATUS_ERROR_INVALID_ALLOCATION,
        "unmap: NULL, part of a mapping INVALID_ARGUMENT; not a mapping's start "
        "INVALID_ALLOCATION");
  check(hsa_amd_vmem_address_free(r, 32 * g) == HSA_STATUS_ERROR_RESOURCE_FREE &&
            hsa_amd_vmem_address_free(r, 16 * g) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_vmem_address_free(at(1), 16 * g) == HSA_STATUS_ERROR_INVALID_ALLOCATION,
        "address_free with mappings inside RESOURCE_FREE, wrong size INVALID_ARGUMENT, not a "
        "start INVALID_ALLOCATION");

  // Release while mapped: the memory lives until the last unmap.
  check(hsa_amd_vmem_handle_release(h1) == HSA_STATUS_SUCCESS &&
            hsa_amd_vmem_handle_release(h1) == HSA_STATUS_ERROR_INVALID_ALLOCATION &&
            hsa_amd_vmem_handle_release(bogus) == HSA_STATUS_ERROR_INVALID_ALLOCATION,
        "handle_release of a mapped handle succeeds once, then INVALID_ALLOCATION");
  check(read_back(at(8), 2 * g, &status) == data.words && status == HSA_STATUS_SUCCESS &&
            hsa_amd_vmem_get_alloc_properties_from_handle(h1, &pool, &type) == HSA_STATUS_SUCCESS &&
            pool.handle == vram0.handle,
        "a released, mapped handle keeps its bytes and still answers for its pool");
  check(hsa_amd_vmem_map(at(12), 2 * g, 0, h1, 0) == HSA_STATUS_SUCCESS &&
            set_access(at(12), 2 * g, gpu0, kReadWrite) == HSA_STATUS_SUCCESS &&
            read_back(at(12), 2 * g, &status) == data.words,
        "a released handle still mapped can be mapped again (a third view, as ROCr allows)");
  hsa_amd_vmem_alloc_handle_t retained{0};
  check(hsa_amd_vmem_retain_alloc_handle(&retained, at(1)) == HSA_STATUS_ERROR_INVALID_ALLOCATION &&
            hsa_amd_vmem_retain_alloc_handle(nullptr, at(0)) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "retain_alloc_handle: not a mapping's start INVALID_ALLOCATION, NULL INVALID_ARGUMENT");
  check(hsa_amd_vmem_retain_alloc_handle(&retained, at(8)) == HSA_STATUS_SUCCESS &&
            retained.handle == h1.handle &&
            hsa_amd_vmem_handle_release(retained) == HSA_STATUS_SUCCESS,
        "retain_alloc_handle gives h1 back, which needs its own release");
  const uint64_t handles = hsa_cuda_vmem_handle_count();
  check(hsa_amd_vmem_unmap(at(0), 2 * g) == HSA_STATUS_SUCCESS &&
            hsa_amd_vmem_unmap(at(8), 2 * g) == HSA_STATUS_SUCCESS &&
            hsa_cuda_vmem_handle_count() == handles,
        "a released handle with a mapping left is still there");
  // Revoking remaps the handle: its last mapping must not free it meanwhile.
  check(set_access(at(12), 2 * g, gpu0, kNone) == HSA_STATUS_SUCCESS &&
            cuda_access(gpu0, at(12)) == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            set_access(at(12), 2 * g, gpu0, kReadWrite) == HSA_STATUS_SUCCESS &&
            read_back(at(12), 2 * g, &status) == data.words && status == HSA_STATUS_SUCCESS,
        "revoking and granting again on a released handle's last mapping keeps its bytes");
  check(hsa_amd_vmem_unmap(at(12), 2 * g) == HSA_STATUS_SUCCESS &&
            hsa_cuda_vmem_handle_count() == handles - 1,
        "the released handle goes with its last mapping");
  check(hsa_memory_copy(sink.data(), at(0), 4096) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "a copy from an unmapped range is refused");
  ++expected_violations;

  // The copy variants.
  hsa_signal_t done{0};
  hsa_signal_create(1, 0, nullptr, &done);
  const Fill engine_data(g, 0xE61E);
#if HSA_COMMON_HAVE_VMEM
  check(hsa_amd_memory_async_copy_on_engine(at(2), gpu0, engine_data.words.data(), cpu, g, 0,
                                            nullptr, done, static_cast<hsa_amd_sdma_engine_id_t>(0),
                                            false) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_memory_async_copy_on_engine(at(2), gpu0, engine_data.words.data(), cpu, g, 0,
                                                nullptr, done,
                                                static_cast<hsa_amd_sdma_engine_id_t>(3),
                                                false) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_memory_async_copy_on_engine(at(2), gpu0, engine_data.words.data(), cpu, g, 0,
                                                nullptr, done,
                                                static_cast<hsa_amd_sdma_engine_id_t>(1u << 20),
                                                false) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "copy_on_engine: no engine, two engines, an engine the GPU has not: INVALID_ARGUMENT");
  std::vector<uint32_t> host_out(g / 4);
  check(hsa_amd_memory_async_copy_on_engine(host_out.data(), cpu, engine_data.words.data(), cpu,
                                            64, 0, nullptr, done, HSA_AMD_SDMA_ENGINE_0,
                                            false) == HSA_STATUS_ERROR,
        "copy_on_engine between two CPU agents: HSA_STATUS_ERROR (no engine)");
  // Into h2's mapping: writable by GPU 0 only if the read-only step above was
  // refused; make it read-write again first.
  set_access(at(2), g, gpu0, kReadWrite);
  check(hsa_amd_memory_async_copy_on_engine(at(2), gpu0, engine_data.words.data(), cpu, g, 0,
                                            nullptr, done, HSA_AMD_SDMA_ENGINE_0,
                                            false) == HSA_STATUS_SUCCESS &&
            hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, 10000000000ull,
                                      HSA_WAIT_STATE_BLOCKED) == 0 &&
            read_back(at(2), g, &status) == engine_data.words,
        "copy_on_engine into a mapping: completes, the bytes landed");
#endif
  // A rect copy: 64 rows of 256 bytes from a pitched host buffer into the
  // mapping with a pitch of 512.
  std::vector<uint32_t> rows(64 * 1024 / 4);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = uint32_t(i) * 7u + 1;
  hsa_pitched_ptr_t rect_src{rows.data(), 1024, 0};
  hsa_pitched_ptr_t rect_dst{at(2), 512, 0};
  hsa_dim3_t zero{0, 0, 0};
  hsa_dim3_t range{256, 64, 1};
  hsa_signal_store_screlease(done, 1);
  check(hsa_amd_memory_async_copy_rect(&rect_dst, &zero, &rect_src, &zero, &range, gpu0,
                                       hsaHostToDevice, 0, nullptr, done) == HSA_STATUS_SUCCESS &&
            hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, 10000000000ull,
                                      HSA_WAIT_STATE_BLOCKED) == 0,
        "copy_rect into a mapping completes");
  std::vector<uint32_t> landed = read_back(at(2), 64 * 512, &status);
  bool rect_ok = status == HSA_STATUS_SUCCESS;
  for (size_t row = 0; rect_ok && row < 64; ++row) {
    for (size_t w = 0; w < 64; ++w) {
      rect_ok = rect_ok && landed[row * 128 + w] == rows[row * 256 + w];
    }
    for (size_t w = 64; w < 128; ++w) {  // between rows: what the engine copy wrote there
      rect_ok = rect_ok && landed[row * 128 + w] == engine_data.words[row * 128 + w];
    }
  }
  check(rect_ok, "copy_rect: every row where it belongs, the bytes between rows untouched");
  hsa_pitched_ptr_t rect_unmapped{at(3) - 512 * 32, 512, 0};  // rows 32.. lie in unmapped space
  hsa_signal_store_screlease(done, 1);
  const uint64_t before_rect = hsa_cuda_copy_violations();
  check(hsa_amd_memory_async_copy_rect(&rect_unmapped, &zero, &rect_src, &zero, &range, gpu0,
                                       hsaHostToDevice, 0, nullptr, done) == HSA_STATUS_SUCCESS &&
            hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, 10000000000ull,
                                      HSA_WAIT_STATE_BLOCKED) == 0 &&
            hsa_cuda_copy_violations() == before_rect + 1 &&
            read_back(at(2), g, &status)[(g - 512 * 32) / 4] == engine_data.words[(g - 512 * 32) / 4],
        "copy_rect running into unmapped memory: one violation, nothing copied, completion "
        "signalled");
  ++expected_violations;
  hsa_signal_destroy(done);
  check(hsa_cuda_copy_violations() == expected_violations,
        "exactly the refused copies above were counted");

  // Clean up; what is left goes at shutdown.
  hsa_amd_vmem_unmap(at(2), g);
  hsa_amd_vmem_handle_release(h2);
  if (two_gpus) hsa_amd_vmem_handle_release(h3);
  check(hsa_amd_vmem_address_free(r, 32 * g) == HSA_STATUS_SUCCESS &&
            hsa_cuda_vmem_mapping_count() == 0 && hsa_cuda_vmem_handle_count() == 0 &&
            hsa_cuda_vmem_reservation_count() == 0,
        "everything unmapped, released and freed");
  if (fake) {
    check(free_bytes(gpu0) == free_before, "the device's free memory is back where it was");
  }
  return refused_by_driver;
}
#endif  // HSA_COMMON_HAVE_VMEM

// hsa_amd_signal_async_handler (the shared signal table's): called once the
// condition holds, with the value it saw, and not again after returning false.
struct HandlerSeen {
  std::atomic<int> calls{0};
  std::atomic<hsa_signal_value_t> value{-1};
};

bool record_handler(hsa_signal_value_t value, void* arg) {
  auto* seen = static_cast<HandlerSeen*>(arg);
  seen->value.store(value);
  seen->calls.fetch_add(1);
  return false;
}

void check_async_handler() {
  std::printf("async handlers\n");
  hsa_signal_t signal{0};
  hsa_signal_create(1, 0, nullptr, &signal);
  static HandlerSeen seen;  // outlives the handler thread's last look at it
  check(hsa_amd_signal_async_handler(signal, HSA_SIGNAL_CONDITION_LT, 1, nullptr, &seen) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            hsa_amd_signal_async_handler(hsa_signal_t{0x99}, HSA_SIGNAL_CONDITION_LT, 1,
                                         record_handler, &seen) ==
                HSA_STATUS_ERROR_INVALID_SIGNAL,
        "async_handler: NULL handler INVALID_ARGUMENT, unknown signal INVALID_SIGNAL");
  check(hsa_amd_signal_async_handler(signal, HSA_SIGNAL_CONDITION_LT, 1, record_handler, &seen) ==
            HSA_STATUS_SUCCESS,
        "async_handler armed");
  usleep(20000);
  check(seen.calls.load() == 0, "not called while the condition does not hold");
  hsa_signal_store_screlease(signal, 0);
  for (int i = 0; i < 500 && seen.calls.load() == 0; ++i) usleep(10000);
  usleep(20000);
  check(seen.calls.load() == 1 && seen.value.load() == 0,
        "called once, with the value that satisfied it");
  hsa_signal_destroy(signal);
}

// The quarantine of freed device blocks never makes an allocation fail: out
// of memory, the runtime gives it back to the driver and tries again. Only
// on the fake driver, whose device is small (FAKE_CUDA_DEVICE_MEMORY_MIB).
void check_quarantine_gives_way() {
  std::printf("out of device memory\n");
  const hsa_agent_t gpu0 = hsa_cuda_gpu_agent(0);
  const hsa_amd_memory_pool_t vram0 = hsa_cuda_pool(gpu0, HSA_CUDA_POOL_DEVICE_COARSE);
  const size_t block = size_t{256} << 20;
  std::vector<void*> blocks;
  void* p = nullptr;
  while (blocks.size() < 1024 && hsa_amd_memory_pool_allocate(vram0, block, 0, &p) ==
                                     HSA_STATUS_SUCCESS) {
    blocks.push_back(p);
  }
  check(hsa_amd_memory_pool_allocate(vram0, block, 0, &p) == HSA_STATUS_ERROR_OUT_OF_RESOURCES,
        "a full device answers OUT_OF_RESOURCES");
  if (blocks.size() < 2) return;
  // Freed, it sits in the runtime's quarantine: still allocated in CUDA.
  hsa_amd_memory_pool_free(blocks.back());
  blocks.pop_back();
  check(hsa_amd_memory_pool_allocate(vram0, block, 0, &p) == HSA_STATUS_SUCCESS,
        "an allocation that fits only once the quarantine is given back succeeds");
  std::vector<uint32_t> words(4096 / 4, 0xC0FFEEu), back(4096 / 4, 0);
  const uint64_t violations = hsa_cuda_copy_violations();
  check(hsa_memory_copy(p, words.data(), 4096) == HSA_STATUS_SUCCESS &&
            hsa_memory_copy(back.data(), p, 4096) == HSA_STATUS_SUCCESS && back == words &&
            hsa_cuda_copy_violations() == violations,
        "the new block is usable (its address is not remembered as freed)");
  blocks.push_back(p);
#if HSA_COMMON_HAVE_VMEM
  hsa_amd_memory_pool_free(blocks.back());
  blocks.pop_back();
  hsa_amd_vmem_alloc_handle_t handle{0};
  check(hsa_amd_vmem_handle_create(vram0, block, MEMORY_TYPE_NONE, 0, &handle) ==
                HSA_STATUS_SUCCESS &&
            hsa_amd_vmem_handle_release(handle) == HSA_STATUS_SUCCESS,
        "handle_create too gets the quarantine back when the device is full");
#endif
  for (void* b : blocks) hsa_amd_memory_pool_free(b);
}

#if HSA_COMMON_HAVE_VMEM
// The fake driver's strictness, which the GPU tests rely on to catch a
// runtime that touches memory it has no access to: a kernel touching a
// mapping its device may not touch ends with CUDA_ERROR_ILLEGAL_ADDRESS.
void check_fake_kernel_access(const char* module_file) {
  std::printf("fake driver: kernels and virtual memory access\n");
  const cuda_driver_t* d = hsa_cuda_driver();
  const hsa_agent_t gpu0 = hsa_cuda_gpu_agent(0);
  const size_t g = hsa_cuda_vmem_granularity(gpu0);
  hsa_executable_t executable{0};
  CUfunction fill = nullptr;
  if (!check(hsa_cuda_executable_load(gpu0, module_file, &executable) == HSA_STATUS_SUCCESS &&
                 hsa_cuda_executable_register_kernel(executable, "fill_pattern", &fill) ==
                     HSA_STATUS_SUCCESS,
             "a module with fill_pattern on GPU 0")) {
    return;
  }
  void* r = nullptr;
  hsa_amd_vmem_alloc_handle_t handle{0};
  hsa_amd_vmem_address_reserve(&r, g, 0, 0);
  hsa_amd_vmem_handle_create(hsa_cuda_pool(gpu0, HSA_CUDA_POOL_DEVICE_COARSE), g,
                             MEMORY_TYPE_NONE, 0, &handle);
  hsa_amd_vmem_map(r, g, 0, handle, 0);
  unsigned long long n = g / 4;
  CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(r);
  unsigned int seed = 77;
  void* params[] = {&ptr, &n, &seed};
  {
    CurrentContext scope(hsa_cuda_agent_context(gpu0));
    check(d->cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr) ==
              CUDA_ERROR_ILLEGAL_ADDRESS,
          "a kernel writing a mapping before set_access: CUDA_ERROR_ILLEGAL_ADDRESS");
  }
  set_access(r, g, gpu0, kReadOnly);
  {
    CurrentContext scope(hsa_cuda_agent_context(gpu0));
    check(d->cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr) ==
              CUDA_ERROR_ILLEGAL_ADDRESS,
          "a kernel writing a read-only mapping: CUDA_ERROR_ILLEGAL_ADDRESS");
  }
  set_access(r, g, gpu0, kReadWrite);
  hsa_status_t status = HSA_STATUS_ERROR;
  {
    CurrentContext scope(hsa_cuda_agent_context(gpu0));
    check(d->cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr) ==
              CUDA_SUCCESS,
          "with read-write access the kernel runs");
  }
  const std::vector<uint32_t> words = read_back(r, g, &status);
  bool filled = status == HSA_STATUS_SUCCESS;
  for (size_t i = 0; filled && i < words.size(); ++i) filled = words[i] == kr_pattern(seed, i);
  check(filled, "and what it wrote is there");
  if (hsa_cuda_gpu_count() > 1) {
    hsa_executable_t other{0};
    CUfunction fill1 = nullptr;
    const hsa_agent_t gpu1 = hsa_cuda_gpu_agent(1);
    if (hsa_cuda_executable_load(gpu1, module_file, &other) == HSA_STATUS_SUCCESS &&
        hsa_cuda_executable_register_kernel(other, "fill_pattern", &fill1) == HSA_STATUS_SUCCESS) {
      CurrentContext scope(hsa_cuda_agent_context(gpu1));
      check(d->cuLaunchKernel(fill1, 4, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr) ==
                CUDA_ERROR_ILLEGAL_ADDRESS,
            "access is per device: GPU 1's kernel may not touch what only GPU 0 may");
    }
    hsa_executable_destroy(other);
  }
  hsa_amd_vmem_unmap(r, g);
  hsa_amd_vmem_handle_release(handle);
  hsa_amd_vmem_address_free(r, g);
  hsa_executable_destroy(executable);
}
#endif

// ---- the library's kernels through AQL ------------------------------------------------------

const CoreApiTable& T() { return *hsa_cuda_core_table(); }

hsa_status_t collect_isa(hsa_isa_t isa, void* data) {
  static_cast<std::vector<hsa_isa_t>*>(data)->push_back(isa);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t collect_executable(hsa_executable_t executable, void* data) {
  static_cast<std::vector<uint64_t>*>(data)->push_back(executable.handle);
  return HSA_STATUS_SUCCESS;
}

struct QueueErrors {
  std::atomic<int> calls{0};
  std::atomic<int> status{0};
};

void on_queue_error(hsa_status_t status, hsa_queue_t* /*queue*/, void* data) {
  auto* seen = static_cast<QueueErrors*>(data);
  seen->status.store(int(status));
  seen->calls.fetch_add(1);
}

// A kernel of the loaded executable: what its dispatch packet needs.
struct Loaded {
  uint64_t object = 0;
  uint32_t kernarg_size = 0;
  uint32_t group_size = 0;
  uint32_t private_size = 0;
};

bool load_kernel(hsa_executable_t executable, hsa_agent_t agent, const char* name,
                 Loaded* out) {
  hsa_executable_symbol_t symbol{0};
  if (T().hsa_executable_get_symbol_by_name_fn(executable, name, &agent, &symbol) !=
      HSA_STATUS_SUCCESS) {
    return false;
  }
  const auto info = [&](hsa_executable_symbol_info_t attribute, void* value) {
    return T().hsa_executable_symbol_get_info_fn(symbol, attribute, value) == HSA_STATUS_SUCCESS;
  };
  return info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &out->object) &&
         info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &out->kernarg_size) &&
         info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &out->group_size) &&
         info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &out->private_size);
}

// Writes a dispatch packet as the library does (body, then the header with
// release order), rings the doorbell and, with `wait`, waits for the
// completion signal (set to 1 first) to fall below 1; false on a timeout.
bool dispatch(hsa_queue_t* queue, const Loaded& kernel, void* kernarg, uint32_t workgroups,
              uint16_t workgroup_size, hsa_signal_t completion, bool wait = true) {
  T().hsa_signal_store_screlease_fn(completion, 1);
  const uint64_t index = T().hsa_queue_add_write_index_scacq_screl_fn(queue, 1);
  while (index - T().hsa_queue_load_read_index_scacquire_fn(queue) >= queue->size) usleep(100);
  auto* packet = static_cast<hsa_kernel_dispatch_packet_t*>(queue->base_address) +
                 index % queue->size;
  hsa_kernel_dispatch_packet_t body{};
  body.workgroup_size_x = workgroup_size;
  body.workgroup_size_y = 1;
  body.workgroup_size_z = 1;
  body.grid_size_x = workgroups * uint32_t(workgroup_size);
  body.grid_size_y = 1;
  body.grid_size_z = 1;
  body.private_segment_size = kernel.private_size;
  body.group_segment_size = kernel.group_size;
  body.kernel_object = kernel.object;
  body.kernarg_address = kernarg;
  body.completion_signal = completion;
  std::memcpy(reinterpret_cast<unsigned char*>(packet) + 4,
              reinterpret_cast<const unsigned char*>(&body) + 4, sizeof(body) - 4);
  const uint32_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                          (1u << HSA_PACKET_HEADER_BARRIER) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE) |
                          (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE);
  const uint32_t setup = 1u << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
  __atomic_store_n(reinterpret_cast<uint32_t*>(packet), header | (setup << 16), __ATOMIC_RELEASE);
  T().hsa_signal_store_screlease_fn(queue->doorbell_signal, hsa_signal_value_t(index));
  if (!wait) return true;
  // 10 s: the fake runs kernels on one host thread.
  return T().hsa_signal_wait_scacquire_fn(completion, HSA_SIGNAL_CONDITION_LT, 1,
                                          uint64_t{10} * 1000 * 1000 * 1000,
                                          HSA_WAIT_STATE_BLOCKED) == 0;
}

// replay_kernels.h's hash of one block on the host: two NH lanes over
// little-endian 32-bit words (zero past len), lane 1's keys shifted.
void reference_hash(const unsigned char* block, size_t len, const std::vector<uint32_t>& keys,
                    uint64_t out[2]) {
  for (uint32_t lane = 0; lane < 2; ++lane) {
    auto word = [&](size_t w) {
      uint32_t m = 0;
      for (size_t b = 0; b < 4; ++b) {
        if (4 * w + b < len) m |= uint32_t(block[4 * w + b]) << (8 * b);
      }
      return m;
    };
    const uint32_t* k = keys.data() + lane * KR_HASH_SHIFT;
    uint64_t sum = 0;
    for (size_t w = 0; w < KR_HASH_WORDS; w += 2) {
      sum += uint64_t(uint32_t(word(w) + k[w])) * uint32_t(word(w + 1) + k[w + 1]);
    }
    out[lane] = sum;
  }
}

std::vector<unsigned char> code_object_bytes(bool fake, bool* found) {
  const char* path = std::getenv("KERNEL_REPLAY_CODE_OBJECT");
  *found = false;
  if (path != nullptr && *path != '\0') {
    std::ifstream file(path, std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(file)),
                                     std::istreambuf_iterator<char>());
    *found = !bytes.empty();
    if (!*found) std::printf("  --   cannot read KERNEL_REPLAY_CODE_OBJECT=%s\n", path);
    return bytes;
  }
  if (!fake) return {};
  // The fake driver takes any image and has the kernels built in.
  *found = true;
  return std::vector<unsigned char>(64, 0x7F);
}

// Allocates from a pool, or NULL.
void* pool_alloc(hsa_amd_memory_pool_t pool, size_t bytes) {
  void* p = nullptr;
  return hsa_amd_memory_pool_allocate(pool, bytes, 0, &p) == HSA_STATUS_SUCCESS ? p : nullptr;
}

// Returns the CUDA calls expected to fail (one refused launch).
uint64_t check_aql(bool fake) {
  std::printf("ISAs, AQL queues and the library's kernels\n");
  const hsa_agent_t cpu = hsa_cuda_cpu_agent();
  const hsa_agent_t gpu0 = hsa_cuda_gpu_agent(0);
  uint64_t expected_errors = 0;

  // ISA.
  std::vector<hsa_isa_t> isas;
  check(T().hsa_agent_iterate_isas_fn(gpu0, collect_isa, &isas) == HSA_STATUS_SUCCESS &&
            isas.size() == 1,
        "hsa_agent_iterate_isas: one ISA for a GPU");
  std::vector<hsa_isa_t> cpu_isas;
  check(T().hsa_agent_iterate_isas_fn(cpu, collect_isa, &cpu_isas) == HSA_STATUS_SUCCESS &&
            cpu_isas.empty() &&
            T().hsa_agent_iterate_isas_fn(hsa_agent_t{0x1234}, collect_isa, &cpu_isas) ==
                HSA_STATUS_ERROR_INVALID_AGENT,
        "none for the CPU; an unknown agent INVALID_AGENT");
  if (!isas.empty()) {
    uint32_t length = 0;
    char name[128] = {};
    const bool named =
        T().hsa_isa_get_info_alt_fn(isas[0], HSA_ISA_INFO_NAME_LENGTH, &length) ==
            HSA_STATUS_SUCCESS &&
        length < sizeof(name) &&
        T().hsa_isa_get_info_alt_fn(isas[0], HSA_ISA_INFO_NAME, name) == HSA_STATUS_SUCCESS;
    std::printf("       ISA: %s\n", name);
    check(named && length == std::strlen(name) + 1 &&
              std::strncmp(name, "nvptx-nvidia-cuda--sm_", 22) == 0 &&
              (!fake || std::strcmp(name, "nvptx-nvidia-cuda--sm_90") == 0),
          "NAME_LENGTH counts the NUL; NAME is nvptx-nvidia-cuda--sm_XY (sm_90 on the fake)");
    hsa_isa_t from_name{0};
    check(T().hsa_isa_from_name_fn(name, &from_name) == HSA_STATUS_SUCCESS &&
              from_name.handle == isas[0].handle &&
              T().hsa_isa_get_info_alt_fn(hsa_isa_t{0x77}, HSA_ISA_INFO_NAME_LENGTH, &length) ==
                  HSA_STATUS_ERROR_INVALID_ISA,
          "hsa_isa_from_name finds it; an unknown ISA is INVALID_ISA");
  }

  // Queue creation.
  hsa_queue_t* queue = nullptr;
  const auto create = [&](hsa_agent_t agent, uint32_t size, hsa_queue_t** out) {
    return T().hsa_queue_create_fn(agent, size, HSA_QUEUE_TYPE_SINGLE, nullptr, nullptr,
                                   UINT32_MAX, UINT32_MAX, out);
  };
  check(create(gpu0, 64, nullptr) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            create(gpu0, 0, &queue) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            create(gpu0, 100, &queue) == HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            T().hsa_queue_create_fn(gpu0, 64, 7, nullptr, nullptr, 0, 0, &queue) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT,
        "queue_create: no out-pointer, size 0 or not a power of two, unknown type: "
        "INVALID_ARGUMENT");
  check(create(cpu, 64, &queue) == HSA_STATUS_ERROR_INVALID_AGENT &&
            create(hsa_agent_t{0x1234}, 64, &queue) == HSA_STATUS_ERROR_INVALID_AGENT &&
            create(gpu0, 1u << 20, &queue) == HSA_STATUS_ERROR_INVALID_QUEUE_CREATION,
        "the CPU or an unknown agent INVALID_AGENT; past QUEUE_MAX_SIZE INVALID_QUEUE_CREATION");
  uint32_t max_size = 0;
  check(hsa_agent_get_info(gpu0, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &max_size) == HSA_STATUS_SUCCESS &&
            max_size == 131072,
        "QUEUE_MAX_SIZE as ROCr's");
  if (check(create(gpu0, 16, &queue) == HSA_STATUS_SUCCESS && queue != nullptr &&
                queue->size == 64 && queue->base_address != nullptr,
            "a queue of 16 packets is raised to QUEUE_MIN_SIZE (64)")) {
    check(T().hsa_queue_add_write_index_scacq_screl_fn(queue, 3) == 0 &&
              T().hsa_queue_load_write_index_relaxed_fn(queue) == 3 &&
              T().hsa_queue_cas_write_index_screlease_fn(queue, 3, 0) == 3 &&
              T().hsa_queue_load_write_index_scacquire_fn(queue) == 0 &&
              T().hsa_queue_load_read_index_scacquire_fn(queue) == 0,
          "write index: add, load, cas as atomics");
    check(T().hsa_queue_destroy_fn(queue) == HSA_STATUS_SUCCESS &&
              T().hsa_queue_destroy_fn(queue) == HSA_STATUS_ERROR_INVALID_QUEUE &&
              T().hsa_queue_destroy_fn(nullptr) == HSA_STATUS_ERROR_INVALID_ARGUMENT,
          "destroy; again INVALID_QUEUE; NULL INVALID_ARGUMENT");
  }

  // The executable.
  bool have_code = false;
  const std::vector<unsigned char> code = code_object_bytes(fake, &have_code);
  if (!have_code) {
    std::printf("  --   no KERNEL_REPLAY_CODE_OBJECT: the dispatch checks are skipped\n");
    return expected_errors;
  }
  hsa_code_object_reader_t reader{0};
  check(T().hsa_code_object_reader_create_from_memory_fn(nullptr, 4, &reader) ==
                HSA_STATUS_ERROR_INVALID_ARGUMENT &&
            T().hsa_code_object_reader_create_from_memory_fn(code.data(), code.size(), &reader) ==
                HSA_STATUS_SUCCESS,
        "code object reader from memory");
  hsa_executable_t executable{0};
  check(T().hsa_executable_create_alt_fn(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                         nullptr, &executable) == HSA_STATUS_SUCCESS,
        "hsa_executable_create_alt");
  const hsa_status_t loaded = T().hsa_executable_load_agent_code_object_fn(
      executable, gpu0, reader, nullptr, nullptr);
  check(loaded == HSA_STATUS_SUCCESS &&
            T().hsa_executable_freeze_fn(executable, nullptr) == HSA_STATUS_SUCCESS &&
            T().hsa_executable_freeze_fn(executable, nullptr) ==
                HSA_STATUS_ERROR_FROZEN_EXECUTABLE &&
            T().hsa_executable_load_agent_code_object_fn(executable, gpu0, reader, nullptr,
                                                         nullptr) ==
                HSA_STATUS_ERROR_FROZEN_EXECUTABLE,
        "load_agent_code_object (cuModuleLoadData), freeze; then frozen");
  check(T().hsa_code_object_reader_destroy_fn(reader) == HSA_STATUS_SUCCESS &&
            T().hsa_code_object_reader_destroy_fn(reader) ==
                HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER,
        "the reader destroyed once the code object is loaded");
  std::vector<uint64_t> listed;
  hsa_cuda_iterate_executables(collect_executable, &listed);
  check(std::find(listed.begin(), listed.end(), executable.handle) != listed.end(),
        "the loader iterator lists the executable");
  Loaded scatter, hash, compare;
  const bool found = load_kernel(executable, gpu0, "kr_scatter_copy.kd", &scatter) &&
                     load_kernel(executable, gpu0, "kr_hash_blocks.kd", &hash) &&
                     load_kernel(executable, gpu0, "kr_compare_copy.kd", &compare);
  hsa_executable_symbol_t missing{0};
  check(found && scatter.object != 0 && scatter.kernarg_size == sizeof(kr_scatter_copy_args) &&
            hash.kernarg_size == sizeof(kr_hash_blocks_args) &&
            compare.kernarg_size == sizeof(kr_compare_copy_args) &&
            hash.group_size >= 2 * KR_WORKGROUP * 8,
        "get_symbol_by_name(name.kd): kernel objects, kernarg sizes of replay_kernels.h, the "
        "hash's shared memory");
  std::printf("       group segments %u / %u / %u, private %u / %u / %u\n", scatter.group_size,
              hash.group_size, compare.group_size, scatter.private_size, hash.private_size,
              compare.private_size);
  check(T().hsa_executable_get_symbol_by_name_fn(executable, "no_such_kernel.kd", &gpu0,
                                                 &missing) == HSA_STATUS_ERROR_INVALID_SYMBOL_NAME,
        "an unknown kernel: INVALID_SYMBOL_NAME");
  if (hsa_cuda_gpu_count() > 1) {
    const hsa_agent_t gpu1 = hsa_cuda_gpu_agent(1);
    check(T().hsa_executable_get_symbol_by_name_fn(executable, "kr_scatter_copy.kd", &gpu1,
                                                   &missing) ==
              HSA_STATUS_ERROR_INVALID_SYMBOL_NAME,
          "loaded for GPU 0, not found for GPU 1");
  }
  if (!found) {
    hsa_executable_destroy(executable);
    return expected_errors;
  }

  // Memory: records and arguments in the kernarg pool, data on the device.
  const hsa_amd_memory_pool_t kernarg_pool = hsa_cuda_pool(cpu, HSA_CUDA_POOL_SYSTEM_KERNARG);
  const hsa_amd_memory_pool_t vram = hsa_cuda_pool(gpu0, HSA_CUDA_POOL_DEVICE_COARSE);
  constexpr size_t kBytes = 64 * 4096;
  auto* args = static_cast<unsigned char*>(pool_alloc(kernarg_pool, 4096));
  auto* records = static_cast<unsigned char*>(pool_alloc(kernarg_pool, 64 * 1024));
  auto* src = static_cast<unsigned char*>(pool_alloc(vram, kBytes));
  auto* dst = static_cast<unsigned char*>(pool_alloc(vram, kBytes));
  auto* keys = static_cast<uint32_t*>(pool_alloc(vram, KR_HASH_KEYS * 4));
  auto* hashes = static_cast<uint64_t*>(pool_alloc(vram, 2 * 64 * 8));
  // Device memory: atomics on mapped host memory are not guaranteed over
  // every host link.
  auto* changed = static_cast<uint64_t*>(pool_alloc(vram, 4096));
  hsa_signal_t done{0};
  hsa_signal_create(1, 0, nullptr, &done);
  QueueErrors errors;
  hsa_queue_t* q = nullptr;
  if (!check(args != nullptr && records != nullptr && src != nullptr && dst != nullptr &&
                 keys != nullptr && hashes != nullptr && changed != nullptr &&
                 T().hsa_queue_create_fn(gpu0, 64, HSA_QUEUE_TYPE_MULTI, on_queue_error, &errors,
                                         UINT32_MAX, UINT32_MAX, &q) == HSA_STATUS_SUCCESS,
             "buffers (kernarg pool, device) and a queue with an error callback")) {
    return expected_errors;
  }
  std::vector<unsigned char> host_src(kBytes), host_zero(kBytes, 0), back(kBytes);
  for (size_t i = 0; i < kBytes; ++i) host_src[i] = static_cast<unsigned char>(kr_pattern(5, i));
  std::vector<uint32_t> host_keys(KR_HASH_KEYS);
  for (size_t i = 0; i < host_keys.size(); ++i) {
    host_keys[i] = uint32_t(kr_pattern(9, i)) << 16 ^ uint32_t(kr_pattern(11, i));
  }
  hsa_memory_copy(src, host_src.data(), kBytes);
  hsa_memory_copy(dst, host_zero.data(), kBytes);
  hsa_memory_copy(keys, host_keys.data(), host_keys.size() * 4);

  // kr_scatter_copy: three records of odd sizes and offsets.
  const kr_copy_record copies[3] = {
      {uint64_t(uintptr_t(dst)), uint64_t(uintptr_t(src)), 4096},
      {uint64_t(uintptr_t(dst + 3 * 4096 + 5)), uint64_t(uintptr_t(src + 7 * 4096 + 1)), 1000},
      {uint64_t(uintptr_t(dst + 8 * 4096)), uint64_t(uintptr_t(src + 8 * 4096)), 40 * 4096}};
  std::memcpy(records, copies, sizeof(copies));
  const kr_scatter_copy_args scatter_args{reinterpret_cast<const kr_copy_record*>(records), 3};
  std::memcpy(args, &scatter_args, sizeof(scatter_args));
  check(dispatch(q, scatter, args, 3, KR_WORKGROUP, done), "kr_scatter_copy dispatched and complete");
  std::vector<unsigned char> expect(kBytes, 0);
  for (const kr_copy_record& r : copies) {
    std::memcpy(expect.data() + (r.dst - uint64_t(uintptr_t(dst))),
                host_src.data() + (r.src - uint64_t(uintptr_t(src))), r.size);
  }
  hsa_memory_copy(back.data(), dst, kBytes);
  check(back == expect, "every record copied, nothing else written");

  // kr_hash_blocks: blocks 0 and 1 of src (one full, one of 100 bytes).
  const kr_hash_block blocks[2] = {{uint64_t(uintptr_t(src)), 4096},
                                   {uint64_t(uintptr_t(src + 4096)), 100}};
  std::memcpy(records, blocks, sizeof(blocks));
  const kr_hash_blocks_args hash_args{reinterpret_cast<const kr_hash_block*>(records), 2, keys,
                                      hashes};
  std::memcpy(args, &hash_args, sizeof(hash_args));
  check(dispatch(q, hash, args, 2, KR_WORKGROUP, done), "kr_hash_blocks dispatched and complete");
  uint64_t device_hashes[4] = {};
  uint64_t expected_hashes[4] = {};
  hsa_memory_copy(device_hashes, hashes, sizeof(device_hashes));
  reference_hash(host_src.data(), 4096, host_keys, expected_hashes);
  reference_hash(host_src.data() + 4096, 100, host_keys, expected_hashes + 2);
  check(std::memcmp(device_hashes, expected_hashes, sizeof(device_hashes)) == 0,
        "both lanes of both blocks equal replay_kernels.h's formula on the host");

  // kr_compare_copy: dst's blocks 0..3 against src's hashes; dst block 0
  // equals src (scattered above), 1..3 differ: three copied.
  kr_block_pair pairs[4];
  for (int i = 0; i < 4; ++i) {
    pairs[i] = {uint64_t(uintptr_t(dst + i * 4096)), uint64_t(uintptr_t(src + i * 4096)), 4096};
  }
  uint64_t want[8];
  for (int i = 0; i < 4; ++i) reference_hash(host_src.data() + i * 4096, 4096, host_keys, want + 2 * i);
  hsa_memory_copy(hashes, want, sizeof(want));
  std::memcpy(records, pairs, sizeof(pairs));
  const uint64_t zero = 0;
  hsa_memory_copy(changed, &zero, sizeof(zero));
  const kr_compare_copy_args compare_args{reinterpret_cast<const kr_block_pair*>(records), 4,
                                          keys, hashes, changed, 0, 0};
  std::memcpy(args, &compare_args, sizeof(compare_args));
  check(dispatch(q, compare, args, 4, KR_WORKGROUP, done),
        "kr_compare_copy dispatched and complete");
  hsa_memory_copy(back.data(), dst, 4 * 4096);
  uint64_t copied = 0;
  hsa_memory_copy(&copied, changed, sizeof(copied));
  check(copied == 3 && std::memcmp(back.data(), host_src.data(), 4 * 4096) == 0,
        "the three changed blocks copied and counted, the equal one left");

  // A barrier-AND packet waits for its dependency.
  hsa_signal_t dependency{0};
  hsa_signal_create(1, 0, nullptr, &dependency);
  T().hsa_signal_store_screlease_fn(done, 1);
  const uint64_t index = T().hsa_queue_add_write_index_scacq_screl_fn(q, 1);
  auto* barrier = reinterpret_cast<hsa_barrier_and_packet_t*>(
      static_cast<unsigned char*>(q->base_address) + (index % q->size) * 64);
  std::memset(reinterpret_cast<unsigned char*>(barrier) + 4, 0, 60);
  barrier->dep_signal[0] = dependency;
  barrier->completion_signal = done;
  __atomic_store_n(reinterpret_cast<uint16_t*>(barrier),
                   uint16_t(HSA_PACKET_TYPE_BARRIER_AND << HSA_PACKET_HEADER_TYPE),
                   __ATOMIC_RELEASE);
  T().hsa_signal_store_screlease_fn(q->doorbell_signal, hsa_signal_value_t(index));
  usleep(50000);
  const bool held = T().hsa_signal_load_scacquire_fn(done) == 1;
  T().hsa_signal_store_screlease_fn(dependency, 0);
  check(held && T().hsa_signal_wait_scacquire_fn(done, HSA_SIGNAL_CONDITION_LT, 1,
                                                 uint64_t{5} * 1000 * 1000 * 1000,
                                                 HSA_WAIT_STATE_BLOCKED) == 0,
        "a barrier-AND packet completes once its dependency reads 0, not before");
  hsa_signal_destroy(dependency);

  // Errors: a launch the driver refuses (2048 work-items per workgroup).
  check(errors.calls.load() == 0, "no error so far");
  dispatch(q, scatter, args, 1, 2048, done, /*wait=*/false);
  for (int i = 0; i < 500 && errors.calls.load() == 0; ++i) usleep(10000);
  usleep(20000);
  expected_errors += 1;
  check(errors.calls.load() == 1 && errors.status.load() == HSA_STATUS_ERROR_OUT_OF_RESOURCES &&
            T().hsa_signal_load_scacquire_fn(done) == 1,
        "a launch the driver refuses: the error callback, once, OUT_OF_RESOURCES; the "
        "completion signal untouched");
  T().hsa_queue_destroy_fn(q);
  // A packet naming no kernel.
  QueueErrors bad;
  if (T().hsa_queue_create_fn(gpu0, 64, HSA_QUEUE_TYPE_MULTI, on_queue_error, &bad, UINT32_MAX,
                              UINT32_MAX, &q) == HSA_STATUS_SUCCESS) {
    Loaded bogus = scatter;
    bogus.object = 0x4242;
    dispatch(q, bogus, args, 1, KR_WORKGROUP, done, /*wait=*/false);
    for (int i = 0; i < 500 && bad.calls.load() == 0; ++i) usleep(10000);
    check(bad.calls.load() == 1 && bad.status.load() == HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
          "a kernel_object naming no kernel: INVALID_PACKET_FORMAT");
    T().hsa_queue_destroy_fn(q);
  }

  hsa_signal_destroy(done);
  for (void* p : {static_cast<void*>(args), static_cast<void*>(records), static_cast<void*>(src),
                  static_cast<void*>(dst), static_cast<void*>(keys), static_cast<void*>(hashes),
                  static_cast<void*>(changed)}) {
    hsa_amd_memory_pool_free(p);
  }
  check(hsa_executable_destroy(executable) == HSA_STATUS_SUCCESS, "the executable destroyed");
  return expected_errors;
}

// Everything above on the driver loaded now; `fake` adds what only the fake
// driver can show.
void check_runtime_on_driver(bool fake, const char* module_file) {
  const uint64_t cuda_errors = hsa_cuda_cuda_error_count();
  uint64_t expected_errors = 0;
#if HSA_COMMON_HAVE_VMEM
  expected_errors += check_vmem(fake);
  if (fake && module_file != nullptr) check_fake_kernel_access(module_file);
#else
  (void)module_file;  // only the vmem checks load a module
  std::printf("virtual memory: not in these (ROCm 5.2) headers\n");
  check(!hsa_cuda_vmem_supported(), "hsa_cuda_vmem_supported is false");
#endif
  check_async_handler();
  expected_errors += check_aql(fake);
  if (fake) check_quarantine_gives_way();
  check(hsa_cuda_cuda_error_count() == cuda_errors + expected_errors,
        "no CUDA call failed inside the runtime but those expected");
}

}  // namespace

int main(int argc, char** argv) {
  const char* fake_driver = nullptr;
  std::vector<std::string> programs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fake-driver") == 0 && i + 1 < argc) {
      fake_driver = argv[++i];
    } else {
      programs.emplace_back(argv[i]);
    }
  }

  std::printf("tables\n");
  CoreApiTable core;
  AmdExtTable amd;
  hsa_cuda_fill_core_table(&core);
  hsa_cuda_fill_amd_ext_table(&amd);
  // Which ROCm generation's tables these are (the headers compiled against).
  std::printf("  CoreApiTable major %u, %u bytes, step %u; AmdExtTable major %u, %u bytes, step %u\n",
              core.version.major_id, core.version.minor_id, core.version.step_id,
              amd.version.major_id, amd.version.minor_id, amd.version.step_id);
  check(core.version.major_id == HSA_CORE_API_TABLE_MAJOR_VERSION &&
            core.version.minor_id == sizeof(CoreApiTable) &&
            core.version.step_id == HSA_CORE_API_TABLE_STEP_VERSION,
        "CoreApiTable version: major, minor = sizeof(table), step");
  check(amd.version.major_id == HSA_AMD_EXT_API_TABLE_MAJOR_VERSION &&
            amd.version.minor_id == sizeof(AmdExtTable) &&
            amd.version.step_id == HSA_AMD_EXT_API_TABLE_STEP_VERSION,
        "AmdExtTable version: major, minor = sizeof(table), step");
  check(hsa_cuda_core_table_size() == sizeof(CoreApiTable) &&
            hsa_cuda_amd_ext_table_size() == sizeof(AmdExtTable),
        "table sizes reported by the runtime");
  check(std::memcmp(hsa_cuda_core_table(), &core, sizeof(core)) == 0 &&
            std::memcmp(hsa_cuda_amd_ext_table(), &amd, sizeof(amd)) == 0,
        "the runtime's own tables equal fresh fills");
  CHECK_ENTRY(core, hsa_memory_allocate_fn);
  CHECK_ENTRY(core, hsa_memory_free_fn);
  CHECK_ENTRY(core, hsa_memory_copy_fn);
  CHECK_ENTRY(core, hsa_executable_iterate_agent_symbols_fn);
  CHECK_ENTRY(core, hsa_executable_symbol_get_info_fn);
  CHECK_ENTRY(core, hsa_iterate_agents_fn);
  CHECK_ENTRY(core, hsa_agent_get_info_fn);
  CHECK_ENTRY(core, hsa_signal_create_fn);
  CHECK_ENTRY(core, hsa_signal_destroy_fn);
  CHECK_ENTRY(core, hsa_signal_load_scacquire_fn);
  CHECK_ENTRY(core, hsa_signal_store_relaxed_fn);
  CHECK_ENTRY(core, hsa_signal_wait_scacquire_fn);
  CHECK_ENTRY(core, hsa_system_get_major_extension_table_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_pool_allocate_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_pool_free_fn);
  CHECK_ENTRY(amd, hsa_amd_pointer_info_fn);
  CHECK_ENTRY(amd, hsa_amd_agent_iterate_memory_pools_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_pool_get_info_fn);
  CHECK_ENTRY(amd, hsa_amd_agent_memory_pool_get_info_fn);
  CHECK_ENTRY(amd, hsa_amd_agents_allow_access_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_async_copy_fn);
  CHECK_ENTRY(amd, hsa_amd_memory_async_copy_rect_fn);
  CHECK_ENTRY(amd, hsa_amd_signal_async_handler_fn);
#if HSA_COMMON_HAVE_VMEM
  // The generations with the vmem API fill it, as ROCr does.
  CHECK_ENTRY(amd, hsa_amd_memory_async_copy_on_engine_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_address_reserve_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_address_free_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_handle_create_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_handle_release_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_map_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_unmap_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_set_access_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_get_access_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_retain_alloc_handle_fn);
  CHECK_ENTRY(amd, hsa_amd_vmem_get_alloc_properties_from_handle_fn);
#endif
#if HSA_COMMON_HAVE_VMEM_RESERVE_ALIGN
  CHECK_ENTRY(amd, hsa_amd_vmem_address_reserve_align_fn);
#endif

  std::printf("kernel-replay over the tables\n");
  CoreApiTable core_copy;
  AmdExtTable amd_copy;
  hsa_cuda_fill_core_table(&core_copy);
  hsa_cuda_fill_amd_ext_table(&amd_copy);
  kr_set_log_level(KR_LOG_ERROR);
  check(kr_memory_tracker_init(&core_copy, &amd_copy, 0) == KR_STATUS_SUCCESS,
        "kr_memory_tracker_init accepts the tables");
  check(core_copy.hsa_memory_allocate_fn != core.hsa_memory_allocate_fn &&
            amd_copy.hsa_amd_memory_pool_allocate_fn != amd.hsa_amd_memory_pool_allocate_fn,
        "its allocation wrappers went in");
  void* ptr = nullptr;
  check(amd_copy.hsa_amd_memory_pool_allocate_fn(hsa_amd_memory_pool_t{1}, 64, 0, &ptr) ==
            HSA_STATUS_ERROR_NOT_INITIALIZED,
        "a wrapped allocation before init chains to the runtime: NOT_INITIALIZED");

  std::printf("before hsa_cuda_init\n");
  check(!hsa_cuda_initialized() && hsa_cuda_gpu_count() == 0, "not initialized, no agents");
  check(core.hsa_memory_allocate_fn(hsa_region_t{1}, 64, &ptr) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_memory_allocate: NOT_INITIALIZED");
  char buffer[64];
  check(core.hsa_memory_copy_fn(buffer, buffer + 32, 16) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_memory_copy: NOT_INITIALIZED");
  check(core.hsa_iterate_agents_fn([](hsa_agent_t, void*) { return HSA_STATUS_SUCCESS; },
                                   nullptr) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_iterate_agents: NOT_INITIALIZED");
  hsa_amd_pointer_info_t info{};
  info.size = sizeof(info);
  check(amd.hsa_amd_pointer_info_fn(buffer, &info, nullptr, nullptr, nullptr) ==
            HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_amd_pointer_info: NOT_INITIALIZED");
  hsa_signal_t signal{0};
  check(core.hsa_signal_create_fn(0, 0, nullptr, &signal) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_signal_create: NOT_INITIALIZED");
  check(hsa_cuda_iterate_executables([](hsa_executable_t, void*) { return HSA_STATUS_SUCCESS; },
                                     nullptr) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_cuda_iterate_executables: NOT_INITIALIZED");
#if HSA_COMMON_HAVE_VMEM
  void* va = nullptr;
  check(amd.hsa_amd_vmem_address_reserve_fn(&va, 4096, 0, 0) == HSA_STATUS_ERROR_NOT_INITIALIZED &&
            amd.hsa_amd_vmem_unmap_fn(buffer, 4096) == HSA_STATUS_ERROR_NOT_INITIALIZED,
        "hsa_amd_vmem_address_reserve, _unmap: NOT_INITIALIZED");
#endif

  std::printf("init without a driver\n");
  setenv("HSA_CUDA_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
  check(hsa_cuda_init() == HSA_CUDA_INIT_NO_DRIVER, "hsa_cuda_init: HSA_CUDA_INIT_NO_DRIVER");
  check(std::strncmp(hsa_cuda_init_message(), "no CUDA driver", 14) == 0 &&
            std::strstr(hsa_cuda_init_message(), "/nonexistent/libcuda.so.1") != nullptr,
        "its message says \"no CUDA driver\" and names the library");
  std::printf("       (%s)\n", hsa_cuda_init_message());
  check(!hsa_cuda_initialized() && hsa_cuda_gpu_count() == 0 &&
            hsa_cuda_cpu_agent().handle == 0,
        "nothing is held after the failed init");
  unsetenv("HSA_CUDA_LIBCUDA");

  if (!programs.empty()) std::printf("programs without a GPU\n");
  for (const std::string& program : programs) {
    check_program("HSA_CUDA_LIBCUDA=/nonexistent/libcuda.so.1", program, "no CUDA driver");
    if (fake_driver != nullptr) {
      check_program(std::string("HSA_CUDA_LIBCUDA='") + fake_driver + "' FAKE_CUDA_DEVICES=0",
                    program, "no CUDA device");
    }
  }

  std::printf("this machine's driver\n");
  const hsa_cuda_init_status_t status = hsa_cuda_init();
  if (status == HSA_CUDA_INIT_OK) {
    const uint32_t gpus = hsa_cuda_gpu_count();
    check(gpus >= 1, "at least one GPU agent");
    check(gpus >= 1 && hsa_cuda_pool(hsa_cuda_gpu_agent(0), HSA_CUDA_POOL_DEVICE_COARSE).handle != 0 &&
              hsa_cuda_agent_context(hsa_cuda_gpu_agent(0)) != nullptr,
          "GPU 0 has a device pool and a context");
    std::printf("       %u GPU agent(s)\n", gpus);
    if (gpus >= 1) check_runtime_on_driver(on_fake_driver(), nullptr);
    hsa_cuda_shutdown();
    check(!hsa_cuda_initialized(), "shut down");
  } else {
    std::printf("  --   no usable CUDA driver here (%s): the GPU checks are the device run's\n",
                hsa_cuda_init_message());
  }

  // The same on the stand-in driver, when there is no real one (a process
  // keeps the first driver it loaded).
  if (fake_driver != nullptr && status != HSA_CUDA_INIT_OK && hsa_cuda_driver() == nullptr) {
    std::printf("the fake driver (%s), two devices\n", fake_driver);
    setenv("HSA_CUDA_LIBCUDA", fake_driver, 1);
    setenv("FAKE_CUDA_DEVICES", "2", 1);
    if (check(hsa_cuda_init() == HSA_CUDA_INIT_OK && hsa_cuda_gpu_count() == 2,
              "hsa_cuda_init on the fake driver: two GPU agents")) {
      // The fake only needs a file to "load" as a module.
      check_runtime_on_driver(true, argv[0]);
      hsa_cuda_shutdown();
      check(!hsa_cuda_initialized() && hsa_cuda_vmem_mapping_count() == 0 &&
                hsa_cuda_vmem_handle_count() == 0 && hsa_cuda_vmem_reservation_count() == 0,
            "shut down, no vmem object left");
    } else {
      std::printf("       (%s)\n", hsa_cuda_init_message());
    }
    unsetenv("HSA_CUDA_LIBCUDA");
    unsetenv("FAKE_CUDA_DEVICES");
  } else if (fake_driver != nullptr && status != HSA_CUDA_INIT_OK) {
    std::printf("  --   a driver that has no device is loaded: the fake driver cannot be\n");
  }

  std::printf("%s: %d failure(s)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}
