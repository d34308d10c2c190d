//! The module-variable discovery cache.
//!
//! Walking every symbol of every loaded executable at every snapshot costs
//! three runtime queries per symbol. The cache keeps each executable's
//! variables, per agent, after one complete walk, keyed by the executable's
//! identity (handle and generation, from the tracker's executable registry),
//! and reuses them while that executable stays loaded: a loaded, frozen
//! executable's symbols never change. A handle the loader hands to a new
//! executable is a new key, so the cache never answers for it; entries of
//! executables no longer loaded are dropped at the next discovery.

use crate::support::sync::Recover;
use std::sync::{Mutex, MutexGuard};

use super::discovery::ModuleVariable;
use crate::memory_tracker::executables::{LiveExecutables, LoadedExecutable};

/// Executable identity and agent handle.
type CacheKey = (LoadedExecutable, u64);

/// See the module documentation.
pub struct DiscoveryCache {
    entries: Mutex<Vec<(CacheKey, Vec<ModuleVariable>)>>,
}

impl DiscoveryCache {
    pub const fn new() -> Self {
        DiscoveryCache {
            entries: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(CacheKey, Vec<ModuleVariable>)>> {
        self.entries.locked()
    }

    /// Runs `use_variables` on the cached variables of an executable for an
    /// agent, if the cache has them (without copying them out).
    pub fn with_cached<R>(
        &self,
        exe: LoadedExecutable,
        agent: u64,
        use_variables: impl FnOnce(&[ModuleVariable]) -> R,
    ) -> Option<R> {
        let entries = self.lock();
        let found = entries.binary_search_by_key(&(exe, agent), |e| e.0).ok()?;
        Some(use_variables(&entries[found].1))
    }

    /// Stores the result of one complete walk (nothing, if there is no host
    /// memory for it: the next snapshot walks again).
    pub fn remember(&self, exe: LoadedExecutable, agent: u64, variables: &[ModuleVariable]) {
        let mut stored = Vec::new();
        if stored.try_reserve_exact(variables.len()).is_err() {
            return;
        }
        stored.extend_from_slice(variables);
        let mut entries = self.lock();
        match entries.binary_search_by_key(&(exe, agent), |e| e.0) {
            Ok(found) => entries[found].1 = stored,
            Err(slot) => {
                if entries.try_reserve(1).is_ok() {
                    entries.insert(slot, ((exe, agent), stored));
                }
            }
        }
    }

    /// Drops the entries of executables no longer loaded.
    pub fn forget_unloaded(&self, loaded: &LiveExecutables<'_>) {
        self.lock().retain(|((exe, _), _)| loaded.contains(*exe));
    }

    /// Variables cached for `agent` of the executables still loaded (an
    /// unloaded one's entries stay until the next discovery drops them):
    /// count and bytes.
    pub fn agent_totals(&self, agent: u64, loaded: &LiveExecutables<'_>) -> (usize, u64) {
        self.lock()
            .iter()
            .filter(|((exe, cached_agent), _)| *cached_agent == agent && loaded.contains(*exe))
            .flat_map(|(_, variables)| variables.iter())
            .fold((0, 0), |(count, bytes), v| {
                (count + 1, bytes + v.size as u64)
            })
    }

    /// Whether the cache holds nothing (its tests look).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Drops everything, memory included (finalize).
    pub fn clear(&self) {
        *self.lock() = Vec::new();
    }
}

impl Default for DiscoveryCache {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_tracker::executables::{Executables, Identity};

    fn loaded(registry: &Executables, handle: u64) -> LoadedExecutable {
        match registry.identify(handle) {
            Identity::Loaded(exe) => exe,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn entries_are_per_agent_and_per_generation() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let cache = DiscoveryCache::new();
        let exe = loaded(&registry, 0x10);
        let variable = ModuleVariable {
            address: 0x1000,
            size: 8,
        };
        cache.remember(exe, 1, &[variable]);
        assert_eq!(
            cache.with_cached(exe, 1, |v| v.to_vec()),
            Some(vec![variable])
        );
        assert_eq!(cache.with_cached(exe, 2, |_| ()), None, "another agent");

        registry.retire_then_destroy(0x10, || true, |ok| *ok);
        let again = loaded(&registry, 0x10);
        assert_eq!(
            cache.with_cached(again, 1, |_| ()),
            None,
            "a new executable"
        );
        cache.forget_unloaded(&registry.live_view());
        assert!(cache.is_empty());
    }

    #[test]
    fn finalize_drops_even_what_is_still_loaded() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let cache = DiscoveryCache::new();
        let exe = loaded(&registry, 0x10);
        let variable = ModuleVariable {
            address: 0x1000,
            size: 8,
        };
        cache.remember(exe, 1, &[variable]);
        cache.clear();
        assert!(cache.is_empty());
        assert_eq!(cache.with_cached(exe, 1, |_| ()), None);
    }
}
