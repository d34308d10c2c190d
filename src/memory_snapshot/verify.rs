//! Verify mode: after a restore, every region still live is read back and
//! compared byte for byte with its snapshot copy; differences are counted
//! in the restore's report and the stats, and make the restore incomplete.
//! After an incremental snapshot (which copied only the blocks whose hash
//! changed) the same comparison checks the capture; differences are
//! counted in the stats and logged.
//! Managed memory is read through the replaying GPU (into device memory of
//! its own), never by the CPU, which would migrate its pages.
//! It costs a full read of both sides through host memory — a check for
//! testing a strategy on a new system, not for production runs
//! (`kr_set_verify`, `KERNEL_REPLAY_VERIFY=1`).

use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::copy::{copy_now, copy_on_agent, Transfer};
use crate::memory_snapshot::device::buffers::PoolBuffer;
use crate::memory_tracker::kind::MemoryKind;

use super::context::Context;
use super::snapshot::{is_live, kept_at, Captured};
use super::storage::Tier;

/// What a verification found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyOutcome {
    /// Regions compared.
    pub regions: usize,
    /// Regions that differ from their snapshot copy (or could not be read).
    pub mismatched_regions: usize,
    /// Bytes that differ.
    pub mismatched_bytes: u64,
}

/// Compares every live region of `captured` with its copy, under the
/// tracker's read views (a region freed meanwhile is not compared), after
/// a restore or an incremental capture (`capture`).
pub(crate) fn verify(
    cx: Context,
    captured: &Captured,
    agent: hsa_agent_t,
    capture: bool,
) -> VerifyOutcome {
    let mut outcome = VerifyOutcome::default();
    let live = cx.tracker.inventory.live_view();
    let mut live = live.cursor();
    let loaded = cx.tracker.executables.live_view();
    let mut device_bytes = Vec::new();
    let mut kept_bytes = Vec::new();
    for region in &captured.regions {
        if !is_live(cx, agent, &region.origin, &mut live, &loaded) {
            continue;
        }
        outcome.regions += 1;
        let size = region.size();
        let host = region.memory().is_host();
        let read = if region.memory() == MemoryKind::Managed {
            read_on_agent(
                cx,
                captured,
                agent,
                &mut device_bytes,
                region.device_address,
                size,
            )
        } else {
            read_into(
                captured,
                &mut device_bytes,
                region.device_address,
                size,
                host,
            )
        };
        let read = read.and_then(|()| {
            let kept = kept_at(&captured.bases, region);
            match region.tier() {
                // Host memory of the snapshot's own: read in place.
                Tier::Pinned | Tier::Pageable => {
                    // SAFETY: the snapshot's copy, `size` bytes of host
                    // memory it owns, not written while it is borrowed.
                    let bytes = unsafe { std::slice::from_raw_parts(kept as *const u8, size) };
                    kept_bytes.clear();
                    kept_bytes.try_reserve(size).ok()?;
                    kept_bytes.extend_from_slice(bytes);
                    Some(())
                }
                Tier::Device => read_into(captured, &mut kept_bytes, kept, size, false),
            }
        });
        let differing = match read {
            Some(()) => device_bytes
                .iter()
                .zip(&kept_bytes)
                .filter(|(a, b)| a != b)
                .count() as u64,
            None => size as u64,
        };
        if differing > 0 {
            outcome.mismatched_regions += 1;
            outcome.mismatched_bytes += differing;
            log::warn!(
                "verify: region {:#x} ({size} bytes) differs from its snapshot in {differing} bytes",
                region.device_address
            );
        }
    }
    cx.tracker.counters.verified(
        capture,
        outcome.mismatched_regions as u64,
        outcome.mismatched_bytes,
    );
    outcome
}

/// Reads `size` bytes of managed memory at `address` into `buffer` through
/// the GPU, as capture and restore move it: `agent` copies it into device
/// memory of its own, which is then read back (a read by the CPU would
/// migrate the pages).
fn read_on_agent(
    cx: Context,
    captured: &Captured,
    agent: hsa_agent_t,
    buffer: &mut Vec<u8>,
    address: usize,
    size: usize,
) -> Option<()> {
    let amd = cx.amd()?;
    let bounce = PoolBuffer::device(captured.core, amd, agent, size)?;
    let transfer = Transfer {
        dst: bounce.address(),
        dst_agent: agent,
        src: address,
        src_agent: agent,
        size,
        async_ok: true,
        by_cpu: false,
        gpu_only: true,
    };
    // SAFETY: the bounce buffer holds `size` bytes; `address` is a live
    // managed range (the caller holds the views) the agent may access.
    unsafe { copy_on_agent(cx, captured.core, &transfer) }.ok()?;
    read_into(captured, buffer, bounce.address(), size, false)
}

/// Reads `size` bytes at `address` (device memory, or host memory read by
/// the CPU when `host`) into `buffer`.
fn read_into(
    captured: &Captured,
    buffer: &mut Vec<u8>,
    address: usize,
    size: usize,
    host: bool,
) -> Option<()> {
    buffer.clear();
    buffer.try_reserve(size).ok()?;
    buffer.resize(size, 0);
    // SAFETY: `buffer` holds `size` bytes; `address` is a live region (the
    // caller holds the views) or the snapshot's own copy.
    unsafe {
        copy_now(
            captured.core,
            buffer.as_mut_ptr() as usize,
            address,
            size,
            host,
        )
    }
    .ok()
}
