//! The baseline's host-side copy of one region: a fresh pageable buffer,
//! allocated fallibly and counted against the host budget. (The other
//! policies pack regions into arenas, see `storage/arena.rs`.)
//!
//! The whole tracked footprint is duplicated in host RAM for the lifetime of a
//! replay, so a large footprint must end in a declined snapshot, never in an
//! aborted host process: buffers come from `try_reserve`, and a budget lets
//! the tool cap what replay may take.

use super::storage::budget::HostBudget;
use crate::support::page_bytes::PageBytes;

/// Why a host buffer could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostBufferError {
    /// It would pass the host budget.
    OverBudget,
    /// The allocation failed.
    OutOfMemory,
}

/// A pageable host buffer of exactly `len` bytes, page-aligned: raw memory
/// written only by the runtime's
/// device-to-host copy and read only by the host-to-device copy of a
/// snapshot whose capture succeeded.
pub struct HostBuffer {
    bytes: PageBytes,
    len: usize,
    budget: &'static HostBudget,
}

impl HostBuffer {
    /// Claims `len` bytes of the budget and allocates them.
    pub fn try_new(len: usize, budget: &'static HostBudget) -> Result<Self, HostBufferError> {
        if !budget.claim(len as u64) {
            return Err(HostBufferError::OverBudget);
        }
        let Some(bytes) = PageBytes::try_new(len) else {
            budget.release(len as u64);
            return Err(HostBufferError::OutOfMemory);
        };
        // Left uninitialised on purpose: zeroing would touch every page of a
        // multi-gigabyte footprint only for the copy to overwrite it.
        Ok(HostBuffer { bytes, len, budget })
    }

    /// The buffer's size.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Destination of the device-to-host copy.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.bytes.as_mut_ptr()
    }

    /// Source of the host-to-device copy.
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr()
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        self.budget.release(self.len as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked() -> &'static HostBudget {
        Box::leak(Box::new(HostBudget::new()))
    }

    #[test]
    fn buffers_count_against_the_budget_until_dropped() {
        let budget = leaked();
        budget.set_limit(100);
        let a = HostBuffer::try_new(60, budget).unwrap();
        assert_eq!(budget.in_use(), 60);
        assert_eq!(
            HostBuffer::try_new(41, budget).err(),
            Some(HostBufferError::OverBudget)
        );
        assert_eq!(budget.in_use(), 60, "a refused claim leaves nothing behind");
        let b = HostBuffer::try_new(40, budget).unwrap();
        assert_eq!(budget.in_use(), 100);
        drop(a);
        drop(b);
        assert_eq!(budget.in_use(), 0);
    }

    #[test]
    fn zero_limit_is_unlimited_and_impossible_sizes_fail_cleanly() {
        let budget = leaked();
        let huge = HostBuffer::try_new(usize::MAX / 2, budget);
        assert_eq!(huge.err(), Some(HostBufferError::OutOfMemory));
        assert_eq!(budget.in_use(), 0);
    }
}
