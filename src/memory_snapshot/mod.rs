//! The memory snapshot (the SDK's `memory_snapshot.cpp`): capture of one
//! agent's replay state into host memory, and its restore between passes.
//!
//! A snapshot holds one host copy per region: each tracked allocation owned by
//! the agent, and each module-scope variable visible to it. It is either
//! complete or declined: a partial snapshot restored between passes would
//! write back some regions and leave others carrying a later pass's
//! mutations, so any failure during capture releases what was captured and
//! declines replay with a reason.

pub mod decline;
pub mod discovery;
pub mod host_buffer;
pub mod restore;

use std::ffi::c_void;

use log::warn;

use crate::context::Context;
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_agent_t;
use crate::memory_tracker::inventory::TrackedRegion;
use decline::Decline;
use discovery::ModuleVariable;
use host_buffer::HostBuffer;

pub use decline::DeclineReason;

pub use restore::{restore, RestoreReport};

/// Where a captured region came from, which decides how restore validates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A tracked allocation: restored only while it is still that allocation.
    Tracked(TrackedRegion),
    /// A module-scope variable: lives as long as its executable.
    ModuleVariable,
}

/// One captured region.
pub struct Region {
    pub device_address: usize,
    pub origin: Origin,
    host: HostBuffer,
}

impl Region {
    pub fn size(&self) -> usize {
        self.host.len()
    }

    /// The bytes captured from the device.
    pub fn captured(&self) -> &[u8] {
        self.host.contents()
    }
}

/// A complete capture, or the reason there is none.
pub struct Snapshot {
    agent: hsa_agent_t,
    outcome: Result<Captured, DeclineReason>,
}

struct Captured {
    /// The entries the capture used; restore writes back through the same.
    core: CoreEntries,
    regions: Vec<Region>,
}

impl Snapshot {
    fn declined(agent: hsa_agent_t, reason: DeclineReason) -> Self {
        Snapshot {
            agent,
            outcome: Err(reason),
        }
    }

    pub fn agent(&self) -> hsa_agent_t {
        self.agent
    }

    pub fn ok(&self) -> bool {
        self.outcome.is_ok()
    }

    pub fn decline_reason(&self) -> Option<DeclineReason> {
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
}

/// Captures the replay state of `agent`.
///
/// Never fails outright: a snapshot that could not be completed comes back
/// declined, with one warning saying why, and holds no host memory.
pub fn snap(ctx: &'static Context, agent: hsa_agent_t) -> Snapshot {
    match capture(ctx, agent) {
        Ok(captured) => Snapshot {
            agent,
            outcome: Ok(captured),
        },
        Err(decline) => {
            warn!(
                "snapshot of agent {:#x} declined ({}): {decline}; the dispatch will not be replayed",
                agent.handle,
                decline.reason()
            );
            Snapshot::declined(agent, decline.reason())
        }
    }
}

fn capture(ctx: &'static Context, agent: hsa_agent_t) -> Result<Captured, Decline> {
    let core = *ctx.core().ok_or(Decline::NotInitialized)?;
    if ctx.gate.finalized() {
        return Err(Decline::Finalized);
    }
    let iterate = ctx
        .executable_iterator()
        .ok_or(Decline::NoExecutableIterator)?;
    let mut tracked = Vec::new();
    ctx.inventory
        .collect_agent(agent.handle, &mut tracked)
        .map_err(|_| Decline::RegionList)?;
    // Discovery calls back into the tool's iterator, which may run anything,
    // frees included: a tracked region freed from here on is simply dropped
    // below, when its generation no longer matches.
    let variables = discovery::module_variables(&core, iterate, agent)?;
    let mut regions = Vec::new();
    regions
        .try_reserve_exact(tracked.len() + variables.len())
        .map_err(|_| Decline::RegionList)?;

    for region in &tracked {
        let mut host = host_buffer_for(ctx, region.base, region.size)?;
        // The copy runs under the inventory's read lock after re-checking the
        // generation, so the allocation cannot be freed while it is read.
        let copied = ctx.inventory.with_live(region, || {
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
            host,
        });
    }
    for variable in &variables {
        let ModuleVariable { address, size } = *variable;
        let mut host = host_buffer_for(ctx, address, size)?;
        // SAFETY: the runtime reported this variable for the agent; its
        // storage lives as long as the executable, which is loaded now.
        unsafe { device_to_host(&core, &mut host, address)? };
        regions.push(Region {
            device_address: address,
            origin: Origin::ModuleVariable,
            host,
        });
    }
    Ok(Captured { core, regions })
}

fn host_buffer_for(
    ctx: &'static Context,
    address: usize,
    size: usize,
) -> Result<HostBuffer, Decline> {
    HostBuffer::try_new(size, &ctx.host_budget).map_err(|error| Decline::HostBuffer {
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
    )?;
    host.mark_filled();
    Ok(())
}
