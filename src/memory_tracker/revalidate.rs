//! What was recorded while the wrappers were out of the tables.
//!
//! rocprofiler-sdk's `restore_table` writes the runtime's entries back (the
//! wrappers out) and a second `memory_tracker_init` puts them in again;
//! frees and unmaps made in between go unseen. Nothing recorded before can
//! then be trusted as it stands, but dropping it all would silently stop
//! restoring every buffer the application made before the re-registration.
//!
//! So the records are *set aside* when the wrappers are found out (no
//! snapshot captures and no restore writes them: not live) and
//! *re-validated* when the wrappers are back: each allocation the runtime
//! still reports as the same allocation (base, size, owner, trackable kind)
//! and each mapping it still reports as the same handle at the same address
//! (its owner still allowed to write it) is recorded again under a new
//! generation, so no snapshot taken before can write it; the rest is
//! dropped. Managed ranges, which pointer info does not know, are kept
//! while `hsa_amd_svm_attributes_get` still answers for them (they were
//! not unmapped); locked ranges, which nothing can ask about, are dropped.
//! Executables are not kept: the snapshot's discovery admits every
//! loaded executable again from the loader's list, under a new generation.
//!
//! Re-validation runs once the wrappers are back in, and admits each record
//! before asking the runtime about it: a free from then on finds the record
//! and retires it before the runtime frees. (A free already inside the
//! runtime when its record is checked is the one case it cannot see; the
//! SDK re-registers while configuring, not under the application's frees.)
//!
//! An allocation freed and replaced, unseen, by one with the same base,
//! size, owner and kind cannot be told from the original by any runtime
//! query; it is kept, and it is the live allocation at that address.

use std::sync::Mutex;

use log::{info, warn};

use super::classifier::{self, Grain};
use super::inventory::{Allocation, RegionKind};
use super::kind::MemoryKind;
use super::managed;
use super::Tracker;
use crate::hsa::entries::AmdEntries;
use crate::support::sync::Recover;

/// The records set aside, waiting for the wrappers to be back.
pub struct SetAside {
    allocations: Mutex<Vec<(usize, Allocation)>>,
}

impl SetAside {
    pub const fn new() -> Self {
        SetAside {
            allocations: Mutex::new(Vec::new()),
        }
    }

    /// Drops what was set aside (finalize, or a runtime reset).
    pub fn clear(&self) {
        *self.allocations.locked() = Vec::new();
    }

    fn take(&self) -> Vec<(usize, Allocation)> {
        std::mem::take(&mut *self.allocations.locked())
    }
}

impl Default for SetAside {
    fn default() -> Self {
        Self::new()
    }
}

/// The wrappers were found out of the tables: every live record stops being
/// live (set aside for [`revalidate`]), the executable registry is emptied.
/// Without host memory to keep the list, the records are dropped.
pub fn set_aside(tracker: &Tracker) {
    let had_executables = !tracker.executables.is_empty();
    tracker.executables.clear();
    let moved = tracker.inventory.drain();
    let count = match &moved {
        Ok(moved) => moved.len(),
        Err(_) => 0,
    };
    if let Ok(moved) = moved {
        let mut kept = tracker.set_aside.allocations.locked();
        if kept.try_reserve(moved.len()).is_ok() {
            kept.extend(moved);
        } else {
            *kept = Vec::new();
        }
    }
    #[cfg(hsa_vmem)]
    tracker.mappings.set_aside();
    if count == 0 && !had_executables {
        return;
    }
    warn!(
        "the allocation wrappers were taken out of the HSA tables: allocations and frees \
         made meanwhile are not seen, so the {count} tracked allocation(s) recorded before \
         are set aside (not captured, not restored) until kr_memory_tracker_init puts the \
         wrappers back, which keeps those the runtime still reports as the same allocations"
    );
}

/// The wrappers are back: what was recorded (set aside, or still in the
/// inventory if no snapshot noticed the wrappers were out) is kept under a
/// new generation where the runtime still reports the same thing, dropped
/// otherwise.
pub fn revalidate(tracker: &Tracker) {
    set_aside(tracker);
    let recorded = tracker.set_aside.take();
    if tracker.gate.finalized() {
        return;
    }
    let Some(amd) = tracker.amd() else {
        return;
    };
    let mut kept = 0;
    for &(base, allocation) in &recorded {
        if allocation.memory == MemoryKind::Managed {
            if tracker.inventory.readmit(base, allocation, || {
                managed_still_there(amd, base, &allocation)
            }) {
                kept += 1;
            }
            continue;
        }
        if allocation.kind == RegionKind::Allocation
            && tracker
                .inventory
                .readmit(base, allocation, || still_the_same(amd, base, &allocation))
        {
            // Access granted or taken while the wrappers were out went
            // unseen: the runtime's list now is the one kept.
            super::grants::granted(tracker, base, super::grants::Grant::Runtime);
            kept += 1;
        }
    }
    #[cfg(hsa_vmem)]
    let (mappings_kept, mappings_seen) = super::vmem::revalidate(tracker, amd);
    #[cfg(not(hsa_vmem))]
    let (mappings_kept, mappings_seen) = (0, 0);
    let allocations = recorded
        .iter()
        .filter(|(_, a)| a.kind == RegionKind::Allocation)
        .count();
    if allocations + mappings_seen > 0 {
        info!(
            "wrappers back in the HSA tables: {kept} of {allocations} allocation(s) and \
             {mappings_kept} of {mappings_seen} mapping(s) recorded before are still the \
             same and tracked again (new generations); the rest were freed meanwhile"
        );
    }
}

/// Whether the runtime still reports an allocation at `base` of the
/// recorded size and owner, of a kind the tracker records.
fn still_the_same(amd: &AmdEntries, base: usize, recorded: &Allocation) -> bool {
    let Ok(info) = amd.pointer_info(base) else {
        return false;
    };
    // ROCm 5.2 reports the size rounded up to whole pages.
    let reported = info.sizeInBytes;
    let same_extent = info.agentBaseAddress as usize == base
        && reported >= recorded.size
        && reported <= recorded.size.next_multiple_of(PAGE);
    let Ok((owner, grain)) = classifier::verdict(&info) else {
        return false;
    };
    let same_kind = match recorded.memory {
        MemoryKind::Device => grain == Grain::Coarse,
        MemoryKind::DeviceFine => grain == Grain::Fine,
        MemoryKind::Host => (grain == Grain::Coarse) == recorded.coarse,
        // Locked memory has no pointer-info answer to check it by (ROCm
        // 5.6 on report it unknown): it is dropped, and an unlock seen
        // later only chains.
        MemoryKind::Locked | MemoryKind::DevicePeer => false,
        // Asked through its own query (`managed_still_there`).
        MemoryKind::Managed => false,
    };
    same_extent && owner == recorded.agent && same_kind
}

/// Whether the runtime still answers for a managed range (it was not
/// unmapped meanwhile): asked for its owner, the CPU agent. The GPUs'
/// access is asked again at every capture and restore, so the recorded
/// grants are kept as they were.
fn managed_still_there(amd: &AmdEntries, base: usize, recorded: &Allocation) -> bool {
    let owner = crate::hsa::hsa_agent_t {
        handle: recorded.agent,
    };
    managed::capturable(amd, base, recorded.size, owner) != managed::Capturable::Gone
}

const PAGE: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_aside_records_are_not_live_and_clear_drops_them() {
        let tracker = Tracker::new();
        tracker.inventory.record(0x1000, 64, 7, MemoryKind::Device);
        set_aside(&tracker);
        assert!(tracker.inventory.is_empty());
        assert_eq!(tracker.set_aside.allocations.locked().len(), 1);
        // Without the AMD entries nothing can be re-validated: dropped.
        revalidate(&tracker);
        assert!(tracker.inventory.is_empty());
        assert!(tracker.set_aside.allocations.locked().is_empty());
    }
}
