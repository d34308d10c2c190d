//! Cumulative counters, readable through `kr_get_stats`: what snapshots and
//! restores did, and how long they took.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::memory_snapshot::DeclineReason;

/// Declines are counted per reason, indexed by `kr_decline_reason_t`.
pub const DECLINE_SLOTS: usize = 10;

pub struct Stats {
    pub snapshots: AtomicU64,
    pub declines: [AtomicU64; DECLINE_SLOTS],
    pub bytes_captured: AtomicU64,
    pub snap_ns: AtomicU64,
    pub restores: AtomicU64,
    pub regions_restored: AtomicU64,
    pub regions_skipped: AtomicU64,
    pub regions_failed: AtomicU64,
    pub bytes_restored: AtomicU64,
    pub restore_ns: AtomicU64,
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub snapshots: u64,
    pub declines: [u64; DECLINE_SLOTS],
    pub bytes_captured: u64,
    pub snap_ns: u64,
    pub restores: u64,
    pub regions_restored: u64,
    pub regions_skipped: u64,
    pub regions_failed: u64,
    pub bytes_restored: u64,
    pub restore_ns: u64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);

impl Stats {
    pub const fn new() -> Self {
        Stats {
            snapshots: ZERO,
            declines: [ZERO; DECLINE_SLOTS],
            bytes_captured: ZERO,
            snap_ns: ZERO,
            restores: ZERO,
            regions_restored: ZERO,
            regions_skipped: ZERO,
            regions_failed: ZERO,
            bytes_restored: ZERO,
            restore_ns: ZERO,
        }
    }

    pub fn snapshot_taken(&self, bytes: u64, nanos: u64) {
        self.snapshots.fetch_add(1, Relaxed);
        self.bytes_captured.fetch_add(bytes, Relaxed);
        self.snap_ns.fetch_add(nanos, Relaxed);
    }

    pub fn snapshot_declined(&self, reason: DeclineReason, nanos: u64) {
        self.declines[reason.code() as usize].fetch_add(1, Relaxed);
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

    pub fn read(&self) -> StatsSnapshot {
        StatsSnapshot {
            snapshots: self.snapshots.load(Relaxed),
            declines: std::array::from_fn(|i| self.declines[i].load(Relaxed)),
            bytes_captured: self.bytes_captured.load(Relaxed),
            snap_ns: self.snap_ns.load(Relaxed),
            restores: self.restores.load(Relaxed),
            regions_restored: self.regions_restored.load(Relaxed),
            regions_skipped: self.regions_skipped.load(Relaxed),
            regions_failed: self.regions_failed.load(Relaxed),
            bytes_restored: self.bytes_restored.load(Relaxed),
            restore_ns: self.restore_ns.load(Relaxed),
        }
    }

    pub fn reset(&self) {
        for counter in [
            &self.snapshots,
            &self.bytes_captured,
            &self.snap_ns,
            &self.restores,
            &self.regions_restored,
            &self.regions_skipped,
            &self.regions_failed,
            &self.bytes_restored,
            &self.restore_ns,
        ]
        .into_iter()
        .chain(self.declines.iter())
        {
            counter.store(0, Relaxed);
        }
    }
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}
