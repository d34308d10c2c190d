//! Cumulative counters, readable through `kr_get_stats` / `kr_get_stats2`:
//! what snapshots and restores did and how long they took, what the
//! async-copy fence did, and what the library gave back to the application.
//!
//! One list of counters (`counters!` below) makes the atomic set, its copy,
//! the reset and the read, so a new counter is one line.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::memory_snapshot::coverage::NotCovered;

/// Declines are counted per reason, indexed by `kr_decline_reason_t`. Room
/// for reasons yet to come: codes are only ever appended.
pub(crate) const DECLINE_SLOTS: usize = 32;

/// Captured bytes are counted per memory kind, indexed by
/// `kr_memory_kind_t`. Room for kinds yet to come: codes are only ever
/// appended.
pub(crate) const KIND_SLOTS: usize = 8;

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),+ $(,)?) => {
        /// The counters, updated with relaxed atomics.
        pub struct AtomicCounters {
            /// Declines per reason code.
            pub declines: [AtomicU64; DECLINE_SLOTS],
            /// Bytes captured by complete snapshots per memory kind code.
            pub bytes_captured_by_kind: [AtomicU64; KIND_SLOTS],
            /// Bytes complete snapshots left uncovered per memory kind code.
            pub bytes_not_covered_by_kind: [AtomicU64; KIND_SLOTS],
            $($(#[$doc])* pub $name: AtomicU64,)+
        }

        /// A copy of the counters.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Counters {
            /// Declined snapshots per reason, indexed by its code
            /// (`DeclineReason::code`).
            pub declines: [u64; DECLINE_SLOTS],
            /// Bytes captured by complete snapshots per memory kind, indexed
            /// by its code (`MemoryKind::code`).
            pub bytes_captured_by_kind: [u64; KIND_SLOTS],
            /// Bytes of memory the agent could write that complete snapshots
            /// left uncovered (the host-memory setting), per memory kind.
            pub bytes_not_covered_by_kind: [u64; KIND_SLOTS],
            $($(#[$doc])* pub $name: u64,)+
        }

        #[allow(clippy::declare_interior_mutable_const)]
        const ZERO: AtomicU64 = AtomicU64::new(0);

        impl AtomicCounters {
            pub const fn new() -> Self {
                AtomicCounters {
                    declines: [ZERO; DECLINE_SLOTS],
                    bytes_captured_by_kind: [ZERO; KIND_SLOTS],
                    bytes_not_covered_by_kind: [ZERO; KIND_SLOTS],
                    $($name: ZERO,)+
                }
            }

            pub fn read(&self) -> Counters {
                Counters {
                    declines: std::array::from_fn(|i| self.declines[i].load(Relaxed)),
                    bytes_captured_by_kind: std::array::from_fn(|i| {
                        self.bytes_captured_by_kind[i].load(Relaxed)
                    }),
                    bytes_not_covered_by_kind: std::array::from_fn(|i| {
                        self.bytes_not_covered_by_kind[i].load(Relaxed)
                    }),
                    $($name: self.$name.load(Relaxed),)+
                }
            }

            pub fn reset(&self) {
                for counter in self
                    .declines
                    .iter()
                    .chain(&self.bytes_captured_by_kind)
                    .chain(&self.bytes_not_covered_by_kind)
                {
                    counter.store(0, Relaxed);
                }
                $(self.$name.store(0, Relaxed);)+
            }
        }
    };
}

/// Adds each non-zero figure to its counter.
fn add_each(counters: &[AtomicU64; KIND_SLOTS], figures: &[u64; KIND_SLOTS]) {
    for (counter, &bytes) in counters.iter().zip(figures) {
        if bytes != 0 {
            counter.fetch_add(bytes, Relaxed);
        }
    }
}

counters! {
    /// Complete snapshots taken.
    snapshots,
    /// Bytes captured by complete snapshots.
    bytes_captured,
    /// Nanoseconds spent in snapshots (complete and declined).
    snap_ns,
    /// Restores of complete snapshots.
    restores,
    /// Regions those restores wrote back.
    regions_restored,
    /// Regions they skipped: no longer what was captured.
    regions_skipped,
    /// Regions whose copy failed.
    regions_failed,
    /// Bytes of the regions those restores covered.
    bytes_restored,
    /// Nanoseconds spent in restores.
    restore_ns,
    /// Application async copies that went through the fence.
    fenced_copies,
    /// Snapshots and restores that had to wait for copies in flight.
    fence_waits,
    /// Of those, the ones whose copies did not finish in time.
    fence_timeouts,
    /// Times the retained arenas were released for an application
    /// allocation the runtime refused for lack of memory.
    application_retries,
    /// Bytes released for those retries.
    bytes_released_for_application,
    /// Device memory in use on the agent of the last snapshot that its
    /// snapshot did not cover (`kr_untracked_device_bytes`).
    untracked_device_bytes,
    /// Captures and restores whose regions went in one scatter dispatch.
    scatter_dispatches,
    /// Captures and restores that compared dirty blocks.
    dirty_block_dispatches,
    /// Blocks those dispatches compared.
    blocks_compared,
    /// Of those, blocks copied (changed, or the capture's first copy).
    blocks_copied,
    /// Device-kernel dispatches that failed; their regions were copied.
    kernel_fallbacks,
    /// Restores checked byte by byte (verify mode).
    verified_restores,
    /// Regions those checks found different from their snapshot.
    verify_mismatched_regions,
    /// Bytes those checks found different.
    verify_mismatched_bytes,
    /// Snapshots that copied only the blocks changed since the agent's
    /// previous snapshot into the same arenas.
    incremental_snapshots,
    /// Incremental snapshots checked byte by byte (verify mode); their
    /// differences count in `verify_mismatched_*`.
    verified_captures,
    /// Calls of the tool's batch-copy function (`kr_set_batch_copy`).
    batch_copy_calls,
    /// Of those, calls that failed; their regions were copied.
    batch_copy_failures,
    /// Complete snapshots taken while XNACK was on (any system memory
    /// writable by kernels, none of it covered).
    snapshots_with_xnack,
}

impl AtomicCounters {
    /// A complete snapshot and its bytes per memory kind code.
    pub fn snapshot_taken(
        &self,
        bytes_by_kind: &[u64; KIND_SLOTS],
        not_covered: &NotCovered,
        nanos: u64,
    ) {
        self.snapshots.fetch_add(1, Relaxed);
        self.bytes_captured
            .fetch_add(bytes_by_kind.iter().sum(), Relaxed);
        add_each(&self.bytes_captured_by_kind, bytes_by_kind);
        add_each(&self.bytes_not_covered_by_kind, &not_covered.bytes);
        if not_covered.system_memory {
            self.snapshots_with_xnack.fetch_add(1, Relaxed);
        }
        self.snap_ns.fetch_add(nanos, Relaxed);
    }

    /// A declined snapshot, counted under its reason's code.
    pub fn snapshot_declined(&self, reason_code: u32, nanos: u64) {
        if let Some(slot) = self.declines.get(reason_code as usize) {
            slot.fetch_add(1, Relaxed);
        }
        self.snap_ns.fetch_add(nanos, Relaxed);
    }

    pub fn restored(&self, restored: usize, skipped: usize, failed: usize, bytes: u64, nanos: u64) {
        self.restores.fetch_add(1, Relaxed);
        self.regions_restored.fetch_add(restored as u64, Relaxed);
        self.regions_skipped.fetch_add(skipped as u64, Relaxed);
        self.regions_failed.fetch_add(failed as u64, Relaxed);
        self.bytes_restored.fetch_add(bytes, Relaxed);
        self.restore_ns.fetch_add(nanos, Relaxed);
    }

    /// One capture's or restore's use of the device kernels: a dirty-block
    /// compare (`dirty`) or a scatter copy, the blocks it compared and
    /// copied, and whether it failed and the copies stood in.
    pub fn device_kernels_ran(
        &self,
        dirty: bool,
        incremental: bool,
        compared: u64,
        copied: u64,
        fell_back: bool,
    ) {
        if fell_back {
            self.kernel_fallbacks.fetch_add(1, Relaxed);
            return;
        }
        if incremental {
            self.incremental_snapshots.fetch_add(1, Relaxed);
        }
        if dirty {
            self.dirty_block_dispatches.fetch_add(1, Relaxed);
            self.blocks_compared.fetch_add(compared, Relaxed);
            self.blocks_copied.fetch_add(copied, Relaxed);
        } else {
            self.scatter_dispatches.fetch_add(1, Relaxed);
        }
    }

    /// One call of the tool's batch-copy function; `failed`: its regions
    /// were copied by the library instead.
    pub fn tool_copied(&self, failed: bool) {
        self.batch_copy_calls.fetch_add(1, Relaxed);
        if failed {
            self.batch_copy_failures.fetch_add(1, Relaxed);
        }
    }

    /// One verified restore (or incremental capture, `capture`): the
    /// regions and bytes found different.
    pub fn verified(&self, capture: bool, regions: u64, bytes: u64) {
        if capture {
            self.verified_captures.fetch_add(1, Relaxed);
        } else {
            self.verified_restores.fetch_add(1, Relaxed);
        }
        self.verify_mismatched_regions.fetch_add(regions, Relaxed);
        self.verify_mismatched_bytes.fetch_add(bytes, Relaxed);
    }

    pub fn arenas_released_for_application(&self, bytes: u64) {
        self.application_retries.fetch_add(1, Relaxed);
        self.bytes_released_for_application
            .fetch_add(bytes, Relaxed);
    }

    /// A window that waited for copies; `timed_out` if they did not finish.
    pub fn fence_waited(&self, timed_out: bool) {
        self.fence_waits.fetch_add(1, Relaxed);
        if timed_out {
            self.fence_timeouts.fetch_add(1, Relaxed);
        }
    }
}

impl Default for AtomicCounters {
    fn default() -> Self {
        Self::new()
    }
}
