// hsa_common.cpp: the HSA semantics both HSA runtimes share (hsa_common.h),
// compiled into the sim (testing/hsa-runtime/host) and into HSA-on-CUDA (testing/hsa-runtime/cuda).

#include "hsa_common.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace hsa_common {

// ---- handles --------------------------------------------------------------------

namespace {
using SymbolHandleLayout = HandleLayout<16>;
}  // namespace

uint64_t symbol_handle(uint64_t epoch, uint32_t executable_id, size_t index) {
  return SymbolHandleLayout::make(
      HandleTag::kSymbol, epoch,
      ((uint64_t{executable_id} & kSymbolFieldMask) << kSymbolFieldBits) |
          (uint64_t{index} & kSymbolFieldMask));
}

bool decode_symbol_handle(uint64_t handle, uint64_t epoch, uint32_t* executable_id,
                          size_t* index) {
  uint64_t payload = 0;
  if (!SymbolHandleLayout::decode(handle, HandleTag::kSymbol, epoch, &payload)) return false;
  *executable_id = static_cast<uint32_t>(payload >> kSymbolFieldBits);
  *index = static_cast<size_t>(payload & kSymbolFieldMask);
  return true;
}

// ---- writing answers ------------------------------------------------------------

void write_string(void* out, size_t capacity, const char* text, size_t length) {
  auto* chars = static_cast<char*>(out);
  std::memset(chars, 0, capacity);
  std::memcpy(chars, text, std::min(length, capacity - 1));
}

// ---- runtime-level queries --------------------------------------------------------

namespace {

// The codes only a loader of code objects and a queue produce, worded as
// ROCr's hsa_status_string words them.
const char* loader_and_queue_status_text(hsa_status_t status) {
  switch (static_cast<uint32_t>(status)) {
    case HSA_STATUS_ERROR_INVALID_CODE_OBJECT:
      return "HSA_STATUS_ERROR_INVALID_CODE_OBJECT: The code object is invalid.";
    case HSA_STATUS_ERROR_INVALID_SYMBOL_NAME:
      return "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: There is no symbol with the given name.";
    case HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER:
      return "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: The code object reader is invalid.";
    case HSA_STATUS_ERROR_FROZEN_EXECUTABLE:
      return "HSA_STATUS_ERROR_FROZEN_EXECUTABLE: The executable is frozen.";
    case HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS:
      return "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: The arguments passed to a functions are "
             "not compatible.";
    case HSA_STATUS_ERROR_INVALID_ISA:
      return "HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid.";
    case HSA_STATUS_ERROR_INVALID_QUEUE:
      return "HSA_STATUS_ERROR_INVALID_QUEUE: The queue is invalid.";
    case HSA_STATUS_ERROR_INVALID_QUEUE_CREATION:
      return "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: The queue cannot be created because of "
             "the arguments.";
    case HSA_STATUS_ERROR_INVALID_PACKET_FORMAT:
      return "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: The AQL packet is malformed.";
    case HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION:
      return "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The kernel accessed memory beyond "
             "its aperture.";
    default:
      return nullptr;
  }
}

}  // namespace

const char* status_text(hsa_status_t status, StatusCodes codes) {
  switch (static_cast<uint32_t>(status)) {
    case HSA_STATUS_SUCCESS:
      return "HSA_STATUS_SUCCESS: The function has been executed successfully.";
    case HSA_STATUS_INFO_BREAK:
      return "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted.";
    case HSA_STATUS_ERROR:
      return "HSA_STATUS_ERROR: A generic error has occurred.";
    case HSA_STATUS_ERROR_INVALID_ARGUMENT:
      return "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a "
             "precondition stated in the documentation of the corresponding formal argument.";
    case HSA_STATUS_ERROR_INVALID_ALLOCATION:
      return "HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid.";
    case HSA_STATUS_ERROR_INVALID_AGENT:
      return "HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid.";
    case HSA_STATUS_ERROR_INVALID_REGION:
      return "HSA_STATUS_ERROR_INVALID_REGION: The memory region is invalid.";
    case HSA_STATUS_ERROR_INVALID_SIGNAL:
      return "HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid.";
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
      return "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary "
             "resources.";
    case HSA_STATUS_ERROR_RESOURCE_FREE:
      // hsa_amd_vmem_address_free of a range still mapped (the sim).
      return "HSA_STATUS_ERROR_RESOURCE_FREE: An error has been detected while releasing a "
             "resource.";
    case HSA_STATUS_ERROR_NOT_INITIALIZED:
      return "HSA_STATUS_ERROR_NOT_INITIALIZED: The HSA runtime is not initialized.";
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE:
      return "HSA_STATUS_ERROR_INVALID_EXECUTABLE: The executable is invalid.";
    case HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL:
      return "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: The executable symbol is invalid.";
    case HSA_STATUS_ERROR_INVALID_MEMORY_POOL:
      return "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid.";
    default:
      return codes == StatusCodes::kCoreAndCodeObject ? loader_and_queue_status_text(status)
                                                      : nullptr;
  }
}

hsa_status_t loader_extension_table(uint16_t extension, uint16_t version_major, size_t length,
                                    void* table, IterateExecutablesFn iterate) {
  if (table == nullptr || length == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  if (extension != HSA_EXTENSION_AMD_LOADER || version_major != 1) return HSA_STATUS_ERROR;
  hsa_ven_amd_loader_1_03_pfn_t loader;
  std::memset(&loader, 0, sizeof(loader));
  loader.hsa_ven_amd_loader_iterate_executables = iterate;
  std::memcpy(table, &loader, std::min(length, sizeof(loader)));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t system_get_info(hsa_system_info_t attribute, void* value) {
  if (value == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attribute) {
    case HSA_SYSTEM_INFO_VERSION_MAJOR:
    case HSA_SYSTEM_INFO_VERSION_MINOR:
      write_value(value, uint16_t{1});
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_TIMESTAMP: {
      const auto now = std::chrono::steady_clock::now().time_since_epoch();
      write_value(value, static_cast<uint64_t>(
                             std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
      return HSA_STATUS_SUCCESS;
    }
    case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
      write_value(value, kTimestampFrequencyHz);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
      write_value(value, UINT64_MAX);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_ENDIANNESS:
      write_value(value, HSA_ENDIANNESS_LITTLE);
      return HSA_STATUS_SUCCESS;
    case HSA_SYSTEM_INFO_MACHINE_MODEL:
      write_value(value, HSA_MACHINE_MODEL_LARGE);
      return HSA_STATUS_SUCCESS;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

namespace {

bool write_agent_attribute(uint32_t index, const AgentDescription& agent, uint32_t attribute,
                           void* value) {
  const bool gpu = is_gpu_index(index);
  switch (attribute) {
    case HSA_AGENT_INFO_NAME:
      write_string(value, 64, agent.name);
      return true;
    case HSA_AGENT_INFO_VENDOR_NAME:
      write_string(value, 64, agent.vendor_name);
      return true;
    case HSA_AGENT_INFO_FEATURE:
      write_value(value, gpu ? HSA_AGENT_FEATURE_KERNEL_DISPATCH : hsa_agent_feature_t{});
      return true;
    case HSA_AGENT_INFO_MACHINE_MODEL:
      write_value(value, HSA_MACHINE_MODEL_LARGE);
      return true;
    case HSA_AGENT_INFO_PROFILE:
      write_value(value, gpu ? HSA_PROFILE_BASE : HSA_PROFILE_FULL);
      return true;
    case HSA_AGENT_INFO_WAVEFRONT_SIZE:
      write_value(value, agent.wavefront_size);
      return true;
    case HSA_AGENT_INFO_QUEUES_MAX:
      write_value(value, agent.queues_max);
      return true;
    case HSA_AGENT_INFO_NODE:
      write_value(value, index);
      return true;
    case HSA_AGENT_INFO_DEVICE:
      write_value(value, gpu ? HSA_DEVICE_TYPE_GPU : HSA_DEVICE_TYPE_CPU);
      return true;
    case HSA_AGENT_INFO_VERSION_MAJOR:
    case HSA_AGENT_INFO_VERSION_MINOR:
      write_value(value, uint16_t{1});
      return true;
    case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID:
      write_value(value, index);
      return true;
    case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT:
      write_value(value, agent.compute_unit_count);
      return true;
    case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
      write_string(value, 64, agent.product_name);
      return true;
    case HSA_AMD_AGENT_INFO_UUID:
      if (!agent.has_uuid) return false;
      write_string(value, 21, agent.uuid);
      return true;
    default:
      return false;
  }
}

}  // namespace

hsa_status_t write_agent_info(uint32_t index, const AgentDescription& agent, uint32_t attribute,
                              void* value) {
  return write_agent_attribute(index, agent, attribute, value) ? HSA_STATUS_SUCCESS
                                                               : HSA_STATUS_ERROR_INVALID_ARGUMENT;
}

// ---- executables ------------------------------------------------------------------

hsa_status_t write_symbol_info(const SymbolRecord& symbol, hsa_agent_t agent, uint32_t attribute,
                               void* value) {
  const bool variable = symbol.kind == HSA_SYMBOL_KIND_VARIABLE;
  const bool kernel = symbol.kind == HSA_SYMBOL_KIND_KERNEL;
  constexpr hsa_status_t kOk = HSA_STATUS_SUCCESS;
  constexpr hsa_status_t kNotForKind = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  switch (attribute) {
    case HSA_EXECUTABLE_SYMBOL_INFO_TYPE:
      write_value(value, symbol.kind);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH:
      write_value(value, static_cast<uint32_t>(symbol.name.size()));
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_NAME:
      // NAME_LENGTH bytes, not NUL-terminated, as ROCr writes it.
      std::memcpy(value, symbol.name.data(), symbol.name.size());
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME_LENGTH:
      write_value(value, uint32_t{0});
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_MODULE_NAME:
      return kOk;  // zero bytes
    case HSA_EXECUTABLE_SYMBOL_INFO_AGENT:
      write_value(value, agent);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_LINKAGE:
      write_value(value, HSA_SYMBOL_LINKAGE_PROGRAM);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_IS_DEFINITION:
      write_value(value, true);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS:
      if (!variable) return kNotForKind;
      write_value(value, symbol.address);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE:
      if (!variable) return kNotForKind;
      write_value(value, symbol.size);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST:
      if (!variable) return kNotForKind;
      write_value(value, symbol.is_constant);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALLOCATION:
      if (!variable) return kNotForKind;
      write_value(value, HSA_VARIABLE_ALLOCATION_AGENT);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT:
      if (!variable) return kNotForKind;
      write_value(value, symbol.is_constant ? HSA_VARIABLE_SEGMENT_READONLY
                                            : HSA_VARIABLE_SEGMENT_GLOBAL);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ALIGNMENT:
      if (!variable) return kNotForKind;
      write_value(value, uint32_t{16});
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT:
      if (!kernel) return kNotForKind;
      write_value(value, symbol.address);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE:
      if (!kernel) return kNotForKind;
      write_value(value, symbol.kernarg_segment_size);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE:
      if (!kernel) return kNotForKind;
      write_value(value, symbol.group_segment_size);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE:
      if (!kernel) return kNotForKind;
      write_value(value, symbol.private_segment_size);
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT:
      if (!kernel) return kNotForKind;
      write_value(value, uint32_t{16});
      return kOk;
    case HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK:
      if (!kernel) return kNotForKind;
      write_value(value, false);
      return kOk;
    default:
      return kNotForKind;
  }
}

// ---- pools and regions --------------------------------------------------------------

namespace {

// Attributes regions and pools share: hsa_amd_memory_pool_info_t reuses the
// hsa_region_info_t values, and HSA_AMD_SEGMENT_GLOBAL equals
// HSA_REGION_SEGMENT_GLOBAL (both 0, both 4-byte enums).
bool write_common_pool_info(const PoolDescription& pool, uint32_t attribute, void* value) {
  switch (attribute) {
    case HSA_REGION_INFO_SEGMENT:
      write_value(value, HSA_REGION_SEGMENT_GLOBAL);
      return true;
    case HSA_REGION_INFO_GLOBAL_FLAGS:
      write_value(value, pool.global_flags);
      return true;
    case HSA_REGION_INFO_SIZE:
      write_value(value, pool.size);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED:
      write_value(value, true);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE:
      write_value(value, pool.granule);
      return true;
    case HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT:
      write_value(value, pool.alignment);
      return true;
    default:
      return false;
  }
}

hsa_amd_memory_pool_access_t pool_access(uint32_t agent_index, uint32_t pool_agent_index,
                                         bool device_pool) {
  if (agent_index == pool_agent_index || (!device_pool && !is_gpu_index(agent_index))) {
    return HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
  }
  return HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
}

hsa_amd_memory_pool_link_info_t link_info(uint32_t agent_index, uint32_t pool_agent_index) {
  hsa_amd_memory_pool_link_info_t info{};
  const bool gpu_to_gpu = is_gpu_index(agent_index) && is_gpu_index(pool_agent_index);
  info.atomic_support_32bit = true;
  info.atomic_support_64bit = true;
  info.coherent_support = !gpu_to_gpu;
  // XGMI between GPUs (HSA-on-CUDA: NVLink has no enumerator of its own; XGMI
  // is its AMD counterpart), PCIe between a GPU and the CPU.
  info.link_type = gpu_to_gpu ? HSA_AMD_LINK_INFO_TYPE_XGMI : HSA_AMD_LINK_INFO_TYPE_PCIE;
  info.numa_distance = 20;
  return info;
}

}  // namespace

hsa_status_t write_region_info(const PoolDescription& pool, uint32_t attribute, void* value) {
  constexpr hsa_status_t kOk = HSA_STATUS_SUCCESS;
  if (write_common_pool_info(pool, attribute, value)) return kOk;
  switch (attribute) {
    case HSA_REGION_INFO_ALLOC_MAX_SIZE:
      write_value(value, pool.size);
      return kOk;
    case HSA_AMD_REGION_INFO_HOST_ACCESSIBLE:
      // Only system memory is host accessible on a discrete GPU.
      write_value(value, !pool.device);
      return kOk;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t write_memory_pool_info(const PoolDescription& pool, uint32_t attribute, void* value) {
  constexpr hsa_status_t kOk = HSA_STATUS_SUCCESS;
  if (write_common_pool_info(pool, attribute, value)) return kOk;
  switch (attribute) {
    case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL:
      // ROCr: true exactly for system memory.
      write_value(value, !pool.device);
      return kOk;
    case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE:
      write_value(value, pool.size);
      return kOk;
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

hsa_status_t write_agent_memory_pool_info(uint32_t agent_index, uint32_t pool_agent_index,
                                          bool device_pool, uint32_t attribute, void* value) {
  constexpr hsa_status_t kOk = HSA_STATUS_SUCCESS;
  const bool owner = agent_index == pool_agent_index;
  switch (attribute) {
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS:
      write_value(value, pool_access(agent_index, pool_agent_index, device_pool));
      return kOk;
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS:
      // One direct link between any two agents; zero hops to one's own pool.
      write_value(value, owner ? uint32_t{0} : uint32_t{1});
      return kOk;
    case HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO: {
      // One entry per hop; ROCr writes a zeroed entry for an agent's own pool.
      const hsa_amd_memory_pool_link_info_t info =
          owner ? hsa_amd_memory_pool_link_info_t{} : link_info(agent_index, pool_agent_index);
      write_value(value, info);
      return kOk;
    }
    default:
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
}

bool round_up(size_t size, size_t granule, size_t* rounded) {
  if (size > std::numeric_limits<size_t>::max() - (granule - 1)) return false;
  *rounded = (size + granule - 1) / granule * granule;
  return true;
}

// ---- access ---------------------------------------------------------------------------

std::vector<uint32_t> initial_accessible_agents(uint32_t owner, bool device_pool,
                                                bool from_region, uint32_t gpu_count) {
  std::vector<uint32_t> agents{owner};
  if (!device_pool && from_region) {
    for (uint32_t gpu = 1; gpu <= gpu_count; ++gpu) agents.push_back(gpu);
  }
  return agents;
}

// ---- pointer info ------------------------------------------------------------------------

bool pointer_info_arguments_valid(const void* ptr, const hsa_amd_pointer_info_t* info) {
  return ptr != nullptr && info != nullptr && info->size != 0;
}

hsa_amd_pointer_info_t pointer_info_answer(const hsa_amd_pointer_info_t& caller) {
  hsa_amd_pointer_info_t answer{};
  answer.size = static_cast<uint32_t>(std::min<size_t>(caller.size, sizeof(answer)));
  answer.type = HSA_EXT_POINTER_TYPE_UNKNOWN;
  return answer;
}

hsa_status_t deliver_pointer_info(const hsa_amd_pointer_info_t& answer,
                                  const std::vector<hsa_agent_t>& agents,
                                  hsa_amd_pointer_info_t* info, void* (*alloc)(size_t),
                                  uint32_t* num_agents_accessible, hsa_agent_t** accessible) {
  std::memcpy(info, &answer, answer.size);
  if (answer.type == HSA_EXT_POINTER_TYPE_UNKNOWN) return HSA_STATUS_SUCCESS;
  if (alloc != nullptr && num_agents_accessible != nullptr && accessible != nullptr) {
    auto* list = static_cast<hsa_agent_t*>(alloc(agents.size() * sizeof(hsa_agent_t)));
    if (list == nullptr) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    std::copy(agents.begin(), agents.end(), list);
    *accessible = list;
    *num_agents_accessible = static_cast<uint32_t>(agents.size());
  }
  return HSA_STATUS_SUCCESS;
}

// ---- copies ----------------------------------------------------------------------------------

uint32_t direction_index(Side src, Side dst) {
  if (src == Side::kDevice) return dst == Side::kDevice ? 3 : 2;
  return dst == Side::kDevice ? 1 : 0;
}

}  // namespace hsa_common
