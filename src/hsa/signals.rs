//! The library's one pool of HSA signals: the copy engine's completion
//! signals and the fence's proxy signals come from here and go back here.
//!
//! Signals are created once and reused: a runtime limits interrupt-capable
//! signals, and creating one is a system call. A signal taken from the pool
//! holds whatever value its last user left; the taker stores what it needs.

use std::sync::{Mutex, MutexGuard};

use super::entries::CoreEntries;
use super::sys::hsa_signal_t;
use super::HSA_STATUS_SUCCESS;
use crate::support::sync::lock;

/// See the module documentation.
pub struct SignalPool(Mutex<Vec<hsa_signal_t>>);

impl SignalPool {
    /// No signal yet.
    pub const fn new() -> Self {
        SignalPool(Mutex::new(Vec::new()))
    }

    fn idle(&self) -> MutexGuard<'_, Vec<hsa_signal_t>> {
        lock(&self.0)
    }

    /// Takes `count` signals, creating what the pool lacks; fewer (possibly
    /// none) if the runtime cannot create them or there is no memory to
    /// list them.
    pub fn take(&self, core: &CoreEntries, count: usize) -> Vec<hsa_signal_t> {
        let mut taken = Vec::new();
        if taken.try_reserve_exact(count).is_err() {
            return taken;
        }
        {
            let mut idle = self.idle();
            let from = idle.len().saturating_sub(count);
            taken.extend(idle.drain(from..));
        }
        let Some(create) = core.hsa_signal_create_fn else {
            return taken;
        };
        while taken.len() < count {
            let mut signal = hsa_signal_t { handle: 0 };
            // SAFETY: a writable out-parameter; no consumer agents.
            let status = unsafe { create(1, 0, std::ptr::null(), &mut signal) };
            if status != HSA_STATUS_SUCCESS {
                break;
            }
            taken.push(signal);
        }
        taken
    }

    /// Takes one signal (see [`SignalPool::take`]).
    pub fn take_one(&self, core: &CoreEntries) -> Option<hsa_signal_t> {
        self.take(core, 1).pop()
    }

    /// Gives signals back; one the pool has no memory to keep is destroyed.
    pub fn give_back(&self, core: &CoreEntries, signals: impl IntoIterator<Item = hsa_signal_t>) {
        let mut idle = self.idle();
        for signal in signals {
            if idle.try_reserve(1).is_ok() {
                idle.push(signal);
            } else if let Some(destroy) = core.hsa_signal_destroy_fn {
                // SAFETY: a signal this library created and no longer uses.
                unsafe { destroy(signal) };
            }
        }
    }

    /// Destroys the idle signals (finalize).
    pub fn destroy(&self, core: &CoreEntries) {
        let signals = std::mem::take(&mut *self.idle());
        if let Some(destroy) = core.hsa_signal_destroy_fn {
            for signal in signals {
                // SAFETY: a signal this library created and no longer uses.
                unsafe { destroy(signal) };
            }
        }
    }
}

impl Default for SignalPool {
    fn default() -> Self {
        Self::new()
    }
}
