//! What a snapshot covers, and what it does not: the footprint a snapshot of
//! an agent would take now, and the device memory in use on the agent that
//! the inventory does not cover, as far as the runtime reports it.
//!
//! Untracked memory is said, not hidden: a snapshot that silently missed a
//! `hipMallocAsync` pool or fine-grained buffers would let one pass's writes
//! leak into the next with no warning. The runtime's own figure is the
//! agent's free memory (`HSA_AMD_AGENT_INFO_MEMORY_AVAIL`, which ROCr takes
//! from the kernel driver: other processes' use of the device counts too);
//! what is in use less what is tracked and less the library's own arenas
//! and kernel buffers is what a snapshot does not cover. A snapshot logs it
//! once per agent when it passes [`LOG_THRESHOLD`], and the stats carry the last figure.

use crate::support::sync::Recover;
use std::sync::Mutex;

use log::warn;

use super::decline::Decline;
use super::discovery;
use super::host_memory::{self, Coverage, HostMemory};
use super::storage::pools::memory_available;
use super::storage::{StoragePolicy, Tier};
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::hsa::query;
use crate::memory_snapshot::context::Context;
use crate::memory_tracker::inventory::TrackedRegion;
use crate::memory_tracker::kind::MemoryKind;
use crate::memory_tracker::managed::{self, Capturable};
use crate::support::stats::KIND_SLOTS;

/// Untracked device memory above this is logged (once per agent).
pub(crate) const LOG_THRESHOLD: u64 = 64 << 20;

/// Device memory in use on an agent that snapshots do not cover.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Untracked {
    /// In use less tracked less the library's arenas; `None` when the
    /// runtime does not report the agent's free memory (or it has no device
    /// pool).
    pub bytes: Option<u64>,
    /// Of the mappings the wrappers saw on the agent, those not captured
    /// (fine-grained memory, no write access for the agent, or made while
    /// tracking was off): count and bytes.
    pub vmem_regions: usize,
    pub vmem_bytes: u64,
}

/// Bytes and regions: what a snapshot of an agent would take now
/// (`kr_estimate_footprint`), or what is tracked for it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Bytes of the regions (before the 256-byte alignment of the arenas).
    pub bytes: u64,
    /// Number of regions.
    pub regions: usize,
}

/// The untracked device memory of `agent`, given the bytes tracked for it.
fn untracked_with(cx: Context, agent: hsa_agent_t, tracked_bytes: u64) -> Untracked {
    let view = cx.state.storage.view(cx, agent);
    let bytes = view.pools.device_pool.and_then(|(_, pool_size)| {
        let available = memory_available(cx.core()?, agent)?;
        let in_use = pool_size.saturating_sub(available);
        Some(
            in_use
                .saturating_sub(tracked_bytes)
                .saturating_sub(view.held[Tier::Device.index()])
                .saturating_sub(super::device::buffers::device_bytes_held(agent.handle)),
        )
    });
    #[cfg(hsa_vmem)]
    let (vmem_regions, vmem_bytes) = cx.tracker.mappings.uncaptured(cx.tracker, agent.handle);
    #[cfg(not(hsa_vmem))]
    let (vmem_regions, vmem_bytes) = (0, 0);
    Untracked {
        bytes,
        vmem_regions,
        vmem_bytes,
    }
}

/// Device memory in use on `agent` that the inventory does not cover.
pub fn untracked(cx: Context, agent: hsa_agent_t) -> Untracked {
    untracked_with(cx, agent, cx.tracker.inventory.agent_totals(agent.handle).1)
}

/// The bytes and regions a snapshot of `agent` would take now: its tracked
/// allocations and mappings, and the module variables of every loaded
/// executable, found as the snapshot finds them (an executable the
/// discovery cache has not seen is walked now, and stays cached for the
/// snapshot). Should the walk fail (no iterator, no host memory, an
/// iterator error), the snapshot would decline; the estimate then counts
/// what the cache holds. After finalize a snapshot takes nothing: zero.
pub fn estimate_footprint(cx: Context, agent: hsa_agent_t) -> Footprint {
    if cx.tracker.gate.finalized() {
        return Footprint::default();
    }
    let rule = host_rule(cx);
    let bit = cx.tracker.agent_bits.bit_of(agent.handle);
    let (mut regions, mut bytes) =
        cx.tracker
            .inventory
            .capture_totals(agent.handle, bit, |memory, coarse| {
                memory != MemoryKind::Managed && rule.captures(memory, coarse)
            });
    // Managed ranges: those the snapshot would take after asking the
    // runtime about each, as it does.
    if takes_managed(cx, rule) {
        if let (Ok(managed), Some(amd)) = (cx.tracker.inventory.managed_of(bit), cx.amd()) {
            for (base, size) in managed {
                if managed::capturable(amd, base, size, agent) == Capturable::Yes {
                    regions += 1;
                    bytes += size as u64;
                }
            }
        }
    }
    let walked = cx
        .core()
        .zip(cx.executable_iterator())
        .and_then(|(core, iterate)| {
            discovery::module_variables(cx, core, iterate, agent, true).ok()
        });
    let (variables, variable_bytes) = match walked {
        Some(found) => found.iter().fold((0, 0), |(count, bytes), v| {
            (count + 1, bytes + v.variable.size as u64)
        }),
        None => cx
            .state
            .discovery_cache
            .agent_totals(agent.handle, &cx.tracker.executables.live_view()),
    };
    Footprint {
        bytes: bytes + variable_bytes,
        regions: regions + variables,
    }
}

/// Agents whose untracked memory was logged already.
static LOGGED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Agents whose uncovered host or system memory was logged already.
static LOGGED_NOT_COVERED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Whether `agent` is not in `logged` yet (it is from now on).
fn first_time(logged: &Mutex<Vec<u64>>, agent: u64) -> bool {
    let mut logged = logged.locked();
    let first = !logged.contains(&agent);
    if first && logged.try_reserve(1).is_ok() {
        logged.push(agent);
    }
    first
}

/// Memory an agent can write that one snapshot does not cover, as far as
/// the library knows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NotCovered {
    /// Bytes per memory kind left out: host memory the host-memory setting
    /// leaves out, managed memory the agent may not reach (or that the
    /// setting or the baseline policy leaves out).
    pub bytes: [u64; KIND_SLOTS],
    /// XNACK is on: kernels may write any system memory.
    pub system_memory: bool,
}

impl NotCovered {
    /// Host bytes left out, every kind together.
    pub fn host_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }

    /// Whether anything is not covered.
    pub fn any(&self) -> bool {
        self.system_memory || self.host_bytes() > 0
    }
}

/// The host-memory rule in force for snapshots now.
pub fn host_rule(cx: Context) -> HostMemory {
    cx.state.host_memory().resolved(host_memory::hip_loaded())
}

/// Whether snapshots take managed memory now: the host-memory rule's say,
/// and never under the baseline policy, whose pageable buffers no GPU can
/// copy into (a CPU copy would migrate the pages it reads).
fn takes_managed(cx: Context, rule: HostMemory) -> bool {
    rule.captures(MemoryKind::Managed, false)
        && cx.state.storage.policy.get() != StoragePolicy::Baseline
}

/// At a snapshot: drops from `tracked` the host memory the host-memory
/// setting leaves out, and says what the snapshot will not cover. Under
/// strict coverage anything not covered declines; otherwise the first
/// snapshot of the agent that leaves something out warns.
pub fn leave_out_host(
    cx: Context,
    core: &CoreEntries,
    agent: hsa_agent_t,
    tracked: &mut Vec<TrackedRegion>,
) -> Result<NotCovered, Decline> {
    let rule = host_rule(cx);
    let mut not_covered = NotCovered {
        system_memory: query::xnack_enabled(core),
        ..NotCovered::default()
    };
    let managed_taken = takes_managed(cx, rule);
    let amd = cx.amd();
    tracked.retain(|region| {
        let kept = if region.memory == MemoryKind::Managed {
            // Asked now: unmapped behind the library's back (ROCm 6.x frees
            // managed memory with munmap), it is gone; not reachable by the
            // agent, or not takeable here, it is not covered.
            let verdict = amd.map_or(Capturable::Gone, |amd| {
                managed::capturable(amd, region.base, region.size, agent)
            });
            match verdict {
                Capturable::Gone => return false,
                Capturable::Yes => managed_taken,
                Capturable::NoAccess => false,
            }
        } else {
            rule.captures(region.memory, region.coarse)
        };
        if !kept {
            not_covered.bytes[region.memory.index()] += region.size as u64;
        }
        kept
    });
    if !not_covered.any() {
        return Ok(not_covered);
    }
    if cx.state.coverage() == Coverage::Strict {
        return Err(Decline::Uncovered {
            host_bytes: not_covered.host_bytes(),
            xnack: not_covered.system_memory,
        });
    }
    if first_time(&LOGGED_NOT_COVERED, agent.handle) {
        let managed = not_covered.bytes[MemoryKind::Managed.index()];
        warn!(
            "snapshots of agent {:#x} do not cover all memory its kernels can write: {} bytes \
             of host memory (host-memory setting {rule:?}; KERNEL_REPLAY_HOST_MEMORY=all \
             captures it){}{}; passes writing it are not replayed exactly \
             (kr_snapshot_uncovered_bytes; KERNEL_REPLAY_COVERAGE=strict declines instead)",
            agent.handle,
            not_covered.host_bytes() - managed,
            ManagedNote(managed),
            if not_covered.system_memory {
                ", and any system memory: XNACK is on"
            } else {
                ""
            }
        );
    }
    Ok(not_covered)
}

/// The warning's words on managed memory left out (none: nothing).
struct ManagedNote(u64);

impl std::fmt::Display for ManagedNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => Ok(()),
            bytes => write!(
                f,
                ", {bytes} bytes of managed memory (not reachable by the agent, the \
                 setting off, or the baseline storage policy)"
            ),
        }
    }
}

/// At a snapshot: records the untracked memory of `agent` in the stats and
/// logs it the first time it passes the threshold.
pub fn note_untracked(cx: Context, agent: hsa_agent_t, tracked: &[TrackedRegion]) {
    // Peer memory is another agent's: not part of this one's memory in use.
    let tracked_bytes = tracked
        .iter()
        .filter(|r| r.owner == agent.handle)
        .map(|r| r.size as u64)
        .sum();
    let untracked = untracked_with(cx, agent, tracked_bytes);
    let bytes = untracked.bytes.unwrap_or(0);
    cx.tracker
        .counters
        .untracked_device_bytes
        .store(bytes, std::sync::atomic::Ordering::Relaxed);
    if bytes <= LOG_THRESHOLD {
        return;
    }
    if first_time(&LOGGED, agent.handle) {
        warn!(
            "{bytes} bytes of device memory in use on agent {:#x} are not covered by its \
             snapshots ({} of them in {} virtual-memory mapping(s) not captured): allocated \
             before tracking was on, fine-grained, or another process's; kernels writing them \
             are not replayed exactly (kr_untracked_device_bytes)",
            agent.handle, untracked.vmem_bytes, untracked.vmem_regions
        );
    }
}
