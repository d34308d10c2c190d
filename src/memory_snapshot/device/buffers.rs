//! Memory the library's kernels read and write besides the snapshot's own
//! arenas: kernel arguments and dispatch records in the kernarg pool (host
//! memory every agent reads), hash keys and block hashes in the agent's
//! device pool. Allocated through the captured (un-wrapped) pool entries,
//! so never tracked; freed when dropped.

use std::ptr;
use std::sync::Mutex;

use crate::hsa::entries::{check, AmdEntries, CoreEntries};
use crate::hsa::hsa_agent_t;
use crate::hsa::sys::hsa_amd_memory_pool_t;
use crate::memory_snapshot::storage::pools;
use crate::support::sync::Recover;

/// A block from one of the runtime's pools, freed on drop.
pub(crate) struct PoolBuffer {
    base: *mut u8,
    len: usize,
    /// Whose free gives it back.
    amd: &'static AmdEntries,
    /// Device memory: the agent it is counted against (see
    /// [`device_bytes_held`]).
    device_agent: Option<u64>,
}

/// Device bytes the kernels' buffers hold, per agent, in whole pages (the
/// runtime's granularity): the library's own memory, which the untracked
/// report leaves out as it does the arenas.
static DEVICE_HELD: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

const PAGE: u64 = 4096;

/// Device bytes of `agent` the kernels' buffers hold now.
pub(crate) fn device_bytes_held(agent: u64) -> u64 {
    DEVICE_HELD
        .locked()
        .iter()
        .find(|(a, _)| *a == agent)
        .map_or(0, |&(_, bytes)| bytes)
}

/// Adds `delta` (pages of `len` bytes, signed by `add`) to `agent`'s count;
/// false if the count cannot grow to hold a new agent.
fn count_device(agent: u64, len: usize, add: bool) -> bool {
    let bytes = (len as u64).div_ceil(PAGE) * PAGE;
    let mut held = DEVICE_HELD.locked();
    if let Some(entry) = held.iter_mut().find(|(a, _)| *a == agent) {
        entry.1 = if add {
            entry.1 + bytes
        } else {
            entry.1.saturating_sub(bytes)
        };
        return true;
    }
    if !add || held.try_reserve(1).is_err() {
        return !add;
    }
    held.push((agent, bytes));
    true
}

// SAFETY: a plain allocation the runtime made; the owner decides who
// touches its bytes.
unsafe impl Send for PoolBuffer {}
// SAFETY: as for Send: shared references only read the address.
unsafe impl Sync for PoolBuffer {}

impl PoolBuffer {
    fn allocate(amd: &'static AmdEntries, pool: hsa_amd_memory_pool_t, len: usize) -> Option<Self> {
        // The runtime's own allocate (not the library's wrapper), no flags.
        let base = amd.allocate(pool, len.max(1), 0).ok()?;
        (!base.is_null()).then_some(PoolBuffer {
            base: base.cast(),
            len,
            amd,
            device_agent: None,
        })
    }

    /// Host memory from the kernarg pool, zeroed, that `agent` may read and
    /// write. ROCr maps kernarg-pool memory for the CPU alone until
    /// `hsa_amd_agents_allow_access` names the GPU (as HIP does for its
    /// kernarg buffers), so access is granted here; without that entry, or
    /// if the runtime refuses it, there is no buffer.
    pub(crate) fn kernarg(
        core: &CoreEntries,
        amd: &'static AmdEntries,
        agent: hsa_agent_t,
        len: usize,
    ) -> Option<Self> {
        let pool = pools::kernarg_pool(core, amd)?;
        let buffer = Self::allocate(amd, pool.pool, len)?;
        let allow = amd.hsa_amd_agents_allow_access_fn?;
        // SAFETY: one valid agent, no flags, our own fresh allocation.
        check(unsafe { allow(1, &agent, ptr::null(), buffer.base.cast()) }).ok()?;
        // SAFETY: host memory just allocated, `len` bytes.
        unsafe { ptr::write_bytes(buffer.base, 0, len) };
        Some(buffer)
    }

    /// Device memory of `agent` (its coarse-grained pool), uninitialised.
    pub(crate) fn device(
        core: &CoreEntries,
        amd: &'static AmdEntries,
        agent: hsa_agent_t,
        len: usize,
    ) -> Option<Self> {
        let (pool, _) = pools::discover(core, amd, agent).device_pool?;
        let mut buffer = Self::allocate(amd, pool, len)?;
        if count_device(agent.handle, len, true) {
            buffer.device_agent = Some(agent.handle);
            Some(buffer)
        } else {
            None
        }
    }

    /// Device memory of `agent` holding `words`.
    pub(crate) fn device_with(
        core: &CoreEntries,
        amd: &'static AmdEntries,
        agent: hsa_agent_t,
        words: &[impl Copy],
    ) -> Option<Self> {
        let len = std::mem::size_of_val(words);
        let buffer = Self::device(core, amd, agent, len)?;
        // SAFETY: `len` bytes on both sides; the device side is ours.
        unsafe { core.copy(buffer.base.cast(), words.as_ptr().cast(), len) }.ok()?;
        Some(buffer)
    }

    /// The address (host and device alike: HSA's unified address space).
    pub(crate) fn address(&self) -> usize {
        self.base as usize
    }

    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bytes of a host buffer as `T`s (kernarg buffers only: device
    /// memory is not host-readable).
    ///
    /// # Safety
    /// The buffer must be host memory no kernel is using, and `T` plain
    /// data that fits `len` bytes at the buffer's alignment (the runtime's
    /// allocations are page-aligned).
    pub(crate) unsafe fn host_slice_mut<T>(&mut self, count: usize) -> &mut [T] {
        debug_assert!(count * std::mem::size_of::<T>() <= self.len);
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.base.cast::<T>(), count) }
    }
}

impl Drop for PoolBuffer {
    fn drop(&mut self) {
        // SAFETY: our allocation, freed once, through the runtime's own free.
        let _ = unsafe { self.amd.free(self.base.cast()) };
        if let Some(agent) = self.device_agent {
            count_device(agent, self.len, false);
        }
    }
}
