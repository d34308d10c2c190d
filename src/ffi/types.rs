//! The C-visible types. The enums are the Rust API's own, defined once with
//! their C view (`c_enum!`); the header generator renders them from
//! [`C_ENUMS`]. Codes coming in from C travel as their integer (`*_arg`),
//! so a value outside an enum is a handled input, never undefined
//! behaviour; the header spells each `*_arg` as its enum's C name.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

use crate::api::{
    CopyDirection, CopyMethod, Coverage, DeclineReason, HostMemory, LogLevel, MemoryKind,
    ReplayOutcome, RestoreReport, StoragePolicy, Strategy, Tier,
};
use crate::hsa::{hsa_agent_t, hsa_executable_t, hsa_status_t};
use crate::support::c_enum::CEnumDecl;

crate::c_enum! {
    /// Result of `kr_memory_tracker_init`.
    pub enum kr_status_t: "kr_status_t", "KR_STATUS_" {
        /// Wrappers were installed into at least one table.
        Success = 0 => "SUCCESS",
        /// `lib_instance > 0`: only the first library instance installs.
        Skipped = 1 => "SKIPPED",
        /// Every table passed belongs to a kind already installed (or another
        /// copy of the library in the process installed first); nothing changed.
        AlreadyInstalled = 2 => "ALREADY_INSTALLED",
        /// Both tables were NULL.
        ErrorInvalidArgument = 3 => "ERROR_INVALID_ARGUMENT",
        /// A table's major version or size does not match the headers the library
        /// was built against, or an entry it needs is NULL; nothing installed.
        ErrorIncompatibleTable = 4 => "ERROR_INCOMPATIBLE_TABLE",
        /// An internal error was caught at the boundary.
        ErrorInternal = 5 => "ERROR_INTERNAL",
    }
}

/// Every enum of the C header, in the order the header declares them.
pub const C_ENUMS: &[CEnumDecl] = &[
    kr_status_t::C_DECL,
    DeclineReason::C_DECL,
    LogLevel::C_DECL,
    StoragePolicy::C_DECL,
    Tier::C_DECL,
    MemoryKind::C_DECL,
    Strategy::C_DECL,
    CopyMethod::C_DECL,
    CopyDirection::C_DECL,
    HostMemory::C_DECL,
    Coverage::C_DECL,
];

/// A `kr_decline_reason_t` as it crosses the boundary (0: not declined).
pub type kr_decline_reason_arg = u32;

/// A `kr_strategy_t` received from C.
pub type kr_strategy_arg = u32;

/// A `kr_log_level_t` received from C.
pub type kr_log_level_arg = u32;

/// A `kr_storage_policy_t` received from C.
pub type kr_storage_policy_arg = u32;

/// A `kr_storage_tier_t` received from C.
pub type kr_storage_tier_arg = u32;

/// A `kr_memory_kind_t` received from C.
pub type kr_memory_kind_arg = u32;

/// A `kr_host_memory_t` received from C.
pub type kr_host_memory_arg = u32;

/// A `kr_coverage_t` received from C.
pub type kr_coverage_arg = u32;

/// Device budget meaning "the agent's free memory less a safety margin"
/// (the default; see `kr_set_device_budget`).
pub const KR_DEVICE_BUDGET_AUTO: u64 = u64::MAX;

/// The C code of a decline reason, 0 for none.
pub(crate) fn decline_code(reason: Option<DeclineReason>) -> kr_decline_reason_arg {
    reason.map_or(0, DeclineReason::code)
}

// The C structs below carry one slot per storage tier, spelled as a
// literal for the header: a tier added in Rust must grow them (an ABI change).
// The per-kind slots are the stats' (room for kinds to come).
const _: () = assert!(crate::memory_snapshot::storage::Tier::COUNT == 3);
const _: () = assert!(crate::support::stats::KIND_SLOTS == 8);

/// Cumulative counters (`kr_get_stats`), and what is held now.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kr_stats_t {
    /// Complete snapshots taken.
    pub snapshots: u64,
    /// Declined snapshots, indexed by `kr_decline_reason_t`.
    pub declines: [u64; 10],
    /// Bytes captured by complete snapshots.
    pub bytes_captured: u64,
    /// Nanoseconds spent in `kr_snap` (complete and declined).
    pub snap_ns: u64,
    /// Restores of complete snapshots.
    pub restores: u64,
    /// Regions those restores wrote back.
    pub regions_restored: u64,
    /// Regions they skipped: no longer the allocation, mapping or variable
    /// captured.
    pub regions_skipped: u64,
    /// Regions whose copy failed.
    pub regions_failed: u64,
    /// Bytes of the regions those restores covered.
    pub bytes_restored: u64,
    /// Nanoseconds spent in restores.
    pub restore_ns: u64,
    /// Bytes held now per tier (`kr_storage_tier_t`): arenas leased to live
    /// snapshots and retained for reuse. Baseline buffers count as pageable
    /// host memory in `kr_host_bytes_in_use`, not here.
    pub held_bytes: [u64; 3],
    /// Of those, bytes retained for reuse (`kr_trim_retained` releases them).
    pub retained_bytes: [u64; 3],
}

/// Cumulative counters, extensible (`kr_get_stats2`): the caller sets
/// `struct_size` to `sizeof(kr_stats2_t)` as its header declares it, and the
/// library fills at most that many bytes, so fields appended in later
/// versions never overrun an older caller's struct.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kr_stats2_t {
    /// In: the size of the caller's struct. Out: unchanged.
    pub struct_size: usize,
    /// What `kr_get_stats` reports (its `declines` only up to code 9).
    pub base: kr_stats_t,
    /// Declined snapshots for every reason, indexed by `kr_decline_reason_t`.
    pub declines: [u64; 32],
    /// Application async copies that went through the copy fence.
    pub fenced_copies: u64,
    /// Snapshots and restores that waited for application copies in flight.
    pub fence_waits: u64,
    /// Of those, the ones whose copies did not finish within the timeout.
    pub fence_timeouts: u64,
    /// Times the retained arenas were released so that an application
    /// allocation the runtime refused for lack of memory could be retried.
    pub application_retries: u64,
    /// Bytes released for those retries.
    pub bytes_released_for_application: u64,
    /// Device memory in use on the agent of the last snapshot that it did
    /// not cover (see `kr_untracked_device_bytes`).
    pub untracked_device_bytes: u64,
    /// Captures and restores whose regions went in one scatter dispatch.
    pub scatter_dispatches: u64,
    /// Captures and restores that compared dirty blocks.
    pub dirty_block_dispatches: u64,
    /// Blocks those dispatches compared.
    pub blocks_compared: u64,
    /// Of those, blocks copied (changed, or a capture's first copy).
    pub blocks_copied: u64,
    /// Device-kernel dispatches that failed; their regions were copied.
    pub kernel_fallbacks: u64,
    /// Restores checked byte by byte (`kr_set_verify`).
    pub verified_restores: u64,
    /// Regions those checks found different from their snapshot.
    pub verify_mismatched_regions: u64,
    /// Bytes those checks found different.
    pub verify_mismatched_bytes: u64,
    /// Snapshots that copied only the blocks changed since the agent's
    /// previous snapshot into the same arenas (incremental snapshots).
    pub incremental_snapshots: u64,
    /// Incremental snapshots checked byte by byte (`kr_set_verify`); their
    /// differences count in `verify_mismatched_regions` and `_bytes`.
    pub verified_captures: u64,
    /// Calls of the tool's batch-copy function (`kr_set_batch_copy`).
    pub batch_copy_calls: u64,
    /// Of those, calls that failed; their regions were copied instead.
    pub batch_copy_failures: u64,
    /// Bytes captured by complete snapshots per memory kind, indexed by
    /// `kr_memory_kind_t` (room for kinds to come).
    pub bytes_captured_by_kind: [u64; 8],
    /// Bytes of memory their agents could write that complete snapshots
    /// left uncovered (host memory the host-memory setting left out), per
    /// memory kind, indexed as `bytes_captured_by_kind`.
    pub bytes_not_covered_by_kind: [u64; 8],
    /// Complete snapshots taken while XNACK was on (kernels may write any
    /// system memory; none of it is covered).
    pub snapshots_with_xnack: u64,
}

/// Device memory on an agent that snapshots do not cover
/// (`kr_untracked_summary`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kr_untracked_t {
    /// In use on the agent less what is tracked less the library's arenas,
    /// as `kr_untracked_device_bytes` (0 when not `known`).
    pub bytes: u64,
    /// False when the runtime does not report the agent's free memory.
    pub known: bool,
    /// Virtual-memory mappings on the agent the wrappers saw but snapshots
    /// do not capture (fine-grained memory, no write access for the agent,
    /// or made while tracking was off): bytes.
    pub vmem_bytes: u64,
    /// The number of those mappings.
    pub vmem_regions: usize,
}

/// Rust API structs the C ABI passes as they are, and their C names.
pub const C_STRUCT_NAMES: &[(&str, &str)] = &[("Footprint", "kr_footprint_t")];

/// A snapshot of one agent's replay state, complete or declined. Opaque to C.
pub struct kr_snapshot {
    pub(crate) inner: crate::memory_snapshot::Snapshot,
}

/// The C name of the opaque snapshot.
pub type kr_snapshot_t = kr_snapshot;

/// What one restore did, region by region.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kr_restore_report_t {
    /// Regions written back.
    pub restored: usize,
    /// Tracked regions skipped because they are no longer the captured
    /// allocation (freed, or the address reused), or everything after
    /// `kr_finalize`.
    pub skipped_not_live: usize,
    /// Regions whose host-to-device copy failed.
    pub failed: usize,
}

/// What one `kr_replay` window did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kr_replay_result_t {
    /// True when the passes ran with restores between them.
    pub replayed: bool,
    /// Passes run (1 when declined or `passes <= 1`, 0 without a pass function).
    pub passes_run: u32,
    /// Why the snapshot declined, or `KR_DECLINE_NONE`.
    pub decline_reason: kr_decline_reason_arg,
    /// Region copies that failed across the window's restores.
    pub restore_failures: usize,
}

/// Called by an executable iterator once per loaded executable.
pub type kr_executable_callback_t =
    Option<unsafe extern "C" fn(executable: hsa_executable_t, data: *mut c_void) -> hsa_status_t>;

/// Enumerates loaded executables (the shape of
/// `hsa_ven_amd_loader_iterate_executables`).
pub type kr_iterate_executables_fn_t = Option<
    unsafe extern "C" fn(callback: kr_executable_callback_t, data: *mut c_void) -> hsa_status_t,
>;

/// Receives log messages (NUL-terminated, valid for the call only).
pub type kr_log_callback_t =
    Option<unsafe extern "C" fn(level: LogLevel, message: *const c_char, user_data: *mut c_void)>;

/// One region of a batch copy: `size` bytes from `src` to `dst`, both
/// addresses the agent reaches (device or pinned host memory).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kr_copy_region_t {
    /// Destination address.
    pub dst: u64,
    /// Source address.
    pub src: u64,
    /// Bytes to copy.
    pub size: u64,
}

// The C struct is the Rust API's region, field for field.
const _: () = assert!(
    std::mem::size_of::<kr_copy_region_t>() == std::mem::size_of::<crate::api::CopyRegion>()
        && std::mem::align_of::<kr_copy_region_t>()
            == std::mem::align_of::<crate::api::CopyRegion>()
);

/// A tool's batch-copy function (`kr_set_batch_copy`): copies `count`
/// regions of `agent`'s snapshot in `direction` and returns
/// `HSA_STATUS_SUCCESS` once all have completed.
pub type kr_batch_copy_fn_t = Option<
    unsafe extern "C" fn(
        agent: hsa_agent_t,
        regions: *const kr_copy_region_t,
        count: usize,
        direction: CopyDirection,
        user_data: *mut c_void,
    ) -> hsa_status_t,
>;

/// Runs pass number `pass` of the dispatch being replayed.
pub type kr_pass_fn_t = Option<unsafe extern "C" fn(pass: u32, user_data: *mut c_void)>;

impl From<RestoreReport> for kr_restore_report_t {
    fn from(r: RestoreReport) -> Self {
        kr_restore_report_t {
            restored: r.restored,
            skipped_not_live: r.skipped_not_live,
            failed: r.failed,
        }
    }
}

impl From<ReplayOutcome> for kr_replay_result_t {
    fn from(o: ReplayOutcome) -> Self {
        kr_replay_result_t {
            replayed: o.replayed,
            passes_run: o.passes_run,
            decline_reason: decline_code(o.decline),
            restore_failures: o.restore_failures,
        }
    }
}
