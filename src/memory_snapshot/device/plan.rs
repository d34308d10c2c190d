//! What a snapshot keeps to use the device kernels: the agent's runner, the
//! strategy that ran, and for dirty blocks the block table — one (live,
//! kept) pair per block of every region the kernels can reach, and the
//! blocks' hashes on the device.
//!
//! A region's blocks are consecutive in the table (`Region::first_block`).
//! Once a region is found no longer live its pairs' lengths are zeroed,
//! for good: a tracked generation never comes back, so the kernels skip
//! those blocks from then on without the table being rebuilt.

use std::sync::{Arc, Mutex};

use super::buffers::PoolBuffer;
use super::runner::Runner;
use super::Strategy;
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::kernels::abi::{kr_block_pair, KR_BLOCK_BYTES};

/// Bytes per hashed block.
pub(crate) const BLOCK: usize = KR_BLOCK_BYTES as usize;

/// The device kernels a snapshot uses.
pub(crate) struct DevicePlan {
    pub(crate) runner: Arc<Runner>,
    /// `Scatter` or `DirtyBlocks`.
    pub(crate) strategy: Strategy,
    /// Dirty blocks only. Locked by each capture or restore of the
    /// snapshot (it disables freed regions' blocks and reads the counter).
    pub(crate) blocks: Option<Mutex<BlockTable>>,
}

impl Drop for DevicePlan {
    /// The block table goes back to the runner for the next snapshot (a
    /// steady replay allocates nothing per window).
    fn drop(&mut self) {
        if let Some(table) = self.blocks.take() {
            let table = table
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            self.runner.keep_table(table);
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
}

/// The number of blocks of a region of `size` bytes.
pub(crate) fn blocks_of(size: usize) -> usize {
    size.div_ceil(BLOCK)
}

impl BlockTable {
    /// A table of `count` blocks, pairs not yet written: a spare of the
    /// runner's if one is large enough, else new. `None` if the runtime
    /// cannot give the memory (the snapshot then scatters).
    pub(crate) fn take(
        runner: &Runner,
        core: &CoreEntries,
        amd: &AmdEntries,
        agent: hsa_agent_t,
        count: usize,
    ) -> Option<Self> {
        if let Some(mut table) = runner.spare_table(count) {
            table.count = count;
            return Some(table);
        }
        let pair_bytes = count.checked_mul(std::mem::size_of::<kr_block_pair>())?;
        Some(BlockTable {
            pairs: PoolBuffer::kernarg(core, amd, agent, pair_bytes)?,
            hashes: PoolBuffer::device(core, amd, agent, count.checked_mul(16)?)?,
            changed: PoolBuffer::device_with(core, amd, agent, &[0])?,
            count,
            capacity: count,
        })
    }

    /// The pairs, to write or to disable.
    pub(crate) fn pairs_mut(&mut self) -> &mut [kr_block_pair] {
        // SAFETY: host memory of `count` pairs (allocated so), no kernel
        // running: dispatches are waited for by whoever issued them, and
        // `&mut self` excludes a concurrent one on this table.
        unsafe { self.pairs.host_slice_mut(self.count) }
    }

    /// Writes the pairs of one region: `blocks_of(size)` pairs from `first`.
    pub(crate) fn write_region(&mut self, first: usize, live: usize, kept: usize, size: usize) {
        let pairs = self.pairs_mut();
        for (n, pair) in pairs[first..first + blocks_of(size)].iter_mut().enumerate() {
            let offset = n * BLOCK;
            *pair = kr_block_pair {
                dst: (live + offset) as u64,
                src: (kept + offset) as u64,
                len: (size - offset).min(BLOCK) as u64,
            };
        }
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
