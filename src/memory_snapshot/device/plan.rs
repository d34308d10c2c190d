//! What a snapshot keeps to use the device kernels: the agent's runner, the
//! strategy that ran, and for dirty blocks the block table — one (live,
//! kept) pair per block of every region the kernels can reach, and the
//! blocks' hashes on the device.
//!
//! A region's blocks are consecutive in the table (`DevicePlan::first_block`).
//! Once a region is found no longer live its pairs' lengths are zeroed,
//! for good: a tracked generation never comes back, so the kernels skip
//! those blocks from then on without the table being rebuilt.
//!
//! Incremental snapshots. A table outlives its snapshot (the runner keeps
//! it for the next), and after a capture its hashes describe what the
//! snapshot's arenas hold, which `describes` records as the arenas' lease
//! stamps. The next capture of the agent that gets the same arenas back
//! with nothing leased in between (each lease's `previous` stamp is the
//! recorded one) and writes the same pairs — the same regions at the same
//! places — needs to copy only the blocks whose live hash differs from the
//! stored one: the arenas already hold every other block.

use std::sync::{Arc, Mutex};

use super::abi::{kr_block_pair, KR_BLOCK_BYTES};
use super::buffers::PoolBuffer;
use super::runner::Runner;
use super::tool_copy::BatchCopyFn;
use super::CopyMethod;
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::storage::PerTier;

/// Bytes per hashed block.
pub(crate) const BLOCK: usize = KR_BLOCK_BYTES as usize;

/// What moves a snapshot's kernel-reachable regions.
pub(crate) enum Mover {
    /// The library's kernels on the agent.
    Kernels(Arc<Runner>),
    /// The tool's batch-copy function (`tool_copy.rs`).
    Tool(Arc<BatchCopyFn>),
}

/// The device kernels (or the tool's batch copy) a snapshot uses.
pub(crate) struct DevicePlan {
    pub(crate) mover: Mover,
    /// `Scatter`, `DirtyBlocks` (kernels) or `BatchCopy` (the tool).
    pub(crate) method: CopyMethod,
    /// Dirty blocks: the capture copies only the blocks changed since the
    /// previous capture into the same arenas (see the module documentation).
    pub(crate) incremental: bool,
    /// Dirty blocks only. Locked by each capture or restore of the
    /// snapshot (it disables freed regions' blocks and reads the counter).
    pub(crate) blocks: Option<Mutex<BlockTable>>,
    /// Dirty blocks only: where each region's blocks start in the table, by
    /// the region's index (`None`: it has none, and is copied).
    pub(crate) first_blocks: Vec<Option<usize>>,
}

impl DevicePlan {
    /// Where region `index`'s blocks start in the block table, if it has
    /// any (dirty blocks only).
    pub(crate) fn first_block(&self, index: usize) -> Option<usize> {
        self.first_blocks.get(index).copied().flatten()
    }
}

/// What a snapshot keeps of the device path: the plan its copies follow
/// (none: copies move every region), and what its capture did.
#[derive(Default)]
pub(crate) struct DeviceUse {
    pub(crate) plan: Option<DevicePlan>,
    /// How the capture moved the regions the kernels could reach (`Copies`
    /// when they moved none), and whether it was incremental.
    pub(crate) ran: super::batch::DeviceOutcome,
}

impl DeviceUse {
    /// The capture dropped the regions whose `kept` is false (freed while
    /// it ran): the plan's per-region data drops the same, so the region
    /// indices still match. (Their blocks were disabled in the table.)
    pub(crate) fn keep_regions(&mut self, kept: &[bool]) {
        if let Some(plan) = self.plan.as_mut() {
            crate::support::fallible::retain_kept(&mut plan.first_blocks, kept);
        }
    }
}

impl Drop for DevicePlan {
    /// The block table goes back to the runner for the next snapshot (a
    /// steady replay allocates nothing per window).
    fn drop(&mut self) {
        if let (Some(table), Mover::Kernels(runner)) = (self.blocks.take(), &self.mover) {
            let table = table
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            runner.keep_table(table);
        }
    }
}

/// One region's place in the table: live address, kept address, size.
pub(crate) type RegionPlace = [u64; 3];

/// The dirty-block bookkeeping of one snapshot.
pub(crate) struct BlockTable {
    /// `count` pairs (live block, kept block, length), in device memory:
    /// every workgroup reads its pair first, and from host (kernarg) memory
    /// that read crossed the link once per block, which measured on an H200
    /// held a 4 GiB dirty-block restore to 0.9 TB/s.
    pub(crate) pairs: PoolBuffer,
    /// The pairs as written here (host memory), copied to `pairs` before a
    /// dispatch when `upload` says they differ.
    shadow: Vec<kr_block_pair>,
    upload: bool,
    /// The regions the pairs were written for, in table order: a snapshot
    /// of the same regions at the same places (a steady replay) writes
    /// nothing, and no pair is read back to find that out.
    layout: Vec<RegionPlace>,
    /// Two hash lanes per block, on the device.
    pub(crate) hashes: PoolBuffer,
    /// One counter the compare kernel increments per block it copies, in
    /// device memory: an atomic per changed block across the host link
    /// (kernarg memory) costs about a microsecond each, which measured on
    /// an H200 was most of a restore's time.
    pub(crate) changed: PoolBuffer,
    /// Blocks in use.
    pub(crate) count: usize,
    /// Blocks the buffers hold.
    pub(crate) capacity: usize,
    /// The lease stamps, by tier (0: no arena), of the arenas whose content
    /// the hashes describe; `None` until a capture has succeeded.
    pub(crate) describes: Option<PerTier<u64>>,
}

/// The number of blocks of a region of `size` bytes.
pub(crate) fn blocks_of(size: usize) -> usize {
    size.div_ceil(BLOCK)
}

impl BlockTable {
    /// A table for `count` blocks, pairs not yet written: a spare of the
    /// runner's if one is large enough — the one describing the arenas
    /// leased before as `previous` if there is one, with its old `count` —
    /// else new. `None` if the runtime cannot give the memory (the snapshot
    /// then scatters).
    pub(crate) fn take(
        runner: &Runner,
        core: &'static CoreEntries,
        amd: &'static AmdEntries,
        agent: hsa_agent_t,
        count: usize,
        previous: PerTier<u64>,
    ) -> Option<Self> {
        if let Some(table) = runner.spare_table(count, previous) {
            return Some(table);
        }
        let pair_bytes = count.checked_mul(std::mem::size_of::<kr_block_pair>())?;
        Some(BlockTable {
            pairs: PoolBuffer::device(core, amd, agent, pair_bytes)?,
            shadow: Vec::new(),
            upload: true,
            layout: Vec::new(),
            hashes: PoolBuffer::device(core, amd, agent, count.checked_mul(16)?)?,
            changed: PoolBuffer::device_with(core, amd, agent, &[0u64])?,
            count,
            capacity: count,
            describes: None,
        })
    }

    /// Makes the table one of `count` blocks; whether the table can serve
    /// an incremental capture so far: its hashes describe the arenas leased
    /// before as `previous` (every stamp of a tier in use set), and it had
    /// `count` blocks. Its hashes describe nothing from here until the
    /// capture succeeds (`captured`).
    pub(crate) fn resize(
        &mut self,
        count: usize,
        previous: PerTier<u64>,
        current: [u64; 3],
    ) -> bool {
        let same_arenas = self.describes == Some(previous)
            && previous
                .iter()
                .zip(current)
                .all(|(&before, now)| (before == 0) == (now == 0));
        let reusable = same_arenas && self.count == count;
        self.count = count;
        self.describes = None;
        reusable
    }

    /// Writes the pairs of `layout`'s regions (each region's blocks
    /// consecutive, in order), unless they are already those. `None` if
    /// host memory for them cannot be had; else whether they were already.
    pub(crate) fn set_layout(&mut self, layout: Vec<RegionPlace>) -> Option<bool> {
        if self.layout == layout && self.shadow.len() == self.count {
            return Some(true);
        }
        self.shadow.clear();
        self.shadow.try_reserve_exact(self.count).ok()?;
        for &[live, kept, size] in &layout {
            self.shadow
                .extend((0..size).step_by(BLOCK).map(|offset| kr_block_pair {
                    dst: live + offset,
                    src: kept + offset,
                    len: (size - offset).min(BLOCK as u64),
                }));
        }
        // Blocks past the regions' (none when the count was right) stay
        // out of every dispatch.
        self.shadow.resize(
            self.count,
            kr_block_pair {
                dst: 0,
                src: 0,
                len: 0,
            },
        );
        self.layout = layout;
        self.upload = true;
        Some(false)
    }

    /// Takes one region's blocks out of every later dispatch.
    pub(crate) fn disable_region(&mut self, first: usize, size: usize) {
        // Every restore finds a freed region again: only the first changes
        // anything (and costs an upload).
        if let Some(pairs) = self.shadow.get_mut(first..first + blocks_of(size)) {
            for pair in pairs.iter_mut().filter(|p| p.len != 0) {
                pair.len = 0;
                self.upload = true;
                // The pairs are no longer those of any layout.
                self.layout.clear();
            }
        }
    }

    /// Copies the pairs to the device if they changed since the last
    /// dispatch (before each dispatch). Err if the copy fails.
    pub(crate) fn upload(&mut self, core: &'static CoreEntries) -> Result<(), ()> {
        if !self.upload {
            return Ok(());
        }
        let bytes = std::mem::size_of_val(self.shadow.as_slice());
        // SAFETY: `pairs` holds `capacity >= count == shadow.len()` pairs
        // of device memory, ours, no kernel running on it; the source is
        // the shadow.
        unsafe {
            core.copy(
                self.pairs.address() as *mut std::ffi::c_void,
                self.shadow.as_ptr().cast(),
                bytes,
            )
        }
        .map_err(|_| ())?;
        self.upload = false;
        Ok(())
    }

    /// Reads and clears the changed-block counter (two small copies
    /// through the captured entries); `None` if either copy fails.
    pub(crate) fn take_changed(&mut self, core: &'static CoreEntries) -> Option<u64> {
        let mut value = 0u64;
        let zero = 0u64;
        let counter = self.changed.address() as *mut std::ffi::c_void;
        // SAFETY: the counter is 8 bytes of the agent's memory, ours, with
        // no kernel running on it (dispatches are waited for); the host
        // sides are locals.
        unsafe {
            core.copy(std::ptr::from_mut(&mut value).cast(), counter, 8)
                .ok()?;
            core.copy(counter, std::ptr::from_ref(&zero).cast(), 8)
                .ok()?;
        }
        Some(value)
    }
}
