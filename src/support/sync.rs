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

/// Taking a lock whose holder panicked: the data goes on being used.
///
/// No panic is expected inside the library (every export and wrapper is a
/// panic boundary), and none of its locks guards an invariant that a panic
/// half-way could break worse than giving up on the lock would: a poisoned
/// registry, fence or pool still describes what the runtime holds. So every
/// lock of the library is taken through these, never with `unwrap`.
pub trait Recover {
    /// The guard a write or exclusive lock gives.
    type Guard<'a>
    where
        Self: 'a;
    /// Locks (exclusively), recovering from poison.
    fn locked(&self) -> Self::Guard<'_>;
}

impl<T> Recover for std::sync::Mutex<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        T: 'a;
    fn locked(&self) -> Self::Guard<'_> {
        self.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Read and write locks of an `RwLock` (std's or loom's), recovering from
/// poison (see [`Recover`]).
pub trait RecoverRw<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T>;
    fn write_locked(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T> RecoverRw<T> for RwLock<T> {
    fn read_locked(&self) -> RwLockReadGuard<'_, T> {
        self.read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    fn write_locked(&self) -> RwLockWriteGuard<'_, T> {
        self.write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A `Mutex` locked through [`Recover`] (a shorthand for free functions).
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.locked()
}
