//! Test seams: what the project's own tests, benches and fuzzer reach that
//! is not API. Not part of the library's interface; see `ARCHITECTURE.md`.

use crate::memory_tracker::TRACKER;

/// The software runtime was reset behind the wrappers' back (every
/// allocation, mapping and executable gone, as after a runtime restart):
/// drops everything the tracker recorded.
pub fn forget_tracked() {
    crate::memory_tracker::forget_all(&TRACKER);
}

/// What the tracker does when it finds its wrappers taken out of the
/// tables: sets what it recorded aside until a re-installation
/// re-validates it.
pub fn set_aside_tracked() {
    crate::memory_tracker::revalidate::set_aside(&TRACKER);
}

/// Whether the inventory holds no region.
pub fn inventory_is_empty() -> bool {
    TRACKER.inventory.is_empty()
}

/// Lets the fuzzer start each input unfinalized (`kr_finalize` is otherwise
/// irreversible). Only in fuzzing builds (`--cfg fuzzing`).
#[cfg(fuzzing)]
pub fn reset_gate_for_fuzzing() {
    TRACKER.gate.reset_for_fuzzing();
}

/// The entries the library wraps or calls (the entry list, for the headers
/// built against), and those of a table the guard requires.
pub use crate::hsa::entries::{ApiTable, LibraryEntry, Need, Role, LIBRARY_ENTRIES};
pub use crate::hsa::tables::required_entries;

/// The one-copy-per-process marker (its tests set and read it as another
/// copy of the library would).
pub use crate::memory_tracker::process_marker;

/// Application async copies in flight on `agent` (the fence's count).
pub fn fence_in_flight(agent: u64) -> u64 {
    TRACKER.fences.in_flight(agent)
}

/// Bytes of the arenas retained for `agent`, per tier.
pub fn retained_for(
    agent: crate::hsa::hsa_agent_t,
) -> crate::memory_snapshot::storage::PerTier<u64> {
    use crate::memory_snapshot::{context::Context, state::SNAPSHOTS};
    SNAPSHOTS
        .storage
        .view(Context::process(), agent)
        .retained
        .map(|bytes| bytes as u64)
}

/// Whether the device kernels are set up on some agent (their queue,
/// executable and buffers are runtime allocations the library holds until
/// `trim_retained` or finalize).
pub fn device_kernels_set_up() -> bool {
    crate::memory_snapshot::state::SNAPSHOTS
        .kernels
        .any_runner()
}

/// The pools snapshots of `agent` allocate from (discovered, or set by
/// `set_storage_pools`): the device pool's handle, and the host pool's with
/// its CPU agent's.
pub fn storage_pools(agent: crate::hsa::hsa_agent_t) -> (Option<u64>, Option<(u64, u64)>) {
    use crate::memory_snapshot::{context::Context, state::SNAPSHOTS};
    let pools = SNAPSHOTS.storage.view(Context::process(), agent).pools;
    (
        pools.device_pool.map(|(pool, _)| pool.handle),
        pools
            .host_pool
            .map(|host| (host.pool.handle, host.cpu_agent.handle)),
    )
}

/// For the doc examples: `size` bytes of the pool `pool`
/// (`hsa_amd_memory_pool_t::handle`), allocated the way an application's
/// `hipMalloc` allocates them, through `amd` (the runtime's AMD table, where
/// the wrappers sit once installed), and filled with `byte`. The project's
/// software runtime backs device memory with host memory, so the examples
/// write and read it directly where a GPU would run a kernel.
///
/// # Safety
/// `amd` is the software runtime's live AMD extension table and `pool` one
/// of its device pools.
pub unsafe fn app_allocate(
    amd: *mut crate::hsa::AmdExtTable,
    pool: u64,
    size: usize,
    byte: u8,
) -> *mut u8 {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: the caller's promise about the table and the pool.
    let status = unsafe {
        (*amd)
            .hsa_amd_memory_pool_allocate_fn
            .expect("the pool allocate entry")(
            crate::hsa::sys::hsa_amd_memory_pool_t { handle: pool },
            size,
            0,
            &mut ptr,
        )
    };
    assert_eq!(status, crate::hsa::HSA_STATUS_SUCCESS, "allocation refused");
    let ptr = ptr.cast::<u8>();
    // SAFETY: a fresh allocation of `size` bytes the host can write.
    unsafe { std::ptr::write_bytes(ptr, byte, size) };
    ptr
}

/// `hsa_amd_agents_allow_access(agents, NULL, ptr)` through the runtime's
/// AMD table, for the examples; panics if the runtime refuses.
///
/// # Safety
/// `amd` is the software runtime's live AMD extension table and `ptr` an
/// allocation of its.
pub unsafe fn app_allow_access(
    amd: *mut crate::hsa::AmdExtTable,
    ptr: *const u8,
    agents: &[crate::hsa::hsa_agent_t],
) {
    // SAFETY: the caller's promise about the table; `agents` outlives the
    // call.
    let status = unsafe {
        (*amd)
            .hsa_amd_agents_allow_access_fn
            .expect("the allow access entry")(
            agents.len() as u32,
            agents.as_ptr(),
            std::ptr::null(),
            ptr.cast(),
        )
    };
    assert_eq!(status, crate::hsa::HSA_STATUS_SUCCESS, "access refused");
}

/// What the library takes HIP's presence to be from now on (`None`: looks
/// again): the host-memory setting's `auto` depends on it.
pub fn assume_hip_loaded(loaded: Option<bool>) {
    crate::memory_snapshot::host_memory::assume_hip_loaded(loaded)
}
