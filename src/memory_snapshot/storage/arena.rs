//! Arenas: one backing allocation per tier per snapshot, with the snapshot's
//! regions packed into it, retained per agent and tier after the snapshot is
//! freed and handed to the next snapshot of that agent. Steady replay of many
//! dispatches therefore allocates nothing: no host buffers, no device or
//! pinned allocations.
//!
//! Each lease carries a stamp, unique in the process, and the stamp of the
//! lease before it on the same arena (0 for a fresh arena): a capture that
//! finds its arenas' previous stamps equal to those of an earlier capture
//! knows nothing has written them since, so their content is still that
//! capture's (incremental snapshots rely on it, `device/plan.rs`).
//!
//! Retention keeps the high-water mark: of two arenas of one agent and tier,
//! the larger is kept. `kr_trim_retained` releases what is retained;
//! `kr_finalize` does too, and arenas still leased are released when their
//! snapshots are freed. Everything held or retained counts against the
//! budgets.

use crate::support::page_bytes::PageBytes;
use crate::support::sync::Recover;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::budget::{DeviceBudget, HostBudget};
use super::pools::{self, AgentPools};
use super::PerTier;
use super::{PolicySetting, Tier};
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::context::Context;

/// Region offsets inside an arena are aligned to this, so every copy starts
/// on a boundary DMA engines like.
pub(crate) const REGION_ALIGNMENT: usize = 256;

/// The memory behind one arena.
pub enum Backing {
    /// Device or pinned host memory from a runtime pool, allocated and freed
    /// through the un-wrapped pool entries.
    Runtime { base: usize, capacity: usize },
    /// Pageable host memory.
    Pageable(PageBytes),
}

impl Backing {
    pub fn base(&mut self) -> usize {
        match self {
            Backing::Runtime { base, .. } => *base,
            Backing::Pageable(bytes) => bytes.as_mut_ptr() as usize,
        }
    }

    pub fn capacity(&self) -> usize {
        match self {
            Backing::Runtime { capacity, .. } => *capacity,
            Backing::Pageable(bytes) => bytes.len(),
        }
    }
}

/// Storage state of one agent.
struct AgentStorage {
    agent: u64,
    /// Discovered on first use, or set by `kr_set_storage_pools`.
    pools: Option<AgentPools>,
    retained: PerTier<Option<Backing>>,
    /// The stamp of the last lease of each retained arena.
    retained_stamp: PerTier<u64>,
    /// Bytes held per tier, leased and retained.
    held: PerTier<u64>,
}

/// The last lease stamp handed out (0 means "none").
static LEASE_STAMPS: AtomicU64 = AtomicU64::new(0);

fn next_stamp() -> u64 {
    LEASE_STAMPS.fetch_add(1, Ordering::Relaxed) + 1
}

/// What planning needs to know about an agent's storage, read under the lock.
#[derive(Debug, Clone, Copy)]
pub struct AgentView {
    pub pools: AgentPools,
    pub retained: PerTier<usize>,
    pub held: PerTier<u64>,
}

/// Why an arena could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireError {
    OverBudget,
    /// The tier has no pool for this agent (a CPU agent has no device tier;
    /// no host pool was found, or access to it cannot be granted).
    NoPool,
    /// The runtime (or the host allocator) refused the allocation, or the
    /// tier has no pool.
    Allocation,
}

/// All storage state: policy, budgets, per-agent arenas.
pub struct Storage {
    pub policy: PolicySetting,
    pub device_budget: DeviceBudget,
    pub host: HostBudget,
    agents: Mutex<Vec<AgentStorage>>,
}

/// An arena leased to one snapshot; returned for reuse when dropped.
pub struct Lease {
    cx: Context,
    agent: u64,
    tier: Tier,
    backing: Option<Backing>,
    /// This lease's stamp, and that of the arena's lease before it (0:
    /// none, a fresh arena).
    stamp: u64,
    previous: u64,
}

impl Lease {
    /// This lease's stamp, unique in the process.
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// The stamp of this arena's lease before this one; 0 for a fresh
    /// arena.
    pub fn previous(&self) -> u64 {
        self.previous
    }

    /// Address of the arena's first byte.
    pub fn base(&mut self) -> usize {
        self.backing.as_mut().map_or(0, Backing::base)
    }

    /// Releases the arena now instead of retaining it (a declined snapshot
    /// gives back everything it took).
    pub fn discard(mut self) {
        if let Some(backing) = self.backing.take() {
            self.cx
                .state
                .storage
                .release_now(self.cx, self.agent, self.tier, backing);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(backing) = self.backing.take() {
            self.cx
                .state
                .storage
                .give_back(self.cx, self.agent, self.tier, backing, self.stamp);
        }
    }
}

impl Storage {
    pub const fn new() -> Self {
        Storage {
            policy: PolicySetting::new(),
            device_budget: DeviceBudget::new(),
            host: HostBudget::new(),
            agents: Mutex::new(Vec::new()),
        }
    }

    fn agents(&self) -> MutexGuard<'_, Vec<AgentStorage>> {
        self.agents.locked()
    }

    /// The agent's entry, created (with its pools discovered) on first use.
    fn entry(
        cx: Context,
        agents: &mut Vec<AgentStorage>,
        agent: hsa_agent_t,
    ) -> Option<&mut AgentStorage> {
        let index = match agents.iter().position(|a| a.agent == agent.handle) {
            Some(index) => index,
            None => {
                agents.try_reserve(1).ok()?;
                agents.push(AgentStorage {
                    agent: agent.handle,
                    pools: None,
                    retained: [None, None, None],
                    retained_stamp: [0; Tier::COUNT],
                    held: [0; Tier::COUNT],
                });
                agents.len() - 1
            }
        };
        let entry = &mut agents[index];
        if entry.pools.is_none() {
            entry.pools = Some(match (cx.core(), cx.amd()) {
                (Some(core), Some(amd)) => pools::discover(core, amd, agent),
                _ => AgentPools::default(),
            });
        }
        Some(entry)
    }

    /// Pools, retained capacities and held bytes of `agent`.
    pub fn view(&self, cx: Context, agent: hsa_agent_t) -> AgentView {
        let mut agents = self.agents();
        match Self::entry(cx, &mut agents, agent) {
            Some(entry) => AgentView {
                pools: entry.pools.unwrap_or_default(),
                retained: [0, 1, 2]
                    .map(|t| entry.retained[t].as_ref().map_or(0, Backing::capacity)),
                held: entry.held,
            },
            None => AgentView {
                pools: AgentPools::default(),
                retained: [0; Tier::COUNT],
                held: [0; Tier::COUNT],
            },
        }
    }

    /// Sets the pools of `agent` (instead of discovering them).
    pub fn set_pools(&self, agent: hsa_agent_t, pools: AgentPools) {
        let mut agents = self.agents();
        if let Some(entry) = agents.iter_mut().find(|a| a.agent == agent.handle) {
            entry.pools = Some(pools);
            return;
        }
        if agents.try_reserve(1).is_ok() {
            agents.push(AgentStorage {
                agent: agent.handle,
                pools: Some(pools),
                retained: [None, None, None],
                retained_stamp: [0; Tier::COUNT],
                held: [0; Tier::COUNT],
            });
        }
    }

    /// Leases an arena of at least `bytes` in `tier` for a snapshot of
    /// `agent`: the retained one if it is large enough, else a new one (the
    /// too-small retained arena is released first).
    pub fn acquire(
        &self,
        cx: Context,
        agent: hsa_agent_t,
        tier: Tier,
        bytes: usize,
    ) -> Result<Lease, AcquireError> {
        let mut agents = self.agents();
        let entry = Self::entry(cx, &mut agents, agent).ok_or(AcquireError::Allocation)?;
        let slot = tier.index();
        if entry.retained[slot]
            .as_ref()
            .is_some_and(|b| b.capacity() >= bytes)
        {
            let backing = entry.retained[slot].take();
            return Ok(Lease {
                cx,
                agent: agent.handle,
                tier,
                backing,
                stamp: next_stamp(),
                previous: entry.retained_stamp[slot],
            });
        }
        if let Some(small) = entry.retained[slot].take() {
            release(cx, entry, tier, small);
        }
        // Exactly what the layout needs: budgets are checked against it, and
        // a steady workload asks for the same size every time.
        let capacity = bytes.max(1);
        if tier != Tier::Device && !self.host.claim(capacity as u64) {
            return Err(AcquireError::OverBudget);
        }
        let backing = allocate(cx, agent, entry.pools.unwrap_or_default(), tier, capacity);
        match backing {
            Some(backing) => {
                entry.held[slot] += backing.capacity() as u64;
                if tier != Tier::Device {
                    // A Vec may come back with more capacity than asked for.
                    let extra = (backing.capacity() - capacity) as u64;
                    if extra > 0 && !self.host.claim(extra) {
                        self.host.release(capacity as u64);
                        entry.held[slot] -= backing.capacity() as u64;
                        free(cx, tier, backing);
                        return Err(AcquireError::OverBudget);
                    }
                }
                Ok(Lease {
                    cx,
                    agent: agent.handle,
                    tier,
                    backing: Some(backing),
                    stamp: next_stamp(),
                    previous: 0,
                })
            }
            None => {
                if tier != Tier::Device {
                    self.host.release(capacity as u64);
                }
                Err(AcquireError::Allocation)
            }
        }
    }

    /// Takes back a snapshot's arena: retained if it is the agent's largest
    /// of that tier (and the library is not finalized), released otherwise.
    fn give_back(&self, cx: Context, agent: u64, tier: Tier, backing: Backing, stamp: u64) {
        let mut agents = self.agents();
        let Some(entry) = agents.iter_mut().find(|a| a.agent == agent) else {
            free(cx, tier, backing);
            return;
        };
        let slot = tier.index();
        let keep = !cx.tracker.gate.finalized()
            && entry.retained[slot]
                .as_ref()
                .is_none_or(|r| r.capacity() < backing.capacity());
        if keep {
            entry.retained_stamp[slot] = stamp;
            if let Some(smaller) = entry.retained[slot].replace(backing) {
                release(cx, entry, tier, smaller);
            }
        } else {
            release(cx, entry, tier, backing);
        }
    }

    /// Frees a backing without retaining it.
    fn release_now(&self, cx: Context, agent: u64, tier: Tier, backing: Backing) {
        let mut agents = self.agents();
        match agents.iter_mut().find(|a| a.agent == agent) {
            Some(entry) => release(cx, entry, tier, backing),
            None => free(cx, tier, backing),
        }
    }

    /// Releases every retained arena; returns the bytes released.
    pub fn trim(&self, cx: Context) -> u64 {
        self.trim_where(cx, |_, _| true)
    }

    /// Releases the retained arenas of the agents and tiers `which(agent,
    /// tier)` picks; returns the bytes released.
    pub fn trim_where(&self, cx: Context, which: impl Fn(u64, Tier) -> bool) -> u64 {
        let mut agents = self.agents();
        let mut released = 0;
        for entry in agents.iter_mut() {
            for &tier in Tier::ALL {
                if !which(entry.agent, tier) {
                    continue;
                }
                if let Some(backing) = entry.retained[tier.index()].take() {
                    released += backing.capacity() as u64;
                    release(cx, entry, tier, backing);
                }
            }
        }
        released
    }

    /// Bytes held per tier, all agents (leased and retained).
    pub fn held(&self) -> PerTier<u64> {
        let agents = self.agents();
        std::array::from_fn(|t| agents.iter().map(|a| a.held[t]).sum())
    }

    /// Bytes retained per tier, all agents.
    pub fn retained(&self) -> PerTier<u64> {
        let agents = self.agents();
        let capacity = |b: &Backing| b.capacity() as u64;
        std::array::from_fn(|t| {
            agents
                .iter()
                .map(|a| a.retained[t].as_ref().map_or(0, capacity))
                .sum()
        })
    }
}

impl Default for Storage {
    fn default() -> Self {
        Self::new()
    }
}

/// Frees a backing and takes it off the agent's (and the host budget's) books.
fn release(cx: Context, entry: &mut AgentStorage, tier: Tier, backing: Backing) {
    let capacity = backing.capacity() as u64;
    entry.held[tier.index()] -= capacity;
    if tier != Tier::Device {
        cx.state.storage.host.release(capacity);
    }
    free(cx, tier, backing);
}

fn free(cx: Context, _tier: Tier, backing: Backing) {
    if let Backing::Runtime { base, .. } = backing {
        if let Some(amd) = cx.amd() {
            // SAFETY: memory this library allocated from the same runtime
            // through the un-wrapped entry, no longer leased or retained.
            let _ = unsafe { amd.free(base as *mut c_void) };
        }
    }
}

/// Allocates a backing: device and pinned memory through the un-wrapped
/// pool allocator (so never tracked, never captured), pinned memory made
/// accessible to the replayed agent; pageable memory fallibly.
fn allocate(
    cx: Context,
    agent: hsa_agent_t,
    pools: AgentPools,
    tier: Tier,
    capacity: usize,
) -> Option<Backing> {
    let pool = match tier {
        Tier::Pageable => return PageBytes::try_new(capacity).map(Backing::Pageable),
        Tier::Device => pools.device_pool?.0,
        Tier::Pinned => pools.host_pool?.pool,
    };
    let amd = cx.amd()?;
    let ptr = amd.allocate(pool, capacity, 0).ok()?;
    if ptr.is_null() {
        return None;
    }
    if tier == Tier::Pinned {
        let granted = amd.hsa_amd_agents_allow_access_fn.is_some_and(|allow| {
            // SAFETY: one valid agent, no flags, our own fresh allocation.
            unsafe { allow(1, &agent, std::ptr::null(), ptr) == crate::hsa::HSA_STATUS_SUCCESS }
        });
        if !granted {
            // SAFETY: our own fresh allocation.
            let _ = unsafe { amd.free(ptr) };
            return None;
        }
    }
    Some(Backing::Runtime {
        base: ptr as usize,
        capacity,
    })
}
