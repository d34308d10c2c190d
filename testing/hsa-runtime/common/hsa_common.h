/* hsa_common.h: the HSA semantics both HSA runtimes of this repository share.
 *
 * Used by the software runtime every test runs on (testing/hsa-runtime/host, "the sim")
 * and by HSA-on-CUDA (testing/hsa-runtime/cuda). Both follow ROCr's documented behaviour
 * with the same status codes; what is the same in both lives here: handle
 * encoding, attribute writing with exact widths, status strings, system and
 * agent queries, symbol attributes, pool/region attributes and access,
 * pointer-info answers, copy classification helpers and callback walks. Each
 * runtime keeps only what is specific to its backend (host memory and the
 * quarantine for the sim; CUDA for HSA-on-CUDA) and passes in, as parameters,
 * whatever differs between the two (see the notes at each declaration).
 *
 * Nothing here holds state, so it needs no locking; the callers hold their
 * own locks where their data needs them. Signals: hsa_common_signals.h;
 * tables: hsa_common_tables.h; application trampolines: hsa_common_app.h.
 */
#ifndef HSA_COMMON_H
#define HSA_COMMON_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <hsa/hsa_ven_amd_loader.h>

// ---- what the HSA headers being compiled against declare --------------------------
//
// Both runtimes build against every ROCm generation the project supports
// (5.2, 6.1, 6.4, 7.2 headers). What a generation has is told by
// HSA_AMD_INTERFACE_VERSION_MAJOR/MINOR of hsa_ext_amd.h, whose history the
// 7.2 header lists (1.2 async_copy_on_engine, 1.4 the virtual memory API,
// 1.6 vmem_address_reserve_align, 1.7 signal_wait_all, 1.12
// HSA_EXT_POINTER_TYPE_HSA_VMEM / RESERVED_ADDR, 1.13 pointer_info's
// `registered`). The ROCm releases: 5.2 = 1.0, 6.0/6.1 = 1.4, 6.2 = 1.6, 6.3
// (amd-staging, 2024-10) still 1.6, 6.4 = 1.7, 7.2 = 1.15.

// ROCm 6.0: the vmem API (hsa_amd_vmem_*, AmdExtTable entries 456..544) and
// hsa_amd_memory_async_copy_on_engine. Not in the 5.2 headers.
#define HSA_COMMON_HAVE_VMEM \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > 1 || HSA_AMD_INTERFACE_VERSION_MINOR >= 4)

// ROCm 6.2 (interface 1.6): hsa_amd_vmem_address_reserve_align and its
// AmdExtTable entry (hsa_amd_vmem_address_reserve_align_fn).
#define HSA_COMMON_HAVE_VMEM_RESERVE_ALIGN \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > 1 || HSA_AMD_INTERFACE_VERSION_MINOR >= 6)

// Interface 1.12 (ROCm 7.x): the HSA_EXT_POINTER_TYPE_HSA_VMEM pointer type,
// and hsa_amd_pointer_info answering for a vmem mapping with it (base = the
// queried pointer, size = the mapping's, owner = the handle's GPU) instead of
// passing the thunk's reservation object through as type 5.
#define HSA_COMMON_HAVE_POINTER_TYPE_HSA_VMEM \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > 1 || HSA_AMD_INTERFACE_VERSION_MINOR >= 12)

// Interface 1.13 (ROCm 7.x): hsa_amd_pointer_info_t.registered.
#define HSA_COMMON_HAVE_POINTER_INFO_REGISTERED \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > 1 || HSA_AMD_INTERFACE_VERSION_MINOR >= 13)

// hsa_amd_vmem_set_access / get_access semantics, per generation:
//   0 (ROCm 6.0 - 6.2 headers, interface <= 1.6): the header's contract
//     ("size must be equal to size of previously mapped virtual memory
//     handle"; a second call "will overwrite previous permissions for all
//     agents"): (va, size) must be exactly one mapping, and the agents not
//     listed lose their access (replace); get_access for an agent never given
//     access is INVALID_ALLOCATION. That is what ROCr 6.0.0's code does.
//   1 (ROCm 6.4 and later headers, interface >= 1.7): "will leave
//     permissions unchanged for agents not specified" (ROCr commit 73f6bfa7,
//     2024-09, released in 6.3): the range may span contiguous mappings, each
//     found by its exact start, listed agents get the new permission and the
//     others keep theirs (merge); get_access answers NONE for an agent never
//     given access.
// The boundary is interface 1.7 because that is the first one the merge
// semantics can be told by: ROCm 6.2 and 6.3 headers both say 1.6, so a 6.3
// build gets the 6.0-6.2 rules although 6.3's runtime merges. (ROCr's 6.1.0 -
// 6.2.4 code already walks spanning ranges and answers NONE; the sim follows
// what those generations' headers document.)
#define HSA_COMMON_VMEM_SET_ACCESS_MERGES \
  (HSA_AMD_INTERFACE_VERSION_MAJOR > 1 || HSA_AMD_INTERFACE_VERSION_MINOR >= 7)

namespace hsa_common {

// ---- constants ------------------------------------------------------------------

// Agent index 0 is the CPU, 1..gpu_count the GPUs (index = HSA_AGENT_INFO_NODE).
constexpr uint32_t kCpuAgentIndex = 0;
inline bool is_gpu_index(uint32_t index) { return index != kCpuAgentIndex; }

// The system timestamp runs at 1 GHz, so a timeout hint is in nanoseconds.
constexpr uint64_t kTimestampFrequencyHz = 1000000000;

// HSA_AMD_AGENT_INFO_MEMORY_AVAIL (uint64_t), added to hsa_ext_amd.h after
// ROCm 5.2, so not in every header this builds against. Each runtime answers
// it its own way.
constexpr uint32_t kAgentInfoMemoryAvail = 0xA015;

// HSA_EXT_POINTER_TYPE_RESERVED_ADDR: what hsa_amd_pointer_info reports for
// an address in a vmem reservation. ROCr 6.x passes the thunk's
// HSA_POINTER_RESERVED_ADDR (5) through for mapped and unmapped addresses
// alike; the 6.0 - 6.3 headers do not name the value (6.4 does), 7.x reports
// it for reserved but unmapped addresses only.
constexpr auto kPointerTypeReservedAddr = static_cast<hsa_amd_pointer_type_t>(5);

// HSA_STATUS_ERROR_INVALID_MEMORY_POOL lives in an anonymous enum of
// hsa_ext_amd.h, so it needs a cast to be returned as an hsa_status_t.
constexpr auto kInvalidMemoryPool =
    static_cast<hsa_status_t>(HSA_STATUS_ERROR_INVALID_MEMORY_POOL);

// ---- handles --------------------------------------------------------------------

// Every handle a runtime hands out carries its kind in the top byte, so a
// handle of one kind never validates as another.
enum class HandleTag : uint8_t {
  kAgent = 0xA6,
  kPool = 0xB7,  // also the hsa_region_t of the same memory, as in ROCr
  kExecutable = 0xC8,
  kSymbol = 0xD9,
  kSignal = 0xE5,
  kVmemHandle = 0xF6,        // hsa_amd_vmem_alloc_handle_t
  kIsa = 0x97,               // hsa_isa_t (the sim)
  kCodeObjectReader = 0x86,  // hsa_code_object_reader_t (the sim)
  kLoadedCodeObject = 0x75,  // hsa_loaded_code_object_t (the sim)
};

// tag:8 | epoch:EpochBits | payload:(56 - EpochBits). The epoch (the sim's
// reset count, HSA-on-CUDA's init count) makes handles from before a reset or
// a shutdown unknown after it. The width differs: the sim uses 24 epoch bits
// and 32-bit payloads, HSA-on-CUDA 16 and 40.
template <unsigned EpochBits>
struct HandleLayout {
  static_assert(EpochBits > 0 && EpochBits < 56, "the payload needs bits too");
  static constexpr unsigned kPayloadBits = 56 - EpochBits;
  static constexpr uint64_t kEpochMask = (uint64_t{1} << EpochBits) - 1;
  static constexpr uint64_t kPayloadMask = (uint64_t{1} << kPayloadBits) - 1;

  static uint64_t make(HandleTag tag, uint64_t epoch, uint64_t payload) {
    return (uint64_t{static_cast<uint8_t>(tag)} << 56) | ((epoch & kEpochMask) << kPayloadBits) |
           (payload & kPayloadMask);
  }

  static bool decode(uint64_t handle, HandleTag tag, uint64_t epoch, uint64_t* payload) {
    if ((handle >> 56) != static_cast<uint8_t>(tag)) return false;
    if (((handle >> kPayloadBits) & kEpochMask) != (epoch & kEpochMask)) return false;
    *payload = handle & kPayloadMask;
    return true;
  }
};

// Executable symbols, in both runtimes: tag:8 | epoch:16 | executable id:20 |
// symbol index:20 (an executable holds fewer than kSymbolFieldMask symbols).
constexpr unsigned kSymbolFieldBits = 20;
constexpr uint64_t kSymbolFieldMask = (uint64_t{1} << kSymbolFieldBits) - 1;
uint64_t symbol_handle(uint64_t epoch, uint32_t executable_id, size_t index);
bool decode_symbol_handle(uint64_t handle, uint64_t epoch, uint32_t* executable_id,
                          size_t* index);

// ---- writing answers ------------------------------------------------------------

// Writes an attribute value with exactly its documented width (the caller's
// buffer may be unaligned and no larger than the attribute).
template <typename T>
inline void write_value(void* out, const T& value) {
  std::memcpy(out, &value, sizeof(T));
}

// Writes a string attribute into a fixed char[capacity], NUL-padded and
// truncated to capacity - 1 characters.
void write_string(void* out, size_t capacity, const char* text, size_t length);
inline void write_string(void* out, size_t capacity, const char* text) {
  write_string(out, capacity, text, std::strlen(text));
}
inline void write_string(void* out, size_t capacity, const std::string& text) {
  write_string(out, capacity, text.data(), text.size());
}

// Calls call(item) for every item in order; the first status other than
// HSA_STATUS_SUCCESS stops the walk and is returned. The callers collect the
// items under their lock and walk them without it, so that a user callback
// may call back into the runtime.
template <typename Item, typename Call>
hsa_status_t call_each(const std::vector<Item>& items, Call call) {
  for (const Item& item : items) {
    const hsa_status_t status = call(item);
    if (status != HSA_STATUS_SUCCESS) return status;
  }
  return HSA_STATUS_SUCCESS;
}

// ---- runtime-level queries --------------------------------------------------------

// The status codes a runtime has a string for. Both know the core and memory
// codes; kCoreAndCodeObject adds those a loader of code objects and a queue
// produce (INVALID_CODE_OBJECT, INVALID_SYMBOL_NAME, INVALID_CODE_OBJECT_READER,
// FROZEN_EXECUTABLE, INCOMPATIBLE_ARGUMENTS, INVALID_ISA, INVALID_QUEUE,
// INVALID_QUEUE_CREATION, INVALID_PACKET_FORMAT, MEMORY_APERTURE_VIOLATION).
// Both runtimes now load code objects (HSA-on-CUDA CUDA modules, the sim
// AMDGPU ELF); kCore answers INVALID_ARGUMENT for those codes.
enum class StatusCodes { kCore, kCoreAndCodeObject };

// The "NAME: description" text of a status; NULL when `codes` lacks it.
const char* status_text(hsa_status_t status, StatusCodes codes);

// hsa_status_string.
template <StatusCodes Codes>
hsa_status_t status_string(hsa_status_t status, const char** status_string) {
  if (status_string == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  const char* text = status_text(status, Codes);
  if (text == nullptr) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  *status_string = text;
  return HSA_STATUS_SUCCESS;
}

// hsa_system_get_info: version 1.1, a 1 GHz steady timestamp, unbounded
// signal waits, little endian, large model. Answered before initialisation.
hsa_status_t system_get_info(hsa_system_info_t attribute, void* value);

// hsa_ven_amd_loader_iterate_executables' shape.
using IterateExecutablesFn = hsa_status_t (*)(hsa_status_t (*)(hsa_executable_t, void*), void*);

// hsa_system_get_major_extension_table as ROCr answers it for the AMD loader
// extension: a NULL table or a length of 0 is INVALID_ARGUMENT; another
// extension, or a major version other than 1, is HSA_STATUS_ERROR; otherwise
// the loader's table (version 1.03) is copied, its first min(length, size)
// bytes, and bytes past it are left alone. Of the loader's entries only the
// executable iterator (`iterate`) is filled; the others are NULL. (The
// caller checks that the runtime is initialized.)
hsa_status_t loader_extension_table(uint16_t extension, uint16_t version_major, size_t length,
                                    void* table, IterateExecutablesFn iterate);

// What a runtime says about one of its agents in hsa_agent_get_info beyond
// what both say alike (see write_agent_info).
struct AgentDescription {
  std::string name;          // HSA_AGENT_INFO_NAME, char[64]
  std::string vendor_name;   // HSA_AGENT_INFO_VENDOR_NAME, char[64]
  std::string product_name;  // HSA_AMD_AGENT_INFO_PRODUCT_NAME, char[64]
  uint32_t wavefront_size = 0;
  uint32_t queues_max = 0;
  uint32_t compute_unit_count = 0;
  // HSA_AMD_AGENT_INFO_UUID, char[21]: the sim answers it; HSA-on-CUDA does
  // not (INVALID_ARGUMENT).
  bool has_uuid = false;
  std::string uuid;
};

// Answers one agent attribute: from `agent`, or, for FEATURE, MACHINE_MODEL,
// PROFILE, NODE, DEVICE, VERSION_MAJOR/MINOR and DRIVER_NODE_ID, as both
// runtimes answer them for a CPU (index 0) or a GPU.
// HSA_STATUS_ERROR_INVALID_ARGUMENT for an attribute it does not know
// (kAgentInfoMemoryAvail included: each runtime answers that one itself).
hsa_status_t write_agent_info(uint32_t index, const AgentDescription& agent, uint32_t attribute,
                              void* value);

// ---- executables ------------------------------------------------------------------

// What hsa_executable_symbol_get_info reports about a symbol.
struct SymbolRecord {
  hsa_symbol_kind_t kind = HSA_SYMBOL_KIND_VARIABLE;
  std::string name;
  uint64_t address = 0;  // variable address, or the kernel object
  uint32_t size = 0;     // variables: VARIABLE_SIZE
  bool is_constant = false;
  // Kernels: KERNEL_KERNARG_SEGMENT_SIZE, _GROUP_SEGMENT_SIZE and
  // _PRIVATE_SEGMENT_SIZE (0 for kernels no code object describes).
  uint32_t kernarg_segment_size = 0;
  uint32_t group_segment_size = 0;
  uint32_t private_segment_size = 0;
};

// Writes one attribute of a symbol living on `agent` with exactly the
// documented width (NAME: NAME_LENGTH bytes, not NUL-terminated, as ROCr).
// Attributes that do not apply to the symbol's kind, or that are unknown, are
// HSA_STATUS_ERROR_INVALID_ARGUMENT, as ROCr's per-kind GetInfo reports them.
hsa_status_t write_symbol_info(const SymbolRecord& symbol, hsa_agent_t agent, uint32_t attribute,
                               void* value);

// ---- pools and regions --------------------------------------------------------------

// What the pool/region attribute queries report about one pool.
struct PoolDescription {
  uint32_t global_flags = 0;  // HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*
  size_t size = 0;            // SIZE and ALLOC_MAX_SIZE
  size_t granule = 0;         // RUNTIME_ALLOC_GRANULE
  size_t alignment = 0;       // RUNTIME_ALLOC_ALIGNMENT
  bool device = false;        // device memory (else system memory)
};

// The attribute queries of a pool or region: SUCCESS, or
// HSA_STATUS_ERROR_INVALID_ARGUMENT for an attribute they do not answer.
// hsa_region_get_info:
hsa_status_t write_region_info(const PoolDescription& pool, uint32_t attribute, void* value);
// hsa_amd_memory_pool_get_info:
hsa_status_t write_memory_pool_info(const PoolDescription& pool, uint32_t attribute,
                                    void* value);
// hsa_amd_agent_memory_pool_get_info for an agent and a pool owned by
// pool_agent_index, as ROCr's MemoryRegion::GetAgentPoolInfo computes it:
//   ACCESS: the owner, and the CPU for system memory, ALLOWED_BY_DEFAULT;
//     any other agent (a GPU for system pools, the CPU for device pools, a
//     GPU for a peer GPU's pools) DISALLOWED_BY_DEFAULT. NEVER_ALLOWED does
//     not occur: every pair of agents has one direct link.
//   NUM_LINK_HOPS: 0 to one's own pool, else 1.
//   LINK_INFO: one entry per hop (zeroed for one's own pool).
// HSA_STATUS_ERROR_INVALID_ARGUMENT for an attribute it does not answer.
hsa_status_t write_agent_memory_pool_info(uint32_t agent_index, uint32_t pool_agent_index,
                                          bool device_pool, uint32_t attribute, void* value);

// A GPU lists its own regions followed by the CPU's in
// hsa_agent_iterate_regions (ROCr's GpuAgent::IterateRegion visits the system
// regions too: that is how applications find the kernarg region from a GPU);
// the CPU lists its own.
template <typename PoolId>
std::vector<PoolId> visible_regions(uint32_t agent_index,
                                    std::vector<PoolId> (*owned_pools)(uint32_t)) {
  std::vector<PoolId> regions = owned_pools(agent_index);
  if (is_gpu_index(agent_index)) {
    const std::vector<PoolId> system = owned_pools(kCpuAgentIndex);
    regions.insert(regions.end(), system.begin(), system.end());
  }
  return regions;
}

// Rounds size up to a multiple of granule; false when that overflows.
bool round_up(size_t size, size_t granule, size_t* rounded);

// ---- access ---------------------------------------------------------------------------

// Agents that can reach a fresh allocation before any
// hsa_amd_agents_allow_access, owner first. ROCr maps device memory for its
// owner only, and system memory from hsa_amd_memory_pool_allocate (a
// "restricted" allocation) for the CPU only; system memory from the older
// hsa_memory_allocate is mapped to every GPU (1..gpu_count).
std::vector<uint32_t> initial_accessible_agents(uint32_t owner, bool device_pool,
                                                bool from_region, uint32_t gpu_count);

// Which of hsa_amd_agents_allow_access's checks comes first. The sim looks the
// pointer up first (HSA_STATUS_ERROR for an unknown one) and then the agents
// (HSA_STATUS_ERROR_INVALID_AGENT); HSA-on-CUDA resolves the agents first. They
// differ only for a call where both are wrong.
enum class AllowAccessOrder { kPointerFirst, kAgentsFirst };

// hsa_amd_agents_allow_access, with the caller's memory lock held:
// num_agents == 0, NULL agents, non-NULL flags (reserved, must be NULL) or a
// NULL ptr is INVALID_ARGUMENT; then, in `order`, the agents
// (agent_index(hsa_agent_t, uint32_t*) -> bool; INVALID_AGENT) and the
// allocation by exact base (grants_of(const void*) -> std::vector<uint32_t>*,
// NULL when there is none: a plain HSA_STATUS_ERROR, as ROCr answers); then
// the grants, which accumulate (ROCr makes them sticky).
template <typename AgentIndex, typename GrantsOf>
hsa_status_t allow_access(uint32_t num_agents, const hsa_agent_t* agents, const uint32_t* flags,
                          const void* ptr, AllowAccessOrder order, AgentIndex agent_index,
                          GrantsOf grants_of) {
  if (num_agents == 0 || agents == nullptr || flags != nullptr || ptr == nullptr) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  std::vector<uint32_t>* grants = nullptr;
  if (order == AllowAccessOrder::kPointerFirst) {
    grants = grants_of(ptr);
    if (grants == nullptr) return HSA_STATUS_ERROR;
  }
  std::vector<uint32_t> indices(num_agents);
  for (uint32_t i = 0; i < num_agents; ++i) {
    if (!agent_index(agents[i], &indices[i])) return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  if (order == AllowAccessOrder::kAgentsFirst) {
    grants = grants_of(ptr);
    if (grants == nullptr) return HSA_STATUS_ERROR;
  }
  for (uint32_t index : indices) {
    bool present = false;
    for (uint32_t granted : *grants) present = present || granted == index;
    if (!present) grants->push_back(index);
  }
  return HSA_STATUS_SUCCESS;
}

// ---- pointer info ------------------------------------------------------------------------

// hsa_amd_pointer_info's argument check: ptr, info and info->size non-zero.
bool pointer_info_arguments_valid(const void* ptr, const hsa_amd_pointer_info_t* info);

// An answer for the caller's structure: zeroed (type UNKNOWN), with size set
// to what both sides know (the caller's may be an older, shorter version).
hsa_amd_pointer_info_t pointer_info_answer(const hsa_amd_pointer_info_t& caller);

// Copies `answer` (answer.size bytes) into info. For a pointer the runtime
// knows (type other than UNKNOWN: unknown and freed pointers are SUCCESS with
// type UNKNOWN in ROCr), also returns the accessible agents when alloc,
// num_agents_accessible and accessible are all non-NULL, as ROCr does; alloc
// is the caller's, so call this without any runtime lock held.
hsa_status_t deliver_pointer_info(const hsa_amd_pointer_info_t& answer,
                                  const std::vector<hsa_agent_t>& agents,
                                  hsa_amd_pointer_info_t* info, void* (*alloc)(size_t),
                                  uint32_t* num_agents_accessible, hsa_agent_t** accessible);

// ---- copies ----------------------------------------------------------------------------------

// One side of a copy: host memory, device memory, or a violation (freed, out
// of bounds, NULL).
enum class Side { kHost, kDevice, kViolation };

// The direction of a copy as both runtimes' *_copy_direction_t number it:
// host to host 0, host to device 1, device to host 2, device to device 3.
uint32_t direction_index(Side src, Side dst);

// The agent whose engine performs an asynchronous copy, as ROCr picks it: the
// source agent if it is a GPU, else the destination agent if it is a GPU,
// else `fallback` (the sim: the CPU; HSA-on-CUDA, which copies on GPU
// streams only: the first GPU).
inline uint32_t copy_agent(uint32_t src_agent, uint32_t dst_agent, uint32_t fallback) {
  return is_gpu_index(src_agent) ? src_agent : is_gpu_index(dst_agent) ? dst_agent : fallback;
}

// The entry of a base-keyed map whose range [base, base + extent(value))
// contains address; map.end() if none.
template <typename Map, typename Extent>
auto find_containing(Map& map, uintptr_t address, Extent extent) -> decltype(map.begin()) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address - it->first < extent(it->second) ? it : map.end();
}

// True when [address, address + size) meets any range of the map.
template <typename Map, typename Extent>
bool range_meets(const Map& map, uintptr_t address, size_t size, Extent extent) {
  if (find_containing(map, address, extent) != map.end()) return true;
  auto next = map.upper_bound(address);
  return next != map.end() && next->first - address < size;
}

}  // namespace hsa_common

#endif /* HSA_COMMON_H */
