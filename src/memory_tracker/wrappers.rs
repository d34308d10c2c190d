//! The four allocation wrappers installed into the runtime's tables.
//!
//! They run on every device allocation of the host program, so the common
//! path is a tail call to the chained entry after one relaxed load of the
//! gate (allocate) or of the inventory size (free). Anything more happens
//! only when tracking is on, or when something is tracked. The gate is read
//! before the chained call: whether an allocation racing with
//! `kr_set_tracking_enabled` is recorded is the caller's race either way.
//!
//! No panic may leave these functions: they are called from C through the
//! HSA tables. The bookkeeping runs inside the panic boundary; the runtime's
//! answer is always returned unchanged.

use std::ffi::c_void;

use crate::context::GLOBAL;
use crate::ffi::boundary::catch_panic;
use crate::hsa::entries::MemoryFreeFn;
use crate::hsa::hsa_executable_t;
use crate::hsa::sys::{hsa_amd_memory_pool_t, hsa_region_t};
use crate::hsa::{
    hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_ERROR_NOT_INITIALIZED, HSA_STATUS_SUCCESS,
};
use crate::memory_tracker::record_allocation;

/// Replaces `hsa_amd_memory_pool_allocate`.
pub(crate) unsafe extern "C" fn pool_allocate(
    pool: hsa_amd_memory_pool_t,
    size: usize,
    flags: u32,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(amd) = GLOBAL.amd() else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    if !GLOBAL.gate.recording() {
        // Not recording: a tail call, the gate's one relaxed load on top.
        // SAFETY: the caller's arguments go unchanged to the entry this
        // wrapper replaced, under that entry's own contract.
        return unsafe { (amd.pool_allocate)(pool, size, flags, ptr) };
    }
    // SAFETY: as above.
    let status = unsafe { (amd.pool_allocate)(pool, size, flags, ptr) };
    if status == HSA_STATUS_SUCCESS && !ptr.is_null() {
        // SAFETY: the runtime succeeded, so it stored the new pointer in *ptr.
        note_allocation(unsafe { *ptr }, size, Some(flags));
    }
    status
}

/// Replaces `hsa_amd_memory_pool_free`.
pub(crate) unsafe extern "C" fn pool_free(ptr: *mut c_void) -> hsa_status_t {
    let Some(amd) = GLOBAL.amd() else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: forwarded to the replaced entry with the caller's pointer.
    unsafe { retire_then_free(ptr, amd.pool_free) }
}

/// Replaces `hsa_memory_allocate`.
pub(crate) unsafe extern "C" fn memory_allocate(
    region: hsa_region_t,
    size: usize,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(core) = GLOBAL.core() else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    if !GLOBAL.gate.recording() {
        // SAFETY: the caller's arguments go unchanged to the replaced entry.
        return unsafe { (core.memory_allocate)(region, size, ptr) };
    }
    // SAFETY: as above.
    let status = unsafe { (core.memory_allocate)(region, size, ptr) };
    if status == HSA_STATUS_SUCCESS && !ptr.is_null() {
        // SAFETY: the runtime succeeded, so it stored the new pointer in *ptr.
        note_allocation(unsafe { *ptr }, size, None);
    }
    status
}

/// Replaces `hsa_memory_free`.
pub(crate) unsafe extern "C" fn memory_free(ptr: *mut c_void) -> hsa_status_t {
    let Some(core) = GLOBAL.core() else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: forwarded to the replaced entry with the caller's pointer.
    unsafe { retire_then_free(ptr, core.memory_free) }
}

/// Replaces `hsa_executable_destroy` (where the table has it): the
/// executable leaves the registry, waiting for any in-flight copy of its
/// variables, before the runtime unloads it. See `memory_snapshot/executables.rs`.
pub(crate) unsafe extern "C" fn executable_destroy(executable: hsa_executable_t) -> hsa_status_t {
    let Some(destroy) = GLOBAL
        .core()
        .and_then(|core| core.optional.executable_destroy)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's handle goes unchanged to the replaced entry.
    let call_runtime = || unsafe { destroy(executable) };
    catch_panic(HSA_STATUS_ERROR, || {
        GLOBAL
            .executables
            .retire_then_destroy(executable.handle, call_runtime, |s| {
                *s == HSA_STATUS_SUCCESS
            })
    })
}

/// Classification and recording, off the fast path.
#[cold]
#[inline(never)]
fn note_allocation(base: *mut c_void, size: usize, pool_flags: Option<u32>) {
    catch_panic((), || {
        record_allocation(&GLOBAL, base, size, pool_flags);
    });
}

/// Frees through the runtime with the entry retired first (see
/// [`Inventory::retire_then_free`](crate::memory_tracker::inventory::Inventory::retire_then_free)).
/// This runs whether or not tracking is on: a recorded pointer stays recorded
/// until its free, even if tracking was switched off in between. Both free
/// entry points have the same signature, so one path serves both.
///
/// # Safety
/// `free` is the runtime entry this wrapper replaced; `ptr` is the caller's.
#[inline(always)]
unsafe fn retire_then_free(ptr: *mut c_void, free: MemoryFreeFn) -> hsa_status_t {
    // Fast path: nothing tracked (tracking never on, or finalized), so
    // nothing to retire: one load on top of the chained call.
    if GLOBAL.inventory.is_empty() {
        // SAFETY: see the function's contract.
        return unsafe { free(ptr) };
    }
    // SAFETY: forwarded.
    unsafe { retire_then_free_tracked(ptr, free) }
}

/// # Safety
/// As for [`retire_then_free`].
#[cold]
#[inline(never)]
unsafe fn retire_then_free_tracked(ptr: *mut c_void, free: MemoryFreeFn) -> hsa_status_t {
    // SAFETY: see the function's contract.
    let call_runtime = || unsafe { free(ptr) };
    // Nothing in the inventory's bookkeeping is expected to panic; if it ever
    // did, the caller gets an error instead of an unwind into C.
    catch_panic(HSA_STATUS_ERROR, || {
        GLOBAL
            .inventory
            .retire_then_free(ptr as usize, call_runtime, |s| *s == HSA_STATUS_SUCCESS)
    })
}
