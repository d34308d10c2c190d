//! The allocation inventory: every live, trackable device allocation, keyed by
//! base address, behind one reader/writer lock.
//!
//! Each entry carries a generation from a process-wide counter. A base address
//! can come back from the allocator after a free; the generation is what tells
//! "the same allocation" from "a new allocation at the same address", so a
//! restore never writes a snapshot into memory that now belongs to someone
//! else.

use std::collections::TryReserveError;

use super::kind::MemoryKind;
use super::registry::{Cursor, LiveView as RegistryView, Origin, Registry};

/// What made a tracked region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RegionKind {
    /// A pool or region allocation.
    #[default]
    Allocation,
    /// A virtual-memory mapping of a physical handle (`hsa_amd_vmem_map`;
    /// ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    Mapping,
}

/// One tracked allocation or mapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allocation {
    /// Bytes the application asked for (or mapped).
    pub size: usize,
    /// The owning agent (`hsa_amd_pointer_info::agentOwner`, or the agent of
    /// a mapping's physical handle), which makes snapshots agent-scoped.
    pub agent: u64,
    pub kind: RegionKind,
    /// What memory it is (reported per kind).
    pub memory: MemoryKind,
    /// Agents other than the owner the runtime lets reach it, one bit each
    /// (`grants.rs`): a snapshot of one of them captures it as peer memory
    /// (device memory) or as host memory.
    pub grants: u64,
    /// Host memory from a coarse-grained pool (for locked memory: locked to
    /// one): what the runtime's own staging and pinning buffers are, so the
    /// host-memory setting can leave it out (`memory_snapshot/host_memory.rs`).
    pub coarse: bool,
    /// Locked memory: how many locks of this range are held (HIP locks a
    /// range once per GPU); the range is retired at the last unlock.
    pub locks: u32,
}

impl Allocation {
    /// A pool or region allocation of `size` bytes owned by `agent`, of
    /// `memory`, granted to no other agent.
    pub fn of(size: usize, agent: u64, memory: MemoryKind) -> Self {
        Allocation {
            size,
            agent,
            memory,
            ..Allocation::default()
        }
    }
}

/// A tracked allocation as a snapshot sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackedRegion {
    pub base: usize,
    pub size: usize,
    pub generation: u64,
    pub memory: MemoryKind,
    /// The agent owning the memory (another than the snapshot's for peer
    /// memory): the agent its copies name for the device side.
    pub owner: u64,
    /// Another agent may write it too (peer memory, or memory of the
    /// snapshot's agent granted to another): see `memory_snapshot/shared.rs`.
    pub shared: bool,
    /// See [`Allocation::coarse`].
    pub coarse: bool,
}

/// What a snapshot of `agent` (whose grant bit is `bit`) would take `a` as:
/// its own memory as what it is; another agent's granted to it as peer
/// device memory, or as the host memory it is.
fn captured_as(a: &Allocation, agent: u64, bit: u64) -> Option<MemoryKind> {
    if a.agent == agent {
        Some(a.memory)
    } else if a.grants & bit != 0 {
        Some(if a.memory.is_system() {
            a.memory
        } else {
            MemoryKind::DevicePeer
        })
    } else {
        None
    }
}

/// The live allocations by base address; retire before free is the
/// registry's (`registry.rs`).
pub struct Inventory {
    allocations: Registry<usize, Allocation>,
}

impl Inventory {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Inventory {
            allocations: Registry::new(Origin::Recorded),
        }
    }

    /// loom's primitives are not const-constructible.
    #[cfg(loom)]
    pub fn new() -> Self {
        Inventory {
            allocations: Registry::new(Origin::Recorded),
        }
    }

    /// Records a new allocation and returns its generation. An entry already
    /// at `base` (its free was never seen) is replaced: the new allocation is
    /// the one that is live.
    pub fn record(&self, base: usize, size: usize, agent: u64, memory: MemoryKind) -> u64 {
        self.allocations
            .record(base, Allocation::of(size, agent, memory))
    }

    /// Records host memory of a CPU agent's pool, owned by that agent
    /// (granted to no GPU yet: see `grants.rs`).
    pub fn record_host(&self, base: usize, size: usize, agent: u64, coarse: bool) -> u64 {
        let host = Allocation {
            coarse,
            ..Allocation::of(size, agent, MemoryKind::Host)
        };
        self.allocations.record(base, host)
    }

    /// A lock of the range `[base, base + size)` for the agents of
    /// `grants`: a range locked already with that size counts one more lock
    /// and adds the agents; otherwise the range is recorded, owned by the
    /// CPU agent `agent`.
    pub fn lock(&self, base: usize, size: usize, agent: u64, grants: u64, coarse: bool) {
        let first = Allocation {
            grants,
            coarse,
            locks: 1,
            ..Allocation::of(size, agent, MemoryKind::Locked)
        };
        self.allocations.record_or_merge(base, first, |a| {
            let same = a.memory == MemoryKind::Locked && a.size == size;
            if same {
                a.locks = a.locks.saturating_add(1);
                a.grants |= grants;
            }
            same
        });
    }

    /// An unlock of the range at `base` through the runtime (`unlock`):
    /// counted down while other locks of it are held; at its last lock
    /// retired before `unlock` runs (one search of the inventory decides and
    /// retires). Anything at `base` that is not a locked range is left
    /// alone.
    pub fn unlock_then<R>(
        &self,
        base: usize,
        unlock: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        let last = |a: &mut Allocation| {
            if a.memory != MemoryKind::Locked {
                return false;
            }
            if a.locks > 1 {
                a.locks -= 1;
                return false;
            }
            true
        };
        self.allocations
            .retire_then_free_if(base, last, unlock, succeeded)
    }

    /// Managed memory `[base, base + size)` (page-aligned) given to the GPUs
    /// of `given` and taken from those of `taken` by one
    /// `hsa_amd_svm_attributes_set`, owned by the CPU agent `agent`. A call
    /// inside (or extending) a recorded range changes that range: its GPUs
    /// only grow from a call on part of it (`hipMemAdvise` on a sub-range
    /// keeps the rest reachable); a GPU is taken away only by a call
    /// covering all of it (a range part of which a GPU may not reach is
    /// found out at capture, where the runtime is asked). A call meeting
    /// no recorded range records one, when it gives some GPU access.
    pub fn managed(&self, base: usize, size: usize, agent: u64, given: u64, taken: u64) {
        let end = base.saturating_add(size);
        // The range holding `base`, if one does.
        let holder = {
            let view = self.allocations.live_view();
            view.at_or_below(base)
                .filter(|(start, a)| {
                    a.memory == MemoryKind::Managed && start.saturating_add(a.size) > base
                })
                .map(|(start, _)| start)
        };
        let change = |a: &mut Allocation, start: usize| {
            let whole = base <= start && end >= start.saturating_add(a.size);
            a.size = a.size.max(end - start);
            a.grants |= given;
            if whole {
                a.grants &= !taken;
            }
        };
        if let Some(start) = holder {
            if self.allocations.update(start, |a| change(a, start)) {
                return;
            }
        }
        if given == 0 {
            return;
        }
        let first = Allocation {
            grants: given,
            ..Allocation::of(size, agent, MemoryKind::Managed)
        };
        self.allocations.record_or_merge(base, first, |a| {
            let managed = a.memory == MemoryKind::Managed;
            if managed {
                change(a, base);
            }
            managed
        });
    }

    /// The bases of the live managed ranges starting in `[start, start +
    /// len)`: what a free of that address space releases.
    // Only the virtual-memory wrappers free managed memory (ROCm 7.x).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn managed_in(&self, start: usize, len: usize) -> Result<Vec<usize>, TryReserveError> {
        let end = start.saturating_add(len);
        let mut bases = Vec::new();
        self.allocations.collect(&mut bases, |base, a, _| {
            (a.memory == MemoryKind::Managed && base >= start && base < end).then_some(base)
        })?;
        Ok(bases)
    }

    /// The managed ranges a snapshot of `agent` (grant bit `agent_bit`)
    /// would take, as (base, size): what the estimate asks the runtime
    /// about, as the snapshot does.
    pub fn managed_of(
        &self,
        agent_bit: Option<u64>,
    ) -> Result<Vec<(usize, usize)>, TryReserveError> {
        let bit = agent_bit.unwrap_or(0);
        let mut ranges = Vec::new();
        self.allocations.collect(&mut ranges, |base, a, _| {
            (a.memory == MemoryKind::Managed && a.grants & bit != 0).then_some((base, a.size))
        })?;
        Ok(ranges)
    }

    /// As [`Inventory::record`], for a region of `kind` (coarse-grained
    /// device memory).
    // Only the virtual-memory wrappers record mappings (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn record_kind(&self, base: usize, size: usize, agent: u64, kind: RegionKind) -> u64 {
        let region = Allocation {
            kind,
            ..Allocation::of(size, agent, MemoryKind::Device)
        };
        self.allocations.record(base, region)
    }

    /// Tracks again a region recorded before the wrappers were out, if
    /// `still_valid` (see [`Registry::readmit`]); true if it is tracked.
    pub fn readmit(
        &self,
        base: usize,
        region: Allocation,
        still_valid: impl FnOnce() -> bool,
    ) -> bool {
        self.allocations.readmit(base, region, still_valid)
    }

    /// Retire before free for the regions at several bases released by one
    /// runtime call (an unmap spanning mappings); see [`Inventory::retire_then_free`].
    // Only the virtual-memory wrappers need it (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn retire_all_then_free<R>(
        &self,
        bases: &[usize],
        free: impl FnOnce() -> R,
        gone: impl Fn(&R, usize) -> bool,
    ) -> R {
        self.allocations.retire_all_then_free(bases, free, gone)
    }

    /// Stops tracking every region starting in `[start, start + len)`.
    // Only the virtual-memory wrappers need it (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn forget_range(&self, start: usize, len: usize) {
        self.allocations
            .forget_range(start..start.saturating_add(len.max(1)));
    }

    /// Whether a live region starts at `base`.
    // Only the virtual-memory wrappers need it (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn is_live(&self, base: usize) -> bool {
        self.allocations.is_live(base)
    }

    /// The owning agent of the live region that holds `[address, address + len)`
    /// in part, if one does and a snapshot may capture it (an async copy
    /// touching tracked memory).
    pub fn owner_of_range(&self, address: usize, len: usize) -> Option<u64> {
        let view = self.allocations.live_view();
        let end = address.checked_add(len.max(1))?;
        // The region starting at or before the end of the range; if it
        // started before the range, it must reach into it.
        let (base, region) = view.at_or_below(end - 1)?;
        // Host memory no GPU was granted is tracked but no snapshot takes
        // it: copies of it need no fence.
        let capturable = region.grants != 0 || !region.memory.is_host();
        (base.saturating_add(region.size) > address && capturable).then_some(region.agent)
    }

    /// Retire before free (see `registry.rs`): the allocation stops being
    /// live before `free` runs, so no snapshot can read and no restore can
    /// write the memory once the runtime may have released it; if `free`
    /// fails (`succeeded` says no) the memory is still the same allocation
    /// and it is live again with its generation. Returns what `free` returned.
    #[inline]
    pub fn retire_then_free<R>(
        &self,
        base: usize,
        free: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        self.allocations.retire_then_free(base, free, succeeded)
    }

    /// Appends every region `agent` captures, in address order: those it
    /// owns, and the device memory of other agents it was granted
    /// (`agent_bit`: its bit in the grant sets, `None` if it has none) as
    /// peer memory. Fails without changing `out` if the metadata cannot be
    /// reserved.
    pub fn collect_agent(
        &self,
        agent: u64,
        agent_bit: Option<u64>,
        out: &mut Vec<TrackedRegion>,
    ) -> Result<(), TryReserveError> {
        let bit = agent_bit.unwrap_or(0);
        self.allocations.collect(out, |base, a, generation| {
            Some(TrackedRegion {
                base,
                size: a.size,
                generation,
                memory: captured_as(a, agent, bit)?,
                owner: a.agent,
                shared: a.grants != 0 || a.agent != agent,
                coarse: a.coarse,
            })
        })
    }

    /// The owner of the live allocation starting at `base`.
    pub fn owner_at(&self, base: usize) -> Option<u64> {
        self.allocations.get(base).map(|a| a.agent)
    }

    /// Records the agents granted access to the allocation at `base`: the
    /// set replaces the recorded one when `exact` (the runtime's own list),
    /// else is added to it.
    pub fn set_grants(&self, base: usize, grants: u64, exact: bool) {
        self.allocations.update(base, |a| {
            a.grants = if exact { grants } else { a.grants | grants };
        });
    }

    /// Count and bytes of what a snapshot of `agent` would capture of the
    /// inventory: its own regions, the peer and host memory it was granted,
    /// of which `captures(kind, coarse)` says it takes.
    pub fn capture_totals(
        &self,
        agent: u64,
        agent_bit: Option<u64>,
        captures: impl Fn(MemoryKind, bool) -> bool,
    ) -> (usize, u64) {
        let bit = agent_bit.unwrap_or(0);
        self.allocations.fold((0, 0), |(count, bytes), a| {
            if captured_as(a, agent, bit).is_some_and(|kind| captures(kind, a.coarse)) {
                (count + 1, bytes + a.size as u64)
            } else {
                (count, bytes)
            }
        })
    }

    /// Runs `access` under the read lock if `region` is still the same live
    /// allocation: same base, same generation, at least the captured size.
    /// Returns `None`, without running it, otherwise.
    ///
    /// Holding the read lock across the access is the other half of
    /// retire-before-free: a free of this allocation waits for the write lock,
    /// so the memory cannot be released while it is being read or written.
    pub fn with_live<R>(&self, region: &TrackedRegion, access: impl FnOnce() -> R) -> Option<R> {
        let view = self.live_view();
        view.contains(region).then(access)
    }

    /// The read lock, for a batch of copies: while the view is held, no
    /// tracked allocation can be freed through the wrappers, so every region
    /// the view [`contains`](LiveView::contains) stays that allocation until
    /// the view is dropped. The batch must finish its copies before that.
    pub fn live_view(&self) -> LiveView<'_> {
        LiveView {
            view: self.allocations.live_view(),
        }
    }

    /// Count and total bytes of the tracked regions owned by `agent`.
    pub fn agent_totals(&self, agent: u64) -> (usize, u64) {
        self.allocations.fold((0, 0), |(count, bytes), a| {
            if a.agent == agent {
                (count + 1, bytes + a.size as u64)
            } else {
                (count, bytes)
            }
        })
    }

    /// Takes every live region out (see [`Registry::drain_live`]); without
    /// host memory for the list, drops them.
    pub fn drain(&self) -> Result<Vec<(usize, Allocation)>, TryReserveError> {
        self.allocations.drain_live().inspect_err(|_| self.clear())
    }

    pub fn is_empty(&self) -> bool {
        self.allocations.is_empty()
    }

    /// Number of tracked allocations (those being freed included), all
    /// agents (its tests look).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.allocations.len()
    }

    /// Drops every entry (the teardown guard): afterwards a free wrapper
    /// finds nothing to retire and only chains.
    pub fn clear(&self) {
        self.allocations.clear();
    }
}

/// A read-locked view of the inventory (see [`Inventory::live_view`]).
pub struct LiveView<'a> {
    view: RegistryView<'a, usize, Allocation>,
}

impl LiveView<'_> {
    /// Whether `region` is still the same live allocation: same base, same
    /// generation, at least the captured size.
    pub fn contains(&self, region: &TrackedRegion) -> bool {
        self.view
            .get(region.base, region.generation)
            .is_some_and(|live| live.size >= region.size)
    }

    /// A cursor for checking many regions in ascending address order with
    /// one walk of the map (a snapshot's tracked regions come in that order).
    pub fn cursor(&self) -> LiveCursor<'_> {
        LiveCursor {
            cursor: self.view.cursor(),
        }
    }
}

/// See [`LiveView::cursor`].
pub struct LiveCursor<'v> {
    cursor: Cursor<'v, usize, Allocation>,
}

impl LiveCursor<'_> {
    /// As [`LiveView::contains`], in any order.
    pub fn contains(&mut self, region: &TrackedRegion) -> bool {
        self.cursor
            .get(region.base, region.generation)
            .is_some_and(|live| live.size >= region.size)
    }
}

impl Default for Inventory {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn free(inv: &Inventory, base: usize, succeeds: bool) {
        inv.retire_then_free(base, || succeeds, |ok| *ok);
    }

    #[test]
    fn a_range_touches_the_regions_it_overlaps_and_no_neighbour() {
        let inv = Inventory::new();
        inv.record(0x2000, 0x100, 7, MemoryKind::Device);
        // Ending where the region starts, or starting where it ends.
        assert_eq!(inv.owner_of_range(0x1000, 0x1000), None);
        assert_eq!(inv.owner_of_range(0x2100, 0x10), None);
        // One byte of overlap at either end.
        assert_eq!(inv.owner_of_range(0x1000, 0x1001), Some(7));
        assert_eq!(inv.owner_of_range(0x20FF, 0x10), Some(7));
        assert_eq!(inv.owner_of_range(0x2080, 0), Some(7), "a zero-length copy");
    }

    #[test]
    fn generations_distinguish_a_reused_base() {
        let inv = Inventory::new();
        let first = inv.record(0x1000, 64, 7, MemoryKind::Device);
        let captured = TrackedRegion {
            base: 0x1000,
            size: 64,
            generation: first,
            memory: MemoryKind::Device,
            owner: 0,
            shared: false,
            coarse: false,
        };
        assert_eq!(inv.with_live(&captured, || ()), Some(()));
        free(&inv, 0x1000, true);
        let second = inv.record(0x1000, 64, 7, MemoryKind::Device);
        assert_ne!(first, second);
        assert_eq!(
            inv.with_live(&captured, || ()),
            None,
            "reused address is another allocation"
        );
    }

    #[test]
    fn with_live_requires_the_captured_size() {
        let inv = Inventory::new();
        let g = inv.record(0x2000, 32, 1, MemoryKind::Device);
        let region = |size| TrackedRegion {
            base: 0x2000,
            size,
            generation: g,
            memory: MemoryKind::Device,
            owner: 0,
            shared: false,
            coarse: false,
        };
        assert_eq!(inv.with_live(&region(64), || ()), None);
        assert_eq!(inv.with_live(&region(32), || 5), Some(5));
        let view = inv.live_view();
        let mut cursor = view.cursor();
        assert!(
            !cursor.contains(&region(64)),
            "the cursor checks the size too"
        );
        assert!(view.contains(&region(16)));
    }

    #[test]
    fn a_failed_free_keeps_the_allocation_with_its_generation() {
        let inv = Inventory::new();
        let g = inv.record(0x3000, 16, 1, MemoryKind::Device);
        free(&inv, 0x3000, false);
        assert_eq!(inv.len(), 1);
        let region = TrackedRegion {
            base: 0x3000,
            size: 16,
            generation: g,
            memory: MemoryKind::Device,
            owner: 0,
            shared: false,
            coarse: false,
        };
        assert_eq!(inv.with_live(&region, || ()), Some(()));
        free(&inv, 0x3000, true);
        assert!(inv.is_empty());
    }

    #[test]
    fn collect_is_agent_scoped_and_ordered() {
        let inv = Inventory::new();
        inv.record(0x9000, 1, 2, MemoryKind::Device);
        inv.record(0x5000, 2, 1, MemoryKind::Device);
        inv.record(0x1000, 3, 1, MemoryKind::Device);
        let mut out = Vec::new();
        inv.collect_agent(1, Some(1), &mut out).unwrap();
        assert_eq!(
            out.iter().map(|r| r.base).collect::<Vec<_>>(),
            vec![0x1000, 0x5000]
        );
        assert_eq!(inv.agent_totals(1), (2, 5));
        assert_eq!(inv.agent_totals(2), (1, 1));
        assert_eq!(inv.agent_totals(3), (0, 0));

        // Agent 2's allocation granted to agent 1 (bit 1): agent 1 captures
        // it as peer memory, named with its owner; agent 3 does not.
        inv.set_grants(0x9000, 1, true);
        let mut out = Vec::new();
        inv.collect_agent(1, Some(1), &mut out).unwrap();
        let peer = out.iter().find(|r| r.base == 0x9000).unwrap();
        assert_eq!((peer.memory, peer.owner), (MemoryKind::DevicePeer, 2));
        assert_eq!(inv.capture_totals(1, Some(1), |_, _| true), (3, 6));
        assert_eq!(inv.capture_totals(3, Some(2), |_, _| true), (0, 0));
        assert_eq!(inv.agent_totals(1), (2, 5), "owned only");
        // A grant added to (a runtime that does not list them) or replaced.
        inv.set_grants(0x9000, 2, false);
        assert_eq!(inv.capture_totals(3, Some(2), |_, _| true), (1, 1));
        inv.set_grants(0x9000, 0, true);
        assert_eq!(inv.capture_totals(1, Some(1), |_, _| true), (2, 5));
    }

    #[test]
    fn a_free_of_an_unknown_base_changes_nothing_and_clear_empties() {
        let inv = Inventory::new();
        free(&inv, 0x10, true);
        inv.record(0x20, 1, 1, MemoryKind::Device);
        free(&inv, 0x10, true);
        assert_eq!(inv.len(), 1);
        inv.clear();
        assert!(inv.is_empty());
    }

    #[test]
    fn locks_of_one_range_are_counted_and_their_gpus_added() {
        let inv = Inventory::new();
        inv.lock(0x1000, 4096, 1, 0b01, false);
        inv.lock(0x1000, 4096, 1, 0b10, false);
        let mut out = Vec::new();
        inv.collect_agent(5, Some(0b10), &mut out).unwrap();
        assert_eq!(out.len(), 1, "the second GPU reaches it too");
        assert_eq!(out[0].memory, MemoryKind::Locked);
        let generation = out[0].generation;
        let unlock = |base| inv.unlock_then(base, || (), |_| true);
        unlock(0x1000);
        assert!(inv.is_live(0x1000), "one lock still held");
        unlock(0x1000);
        assert!(!inv.is_live(0x1000), "the last unlock retired it");
        // A lock of another size at the same address is another range.
        inv.lock(0x1000, 8192, 1, 0b01, true);
        out.clear();
        inv.collect_agent(5, Some(0b01), &mut out).unwrap();
        assert_eq!((out[0].size, out[0].coarse), (8192, true));
        assert_ne!(out[0].generation, generation);
        unlock(0x1000);
        assert!(!inv.is_live(0x1000));
        // Not a locked range: an unlock leaves it alone.
        inv.record(0x9000, 64, 1, MemoryKind::Host);
        unlock(0x9000);
        assert!(inv.is_live(0x9000));
        unlock(0x5000);
    }
}
