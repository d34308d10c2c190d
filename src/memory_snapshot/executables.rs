//! The loaded-executable registry and the module-variable discovery cache.
//!
//! Walking every symbol of every loaded executable at every snapshot costs
//! three runtime queries per symbol. The cache keeps each executable's
//! variables after one complete walk and reuses them while the executable
//! stays loaded; a new executable is still discovered at snapshot time.
//!
//! Executable handles are addresses and can come back for a new executable
//! after an unload, so "the same handle" is not "the same executable". The
//! library therefore wraps `hsa_executable_destroy`: the registry gives each
//! loaded executable a generation, the destroy wrapper retires it before the
//! runtime unloads it (the same retire-before-free protocol as the
//! allocation inventory), and cache entries and captured variables carry the
//! generation. A restore writes a variable only while its executable is
//! still that loaded executable. Without the destroy entry (an older table),
//! there is no registry: no cache, and variables are written directly, as
//! the design describes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};

use super::discovery::ModuleVariable;

/// Loaded executables with their generations, and the cache of their
/// variables per agent.
pub struct Executables {
    /// True once the destroy wrapper is installed: only then are
    /// generations trustworthy.
    tracking_destroys: AtomicBool,
    /// Loaded executables and their generations, sorted by handle. (Sorted
    /// vectors: they grow fallibly, and a process has tens or hundreds of
    /// executables, not millions.)
    live: RwLock<Vec<(u64, u64)>>,
    next_generation: AtomicU64,
    cache: Mutex<Vec<(CacheKey, Vec<ModuleVariable>)>>,
}

/// Executable handle, generation, agent.
type CacheKey = (u64, u64, u64);

/// Identity of a loaded executable: handle and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LoadedExecutable {
    pub handle: u64,
    pub generation: u64,
}

impl Executables {
    pub const fn new() -> Self {
        Executables {
            tracking_destroys: AtomicBool::new(false),
            live: RwLock::new(Vec::new()),
            next_generation: AtomicU64::new(1),
            cache: Mutex::new(Vec::new()),
        }
    }

    /// Called once the destroy wrapper is in the core table.
    pub fn start_tracking_destroys(&self) {
        self.tracking_destroys.store(true, Ordering::Release);
    }

    pub fn tracking_destroys(&self) -> bool {
        self.tracking_destroys.load(Ordering::Acquire)
    }

    /// The identity of a loaded executable, registering it if new. `None`
    /// when destroys are not tracked (no identity can be trusted) or the
    /// registry cannot grow.
    pub fn identify(&self, handle: u64) -> Option<LoadedExecutable> {
        if !self.tracking_destroys() {
            return None;
        }
        if let Some(generation) = generation_of(&self.read(), handle) {
            return Some(LoadedExecutable { handle, generation });
        }
        let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
        let slot = match live.binary_search_by_key(&handle, |e| e.0) {
            Ok(found) => {
                return Some(LoadedExecutable {
                    handle,
                    generation: live[found].1,
                })
            }
            Err(slot) => slot,
        };
        live.try_reserve(1).ok()?;
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        live.insert(slot, (handle, generation));
        Some(LoadedExecutable { handle, generation })
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<(u64, u64)>> {
        self.live.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// A read view for a batch of copies: while it is held, no registered
    /// executable can be unloaded through the wrapper.
    pub fn live_view(&self) -> LiveExecutables<'_> {
        LiveExecutables { guard: self.read() }
    }

    /// Retire before destroy: the executable leaves the registry (waiting for
    /// in-flight copies of its variables) and the cache before the runtime
    /// unloads it; if the runtime refuses, it goes back with its generation.
    pub fn retire_then_destroy<R>(
        &self,
        handle: u64,
        destroy: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        let retired = {
            let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
            match live.binary_search_by_key(&handle, |e| e.0) {
                Ok(found) => Some(live.remove(found)),
                Err(_) => None,
            }
        };
        if retired.is_some() {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.retain(|&((exe, _, _), _)| exe != handle);
        }
        let result = destroy();
        if let Some(entry) = retired {
            if !succeeded(&result) {
                // The removal left capacity behind: this does not allocate.
                let mut live = self.live.write().unwrap_or_else(PoisonError::into_inner);
                if let Err(slot) = live.binary_search_by_key(&handle, |e| e.0) {
                    if live.try_reserve(1).is_ok() {
                        live.insert(slot, entry);
                    }
                }
            }
        }
        result
    }

    /// Runs `use_variables` on the cached variables of an executable for an
    /// agent, if the cache has them (without copying them out).
    pub fn with_cached<R>(
        &self,
        exe: LoadedExecutable,
        agent: u64,
        use_variables: impl FnOnce(&[ModuleVariable]) -> R,
    ) -> Option<R> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (exe.handle, exe.generation, agent);
        let found = cache.binary_search_by_key(&key, |e| e.0).ok()?;
        Some(use_variables(&cache[found].1))
    }

    /// Stores the result of one complete walk.
    pub fn remember(&self, exe: LoadedExecutable, agent: u64, variables: &[ModuleVariable]) {
        let mut stored = Vec::new();
        if stored.try_reserve_exact(variables.len()).is_err() {
            return;
        }
        stored.extend_from_slice(variables);
        let key = (exe.handle, exe.generation, agent);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        match cache.binary_search_by_key(&key, |e| e.0) {
            Ok(found) => cache[found].1 = stored,
            Err(slot) => {
                if cache.try_reserve(1).is_ok() {
                    cache.insert(slot, (key, stored));
                }
            }
        }
    }

    /// Drops the cache and the registry (finalize), memory included.
    pub fn clear(&self) {
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Vec::new();
        *self.live.write().unwrap_or_else(PoisonError::into_inner) = Vec::new();
    }

    /// Entries in the cache (for tests and statistics).
    pub fn cached_executables(&self) -> usize {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

fn generation_of(live: &[(u64, u64)], handle: u64) -> Option<u64> {
    live.binary_search_by_key(&handle, |e| e.0)
        .ok()
        .map(|found| live[found].1)
}

impl Default for Executables {
    fn default() -> Self {
        Self::new()
    }
}

/// A read view of the registry (see [`Executables::live_view`]).
pub struct LiveExecutables<'a> {
    guard: RwLockReadGuard<'a, Vec<(u64, u64)>>,
}

impl LiveExecutables<'_> {
    /// Whether `exe` is still that loaded executable.
    pub fn contains(&self, exe: LoadedExecutable) -> bool {
        generation_of(&self.guard, exe.handle) == Some(exe.generation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_destroy_tracking_nothing_is_identified() {
        let registry = Executables::new();
        assert_eq!(registry.identify(0x10), None);
    }

    #[test]
    fn a_reloaded_handle_is_a_new_executable() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let first = registry.identify(0x10).unwrap();
        assert_eq!(registry.identify(0x10), Some(first));
        registry.remember(
            first,
            1,
            &[ModuleVariable {
                address: 0x1000,
                size: 8,
            }],
        );
        assert!(registry.with_cached(first, 1, |v| v.len()) == Some(1));
        assert!(registry.live_view().contains(first));

        registry.retire_then_destroy(0x10, || true, |ok| *ok);
        assert!(!registry.live_view().contains(first));
        assert_eq!(
            registry.with_cached(first, 1, |_| ()),
            None,
            "the cache forgets it"
        );
        let second = registry.identify(0x10).unwrap();
        assert_ne!(first.generation, second.generation);
        assert_eq!(registry.with_cached(second, 1, |_| ()), None);
    }

    #[test]
    fn a_refused_destroy_keeps_the_executable() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let exe = registry.identify(0x20).unwrap();
        registry.retire_then_destroy(0x20, || false, |ok| *ok);
        assert!(registry.live_view().contains(exe));
    }
}
