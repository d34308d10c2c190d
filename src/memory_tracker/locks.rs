//! Host memory locked for GPUs (`hsa_amd_memory_lock`,
//! `hsa_amd_memory_lock_to_pool`: what `hipHostRegister` makes), recorded by
//! the lock wrappers and retired before the runtime unlocks it.
//!
//! The wrappers are the only witness: from ROCm 5.6 the runtime registers a
//! locked range through the kernel driver's SVM interface and
//! `hsa_amd_pointer_info` answers "unknown" for it. So a lock records the
//! range itself, owned by the CPU agent of the pool it was locked to (or
//! the first CPU agent), granted to the GPUs it names (every GPU when it
//! names none, as ROCr does; CPU agents in the list name no GPU access). HIP
//! locks a range once per GPU, each call naming one: a lock of a range
//! already locked with the same size counts one more lock and adds its GPU,
//! and the range is retired at its last unlock, before the runtime's
//! unlock runs (the one retire-before-free of `registry.rs`).
//!
//! The pool's grain is kept: HIP pins the application's pageable memory for
//! the length of one copy by locking it to the coarse-grained CPU pool,
//! while `hipHostRegister` locks to the fine-grained one; the host-memory
//! setting tells them apart by it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::Tracker;
use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::query::{self, pool_info};
use crate::hsa::sys::{
    hsa_amd_memory_pool_t, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
    HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
};
use crate::hsa::{hsa_agent_t, HSA_STATUS_SUCCESS};
use crate::support::sync::Recover;

/// What a lock needs to know of a pool, asked once per pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PoolFacts {
    pool: u64,
    /// The agent that owns it (0: none found).
    owner: u64,
    coarse: bool,
}

/// The facts of the pools locks named, and the first CPU agent.
pub struct LockFacts {
    pools: Mutex<Vec<PoolFacts>>,
    /// The first CPU agent, 0 until asked.
    cpu: AtomicU64,
}

impl LockFacts {
    pub const fn new() -> Self {
        LockFacts {
            pools: Mutex::new(Vec::new()),
            cpu: AtomicU64::new(0),
        }
    }

    fn pool(&self, core: &CoreEntries, amd: &AmdEntries, pool: u64) -> PoolFacts {
        if let Some(known) = self.pools.locked().iter().find(|p| p.pool == pool) {
            return *known;
        }
        let flags: u32 = pool_info(
            amd,
            hsa_amd_memory_pool_t { handle: pool },
            HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
        )
        .unwrap_or(0);
        let facts = PoolFacts {
            pool,
            owner: query::pool_owner(core, amd, pool).map_or(0, |owner| owner.agent),
            coarse: flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0,
        };
        let mut pools = self.pools.locked();
        if pools.try_reserve(1).is_ok() {
            pools.push(facts);
        }
        facts
    }

    /// The first CPU agent (asked once): the owner of locked and managed
    /// memory.
    pub(crate) fn cpu_agent(&self, tracker: &Tracker, core: &CoreEntries) -> u64 {
        match self.cpu.load(Ordering::Acquire) {
            0 => {
                let cpu = query::agents(core)
                    .into_iter()
                    .find(|agent| tracker.agent_bits.is_cpu(core, agent.handle))
                    .map_or(0, |agent| agent.handle);
                self.cpu.store(cpu, Ordering::Release);
                cpu
            }
            cpu => cpu,
        }
    }
}

impl Default for LockFacts {
    fn default() -> Self {
        Self::new()
    }
}

/// After a successful lock of `[base, base + size)` for `listed` (empty:
/// every GPU), to `pool` (`None`: `hsa_amd_memory_lock`'s own choice).
pub fn locked(
    tracker: &Tracker,
    base: usize,
    size: usize,
    listed: &[hsa_agent_t],
    pool: Option<u64>,
) {
    let (Some(core), Some(amd)) = (tracker.core(), tracker.amd()) else {
        return;
    };
    let grants = if listed.is_empty() {
        tracker.agent_bits.all_gpus(core)
    } else {
        tracker.agent_bits.gpus_of(core, listed)
    };
    // No GPU named: the runtime registered nothing.
    if grants == 0 || size == 0 {
        return;
    }
    let (owner, coarse) = match pool {
        Some(pool) => {
            let facts = tracker.lock_facts.pool(core, amd, pool);
            (facts.owner, facts.coarse)
        }
        None => (tracker.lock_facts.cpu_agent(tracker, core), false),
    };
    if owner == 0 {
        return;
    }
    tracker.inventory.lock(base, size, owner, grants, coarse);
}

/// Unlocks `base` through the runtime (`unlock`): a range still held by
/// other locks is only counted down; at its last lock it is retired first,
/// so no snapshot reads and no restore writes it once the runtime may have
/// released it.
pub fn unlock(
    tracker: &Tracker,
    base: usize,
    unlock: impl FnOnce() -> crate::hsa::hsa_status_t,
) -> crate::hsa::hsa_status_t {
    tracker
        .inventory
        .unlock_then(base, unlock, |status| *status == HSA_STATUS_SUCCESS)
}
