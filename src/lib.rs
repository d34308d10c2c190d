//! kernel-replay: snapshot and restore of GPU device memory, so a profiler
//! can replay one kernel dispatch several times with identical inputs.
//!
//! It replaces rocprofiler-sdk's C++ `memory_tracker` and `memory_snapshot`
//! modules. A tool installs its allocation wrappers into the HSA API tables
//! ROCr hands it ([`install`]), turns tracking on ([`set_tracking`]), and
//! around a dispatch it replays takes a [`snap`]shot and restores it between
//! passes ([`Snapshot::restore`], or the whole window with [`replay`]).
//! The same library is a C ABI (`include/kernel_replay.h`, the [`ffi`]
//! module) for the C++ SDK.
//!
//! Layers, each using only those below it (`ARCHITECTURE.md`):
//! HSA bindings (`kernel-replay-hsa-sys`, [`hsa`]) → tracker (allocations,
//! mappings, executables; the wrappers) → snapshot (capture, restore,
//! storage, copies) → replay → this Rust API → the C ABI.

#![cfg_attr(not(loom), deny(missing_docs))]

#[cfg(not(loom))]
mod api;
#[cfg(not(loom))]
pub mod ffi;
#[cfg(not(loom))]
pub mod hsa;
#[cfg(not(loom))]
pub(crate) mod memory_snapshot;
#[cfg(not(loom))]
pub(crate) mod memory_tracker;
#[cfg(not(loom))]
pub(crate) mod replay;
pub(crate) mod support;
#[cfg(not(loom))]
#[doc(hidden)]
pub mod testing;

#[cfg(not(loom))]
pub use api::*;

#[doc(hidden)]
pub use kernel_replay_hsa_sys::with_vmem;

/// Under `--cfg loom` only the tracker's registries are built, on loom's
/// primitives, for the model checks in `tests/loom_inventory.rs`.
#[cfg(loom)]
pub mod memory_tracker {
    #[path = "executables.rs"]
    pub mod executables;
    #[path = "inventory.rs"]
    pub mod inventory;
    #[path = "kind.rs"]
    pub mod kind;
    #[path = "registry.rs"]
    pub mod registry;
}
