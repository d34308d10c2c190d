//! kernel-replay: snapshot and restore of GPU device memory, so a profiler
//! can replay one kernel dispatch several times with identical inputs.
//!
//! It replaces rocprofiler-sdk's C++ `memory_tracker` and `memory_snapshot`
//! modules behind a C ABI (`include/kernel_replay.h`). The parts, one module
//! each, as in the design document:
//!
//! - [`memory_tracker`]: wrappers over the four HSA allocation entry points,
//!   the inventory of live allocations, the tracking gate, the teardown guard.
//! - [`classifier`]: which allocations are replay state (coarse-grained, not
//!   kernarg, not executable).
//! - [`memory_snapshot`]: capture of one agent's tracked allocations and
//!   module-scope variables into host memory, and restore.
//! - [`replay`]: the replay window around one dispatch and its gate.
//! - [`hsa`]: bindings generated from the installed HSA headers, the
//!   table-size guard and the captured entry points.
//! - [`ffi`]: every `extern "C"` export.
//! - [`context`]: the process-wide state those share; [`logging`]: where
//!   messages go.

#[cfg(not(loom))]
pub mod classifier;
#[cfg(not(loom))]
pub mod context;
#[cfg(not(loom))]
mod fallible;
#[cfg(not(loom))]
pub mod ffi;
#[cfg(not(loom))]
pub mod hsa;
#[cfg(not(loom))]
pub mod logging;
#[cfg(not(loom))]
pub mod memory_snapshot;
#[cfg(not(loom))]
pub mod memory_tracker;
#[cfg(not(loom))]
pub mod replay;
#[cfg(not(loom))]
pub mod stats;
mod sync;

/// Under `--cfg loom` only the tracker's registries are built, on loom's
/// primitives, for the model checks in `tests/loom_inventory.rs`.
#[cfg(loom)]
pub mod memory_tracker {
    #[path = "executables.rs"]
    pub mod executables;
    #[path = "inventory.rs"]
    pub mod inventory;
    #[path = "registry.rs"]
    pub mod registry;
}
