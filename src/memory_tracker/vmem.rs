//! Virtual-memory mappings as tracked regions (ROCm 6.0 and later).
//!
//! HIP's virtual-memory API maps straight onto HSA's (`hipMemCreate` →
//! `hsa_amd_vmem_handle_create`, `hipMemMap` → `hsa_amd_vmem_map`,
//! `hipMemSetAccess` → `hsa_amd_vmem_set_access`, `hipMemUnmap` →
//! `hsa_amd_vmem_unmap`), and stream-ordered pools (`hipMallocAsync`) and
//! PyTorch's expandable segments sit on top of it: none of that passes the
//! allocation entries. The library wraps map, unmap and set_access:
//!
//! - a mapping is noted when the runtime made it; it is replay state when
//!   its physical handle comes from a coarse-grained pool of a GPU agent,
//!   and it becomes a tracked region of the inventory (owned by the handle's
//!   agent, with a generation) once that agent may read and write it;
//! - it is retired before the runtime unmaps it, or before a set_access that
//!   does not grant its owner read-write access (which may revoke it), by
//!   the inventory's retire-before-free protocol; if the owner still has
//!   read-write access after such a set_access (ROCm 6.4+ merges
//!   permissions) it is live again with its generation, and a mapping that
//!   gains that access becomes tracked with a new one;
//! - an unmap retires every tracked mapping it overlaps. ROCr unmaps whole
//!   mappings only; were part of one left mapped, that part would stay
//!   untracked until mapped again (safe: a restore never writes an address
//!   it cannot prove mapped and accessible);
//! - one handle mapped at two addresses is two regions: both are captured
//!   (the same bytes, twice) and restored, so whichever view stays mapped is
//!   byte-exact.
//!
//! The physical handle's pool is found by asking the runtime
//! (`hsa_amd_vmem_get_alloc_properties_from_handle`), so mappings of handles
//! created before installation, or imported, are classified too. The handle
//! create wrapper only retries a failure for lack of memory.

use crate::support::sync::Recover;
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use log::trace;

use super::inventory::{Allocation, RegionKind};
use super::kind::MemoryKind;
use super::Tracker;
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::query::{pool_info, pool_owner};
use crate::hsa::sys::{
    hsa_access_permission_t, hsa_amd_memory_access_desc_t, hsa_amd_memory_pool_t,
    hsa_amd_vmem_alloc_handle_t, HSA_ACCESS_PERMISSION_RW,
    HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
};
use crate::hsa::{hsa_agent_t, hsa_status_t, HSA_STATUS_SUCCESS};

/// What a mapping's physical memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backing {
    /// The agent owning the handle's pool (the CPU agent's handle if none
    /// was found: never tracked).
    pub agent: u64,
    /// A coarse-grained pool of a GPU agent: replay state.
    pub trackable: bool,
}

/// One live mapping the wrapper saw.
#[derive(Debug, Clone, Copy)]
struct Mapping {
    size: usize,
    handle: u64,
    /// Classified at the first set_access (`None` until then, or if the
    /// runtime could not name the handle's pool).
    backing: Option<Backing>,
}

/// The live mappings, and what each pool is.
pub struct Mappings {
    state: Mutex<State>,
}

struct State {
    mappings: BTreeMap<usize, Mapping>,
    /// Mappings noted before the wrappers were found out of the tables,
    /// until a re-installation re-validates them (`revalidate.rs`).
    set_aside: BTreeMap<usize, Mapping>,
    /// Pool handle → its backing (a pool's owner and flags never change).
    pools: Vec<(u64, Option<Backing>)>,
}

impl Mappings {
    pub const fn new() -> Self {
        Mappings {
            state: Mutex::new(State {
                mappings: BTreeMap::new(),
                set_aside: BTreeMap::new(),
                pools: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// Notes a mapping the runtime just made.
    pub fn mapped(&self, va: usize, size: usize, handle: u64) {
        self.lock().mappings.insert(
            va,
            Mapping {
                size,
                handle,
                backing: None,
            },
        );
    }

    /// The live mappings overlapping `[va, va + size)`, in address order;
    /// `None` if there is no memory for the list.
    fn overlapping(&self, va: usize, size: usize) -> Option<Vec<(usize, Mapping)>> {
        let state = self.lock();
        let end = va.saturating_add(size.max(1));
        // The one mapping that may start before `va` and reach into it, then
        // every mapping starting inside the range.
        let before = state
            .mappings
            .range(..va)
            .next_back()
            .filter(|(&base, m)| base + m.size > va);
        let mut found = Vec::new();
        for (&base, &mapping) in before.into_iter().chain(state.mappings.range(va..end)) {
            found.try_reserve(1).ok()?;
            found.push((base, mapping));
        }
        Some(found)
    }

    fn set_backing(&self, va: usize, backing: Option<Backing>) {
        if let Some(mapping) = self.lock().mappings.get_mut(&va) {
            mapping.backing = backing;
        }
    }

    /// Forgets the mappings starting at `bases` (unmapped).
    fn forget(&self, bases: &[usize]) {
        let mut state = self.lock();
        for base in bases {
            state.mappings.remove(base);
        }
    }

    /// Mappings (count, bytes) owned by `agent` that are not tracked
    /// regions: fine-grained or classified as not replay state, without
    /// access for their owner, or made while tracking was off.
    pub fn uncaptured(&self, tracker: &Tracker, agent: u64) -> (usize, u64) {
        let state = self.lock();
        state
            .mappings
            .iter()
            .filter(|(_, m)| m.backing.is_some_and(|b| b.agent == agent))
            .filter(|(&base, _)| !tracker.inventory.is_live(base))
            .fold((0, 0), |(count, bytes), (_, m)| {
                (count + 1, bytes + m.size as u64)
            })
    }

    /// Sets every mapping aside (the wrappers were found out of the tables).
    pub fn set_aside(&self) {
        let mut state = self.lock();
        let mut noted = std::mem::take(&mut state.mappings);
        state.set_aside.append(&mut noted);
    }

    /// Drops everything (finalize, or a runtime reset).
    pub fn clear(&self) {
        let mut state = self.lock();
        state.mappings.clear();
        state.set_aside.clear();
    }

    /// What the pool behind `handle` is, asking the runtime once per pool.
    fn classify(&self, core: &CoreEntries, amd: &AmdEntries, handle: u64) -> Option<Backing> {
        let properties = amd.hsa_amd_vmem_get_alloc_properties_from_handle_fn?;
        let mut pool = hsa_amd_memory_pool_t { handle: 0 };
        let mut kind = 0;
        // SAFETY: writable out-parameters; the runtime only looks the handle up.
        let status =
            unsafe { properties(hsa_amd_vmem_alloc_handle_t { handle }, &mut pool, &mut kind) };
        if status != HSA_STATUS_SUCCESS {
            trace!("vmem handle {handle:#x}: the runtime does not name its pool ({status:#x})");
            return None;
        }
        if let Some(&(_, known)) = self.lock().pools.iter().find(|(p, _)| *p == pool.handle) {
            return known;
        }
        let backing = pool_backing(core, amd, pool);
        let mut state = self.lock();
        if state.pools.try_reserve(1).is_ok() {
            state.pools.push((pool.handle, backing));
        }
        backing
    }
}

impl Default for Mappings {
    fn default() -> Self {
        Self::new()
    }
}

/// The owner and kind of a pool.
fn pool_backing(
    core: &CoreEntries,
    amd: &AmdEntries,
    pool: hsa_amd_memory_pool_t,
) -> Option<Backing> {
    let owner = pool_owner(core, amd, pool.handle)?;
    let flags: u32 = pool_info(amd, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)?;
    Some(Backing {
        agent: owner.agent,
        trackable: owner.gpu && flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0,
    })
}

/// Whether `agent` may read and write the mapping at `va`, as the runtime
/// says now (the rules of a set_access changed in ROCm 6.3, so they are
/// asked rather than modelled).
fn owner_may_write(amd: &AmdEntries, va: usize, agent: u64) -> bool {
    let Some(get_access) = amd.hsa_amd_vmem_get_access_fn else {
        return false;
    };
    let mut permission: hsa_access_permission_t = 0;
    // SAFETY: a writable out-parameter; the runtime only looks the address up.
    let status =
        unsafe { get_access(va as *mut _, &mut permission, hsa_agent_t { handle: agent }) };
    status == HSA_STATUS_SUCCESS && permission == HSA_ACCESS_PERMISSION_RW
}

/// What the set_access wrapper does around the runtime's call: mappings in
/// the range whose owner the call does not grant read-write access are
/// retired first (it may revoke it); afterwards every replay-state mapping
/// in the range whose owner may write it is tracked (again).
pub fn set_access(
    tracker: &Tracker,
    va: usize,
    size: usize,
    descriptors: &[hsa_amd_memory_access_desc_t],
    call_runtime: impl FnOnce() -> hsa_status_t,
) -> hsa_status_t {
    let (Some(core), Some(amd)) = (tracker.core(), tracker.amd()) else {
        return call_runtime();
    };
    let Some(mut affected) = tracker.mappings.overlapping(va, size) else {
        // No memory to list them: stop tracking the range before the call.
        tracker.inventory.forget_range(va, size);
        return call_runtime();
    };
    for (base, mapping) in affected.iter_mut() {
        if mapping.backing.is_none() {
            mapping.backing = tracker.mappings.classify(core, amd, mapping.handle);
            tracker.mappings.set_backing(*base, mapping.backing);
        }
    }
    // Only a call whose every descriptor for the owner grants read-write
    // access cannot take it away: the runtime applies descriptors in order,
    // so a later one for the same agent overrides an earlier grant.
    let grants_owner = |backing: Backing| {
        let mut for_owner = descriptors
            .iter()
            .filter(|d| d.agent_handle.handle == backing.agent)
            .peekable();
        for_owner.peek().is_some() && for_owner.all(|d| d.permissions == HSA_ACCESS_PERMISSION_RW)
    };
    // Mappings that may lose their owner's access are retired first (kept in
    // the list, so it needs no second allocation).
    let mut at_risk = Vec::new();
    if at_risk.try_reserve_exact(affected.len()).is_err() {
        tracker.inventory.forget_range(va, size);
        return call_runtime();
    }
    at_risk.extend(
        affected
            .iter()
            .filter(|(_, m)| !m.backing.is_some_and(grants_owner))
            .map(|&(base, _)| base),
    );
    // A retired mapping whose owner kept read-write access (ROCm 6.4+ merge
    // permissions; or the call failed) is the same memory, still writable:
    // it is live again with its generation, so a held snapshot still
    // restores it.
    let owner_of = |base: usize| {
        affected
            .iter()
            .find(|(b, _)| *b == base)
            .and_then(|(_, m)| m.backing)
    };
    let status = tracker
        .inventory
        .retire_all_then_free(&at_risk, call_runtime, |s, base| {
            *s == HSA_STATUS_SUCCESS
                && !owner_of(base).is_some_and(|b| owner_may_write(amd, base, b.agent))
        });
    if status == HSA_STATUS_SUCCESS && tracker.gate.recording() {
        for (base, mapping) in &affected {
            let Some(backing) = mapping.backing.filter(|b| b.trackable) else {
                continue;
            };
            if !tracker.inventory.is_live(*base) && owner_may_write(amd, *base, backing.agent) {
                tracker.inventory.record_kind(
                    *base,
                    mapping.size,
                    backing.agent,
                    RegionKind::Mapping,
                );
            }
        }
    }
    status
}

/// The wrappers are back (`revalidate.rs`): each mapping set aside that the
/// runtime still reports as the same handle at the same address is noted
/// again, and tracked again under a new generation if it is replay state its
/// owner may write; the rest were unmapped meanwhile. (Mappings, seen.)
pub fn revalidate(tracker: &Tracker, amd: &AmdEntries) -> (usize, usize) {
    let set_aside = std::mem::take(&mut tracker.mappings.lock().set_aside);
    let mut kept = 0;
    for (&va, &mapping) in &set_aside {
        if !same_handle_at(amd, va, mapping.handle) {
            continue;
        }
        kept += 1;
        tracker.mappings.lock().mappings.insert(va, mapping);
        if let Some(backing) = mapping.backing.filter(|b| b.trackable) {
            let region = Allocation {
                kind: RegionKind::Mapping,
                ..Allocation::of(mapping.size, backing.agent, MemoryKind::Device)
            };
            tracker.inventory.readmit(va, region, || {
                same_handle_at(amd, va, mapping.handle) && owner_may_write(amd, va, backing.agent)
            });
        }
    }
    (kept, set_aside.len())
}

/// Whether the runtime maps `handle` at `va` now.
fn same_handle_at(amd: &AmdEntries, va: usize, handle: u64) -> bool {
    let (Some(retain), Some(release)) = (
        amd.hsa_amd_vmem_retain_alloc_handle_fn,
        amd.hsa_amd_vmem_handle_release_fn,
    ) else {
        return false;
    };
    let mut found = hsa_amd_vmem_alloc_handle_t { handle: 0 };
    // SAFETY: a writable out-parameter; the runtime only looks the address up.
    if unsafe { retain(&mut found, va as *mut _) } != HSA_STATUS_SUCCESS {
        return false;
    }
    // SAFETY: the reference retain just took, given back.
    unsafe { release(found) };
    found.handle == handle
}

/// What the map wrapper does after the runtime mapped `[va, va + size)`:
/// the mapping is noted. Nothing tracked can live there (the runtime just
/// mapped fresh memory): a region the inventory still holds in the range
/// was released behind the wrappers' back and is dropped.
pub fn mapped(tracker: &Tracker, va: usize, size: usize, handle: u64) {
    if !tracker.inventory.is_empty() {
        tracker.inventory.forget_range(va, size);
    }
    tracker.mappings.mapped(va, size, handle);
}

/// What the unmap wrapper does around the runtime's call: every tracked
/// mapping it overlaps is retired first.
pub fn unmap(
    tracker: &Tracker,
    va: usize,
    size: usize,
    call_runtime: impl FnOnce() -> hsa_status_t,
) -> hsa_status_t {
    let Some(affected) = tracker.mappings.overlapping(va, size) else {
        tracker.inventory.forget_range(va, size);
        return call_runtime();
    };
    let mut bases = Vec::new();
    if bases.try_reserve_exact(affected.len()).is_err() {
        tracker.inventory.forget_range(va, size);
        return call_runtime();
    }
    bases.extend(affected.iter().map(|&(base, _)| base));
    let status = tracker
        .inventory
        .retire_all_then_free(&bases, call_runtime, |s, _| *s == HSA_STATUS_SUCCESS);
    if status == HSA_STATUS_SUCCESS {
        tracker.mappings.forget(&bases);
    }
    status
}
