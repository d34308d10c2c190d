//! The tracking gate and the teardown guard, packed into one atomic word so
//! the allocation wrappers decide whether to record with a single relaxed
//! load.

use std::sync::atomic::{AtomicU8, Ordering};

const TRACKING: u8 = 1;
const FINALIZED: u8 = 2;

/// Whether allocations are recorded, and whether the library has been
/// finalized (after which it records nothing and declines every snapshot).
pub struct Gate(AtomicU8);

impl Gate {
    pub const fn new() -> Self {
        Gate(AtomicU8::new(0))
    }

    /// True when an allocation should be recorded: tracking on, not finalized.
    ///
    /// Relaxed is enough: the flag only decides whether to record, and a
    /// profiler that enables tracking before the allocations it cares about
    /// orders the two itself (the design's "relaxed atomic flag").
    #[inline(always)]
    pub fn recording(&self) -> bool {
        self.0.load(Ordering::Relaxed) == TRACKING
    }

    /// Turns tracking on or off; returns the state now in force. Once
    /// finalized, tracking stays off.
    pub fn set_tracking(&self, enabled: bool) -> bool {
        if !enabled {
            self.0.fetch_and(!TRACKING, Ordering::AcqRel);
            return false;
        }
        // Only set TRACKING when not finalized.
        let state = match self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                (s & FINALIZED == 0).then_some(s | TRACKING)
            }) {
            Ok(previous) => previous | TRACKING,
            Err(current) => current,
        };
        state == TRACKING
    }

    pub fn tracking(&self) -> bool {
        self.0.load(Ordering::Acquire) == TRACKING
    }

    /// Sets the teardown guard (irreversible) and turns tracking off.
    pub fn finalize(&self) {
        self.0.store(FINALIZED, Ordering::Release);
    }

    pub fn finalized(&self) -> bool {
        self.0.load(Ordering::Acquire) & FINALIZED != 0
    }

    /// Undoes finalize, for the fuzzer only: it runs many inputs in one
    /// process, and an input that finalizes must not finalize the next one.
    #[cfg(fuzzing)]
    pub fn reset_for_fuzzing(&self) {
        self.0.store(0, Ordering::Release);
    }
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracking_is_off_until_enabled() {
        let gate = Gate::new();
        assert!(!gate.recording());
        assert!(!gate.tracking());
        assert!(gate.set_tracking(true));
        assert!(gate.recording());
        assert!(!gate.set_tracking(false));
        assert!(!gate.recording());
    }

    #[test]
    fn finalize_is_irreversible_and_stops_recording() {
        let gate = Gate::new();
        gate.set_tracking(true);
        gate.finalize();
        assert!(gate.finalized());
        assert!(!gate.recording());
        assert!(
            !gate.set_tracking(true),
            "tracking cannot come back after finalize"
        );
        assert!(!gate.tracking());
        assert!(gate.finalized());
    }
}
