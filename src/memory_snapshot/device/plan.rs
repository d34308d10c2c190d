//! What a snapshot keeps to use the device kernels: the agent's runner, the
//! strategy that ran, and for dirty blocks the block table — one (live,
//! kept) pair per block of every region the kernels can reach, and the
//! blocks' hashes on the device.
//!
//! A region's blocks are consecutive in the table (`Region::first_block`).
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

use super::buffers::PoolBuffer;
use super::runner::Runner;
use super::tool_copy::BatchCopyFn;
use super::Strategy;
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::kernels::abi::{kr_block_pair, KR_BLOCK_BYTES};

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
    pub(crate) strategy: Strategy,
    /// Dirty blocks: the capture copies only the blocks changed since the
    /// previous capture into the same arenas (see the module documentation).
    pub(crate) incremental: bool,
    /// Dirty blocks only. Locked by each capture or restore of the
    /// snapshot (it disables freed regions' blocks and reads the counter).
    pub(crate) blocks: Option<Mutex<BlockTable>>,
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

/// The dirty-block bookkeeping of one snapshot.
pub(crate) struct BlockTable {
    /// `count` pairs, host memory the agent reads: (live block, kept block).
    pub(crate) pairs: PoolBuffer,
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
    pub(crate) describes: Option<[u64; 3]>,
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
        core: &CoreEntries,
        amd: &AmdEntries,
        agent: hsa_agent_t,
        count: usize,
        previous: [u64; 3],
    ) -> Option<Self> {
        if let Some(table) = runner.spare_table(count, previous) {
            return Some(table);
        }
        let pair_bytes = count.checked_mul(std::mem::size_of::<kr_block_pair>())?;
        Some(BlockTable {
            pairs: PoolBuffer::kernarg(core, amd, agent, pair_bytes)?,
            hashes: PoolBuffer::device(core, amd, agent, count.checked_mul(16)?)?,
            changed: PoolBuffer::device_with(core, amd, agent, &[0])?,
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
    pub(crate) fn resize(&mut self, count: usize, previous: [u64; 3], current: [u64; 3]) -> bool {
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

    /// The pairs, to write or to disable.
    pub(crate) fn pairs_mut(&mut self) -> &mut [kr_block_pair] {
        // SAFETY: host memory of `count` pairs (allocated so), no kernel
        // running: dispatches are waited for by whoever issued them, and
        // `&mut self` excludes a concurrent one on this table.
        unsafe { self.pairs.host_slice_mut(self.count) }
    }

    /// Writes the pairs of one region: `blocks_of(size)` pairs from
    /// `first`. Whether every pair was already so.
    pub(crate) fn write_region(
        &mut self,
        first: usize,
        live: usize,
        kept: usize,
        size: usize,
    ) -> bool {
        let pairs = self.pairs_mut();
        let mut unchanged = true;
        for (n, pair) in pairs[first..first + blocks_of(size)].iter_mut().enumerate() {
            let offset = n * BLOCK;
            let new = kr_block_pair {
                dst: (live + offset) as u64,
                src: (kept + offset) as u64,
                len: (size - offset).min(BLOCK) as u64,
            };
            unchanged &= (pair.dst, pair.src, pair.len) == (new.dst, new.src, new.len);
            *pair = new;
        }
        unchanged
    }

    /// Takes one region's blocks out of every later dispatch.
    pub(crate) fn disable_region(&mut self, first: usize, size: usize) {
        let pairs = self.pairs_mut();
        for pair in &mut pairs[first..first + blocks_of(size)] {
            pair.len = 0;
        }
    }

    /// Reads and clears the changed-block counter (two small copies
    /// through the captured entries); `None` if either copy fails.
    pub(crate) fn take_changed(&mut self, core: &CoreEntries) -> Option<u64> {
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
