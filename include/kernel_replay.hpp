// kernel_replay.hpp: header-only C++ layer over kernel_replay.h that mirrors
// the names of rocprofiler-sdk's kernel_replay modules, so the existing call
// sites in registration.cpp and queue.cpp compile after a namespace switch:
//
//   kernel_replay::memory_tracker_init(core_table, lib_instance);
//   kernel_replay::memory_tracker_init(amd_ext_table, lib_instance);
//   kernel_replay::memory_tracker::set_tracking_enabled(true);
//   auto snapshot = kernel_replay::memory_snapshot::snap(agent);
//   if(!snapshot.ok) { /* run the dispatch once */ }
//   kernel_replay::memory_snapshot::restore(snapshot);
//
// Hand-written (the C header is generated); every function is a thin inline
// call into the C ABI. Needs C++11.

#ifndef KERNEL_REPLAY_HPP
#define KERNEL_REPLAY_HPP

#include "kernel_replay.h"

#include <cstddef>
#include <cstdint>

namespace kernel_replay {

/// Installs the core-table wrappers (hsa_memory_allocate / hsa_memory_free)
/// and captures the un-wrapped copy and symbol entries.
inline kr_status_t memory_tracker_init(CoreApiTable* core, uint64_t lib_instance) noexcept {
  return kr_memory_tracker_init(core, nullptr, lib_instance);
}

/// Installs the AMD-extension wrappers (hsa_amd_memory_pool_allocate / _free)
/// and captures hsa_amd_pointer_info.
inline kr_status_t memory_tracker_init(AmdExtTable* amd_ext, uint64_t lib_instance) noexcept {
  return kr_memory_tracker_init(nullptr, amd_ext, lib_instance);
}

/// How snapshots find loaded executables (module variables): in
/// rocprofiler-sdk, the loader extension's
/// hsa_ven_amd_loader_iterate_executables. nullptr unsets it.
inline void set_executable_iterator(kr_iterate_executables_fn_t iterate) noexcept {
  kr_set_executable_iterator(iterate);
}

/// Caps the host memory all live snapshots hold together (0: unlimited).
inline void set_host_budget(std::uint64_t bytes) noexcept { kr_set_host_budget(bytes); }

/// Routes log messages to `callback` (nullptr: back to stderr).
inline void set_log_callback(kr_log_callback_t callback, void* user_data) noexcept {
  kr_set_log_callback(callback, user_data);
}

namespace memory_tracker {

/// Turns recording on or off; returns the state now in force.
inline bool set_tracking_enabled(bool enabled) noexcept { return kr_set_tracking_enabled(enabled); }

inline bool tracking_enabled() noexcept { return kr_tracking_enabled(); }

/// The teardown guard (irreversible).
inline void finalize() noexcept { kr_finalize(); }

inline bool is_finalized() noexcept { return kr_is_finalized(); }

inline std::size_t tracked_count(hsa_agent_t agent) noexcept { return kr_tracked_count(agent); }

inline std::uint64_t tracked_bytes(hsa_agent_t agent) noexcept { return kr_tracked_bytes(agent); }

}  // namespace memory_tracker

namespace memory_snapshot {

/// Owns one kr_snapshot_t. Move-only; frees the snapshot (and its host
/// memory) when destroyed. `ok` is a plain member, read as `snapshot.ok`
/// exactly as queue.cpp reads the SDK's struct.
class device_snapshot_t {
 public:
  /// An empty snapshot: not ok, nothing to restore.
  device_snapshot_t() noexcept = default;

  /// Takes ownership of a handle from kr_snap (NULL allowed: not ok).
  explicit device_snapshot_t(kr_snapshot_t* handle) noexcept
      : ok(kr_snapshot_ok(handle)), handle_(handle) {}

  ~device_snapshot_t() { kr_snapshot_free(handle_); }

  device_snapshot_t(const device_snapshot_t&) = delete;
  device_snapshot_t& operator=(const device_snapshot_t&) = delete;

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

  /// True for a complete snapshot: the replay may proceed.
  bool ok = false;

  /// True when nothing was captured (declined, or nothing to capture).
  bool empty() const noexcept { return kr_snapshot_region_count(handle_) == 0; }

  /// Regions captured.
  std::size_t size() const noexcept { return kr_snapshot_region_count(handle_); }

  /// Bytes captured.
  std::uint64_t bytes() const noexcept { return kr_snapshot_byte_count(handle_); }

  /// Why the snapshot declined (KR_DECLINE_NONE when ok).
  kr_decline_reason_t decline_reason() const noexcept {
    return handle_ ? kr_snapshot_decline_reason(handle_) : KR_DECLINE_METADATA_MEMORY;
  }

  /// The C handle, still owned by this object.
  const kr_snapshot_t* get() const noexcept { return handle_; }

 private:
  kr_snapshot_t* handle_ = nullptr;
};

/// Captures the tracked allocations of `agent` and the module-scope variables
/// visible to it.
inline device_snapshot_t snap(hsa_agent_t agent) noexcept { return device_snapshot_t(kr_snap(agent)); }

/// Writes the snapshot back; returns the number of regions restored.
inline std::size_t restore(const device_snapshot_t& snapshot) noexcept {
  return kr_restore(snapshot.get());
}

/// As restore, with the per-region outcome.
inline kr_restore_report_t restore_with_report(const device_snapshot_t& snapshot) noexcept {
  kr_restore_report_t report{};
  kr_restore_with_report(snapshot.get(), &report);
  return report;
}

}  // namespace memory_snapshot
}  // namespace kernel_replay

#endif  // KERNEL_REPLAY_HPP
