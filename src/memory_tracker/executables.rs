//! The loaded-executable registry: which executables are loaded, each with a
//! generation, retired before the runtime unloads them.
//!
//! Module-scope variables live in a loaded executable's storage, so an
//! executable is a tracked kind like an allocation: its handle is an address
//! the loader can hand to the next executable after an unload, and its
//! storage goes away with the unload. The library wraps
//! `hsa_executable_destroy`; the wrapper retires the executable (the same
//! retire-before-free protocol as allocations, `registry.rs`) before the
//! runtime unloads it, and captured variables carry the generation, so a
//! capture or restore touches a variable only while its executable is still
//! that loaded executable.
//!
//! Executables are admitted lazily, when a snapshot lists them through the
//! loader's iterator, and the admission happens inside the iterator's
//! callback: ROCr holds its loader lock across those callbacks and its
//! destroy takes the same lock, so an executable seen there is loaded at
//! that moment. One whose destroy wrapper has already begun is refused
//! (`Admission::Retiring`): it is still listed, but it is going. The wrapper
//! marks the handle retiring even if no snapshot ever admitted it, since a
//! snapshot may be listing it at that very moment.
//!
//! Without the destroy entry (an older table) there is no registry:
//! nothing is identified, and variables are written directly, as the design
//! describes.

use std::sync::atomic::Ordering;

use crate::support::sync::AtomicBool;

use super::registry::{Admission, LiveView, Origin, Registry};

/// Loaded executables with their generations.
pub struct Executables {
    /// True once the destroy wrapper is installed: only then are
    /// generations trustworthy.
    tracking_destroys: AtomicBool,
    loaded: Registry<u64, ()>,
}

/// Identity of a loaded executable: handle and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoadedExecutable {
    pub handle: u64,
    pub generation: u64,
}

/// What the registry says about an executable the loader lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// Destroys are not tracked: no identity can be trusted.
    Untracked(u64),
    /// Loaded, with its generation.
    Loaded(LoadedExecutable),
    /// Its destroy is in flight: leave it alone.
    Unloading,
}

impl Executables {
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Executables {
            tracking_destroys: AtomicBool::new(false),
            loaded: Registry::new(Origin::Discovered),
        }
    }

    /// loom's primitives are not const-constructible.
    #[cfg(loom)]
    pub fn new() -> Self {
        Executables {
            tracking_destroys: AtomicBool::new(false),
            loaded: Registry::new(Origin::Discovered),
        }
    }

    /// Called once the destroy wrapper is in the core table.
    pub fn start_tracking_destroys(&self) {
        self.tracking_destroys.store(true, Ordering::Release);
    }

    pub fn tracking_destroys(&self) -> bool {
        self.tracking_destroys.load(Ordering::Acquire)
    }

    /// The identity of an executable the loader lists right now, admitting
    /// it if new. Call it from inside the loader iterator's callback (see
    /// the module documentation).
    pub fn identify(&self, handle: u64) -> Identity {
        if !self.tracking_destroys() {
            return Identity::Untracked(handle);
        }
        match self.loaded.admit(handle, ()) {
            Admission::Live(generation) => {
                Identity::Loaded(LoadedExecutable { handle, generation })
            }
            Admission::Retiring => Identity::Unloading,
        }
    }

    /// Retire before destroy: the executable stops being loaded for the
    /// library (waiting for in-flight copies of its variables) before the
    /// runtime unloads it; if the runtime refuses, it is loaded again with
    /// its generation.
    pub fn retire_then_destroy<R>(
        &self,
        handle: u64,
        destroy: impl FnOnce() -> R,
        succeeded: impl FnOnce(&R) -> bool,
    ) -> R {
        self.loaded.retire_then_free(handle, destroy, succeeded)
    }

    /// A read view for a batch of copies: while it is held, no registered
    /// executable can be unloaded through the wrapper.
    pub fn live_view(&self) -> LiveExecutables<'_> {
        LiveExecutables {
            view: self.loaded.live_view(),
        }
    }

    /// Whether no executable is registered (none admitted, none retiring).
    pub fn is_empty(&self) -> bool {
        self.loaded.is_empty()
    }

    /// Forgets every executable (finalize, or wrappers taken out).
    pub fn clear(&self) {
        self.loaded.clear();
    }
}

impl Default for Executables {
    fn default() -> Self {
        Self::new()
    }
}

/// A read view of the registry (see [`Executables::live_view`]).
pub struct LiveExecutables<'a> {
    view: LiveView<'a, u64, ()>,
}

impl LiveExecutables<'_> {
    /// Whether `exe` is still that loaded executable.
    pub fn contains(&self, exe: LoadedExecutable) -> bool {
        self.view.get(exe.handle, exe.generation).is_some()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn without_destroy_tracking_nothing_is_identified() {
        let registry = Executables::new();
        assert_eq!(registry.identify(0x10), Identity::Untracked(0x10));
    }

    #[test]
    fn a_reloaded_handle_is_a_new_executable() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let Identity::Loaded(first) = registry.identify(0x10) else {
            panic!("loaded")
        };
        assert_eq!(registry.identify(0x10), Identity::Loaded(first));
        assert!(registry.live_view().contains(first));
        registry.retire_then_destroy(0x10, || true, |ok| *ok);
        assert!(!registry.live_view().contains(first));
        let Identity::Loaded(second) = registry.identify(0x10) else {
            panic!("loaded again")
        };
        assert_ne!(first.generation, second.generation);
    }

    #[test]
    fn an_executable_being_destroyed_is_not_readmitted() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let Identity::Loaded(exe) = registry.identify(0x30) else {
            panic!("loaded")
        };
        registry.retire_then_destroy(
            0x30,
            || {
                // The loader still lists it while the runtime unloads it.
                assert_eq!(registry.identify(0x30), Identity::Unloading);
                assert!(!registry.live_view().contains(exe));
                true
            },
            |ok| *ok,
        );
    }

    #[test]
    fn a_refused_destroy_keeps_the_executable() {
        let registry = Executables::new();
        registry.start_tracking_destroys();
        let Identity::Loaded(exe) = registry.identify(0x20) else {
            panic!("loaded")
        };
        registry.retire_then_destroy(0x20, || false, |ok| *ok);
        assert!(registry.live_view().contains(exe));
    }
}
