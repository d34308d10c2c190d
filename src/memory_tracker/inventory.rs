//! The allocation inventory: every live, trackable device allocation, keyed by
//! base address, behind one reader/writer lock.
//!
//! Each entry carries a generation from a process-wide counter. A base address
//! can come back from the allocator after a free; the generation is what tells
//! "the same allocation" from "a new allocation at the same address", so a
//! restore never writes a snapshot into memory that now belongs to someone
//! else.

use std::collections::BTreeMap;
use std::collections::TryReserveError;
use std::sync::atomic::Ordering;
use std::sync::PoisonError;

use crate::sync::{AtomicU64, AtomicUsize, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One tracked allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// Bytes the application asked for.
    pub size: usize,
    /// `hsa_amd_pointer_info::agentOwner`, which makes snapshots agent-scoped.
    pub agent: u64,
    /// Distinguishes this allocation from any later one at the same base.
    pub generation: u64,
}

/// A tracked allocation as a snapshot sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackedRegion {
    pub base: usize,
    pub size: usize,
    pub generation: u64,
}

pub struct Inventory {
    entries: RwLock<BTreeMap<usize, Allocation>>,
    /// Entry count, readable without the lock: a free wrapper skips the lock
    /// entirely while nothing is tracked.
    len: AtomicUsize,
    next_generation: AtomicU64,
}

impl Inventory {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Inventory {
            entries: RwLock::new(BTreeMap::new()),
            len: AtomicUsize::new(0),
            next_generation: AtomicU64::new(1),
        }
    }

    /// loom's primitives are not const-constructible.
    #[cfg(loom)]
    pub fn new() -> Self {
        Inventory {
            entries: RwLock::new(BTreeMap::new()),
            len: AtomicUsize::new(0),
            next_generation: AtomicU64::new(1),
        }
    }

    // A panic while holding the lock (only possible through a bug) leaves the
    // map itself consistent: every mutation below is a single map operation.
    // Recovering from the poison keeps the host's allocations flowing.
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<usize, Allocation>> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<usize, Allocation>> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new allocation and returns its generation. An entry already
    /// at `base` (its free was never seen) is replaced: the new allocation is
    /// the one that is live.
    pub fn record(&self, base: usize, size: usize, agent: u64) -> u64 {
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.write();
        entries.insert(
            base,
            Allocation {
                size,
                agent,
                generation,
            },
        );
        self.len.store(entries.len(), Ordering::Release);
        generation
    }

    /// Removes the entry at `base`, if any. Called by a free wrapper *before*
    /// the real free, so no snapshot or restore can touch the memory once the
    /// runtime may have released it.
    #[inline]
    pub fn retire(&self, base: usize) -> Option<Allocation> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut entries = self.write();
        let removed = entries.remove(&base);
        self.len.store(entries.len(), Ordering::Release);
        removed
    }

    /// Retire before free: the entry leaves the inventory under the write lock
    /// *before* `free` runs, so no snapshot can read and no restore can write
    /// the memory once the runtime may have released it; if `free` fails
    /// (`succeeded` says no) the memory is still the same allocation and the
    /// entry goes back with its generation. Returns what `free` returned.
    ///
    /// Together with [`Inventory::with_live`] this is the protocol that
    /// `tests/loom_inventory.rs` model-checks.
    #[inline]
    pub fn retire_then_free<R>(
        &self,
        base: usize,
        free: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        let retired = self.retire(base);
        let result = free();
        if let Some(allocation) = retired {
            if !succeeded(&result) {
                self.reinstate(base, allocation);
            }
        }
        result
    }

    /// Puts back an entry whose free failed: the memory is still allocated, so
    /// it is still the same allocation, with the same generation.
    pub fn reinstate(&self, base: usize, allocation: Allocation) {
        let mut entries = self.write();
        entries.entry(base).or_insert(allocation);
        self.len.store(entries.len(), Ordering::Release);
    }

    /// Appends every allocation owned by `agent`, in address order. Fails
    /// without changing `out` if the metadata cannot be reserved.
    pub fn collect_agent(
        &self,
        agent: u64,
        out: &mut Vec<TrackedRegion>,
    ) -> Result<(), TryReserveError> {
        let entries = self.read();
        // One pass: room for every entry (a few bytes each) rather than a
        // counting pass first.
        out.try_reserve(entries.len())?;
        out.extend(
            entries
                .iter()
                .filter(|(_, a)| a.agent == agent)
                .map(|(&base, a)| TrackedRegion {
                    base,
                    size: a.size,
                    generation: a.generation,
                }),
        );
        Ok(())
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
            entries: self.read(),
        }
    }

    /// Count and total bytes of the allocations owned by `agent`.
    pub fn agent_totals(&self, agent: u64) -> (usize, u64) {
        let entries = self.read();
        entries
            .values()
            .filter(|a| a.agent == agent)
            .fold((0, 0), |(count, bytes), a| {
                (count + 1, bytes + a.size as u64)
            })
    }

    /// Number of tracked allocations, all agents.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every entry (the teardown guard): afterwards a free wrapper
    /// finds nothing to retire and only chains.
    pub fn clear(&self) {
        let mut entries = self.write();
        entries.clear();
        self.len.store(0, Ordering::Release);
    }
}

/// A read-locked view of the inventory (see [`Inventory::live_view`]).
pub struct LiveView<'a> {
    entries: RwLockReadGuard<'a, BTreeMap<usize, Allocation>>,
}

impl LiveView<'_> {
    /// Whether `region` is still the same live allocation: same base, same
    /// generation, at least the captured size.
    pub fn contains(&self, region: &TrackedRegion) -> bool {
        self.entries
            .get(&region.base)
            .is_some_and(|live| same_allocation(live, region))
    }

    /// A cursor for checking many regions in ascending address order with
    /// one walk of the map instead of one search per region (a snapshot's
    /// tracked regions come in that order).
    pub fn cursor(&self) -> LiveCursor<'_> {
        let mut entries = self.entries.iter();
        let current = entries.next();
        LiveCursor {
            view: self,
            entries,
            current,
            last: 0,
        }
    }
}

fn same_allocation(live: &Allocation, region: &TrackedRegion) -> bool {
    live.generation == region.generation && live.size >= region.size
}

/// See [`LiveView::cursor`].
pub struct LiveCursor<'v> {
    view: &'v LiveView<'v>,
    entries: std::collections::btree_map::Iter<'v, usize, Allocation>,
    current: Option<(&'v usize, &'v Allocation)>,
    last: usize,
}

impl LiveCursor<'_> {
    /// As [`LiveView::contains`]; a region below the previous one falls
    /// back to a search, so the answer never depends on the order.
    pub fn contains(&mut self, region: &TrackedRegion) -> bool {
        if region.base < self.last {
            return self.view.contains(region);
        }
        self.last = region.base;
        while let Some((&base, _)) = self.current {
            if base >= region.base {
                break;
            }
            self.current = self.entries.next();
        }
        matches!(self.current, Some((&base, live)) if base == region.base && same_allocation(live, region))
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

    #[test]
    fn generations_distinguish_a_reused_base() {
        let inv = Inventory::new();
        let first = inv.record(0x1000, 64, 7);
        let captured = TrackedRegion {
            base: 0x1000,
            size: 64,
            generation: first,
        };
        assert_eq!(inv.with_live(&captured, || ()), Some(()));
        assert!(inv.retire(0x1000).is_some());
        let second = inv.record(0x1000, 64, 7);
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
        let g = inv.record(0x2000, 32, 1);
        assert_eq!(
            inv.with_live(
                &TrackedRegion {
                    base: 0x2000,
                    size: 64,
                    generation: g
                },
                || ()
            ),
            None
        );
        assert_eq!(
            inv.with_live(
                &TrackedRegion {
                    base: 0x2000,
                    size: 32,
                    generation: g
                },
                || 5
            ),
            Some(5)
        );
    }

    #[test]
    fn retire_and_reinstate_keep_the_generation() {
        let inv = Inventory::new();
        let g = inv.record(0x3000, 16, 1);
        let retired = inv.retire(0x3000).expect("recorded");
        assert!(inv.is_empty());
        inv.reinstate(0x3000, retired);
        assert_eq!(inv.len(), 1);
        assert_eq!(
            inv.with_live(
                &TrackedRegion {
                    base: 0x3000,
                    size: 16,
                    generation: g
                },
                || ()
            ),
            Some(())
        );
    }

    #[test]
    fn collect_is_agent_scoped_and_ordered() {
        let inv = Inventory::new();
        inv.record(0x9000, 1, 2);
        inv.record(0x5000, 2, 1);
        inv.record(0x1000, 3, 1);
        let mut out = Vec::new();
        inv.collect_agent(1, &mut out).unwrap();
        assert_eq!(
            out.iter().map(|r| r.base).collect::<Vec<_>>(),
            vec![0x1000, 0x5000]
        );
        assert_eq!(inv.agent_totals(1), (2, 5));
        assert_eq!(inv.agent_totals(2), (1, 1));
        assert_eq!(inv.agent_totals(3), (0, 0));
    }

    #[test]
    fn the_cursor_agrees_with_point_lookups_in_any_order() {
        let inv = Inventory::new();
        let regions: Vec<TrackedRegion> = [0x1000usize, 0x3000, 0x5000, 0x9000]
            .iter()
            .map(|&base| TrackedRegion {
                base,
                size: 16,
                generation: inv.record(base, 16, 1),
            })
            .collect();
        inv.retire(0x5000);
        let stale = TrackedRegion {
            base: 0x3000,
            size: 16,
            generation: 999,
        };
        let missing = TrackedRegion {
            base: 0x4000,
            size: 16,
            generation: 1,
        };
        let view = inv.live_view();
        let queries = [
            regions[0], stale, missing, regions[2], regions[3], regions[1], regions[0],
        ];
        let mut cursor = view.cursor();
        for q in queries {
            assert_eq!(cursor.contains(&q), view.contains(&q), "{q:?}");
        }
        assert!(view.contains(&regions[1]) && !view.contains(&regions[2]));
    }

    #[test]
    fn retire_of_unknown_base_is_none_and_clear_empties() {
        let inv = Inventory::new();
        assert!(inv.retire(0x10).is_none());
        inv.record(0x20, 1, 1);
        assert!(inv.retire(0x10).is_none());
        inv.clear();
        assert!(inv.is_empty());
        assert!(inv.retire(0x20).is_none());
    }
}
