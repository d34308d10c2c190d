//! Restore: writing a snapshot back between passes.
//!
//! Tracked regions are re-validated under the inventory's read lock and
//! written under the same lock, so a concurrent free can neither slip between
//! the check and the write nor hand the address to a new allocation that the
//! snapshot would then overwrite. Module variables live with their executable
//! and are written directly. A failed copy is reported and skipped; the other
//! regions are still restored.

use std::ffi::c_void;

use log::warn;

use super::{Origin, Region, Snapshot};
use crate::context::Context;
use crate::hsa::entries::CoreEntries;
use crate::hsa::hsa_status_t;

/// What one restore did, region by region.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreReport {
    pub restored: usize,
    /// Tracked regions no longer the captured allocation (freed, or the
    /// address reused), or everything after the teardown guard.
    pub skipped_not_live: usize,
    /// Copies the runtime refused.
    pub failed: usize,
}

/// Writes every region of `snapshot` back. A declined snapshot writes nothing.
pub fn restore(ctx: &Context, snapshot: &Snapshot) -> RestoreReport {
    let mut report = RestoreReport::default();
    let Ok(captured) = &snapshot.outcome else {
        return report;
    };
    if ctx.gate.finalized() {
        // After the teardown guard the free wrappers no longer retire, so a
        // tracked region can no longer be proven live.
        report.skipped_not_live = captured.regions.len();
        if !captured.regions.is_empty() {
            warn!(
                "restore after kr_finalize: {} region(s) not written",
                captured.regions.len()
            );
        }
        return report;
    }
    for region in &captured.regions {
        let written = match &region.origin {
            Origin::Tracked(tracked) => ctx.inventory.with_live(tracked, || {
                // SAFETY: the allocation is live and at least region.size()
                // bytes (checked under the read lock held around this call).
                unsafe { host_to_device(&captured.core, region) }
            }),
            // SAFETY: the variable's storage lives with its executable.
            Origin::ModuleVariable => Some(unsafe { host_to_device(&captured.core, region) }),
        };
        match written {
            Some(Ok(())) => report.restored += 1,
            None => {
                report.skipped_not_live += 1;
                warn!(
                    "restore skipped region {:#x} ({} bytes): no longer the captured allocation",
                    region.device_address,
                    region.size()
                );
            }
            Some(Err(status)) => {
                report.failed += 1;
                warn!(
                    "restore of region {:#x} ({} bytes) failed with HSA status {status:#x}",
                    region.device_address,
                    region.size()
                );
            }
        }
    }
    report
}

/// # Safety
/// The region's device address must be writable device memory of at least
/// `region.size()` bytes.
unsafe fn host_to_device(core: &CoreEntries, region: &Region) -> Result<(), hsa_status_t> {
    let source = region.host.as_ptr().cast::<c_void>();
    // SAFETY: the source is the filled host buffer of region.size() bytes; the
    // destination is the caller's promise.
    unsafe { core.copy(region.device_address as *mut c_void, source, region.size()) }
}
