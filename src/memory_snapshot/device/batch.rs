//! One capture's or restore's use of the device kernels, inside
//! `copy_live_regions`: the regions the kernels take are collected while the
//! region list is walked under the tracker's read views, then moved by one
//! dispatch before the views are released — a scatter copy of (destination,
//! source, size) records, or for dirty blocks a compare-and-copy over the
//! snapshot's block table — or by one call of the tool's batch-copy
//! function (`tool_copy.rs`). If the dispatch or call fails, every region it
//! took is copied by the copier instead, so the outcome is the same bytes
//! either way.

use crate::support::sync::Recover;
use std::sync::MutexGuard;

use super::abi::{
    kr_compare_copy_args, kr_copy_record, kr_scatter_copy_args, KR_BLOCKS_PER_GROUP,
    KR_COMPARE_FORCE_COPY, KR_COMPARE_HASH_SRC, KR_COMPARE_SWAP, KR_COMPARE_UPDATE_HASH,
    KR_MAX_RECORD_BYTES,
};
use super::plan::{blocks_of, BlockTable, DevicePlan, Mover};
use super::runner::Runner;
use super::tool_copy::{BatchCopyFn, CopyDirection, CopyRegion};
use super::{CopyMethod, Kernel};
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::copy::{Copier, Transfer};

/// What the kernels did in one capture or restore.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceOutcome {
    /// What moved the kernels' regions (`Copies` when none).
    pub method: CopyMethod,
    /// Regions the kernels moved.
    pub regions: usize,
    /// Dirty blocks: blocks compared, and of those copied.
    pub blocks_compared: u64,
    /// See `blocks_compared`.
    pub blocks_copied: u64,
    /// The dispatch failed and the copier moved its regions instead.
    pub fell_back: bool,
    /// A capture that copied only the blocks changed since the previous
    /// one (`DevicePlan::incremental`).
    pub incremental: bool,
}

/// See the module documentation.
pub(crate) struct DeviceBatch<'p> {
    plan: Option<&'p DevicePlan>,
    agent: hsa_agent_t,
    blocks: Option<MutexGuard<'p, BlockTable>>,
    to_device: bool,
    /// The regions taken, with their transfers (for the fallback).
    taken: Vec<(usize, Transfer)>,
}

impl DeviceOutcome {
    /// Counts this outcome in the stats (nothing when no kernel ran).
    pub(crate) fn count(&self, stats: &crate::support::stats::AtomicCounters) {
        if self.method == CopyMethod::BatchCopy {
            stats.tool_copied(self.fell_back);
        } else if self.regions > 0 {
            stats.device_kernels_ran(
                self.method == CopyMethod::DirtyBlocks,
                self.incremental,
                self.blocks_compared,
                self.blocks_copied,
                self.fell_back,
            );
        }
    }
}

impl<'p> DeviceBatch<'p> {
    /// A batch for a capture (`to_device` false) or restore of a snapshot
    /// with `plan`, for up to `count` regions. `None` only when its
    /// bookkeeping cannot be allocated; without a plan it takes nothing.
    pub(crate) fn new(
        plan: Option<&'p DevicePlan>,
        agent: hsa_agent_t,
        to_device: bool,
        count: usize,
    ) -> Option<Self> {
        let mut taken = Vec::new();
        if plan.is_some() {
            taken.try_reserve_exact(count).ok()?;
        }
        Some(DeviceBatch {
            plan,
            agent,
            blocks: plan.and_then(|p| p.blocks.as_ref()).map(|b| b.locked()),
            to_device,
            taken,
        })
    }

    /// Takes a live region for the kernels if they can move it: its
    /// blocks are in the table (dirty blocks), or both sides are memory the
    /// agent reaches (scatter). False: the copier moves it.
    pub(crate) fn take(&mut self, index: usize, transfer: &Transfer) -> bool {
        let Some(plan) = self.plan else {
            return false;
        };
        let takes = match plan.method {
            CopyMethod::DirtyBlocks => plan.first_block(index).is_some() && self.blocks.is_some(),
            _ => transfer.async_ok && transfer.size > 0,
        };
        if takes {
            // Capacity for every region was reserved.
            self.taken.push((index, *transfer));
        }
        takes
    }

    /// Region `index`, no longer live: its blocks leave the table for good.
    pub(crate) fn drop_region(&mut self, index: usize, size: usize) {
        let first_block = self.plan.and_then(|plan| plan.first_block(index));
        if let (Some(first), Some(blocks)) = (first_block, self.blocks.as_mut()) {
            blocks.disable_region(first, size);
        }
    }

    /// Runs the dispatch for what was taken, or on failure copies it with
    /// `copier`. Call before the views are released.
    pub(crate) fn run(
        mut self,
        core: &'static CoreEntries,
        amd: &'static AmdEntries,
        copier: &mut Copier<'_>,
    ) -> DeviceOutcome {
        let Some(plan) = self.plan else {
            return DeviceOutcome::default();
        };
        if self.taken.is_empty() {
            return DeviceOutcome::default();
        }
        let mut outcome = DeviceOutcome {
            method: plan.method,
            regions: self.taken.len(),
            incremental: plan.incremental && !self.to_device,
            ..DeviceOutcome::default()
        };
        let ran = match (&plan.mover, self.blocks.as_mut()) {
            (Mover::Tool(tool), _) => {
                tool_copy(tool.as_ref(), self.agent, self.to_device, &self.taken)
            }
            (Mover::Kernels(runner), Some(blocks)) => {
                let taken_blocks = self
                    .taken
                    .iter()
                    .map(|(_, t)| blocks_of(t.size) as u64)
                    .sum();
                compare_copy(
                    plan,
                    runner,
                    core,
                    blocks,
                    self.to_device,
                    taken_blocks,
                    &mut outcome,
                )
            }
            (Mover::Kernels(runner), None) => scatter(runner, core, amd, &self.taken),
        };
        if ran.is_err() {
            outcome.fell_back = true;
            outcome.incremental = false;
            for (index, transfer) in &self.taken {
                // SAFETY: the caller holds the views that keep every taken
                // region live until the copier finishes.
                unsafe { copier.copy(*index, transfer) };
            }
        } else {
            copier.count_succeeded(self.taken.len());
        }
        outcome
    }
}

/// One scatter dispatch over the taken regions, split into records of at
/// most `KR_MAX_RECORD_BYTES`.
fn scatter(
    runner: &Runner,
    core: &'static CoreEntries,
    amd: &'static AmdEntries,
    taken: &[(usize, Transfer)],
) -> Result<(), ()> {
    let chunk = KR_MAX_RECORD_BYTES as usize;
    let count: usize = taken.iter().map(|(_, t)| t.size.div_ceil(chunk)).sum();
    let workgroups = u32::try_from(count).map_err(|_| ())?;
    let bytes = count * std::mem::size_of::<kr_copy_record>();
    let mut scratch = runner.scratch(core, amd, bytes).ok_or(())?;
    let buffer = scratch.as_mut().ok_or(())?;
    // SAFETY: host memory of at least `count` records, not in use by a
    // kernel (the last dispatch over it was waited for; the scratch lock
    // excludes another).
    let records = unsafe { buffer.host_slice_mut::<kr_copy_record>(count) };
    let mut next = 0;
    for (_, transfer) in taken {
        let mut offset = 0;
        while offset < transfer.size {
            let size = (transfer.size - offset).min(chunk);
            records[next] = kr_copy_record {
                dst: (transfer.dst + offset) as u64,
                src: (transfer.src + offset) as u64,
                size: size as u64,
            };
            next += 1;
            offset += size;
        }
    }
    let args = kr_scatter_copy_args {
        records: buffer.address() as *const kr_copy_record,
        count: count as u64,
    };
    runner
        .run(Kernel::ScatterCopy, &args, workgroups)
        .map_err(|_| ())
}

/// One compare-and-copy dispatch over the whole block table: at restore,
/// live blocks whose hash changed are written back; at capture, every block
/// is copied and hashed.
fn compare_copy(
    plan: &DevicePlan,
    runner: &Runner,
    core: &'static CoreEntries,
    blocks: &mut BlockTable,
    to_device: bool,
    taken_blocks: u64,
    outcome: &mut DeviceOutcome,
) -> Result<(), ()> {
    let workgroups =
        u32::try_from(blocks.count.div_ceil(KR_BLOCKS_PER_GROUP as usize)).map_err(|_| ())?;
    blocks.upload(core)?;
    // A capture hashes the live side and stores the new hashes; a first
    // capture copies every block, an incremental one only those changed.
    let flags = match (to_device, plan.incremental) {
        (true, _) => 0,
        (false, true) => KR_COMPARE_SWAP | KR_COMPARE_HASH_SRC | KR_COMPARE_UPDATE_HASH,
        (false, false) => {
            KR_COMPARE_SWAP | KR_COMPARE_HASH_SRC | KR_COMPARE_UPDATE_HASH | KR_COMPARE_FORCE_COPY
        }
    };
    let args = kr_compare_copy_args {
        pairs: blocks.pairs.address() as *const _,
        count: blocks.count as u64,
        keys: runner.keys() as *const u32,
        hashes: blocks.hashes.address() as *mut u64,
        changed: blocks.changed.address() as *mut u64,
        flags,
        reserved: 0,
    };
    let ran = runner.run(Kernel::CompareCopy, &args, workgroups);
    // Read (and cleared) after every dispatch, a failed one too, so each
    // starts from 0 (allocated so).
    let copied = blocks.take_changed(core);
    ran.map_err(|_| ())?;
    outcome.blocks_compared = taken_blocks;
    outcome.blocks_copied = copied.unwrap_or(0);
    Ok(())
}

/// One call of the tool's batch-copy function over the taken regions. It
/// runs with this thread's fenced copies passing the window (they are the
/// library's, delegated).
fn tool_copy(
    tool: &BatchCopyFn,
    agent: hsa_agent_t,
    to_device: bool,
    taken: &[(usize, Transfer)],
) -> Result<(), ()> {
    let mut regions = Vec::new();
    regions.try_reserve_exact(taken.len()).map_err(|_| ())?;
    regions.extend(taken.iter().map(|(_, t)| CopyRegion {
        dst: t.dst as u64,
        src: t.src as u64,
        size: t.size as u64,
    }));
    let direction = if to_device {
        CopyDirection::Restore
    } else {
        CopyDirection::Capture
    };
    let _delegated = crate::memory_tracker::fence::delegate();
    tool(agent, &regions, direction).map_err(|status| {
        log::warn!(
            "the tool's batch copy of {} regions failed (status {status:#x}); the library copies them",
            regions.len()
        );
    })
}
