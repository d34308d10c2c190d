//! The library's process-wide state, gathered in one place.
//!
//! The exported C functions and the allocation wrappers work on [`GLOBAL`];
//! the logic beneath them takes a `&Context`, so tests can drive it on fresh
//! state. A Rust static is never destroyed, so none of this can be torn down
//! under a late free from the host's static destructors (the crash the C++
//! original needed its teardown guard for).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{PoisonError, RwLock};

use crate::hsa::entries::{AmdEntries, CoreEntries, IterateExecutablesFn};
use crate::memory_snapshot::discovery_cache::DiscoveryCache;
use crate::memory_snapshot::storage::arena::Storage;
use crate::memory_tracker::executables::Executables;
use crate::memory_tracker::fence::Fences;
use crate::memory_tracker::gate::Gate;
use crate::memory_tracker::hooks::Hooks;
use crate::memory_tracker::inventory::Inventory;
#[cfg(hsa_vmem)]
use crate::memory_tracker::vmem::Mappings;
use crate::stats::Stats;

pub struct Context {
    /// The core table the wrappers went into and the entries captured.
    pub core_hooks: Hooks<CoreEntries>,
    /// The same for the AMD extension table.
    pub amd_hooks: Hooks<AmdEntries>,
    /// Tracking on/off and the teardown guard.
    pub gate: Gate,
    pub inventory: Inventory,
    /// The executable iterator a tool set (`kr_set_executable_iterator`),
    /// which overrides the loader's.
    executable_iterator: RwLock<Option<IterateExecutablesFn>>,
    /// Storage policy, budgets, retained arenas, completion signals.
    pub storage: Storage,
    /// Loaded executables, with generations (the executable registry).
    pub executables: Executables,
    /// Module variables of loaded executables, per agent.
    pub discovery_cache: DiscoveryCache,
    /// Application async copies in flight on tracked memory, per agent.
    pub fences: Fences,
    /// Live virtual-memory mappings the wrappers saw.
    #[cfg(hsa_vmem)]
    pub mappings: Mappings,
    pub stats: Stats,
    /// Batched copies: unresolved (read `KERNEL_REPLAY_COPY`), on, or off.
    batch_copies: AtomicU8,
    /// Warn-once latches of the replay gate.
    pub warned_graph_launch: AtomicBool,
    pub warned_multi_packet: AtomicBool,
}

/// The state behind the C ABI.
pub static GLOBAL: Context = Context::new();

const UNRESOLVED: u8 = u8::MAX;

impl Context {
    pub const fn new() -> Self {
        Context {
            core_hooks: Hooks::new(),
            amd_hooks: Hooks::new(),
            gate: Gate::new(),
            inventory: Inventory::new(),
            executable_iterator: RwLock::new(None),
            storage: Storage::new(),
            executables: Executables::new(),
            discovery_cache: DiscoveryCache::new(),
            fences: Fences::new(),
            #[cfg(hsa_vmem)]
            mappings: Mappings::new(),
            stats: Stats::new(),
            batch_copies: AtomicU8::new(UNRESOLVED),
            warned_graph_launch: AtomicBool::new(false),
            warned_multi_packet: AtomicBool::new(false),
        }
    }

    /// A fresh context that lives for the rest of the process (snapshot
    /// buffers borrow its budget), for tests and tools that want isolation.
    pub fn leak() -> &'static Context {
        Box::leak(Box::new(Context::new()))
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

    /// Sets the executable iterator snapshots use instead of the runtime
    /// loader's own; `None` goes back to the loader's.
    pub fn set_executable_iterator(&self, iterate: Option<IterateExecutablesFn>) {
        *self
            .executable_iterator
            .write()
            .unwrap_or_else(PoisonError::into_inner) = iterate;
    }

    /// How snapshots enumerate loaded executables: the iterator the tool
    /// set, else the AMD loader extension's own, asked of the runtime through
    /// the captured core table (as rocprofiler-sdk finds its loader table).
    /// Asked at every snapshot: one cheap call, and always the runtime's
    /// current answer.
    pub fn executable_iterator(&self) -> Option<IterateExecutablesFn> {
        let set = *self
            .executable_iterator
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        set.or_else(|| {
            self.core()
                .and_then(CoreEntries::loader_executable_iterator)
        })
    }

    /// Whether copies are batched where the runtime can: on unless
    /// `kr_set_batched_copies(false)` or `KERNEL_REPLAY_COPY=blocking`.
    pub fn batch_copies(&self) -> bool {
        match self.batch_copies.load(Ordering::Acquire) {
            UNRESOLVED => {
                let blocking = std::env::var("KERNEL_REPLAY_COPY")
                    .is_ok_and(|v| v.trim().eq_ignore_ascii_case("blocking"));
                let _ = self.batch_copies.compare_exchange(
                    UNRESOLVED,
                    u8::from(!blocking),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.batch_copies.load(Ordering::Acquire) == 1
            }
            value => value == 1,
        }
    }

    pub fn set_batch_copies(&self, enabled: bool) {
        self.batch_copies
            .store(u8::from(enabled), Ordering::Release);
    }
}

impl Default for Context {
    fn default() -> Self {
        Self::new()
    }
}

/// Releases the arenas the library keeps for reuse that compete with an
/// application allocation from `pool` the runtime just refused for lack of
/// memory, so that it can be tried again: the device arenas of the pool's
/// GPU, or the host arenas for a system pool (every arena when the pool's
/// owner cannot be found). Returns the bytes released (0: nothing to retry
/// for).
pub fn release_retained_for_application(ctx: &Context, pool: u64) -> u64 {
    use crate::memory_snapshot::storage::Tier;
    let owner = ctx
        .core()
        .zip(ctx.amd())
        .and_then(|(core, amd)| crate::hsa::query::pool_owner(core, amd, pool));
    let released = ctx.storage.trim_where(ctx, |agent, tier| match owner {
        Some(owner) if owner.gpu => tier == Tier::Device && agent == owner.agent,
        Some(_) => tier != Tier::Device,
        None => true,
    });
    if released > 0 {
        ctx.stats.arenas_released_for_application(released);
        log::info!(
            "an application allocation failed for lack of memory: released {released} bytes \
             of retained snapshot arenas and retried it"
        );
    }
    released
}
