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

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <hsa/hsa_api_trace.h>

#include "hsa_common.h"
#include "hsa_cuda/hsa_cuda.h"
#include "kernel_replay.h"
#include "pattern.h"

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
