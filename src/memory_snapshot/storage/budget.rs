//! The host and device budgets.
//!
//! Everything the library holds for snapshots counts: live snapshots'
//! buffers and arenas, and arenas retained for reuse. The host budget covers
//! pinned and pageable memory together; the device budget applies per agent.

use std::sync::atomic::{AtomicU64, Ordering};

/// Host memory held for snapshots, and its cap.
pub struct HostBudget {
    /// Maximum bytes; 0 means unlimited.
    limit: AtomicU64,
    in_use: AtomicU64,
}

impl HostBudget {
    pub const fn new() -> Self {
        HostBudget {
            limit: AtomicU64::new(0),
            in_use: AtomicU64::new(0),
        }
    }

    pub fn set_limit(&self, bytes: u64) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    pub fn in_use(&self) -> u64 {
        self.in_use.load(Ordering::Acquire)
    }

    /// Bytes that may still be claimed (`u64::MAX` when unlimited).
    pub fn room(&self) -> u64 {
        match self.limit() {
            0 => u64::MAX,
            limit => limit.saturating_sub(self.in_use()),
        }
    }

    /// Claims `bytes` if they fit under the limit. Concurrent claims are
    /// atomic, so together they never pass it.
    pub fn claim(&self, bytes: u64) -> bool {
        let limit = self.limit();
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let after = used.checked_add(bytes)?;
                (limit == 0 || after <= limit).then_some(after)
            })
            .is_ok()
    }

    pub fn release(&self, bytes: u64) {
        self.in_use.fetch_sub(bytes, Ordering::AcqRel);
    }
}

impl Default for HostBudget {
    fn default() -> Self {
        Self::new()
    }
}

/// The device budget: a byte count per agent, or [`DEVICE_BUDGET_AUTO`].
pub struct DeviceBudget(AtomicU64);

/// The agent's free device memory less a safety margin (the default).
pub(crate) const DEVICE_BUDGET_AUTO: u64 = u64::MAX;

/// The safety margin `auto` leaves free: a sixteenth of the device pool, at
/// least 256 MiB, so the application's own allocations keep room to grow.
pub fn device_safety_margin(pool_size: u64) -> u64 {
    (pool_size / 16).max(256 << 20)
}

impl DeviceBudget {
    pub const fn new() -> Self {
        DeviceBudget(AtomicU64::new(DEVICE_BUDGET_AUTO))
    }

    pub fn set(&self, bytes: u64) {
        self.0.store(bytes, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for DeviceBudget {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_respect_the_limit_and_release_returns_them() {
        let budget = HostBudget::new();
        assert_eq!(budget.room(), u64::MAX);
        budget.set_limit(100);
        assert!(budget.claim(60));
        assert!(!budget.claim(41));
        assert_eq!(budget.room(), 40);
        assert!(budget.claim(40));
        budget.release(100);
        assert_eq!(budget.in_use(), 0);
        assert!(!budget.claim(u64::MAX), "overflow is a refusal");
    }

    #[test]
    fn the_margin_is_a_sixteenth_with_a_floor() {
        assert_eq!(device_safety_margin(16 << 30), 1 << 30);
        assert_eq!(device_safety_margin(1 << 30), 256 << 20);
    }
}
