//! The snapshot layer's process-wide state: how executables are listed,
//! where copies are kept (storage policy, budgets, retained arenas), what
//! discovery cached, whether copies are batched. (`context.rs` pairs it with
//! the tracker for every snapshot and restore.)

use super::host_memory::{Coverage, HostMemory};
use super::shared::SharedClaims;
use std::sync::RwLock;

use super::device::DeviceKernels;
use super::discovery_cache::DiscoveryCache;
use super::storage::arena::Storage;
use crate::hsa::entries::IterateExecutablesFn;
use crate::support::settings::{self, Setting};
use crate::support::sync::RecoverRw;

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
    /// Batched copies (`KERNEL_REPLAY_COPY`).
    batch_copies: Setting,
    /// Verify mode (`KERNEL_REPLAY_VERIFY`).
    verify: Setting,
    /// Shared regions held by live snapshots (`shared.rs`).
    pub shared: SharedClaims,
    /// Which host memory is captured (`KERNEL_REPLAY_HOST_MEMORY`).
    host_memory: Setting,
    /// Strict or warning coverage (`KERNEL_REPLAY_COVERAGE`).
    coverage: Setting,
}

/// The snapshot state of the process.
pub static SNAPSHOTS: SnapshotState = SnapshotState::new();

impl SnapshotState {
    /// Defaults: the loader's iterator, the storage policy of the
    /// environment, batched copies unless `KERNEL_REPLAY_COPY=blocking`.
    pub const fn new() -> Self {
        SnapshotState {
            executable_iterator: RwLock::new(None),
            storage: Storage::new(),
            discovery_cache: DiscoveryCache::new(),
            kernels: DeviceKernels::new(),
            batch_copies: Setting::new(&settings::COPY),
            verify: Setting::new(&settings::VERIFY),
            shared: SharedClaims::new(),
            host_memory: Setting::new(&settings::HOST_MEMORY),
            coverage: Setting::new(&settings::COVERAGE),
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
        self.batch_copies.code() == 1
    }

    /// Whether each restore is checked byte by byte (`verify.rs`): off
    /// unless `set_verify(true)` or `KERNEL_REPLAY_VERIFY=1`.
    pub fn verify(&self) -> bool {
        self.verify.code() == 1
    }

    /// Turns verify mode on or off.
    pub fn set_verify(&self, enabled: bool) {
        self.verify.set(u8::from(enabled));
    }

    /// Turns batched copies on or off.
    pub fn set_batch_copies(&self, enabled: bool) {
        self.batch_copies.set(u8::from(enabled));
    }

    /// Which host memory snapshots capture, as set (`Auto` unresolved).
    pub fn host_memory(&self) -> HostMemory {
        HostMemory::from_code(u32::from(self.host_memory.code())).unwrap_or(HostMemory::Auto)
    }

    pub fn set_host_memory(&self, rule: HostMemory) {
        self.host_memory.set(rule.code() as u8);
    }

    pub fn coverage(&self) -> Coverage {
        Coverage::from_code(u32::from(self.coverage.code())).unwrap_or(Coverage::Warn)
    }

    pub fn set_coverage(&self, coverage: Coverage) {
        self.coverage.set(coverage.code() as u8);
    }

    /// Reads the settings the environment gives (storage policy, copy
    /// engine) now rather than at the first snapshot: reading them
    /// allocates, and a snapshot may run under memory pressure.
    pub fn read_environment(&self) {
        self.storage.policy.get();
        self.batch_copies();
        self.kernels.strategy();
        self.verify();
        self.host_memory();
        self.coverage();
        settings::warn_about_unknown_variables();
    }
}

impl Default for SnapshotState {
    fn default() -> Self {
        Self::new()
    }
}
