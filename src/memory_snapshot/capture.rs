//! Capture: the snapshot of one agent's replay state. The region list is
//! built once — the tracked allocations and mappings, then the module
//! variables — laid out into the storage tiers, and copied under the
//! tracker's read views; a region freed meanwhile is dropped, not a failure.

use std::time::Instant;

use log::warn;

use super::context::Context;
use super::copy::copy_now;
use super::coverage::{self, NotCovered};
use super::decline::Decline;
use super::device::plan::DeviceUse;
use super::discovery::{self, DiscoveredVariable};
use super::host_buffer::HostBuffer;
use super::shared::ClaimRefused;
use super::snapshot::{copy_live_regions, Captured, Origin, Place, Region, Snapshot};
use super::storage::arena::Lease;
use super::storage::layout::{self, Layout, Need};
use super::storage::StoragePolicy;
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::storage::{PerTier, Tier};
use crate::memory_tracker::fence::Window;
use crate::memory_tracker::inventory::TrackedRegion;
use crate::memory_tracker::kind::MemoryKind;
use crate::support::fallible::retain_kept;

/// Captures the replay state of `agent`.
///
/// Never fails outright: a snapshot that could not be completed comes back
/// declined, with one warning saying why, and holds no memory.
pub fn snap(cx: Context, agent: hsa_agent_t) -> Snapshot {
    let started = Instant::now();
    let result = capture(cx, agent);
    let nanos = started.elapsed().as_nanos() as u64;
    match result {
        Ok(captured) => {
            let snapshot = Snapshot {
                agent,
                outcome: Ok(captured),
            };
            cx.tracker.counters.snapshot_taken(
                &snapshot.bytes_by_kind(),
                &snapshot.not_covered(),
                nanos,
            );
            snapshot
        }
        Err(decline) => {
            warn!(
                "snapshot of agent {:#x} declined ({}): {decline}; the dispatch will not be replayed",
                agent.handle,
                decline.reason()
            );
            cx.tracker
                .counters
                .snapshot_declined(decline.reason().code(), nanos);
            Snapshot::declined(agent, decline)
        }
    }
}

fn capture(cx: Context, agent: hsa_agent_t) -> Result<Captured, Decline> {
    let core = cx.core().ok_or(Decline::NotInitialized)?;
    // Resolved at install (kr_memory_tracker_init), so no allocation here.
    let policy = cx.state.storage.policy.get();
    if cx.tracker.gate.finalized() {
        return Err(Decline::Finalized);
    }
    if !crate::memory_tracker::wrappers_in_place(cx.tracker) {
        return Err(Decline::WrappersRemoved);
    }
    let iterate = cx
        .executable_iterator()
        .ok_or(Decline::NoExecutableIterator)?;
    let mut tracked = Vec::new();
    cx.tracker
        .inventory
        .collect_agent(
            agent.handle,
            cx.tracker.agent_bits.bit_of(agent.handle),
            &mut tracked,
        )
        .map_err(|_| Decline::RegionList)?;
    let not_covered = coverage::leave_out_host(cx, core, agent, &mut tracked)?;
    // Discovery calls back into the tool's iterator, which may run anything,
    // frees included: a tracked region freed from here on is simply dropped
    // below, when its generation no longer matches.
    let baseline = policy == StoragePolicy::Baseline;
    let variables = discovery::module_variables(cx, core, iterate, agent, !baseline)?;
    coverage::note_untracked(cx, agent, &tracked);
    // No application copy may write the agent's tracked memory while it is
    // captured: wait for those in flight, hold new ones back.
    let _windows = fence_windows(cx, agent, tracked.iter()).map_err(|refused| match refused {
        WindowsRefused::Memory => Decline::RegionList,
        WindowsRefused::InFlight(copies) => Decline::CopiesInFlight {
            copies,
            timeout_ms: cx.tracker.fences.timeout().as_millis() as u64,
        },
    })?;
    // Shared regions: one replay at a time (see `shared.rs`).
    let claims =
        cx.state
            .shared
            .claim(agent.handle, &tracked)
            .map_err(|refused| match refused {
                ClaimRefused::Busy { base, agent } => Decline::SharedRegionBusy { base, agent },
                ClaimRefused::Memory => Decline::RegionList,
            })?;
    let mut captured = if baseline {
        capture_baseline(cx, core, &tracked, &variables)
    } else {
        capture_into_arenas(cx, core, agent, policy, &tracked, &variables)
    }?;
    captured.claims = claims;
    captured.not_covered = not_covered;
    Ok(captured)
}

/// Why the fence's windows were not all opened.
pub(crate) enum WindowsRefused {
    /// Application copies still in flight after the timeout (how many).
    InFlight(u64),
    /// No host memory to hold the windows.
    Memory,
}

/// Opens the fence's window on `agent` and on every other owner of the
/// `tracked` regions (peer memory): an application copy into another GPU's
/// buffer that `agent` captures tears it as surely as one into its own.
/// Without peer memory, nothing is allocated.
pub(crate) fn fence_windows<'a>(
    cx: Context,
    agent: hsa_agent_t,
    tracked: impl Iterator<Item = &'a TrackedRegion>,
) -> Result<(Window<'static>, Vec<(u64, Window<'static>)>), WindowsRefused> {
    let own = fence_window(cx, agent).map_err(WindowsRefused::InFlight)?;
    let mut peers: Vec<(u64, Window<'static>)> = Vec::new();
    for region in tracked {
        let owner = region.owner;
        if owner == agent.handle || peers.iter().any(|(opened, _)| *opened == owner) {
            continue;
        }
        peers.try_reserve(1).map_err(|_| WindowsRefused::Memory)?;
        let window =
            fence_window(cx, hsa_agent_t { handle: owner }).map_err(WindowsRefused::InFlight)?;
        peers.push((owner, window));
    }
    Ok((own, peers))
}

/// Opens the async-copy fence's window on `agent` (see
/// `memory_tracker/fence.rs`), counting in the stats whether it had to wait
/// and whether the wait ran out; `Err(copies still in flight)` then.
pub(crate) fn fence_window(cx: Context, agent: hsa_agent_t) -> Result<Window<'static>, u64> {
    let waiting = cx.tracker.fences.in_flight(agent.handle) > 0;
    let window = cx.tracker.fences.open_window(agent.handle);
    if waiting || window.is_err() {
        cx.tracker.counters.fence_waited(window.is_err());
    }
    window
}

/// The design's original capture: a fresh host buffer and one blocking copy
/// per region, each tracked copy under the read lock after re-checking the
/// generation.
fn capture_baseline(
    cx: Context,
    core: &'static CoreEntries,
    tracked: &[TrackedRegion],
    variables: &[DiscoveredVariable],
) -> Result<Captured, Decline> {
    let mut regions = Vec::new();
    regions
        .try_reserve_exact(tracked.len() + variables.len())
        .map_err(|_| Decline::RegionList)?;
    for region in tracked {
        let mut host = host_buffer_for(cx, region.base, region.size)?;
        let copied = cx.tracker.inventory.with_live(region, || {
            // SAFETY: the host buffer holds region.size bytes; the device side
            // is a live allocation of at least that size (checked under the
            // lock we are holding).
            unsafe { device_to_host(core, &mut host, region.base, region.memory.is_host()) }
        });
        match copied {
            // Freed since the inventory was read: not part of this snapshot.
            None => continue,
            Some(result) => result?,
        }
        regions.push(Region {
            device_address: region.base,
            origin: Origin::Tracked(*region),
            size: region.size,
            place: Place::Owned(host),
        });
    }
    for variable in variables {
        let (address, size) = (variable.variable.address, variable.variable.size);
        let mut host = host_buffer_for(cx, address, size)?;
        // With the registry, the copy runs while the executable is provably
        // still loaded (and the restore will check again); without it, the
        // design's direct copy.
        let copied = match variable.executable {
            Some(exe) => cx.tracker.executables.live_view().contains(exe).then(|| {
                // SAFETY: the variable's executable is loaded and cannot be
                // unloaded while the view is held.
                unsafe { device_to_host(core, &mut host, address, false) }
            }),
            // SAFETY: the runtime reported this variable for the agent; its
            // storage lives as long as the executable, which is loaded now.
            None => Some(unsafe { device_to_host(core, &mut host, address, false) }),
        };
        match copied {
            // Unloaded since discovery: not part of this snapshot.
            None => continue,
            Some(result) => result?,
        }
        regions.push(Region {
            device_address: address,
            origin: Origin::ModuleVariable(variable.executable),
            size,
            place: Place::Owned(host),
        });
    }
    let host_agent = hsa_agent_t { handle: 0 };
    Ok(Captured {
        core,
        regions,
        leases: [None, None, None],
        bases: [0; Tier::COUNT],
        host_agent,
        batch: false,
        device: DeviceUse::default(),
        claims: None,
        not_covered: NotCovered::default(),
    })
}

/// Capture into the storage tiers' arenas, with batched copies where the
/// runtime has them. The region list is built once, laid out (each region
/// gets its tier and offset), and copied under the tracker's read views
/// (`copy_live_regions`). A declined capture releases its arenas at once.
fn capture_into_arenas(
    cx: Context,
    core: &'static CoreEntries,
    agent: hsa_agent_t,
    policy: StoragePolicy,
    tracked: &[TrackedRegion],
    variables: &[DiscoveredVariable],
) -> Result<Captured, Decline> {
    let listed = list_regions(tracked, variables)?;
    let mut needs = Vec::new();
    needs
        .try_reserve_exact(listed.len())
        .map_err(|_| Decline::RegionList)?;
    needs.extend(listed.iter().map(|&(_, size, origin)| Need {
        size,
        host_memory: matches!(origin, Origin::Tracked(r) if r.memory.is_host()),
        managed: matches!(origin, Origin::Tracked(r) if r.memory == MemoryKind::Managed),
    }));
    let Layout { places, mut leases } =
        layout::lay_out(cx, agent, &needs, policy).map_err(Decline::Layout)?;
    let bases = [0, 1, 2].map(|t| leases[t].as_mut().map_or(0, Lease::base));
    let mut regions = Vec::new();
    if regions.try_reserve_exact(listed.len()).is_err() {
        discard(leases);
        return Err(Decline::RegionList);
    }
    // The layout answers in the order it was asked: one place per listed
    // region.
    regions.extend(listed.into_iter().zip(places).map(
        |((device_address, size, origin), (tier, offset))| Region {
            device_address,
            origin,
            size,
            place: Place::Arena { tier, offset },
        },
    ));
    let host_agent = cx
        .state
        .storage
        .view(cx, agent)
        .pools
        .host_pool
        .map_or(hsa_agent_t { handle: 0 }, |h| h.cpu_agent);
    let mut captured = Captured {
        core,
        regions,
        leases,
        bases,
        host_agent,
        batch: cx.state.batch_copies(),
        device: DeviceUse::default(),
        claims: None,
        not_covered: NotCovered::default(),
    };
    captured.device.plan = super::device::choose::plan(cx, &mut captured, agent);
    match copy_in(cx, &mut captured, agent) {
        Ok(()) => Ok(captured),
        Err(decline) => {
            discard(std::mem::take(&mut captured.leases));
            Err(decline)
        }
    }
}

/// The regions to capture: each tracked allocation or mapping, then each
/// module variable, as (device address, size, origin).
fn list_regions(
    tracked: &[TrackedRegion],
    variables: &[DiscoveredVariable],
) -> Result<Vec<(usize, usize, Origin)>, Decline> {
    let mut listed = Vec::new();
    listed
        .try_reserve_exact(tracked.len() + variables.len())
        .map_err(|_| Decline::RegionList)?;
    listed.extend(
        tracked
            .iter()
            .map(|r| (r.base, r.size, Origin::Tracked(*r))),
    );
    listed.extend(variables.iter().map(|v| {
        (
            v.variable.address,
            v.variable.size,
            Origin::ModuleVariable(v.executable),
        )
    }));
    Ok(listed)
}

/// Gives a declined capture's arenas back at once (not retained).
fn discard(leases: PerTier<Option<Lease>>) {
    for lease in leases.into_iter().flatten() {
        lease.discard();
    }
}

/// Copies every listed region into its place; a region freed or unloaded
/// since it was listed is dropped from the snapshot.
fn copy_in(cx: Context, captured: &mut Captured, agent: hsa_agent_t) -> Result<(), Decline> {
    let mut kept = Vec::new();
    kept.try_reserve_exact(captured.regions.len())
        .map_err(|_| Decline::RegionList)?;
    kept.resize(captured.regions.len(), true);
    let (outcomes, device) =
        copy_live_regions(cx, captured, agent, false, captured.batch, |index| {
            kept[index] = false
        })
        .ok_or(Decline::RegionList)?;
    super::device::choose::captured(cx, captured, &device);
    if let Some(&(index, status)) = outcomes.failures.first() {
        let region = &captured.regions[index];
        return Err(Decline::Copy {
            address: region.device_address,
            size: region.size,
            status,
        });
    }
    retain_kept(&mut captured.regions, &kept);
    // The device plan knows regions by index: it drops the same ones.
    captured.device.keep_regions(&kept);
    if captured.device.ran.incremental && cx.state.verify() {
        // Verify mode checks what an incremental capture skipped, too.
        super::verify::verify(cx, captured, agent, true);
    }
    Ok(())
}

fn host_buffer_for(cx: Context, address: usize, size: usize) -> Result<HostBuffer, Decline> {
    HostBuffer::try_new(size, &cx.state.storage.host).map_err(|error| Decline::HostBuffer {
        address,
        size,
        error,
    })
}

/// Copies `host.len()` bytes from the device into `host`.
///
/// # Safety
/// `device` must be valid device memory of at least `host.len()` bytes.
unsafe fn device_to_host(
    core: &CoreEntries,
    host: &mut HostBuffer,
    device: usize,
    by_cpu: bool,
) -> Result<(), Decline> {
    let size = host.len();
    // SAFETY: the destination is our buffer of `size` bytes, the source the
    // caller's promise (host memory when `by_cpu`).
    unsafe { copy_now(core, host.as_mut_ptr() as usize, device, size, by_cpu) }.map_err(|status| {
        Decline::Copy {
            address: device,
            size,
            status,
        }
    })
}
