//! The memory tracker (the SDK's `memory_tracker.cpp`): wrappers installed
//! over the four HSA allocation entry points, the inventory they maintain,
//! the tracking gate and the teardown guard.
//!
//! - [`install`] validates the tables and puts the wrappers in (once per
//!   table kind per process).
//! - [`wrappers`] are what the host's allocations now go through.
//! - [`inventory`] holds the live trackable allocations with generations.
//! - [`gate`] decides whether allocations are recorded, and finalizes.

pub mod executables;
pub mod gate;
pub mod install;
pub mod inventory;
pub mod registry;
pub(crate) mod wrappers;

use std::ffi::c_void;

use log::trace;

use crate::classifier;
use crate::context::Context;

/// Records a fresh allocation if it is trackable; returns its generation.
///
/// Called by the allocate wrappers after the runtime succeeded and the gate
/// said to record. Without the AMD table there is no pointer query, so
/// nothing can be classified and nothing is recorded.
pub fn record_allocation(
    ctx: &Context,
    base: *mut c_void,
    size: usize,
    pool_flags: Option<u32>,
) -> Option<u64> {
    if base.is_null() || !ctx.gate.recording() {
        return None;
    }
    let amd = ctx.amd()?;
    match classifier::classify(amd, base as usize, pool_flags) {
        Ok(agent) => Some(ctx.inventory.record(base as usize, size, agent)),
        Err(why) => {
            trace!("allocation {base:p} ({size} bytes) not tracked: {why:?}");
            None
        }
    }
}

/// The teardown guard: from now on nothing is recorded, every snapshot
/// declines and restores write nothing. Clearing the inventory (under its
/// write lock, so after any in-flight region copy) leaves the free wrappers
/// nothing to retire: they only chain.
pub fn finalize(ctx: &Context) {
    ctx.gate.finalize();
    ctx.inventory.clear();
    ctx.executables.clear();
    ctx.discovery_cache.clear();
    // Retained arenas and pooled signals go back to the runtime now; arenas
    // still leased go back when their snapshots are freed.
    ctx.storage.trim(ctx);
    ctx.storage.destroy_signals(ctx);
}
