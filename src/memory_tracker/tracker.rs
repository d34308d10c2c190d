//! The tracker's process-wide state: the tables the wrappers went into, the
//! gate, and every tracked kind (allocations and mappings in the inventory,
//! executables in their registry), with the async-copy fences and the
//! counters. The wrappers the runtime calls reach it through [`TRACKER`];
//! everything else takes a `&Tracker`.

use super::locks::LockFacts;
use std::sync::OnceLock;

use super::executables::Executables;
use super::fence::Fences;
use super::gate::Gate;
use super::grants::AgentBits;
use super::hooks::Hooks;
use super::inventory::Inventory;
use super::revalidate::SetAside;
#[cfg(hsa_vmem)]
use super::vmem::Mappings;
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::signals::SignalPool;
use crate::support::stats::AtomicCounters;

/// What the layer above gives back when an application allocation from a
/// pool was refused for lack of memory: the bytes it released (its retained
/// arenas competing with that pool), 0 if none.
pub type MakeRoom = fn(pool: u64) -> u64;

/// See the module documentation.
pub struct Tracker {
    /// The core table the wrappers went into and the entries captured.
    pub core_hooks: Hooks<CoreEntries>,
    /// The same for the AMD extension table.
    pub amd_hooks: Hooks<AmdEntries>,
    /// Tracking on/off and the teardown guard.
    pub gate: Gate,
    /// Live tracked allocations and mappings, with generations.
    pub inventory: Inventory,
    /// Loaded executables, with generations (the executable registry).
    pub executables: Executables,
    /// Application async copies in flight on tracked memory, per agent.
    pub fences: Fences,
    /// The library's HSA signals: the fence's proxies and the copy
    /// engine's completion signals.
    pub signals: SignalPool,
    /// Live virtual-memory mappings the wrappers saw.
    #[cfg(hsa_vmem)]
    pub mappings: Mappings,
    /// A bit per agent, for the grant sets of peer memory (`grants.rs`).
    pub agent_bits: AgentBits,
    /// The pools locks named and the CPU agent (`locks.rs`).
    pub lock_facts: LockFacts,
    /// What was recorded before the wrappers were found out of the tables,
    /// until they are back (`revalidate.rs`).
    pub set_aside: SetAside,
    /// The library's counters (every layer counts here).
    pub counters: AtomicCounters,
    /// Set by the snapshot layer: releases retained arenas for a refused
    /// application allocation.
    make_room: OnceLock<MakeRoom>,
}

/// The tracker behind the wrappers.
pub static TRACKER: Tracker = Tracker::new();

impl Tracker {
    /// Nothing installed, tracking off.
    pub const fn new() -> Self {
        Tracker {
            core_hooks: Hooks::new(),
            amd_hooks: Hooks::new(),
            gate: Gate::new(),
            inventory: Inventory::new(),
            executables: Executables::new(),
            fences: Fences::new(),
            signals: SignalPool::new(),
            #[cfg(hsa_vmem)]
            mappings: Mappings::new(),
            agent_bits: AgentBits::new(),
            lock_facts: LockFacts::new(),
            set_aside: SetAside::new(),
            counters: AtomicCounters::new(),
            make_room: OnceLock::new(),
        }
    }

    /// The captured core entries, once a core table was installed.
    #[inline(always)]
    pub fn core(&self) -> Option<&'static CoreEntries> {
        self.core_hooks.entries()
    }

    /// The captured AMD-extension entries, once that table was installed.
    #[inline(always)]
    pub fn amd(&self) -> Option<&'static AmdEntries> {
        self.amd_hooks.entries()
    }

    /// Registers how to make room for a refused application allocation
    /// (the first registration stays).
    pub fn set_make_room(&self, make_room: MakeRoom) {
        let _ = self.make_room.set(make_room);
    }

    /// Releases what competes with an allocation from `pool` that the
    /// runtime refused for lack of memory; the bytes released.
    pub fn make_room(&self, pool: u64) -> u64 {
        self.make_room.get().map_or(0, |make_room| make_room(pool))
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}
