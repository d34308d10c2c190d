//! The wrappers installed into the runtime's tables: allocation and free
//! (core and AMD), executable destroy, access grants, locks, SVM
//! attributes, the async copies (the fence), and virtual memory (handle
//! create, map, unmap, set_access, address free).
//!
//! The allocation and free wrappers run on every device allocation of the
//! host program, so their common path is a tail call to the chained entry
//! after one relaxed load of the gate (allocate) or of the inventory size
//! (free). Anything more happens only when tracking is on, or when something
//! is tracked, or when the runtime refused an allocation for lack of memory
//! (then the library's retained arenas are released and the call retried
//! once: the profiler must never make the application's allocation fail).
//! The gate is read before the chained call: whether an allocation racing
//! with `kr_set_tracking_enabled` is recorded is the caller's race either way.
//!
//! No panic may leave these functions: they are called from C through the
//! HSA tables. The bookkeeping runs inside the panic boundary; the runtime's
//! answer is always returned unchanged.

use std::ffi::c_void;

use super::TRACKER;
use crate::hsa::hsa_executable_t;
use crate::hsa::sys::{
    hsa_amd_copy_direction_t, hsa_amd_memory_pool_t, hsa_dim3_t, hsa_pitched_ptr_t, hsa_region_t,
    hsa_signal_t,
};
use crate::hsa::{
    hsa_agent_t, hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_ERROR_NOT_INITIALIZED,
    HSA_STATUS_SUCCESS,
};
use crate::memory_tracker::{fence, record_allocation};
use crate::support::unwind::catch_panic;

/// `HSA_STATUS_ERROR_OUT_OF_RESOURCES`: the runtime had no memory.
const OUT_OF_RESOURCES: hsa_status_t = crate::hsa::sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES;

/// Runs an allocation; if the runtime refused it for lack of memory while
/// the library keeps arenas for reuse, releases them and tries once more.
/// The application sees the retried call's answer.
#[inline(always)]
fn allocate_or_make_room(pool: u64, mut call: impl FnMut() -> hsa_status_t) -> hsa_status_t {
    let status = call();
    if status == OUT_OF_RESOURCES {
        return retry_after_releasing_arenas(pool, call, status);
    }
    status
}

#[cold]
#[inline(never)]
fn retry_after_releasing_arenas(
    pool: u64,
    mut call: impl FnMut() -> hsa_status_t,
    status: hsa_status_t,
) -> hsa_status_t {
    let released = catch_panic(0, || TRACKER.make_room(pool));
    if released == 0 {
        return status;
    }
    call()
}

/// Replaces `hsa_amd_memory_pool_allocate`.
pub(crate) unsafe extern "C" fn amd_memory_pool_allocate(
    pool: hsa_amd_memory_pool_t,
    size: usize,
    flags: u32,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(allocate) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_memory_pool_allocate_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the entry this wrapper
    // replaced, under that entry's own contract.
    let call = move || unsafe { allocate(pool, size, flags, ptr) };
    let status = allocate_or_make_room(pool.handle, call);
    // Not recording: the call, the gate's one relaxed load on top.
    if status == HSA_STATUS_SUCCESS && TRACKER.gate.recording() && !ptr.is_null() {
        // SAFETY: the runtime succeeded, so it stored the new pointer in *ptr.
        note_allocation(unsafe { *ptr }, size, Some(flags));
    }
    status
}

/// Replaces `hsa_amd_memory_pool_free`.
pub(crate) unsafe extern "C" fn amd_memory_pool_free(ptr: *mut c_void) -> hsa_status_t {
    let Some(free) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_memory_pool_free_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: forwarded to the replaced entry with the caller's pointer.
    retire_then_free(ptr, move || unsafe { free(ptr) })
}

/// Replaces `hsa_memory_allocate`.
pub(crate) unsafe extern "C" fn memory_allocate(
    region: hsa_region_t,
    size: usize,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(allocate) = TRACKER.core().and_then(|core| core.hsa_memory_allocate_fn) else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the replaced entry.
    let call = move || unsafe { allocate(region, size, ptr) };
    // A region has the handle of the pool of the same memory.
    let status = allocate_or_make_room(region.handle, call);
    if status == HSA_STATUS_SUCCESS && TRACKER.gate.recording() && !ptr.is_null() {
        // SAFETY: the runtime succeeded, so it stored the new pointer in *ptr.
        note_allocation(unsafe { *ptr }, size, None);
    }
    status
}

/// Replaces `hsa_memory_free`.
pub(crate) unsafe extern "C" fn memory_free(ptr: *mut c_void) -> hsa_status_t {
    let Some(free) = TRACKER.core().and_then(|core| core.hsa_memory_free_fn) else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: forwarded to the replaced entry with the caller's pointer.
    retire_then_free(ptr, move || unsafe { free(ptr) })
}

/// Replaces `hsa_executable_destroy` (where the table has it): the
/// executable is retired, waiting for any in-flight copy of its variables,
/// before the runtime unloads it. See `executables.rs`.
pub(crate) unsafe extern "C" fn executable_destroy(executable: hsa_executable_t) -> hsa_status_t {
    let Some(destroy) = TRACKER
        .core()
        .and_then(|core| core.hsa_executable_destroy_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's handle goes unchanged to the replaced entry.
    let call_runtime = || unsafe { destroy(executable) };
    catch_panic(HSA_STATUS_ERROR, || {
        TRACKER
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
        record_allocation(&TRACKER, base, size, pool_flags);
    });
}

/// Frees through the runtime (`free`: the replaced entry called with the
/// caller's pointer) with the entry retired first (see
/// [`Inventory::retire_then_free`](crate::memory_tracker::inventory::Inventory::retire_then_free)).
/// This runs whether or not tracking is on: a recorded pointer stays recorded
/// until its free, even if tracking was switched off in between. Both free
/// entry points take the same path.
#[inline(always)]
fn retire_then_free(ptr: *mut c_void, free: impl FnOnce() -> hsa_status_t) -> hsa_status_t {
    // Fast path: nothing tracked (tracking never on, or finalized), so
    // nothing to retire: one load on top of the chained call.
    if TRACKER.inventory.is_empty() {
        return free();
    }
    retire_then_free_tracked(ptr, free)
}

#[cold]
#[inline(never)]
fn retire_then_free_tracked(ptr: *mut c_void, free: impl FnOnce() -> hsa_status_t) -> hsa_status_t {
    // Nothing in the inventory's bookkeeping is expected to panic; if it ever
    // did, the caller gets an error instead of an unwind into C.
    catch_panic(HSA_STATUS_ERROR, || {
        TRACKER
            .inventory
            .retire_then_free(ptr as usize, free, |s| *s == HSA_STATUS_SUCCESS)
    })
}

/// Replaces `hsa_amd_agents_allow_access`: after the runtime granted
/// access, a tracked GPU allocation records which agents may now reach it
/// (`grants.rs`), so their snapshots capture it as peer memory.
pub(crate) unsafe extern "C" fn amd_agents_allow_access(
    num_agents: u32,
    agents: *const hsa_agent_t,
    flags: *const u32,
    ptr: *const c_void,
) -> hsa_status_t {
    let Some(allow) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_agents_allow_access_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the replaced entry.
    let status = unsafe { allow(num_agents, agents, flags, ptr) };
    if status == HSA_STATUS_SUCCESS && !TRACKER.inventory.is_empty() {
        // SAFETY: the runtime accepted the call, so `agents` holds
        // `num_agents` agents.
        let listed = unsafe { slice_or_empty(agents, num_agents as usize) };
        note_grants(ptr as usize, listed);
    }
    status
}

#[cold]
#[inline(never)]
fn note_grants(base: usize, listed: &[hsa_agent_t]) {
    catch_panic((), || {
        super::grants::granted(&TRACKER, base, super::grants::Grant::Call(listed))
    });
}

/// Replaces `hsa_amd_memory_lock`: the locked range is recorded as host
/// memory of the GPUs it names (`locks.rs`).
pub(crate) unsafe extern "C" fn amd_memory_lock(
    host_ptr: *mut c_void,
    size: usize,
    agents: *mut hsa_agent_t,
    num_agent: i32,
    agent_ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(lock) = TRACKER.amd().and_then(|amd| amd.hsa_amd_memory_lock_fn) else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the replaced entry.
    let status = unsafe { lock(host_ptr, size, agents, num_agent, agent_ptr) };
    if status == HSA_STATUS_SUCCESS && TRACKER.gate.recording() {
        // SAFETY: the runtime accepted the call, so `agents` holds
        // `num_agent` agents (or is NULL).
        let listed = unsafe { slice_or_empty(agents.cast_const(), num_agent.max(0) as usize) };
        note_lock(host_ptr as usize, size, listed, None);
    }
    status
}

/// Replaces `hsa_amd_memory_lock_to_pool` (see [`amd_memory_lock`]).
pub(crate) unsafe extern "C" fn amd_memory_lock_to_pool(
    host_ptr: *mut c_void,
    size: usize,
    agents: *mut hsa_agent_t,
    num_agent: i32,
    pool: hsa_amd_memory_pool_t,
    flags: u32,
    agent_ptr: *mut *mut c_void,
) -> hsa_status_t {
    let Some(lock) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_memory_lock_to_pool_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the replaced entry.
    let status = unsafe { lock(host_ptr, size, agents, num_agent, pool, flags, agent_ptr) };
    if status == HSA_STATUS_SUCCESS && TRACKER.gate.recording() {
        // SAFETY: as in amd_memory_lock.
        let listed = unsafe { slice_or_empty(agents.cast_const(), num_agent.max(0) as usize) };
        note_lock(host_ptr as usize, size, listed, Some(pool.handle));
    }
    status
}

#[cold]
#[inline(never)]
fn note_lock(base: usize, size: usize, listed: &[hsa_agent_t], pool: Option<u64>) {
    catch_panic((), || {
        super::locks::locked(&TRACKER, base, size, listed, pool)
    });
}

/// Replaces `hsa_amd_memory_unlock`: a range at its last unlock is retired
/// before the runtime unlocks it.
pub(crate) unsafe extern "C" fn amd_memory_unlock(host_ptr: *mut c_void) -> hsa_status_t {
    let Some(unlock) = TRACKER.amd().and_then(|amd| amd.hsa_amd_memory_unlock_fn) else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: forwarded to the replaced entry with the caller's pointer.
    let call = move || unsafe { unlock(host_ptr) };
    if TRACKER.inventory.is_empty() {
        return call();
    }
    catch_panic(HSA_STATUS_ERROR, || {
        super::locks::unlock(&TRACKER, host_ptr as usize, call)
    })
}

/// Replaces `hsa_amd_svm_attributes_set`: a managed range a GPU was given
/// access to is recorded (`managed.rs`).
pub(crate) unsafe extern "C" fn amd_svm_attributes_set(
    ptr: *mut c_void,
    size: usize,
    attribute_list: *mut crate::hsa::sys::hsa_amd_svm_attribute_pair_t,
    attribute_count: usize,
) -> hsa_status_t {
    let Some(set) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_svm_attributes_set_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the replaced entry.
    let status = unsafe { set(ptr, size, attribute_list, attribute_count) };
    // Access taken away is noted whether or not tracking is on (as a free
    // is); access given only while recording.
    if status == HSA_STATUS_SUCCESS && (TRACKER.gate.recording() || !TRACKER.inventory.is_empty()) {
        // SAFETY: the runtime accepted the call, so the list holds
        // `attribute_count` pairs.
        let list = unsafe { slice_or_empty(attribute_list.cast_const(), attribute_count) };
        note_managed(ptr as usize, size, list);
    }
    status
}

#[cold]
#[inline(never)]
fn note_managed(base: usize, size: usize, list: &[crate::hsa::sys::hsa_amd_svm_attribute_pair_t]) {
    catch_panic((), || {
        if TRACKER.gate.recording() {
            super::managed::attributes_set(&TRACKER, base, size, list);
        } else {
            // Not recording: only what takes access away from a recorded range.
            let taken: Vec<_> = list
                .iter()
                .copied()
                .filter(|pair| {
                    pair.attribute == crate::hsa::sys::HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS as u64
                })
                .collect();
            super::managed::attributes_set(&TRACKER, base, size, &taken);
        }
    });
}

/// Replaces `hsa_amd_vmem_address_free` (ROCm 6.0 and later): the managed
/// ranges in the freed address space (ROCm 7.x's `hipFree` of managed
/// memory) are retired before the runtime unmaps it.
#[cfg(hsa_vmem)]
pub(crate) unsafe extern "C" fn amd_vmem_address_free(
    va: *mut c_void,
    size: usize,
) -> hsa_status_t {
    let Some(free) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_vmem_address_free_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's arguments go unchanged to the replaced entry.
    let call = move || unsafe { free(va, size) };
    if TRACKER.inventory.is_empty() {
        return call();
    }
    catch_panic(HSA_STATUS_ERROR, || {
        super::managed::free_address_space(&TRACKER, va as usize, size, call)
    })
}

/// `len` items at `ptr`, or none for NULL.
///
/// # Safety
/// A non-NULL `ptr` is readable for `len` items.
unsafe fn slice_or_empty<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

// ---- async copies: the fence ----------------------------------------------------

/// The agents whose tracked memory the byte ranges `[address, address + len)`
/// touch; `None` when the fast path applies (nothing tracked, or no range
/// touches tracked memory).
#[inline(always)]
fn tracked_owners(ranges: [(usize, usize); 2]) -> Option<[Option<u64>; 2]> {
    if TRACKER.inventory.is_empty() {
        return None;
    }
    touched_owners(ranges)
}

#[cold]
#[inline(never)]
fn touched_owners(ranges: [(usize, usize); 2]) -> Option<[Option<u64>; 2]> {
    catch_panic(None, || {
        let owners = ranges.map(|(address, len)| TRACKER.inventory.owner_of_range(address, len));
        match owners {
            [None, None] => None,
            [Some(a), Some(b)] if a == b => Some([Some(a), None]),
            owners => Some(owners),
        }
    })
}

/// Submits one application copy through the fence when it touches tracked
/// memory (`submit` takes the completion signal to give the runtime).
fn fence_copy(
    ranges: [(usize, usize); 2],
    completion: hsa_signal_t,
    submit: impl FnOnce(hsa_signal_t) -> hsa_status_t,
) -> hsa_status_t {
    let (Some(owners), Some(core), Some(amd)) = (
        tracked_owners(ranges).filter(|_| completion.handle != 0),
        TRACKER.core(),
        TRACKER.amd(),
    ) else {
        return submit(completion);
    };
    TRACKER
        .counters
        .fenced_copies
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    fence::fenced_copy(
        &TRACKER.fences,
        &TRACKER.signals,
        (core, amd),
        owners,
        completion,
        submit,
    )
}

/// Replaces `hsa_amd_memory_async_copy`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn amd_memory_async_copy(
    dst: *mut c_void,
    dst_agent: hsa_agent_t,
    src: *const c_void,
    src_agent: hsa_agent_t,
    size: usize,
    num_dep_signals: u32,
    dep_signals: *const hsa_signal_t,
    completion_signal: hsa_signal_t,
) -> hsa_status_t {
    let Some(copy) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_memory_async_copy_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    let ranges = [(dst as usize, size), (src as usize, size)];
    fence_copy(ranges, completion_signal, |signal| {
        // SAFETY: the caller's arguments go unchanged to the replaced entry,
        // with the completion signal the fence chose (the caller's, or a
        // proxy that completes the caller's exactly as the runtime would).
        unsafe {
            copy(
                dst,
                dst_agent,
                src,
                src_agent,
                size,
                num_dep_signals,
                dep_signals,
                signal,
            )
        }
    })
}

/// The bytes a pitched 3-D box spans, from its first to its last byte.
///
/// # Safety
/// `ptr`, `offset` and `range` are NULL or readable.
unsafe fn pitched_span(
    ptr: *const hsa_pitched_ptr_t,
    offset: *const hsa_dim3_t,
    range: *const hsa_dim3_t,
) -> (usize, usize) {
    // SAFETY: the caller's promise; NULL reads as an empty span (the runtime
    // refuses the call).
    let (Some(ptr), Some(offset), Some(range)) = (
        unsafe { ptr.as_ref() },
        unsafe { offset.as_ref() },
        unsafe { range.as_ref() },
    ) else {
        return (0, 0);
    };
    let (pitch, slice) = (ptr.pitch, ptr.slice);
    let start = (ptr.base as usize)
        .saturating_add(offset.x as usize)
        .saturating_add((offset.y as usize).saturating_mul(pitch))
        .saturating_add((offset.z as usize).saturating_mul(slice));
    if range.x == 0 || range.y == 0 || range.z == 0 {
        return (start, 0);
    }
    let len = ((range.z as usize - 1).saturating_mul(slice))
        .saturating_add((range.y as usize - 1).saturating_mul(pitch))
        .saturating_add(range.x as usize);
    (start, len)
}

/// Replaces `hsa_amd_memory_async_copy_rect`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn amd_memory_async_copy_rect(
    dst: *const hsa_pitched_ptr_t,
    dst_offset: *const hsa_dim3_t,
    src: *const hsa_pitched_ptr_t,
    src_offset: *const hsa_dim3_t,
    range: *const hsa_dim3_t,
    copy_agent: hsa_agent_t,
    dir: hsa_amd_copy_direction_t,
    num_dep_signals: u32,
    dep_signals: *const hsa_signal_t,
    completion_signal: hsa_signal_t,
) -> hsa_status_t {
    let Some(copy) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_memory_async_copy_rect_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    // SAFETY: the caller's descriptors, read only.
    let ranges = unsafe {
        [
            pitched_span(dst, dst_offset, range),
            pitched_span(src, src_offset, range),
        ]
    };
    fence_copy(ranges, completion_signal, |signal| {
        // SAFETY: as in amd_memory_async_copy.
        unsafe {
            copy(
                dst,
                dst_offset,
                src,
                src_offset,
                range,
                copy_agent,
                dir,
                num_dep_signals,
                dep_signals,
                signal,
            )
        }
    })
}

/// Replaces `hsa_amd_memory_async_copy_on_engine` (ROCm 6.0 and later).
#[cfg(hsa_vmem)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn amd_memory_async_copy_on_engine(
    dst: *mut c_void,
    dst_agent: hsa_agent_t,
    src: *const c_void,
    src_agent: hsa_agent_t,
    size: usize,
    num_dep_signals: u32,
    dep_signals: *const hsa_signal_t,
    completion_signal: hsa_signal_t,
    engine_id: crate::hsa::sys::hsa_amd_sdma_engine_id_t,
    force_copy_on_sdma: bool,
) -> hsa_status_t {
    let Some(copy) = TRACKER
        .amd()
        .and_then(|amd| amd.hsa_amd_memory_async_copy_on_engine_fn)
    else {
        return HSA_STATUS_ERROR_NOT_INITIALIZED;
    };
    let ranges = [(dst as usize, size), (src as usize, size)];
    fence_copy(ranges, completion_signal, |signal| {
        // SAFETY: as in amd_memory_async_copy.
        unsafe {
            copy(
                dst,
                dst_agent,
                src,
                src_agent,
                size,
                num_dep_signals,
                dep_signals,
                signal,
                engine_id,
                force_copy_on_sdma,
            )
        }
    })
}

// ---- virtual memory ---------------------------------------------------------------

#[cfg(hsa_vmem)]
pub(crate) use vmem_wrappers::*;

#[cfg(hsa_vmem)]
mod vmem_wrappers {
    use std::ffi::c_void;

    use super::{allocate_or_make_room, TRACKER};
    use crate::hsa::sys::{
        hsa_amd_memory_access_desc_t, hsa_amd_memory_pool_t, hsa_amd_memory_type_t,
        hsa_amd_vmem_alloc_handle_t,
    };
    use crate::hsa::{hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_ERROR_NOT_INITIALIZED};
    use crate::memory_tracker::vmem;
    use crate::support::unwind::catch_panic;

    /// The captured entry of one field, once the AMD table was installed.
    macro_rules! captured {
        ($field:ident) => {
            match TRACKER.amd().and_then(|amd| amd.$field) {
                Some(entry) => entry,
                None => return HSA_STATUS_ERROR_NOT_INITIALIZED,
            }
        };
    }

    /// Replaces `hsa_amd_vmem_handle_create`: only the retry for lack of
    /// memory (a handle is physical memory of the application's).
    pub(crate) unsafe extern "C" fn amd_vmem_handle_create(
        pool: hsa_amd_memory_pool_t,
        size: usize,
        kind: hsa_amd_memory_type_t,
        flags: u64,
        handle: *mut hsa_amd_vmem_alloc_handle_t,
    ) -> hsa_status_t {
        let create = captured!(hsa_amd_vmem_handle_create_fn);
        // SAFETY: the caller's arguments go unchanged to the replaced entry.
        allocate_or_make_room(pool.handle, move || unsafe {
            create(pool, size, kind, flags, handle)
        })
    }

    /// Replaces `hsa_amd_vmem_map`: a mapping the runtime made is noted.
    pub(crate) unsafe extern "C" fn amd_vmem_map(
        va: *mut c_void,
        size: usize,
        in_offset: usize,
        handle: hsa_amd_vmem_alloc_handle_t,
        flags: u64,
    ) -> hsa_status_t {
        let map = captured!(hsa_amd_vmem_map_fn);
        // SAFETY: the caller's arguments go unchanged to the replaced entry.
        let status = unsafe { map(va, size, in_offset, handle, flags) };
        if status == crate::hsa::HSA_STATUS_SUCCESS {
            catch_panic((), || {
                vmem::mapped(&TRACKER, va as usize, size, handle.handle)
            });
        }
        status
    }

    /// Replaces `hsa_amd_vmem_unmap`: tracked mappings retired first.
    pub(crate) unsafe extern "C" fn amd_vmem_unmap(va: *mut c_void, size: usize) -> hsa_status_t {
        let unmap = captured!(hsa_amd_vmem_unmap_fn);
        // SAFETY: the caller's arguments go unchanged to the replaced entry.
        let call_runtime = || unsafe { unmap(va, size) };
        catch_panic(HSA_STATUS_ERROR, || {
            vmem::unmap(&TRACKER, va as usize, size, call_runtime)
        })
    }

    /// Replaces `hsa_amd_vmem_set_access`: mappings whose owner may write
    /// them become tracked; those that may lose access are retired first.
    pub(crate) unsafe extern "C" fn amd_vmem_set_access(
        va: *mut c_void,
        size: usize,
        desc: *const hsa_amd_memory_access_desc_t,
        desc_cnt: usize,
    ) -> hsa_status_t {
        let set_access = captured!(hsa_amd_vmem_set_access_fn);
        // SAFETY: the caller's arguments go unchanged to the replaced entry.
        let call_runtime = || unsafe { set_access(va, size, desc, desc_cnt) };
        let descriptors = if desc.is_null() || desc_cnt == 0 {
            &[][..]
        } else {
            // SAFETY: the runtime's contract: `desc` holds `desc_cnt` entries.
            unsafe { std::slice::from_raw_parts(desc, desc_cnt) }
        };
        catch_panic(HSA_STATUS_ERROR, || {
            vmem::set_access(&TRACKER, va as usize, size, descriptors, call_runtime)
        })
    }
}
