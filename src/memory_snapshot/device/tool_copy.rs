//! The caller-driven path: a tool registers a batch-copy function
//! (`kr_set_batch_copy`, [`crate::api::set_batch_copy`]) and every capture
//! and restore whose copies are batched hands it, in one call, the regions
//! the library's kernels would otherwise move — those kept in device or
//! pinned memory, which the agent reaches on both sides. The tool submits
//! the copies its own way (blit kernels on its own queue, as rocprofiler-sdk
//! does, or the SDMA engines) and returns once all have completed. If it
//! reports a failure, the library copies those regions itself, so the bytes
//! are the same either way.
//!
//! The function runs inside the snapshot's or restore's window, with the
//! tracker's read views held: it must not allocate or free memory through
//! the entries the library wraps. Async copies it submits through the
//! wrapped entries on the calling thread pass the window (they are the
//! library's own copies, delegated); copies it makes the calling thread
//! wait for on other threads must use the runtime's original entries.

use crate::support::sync::RecoverRw;
use std::sync::{Arc, RwLock};

use crate::hsa::{hsa_agent_t, hsa_status_t};

crate::c_enum! {
    /// Which way a batch copy goes (`kr_batch_copy_fn_t`).
    pub enum CopyDirection: "kr_copy_direction_t", "KR_COPY_" {
        /// A capture: device memory to where the snapshot keeps it.
        Capture = 0 => "CAPTURE",
        /// A restore: the snapshot's copy back to device memory.
        Restore = 1 => "RESTORE",
    }
}

/// One region of a batch copy: `size` bytes from `src` to `dst`, both
/// reachable by the agent.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyRegion {
    /// Destination address.
    pub dst: u64,
    /// Source address.
    pub src: u64,
    /// Bytes to copy.
    pub size: u64,
}

/// A tool's batch-copy function: copy every region, return once all have
/// completed; `Err` (any status) and the library copies them itself.
pub type BatchCopyFn =
    dyn Fn(hsa_agent_t, &[CopyRegion], CopyDirection) -> Result<(), hsa_status_t> + Send + Sync;

/// The registered function, if any.
pub(crate) struct ToolCopy(RwLock<Option<Arc<BatchCopyFn>>>);

impl ToolCopy {
    pub(crate) const fn new() -> Self {
        ToolCopy(RwLock::new(None))
    }

    /// Registers `function` (`None`: back to the library's own kernels).
    pub(crate) fn set(&self, function: Option<Arc<BatchCopyFn>>) {
        *self.0.write_locked() = function;
    }

    /// The registered function, for one capture or restore: a call begun
    /// finishes with the function it began with.
    pub(crate) fn get(&self) -> Option<Arc<BatchCopyFn>> {
        self.0.read_locked().clone()
    }
}
