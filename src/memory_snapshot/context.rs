//! [`Context`]: the tracker and the snapshot state together, which every
//! snapshot and restore works on, and what needs both (the entries the
//! tracker captured, the executable iterator, making room for an
//! application allocation, the teardown).

use crate::hsa::entries::{AmdEntries, CoreEntries, IterateExecutablesFn};
use crate::memory_snapshot::state::{SnapshotState, SNAPSHOTS};
use crate::memory_snapshot::storage::Tier;
use crate::memory_tracker::Tracker;

/// The tracker and the snapshot state a snapshot or restore works on.
#[derive(Clone, Copy)]
pub struct Context {
    /// What is tracked, and the captured runtime entries.
    pub tracker: &'static Tracker,
    /// Storage, discovery cache, settings.
    pub state: &'static SnapshotState,
}

impl Context {
    /// The process's tracker and snapshot state.
    pub fn process() -> Context {
        Context {
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
            self.tracker
                .counters
                .arenas_released_for_application(released);
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
