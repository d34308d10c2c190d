//! The memory tracker (the SDK's `memory_tracker.cpp`): wrappers installed
//! over the four HSA allocation entry points, the inventory they maintain,
//! the tracking gate and the teardown guard.
//!
//! - [`install`] validates the tables and puts the wrappers in (once per
//!   table kind per process).
//! - [`process_marker`] keeps a second copy of the library in the process
//!   from installing over the first.
//! - [`wrappers`] are what the host's allocations now go through.
//! - [`inventory`] holds the live trackable allocations with generations.
//! - [`gate`] decides whether allocations are recorded, and finalizes.

pub mod classifier;
pub mod executables;
pub mod fence;
pub mod gate;
pub mod grants;
pub mod hooks;
pub mod install;
pub mod inventory;
pub mod kind;
pub mod locks;
pub mod managed;
pub mod process_marker;
pub mod registry;
pub mod revalidate;
pub mod tracker;
#[cfg(hsa_vmem)]
pub mod vmem;
pub(crate) mod wrappers;

use std::ffi::c_void;

use log::trace;

pub use tracker::{Tracker, TRACKER};

/// Records a fresh allocation if it is trackable; returns its generation.
///
/// Called by the allocate wrappers after the runtime succeeded and the gate
/// said to record. Without the AMD table there is no pointer query, so
/// nothing can be classified and nothing is recorded.
pub fn record_allocation(
    tracker: &Tracker,
    base: *mut c_void,
    size: usize,
    pool_flags: Option<u32>,
) -> Option<u64> {
    if base.is_null() || !tracker.gate.recording() {
        return None;
    }
    let amd = tracker.amd()?;
    let core = tracker.core();
    let is_gpu = |owner| !core.is_some_and(|core| tracker.agent_bits.is_cpu(core, owner));
    match classifier::classify(amd, base as usize, pool_flags, is_gpu) {
        Ok(found) if found.memory.is_host() => Some(record_host(
            tracker,
            base as usize,
            size,
            &found,
            pool_flags,
        )),
        Ok(found) => Some(
            tracker
                .inventory
                .record(base as usize, size, found.owner, found.memory),
        ),
        Err(why) => {
            trace!("allocation {base:p} ({size} bytes) not tracked: {why:?}");
            None
        }
    }
}

/// Records host memory. A CPU pool's allocation is reachable by no GPU
/// until `hsa_amd_agents_allow_access` grants it (ROCr allocates it
/// restricted); `hsa_memory_allocate`'s system memory is mapped for every
/// GPU at once, so its grants are read from the runtime now.
#[cold]
fn record_host(
    tracker: &Tracker,
    base: usize,
    size: usize,
    found: &classifier::Classified,
    pool_flags: Option<u32>,
) -> u64 {
    let coarse = found.grain == classifier::Grain::Coarse;
    let generation = tracker
        .inventory
        .record_host(base, size, found.owner, coarse);
    if pool_flags.is_none() {
        grants::granted(tracker, base, grants::Grant::Runtime);
    }
    generation
}

/// The teardown guard: from now on nothing is recorded, every snapshot
/// declines and restores write nothing. Clearing the inventory (under its
/// write lock, so after any in-flight region copy) leaves the free wrappers
/// nothing to retire: they only chain. (The snapshot layer gives its
/// retained arenas back itself.)
pub fn finalize(tracker: &Tracker) {
    tracker.gate.finalize();
    forget_all(tracker);
    if let Some(core) = tracker.core() {
        tracker.signals.destroy(core);
    }
}

/// Drops everything the tracker recorded, set-aside records included (a
/// runtime reset: every allocation, mapping and executable is gone).
pub fn forget_all(tracker: &Tracker) {
    tracker.inventory.clear();
    tracker.executables.clear();
    tracker.set_aside.clear();
    #[cfg(hsa_vmem)]
    tracker.mappings.clear();
}

/// Whether the wrappers are still in the call path of every table they were
/// installed into (see `hooks.rs`). When they are not, what was recorded is
/// set aside ([`revalidate::set_aside`]) and the answer is false until a new
/// `kr_memory_tracker_init` puts them back (and re-validates it).
pub fn wrappers_in_place(tracker: &Tracker) -> bool {
    use hooks::Placement::TakenOut;
    // SAFETY: the tables the wrappers went into are the runtime's, which
    // live as long as the process (the documented contract of
    // kr_memory_tracker_init).
    let taken_out = unsafe {
        tracker.core_hooks.placement() == Some(TakenOut)
            || tracker.amd_hooks.placement() == Some(TakenOut)
    };
    if taken_out {
        revalidate::set_aside(tracker);
    }
    !taken_out
}
