// kernel_replay/memory_snapshot.hpp: rocprofiler-sdk's kernel_replay
// memory_snapshot module (its kernel_replay/memory_snapshot.hpp), backed by
// kernel-replay. Same namespaces, names, signatures and meanings, so the
// SDK's hsa/queue.cpp compiles with only its #include line changed:
//
//   #include <kernel_replay/memory_snapshot.hpp>
//
//   const auto snapshot = kernel_replay::memory_snapshot::snap(replay_agent);
//   if(!snapshot.ok) { /* declined: run the dispatch once */ }
//   ...
//   ROCP_FATAL_IF(!kernel_replay::memory_snapshot::restore(snapshot)) << ...;
//
// Header-only: every function is a thin inline call into the C ABI
// (kernel_replay.h). Declares no namespace outside `rocprofiler`. Needs C++11.

#ifndef KERNEL_REPLAY_MEMORY_SNAPSHOT_HPP
#define KERNEL_REPLAY_MEMORY_SNAPSHOT_HPP

#include "../kernel_replay.h"

#include <cstddef>
#include <cstdint>

namespace rocprofiler {
namespace kernel_replay {
namespace memory_snapshot {

/// One snapshot of an agent's replay state: the owner of a kr_snapshot_t,
/// freed (its memory returned for reuse) when destroyed. Move-only.
class device_snapshot_t {
 public:
  /// Holds nothing: ok and empty, as the SDK's default-constructed snapshot
  /// (restoring it restores nothing, successfully).
  device_snapshot_t() noexcept = default;

  /// Takes ownership of a handle from kr_snap (NULL: not ok).
  explicit device_snapshot_t(kr_snapshot_t* handle) noexcept
      : ok(kr_snapshot_ok(handle)), handle_(handle) {}

  ~device_snapshot_t() { kr_snapshot_free(handle_); }

  device_snapshot_t(const device_snapshot_t&) = delete;
  device_snapshot_t& operator=(const device_snapshot_t&) = delete;

  /// The moved-from snapshot holds nothing and is not ok.
  device_snapshot_t(device_snapshot_t&& other) noexcept : ok(other.ok), handle_(other.handle_) {
    other.ok = false;
    other.handle_ = nullptr;
  }

  device_snapshot_t& operator=(device_snapshot_t&& other) noexcept {
    if (this != &other) {
      kr_snapshot_free(handle_);
      ok = other.ok;
      handle_ = other.handle_;
      other.ok = false;
      other.handle_ = nullptr;
    }
    return *this;
  }

  /// True for a complete capture: the dispatch may be replayed. False when
  /// the snapshot declined (the reason was logged): run the dispatch once.
  bool ok = true;

  /// True when nothing was captured (a declined snapshot, or an agent with
  /// nothing tracked and no module variables).
  bool empty() const noexcept { return kr_snapshot_region_count(handle_) == 0; }

  // ---- beyond the SDK's struct ---------------------------------------------

  /// Regions captured.
  std::size_t size() const noexcept { return kr_snapshot_region_count(handle_); }

  /// Bytes captured.
  std::uint64_t bytes() const noexcept { return kr_snapshot_byte_count(handle_); }

  /// Why the snapshot declined (KR_DECLINE_NONE when ok).
  kr_decline_reason_t decline_reason() const noexcept {
    if (handle_ == nullptr) return ok ? KR_DECLINE_NONE : KR_DECLINE_METADATA_MEMORY;
    return kr_snapshot_decline_reason(handle_);
  }

  /// The C handle, still owned by this object (NULL when it holds nothing).
  const kr_snapshot_t* get() const noexcept { return handle_; }

 private:
  kr_snapshot_t* handle_ = nullptr;
};

/// Captures the tracked allocations owned by `agent` and the module-scope
/// variables visible to it.
inline device_snapshot_t snap(hsa_agent_t agent) noexcept {
  return device_snapshot_t(kr_snap(agent));
}

/// Writes the snapshot back. True when every region that is still the
/// captured allocation (or variable) was written back: regions freed or
/// unloaded since are skipped, and a snapshot with nothing captured is
/// restored by writing nothing. False when any copy failed, for a declined
/// snapshot, after finalize, and when the tracker's wrappers were found
/// taken out of the HSA tables. (kr_restore_all.)
inline bool restore(const device_snapshot_t& snapshot) noexcept {
  if (snapshot.get() == nullptr) return snapshot.ok;
  return kr_restore_all(snapshot.get());
}

/// What a snapshot of an agent would take now (the SDK's later
/// snapshot_footprint_t): its tracked allocations and mappings and the
/// module variables of every loaded executable.
struct snapshot_footprint_t {
  std::size_t bytes = 0;
  std::size_t regions = 0;
};

inline snapshot_footprint_t estimate_footprint(hsa_agent_t agent) noexcept {
  const kr_footprint_t footprint = kr_estimate_footprint(agent);
  snapshot_footprint_t out;
  out.bytes = static_cast<std::size_t>(footprint.bytes);
  out.regions = footprint.regions;
  return out;
}

// ---- beyond the SDK's module ---------------------------------------------------

/// As restore, with the per-region outcome (restored, skipped because no
/// longer the captured allocation, failed).
inline kr_restore_report_t restore_with_report(const device_snapshot_t& snapshot) noexcept {
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.get(), &report);
  return report;
}

/// Bytes the snapshot captured of one kind of memory (coarse-grained device
/// memory, fine-grained device memory, ...): what its replays cover.
/// (kr_snapshot_kind_bytes; 0 for a declined snapshot.)
inline std::uint64_t kind_bytes(const device_snapshot_t& snapshot, kr_memory_kind_t kind) noexcept {
  return kr_snapshot_kind_bytes(snapshot.get(), kind);
}

/// Bytes of one kind of memory the agent can write that the snapshot does
/// not cover (host memory the host-memory setting left out): what its
/// replays do not restore. (kr_snapshot_uncovered_bytes.)
inline std::uint64_t uncovered_bytes(const device_snapshot_t& snapshot,
                                     kr_memory_kind_t kind) noexcept {
  return kr_snapshot_uncovered_bytes(snapshot.get(), kind);
}

/// Whether kernels could write any system memory when the snapshot was
/// taken (XNACK on), none of which a snapshot covers.
/// (kr_snapshot_system_memory_uncovered.)
inline bool system_memory_uncovered(const device_snapshot_t& snapshot) noexcept {
  return kr_snapshot_system_memory_uncovered(snapshot.get());
}

}  // namespace memory_snapshot
}  // namespace kernel_replay
}  // namespace rocprofiler

#endif  // KERNEL_REPLAY_MEMORY_SNAPSHOT_HPP
