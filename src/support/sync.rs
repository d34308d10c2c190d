//! The synchronisation primitives of the tracker, swappable for loom's.
//!
//! Built with `RUSTFLAGS="--cfg loom"`, the tracker's registries use loom's
//! models of these types, and `tests/loom_inventory.rs` explores every
//! interleaving of the retire-before-free and copy-under-read-lock protocol.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
#[cfg(loom)]
pub use loom::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
#[cfg(not(loom))]
pub use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
