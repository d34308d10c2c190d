//! The snapshot layer's process-wide state: how executables are listed,
//! where copies are kept (storage policy, budgets, retained arenas), what
//! discovery cached, whether copies are batched. (`context.rs` pairs it with
//! the tracker for every snapshot and restore.)

use crate::support::sync::RecoverRw;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::RwLock;

use super::device::DeviceKernels;
use super::discovery_cache::DiscoveryCache;
use super::storage::arena::Storage;
use crate::hsa::entries::IterateExecutablesFn;

/// See the module documentation.
pub struct SnapshotState {
    /// The executable iterator a tool set, which overrides the loader's.
    executable_iterator: RwLock<Option<IterateExecutablesFn>>,
    /// Storage policy, budgets, retained arenas.
    pub storage: Storage,
    /// Module variables of loaded executables, per agent.
    pub discovery_cache: DiscoveryCache,
    /// The library's own kernels, per agent, and the strategy.
    pub kernels: DeviceKernels,
    /// Batched copies: unresolved (read `KERNEL_REPLAY_COPY`), on, or off.
    batch_copies: AtomicU8,
    /// Verify mode: unresolved (read `KERNEL_REPLAY_VERIFY`), on, or off.
    verify: AtomicU8,
}

/// The snapshot state of the process.
pub static SNAPSHOTS: SnapshotState = SnapshotState::new();

const UNRESOLVED: u8 = u8::MAX;

impl SnapshotState {
    /// Defaults: the loader's iterator, the storage policy of the
    /// environment, batched copies unless `KERNEL_REPLAY_COPY=blocking`.
    pub const fn new() -> Self {
        SnapshotState {
            executable_iterator: RwLock::new(None),
            storage: Storage::new(),
            discovery_cache: DiscoveryCache::new(),
            kernels: DeviceKernels::new(),
            batch_copies: AtomicU8::new(UNRESOLVED),
            verify: AtomicU8::new(UNRESOLVED),
        }
    }

    /// Sets the executable iterator snapshots use instead of the runtime
    /// loader's own; `None` goes back to the loader's.
    pub fn set_executable_iterator(&self, iterate: Option<IterateExecutablesFn>) {
        *self.executable_iterator.write_locked() = iterate;
    }

    pub(crate) fn executable_iterator_set(&self) -> Option<IterateExecutablesFn> {
        *self.executable_iterator.read_locked()
    }

    /// Whether copies are batched where the runtime can: on unless
    /// `set_batch_copies(false)` or `KERNEL_REPLAY_COPY=blocking`.
    pub fn batch_copies(&self) -> bool {
        match self.batch_copies.load(Ordering::Acquire) {
            UNRESOLVED => {
                let blocking = std::env::var("KERNEL_REPLAY_COPY")
                    .is_ok_and(|v| v.trim().eq_ignore_ascii_case("blocking"));
                let _ = self.batch_copies.compare_exchange(
                    UNRESOLVED,
                    u8::from(!blocking),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.batch_copies.load(Ordering::Acquire) == 1
            }
            value => value == 1,
        }
    }

    /// Whether each restore is checked byte by byte (`verify.rs`): off
    /// unless `set_verify(true)` or `KERNEL_REPLAY_VERIFY=1`.
    pub fn verify(&self) -> bool {
        match self.verify.load(Ordering::Acquire) {
            UNRESOLVED => {
                let on = std::env::var("KERNEL_REPLAY_VERIFY")
                    .is_ok_and(|v| matches!(v.trim(), "1" | "on" | "true" | "yes"));
                let _ = self.verify.compare_exchange(
                    UNRESOLVED,
                    u8::from(on),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.verify.load(Ordering::Acquire) == 1
            }
            value => value == 1,
        }
    }

    /// Turns verify mode on or off.
    pub fn set_verify(&self, enabled: bool) {
        self.verify.store(u8::from(enabled), Ordering::Release);
    }

    /// Turns batched copies on or off.
    pub fn set_batch_copies(&self, enabled: bool) {
        self.batch_copies
            .store(u8::from(enabled), Ordering::Release);
    }

    /// Reads the settings the environment gives (storage policy, copy
    /// engine) now rather than at the first snapshot: reading them
    /// allocates, and a snapshot may run under memory pressure.
    pub fn read_environment(&self) {
        self.storage.policy.get();
        self.batch_copies();
        self.kernels.strategy();
        self.verify();
    }
}

impl Default for SnapshotState {
    fn default() -> Self {
        Self::new()
    }
}
