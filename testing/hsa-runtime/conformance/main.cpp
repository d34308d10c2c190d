// main.cpp: the conformance suite's runner and the helpers its cases share.
//
//   conformance_host | conformance_cuda [--only TEXT]
//
// Runs every case that holds for the backend it is linked with (the others
// are listed as skipped), then prints the summary. The CUDA backend's cases
// marked kBeforeInit run before the runtime is up; without a driver or a
// device the program then exits 77 (ctest's "skipped"). Exit status 0 means
// every check passed.

#include <fstream>
#include <iterator>

#include "conformance.h"

namespace conformance {

namespace {

struct Case {
  const char* title;
  unsigned flags;
  void (*run)();
};

std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

}  // namespace

bool add(const char* title, unsigned flags, void (*run)()) {
  cases().push_back(Case{title, flags, run});
  return true;
}

bool on_fake_driver() {
  char name[64] = {};
  const auto product = static_cast<hsa_agent_info_t>(HSA_AMD_AGENT_INFO_PRODUCT_NAME);
  return !on_host() &&
         core().hsa_agent_get_info_fn(gpu(0), product, name) == HSA_STATUS_SUCCESS &&
         std::strncmp(name, "Fake CUDA Device", 16) == 0;
}

bool reset(uint32_t gpus, uint32_t needed) {
  hsa_rt_reset(gpus);
  if (hsa_rt_gpu_count() >= needed) return true;
  kr_case_skip("needs %u GPUs, the backend has %u", needed, hsa_rt_gpu_count());
  return false;
}

hsa_rt_pool_kind_t fine_device_kind() {
  return on_host() ? HSA_RT_POOL_DEVICE_FINE : HSA_RT_POOL_DEVICE_COARSE;
}

void* pool_alloc(hsa_amd_memory_pool_t p, size_t size, uint32_t flags) {
  void* ptr = nullptr;
  CHECK_STATUS(amd().hsa_amd_memory_pool_allocate_fn(p, size, flags, &ptr), HSA_STATUS_SUCCESS);
  return ptr;
}

void* device_alloc(size_t size, uint32_t gpu_index) {
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

bool wait_for(hsa_signal_t signal, hsa_signal_value_t value) {
  return core().hsa_signal_wait_scacquire_fn(signal, HSA_SIGNAL_CONDITION_EQ, value,
                                             5000000000ull, HSA_WAIT_STATE_BLOCKED) == value;
}

hsa_status_t count_executable(hsa_executable_t, void* data) {
  ++*static_cast<int*>(data);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t count_symbol(hsa_executable_t, hsa_agent_t, hsa_executable_symbol_t, void* data) {
  ++*static_cast<int*>(data);
  return HSA_STATUS_SUCCESS;
}

uint64_t memory_avail(uint32_t gpu_index) {
  uint64_t bytes = 0;
  CHECK_STATUS(core().hsa_agent_get_info_fn(
                   gpu(gpu_index), static_cast<hsa_agent_info_t>(HSA_RT_AGENT_INFO_MEMORY_AVAIL),
                   &bytes),
               HSA_STATUS_SUCCESS);
  return bytes;
}

namespace {

// cuMemcpy in GPU 0's context (unified addressing: any device, any side).
void driver_copy(void* dst, const void* src, size_t size) {
  const cuda_driver_t* d = hsa_rt_cuda_driver();
  CHECK(d->cuCtxSetCurrent(hsa_rt_cuda_context(gpu(0))) == CUDA_SUCCESS &&
        d->cuMemcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                    size) == CUDA_SUCCESS &&
        d->cuCtxSynchronize() == CUDA_SUCCESS);
}

}  // namespace

void dev_write(void* dst, const void* src, size_t size) {
  if (on_host()) {
    std::memcpy(dst, src, size);
  } else {
    driver_copy(dst, src, size);
  }
}

void dev_read(void* dst, const void* src, size_t size) { dev_write(dst, src, size); }

void dev_fill(void* dst, int byte, size_t size) {
  const std::vector<uint8_t> bytes(size, static_cast<uint8_t>(byte));
  dev_write(dst, bytes.data(), size);
}

uint8_t dev_byte(const void* ptr, size_t offset) {
  uint8_t byte = 0;
  dev_read(&byte, static_cast<const uint8_t*>(ptr) + offset, 1);
  return byte;
}

#if HSA_RT_HAVE_VMEM
hsa_amd_memory_access_desc_t access_desc(hsa_agent_t agent, uint32_t permission) {
  hsa_amd_memory_access_desc_t desc;
  std::memset(&desc, 0, sizeof(desc));
  desc.agent_handle = agent;
  std::memcpy(&desc.permissions, &permission, sizeof(permission));  // may be out of range
  return desc;
}

hsa_status_t set_access(void* va, size_t size, hsa_agent_t agent, uint32_t permission) {
  const hsa_amd_memory_access_desc_t desc = access_desc(agent, permission);
  return amd().hsa_amd_vmem_set_access_fn(va, size, &desc, 1);
}

long long get_access(void* va, hsa_agent_t agent) {
  hsa_access_permission_t permission = HSA_ACCESS_PERMISSION_NONE;
  const hsa_status_t status = amd().hsa_amd_vmem_get_access_fn(va, &permission, agent);
  return status == HSA_STATUS_SUCCESS ? static_cast<long long>(permission)
                                      : -static_cast<long long>(status);
}
#endif

bool find_kernel(hsa_executable_t executable, hsa_agent_t agent, const char* name, Kernel* out) {
  hsa_executable_symbol_t symbol{0};
  if (core().hsa_executable_get_symbol_by_name_fn(executable, name, &agent, &symbol) !=
      HSA_STATUS_SUCCESS) {
    return false;
  }
  const auto info = [&](hsa_executable_symbol_info_t attribute, void* value) {
    return core().hsa_executable_symbol_get_info_fn(symbol, attribute, value) ==
           HSA_STATUS_SUCCESS;
  };
  return info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &out->object) &&
         info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &out->kernarg_size) &&
         info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &out->group_size) &&
         info(HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &out->private_size);
}

std::vector<uint8_t> library_code_object() {
  if (on_host()) return build_code_object(library_kernels());
  const char* path = std::getenv("KERNEL_REPLAY_CODE_OBJECT");
  if (path != nullptr && *path != '\0') {
    std::ifstream file(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(file)),
                                std::istreambuf_iterator<char>());
  }
  // The stand-in driver takes any image: the kernels are built into it.
  return on_fake_driver() ? std::vector<uint8_t>(64, 0x7F) : std::vector<uint8_t>();
}

void reference_hash(const uint8_t* block, size_t len, const uint32_t* keys, uint64_t out[2]) {
  const auto word = [&](size_t w) {
    uint32_t m = 0;
    for (size_t b = 0; b < 4; ++b) {
      if (4 * w + b < len) m |= uint32_t{block[4 * w + b]} << (8 * b);
    }
    return m;
  };
  for (uint32_t lane = 0; lane < 2; ++lane) {
    const uint32_t* k = keys + lane * KR_HASH_SHIFT;
    uint64_t sum = 0;
    for (size_t w = 0; w < KR_HASH_WORDS; w += 2) {
      sum += uint64_t{uint32_t(word(w) + k[w])} * uint32_t(word(w + 1) + k[w + 1]);
    }
    out[lane] = sum;
  }
}

}  // namespace conformance

using namespace conformance;

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* only = argc == 3 && std::strcmp(argv[1], "--only") == 0 ? argv[2] : nullptr;
  const unsigned backend = on_host() ? kHost : kCuda;
  const char* name = on_host() ? "conformance (host)" : "conformance (cuda)";
  const auto run = [&](unsigned when) {
    for (const Case& c : cases()) {
      if ((c.flags & (kBeforeInit | kLast)) != when) continue;
      if (only != nullptr && std::strstr(c.title, only) == nullptr) continue;
      kr_case_begin(c.title);
      if ((c.flags & backend) == 0) {
        kr_case_skip("%s backend only", on_host() ? "the CUDA" : "the host");
      } else {
        c.run();
      }
      kr_case_end();
    }
  };
  run(kBeforeInit);
  const hsa_rt_init_status_t status = hsa_rt_init();
  if (status == HSA_RT_INIT_NO_DRIVER || status == HSA_RT_INIT_NO_DEVICE) {
    std::printf("%s: %s: nothing more to run (exit 77)\n", name, hsa_rt_init_message());
    return 77;
  }
  REQUIRE(status == HSA_RT_INIT_OK);
  run(0);
  run(kLast);
  return kr_case_summary(name);
}
