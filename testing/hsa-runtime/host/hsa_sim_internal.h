/* hsa_sim_internal.h: state shared by the translation units of the software
 * HSA runtime (hsa_sim.h is the public control interface).
 *
 * Layout of the implementation:
 *   hsa_sim.cpp          state, topology, reset, modes, fault switches, counters
 *   hsa_sim_memory.cpp   pools/regions, allocation, quarantine, copies, pointer info
 *   hsa_sim_signals.cpp  signals and the asynchronous copy worker (linear,
 *                        on-engine and rect copies)
 *   hsa_sim_vmem.cpp     virtual memory: reservations, handles, mappings,
 *                        access, and how copies and pointer info see them
 *   hsa_sim_loader.cpp   executables and symbols; code object readers, loading
 *                        AMDGPU code objects, freezing, symbols by name
 *   hsa_sim_elf.cpp      the defensive AMDGPU ELF reader and ISA names
 *   hsa_sim_queues.cpp   AQL queues, their packet processors and the checks
 *                        a dispatch of the library's kernels passes first
 *   hsa_sim_tables.cpp   agent/system queries, ISAs and the tables
 *
 * What the sim shares with HSA-on-CUDA (testing/hsa-runtime/cuda) lives in
 * testing/hsa-runtime/common: handle layout, attribute writers, status strings,
 * system info, the signal table, the table entry lists and the application
 * trampolines. This runtime keeps its host-memory backend, the quarantine,
 * fault injection, the loader's storage and the async copy worker.
 *
 * Locking: State::mutex guards everything in State. Signals have their own
 * lock (hsa_sim_signals.cpp), the async queue its own and the AQL queues'
 * registry its own (hsa_sim_queues.cpp); no code path holds two of them at
 * once, and no user callback runs while any of them is held.
 */
#ifndef HSA_SIM_INTERNAL_H
#define HSA_SIM_INTERNAL_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hsa_common.h"
#include "hsa_common_signals.h"
#include "hsa_common_tables.h"
#include "hsa_common_vmem.h"
#include "hsa_sim.h"

namespace hsa_sim {

using hsa_common::HandleTag;
using hsa_common::is_gpu_index;
using hsa_common::kAgentInfoMemoryAvail;
using hsa_common::kCpuAgentIndex;
using hsa_common::Side;
using hsa_common::write_value;

// ---- constants -----------------------------------------------------------

// Every pool reports this granule and alignment; sizes are rounded up to it,
// as ROCr rounds allocations up to the pool's RUNTIME_ALLOC_GRANULE.
constexpr size_t kGranule = 4096;
constexpr size_t kAlignment = 4096;
constexpr uint32_t kPoolKindCount = 5;

// Sizes the pools advertise (SIZE and ALLOC_MAX_SIZE). A GPU's device pools
// and vmem handles share kDevicePoolSize bytes (State::device_bytes; past it
// an allocation is OUT_OF_RESOURCES); system pools bound single requests
// only. Memory is only committed when touched, so filling a device is free.
constexpr size_t kDevicePoolSize = size_t{16} << 30;
constexpr size_t kSystemPoolSize = size_t{64} << 30;

// SDMA engines each GPU reports to hsa_amd_memory_async_copy_on_engine (an
// MI250X GCD: 2 SDMA + 6 xGMI SDMA).
constexpr uint32_t kSdmaEngineCount = 8;

// AQL queues of a GPU agent: sizes in packets, as ROCr's GpuAgent
// (minAqlSize_ 4 KiB, maxAqlSize_ 8 MiB of 64-byte packets; a CPU agent
// reports 0 for both: it has no packet processor), and how many may exist at
// once (HSA_AGENT_INFO_QUEUES_MAX).
constexpr uint32_t kQueueMinSize = 0x40;
constexpr uint32_t kQueueMaxSize = 0x20000;
constexpr uint32_t kQueuesMax = 128;

// Quarantine limits; the oldest freed block is really released past them.
constexpr size_t kQuarantineMaxBytes = size_t{256} << 20;
constexpr size_t kQuarantineMaxBlocks = 65536;

// ---- handles ---------------------------------------------------------------

// Every handle the runtime hands out is tagged with its kind
// (hsa_common::HandleTag) and (except signals, which outlive reset) carries
// the reset epoch so handles from before a reset are unknown after it:
// tag:8 | epoch:24 | payload:32 (hsa_common::HandleLayout<24>). Symbols use
// hsa_common::symbol_handle.
uint64_t make_handle(HandleTag tag, uint32_t epoch, uint32_t payload);
bool decode_handle(uint64_t handle, HandleTag tag, uint32_t epoch, uint32_t* payload);

struct PoolId {
  uint32_t agent_index;
  hsa_sim_pool_kind_t kind;
  bool operator==(const PoolId& other) const {
    return agent_index == other.agent_index && kind == other.kind;
  }
};

bool is_device_kind(hsa_sim_pool_kind_t kind);
uint32_t pool_global_flags(hsa_sim_pool_kind_t kind);
size_t pool_size(hsa_sim_pool_kind_t kind);

// ---- memory blocks -----------------------------------------------------------

enum class BlockOrigin {
  kPoolAllocation,    // hsa_amd_memory_pool_allocate
  kRegionAllocation,  // hsa_memory_allocate
  kVariableStorage,   // storage of an executable's variable
};

// One mapping the runtime owns. [base, base + mapped_bytes) is real memory;
// [base, base + extent) is what the owner may touch (the rounded allocation
// size, or the exact variable size for variable storage).
struct Block {
  uint8_t* base = nullptr;
  size_t mapped_bytes = 0;
  size_t extent = 0;
  BlockOrigin origin = BlockOrigin::kPoolAllocation;
  PoolId pool{kCpuAgentIndex, HSA_SIM_POOL_SYSTEM_FINE};  // owner agent + kind
  uint32_t global_flags = 0;
  uint32_t alloc_flags = 0;              // flags given to hsa_amd_memory_pool_allocate
  std::vector<uint32_t> accessible;      // agent indices, owner first
  void* user_data = nullptr;             // hsa_amd_pointer_info_set_userdata
};

struct QuarantinedBlock {
  Block block;
  uint64_t sequence = 0;  // order of quarantining, to find the newest
};

// ---- virtual memory ----------------------------------------------------------

// A range given out by hsa_amd_vmem_address_reserve(_align) (PROT_NONE
// anonymous memory wherever nothing is mapped) and a mapping made by
// hsa_amd_vmem_map ([base, base + size) shows the first size bytes of a
// handle, with the permission of each agent given one; the CPU's is the
// protection of the user view): the records HSA-on-CUDA keeps too
// (hsa_common_vmem.h).
using hsa_common::VmemMapping;
using hsa_common::VmemReservation;

// Physical memory of hsa_amd_vmem_handle_create: a memfd of `size` bytes,
// also mapped read-write at `shadow` for the sim's copy engine (which copies
// through it, like a DMA engine that ignores the CPU view's protection).
struct VmemHandle {
  PoolId pool{};
  size_t size = 0;
  uint32_t memory_type = 0;  // hsa_amd_memory_type_t
  int fd = -1;
  uint8_t* shadow = nullptr;
  uint32_t ref_count = 1;    // create and retain add one, release takes one
  uint32_t map_count = 0;    // mappings of it
};

enum class VmemOp : uint32_t { kHandleCreate, kHandleRelease, kMap, kUnmap, kSetAccess, kCount };

struct Vmem {
  std::map<uintptr_t, VmemReservation> reservations;  // by start
  std::map<uint32_t, VmemHandle> handles;             // by id (the handle's payload)
  std::map<uintptr_t, VmemMapping> mappings;          // by start
  uint32_t next_handle_id = 1;
};

// ---- loader ----------------------------------------------------------------

// What the attribute queries report (address: the variable's storage or raw
// address, or the kernel object), plus the symbol's agent and whether the
// runtime allocated its storage.
struct Symbol : hsa_common::SymbolRecord {
  uint32_t agent_index = 0;
  bool has_storage = false;
};

// A kernel of a code object loaded by hsa_executable_load_agent_code_object.
// Its address (the object's own, 64-byte aligned) is the kernel object a
// dispatch packet names, as ROCr's is the address of the loaded kernel
// descriptor: `descriptor` holds the 64 descriptor bytes of the ELF.
struct alignas(64) LoadedKernel {
  uint8_t descriptor[64] = {};
  std::string name;  // without ".kd": what kr_host_dispatch runs
  uint32_t agent_index = 0;
  uint32_t kernarg_segment_size = 0;
  uint32_t group_segment_size = 0;
  uint32_t private_segment_size = 0;

  uint64_t kernel_object() const { return reinterpret_cast<uintptr_t>(this); }
};

struct Executable {
  std::vector<Symbol> symbols;
  bool refuse_symbol_walk = false;
  bool frozen = false;  // hsa_executable_freeze
  // Kernels of loaded code objects (owned here, so addresses are stable).
  std::vector<std::unique_ptr<LoadedKernel>> kernels;
};

// hsa_code_object_reader_create_from_memory: as ROCr's reader, the caller's
// memory itself, read only when a code object is loaded from it.
struct CodeObjectReader {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// ---- code objects (hsa_sim_elf.cpp) --------------------------------------------

// An AMDGPU code object's kernel, found by its ".kd" descriptor symbol.
struct ElfKernel {
  std::string name;  // the symbol's name, ".kd" included
  uint8_t descriptor[64] = {};
};

struct CodeObject {
  std::string isa;  // "amdgcn-amd-amdhsa--gfx942" with the features it names
  std::vector<ElfKernel> kernels;
};

// Reads an AMDGPU code object (ELF64, little endian, EM_AMDGPU, OS ABI
// AMDGPU_HSA, code object v3 to v6, ET_DYN) as ROCr's loader needs it: the
// ISA from e_flags and the kernel descriptors of the ".kd" symbols of
// .symtab and .dynsym. Anything malformed (truncated, out-of-bounds offsets,
// unterminated names, an unknown processor) is false, never a read outside
// [data, data + size).
bool read_code_object(const uint8_t* data, size_t size, CodeObject* out);
// Whether code for ISA `code` runs on an agent of ISA `agent` (ROCr's
// Isa::IsCompatible): same processor; a feature the code object names
// (sramecc+/-, xnack+/-) must be the agent's; one it leaves open matches.
bool isa_compatible(const std::string& code, const std::string& agent);
// The processor of an ISA name ("gfx942" of "amdgcn-amd-amdhsa--gfx942:..."),
// empty when the name is not of that form.
std::string isa_processor(const std::string& isa);
// The default ISA of GPU agents.
constexpr const char* kDefaultGpuIsa = "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-";

// ---- faults and counters -----------------------------------------------------

struct Faults {
  bool fail_pointer_info = false;
  uint64_t d2h_fail_at = 0;  // 0 = disarmed
  uint64_t d2h_seen = 0;
  std::vector<uintptr_t> h2d_fail_addresses;
  std::vector<uintptr_t> copy_fail_addresses;  // hsa_sim_fail_copies_into
  std::vector<uintptr_t> copy_from_fail_addresses;  // hsa_sim_fail_copies_from
  std::set<uint32_t> failing_symbol_queries;
  bool fail_executable_iteration = false;
  bool fail_loader_extension = false;
  uint32_t failing_allocations = 0;
  uint32_t failing_frees = 0;
  uint64_t async_fail_at = 0;  // 0 = disarmed
  uint64_t async_seen = 0;
  uint64_t async_error_at = 0;  // 0 = disarmed
  uint64_t async_error_seen = 0;
  // hsa_sim_fail_nth_vmem, by VmemOp: the call to fail (0 = disarmed) and
  // calls seen since it was armed.
  uint64_t vmem_fail_at[static_cast<size_t>(VmemOp::kCount)] = {};
  uint64_t vmem_seen[static_cast<size_t>(VmemOp::kCount)] = {};
  uint32_t failing_queue_creations = 0;    // hsa_sim_fail_next_queue_creations
  uint32_t failing_code_object_loads = 0;  // hsa_sim_fail_next_code_object_loads
  uint32_t faulting_dispatches = 0;        // hsa_sim_fault_next_dispatches
};

constexpr size_t kMaxH2dFaultAddresses = 16;

struct Counters {
  uint64_t copies[4] = {0, 0, 0, 0};  // by hsa_sim_copy_direction_t
  uint64_t violations = 0;
  uint64_t async_copies = 0;
  uint64_t pointer_info_queries = 0;
  std::map<std::string, uint64_t> dispatches;  // kernels run, by name (no ".kd")
};

// ---- the state -------------------------------------------------------------

struct State {
  std::mutex mutex;
  // The loader's lock, as ROCr's loader holds one: the executable iterator
  // holds it across its callbacks and creating or destroying an executable
  // takes it, so an executable the iterator reports stays loaded until its
  // callback returns. Taken before `mutex`, never while holding it.
  std::mutex loader_mutex;
  uint32_t epoch = 0;
  uint32_t gpu_count = 0;
  bool address_reuse = false;
  bool memory_avail_supported = true;  // HSA_AMD_AGENT_INFO_MEMORY_AVAIL answered
  bool strict_async_access = false;

  std::map<uintptr_t, Block> live;  // by base; allocations and variable storage
  // Device bytes each agent's pools and vmem handles hold (by agent index):
  // the granule-rounded sizes of live device allocations plus the sizes of
  // existing vmem handles, bounded by kDevicePoolSize.
  std::vector<uint64_t> device_bytes;
  Vmem vmem;
  std::map<uintptr_t, QuarantinedBlock> quarantine;  // by base
  std::deque<std::pair<uintptr_t, uint64_t>> quarantine_order;  // (base, sequence), oldest first
  size_t quarantine_bytes = 0;
  uint64_t next_quarantine_sequence = 1;

  std::map<uint32_t, Executable> executables;  // by id = creation order
  uint32_t next_executable_id = 1;
  std::map<uint32_t, CodeObjectReader> readers;  // by id
  uint32_t next_reader_id = 1;
  uint32_t next_loaded_code_object_id = 1;
  // The ISA of each agent (by index; empty: none, as ROCr's CPU agent) and
  // every ISA name handed out as an hsa_isa_t (the handle's payload indexes
  // it; ROCr's ISA objects are shared by all agents of one ISA too).
  std::vector<std::string> agent_isas;
  std::vector<std::string> isa_names;
  // Ranges reported by raw variable symbols with no storage behind them (by
  // address, bytes): a copy touching one is a violation, not a wild access.
  std::map<uintptr_t, size_t> unbacked;

  Faults faults;
  Counters counters;
};

// The process-wide state, built (with a reset to two GPUs) on first use and
// never destroyed, so calls made during process exit still find it.
State& state();

// ---- cross-unit helpers (State::mutex must be held where noted) --------------

uint32_t agent_count_locked(const State& s);
// Bytes of live pool/region allocations in the device pools of one agent,
// plus its vmem handles (State::device_bytes).
uint64_t device_bytes_live_locked(const State& s, uint32_t agent_index);
// Takes bytes of an agent's device memory: false (nothing taken) when they
// do not fit in what is left of kDevicePoolSize.
bool take_device_bytes_locked(State& s, uint32_t agent_index, uint64_t bytes);
void give_device_bytes_locked(State& s, uint32_t agent_index, uint64_t bytes);
bool agent_index_from_handle_locked(const State& s, hsa_agent_t agent, uint32_t* index);
hsa_agent_t agent_handle_locked(const State& s, uint32_t index);
bool pool_from_handle_locked(const State& s, uint64_t handle, PoolId* pool);
uint64_t pool_handle_locked(const State& s, PoolId pool);

// Memory (hsa_sim_memory.cpp).
void* map_block_memory(size_t bytes);
void unmap_block_memory(void* base, size_t bytes);
// Moves a block out of the live set into the quarantine (poisoned).
void quarantine_block_locked(State& s, Block block);
void release_all_memory_locked(State& s);

// Which side of a copy a range is: vmem mappings need a permission that
// allows reading a source or writing a destination (hsa_common_vmem.h).
using hsa_common::CopyRole;

// Classifies one side of a copy. Host memory must be mapped, must not run
// past the end of a block the test program registered
// (hsa_sim_note_host_block), and must not meet an unbacked symbol's range;
// a range meeting a vmem reservation must lie in one mapping some agent may
// access in that role (device memory); anything else is a violation.
Side classify_range_locked(const State& s, const void* ptr, size_t size, CopyRole role);
// The address the sim's copy engine reads or writes for ptr: the handle's
// own memory for a vmem mapping (whatever the CPU view's protection), ptr
// itself otherwise. Call after classify_range_locked accepted the range.
void* engine_address_locked(const State& s, const void* ptr);
// Whether [address, address + size) lies inside one live block.
bool range_is_live_storage_locked(const State& s, uint64_t address, size_t size);
// Whether the agent can reach ptr directly: a runtime block's accessible
// agents, a vmem mapping's agents with a permission other than NONE, or the
// CPU for memory the runtime does not own.
bool agent_can_access_locked(const State& s, uint32_t agent_index, const void* ptr);
hsa_sim_copy_direction_t direction_of(Side src, Side dst);
// Whether a copy [src..] -> [dst..] of size bytes hits an address given to
// hsa_sim_fail_copies_into (destination) or hsa_sim_fail_copies_from (source).
bool copy_fault_covers_locked(const State& s, const void* dst, const void* src, size_t size);
// Whether [dst, dst + size) covers an address given to hsa_sim_fail_h2d_copy_into.
bool h2d_fault_covers_locked(const State& s, const void* dst, size_t size);

// Virtual memory (hsa_sim_vmem.cpp).
// Whether [address, address + size) meets a vmem reservation.
bool vmem_range_meets_locked(const State& s, uintptr_t address, size_t size);
// One side of a copy that meets a reservation: kDevice inside one mapping
// some agent may access in that role, else kViolation.
Side vmem_classify_locked(const State& s, uintptr_t address, size_t size, CopyRole role);
// The handle memory behind an address inside a mapping; NULL elsewhere.
uint8_t* vmem_engine_address_locked(const State& s, uintptr_t address);
// The agent's permission on the mapping containing address; false when the
// address is in no mapping.
bool vmem_agent_permission_locked(const State& s, uintptr_t address, uint32_t agent_index,
                                  uint32_t* permission);
// hsa_amd_pointer_info's answer for an address in a reservation (see
// hsa_sim.h), with the accessible agents; false when address is in none.
bool vmem_pointer_info_locked(const State& s, uintptr_t address, hsa_amd_pointer_info_t* info,
                              std::vector<hsa_agent_t>* agents, bool* list_without_alloc);
// Unmaps, closes and frees everything (reset).
void vmem_release_all_locked(State& s);

// ISAs (hsa_sim_tables.cpp): the hsa_isa_t of a name (interned).
uint64_t isa_handle_locked(State& s, const std::string& name);

// Loader (hsa_sim_loader.cpp): the loaded kernel whose kernel object this is,
// or NULL (an unknown address, or its executable destroyed).
const LoadedKernel* find_loaded_kernel_locked(const State& s, uint64_t kernel_object);

// AQL queues (hsa_sim_queues.cpp). Stops every queue's packet processor and
// retires the queues (their memory stays, so a stale hsa_queue_t* is still
// harmless to read); called by reset without any lock held.
void retire_all_queues();
uint64_t live_queue_count();

// Async copies (hsa_sim_signals.cpp).
// Waits for queued asynchronous copies; those still blocked on a dependency
// that is not 0 are dropped. Called by reset without State::mutex held.
void drain_async_copies();
uint64_t live_signal_count();
uint64_t armed_signal_handler_count();
uint64_t invalid_signal_uses();
void reset_signal_counters();
// The runtime's signal table (queues ring doorbells and complete packets
// through it).
hsa_common::SignalTable& signal_table();

}  // namespace hsa_sim

// The entry points each file implements for the tables, declared with the
// types of their table fields (the shared lists are in hsa_common_tables.h).
namespace hsa_sim::api {
HSA_COMMON_RUNTIME_CORE_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
HSA_COMMON_RUNTIME_AQL_CORE_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
HSA_COMMON_RUNTIME_AMD_ENTRIES(HSA_COMMON_DECLARE_ENTRY)
}  // namespace hsa_sim::api

// The signal entries (hsa_common::SignalEntries over the sim's signal table);
// hsa_sim_signals.cpp places them in the tables.
namespace hsa_sim {
void fill_signal_core_entries(CoreApiTable* core);
void fill_signal_amd_entries(AmdExtTable* amd);
}  // namespace hsa_sim

#endif /* HSA_SIM_INTERNAL_H */
