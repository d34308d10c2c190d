//! The C ABI: every `extern "C"` export of the library, and nothing else.
//!
//! Each export is a thin shell: it checks pointers, converts between C and
//! Rust types, and runs the logic inside the panic boundary, which returns
//! the function's own error value (0, NULL, false, an error status) instead
//! of unwinding into C. The logic lives in the modules beneath.
//!
//! Conventions: the receiver comes first, then inputs, then outputs; NULL is
//! accepted wherever a pointer can be passed; every function is thread-safe.

pub(crate) mod boundary;
pub mod types;

use std::ffi::{c_char, c_void};

use std::sync::Arc;
use std::time::Duration;

use crate::api::{
    self, CopyMethod, Coverage, DeviceBudget, HostMemory, InstallError, Installed, LogLevel,
    MemoryKind, StoragePolicy, StoragePools, Strategy, Tier,
};
use crate::hsa::sys::hsa_amd_memory_pool_t;
use crate::hsa::{hsa_agent_t, AmdExtTable, CoreApiTable};
use crate::support::logging::{self, Sink};
use boundary::{borrow, export};
use types::*;

/// Installs the allocation wrappers into the runtime's API tables and
/// captures the un-wrapped entries the library calls.
///
/// Call from the tool's `OnLoad` with the tables ROCr passes. Either table
/// may be NULL (not both). Each table is first checked against the headers
/// the library was built with (major version, and `version.minor_id` — the
/// table's size — covering every entry used); if either fails, nothing is
/// installed. A table that still leads to the wrappers (or to another
/// tool's wrapper layered over them) is left untouched; one they were taken
/// out of (the runtime's entries written back, as rocprofiler-sdk's
/// re-registration does) gets them again, and what was tracked before is
/// re-validated, since frees made meanwhile went unseen: each allocation or
/// mapping the runtime still reports as the same one is tracked again under
/// a new generation (no earlier snapshot writes it), the rest is dropped.
/// `lib_instance > 0` installs
/// nothing (a later instance would chain our wrapper to itself). One copy of
/// the library per process: if another copy (the same library loaded again
/// under another path, or linked statically) installed first, this copy
/// installs nothing, logs a warning and returns `KR_STATUS_ALREADY_INSTALLED`.
///
/// # Safety
/// Non-NULL tables must be the runtime's live API tables, readable and
/// writable for `version.minor_id` bytes.
#[no_mangle]
pub unsafe extern "C" fn kr_memory_tracker_init(
    core: *mut CoreApiTable,
    amd_ext: *mut AmdExtTable,
    lib_instance: u64,
) -> kr_status_t {
    export(kr_status_t::ErrorInternal, || {
        // SAFETY: the caller's promise about the tables (see above).
        match unsafe { api::install(core, amd_ext, lib_instance) } {
            Ok(Installed::Installed) => kr_status_t::Success,
            Ok(Installed::Skipped) => kr_status_t::Skipped,
            Ok(Installed::AlreadyInstalled) => kr_status_t::AlreadyInstalled,
            Err(InstallError::NoTables) => kr_status_t::ErrorInvalidArgument,
            Err(InstallError::IncompatibleTable(_)) => kr_status_t::ErrorIncompatibleTable,
        }
    })
}

/// Turns allocation recording on or off; returns the state now in force
/// (always false after `kr_finalize`). Off by default.
#[no_mangle]
pub extern "C" fn kr_set_tracking_enabled(enabled: bool) -> bool {
    export(false, || api::set_tracking(enabled))
}

/// Whether allocations are being recorded.
#[no_mangle]
pub extern "C" fn kr_tracking_enabled() -> bool {
    export(false, api::tracking)
}

/// The teardown guard, irreversible: afterwards the wrappers only chain,
/// nothing is recorded, every snapshot declines with `KR_DECLINE_FINALIZED`
/// and restores write nothing. Call it from the tool's finalizer.
#[no_mangle]
pub extern "C" fn kr_finalize() {
    export((), api::finalize)
}

/// Whether `kr_finalize` was called.
#[no_mangle]
pub extern "C" fn kr_is_finalized() -> bool {
    export(false, api::is_finalized)
}

/// Sets how snapshots enumerate loaded executables to find module-scope
/// variables, instead of the runtime loader's own iterator. Not needed with
/// ROCr: without it, the first snapshot asks the runtime for the AMD loader
/// extension (`hsa_system_get_major_extension_table`, `HSA_EXTENSION_AMD_LOADER`)
/// through the installed core table and uses its
/// `hsa_ven_amd_loader_iterate_executables`. NULL goes back to that.
#[no_mangle]
pub extern "C" fn kr_set_executable_iterator(iterate: kr_iterate_executables_fn_t) {
    export((), || api::set_executable_iterator(iterate))
}

/// Captures the replay state of `agent`: its tracked allocations and the
/// module-scope variables visible to it. Always returns a snapshot, complete
/// or declined (see `kr_snapshot_ok`); NULL only if the snapshot handle itself
/// cannot be allocated. Free it with `kr_snapshot_free`.
#[no_mangle]
pub extern "C" fn kr_snap(agent: hsa_agent_t) -> *mut kr_snapshot_t {
    export(std::ptr::null_mut(), || {
        let inner = api::snap_either(agent);
        crate::support::fallible::leak(kr_snapshot { inner }).unwrap_or(std::ptr::null_mut())
    })
}

/// True for a complete snapshot; false for a declined one or NULL.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_ok(snapshot: *const kr_snapshot_t) -> bool {
    export(false, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }.is_some_and(|s| s.inner.ok())
    })
}

/// Why the snapshot declined, `KR_DECLINE_NONE` if it is complete. NULL gives
/// `KR_DECLINE_METADATA_MEMORY`, the reason `kr_snap` returns NULL.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_decline_reason(
    snapshot: *const kr_snapshot_t,
) -> kr_decline_reason_arg {
    let metadata = api::DeclineReason::MetadataMemory.code();
    export(metadata, || {
        // SAFETY: the caller's promise.
        match unsafe { borrow(snapshot) } {
            Some(s) => decline_code(s.inner.decline_reason()),
            None => metadata,
        }
    })
}

/// Regions captured (0 for a declined snapshot or NULL).
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_region_count(snapshot: *const kr_snapshot_t) -> usize {
    export(0, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }.map_or(0, |s| s.inner.regions().len())
    })
}

/// Bytes captured (0 for a declined snapshot or NULL).
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_byte_count(snapshot: *const kr_snapshot_t) -> u64 {
    export(0, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }.map_or(0, |s| s.inner.byte_count())
    })
}

/// Writes the snapshot back; returns the number of regions restored. A
/// declined snapshot or NULL writes nothing and returns 0.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_restore(snapshot: *const kr_snapshot_t) -> usize {
    // SAFETY: forwarded from the caller.
    unsafe { kr_restore_with_report(snapshot, std::ptr::null_mut()) }
}

/// As `kr_restore`, and fills `report` (if not NULL) with how many regions
/// were restored, skipped because they are no longer the captured
/// allocation, and failed.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`; `report` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kr_restore_with_report(
    snapshot: *const kr_snapshot_t,
    report: *mut kr_restore_report_t,
) -> usize {
    export(0, || {
        // SAFETY: the caller's promise.
        let outcome = match unsafe { borrow(snapshot) } {
            Some(s) => api::restore_either(&s.inner),
            None => Default::default(),
        };
        // SAFETY: the caller's promise; NULL means no report wanted.
        if let Some(out) = unsafe { report.as_mut() } {
            *out = outcome.into();
        }
        outcome.restored
    })
}

/// Writes the snapshot back and says whether that restored it, with the
/// meaning of rocprofiler-sdk's `memory_snapshot::restore`: true when every
/// region that is still the captured allocation or variable was written back
/// (regions freed or unloaded since are skipped, and an empty snapshot is
/// restored by writing nothing); false when any copy failed, for NULL or a
/// declined snapshot, after `kr_finalize`, and when the allocation wrappers
/// were found taken out of the HSA tables (then nothing tracked is written).
/// A caller that stops replaying on false never runs a pass on memory the
/// library could not vouch for.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_restore_all(snapshot: *const kr_snapshot_t) -> bool {
    export(false, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }
            .is_some_and(|s| s.inner.ok() && api::restore_either(&s.inner).complete())
    })
}

/// Frees a snapshot and the host memory it holds. NULL is a no-op.
///
/// # Safety
/// `snapshot` is NULL or a snapshot from `kr_snap` not freed before.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_free(snapshot: *mut kr_snapshot_t) {
    export((), || {
        if !snapshot.is_null() {
            // SAFETY: a Box's allocation (fallible::leak), freed once.
            drop(unsafe { Box::from_raw(snapshot) });
        }
    })
}

/// Caps the host memory all live snapshots may hold together; 0 (the
/// default) means unlimited. A snapshot that would pass it declines with
/// `KR_DECLINE_HOST_MEMORY`.
#[no_mangle]
pub extern "C" fn kr_set_host_budget(bytes: u64) {
    export((), || api::set_host_budget((bytes != 0).then_some(bytes)))
}

/// Host memory held for snapshots: live snapshots' buffers and arenas, and
/// pinned and pageable arenas retained for reuse.
#[no_mangle]
pub extern "C" fn kr_host_bytes_in_use() -> u64 {
    export(0, api::host_bytes_in_use)
}

/// Sets the storage policy (`kr_storage_policy_t`); returns false, changing
/// nothing, for an unknown value. The default is `KR_STORAGE_AUTO`, or
/// `KERNEL_REPLAY_STORAGE` (auto, device, pinned, pageable, baseline).
#[no_mangle]
pub extern "C" fn kr_set_storage_policy(policy: kr_storage_policy_arg) -> bool {
    export(false, || match StoragePolicy::from_code(policy) {
        Some(policy) => {
            api::set_storage_policy(policy);
            true
        }
        None => false,
    })
}

/// The storage policy in force.
#[no_mangle]
pub extern "C" fn kr_storage_policy() -> StoragePolicy {
    export(StoragePolicy::Auto, api::storage_policy)
}

/// Caps the device memory snapshots of one agent may hold (leased and
/// retained arenas). `KR_DEVICE_BUDGET_AUTO` (the default): the agent's free
/// memory less a safety margin (a sixteenth of the pool, at least 256 MiB).
/// 0 keeps `auto` off the device tier.
#[no_mangle]
pub extern "C" fn kr_set_device_budget(bytes: u64) {
    export((), || {
        api::set_device_budget(match bytes {
            KR_DEVICE_BUDGET_AUTO => DeviceBudget::Auto,
            bytes => DeviceBudget::Bytes(bytes),
        })
    })
}

/// Chooses the pools snapshots of `agent` allocate from, instead of the
/// discovered ones: `device_pool` (a coarse-grained pool of the agent) and
/// `host_pool` (a host pool, owned by `host_agent`, that `agent` can be
/// granted access to). A handle of 0 leaves that tier unavailable. Pool
/// handles are `hsa_amd_memory_pool_t::handle`. Affects later snapshots;
/// returns false if the library is not installed (both tables).
#[no_mangle]
pub extern "C" fn kr_set_storage_pools(
    agent: hsa_agent_t,
    device_pool: u64,
    host_pool: u64,
    host_agent: hsa_agent_t,
) -> bool {
    export(false, || {
        let pool = |handle| (handle != 0).then_some(hsa_amd_memory_pool_t { handle });
        api::set_storage_pools(
            agent,
            StoragePools {
                device_pool: pool(device_pool),
                host_pool: pool(host_pool).map(|pool| (pool, host_agent)),
            },
        )
    })
}

/// Batches copies where the runtime has asynchronous copies and signals
/// (the default, unless `KERNEL_REPLAY_COPY=blocking`); false forces one
/// blocking copy per region.
#[no_mangle]
pub extern "C" fn kr_set_batched_copies(enabled: bool) {
    export((), || api::set_batched_copies(enabled))
}

/// Sets how snapshots and restores move their bytes (`kr_strategy_t`);
/// returns false, changing nothing, for an unknown value. (A function
/// registered with `kr_set_batch_copy` moves the regions under every
/// strategy but `KR_STRATEGY_COPIES`.) The default is `KR_STRATEGY_AUTO`, or
/// `KERNEL_REPLAY_STRATEGY` (auto, copies, scatter, dirty). Where the
/// library's kernels cannot run on an agent, copies are used.
#[no_mangle]
pub extern "C" fn kr_set_strategy(strategy: kr_strategy_arg) -> bool {
    export(false, || {
        Strategy::from_code(strategy)
            .map(api::set_strategy)
            .is_some()
    })
}

/// Sets which host memory granted to an agent its snapshots capture
/// (`kr_host_memory_t`); returns false, changing nothing, for an unknown
/// value. The default is `KR_HOST_MEMORY_AUTO`, or
/// `KERNEL_REPLAY_HOST_MEMORY` (auto, all, registered, off).
#[no_mangle]
pub extern "C" fn kr_set_host_memory(rule: kr_host_memory_arg) -> bool {
    export(false, || {
        HostMemory::from_code(rule)
            .map(api::set_host_memory)
            .is_some()
    })
}

/// The host-memory setting in force (`KR_HOST_MEMORY_AUTO` unresolved).
#[no_mangle]
pub extern "C" fn kr_host_memory() -> HostMemory {
    export(HostMemory::Auto, api::host_memory)
}

/// Sets what a snapshot does when memory its agent can write is not
/// covered (`kr_coverage_t`): warn once per agent (`KR_COVERAGE_WARN`, the
/// default, or `KERNEL_REPLAY_COVERAGE`) or decline
/// (`KR_COVERAGE_STRICT`: `KR_DECLINE_UNCOVERED_MEMORY`). False, changing
/// nothing, for an unknown value.
#[no_mangle]
pub extern "C" fn kr_set_coverage(coverage: kr_coverage_arg) -> bool {
    export(false, || {
        Coverage::from_code(coverage)
            .map(api::set_coverage)
            .is_some()
    })
}

/// The coverage setting in force.
#[no_mangle]
pub extern "C" fn kr_coverage() -> Coverage {
    export(Coverage::Warn, api::coverage)
}

/// Registers the tool's batch-copy function (NULL: none, the library's own
/// kernels again). Once registered, every capture and restore whose copies
/// are batched calls it once with the regions kept in device or pinned
/// memory (both sides reachable by the agent), under every strategy but
/// `KR_STRATEGY_COPIES`; pageable-tier regions still go through the
/// runtime's copies. The function copies every region (its own blit
/// kernels, SDMA, ...) and returns `HSA_STATUS_SUCCESS` once all have
/// completed; any other status makes the library copy them itself. It runs
/// inside the snapshot's window with the tracker's read views held: it must
/// not allocate or free memory through the wrapped entries; async copies it
/// submits through them on the calling thread pass the window. A call
/// already begun when the function is replaced finishes; `user_data` must
/// stay valid until then.
#[no_mangle]
pub extern "C" fn kr_set_batch_copy(copy: kr_batch_copy_fn_t, user_data: *mut c_void) {
    export((), || {
        api::set_batch_copy(copy.map(|copy| -> Arc<api::BatchCopyFn> {
            let user_data = UserData(user_data);
            Arc::new(move |agent, regions: &[api::CopyRegion], direction| {
                let data = &user_data;
                // SAFETY: the tool's function, called as its type says: the
                // regions are `regions.len()` records valid for the call.
                let status = unsafe {
                    copy(
                        agent,
                        regions.as_ptr().cast(),
                        regions.len(),
                        direction,
                        data.0,
                    )
                };
                if status == crate::hsa::HSA_STATUS_SUCCESS {
                    Ok(())
                } else {
                    Err(status)
                }
            })
        }))
    })
}

/// The tool's `user_data`, passed back to it untouched.
struct UserData(*mut c_void);
// SAFETY: the library never dereferences it; the tool that registered it
// for calls on any thread vouches for its use there.
unsafe impl Send for UserData {}
// SAFETY: as for Send.
unsafe impl Sync for UserData {}

/// How the capture of `snapshot` moved its bytes (its restores move them
/// the same way): `KR_COPY_METHOD_COPIES`, `_SCATTER`, `_DIRTY_BLOCKS` or
/// `_BATCH_COPY`; `KR_COPY_METHOD_COPIES` for NULL or a declined snapshot.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_copy_method(snapshot: *const kr_snapshot_t) -> CopyMethod {
    export(CopyMethod::Copies, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }.map_or(CopyMethod::Copies, |s| s.inner.copy_method())
    })
}

/// Whether the capture of `snapshot` copied only the blocks changed since
/// the agent's previous snapshot, into that snapshot's arenas (an
/// incremental snapshot); false for NULL.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_incremental(snapshot: *const kr_snapshot_t) -> bool {
    export(false, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }.is_some_and(|s| s.inner.incremental())
    })
}

/// The strategy in force.
#[no_mangle]
pub extern "C" fn kr_strategy() -> Strategy {
    export(Strategy::Auto, api::strategy)
}

/// Verify mode on or off: after every restore each live region is compared
/// byte for byte with its snapshot copy; differences count in the stats
/// (`verify_mismatched_regions`, `verify_mismatched_bytes`) and make
/// `kr_restore_all` false. Off by default, or `KERNEL_REPLAY_VERIFY=1`.
#[no_mangle]
pub extern "C" fn kr_set_verify(enabled: bool) {
    export((), || api::set_verify(enabled))
}

/// Releases the arenas retained for reuse by later snapshots; returns the
/// bytes released. Arenas of live snapshots are not touched.
#[no_mangle]
pub extern "C" fn kr_trim_retained() -> u64 {
    export(0, api::trim_retained)
}

/// Device memory held for snapshots, all agents (leased and retained arenas).
#[no_mangle]
pub extern "C" fn kr_device_bytes_in_use() -> u64 {
    export(0, api::device_bytes_in_use)
}

/// Bytes of the snapshot's regions kept in `tier` (`kr_storage_tier_t`); 0
/// for NULL, a declined snapshot or an unknown tier.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_tier_bytes(
    snapshot: *const kr_snapshot_t,
    tier: kr_storage_tier_arg,
) -> u64 {
    export(0, || {
        let tier = Tier::from_code(tier);
        // SAFETY: the caller's promise.
        match (unsafe { borrow(snapshot) }, tier) {
            (Some(s), Some(tier)) => s.inner.tier_bytes(tier),
            _ => 0,
        }
    })
}

/// Bytes of the snapshot's regions of memory kind `kind`
/// (`kr_memory_kind_t`); 0 for NULL, a declined snapshot or an unknown kind.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_kind_bytes(
    snapshot: *const kr_snapshot_t,
    kind: kr_memory_kind_arg,
) -> u64 {
    export(0, || {
        let kind = MemoryKind::from_code(kind);
        // SAFETY: the caller's promise.
        match (unsafe { borrow(snapshot) }, kind) {
            (Some(s), Some(kind)) => s.inner.kind_bytes(kind),
            _ => 0,
        }
    })
}

/// Bytes of memory kind `kind` (`kr_memory_kind_t`) that the snapshot's
/// agent can write and the snapshot does not cover (host memory the
/// host-memory setting left out); 0 for NULL, a declined snapshot or an
/// unknown kind.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_uncovered_bytes(
    snapshot: *const kr_snapshot_t,
    kind: kr_memory_kind_arg,
) -> u64 {
    export(0, || {
        let kind = MemoryKind::from_code(kind);
        // SAFETY: the caller's promise.
        match (unsafe { borrow(snapshot) }, kind) {
            (Some(s), Some(kind)) => s.inner.not_covered().bytes[kind.index()],
            _ => 0,
        }
    })
}

/// Whether XNACK was on when the snapshot was taken: kernels may then write
/// any system memory, which no snapshot covers. False for NULL or a
/// declined snapshot.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot from `kr_snap`.
#[no_mangle]
pub unsafe extern "C" fn kr_snapshot_system_memory_uncovered(
    snapshot: *const kr_snapshot_t,
) -> bool {
    export(false, || {
        // SAFETY: the caller's promise.
        unsafe { borrow(snapshot) }.is_some_and(|s| s.inner.not_covered().system_memory)
    })
}

/// Fills `stats` (if not NULL) with the cumulative counters and what is held
/// now.
///
/// # Safety
/// `stats` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kr_get_stats(stats: *mut kr_stats_t) {
    export((), || {
        // SAFETY: the caller's promise; NULL means nothing wanted.
        if let Some(out) = unsafe { stats.as_mut() } {
            *out = stats_v1(&api::stats());
        }
    })
}

/// The counters as `kr_stats_t` reports them, with what is held now.
fn stats_v1(stats: &api::Stats) -> kr_stats_t {
    let counters = &stats.counters;
    kr_stats_t {
        snapshots: counters.snapshots,
        declines: std::array::from_fn(|i| counters.declines[i]),
        bytes_captured: counters.bytes_captured,
        snap_ns: counters.snap_ns,
        restores: counters.restores,
        regions_restored: counters.regions_restored,
        regions_skipped: counters.regions_skipped,
        regions_failed: counters.regions_failed,
        bytes_restored: counters.bytes_restored,
        restore_ns: counters.restore_ns,
        held_bytes: stats.held_bytes,
        retained_bytes: stats.retained_bytes,
    }
}

/// Fills `stats` (if not NULL) with every counter (see `kr_stats2_t`): at
/// most `stats->struct_size` bytes are written, `struct_size` itself left
/// as it is. A `struct_size` smaller than `struct_size` itself writes nothing.
///
/// # Safety
/// `stats` is NULL or writable for `stats->struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kr_get_stats2(stats: *mut kr_stats2_t) {
    export((), || {
        if stats.is_null() {
            return;
        }
        // SAFETY: the caller's promise: the size field is readable.
        let size = unsafe { std::ptr::addr_of!((*stats).struct_size).read_unaligned() };
        let now = api::stats();
        let counters = &now.counters;
        let full = kr_stats2_t {
            struct_size: size,
            base: stats_v1(&now),
            declines: std::array::from_fn(|i| counters.declines.get(i).copied().unwrap_or(0)),
            fenced_copies: counters.fenced_copies,
            fence_waits: counters.fence_waits,
            fence_timeouts: counters.fence_timeouts,
            application_retries: counters.application_retries,
            bytes_released_for_application: counters.bytes_released_for_application,
            untracked_device_bytes: counters.untracked_device_bytes,
            scatter_dispatches: counters.scatter_dispatches,
            dirty_block_dispatches: counters.dirty_block_dispatches,
            blocks_compared: counters.blocks_compared,
            blocks_copied: counters.blocks_copied,
            kernel_fallbacks: counters.kernel_fallbacks,
            verified_restores: counters.verified_restores,
            verify_mismatched_regions: counters.verify_mismatched_regions,
            verify_mismatched_bytes: counters.verify_mismatched_bytes,
            incremental_snapshots: counters.incremental_snapshots,
            verified_captures: counters.verified_captures,
            batch_copy_calls: counters.batch_copy_calls,
            batch_copy_failures: counters.batch_copy_failures,
            bytes_captured_by_kind: counters.bytes_captured_by_kind,
            bytes_not_covered_by_kind: counters.bytes_not_covered_by_kind,
            snapshots_with_xnack: counters.snapshots_with_xnack,
        };
        let skip = std::mem::size_of::<usize>();
        let len = size.min(std::mem::size_of::<kr_stats2_t>());
        if len > skip {
            // SAFETY: both sides hold at least `len` bytes; only the bytes
            // after the size field are written.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    std::ptr::addr_of!(full).cast::<u8>().add(skip),
                    stats.cast::<u8>().add(skip),
                    len - skip,
                )
            };
        }
    })
}

/// Device memory in use on `agent` that snapshots do not cover, as far as
/// the runtime reports it: the agent's memory in use
/// (`HSA_AMD_AGENT_INFO_MEMORY_AVAIL` against its device pool's size, which
/// counts other processes too) less the tracked allocations and mappings
/// and less the library's own arenas. 0 when the runtime does not report
/// the agent's free memory.
#[no_mangle]
pub extern "C" fn kr_untracked_device_bytes(agent: hsa_agent_t) -> u64 {
    export(0, || api::untracked(agent).bytes.unwrap_or(0))
}

/// As `kr_untracked_device_bytes`, with whether the runtime reports it and
/// the virtual-memory mappings among it that the library saw.
#[no_mangle]
pub extern "C" fn kr_untracked_summary(agent: hsa_agent_t) -> kr_untracked_t {
    export(kr_untracked_t::default(), || {
        let untracked = api::untracked(agent);
        kr_untracked_t {
            bytes: untracked.bytes.unwrap_or(0),
            known: untracked.bytes.is_some(),
            vmem_bytes: untracked.mapping_bytes,
            vmem_regions: untracked.mappings,
        }
    })
}

/// The bytes and regions a snapshot of `agent` would take now: its tracked
/// allocations and mappings and the module variables of every loaded
/// executable (one no snapshot walked yet is walked now), so that a tool can
/// admit or refuse a replay before capturing.
#[no_mangle]
pub extern "C" fn kr_estimate_footprint(agent: hsa_agent_t) -> api::Footprint {
    export(api::Footprint::default(), || api::estimate_footprint(agent))
}

/// How long a snapshot or restore waits for application async copies in
/// flight on the agent's tracked memory (default 5 s); past it a snapshot
/// declines with `KR_DECLINE_COPIES_IN_FLIGHT` and a restore writes nothing.
/// 0: do not wait.
#[no_mangle]
pub extern "C" fn kr_set_copy_fence_timeout(nanoseconds: u64) {
    export((), || {
        api::set_copy_fence_timeout(Duration::from_nanos(nanoseconds))
    })
}

/// Zeroes the cumulative counters (not what is held).
#[no_mangle]
pub extern "C" fn kr_reset_stats() {
    export((), api::reset_stats)
}

/// Number of tracked allocations and virtual-memory mappings owned by
/// `agent`.
#[no_mangle]
pub extern "C" fn kr_tracked_count(agent: hsa_agent_t) -> usize {
    export(0, || api::tracked(agent).regions)
}

/// Bytes of the tracked allocations and virtual-memory mappings owned by
/// `agent`.
#[no_mangle]
pub extern "C" fn kr_tracked_bytes(agent: hsa_agent_t) -> u64 {
    export(0, || api::tracked(agent).bytes)
}

/// Runs one replay window the way rocprofiler-sdk's `queue.cpp` does: with
/// `passes <= 1`, pass 0 once and no snapshot; otherwise snapshot, and if it
/// declines run pass 0 exactly once (`replayed == false`, reason set), else
/// run passes 0..passes-1 with a restore before every pass but the first.
///
/// # Safety
/// `run_pass` is NULL (nothing runs, `passes_run == 0`) or callable with
/// `user_data`.
#[no_mangle]
pub unsafe extern "C" fn kr_replay(
    agent: hsa_agent_t,
    passes: u32,
    run_pass: kr_pass_fn_t,
    user_data: *mut c_void,
) -> kr_replay_result_t {
    let nothing = kr_replay_result_t {
        replayed: false,
        passes_run: 0,
        decline_reason: 0,
        restore_failures: 0,
    };
    export(nothing, || {
        let Some(run_pass) = run_pass else {
            log::error!("kr_replay called without a pass function; nothing run");
            return nothing;
        };
        // SAFETY: the caller's promise about run_pass and user_data.
        api::replay(agent, passes, |pass| unsafe { run_pass(pass, user_data) }).into()
    })
}

/// True only for a submission that can be replayed: exactly one packet
/// holding exactly one dispatch, with no graph launch active. A graph launch
/// and a multi-packet batch each warn once per process.
#[no_mangle]
pub extern "C" fn kr_replay_gate(
    packet_count: u64,
    dispatch_count: u64,
    graph_launch_active: bool,
) -> bool {
    export(false, || {
        api::replay_gate(packet_count, dispatch_count, graph_launch_active)
    })
}

/// Sends every log message that passes the level to `callback` instead of
/// stderr; NULL goes back to stderr. The callback may run on any thread.
#[no_mangle]
pub extern "C" fn kr_set_log_callback(callback: kr_log_callback_t, user_data: *mut c_void) {
    export((), || {
        logging::set_sink(callback.map(|callback| Sink {
            callback,
            user_data,
        }))
    })
}

/// Sets the most verbose level logged (default `KR_LOG_WARN`, or
/// `KERNEL_REPLAY_LOG`). Values below `KR_LOG_ERROR` turn logging off.
#[no_mangle]
pub extern "C" fn kr_set_log_level(max_level: kr_log_level_arg) {
    export((), || {
        logging::set_level(LogLevel::filter_from_code(max_level))
    })
}

/// The library version, e.g. "0.1.0". Static storage.
#[no_mangle]
pub extern "C" fn kr_version() -> *const c_char {
    // The same string as `api::version`, NUL-terminated.
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}
