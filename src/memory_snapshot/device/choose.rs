//! Choosing, per snapshot, whether and how the device kernels move its
//! regions, and setting up what that needs.
//!
//! `Auto` (the default) takes the kernels where they pay, as measured on an
//! H200 (`bench/results/2026-12-02-h200-kernels-vs-cupti.md`):
//! - one scatter dispatch costs about as much as a handful of the runtime's
//!   copies (10,000 regions of 4 KiB: 0.58 ms against 58 ms of copies; four
//!   large regions: within 3% either way), so it is used from
//!   `SCATTER_MIN_REGIONS` regions the kernels can reach;
//! - dirty blocks hash the live memory at about 2.5 TB/s and move only
//!   changed blocks: for a snapshot kept mostly in pinned host memory a 4 GiB
//!   restore with 1% of blocks written is 42× faster than a full one (and an
//!   incremental snapshot 45×), so `Auto` takes them from
//!   `DIRTY_MIN_PINNED_BYTES` when the pinned tier holds at least as much as
//!   the device tier. For the device tier they pay only while few blocks
//!   change (1.36× faster with 1% written, 1.5× slower with all of them),
//!   which a snapshot cannot know in advance, and `Auto` keeps copies.
//!
//! A tool's batch-copy function, once registered, moves every batched
//! snapshot's reachable regions instead of the kernels, under any strategy
//! but `Copies`.

use super::batch::DeviceOutcome;
use super::plan::{blocks_of, BlockTable, DevicePlan, Mover};
use super::{CopyMethod, Strategy};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::context::Context;
use crate::memory_snapshot::snapshot::{kept_at, Captured};
use crate::memory_snapshot::storage::arena::Lease;
use crate::memory_snapshot::storage::Tier;
use crate::support::sync::Recover;

/// From how many kernel-reachable regions `Auto` uses one scatter dispatch.
pub(crate) const SCATTER_MIN_REGIONS: usize = 64;

/// From how many pinned-tier bytes `Auto` uses dirty blocks (when the
/// pinned tier holds at least as much as the device tier).
pub(crate) const DIRTY_MIN_PINNED_BYTES: u64 = 64 << 20;

/// The device kernels for a snapshot about to be copied in, or `None`:
/// copies only (the strategy says so, copies are not batched, too few
/// regions, or the kernels cannot run on the agent).
pub(crate) fn plan(cx: Context, captured: &mut Captured, agent: hsa_agent_t) -> Option<DevicePlan> {
    let wanted = cx.state.kernels.strategy();
    if wanted == Strategy::Copies || !captured.batch {
        return None;
    }
    let reachable = |tier: Tier| tier != Tier::Pageable;
    let count = captured
        .regions
        .iter()
        .filter(|r| reachable(r.tier()))
        .count();
    let tier_bytes = |tier: Tier| -> u64 {
        captured
            .regions
            .iter()
            .filter(|r| r.tier() == tier)
            .map(|r| r.size() as u64)
            .sum()
    };
    let dirty = wanted == Strategy::DirtyBlocks
        || (wanted == Strategy::Auto && {
            let pinned = tier_bytes(Tier::Pinned);
            pinned >= DIRTY_MIN_PINNED_BYTES && pinned >= tier_bytes(Tier::Device)
        });
    if count == 0 {
        return None;
    }
    if let Some(tool) = cx.state.kernels.tool_copy.get() {
        return Some(DevicePlan {
            mover: Mover::Tool(tool),
            method: CopyMethod::BatchCopy,
            incremental: false,
            blocks: None,
            first_blocks: Vec::new(),
        });
    }
    if wanted == Strategy::Auto && !dirty && count < SCATTER_MIN_REGIONS {
        return None;
    }
    let (core, amd) = (cx.core()?, cx.amd()?);
    let runner = cx.state.kernels.runner(core, amd, agent)?;
    let mut plan = DevicePlan {
        mover: Mover::Kernels(runner.clone()),
        method: CopyMethod::Scatter,
        incremental: false,
        blocks: None,
        first_blocks: Vec::new(),
    };
    if dirty {
        let total: usize = captured
            .regions
            .iter()
            .filter(|r| reachable(r.tier()))
            .map(|r| blocks_of(r.size()))
            .sum();
        let previous = captured.lease_stamps(Lease::previous);
        let current = captured.lease_stamps(Lease::stamp);
        if let Some(mut table) = BlockTable::take(&runner, core, amd, agent, total, previous) {
            let same_arenas = table.resize(total, previous, current);
            let (mut layout, mut first_blocks) = (Vec::new(), Vec::new());
            let count = captured.regions.len();
            let fits = layout.try_reserve_exact(count).is_ok()
                && first_blocks.try_reserve_exact(count).is_ok();
            let mut next = 0;
            for region in captured.regions.iter().filter(|_| fits) {
                if !reachable(region.tier()) || region.size() == 0 {
                    first_blocks.push(None);
                    continue;
                }
                let kept = kept_at(&captured.bases, region);
                layout.push([
                    region.device_address as u64,
                    kept as u64,
                    region.size() as u64,
                ]);
                first_blocks.push(Some(next));
                next += blocks_of(region.size());
            }
            let same_pairs = if fits { table.set_layout(layout) } else { None };
            match same_pairs {
                Some(same_pairs) => {
                    plan.blocks = Some(std::sync::Mutex::new(table));
                    plan.first_blocks = first_blocks;
                    plan.method = CopyMethod::DirtyBlocks;
                    plan.incremental = same_arenas && same_pairs;
                }
                None => {
                    runner.keep_table(table);
                    log::info!(
                        "no host memory for the dirty-block table; this snapshot uses one scatter dispatch"
                    );
                }
            }
        } else {
            log::info!(
                "no memory for the dirty-block table; this snapshot uses one scatter dispatch"
            );
        }
    }
    Some(plan)
}

/// After the capture's copies: records what the kernels did in the
/// snapshot (`DeviceUse::ran`: nothing when no dispatch ran or it fell back).
/// A successful dirty-block capture leaves hashes that describe its arenas;
/// a failed kernel capture leaves hashes that cannot be trusted (and a
/// queue that faulted), so the snapshot restores with copies.
pub(crate) fn captured(cx: Context, captured: &mut Captured, outcome: &DeviceOutcome) {
    let dispatched = outcome.regions > 0 && !outcome.fell_back;
    captured.device.ran = if dispatched {
        *outcome
    } else {
        DeviceOutcome::default()
    };
    if let (true, Some(table)) = (
        dispatched,
        captured
            .device
            .plan
            .as_ref()
            .and_then(|p| p.blocks.as_ref()),
    ) {
        let stamps = captured.lease_stamps(Lease::stamp);
        table.locked().describes = Some(stamps);
    }
    // The tool's function is asked again at restore (its failure says
    // nothing about its next call); the kernels' is not.
    if outcome.fell_back && outcome.method != CopyMethod::BatchCopy {
        log::warn!("the device kernels failed during a capture; the snapshot restores with copies");
        captured.device.plan = None;
    }
    outcome.count(&cx.tracker.counters);
}
