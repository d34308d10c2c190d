//! The memory snapshot (the SDK's `memory_snapshot.cpp`): capture of one
//! agent's replay state, and its restore between passes.
//!
//! A snapshot holds one copy per region: each tracked allocation owned by
//! the agent, and each module-scope variable visible to it. It is either
//! complete or declined: a partial snapshot restored between passes would
//! write back some regions and leave others carrying a later pass's
//! mutations, so any failure during capture releases what was captured and
//! declines replay with a reason.
//!
//! Where the copies live is the storage policy's choice (`storage/`): packed
//! into reused device, pinned or pageable arenas, copied in batches
//! (`copy.rs`); or, under the `baseline` policy, the design's original path
//! of one fresh pageable buffer and one blocking copy per region.

pub mod copy;
pub mod coverage;
pub mod decline;
pub mod discovery;
pub mod discovery_cache;
pub mod host_buffer;
pub mod restore;
pub mod state;
pub mod storage;

use std::ffi::c_void;
use std::time::Instant;

use log::warn;

use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::state::Env;
use crate::memory_tracker::executables::{LiveExecutables, LoadedExecutable};
use crate::memory_tracker::inventory::{LiveCursor, TrackedRegion};
use copy::{Copier, Transfer};
pub use decline::Decline;
use discovery::DiscoveredVariable;
use host_buffer::HostBuffer;
use storage::arena::Lease;
use storage::layout::{self, Layout, LayoutError};
use storage::{StoragePolicy, Tier};

pub use decline::DeclineReason;
pub use restore::{restore, RestoreReport};

/// Where a captured region came from, which decides how restore validates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A tracked allocation: restored only while it is still that allocation.
    Tracked(TrackedRegion),
    /// A module-scope variable. With the executable registry (the library
    /// wraps `hsa_executable_destroy`), restored only while its executable is
    /// still loaded; without it, written directly.
    ModuleVariable(Option<LoadedExecutable>),
}

/// Where a region's copy is kept.
enum Place {
    /// The baseline: a buffer of its own.
    Owned(HostBuffer),
    /// At `offset` in the snapshot's arena of `tier`.
    Arena { tier: Tier, offset: usize },
}

/// One captured region.
pub struct Region {
    pub device_address: usize,
    pub origin: Origin,
    size: usize,
    place: Place,
}

impl Region {
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn tier(&self) -> Tier {
        match self.place {
            Place::Owned(_) => Tier::Pageable,
            Place::Arena { tier, .. } => tier,
        }
    }
}

/// A complete capture, or the reason there is none.
pub struct Snapshot {
    agent: hsa_agent_t,
    outcome: Result<Captured, Decline>,
}

struct Captured {
    /// The entries the capture used; restore writes back through the same.
    core: CoreEntries,
    regions: Vec<Region>,
    /// Arenas by tier; dropped (returned for reuse) with the snapshot.
    leases: [Option<Lease>; 3],
    /// Base address of each tier's arena.
    bases: [usize; 3],
    /// The host-side agent of pinned copies (the host pool's CPU agent).
    host_agent: hsa_agent_t,
    /// Whether copies may be batched (false: the baseline, or forced blocking).
    batch: bool,
}

impl Snapshot {
    fn declined(agent: hsa_agent_t, decline: Decline) -> Self {
        Snapshot {
            agent,
            outcome: Err(decline),
        }
    }

    pub fn agent(&self) -> hsa_agent_t {
        self.agent
    }

    pub fn ok(&self) -> bool {
        self.outcome.is_ok()
    }

    pub fn decline_reason(&self) -> Option<DeclineReason> {
        self.decline().map(|decline| decline.reason())
    }

    /// Why the snapshot declined, with what its log line said.
    pub fn decline(&self) -> Option<Decline> {
        self.outcome.as_ref().err().copied()
    }

    pub fn regions(&self) -> &[Region] {
        match &self.outcome {
            Ok(captured) => &captured.regions,
            Err(_) => &[],
        }
    }

    pub fn byte_count(&self) -> u64 {
        self.regions().iter().map(|r| r.size() as u64).sum()
    }

    /// Bytes of the regions kept in `tier`.
    pub fn tier_bytes(&self, tier: Tier) -> u64 {
        self.regions()
            .iter()
            .filter(|r| r.tier() == tier)
            .map(|r| r.size() as u64)
            .sum()
    }
}

impl Captured {
    /// The copy that moves `region`'s bytes between the device and where the
    /// snapshot keeps them. `to_device`: restore; otherwise capture.
    fn transfer(&self, agent: hsa_agent_t, region: &Region, to_device: bool) -> Transfer {
        let (kept, kept_agent, async_ok) = match region.place {
            Place::Owned(ref buffer) => (buffer.as_ptr() as usize, self.host_agent, false),
            Place::Arena { tier, offset } => {
                let address = self.bases[tier.index()] + offset;
                match tier {
                    Tier::Device => (address, agent, true),
                    Tier::Pinned => (address, self.host_agent, true),
                    Tier::Pageable => (address, self.host_agent, false),
                }
            }
        };
        let (device, device_agent) = (region.device_address, agent);
        if to_device {
            Transfer {
                dst: device,
                dst_agent: device_agent,
                src: kept,
                src_agent: kept_agent,
                size: region.size,
                async_ok,
            }
        } else {
            Transfer {
                dst: kept,
                dst_agent: kept_agent,
                src: device,
                src_agent: device_agent,
                size: region.size,
                async_ok,
            }
        }
    }
}

/// Captures the replay state of `agent`.
///
/// Never fails outright: a snapshot that could not be completed comes back
/// declined, with one warning saying why, and holds no memory.
pub fn snap(env: Env, agent: hsa_agent_t) -> Snapshot {
    let started = Instant::now();
    let result = capture(env, agent);
    let nanos = started.elapsed().as_nanos() as u64;
    match result {
        Ok(captured) => {
            let snapshot = Snapshot {
                agent,
                outcome: Ok(captured),
            };
            env.tracker
                .stats
                .snapshot_taken(snapshot.byte_count(), nanos);
            snapshot
        }
        Err(decline) => {
            warn!(
                "snapshot of agent {:#x} declined ({}): {decline}; the dispatch will not be replayed",
                agent.handle,
                decline.reason()
            );
            env.tracker
                .stats
                .snapshot_declined(decline.reason().code(), nanos);
            Snapshot::declined(agent, decline)
        }
    }
}

fn capture(env: Env, agent: hsa_agent_t) -> Result<Captured, Decline> {
    let core = *env.core().ok_or(Decline::NotInitialized)?;
    // Resolved at install (kr_memory_tracker_init), so no allocation here.
    let policy = env.state.storage.policy.get();
    if env.tracker.gate.finalized() {
        return Err(Decline::Finalized);
    }
    if !crate::memory_tracker::wrappers_in_place(env.tracker) {
        return Err(Decline::WrappersRemoved);
    }
    let iterate = env
        .executable_iterator()
        .ok_or(Decline::NoExecutableIterator)?;
    let mut tracked = Vec::new();
    env.tracker
        .inventory
        .collect_agent(agent.handle, &mut tracked)
        .map_err(|_| Decline::RegionList)?;
    // Discovery calls back into the tool's iterator, which may run anything,
    // frees included: a tracked region freed from here on is simply dropped
    // below, when its generation no longer matches.
    let baseline = policy == StoragePolicy::Baseline;
    let variables = discovery::module_variables(env, &core, iterate, agent, !baseline)?;
    coverage::note_untracked(env, agent, &tracked);
    // No application copy may write the agent's tracked memory while it is
    // captured: wait for those in flight, hold new ones back.
    let _window = fence_window(env, agent).map_err(|copies| Decline::CopiesInFlight {
        copies,
        timeout_ms: env.tracker.fences.timeout().as_millis() as u64,
    })?;
    if baseline {
        capture_baseline(env, core, &tracked, &variables)
    } else {
        capture_into_arenas(env, core, agent, policy, &tracked, &variables)
    }
}

/// Opens the async-copy fence's window on `agent` (see
/// `memory_tracker/fence.rs`), counting in the stats whether it had to wait
/// and whether the wait ran out; `Err(copies still in flight)` then.
pub(crate) fn fence_window(
    env: Env,
    agent: hsa_agent_t,
) -> Result<crate::memory_tracker::fence::Window<'static>, u64> {
    let waiting = env.tracker.fences.in_flight(agent.handle) > 0;
    let window = env.tracker.fences.open_window(agent.handle);
    if waiting || window.is_err() {
        env.tracker.stats.fence_waited(window.is_err());
    }
    window
}

/// The design's original capture: a fresh host buffer and one blocking copy
/// per region, each tracked copy under the read lock after re-checking the
/// generation.
fn capture_baseline(
    env: Env,
    core: CoreEntries,
    tracked: &[TrackedRegion],
    variables: &[DiscoveredVariable],
) -> Result<Captured, Decline> {
    let mut regions = Vec::new();
    regions
        .try_reserve_exact(tracked.len() + variables.len())
        .map_err(|_| Decline::RegionList)?;
    for region in tracked {
        let mut host = host_buffer_for(env, region.base, region.size)?;
        let copied = env.tracker.inventory.with_live(region, || {
            // SAFETY: the host buffer holds region.size bytes; the device side
            // is a live allocation of at least that size (checked under the
            // lock we are holding).
            unsafe { device_to_host(&core, &mut host, region.base) }
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
        let mut host = host_buffer_for(env, address, size)?;
        // With the registry, the copy runs while the executable is provably
        // still loaded (and the restore will check again); without it, the
        // design's direct copy.
        let copied = match variable.executable {
            Some(exe) => env.tracker.executables.live_view().contains(exe).then(|| {
                // SAFETY: the variable's executable is loaded and cannot be
                // unloaded while the view is held.
                unsafe { device_to_host(&core, &mut host, address) }
            }),
            // SAFETY: the runtime reported this variable for the agent; its
            // storage lives as long as the executable, which is loaded now.
            None => Some(unsafe { device_to_host(&core, &mut host, address) }),
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
        bases: [0; 3],
        host_agent,
        batch: false,
    })
}

/// Capture into the storage tiers' arenas, with batched copies where the
/// runtime has them. All copies run, and finish, while the inventory's and
/// the executable registry's read locks are held, so nothing captured can be
/// freed or unloaded under a copy. A declined capture releases its arenas
/// at once.
fn capture_into_arenas(
    env: Env,
    core: CoreEntries,
    agent: hsa_agent_t,
    policy: StoragePolicy,
    tracked: &[TrackedRegion],
    variables: &[DiscoveredVariable],
) -> Result<Captured, Decline> {
    let count = tracked.len() + variables.len();
    let mut sizes = Vec::new();
    sizes
        .try_reserve_exact(count)
        .map_err(|_| Decline::RegionList)?;
    sizes.extend(tracked.iter().map(|r| r.size));
    sizes.extend(variables.iter().map(|v| v.variable.size));
    let Layout { places, mut leases } =
        layout::lay_out(env, agent, &sizes, policy).map_err(Decline::Layout)?;
    let bases = [0, 1, 2].map(|t| leases[t].as_mut().map_or(0, Lease::base));
    let host_agent = env
        .state
        .storage
        .view(env, agent)
        .pools
        .host_pool
        .map_or(hsa_agent_t { handle: 0 }, |h| h.cpu_agent);
    let mut captured = Captured {
        core,
        regions: Vec::new(),
        leases,
        bases,
        host_agent,
        batch: env.state.batch_copies(),
    };
    match fill_arenas(env, &mut captured, agent, &places, tracked, variables) {
        Ok(()) => Ok(captured),
        Err(decline) => {
            for lease in std::mem::take(&mut captured.leases).into_iter().flatten() {
                lease.discard();
            }
            Err(decline)
        }
    }
}

/// Lists the regions at their places and copies each into its arena.
fn fill_arenas(
    env: Env,
    captured: &mut Captured,
    agent: hsa_agent_t,
    places: &[(Tier, usize)],
    tracked: &[TrackedRegion],
    variables: &[DiscoveredVariable],
) -> Result<(), Decline> {
    let count = tracked.len() + variables.len();
    let mut regions = Vec::new();
    regions
        .try_reserve_exact(count)
        .map_err(|_| Decline::RegionList)?;
    let origins = tracked
        .iter()
        .map(|r| (r.base, r.size, Origin::Tracked(*r)))
        .chain(variables.iter().map(|v| {
            (
                v.variable.address,
                v.variable.size,
                Origin::ModuleVariable(v.executable),
            )
        }));
    for ((device_address, size, origin), &(tier, offset)) in origins.zip(places) {
        regions.push(Region {
            device_address,
            origin,
            size,
            place: Place::Arena { tier, offset },
        });
    }
    captured.regions = regions;

    let mut kept = Vec::new();
    kept.try_reserve_exact(count)
        .map_err(|_| Decline::RegionList)?;
    let core = captured.core;
    let outcomes = {
        let mut copier =
            Copier::new(env, &core, count, captured.batch).ok_or(Decline::RegionList)?;
        let live = env.tracker.inventory.live_view();
        let mut live = live.cursor();
        let loaded = env.tracker.executables.live_view();
        for (index, region) in captured.regions.iter().enumerate() {
            let still_there = is_live(&region.origin, &mut live, &loaded);
            kept.push(still_there);
            if still_there {
                let transfer = captured.transfer(agent, region, false);
                // SAFETY: the arena side is ours, sized by the layout; the
                // device side stays live while `live` / `loaded` are held,
                // and the copier finishes every copy before they are dropped.
                unsafe { copier.copy(index, &transfer) };
            }
        }
        copier.finish()
    };
    if let Some(&(index, status)) = outcomes.failures.first() {
        let region = &captured.regions[index];
        return Err(Decline::Copy {
            address: region.device_address,
            size: region.size,
            status,
        });
    }
    // Regions freed or unloaded since they were listed are not part of it.
    let mut index = 0;
    captured.regions.retain(|_| {
        index += 1;
        kept[index - 1]
    });
    Ok(())
}

/// Whether a captured region is still what was captured, under the read
/// views a batch of copies holds: a tracked allocation still that allocation,
/// a module variable's executable still loaded (when the registry knows it).
fn is_live(origin: &Origin, tracked: &mut LiveCursor<'_>, loaded: &LiveExecutables<'_>) -> bool {
    match origin {
        Origin::Tracked(region) => tracked.contains(region),
        Origin::ModuleVariable(Some(exe)) => loaded.contains(*exe),
        Origin::ModuleVariable(None) => true,
    }
}

fn host_buffer_for(env: Env, address: usize, size: usize) -> Result<HostBuffer, Decline> {
    HostBuffer::try_new(size, &env.state.storage.host).map_err(|error| Decline::HostBuffer {
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
) -> Result<(), Decline> {
    let size = host.len();
    // SAFETY: the destination is our buffer of `size` bytes, the source the
    // caller's promise.
    unsafe { core.copy(host.as_mut_ptr().cast(), device as *const c_void, size) }.map_err(
        |status| Decline::Copy {
            address: device,
            size,
            status,
        },
    )
}

impl From<LayoutError> for Decline {
    fn from(error: LayoutError) -> Self {
        Decline::Layout(error)
    }
}
