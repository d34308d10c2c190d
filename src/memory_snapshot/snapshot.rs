//! The snapshot: what was captured, region by region, and where each copy
//! is kept; and the one routine capture and restore both run, which copies
//! every region still live under the tracker's read views.

use super::context::Context;
use super::copy::{Copier, Finished, Transfer};
use super::coverage::NotCovered;
use super::decline::{Decline, DeclineReason};
use super::device::batch::{DeviceBatch, DeviceOutcome};
use super::device::plan::DeviceUse;
use super::device::CopyMethod;
use super::host_buffer::HostBuffer;
use super::shared::ClaimGuard;
use super::storage::arena::Lease;
use super::storage::Tier;
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::storage::PerTier;
use crate::memory_tracker::executables::{LiveExecutables, LoadedExecutable};
use crate::memory_tracker::inventory::{LiveCursor, TrackedRegion};
use crate::memory_tracker::kind::MemoryKind;
use crate::memory_tracker::managed;
use crate::support::stats::KIND_SLOTS;

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
pub(crate) enum Place {
    /// The baseline: a buffer of its own.
    Owned(HostBuffer),
    /// At `offset` in the snapshot's arena of `tier`.
    Arena { tier: Tier, offset: usize },
}

/// One captured region.
pub struct Region {
    /// Where the region is on the device.
    pub device_address: usize,
    /// What it is, which decides how it is re-validated.
    pub origin: Origin,
    pub(crate) size: usize,
    pub(crate) place: Place,
}

impl Region {
    pub fn size(&self) -> usize {
        self.size
    }

    /// What memory the region is.
    pub fn memory(&self) -> MemoryKind {
        match self.origin {
            Origin::Tracked(tracked) => tracked.memory,
            Origin::ModuleVariable(_) => MemoryKind::Device,
        }
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
    pub(crate) agent: hsa_agent_t,
    pub(crate) outcome: Result<Captured, Decline>,
}

pub(crate) struct Captured {
    /// The entries the capture used; restore writes back through the same.
    pub(crate) core: &'static CoreEntries,
    pub(crate) regions: Vec<Region>,
    /// Arenas by tier; dropped (returned for reuse) with the snapshot.
    pub(crate) leases: PerTier<Option<Lease>>,
    /// Base address of each tier's arena.
    pub(crate) bases: PerTier<usize>,
    /// The host-side agent of pinned copies (the host pool's CPU agent).
    pub(crate) host_agent: hsa_agent_t,
    /// Whether copies may be batched (false: the baseline, or forced blocking).
    pub(crate) batch: bool,
    /// The device path: the plan the copies follow, if any, and what the
    /// capture did.
    pub(crate) device: DeviceUse,
    /// The shared regions this snapshot holds against other agents'
    /// snapshots (`shared.rs`), released with it.
    pub(crate) claims: Option<ClaimGuard>,
    /// What the agent can write that this snapshot does not cover.
    pub(crate) not_covered: NotCovered,
}

impl Snapshot {
    pub(crate) fn declined(agent: hsa_agent_t, decline: Decline) -> Self {
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

    /// How the capture moved its bytes: `Copies`, `Scatter`, `DirtyBlocks`
    /// (its restores then copy back only changed blocks) or `BatchCopy`
    /// (the tool's batch-copy function); `Copies` for a declined snapshot.
    pub fn copy_method(&self) -> CopyMethod {
        self.outcome
            .as_ref()
            .map_or(CopyMethod::Copies, |c| c.device.ran.method)
    }

    /// Whether the capture copied only the blocks changed since the agent's
    /// previous snapshot, into that snapshot's arenas (an incremental
    /// snapshot).
    pub fn incremental(&self) -> bool {
        self.outcome
            .as_ref()
            .is_ok_and(|c| c.device.ran.incremental)
    }

    /// Bytes of the regions of memory kind `memory`.
    pub fn kind_bytes(&self, memory: MemoryKind) -> u64 {
        self.regions()
            .iter()
            .filter(|r| r.memory() == memory)
            .map(|r| r.size() as u64)
            .sum()
    }

    /// What the agent can write that this snapshot does not cover (nothing
    /// for a declined snapshot): host memory the host-memory setting left
    /// out, per kind, and whether XNACK makes any system memory writable.
    pub fn not_covered(&self) -> NotCovered {
        self.outcome
            .as_ref()
            .map_or(NotCovered::default(), |c| c.not_covered)
    }

    /// Bytes per memory kind code (the stats' slots).
    pub fn bytes_by_kind(&self) -> [u64; KIND_SLOTS] {
        let mut bytes = [0; KIND_SLOTS];
        for region in self.regions() {
            bytes[region.memory().index()] += region.size() as u64;
        }
        bytes
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
    pub(crate) fn transfer(
        &self,
        agent: hsa_agent_t,
        region: &Region,
        to_device: bool,
    ) -> Transfer {
        let kept = kept_at(&self.bases, region);
        let (kept_agent, async_ok) = match region.tier() {
            Tier::Device => (agent, true),
            Tier::Pinned => (self.host_agent, true),
            // Owned buffers report the pageable tier too.
            Tier::Pageable => (self.host_agent, false),
        };
        // Peer memory is named with its owner, the agent it belongs to.
        // Managed memory is the CPU's, but only the replaying GPU may copy
        // it: a copy by another agent (the CPU reading it, or a DMA engine
        // told it is host memory) would migrate the pages it touches. So
        // both sides name the snapshot's agent: the runtime runs the copy
        // on that GPU (ROCr: its blit kernel), where the pages the kernel
        // touched are already resident.
        let managed = region.memory() == MemoryKind::Managed;
        let device_agent = match region.origin {
            Origin::Tracked(_) if managed => agent,
            Origin::Tracked(tracked) => hsa_agent_t {
                handle: tracked.owner,
            },
            Origin::ModuleVariable(_) => agent,
        };
        let kept_agent = if managed { agent } else { kept_agent };
        let device = region.device_address;
        let by_cpu = region.memory().is_host();
        if to_device {
            Transfer {
                dst: device,
                dst_agent: device_agent,
                src: kept,
                src_agent: kept_agent,
                size: region.size,
                async_ok,
                by_cpu,
                gpu_only: managed,
            }
        } else {
            Transfer {
                dst: kept,
                dst_agent: kept_agent,
                src: device,
                src_agent: device_agent,
                size: region.size,
                async_ok,
                by_cpu,
                gpu_only: managed,
            }
        }
    }
}

impl Captured {
    /// Each tier's arena lease stamp (`of`: `Lease::stamp` or
    /// `Lease::previous`), 0 where the snapshot has no arena of that tier.
    pub(crate) fn lease_stamps(&self, of: fn(&Lease) -> u64) -> PerTier<u64> {
        self.leases.each_ref().map(|l| l.as_ref().map_or(0, of))
    }
}

/// Where `region`'s copy is kept, given the arenas' bases.
pub(crate) fn kept_at(bases: &PerTier<usize>, region: &Region) -> usize {
    match region.place {
        Place::Owned(ref buffer) => buffer.as_ptr() as usize,
        Place::Arena { tier, offset } => bases[tier.index()] + offset,
    }
}

/// Whether a captured region is still what was captured, under the read
/// views a batch of copies holds: a tracked allocation still that allocation
/// (a managed range, also one the runtime still answers for, which the
/// agent may reach: ROCm 6.x frees managed memory with no HSA call), a
/// module variable's executable still loaded (when the registry knows it).
pub(crate) fn is_live(
    cx: Context,
    agent: hsa_agent_t,
    origin: &Origin,
    tracked: &mut LiveCursor<'_>,
    loaded: &LiveExecutables<'_>,
) -> bool {
    match origin {
        Origin::Tracked(region) if region.memory == MemoryKind::Managed => {
            tracked.contains(region)
                && cx.amd().is_some_and(|amd| {
                    managed::capturable(amd, region.base, region.size, agent)
                        == managed::Capturable::Yes
                })
        }
        Origin::Tracked(region) => tracked.contains(region),
        Origin::ModuleVariable(Some(exe)) => loaded.contains(*exe),
        Origin::ModuleVariable(None) => true,
    }
}

/// Copies every region of `captured` that is still what was captured —
/// device to storage at capture, storage to device at restore
/// (`to_device`) — all under the inventory's and the executable registry's
/// read views, and finishes every copy before the views are released, so
/// nothing copied can be freed or unloaded under a copy. The regions the
/// snapshot's device kernels can move go in one dispatch instead (see
/// `device/batch.rs`), run under the same views. `skipped(index)` hears of
/// each region that no longer is. `None` when the bookkeeping cannot be
/// allocated.
pub(crate) fn copy_live_regions(
    cx: Context,
    captured: &Captured,
    agent: hsa_agent_t,
    to_device: bool,
    batch: bool,
    mut skipped: impl FnMut(usize),
) -> Option<(Finished, DeviceOutcome)> {
    let count = captured.regions.len();
    let mut copier = Copier::new(cx, captured.core, count, batch)?;
    let mut device = DeviceBatch::new(captured.device.plan.as_ref(), agent, to_device, count)?;
    let live = cx.tracker.inventory.live_view();
    let mut live = live.cursor();
    let loaded = cx.tracker.executables.live_view();
    for (index, region) in captured.regions.iter().enumerate() {
        if is_live(cx, agent, &region.origin, &mut live, &loaded) {
            let transfer = captured.transfer(agent, region, to_device);
            if !device.take(index, &transfer) {
                // SAFETY: the storage side is the snapshot's own, sized by
                // its layout; the device side stays live while the views are
                // held, and the copier finishes every copy before they are
                // dropped.
                unsafe { copier.copy(index, &transfer) };
            }
        } else {
            device.drop_region(index, region.size);
            skipped(index);
        }
    }
    let outcome = match cx.amd() {
        Some(amd) => device.run(captured.core, amd, &mut copier),
        None => DeviceOutcome::default(),
    };
    Some((copier.finish(), outcome))
}
