//! The snapshot layer's process-wide state — how executables are listed,
//! where copies are kept (storage policy, budgets, retained arenas), what
//! discovery cached, whether copies are batched — and [`Env`], the tracker
//! and that state together, which every snapshot and restore works on.

use crate::support::sync::RecoverRw;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::RwLock;

use super::device::DeviceKernels;
use super::discovery_cache::DiscoveryCache;
use super::storage::arena::Storage;
use super::storage::Tier;
use crate::hsa::entries::{AmdEntries, CoreEntries, IterateExecutablesFn};
use crate::memory_tracker::Tracker;

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

    fn executable_iterator_set(&self) -> Option<IterateExecutablesFn> {
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

/// The tracker and the snapshot state a snapshot or restore works on.
#[derive(Clone, Copy)]
pub struct Env {
    /// What is tracked, and the captured runtime entries.
    pub tracker: &'static Tracker,
    /// Storage, discovery cache, settings.
    pub state: &'static SnapshotState,
}

impl Env {
    /// The process's tracker and snapshot state.
    pub fn process() -> Env {
        Env {
            tracker: &crate::memory_tracker::TRACKER,
            state: &SNAPSHOTS,
        }
    }

    /// The captured core entries, once a core table was installed.
    #[inline(always)]
    pub fn core(self) -> Option<&'static CoreEntries> {
        self.tracker.core()
    }

    /// The captured AMD-extension entries, once that table was installed.
    #[inline(always)]
    pub fn amd(self) -> Option<&'static AmdEntries> {
        self.tracker.amd()
    }

    /// How snapshots enumerate loaded executables: the iterator the tool
    /// set, else the AMD loader extension's own, asked of the runtime through
    /// the captured core table (as rocprofiler-sdk finds its loader table).
    /// Asked at every snapshot: one cheap call, and always the runtime's
    /// current answer.
    pub fn executable_iterator(self) -> Option<IterateExecutablesFn> {
        self.state.executable_iterator_set().or_else(|| {
            self.core()
                .and_then(CoreEntries::loader_executable_iterator)
        })
    }

    /// Releases the retained arenas that compete with an application
    /// allocation from `pool` the runtime just refused for lack of memory,
    /// so that it can be tried again: the device arenas of the pool's GPU,
    /// or the host arenas for a system pool (every arena when the pool's
    /// owner cannot be found). Returns the bytes released (0: nothing to
    /// retry for).
    pub fn make_room_for_application(self, pool: u64) -> u64 {
        let owner = self
            .core()
            .zip(self.amd())
            .and_then(|(core, amd)| crate::hsa::query::pool_owner(core, amd, pool));
        let released = self
            .state
            .storage
            .trim_where(self, |agent, tier| match owner {
                Some(owner) if owner.gpu => tier == Tier::Device && agent == owner.agent,
                Some(_) => tier != Tier::Device,
                None => true,
            });
        if released > 0 {
            self.tracker.stats.arenas_released_for_application(released);
            log::info!(
                "an application allocation failed for lack of memory: released {released} \
                 bytes of retained snapshot arenas and retried it"
            );
        }
        released
    }

    /// The teardown: retained arenas go back to the runtime now; arenas
    /// still leased go back when their snapshots are freed. (The tracker's
    /// own teardown, `memory_tracker::finalize`, destroys the signals.)
    pub fn finalize(self) {
        self.state.kernels.finalize();
        self.state.storage.trim(self);
        self.state.discovery_cache.clear();
    }
}
