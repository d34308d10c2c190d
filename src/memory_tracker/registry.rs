//! Retire before free, written once for every kind of thing the tracker
//! follows (allocations, loaded executables).
//!
//! A registry maps a key (a base address, an executable handle) to a live
//! entry with a generation from the registry's counter. Keys come back: the
//! allocator hands a freed base to the next allocation, the loader hands a
//! destroyed executable's handle to the next executable. The generation is
//! what tells "the same thing" from "a new thing under the same key", so a
//! snapshot never writes one allocation's bytes into another's memory.
//!
//! The protocol, for any kind:
//!
//! 1. **Retire before free.** The free wrapper marks the entry *retiring*
//!    under the write lock before the runtime frees (or unloads) it, so from
//!    then on no live view contains it: no capture reads it and no restore
//!    writes it once the runtime may have released it. When the runtime has
//!    answered, the entry goes (freed) or becomes live again with its
//!    generation (the runtime refused).
//! 2. **Access under the read lock.** Captures and restores check liveness
//!    and copy while holding a [`LiveView`]; a free waits for the write lock,
//!    so the memory cannot go while it is being copied.
//! 3. **No admission while a free is in flight.** A kind that is admitted
//!    lazily, by looking at the runtime rather than at a creation call
//!    (executables found through the loader's iterator: [`Origin::Discovered`]),
//!    is refused while its destroy is in flight: the runtime still lists it,
//!    but it is going. The free marks such a key retiring whether or not it
//!    was admitted before, so an admission racing the free cannot slip in
//!    between the mark and the runtime's answer.
//!
//! `tests/loom_inventory.rs` model-checks the protocol under every
//! interleaving, for allocations and for lazily admitted executables.

use crate::support::sync::RecoverRw;
use std::collections::btree_map::{self, BTreeMap};
use std::collections::TryReserveError;
use std::sync::atomic::Ordering;

use crate::support::sync::{AtomicU64, AtomicUsize, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// One registered thing: the kind's payload, its generation, and whether
/// its free is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry<V> {
    value: V,
    generation: u64,
    retiring: bool,
}

/// What [`Registry::admit`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Registered (now or before) with this generation.
    Live(u64),
    /// Its free is in flight: not admitted.
    Retiring,
}

/// How a kind's entries come into a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Recorded by the wrapper of the call that created them (allocations):
    /// a free of a key never recorded has nothing to retire.
    Recorded,
    /// Admitted when found by looking at the runtime (executables): a free
    /// marks its key retiring even if it was never admitted, so that no
    /// admission can happen until the runtime has answered.
    Discovered,
}

/// Live entries keyed by `K`; see the module documentation.
pub struct Registry<K, V> {
    origin: Origin,
    entries: RwLock<BTreeMap<K, Entry<V>>>,
    /// Entries, retiring ones included, readable without the lock: a free
    /// wrapper skips the lock entirely while nothing is registered.
    len: AtomicUsize,
    next_generation: AtomicU64,
}

/// A retirement in progress: the generation marked, and whether the entry
/// was live before (else it is a tombstone a discovered kind's free placed).
#[derive(Debug, Clone, Copy)]
struct Retiring {
    generation: u64,
    was_live: bool,
}

impl<K: Ord + Copy, V: Copy + Default> Registry<K, V> {
    #[cfg(not(loom))]
    pub const fn new(origin: Origin) -> Self {
        Registry {
            origin,
            entries: RwLock::new(BTreeMap::new()),
            len: AtomicUsize::new(0),
            next_generation: AtomicU64::new(1),
        }
    }

    /// loom's primitives are not const-constructible.
    #[cfg(loom)]
    pub fn new(origin: Origin) -> Self {
        Registry {
            origin,
            entries: RwLock::new(BTreeMap::new()),
            len: AtomicUsize::new(0),
            next_generation: AtomicU64::new(1),
        }
    }

    // A panic while holding the lock (only possible through a bug) leaves the
    // map consistent: every mutation below is a single map operation.
    // Recovering from the poison keeps the host's allocations flowing.
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<K, Entry<V>>> {
        self.entries.read_locked()
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<K, Entry<V>>> {
        self.entries.write_locked()
    }

    fn fresh_generation(&self) -> u64 {
        self.next_generation.fetch_add(1, Ordering::Relaxed)
    }

    /// A live entry of `value` under a fresh generation.
    fn live_entry(&self, value: V) -> Entry<V> {
        Entry {
            value,
            generation: self.fresh_generation(),
            retiring: false,
        }
    }

    /// Registers a thing the runtime just created and returns its generation.
    /// An entry already under `key` (live, or retiring after the runtime
    /// freed it) is replaced: the runtime handed the key out again, so the
    /// new thing is the one that is live.
    pub fn record(&self, key: K, value: V) -> u64 {
        let entry = self.live_entry(value);
        let generation = entry.generation;
        let mut entries = self.write();
        entries.insert(key, entry);
        self.len.store(entries.len(), Ordering::Release);
        generation
    }

    /// Registers a thing the runtime just created, unless the live entry
    /// under `key` takes it in (`merge` changes it and says yes: another
    /// reference to the same thing, which keeps its generation). One write
    /// lock for both, so two racing creations are both counted.
    pub fn record_or_merge(&self, key: K, value: V, merge: impl FnOnce(&mut V) -> bool) {
        let mut entries = self.write();
        // One search of the tree, for the merge and the insert alike.
        match entries.entry(key) {
            btree_map::Entry::Occupied(mut found) => {
                let entry = found.get_mut();
                if entry.retiring || !merge(&mut entry.value) {
                    *entry = self.live_entry(value);
                }
            }
            btree_map::Entry::Vacant(slot) => {
                slot.insert(self.live_entry(value));
            }
        }
        self.len.store(entries.len(), Ordering::Release);
    }

    /// Registers a thing found by looking at the runtime, unless it is
    /// registered already (its generation is kept) or retiring (refused).
    pub fn admit(&self, key: K, value: V) -> Admission {
        if let Some(found) = self.read().get(&key) {
            return admission_of(found);
        }
        let mut entries = self.write();
        match entries.entry(key) {
            btree_map::Entry::Occupied(found) => admission_of(found.get()),
            btree_map::Entry::Vacant(slot) => {
                let generation = slot.insert(self.live_entry(value)).generation;
                self.len.store(entries.len(), Ordering::Release);
                Admission::Live(generation)
            }
        }
    }

    /// Registers a thing recorded before whose identity must be checked
    /// again (`revalidate.rs`): admitted under a new generation unless
    /// something is registered under `key` already (left alone: false), then
    /// dropped again unless `still_valid`. Admitting before the check means
    /// a free that starts meanwhile finds the entry and retires it, as any
    /// free does. True if it stays.
    pub fn readmit(&self, key: K, value: V, still_valid: impl FnOnce() -> bool) -> bool {
        let generation = {
            let mut entries = self.write();
            let btree_map::Entry::Vacant(slot) = entries.entry(key) else {
                return false;
            };
            let generation = slot.insert(self.live_entry(value)).generation;
            self.len.store(entries.len(), Ordering::Release);
            generation
        };
        if still_valid() {
            return true;
        }
        let mut entries = self.write();
        // Unless a free retired it meanwhile (its end drops it) or the key
        // was handed out again.
        if entries
            .get(&key)
            .is_some_and(|e| e.generation == generation && !e.retiring)
        {
            entries.remove(&key);
        }
        self.len.store(entries.len(), Ordering::Release);
        false
    }

    /// Retire before free: marks the entry under `key` retiring, runs `free`
    /// (the runtime's free or destroy), then drops the entry if `succeeded`
    /// says the runtime released it, or makes it live again, with its
    /// generation, if the runtime refused. Returns what `free` returned.
    #[inline]
    pub fn retire_then_free<R>(
        &self,
        key: K,
        free: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        self.retire_then_free_if(key, |_| true, free, succeeded)
    }

    /// As [`Registry::retire_then_free`], for a thing the runtime releases
    /// only at its last reference: `last` sees the live entry under the
    /// same write lock that retires it (it may count a reference down) and
    /// says whether this call releases it; if not, `free` just runs.
    pub fn retire_then_free_if<R>(
        &self,
        key: K,
        last: impl FnOnce(&mut V) -> bool,
        free: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        let retiring = self.begin_retire(key, last);
        let result = free();
        if let Some(retiring) = retiring {
            self.end_retire(key, retiring, succeeded(&result));
        }
        result
    }

    /// Retire before free for several keys at once (one runtime call that
    /// may release several registered things: an unmap spanning mappings, a
    /// set_access that may revoke access). `gone(result, key)` says, after
    /// the call, whether that key's thing was released; one that was not is
    /// live again with its generation. Without memory to note the
    /// retirements, the entries are dropped for good before `free` runs
    /// (safe: they are merely no longer tracked).
    // Only the virtual-memory wrappers need it (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn retire_all_then_free<R>(
        &self,
        keys: &[K],
        free: impl FnOnce() -> R,
        gone: impl Fn(&R, K) -> bool,
    ) -> R {
        let mut retiring = Vec::new();
        if retiring.try_reserve_exact(keys.len()).is_err() {
            self.forget(keys);
            return free();
        }
        retiring.extend(keys.iter().map(|&key| self.begin_retire(key, |_| true)));
        let result = free();
        for (slot, &key) in retiring.iter().zip(keys) {
            if let Some(retiring) = *slot {
                self.end_retire(key, retiring, gone(&result, key));
            }
        }
        result
    }

    /// Drops the entries under `keys`, whatever their state.
    fn forget(&self, keys: &[K]) {
        let mut entries = self.write();
        for key in keys {
            entries.remove(key);
        }
        self.len.store(entries.len(), Ordering::Release);
    }

    /// Drops every entry with a key in `range`, whatever its state (the
    /// fallback when there is no memory to retire them one by one).
    // Only the virtual-memory wrappers need it (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn forget_range(&self, range: std::ops::Range<K>) {
        let mut entries = self.write();
        entries.retain(|key, _| !range.contains(key));
        self.len.store(entries.len(), Ordering::Release);
    }

    /// Changes the value of the live entry under `key` (its generation
    /// kept); false if there is none.
    pub fn update(&self, key: K, change: impl FnOnce(&mut V)) -> bool {
        let mut entries = self.write();
        match entries.get_mut(&key) {
            Some(entry) if !entry.retiring => {
                change(&mut entry.value);
                true
            }
            _ => false,
        }
    }

    /// The value of the live entry under `key`.
    pub fn get(&self, key: K) -> Option<V> {
        self.read()
            .get(&key)
            .filter(|e| !e.retiring)
            .map(|e| e.value)
    }

    /// Whether `key` is registered and live (not retiring).
    // Only the virtual-memory wrappers need it (ROCm 6.0+ headers).
    #[cfg_attr(not(hsa_vmem), allow(dead_code))]
    pub fn is_live(&self, key: K) -> bool {
        self.read().get(&key).is_some_and(|e| !e.retiring)
    }

    /// Marks `key` retiring (see [`Origin`] for a key not registered).
    fn begin_retire(&self, key: K, last: impl FnOnce(&mut V) -> bool) -> Option<Retiring> {
        if self.origin == Origin::Recorded && self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut entries = self.write();
        let retiring = match entries.entry(key) {
            // Another free of the same thing is in flight; the runtime will
            // refuse one of them, and that one has nothing to undo.
            btree_map::Entry::Occupied(found) if found.get().retiring => None,
            btree_map::Entry::Occupied(mut found) => {
                let entry = found.get_mut();
                if !last(&mut entry.value) {
                    return None;
                }
                entry.retiring = true;
                Some(Retiring {
                    generation: entry.generation,
                    was_live: true,
                })
            }
            btree_map::Entry::Vacant(_) if self.origin == Origin::Recorded => None,
            btree_map::Entry::Vacant(slot) => {
                let generation = self.fresh_generation();
                slot.insert(Entry {
                    value: V::default(),
                    generation,
                    retiring: true,
                });
                Some(Retiring {
                    generation,
                    was_live: false,
                })
            }
        };
        self.len.store(entries.len(), Ordering::Release);
        retiring
    }

    /// Ends the retirement [`Registry::begin_retire`] began, unless the key
    /// was handed out again meanwhile (a newer generation).
    fn end_retire(&self, key: K, retiring: Retiring, freed: bool) {
        let mut entries = self.write();
        if let btree_map::Entry::Occupied(mut found) = entries.entry(key) {
            let entry = found.get_mut();
            if entry.generation == retiring.generation && entry.retiring {
                if freed || !retiring.was_live {
                    found.remove();
                } else {
                    entry.retiring = false;
                }
            }
        }
        self.len.store(entries.len(), Ordering::Release);
    }

    /// The read lock, for checking liveness and copying while it is held: no
    /// entry can be retired (so nothing freed through the wrappers) until the
    /// view is dropped. Copies must finish before that.
    pub fn live_view(&self) -> LiveView<'_, K, V> {
        LiveView {
            entries: self.read(),
        }
    }

    /// Appends `pick(key, value, generation)` for every live entry it
    /// accepts, in key order. Fails without changing `out` if room for every
    /// entry cannot be reserved.
    pub fn collect<T>(
        &self,
        out: &mut Vec<T>,
        mut pick: impl FnMut(K, &V, u64) -> Option<T>,
    ) -> Result<(), TryReserveError> {
        let entries = self.read();
        // One pass: room for every entry (a few bytes each) rather than a
        // counting pass first.
        out.try_reserve(entries.len())?;
        out.extend(
            entries
                .iter()
                .filter(|(_, e)| !e.retiring)
                .filter_map(|(&key, e)| pick(key, &e.value, e.generation)),
        );
        Ok(())
    }

    /// Folds `step` over the live entries.
    pub fn fold<A>(&self, init: A, mut step: impl FnMut(A, &V) -> A) -> A {
        self.read()
            .values()
            .filter(|e| !e.retiring)
            .fold(init, |acc, e| step(acc, &e.value))
    }

    /// Takes every live entry out (retiring ones stay: their free in flight
    /// ends them), in key order. Fails without changing anything if the
    /// list cannot be reserved.
    pub fn drain_live(&self) -> Result<Vec<(K, V)>, TryReserveError> {
        let mut entries = self.write();
        let mut live = Vec::new();
        live.try_reserve_exact(entries.len())?;
        entries.retain(|&key, e| {
            if !e.retiring {
                live.push((key, e.value));
            }
            e.retiring
        });
        self.len.store(entries.len(), Ordering::Release);
        Ok(live)
    }

    /// Entries, retiring ones included.
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

fn admission_of<V>(entry: &Entry<V>) -> Admission {
    if entry.retiring {
        Admission::Retiring
    } else {
        Admission::Live(entry.generation)
    }
}

/// A read-locked view of a registry (see [`Registry::live_view`]).
pub struct LiveView<'a, K, V> {
    entries: RwLockReadGuard<'a, BTreeMap<K, Entry<V>>>,
}

impl<K: Ord + Copy, V> LiveView<'_, K, V> {
    /// The entry under `key` if it is live and of `generation`.
    pub fn get(&self, key: K, generation: u64) -> Option<&V> {
        self.entries.get(&key).and_then(|e| live_of(e, generation))
    }

    /// The live entry with the greatest key at or below `key`, if any.
    pub fn at_or_below(&self, key: K) -> Option<(K, &V)> {
        self.entries
            .range(..=key)
            .next_back()
            .filter(|(_, e)| !e.retiring)
            .map(|(&k, e)| (k, &e.value))
    }

    /// A cursor for many lookups in ascending key order, one walk of the map
    /// instead of one search per key (a snapshot's regions come in order).
    pub fn cursor(&self) -> Cursor<'_, K, V> {
        let mut entries = self.entries.iter();
        let current = entries.next();
        Cursor {
            view: self,
            entries,
            current,
            last: None,
        }
    }
}

fn live_of<V>(entry: &Entry<V>, generation: u64) -> Option<&V> {
    (!entry.retiring && entry.generation == generation).then_some(&entry.value)
}

/// See [`LiveView::cursor`].
pub struct Cursor<'v, K, V> {
    view: &'v LiveView<'v, K, V>,
    entries: btree_map::Iter<'v, K, Entry<V>>,
    current: Option<(&'v K, &'v Entry<V>)>,
    last: Option<K>,
}

impl<'v, K: Ord + Copy, V> Cursor<'v, K, V> {
    /// As [`LiveView::get`]; a key below the previous one falls back to a
    /// search, so the answer never depends on the order of the queries.
    pub fn get(&mut self, key: K, generation: u64) -> Option<&'v V> {
        if self.last.is_some_and(|last| key < last) {
            return self.view.get(key, generation);
        }
        self.last = Some(key);
        while let Some((&found, _)) = self.current {
            if found >= key {
                break;
            }
            self.current = self.entries.next();
        }
        match self.current {
            Some((&found, entry)) if found == key => live_of(entry, generation),
            _ => None,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_retiring_entry_is_not_live_and_not_readmitted() {
        let registry: Registry<u64, ()> = Registry::new(Origin::Discovered);
        let Admission::Live(generation) = registry.admit(7, ()) else {
            panic!("admitted")
        };
        assert_eq!(registry.admit(7, ()), Admission::Live(generation));
        registry.retire_then_free(
            7,
            || {
                assert_eq!(registry.live_view().get(7, generation), None);
                assert_eq!(registry.admit(7, ()), Admission::Retiring);
                true
            },
            |freed| *freed,
        );
        assert!(registry.is_empty());
        let Admission::Live(again) = registry.admit(7, ()) else {
            panic!("admitted after the free")
        };
        assert_ne!(again, generation, "a key handed out again is a new thing");
    }

    #[test]
    fn a_discovered_kind_is_not_admitted_while_an_unadmitted_key_is_freed() {
        let registry: Registry<u64, ()> = Registry::new(Origin::Discovered);
        for runtime_frees in [true, false] {
            registry.retire_then_free(
                9,
                || {
                    assert_eq!(registry.admit(9, ()), Admission::Retiring);
                    runtime_frees
                },
                |freed| *freed,
            );
            assert!(registry.is_empty(), "the tombstone goes either way");
        }
        let recorded: Registry<u64, ()> = Registry::new(Origin::Recorded);
        recorded.retire_then_free(
            9,
            || assert_eq!(recorded.admit(9, ()), Admission::Live(1)),
            |_| true,
        );
        assert_eq!(
            recorded.len(),
            1,
            "a recorded kind leaves unknown keys alone"
        );
    }

    #[test]
    fn a_refused_free_keeps_the_entry_and_its_generation() {
        let registry: Registry<usize, u8> = Registry::new(Origin::Recorded);
        let generation = registry.record(0x10, 1);
        registry.retire_then_free(0x10, || false, |freed| *freed);
        assert_eq!(registry.live_view().get(0x10, generation), Some(&1));
        assert_eq!(registry.len(), 1);
    }

    #[test]
    fn a_key_recorded_again_during_the_free_keeps_the_newer_entry() {
        let registry: Registry<usize, u8> = Registry::new(Origin::Recorded);
        let old = registry.record(0x10, 1);
        let mut newer = 0;
        registry.retire_then_free(
            0x10,
            || {
                // The runtime freed it and handed the base out again before
                // the wrapper ended the retirement.
                newer = registry.record(0x10, 2);
                true
            },
            |freed| *freed,
        );
        let view = registry.live_view();
        assert_eq!(view.get(0x10, old), None);
        assert_eq!(view.get(0x10, newer), Some(&2));
    }

    #[test]
    fn a_second_free_of_a_retiring_entry_leaves_it_retiring() {
        let registry: Registry<usize, u8> = Registry::new(Origin::Recorded);
        let generation = registry.record(0x10, 1);
        registry.retire_then_free(
            0x10,
            || {
                // The same allocation freed again meanwhile: the runtime
                // refuses that one, which must not make the entry live.
                registry.retire_then_free(0x10, || false, |freed| *freed);
                assert_eq!(registry.live_view().get(0x10, generation), None);
                true
            },
            |freed| *freed,
        );
        assert!(registry.is_empty());
    }

    #[test]
    fn a_recorded_kind_places_no_tombstone_for_an_unknown_key() {
        let registry: Registry<usize, ()> = Registry::new(Origin::Recorded);
        registry.record(0x10, ());
        registry.retire_then_free(
            0x20,
            || {
                assert_eq!(registry.len(), 1, "nothing noted for 0x20");
                assert!(matches!(registry.admit(0x20, ()), Admission::Live(_)));
                true
            },
            |freed| *freed,
        );
        assert_eq!(registry.len(), 2, "0x20 admitted during the free stays");
    }

    #[test]
    fn an_older_retirement_ends_without_touching_a_newer_one() {
        let registry: Registry<usize, u8> = Registry::new(Origin::Recorded);
        registry.record(0x10, 1);
        let first = registry.begin_retire(0x10, |_| true).expect("retiring");
        // The runtime freed it and handed the base out again, and the new
        // allocation's free began before the first free's wrapper ended.
        let newer = registry.record(0x10, 2);
        let second = registry.begin_retire(0x10, |_| true).expect("retiring");
        registry.end_retire(0x10, first, true);
        // The runtime refused the second free: the newer entry is live again.
        registry.end_retire(0x10, second, false);
        assert_eq!(registry.live_view().get(0x10, newer), Some(&2));
    }

    #[test]
    fn the_cursor_answers_a_lower_key_after_a_higher_one() {
        let registry: Registry<usize, ()> = Registry::new(Origin::Recorded);
        let low = registry.record(0x1000, ());
        let high = registry.record(0x9000, ());
        let view = registry.live_view();
        let mut cursor = view.cursor();
        assert!(cursor.get(0x9000, high).is_some());
        assert!(cursor.get(0x1000, low).is_some());
    }

    #[test]
    fn the_cursor_never_answers_for_the_next_key() {
        let registry: Registry<usize, ()> = Registry::new(Origin::Recorded);
        let generation = registry.record(0x2000, ());
        let view = registry.live_view();
        let mut cursor = view.cursor();
        assert!(cursor.get(0x1000, generation).is_none());
        assert!(cursor.get(0x2000, generation).is_some());
    }

    #[test]
    fn forget_range_drops_the_keys_in_the_range_whatever_their_state() {
        let registry: Registry<usize, ()> = Registry::new(Origin::Recorded);
        for key in [0x10, 0x20, 0x30] {
            registry.record(key, ());
        }
        registry.retire_then_free(0x20, || registry.forget_range(0x10..0x30), |_| false);
        let mut keys = Vec::new();
        registry.collect(&mut keys, |k, _, _| Some(k)).unwrap();
        assert_eq!(keys, [0x30]);
        assert_eq!(registry.len(), 1);
    }

    #[test]
    fn collect_and_fold_see_only_live_entries() {
        let registry: Registry<usize, u8> = Registry::new(Origin::Recorded);
        registry.record(0x30, 3);
        registry.record(0x10, 1);
        registry.record(0x20, 2);
        registry.retire_then_free(
            0x20,
            || {
                let mut keys = Vec::new();
                registry.collect(&mut keys, |k, _, _| Some(k)).unwrap();
                assert_eq!(keys, [0x10, 0x30]);
                assert_eq!(registry.fold(0, |sum, v| sum + v), 4);
                false
            },
            |freed| *freed,
        );
        assert_eq!(registry.fold(0, |sum, v| sum + v), 6);
    }

    #[test]
    fn the_cursor_agrees_with_point_lookups_in_any_order() {
        let registry: Registry<usize, ()> = Registry::new(Origin::Recorded);
        let generations: Vec<u64> = [0x1000usize, 0x3000, 0x5000, 0x9000]
            .iter()
            .map(|&k| registry.record(k, ()))
            .collect();
        registry.retire_then_free(0x5000, || true, |f| *f);
        let view = registry.live_view();
        let queries = [
            (0x1000, generations[0]),
            (0x3000, 999),
            (0x4000, 1),
            (0x5000, generations[2]),
            (0x9000, generations[3]),
            (0x3000, generations[1]),
            (0x1000, generations[0]),
        ];
        let mut cursor = view.cursor();
        for (key, generation) in queries {
            assert_eq!(
                cursor.get(key, generation).is_some(),
                view.get(key, generation).is_some(),
                "{key:#x}"
            );
        }
        assert!(view.get(0x3000, generations[1]).is_some());
        assert!(view.get(0x5000, generations[2]).is_none());
    }
}
