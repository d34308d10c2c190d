// kernel_replay/memory_tracker.hpp: rocprofiler-sdk's kernel_replay
// memory_tracker module (its kernel_replay/memory_tracker.hpp), backed by
// kernel-replay. Same namespaces, names, signatures and meanings, so the
// SDK's registration.cpp and callback_tracing.cpp compile with only their
// #include line changed:
//
//   #include <kernel_replay/memory_tracker.hpp>
//
//   rocprofiler::kernel_replay::memory_tracker_init(hsa_api_table->core_, lib_instance);
//   rocprofiler::kernel_replay::memory_tracker_init(hsa_api_table->amd_ext_, lib_instance);
//   rocprofiler::kernel_replay::memory_tracker::set_tracking_enabled(true);
//
// Header-only: every function is a thin inline call into the C ABI
// (kernel_replay.h). Declares no namespace outside `rocprofiler`. Needs C++11.

#ifndef KERNEL_REPLAY_MEMORY_TRACKER_HPP
#define KERNEL_REPLAY_MEMORY_TRACKER_HPP

#include "../kernel_replay.h"

#include <cstddef>
#include <cstdint>

namespace rocprofiler {
namespace kernel_replay {

/// Installs the tracker's wrappers over the core table's hsa_memory_allocate,
/// hsa_memory_free and hsa_executable_destroy, and captures the un-wrapped
/// entries snapshots copy and query through. Instance 0 only (a later
/// library instance would chain the wrapper to itself). Called again after
/// the tables were restored (the SDK's re-registration), it installs again;
/// while the wrappers are in place it leaves the table alone. Problems are
/// logged; kr_memory_tracker_init returns them as a status.
inline void memory_tracker_init(CoreApiTable* table, std::uint64_t lib_instance) noexcept {
  (void)kr_memory_tracker_init(table, nullptr, lib_instance);
}

/// The same for the AMD extension table's hsa_amd_memory_pool_allocate and
/// hsa_amd_memory_pool_free (and its hsa_amd_pointer_info, for classifying).
inline void memory_tracker_init(AmdExtTable* table, std::uint64_t lib_instance) noexcept {
  (void)kr_memory_tracker_init(nullptr, table, lib_instance);
}

namespace memory_tracker {

/// Turns recording of new allocations on or off; returns the state now in
/// force (false once finalized). Off until a tool enables it.
inline bool set_tracking_enabled(bool enabled) noexcept {
  return kr_set_tracking_enabled(enabled);
}

/// Whether new allocations are being recorded.
inline bool tracking_enabled() noexcept { return kr_tracking_enabled(); }

/// Device memory on an agent that snapshots do not cover (the SDK's later
/// untracked_summary_t): `bytes` is what the agent has in use less what is
/// tracked less the library's own arenas (0 and `known == false` when the
/// runtime does not report the agent's free memory); `vmem_*` are the
/// virtual-memory mappings among it the tracker saw but does not capture;
/// `pool_bytes` is the rest (allocations made before tracking was on,
/// fine-grained memory, other processes' use of the device).
struct untracked_summary_t {
  std::uint64_t bytes = 0;
  bool known = false;
  std::uint64_t vmem_bytes = 0;
  std::size_t vmem_regions = 0;
  std::uint64_t pool_bytes = 0;
};

inline untracked_summary_t untracked_device_memory(hsa_agent_t agent) noexcept {
  const kr_untracked_t untracked = kr_untracked_summary(agent);
  untracked_summary_t summary;
  summary.bytes = untracked.bytes;
  summary.known = untracked.known;
  summary.vmem_bytes = untracked.vmem_bytes;
  summary.vmem_regions = untracked.vmem_regions;
  summary.pool_bytes = untracked.bytes > untracked.vmem_bytes ? untracked.bytes - untracked.vmem_bytes : 0;
  return summary;
}

// ---- beyond the SDK's module -------------------------------------------------

/// The teardown guard (irreversible): afterwards the wrappers only chain.
inline void finalize() noexcept { kr_finalize(); }

inline bool is_finalized() noexcept { return kr_is_finalized(); }

/// Tracked allocations owned by the agent, and their bytes.
inline std::size_t tracked_count(hsa_agent_t agent) noexcept { return kr_tracked_count(agent); }

inline std::uint64_t tracked_bytes(hsa_agent_t agent) noexcept { return kr_tracked_bytes(agent); }

}  // namespace memory_tracker
}  // namespace kernel_replay
}  // namespace rocprofiler

#endif  // KERNEL_REPLAY_MEMORY_TRACKER_HPP
