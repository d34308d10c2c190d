//! Restore: writing a snapshot back between passes.
//!
//! Tracked regions are re-validated under the inventory's read lock and
//! written under the same lock, so a concurrent free can neither slip between
//! the check and the write nor hand the address to a new allocation that the
//! snapshot would then overwrite. Module variables are written while their
//! executable is still loaded (with the registry) or directly (without). A
//! failed copy is reported and skipped; the other regions are still restored.
//!
//! The baseline writes region by region with blocking copies, taking the
//! lock per region; arena snapshots hold the locks across one batch of
//! copies and wait for all of them before releasing.

use crate::memory_snapshot::copy::{copy_now, copy_on_agent};
use crate::memory_tracker::kind::MemoryKind;
use crate::memory_tracker::managed;
use std::time::Instant;

use log::warn;

use super::capture::{fence_windows, WindowsRefused};
use super::device::batch::DeviceOutcome;
use super::snapshot::{copy_live_regions, Captured, Origin, Region, Snapshot};
use super::verify::{verify, VerifyOutcome};
use crate::hsa::hsa_status_t;
use crate::memory_snapshot::context::Context;

/// What one restore did, region by region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Regions written back.
    pub restored: usize,
    /// Tracked regions no longer the captured allocation (freed, or the
    /// address reused), variables of an unloaded executable, or everything
    /// after the teardown guard.
    pub skipped_not_live: usize,
    /// Copies the runtime refused.
    pub failed: usize,
    /// Whether the library could vouch for what it skipped: false for a
    /// declined snapshot, after `kr_finalize`, and when the wrappers were
    /// found taken out of the tables (frees may have gone unseen, so
    /// nothing tracked could be proven live and nothing tracked was written).
    pub(crate) vouched: bool,
    /// What the device kernels did (strategy `Copies`: nothing).
    pub device: DeviceOutcome,
    /// Verify mode: what the byte-by-byte check found.
    pub verify: Option<VerifyOutcome>,
}

impl RestoreReport {
    /// The SDK's `restore` answer: every region still the captured one was
    /// written back (regions freed since are skipped, an empty snapshot is
    /// complete), no copy failed, and the skips could be vouched for.
    pub fn complete(&self) -> bool {
        self.vouched && self.failed == 0 && self.verify.is_none_or(|v| v.mismatched_regions == 0)
    }
}

/// At most this many regions are named one log line each per restore; the
/// rest are counted in one more line.
const LOGGED_REGIONS: usize = 8;

/// Writes every region of `snapshot` back. A declined snapshot writes nothing.
pub fn restore(cx: Context, snapshot: &Snapshot) -> RestoreReport {
    let Ok(captured) = &snapshot.outcome else {
        return RestoreReport::default();
    };
    let started = Instant::now();
    // Every path below says whether the skips can be vouched for.
    let mut report = RestoreReport::default();
    let mut log = Log::default();
    if cx.tracker.gate.finalized() {
        report.vouched = false;
        // After the teardown guard the free wrappers no longer retire, so a
        // tracked region can no longer be proven live.
        report.skipped_not_live = captured.regions.len();
        if !captured.regions.is_empty() {
            warn!(
                "restore after kr_finalize: {} region(s) not written",
                captured.regions.len()
            );
        }
        return report;
    }
    // Wrappers taken out: what was tracked is dropped, so every tracked
    // region is skipped below, unwritten, and the skips cannot be vouched for.
    report.vouched = crate::memory_tracker::wrappers_in_place(cx.tracker);
    // No application copy may write the agent's tracked memory while it is
    // restored; if those in flight do not finish in time, nothing is
    // written (a pass on half-restored memory would count wrong).
    let tracked = captured.regions.iter().filter_map(|r| match &r.origin {
        Origin::Tracked(tracked) => Some(tracked),
        Origin::ModuleVariable(_) => None,
    });
    // Held until the restore's copies are done.
    let _windows = match fence_windows(cx, snapshot.agent, tracked) {
        Ok(windows) => windows,
        Err(refused) => {
            report.vouched = false;
            report.failed = captured.regions.len();
            match refused {
                WindowsRefused::InFlight(_) => warn!(
                    "restore of agent {:#x} not done: application async copies on its tracked \
                 memory were still in flight after {} ms",
                    snapshot.agent.handle,
                    cx.tracker.fences.timeout().as_millis()
                ),
                WindowsRefused::Memory => warn!(
                    "restore of agent {:#x} not done: no host memory to hold back application \
                 copies into its peer memory",
                    snapshot.agent.handle
                ),
            }
            return report;
        }
    };
    let batched =
        captured.batch && restore_batched(cx, snapshot, captured, &mut report, &mut log).is_some();
    if !batched {
        for region in &captured.regions {
            let outcome = restore_one(cx, snapshot, captured, region);
            log.record(region, outcome, &mut report);
        }
    }
    if cx.state.verify() {
        report.verify = Some(verify(cx, captured, snapshot.agent, false));
    }
    log.emit(&report);
    let bytes = captured
        .regions
        .iter()
        .map(|r| r.size() as u64)
        .sum::<u64>();
    cx.tracker.counters.restored(
        report.restored,
        report.skipped_not_live,
        report.failed,
        bytes,
        started.elapsed().as_nanos() as u64,
    );
    report
}

/// One region, blocking, with its own validation under the lock.
fn restore_one(
    cx: Context,
    snapshot: &Snapshot,
    captured: &Captured,
    region: &Region,
) -> Option<Result<(), hsa_status_t>> {
    let write = || {
        let transfer = captured.transfer(snapshot.agent, region, true);
        if transfer.gpu_only {
            // SAFETY: as below; managed memory goes through the agent.
            return unsafe { copy_on_agent(cx, captured.core, &transfer) };
        }
        // SAFETY: the source is the snapshot's own copy; the destination is
        // live (checked under the lock held around this call).
        unsafe {
            copy_now(
                captured.core,
                transfer.dst,
                transfer.src,
                transfer.size,
                transfer.by_cpu,
            )
        }
    };
    match region.origin {
        // Managed memory: also still there, and reachable by the agent
        // (ROCm 6.x unmaps it with no HSA call).
        Origin::Tracked(ref tracked) if tracked.memory == MemoryKind::Managed => cx
            .tracker
            .inventory
            .with_live(tracked, || {
                let still = cx.amd().is_some_and(|amd| {
                    managed::capturable(amd, tracked.base, tracked.size, snapshot.agent)
                        == managed::Capturable::Yes
                });
                still.then(write)
            })
            .flatten(),
        Origin::Tracked(ref tracked) => cx.tracker.inventory.with_live(tracked, write),
        Origin::ModuleVariable(Some(exe)) => {
            let loaded = cx.tracker.executables.live_view();
            loaded.contains(exe).then(write)
        }
        Origin::ModuleVariable(None) => Some(write()),
    }
}

/// Every region in one batch, with both locks held until all copies have
/// finished. `None` if the batch could not be set up (no memory for its
/// bookkeeping): the caller then restores region by region.
fn restore_batched(
    cx: Context,
    snapshot: &Snapshot,
    captured: &Captured,
    report: &mut RestoreReport,
    log: &mut Log,
) -> Option<()> {
    let (outcomes, device) =
        copy_live_regions(cx, captured, snapshot.agent, true, true, |index| {
            log.record(&captured.regions[index], None, report)
        })?;
    device.count(&cx.tracker.counters);
    report.device = device;
    report.restored += outcomes.succeeded;
    for (index, status) in outcomes.failures {
        if let Some(region) = captured.regions.get(index) {
            log.record(region, Some(Err(status)), report);
        }
    }
    Some(())
}

/// Counts outcomes and remembers the first few regions worth a warning, so
/// the warnings are written after the locks are released (a log callback may
/// call back into the library).
#[derive(Default)]
struct Log {
    skipped: [(usize, usize); LOGGED_REGIONS],
    failed: [(usize, usize, hsa_status_t); LOGGED_REGIONS],
}

impl Log {
    fn record(
        &mut self,
        region: &Region,
        outcome: Option<Result<(), hsa_status_t>>,
        report: &mut RestoreReport,
    ) {
        match outcome {
            Some(Ok(())) => report.restored += 1,
            None => {
                if let Some(slot) = self.skipped.get_mut(report.skipped_not_live) {
                    *slot = (region.device_address, region.size());
                }
                report.skipped_not_live += 1;
            }
            Some(Err(status)) => {
                if let Some(slot) = self.failed.get_mut(report.failed) {
                    *slot = (region.device_address, region.size(), status);
                }
                report.failed += 1;
            }
        }
    }

    fn emit(&self, report: &RestoreReport) {
        for &(address, size) in self.skipped.iter().take(report.skipped_not_live) {
            warn!("restore skipped region {address:#x} ({size} bytes): no longer the captured allocation");
        }
        if report.skipped_not_live > LOGGED_REGIONS {
            warn!(
                "restore skipped {} more region(s)",
                report.skipped_not_live - LOGGED_REGIONS
            );
        }
        for &(address, size, status) in self.failed.iter().take(report.failed) {
            warn!(
                "restore of region {address:#x} ({size} bytes) failed with HSA status {status:#x}"
            );
        }
        if report.failed > LOGGED_REGIONS {
            warn!(
                "restore failed for {} more region(s)",
                report.failed - LOGGED_REGIONS
            );
        }
    }
}
