//! The C-visible types. Names and values are the C ABI's; cbindgen writes
//! them into `include/kernel_replay.h`.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

use crate::hsa::{hsa_executable_t, hsa_status_t};
use crate::memory_snapshot::{DeclineReason, RestoreReport, Snapshot};
use crate::replay::ReplayOutcome;

/// Result of `kr_memory_tracker_init`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kr_status_t {
    /// Wrappers were installed into at least one table.
    KR_STATUS_SUCCESS = 0,
    /// `lib_instance > 0`: only the first library instance installs.
    KR_STATUS_SKIPPED = 1,
    /// Every table passed belongs to a kind already installed, or another copy
    /// of the library installed first in this process; nothing changed.
    KR_STATUS_ALREADY_INSTALLED = 2,
    /// Both tables were NULL.
    KR_STATUS_ERROR_INVALID_ARGUMENT = 3,
    /// A table's major version or size does not match the headers the library
    /// was built against, or an entry it needs is NULL; nothing installed.
    KR_STATUS_ERROR_INCOMPATIBLE_TABLE = 4,
    /// An internal error was caught at the boundary.
    KR_STATUS_ERROR_INTERNAL = 5,
}

/// Why a snapshot declined replay (`KR_DECLINE_NONE` for a complete one).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kr_decline_reason_t {
    KR_DECLINE_NONE = 0,
    /// No core table installed (`kr_memory_tracker_init`).
    KR_DECLINE_NOT_INITIALIZED = 1,
    /// `kr_finalize` was called.
    KR_DECLINE_FINALIZED = 2,
    /// No way to enumerate loaded executables: no iterator was set with
    /// `kr_set_executable_iterator`, and the runtime has no AMD loader
    /// extension table with `hsa_ven_amd_loader_iterate_executables`.
    KR_DECLINE_NO_EXECUTABLE_ITERATOR = 3,
    /// The executable iterator, a symbol walk or a symbol query failed.
    KR_DECLINE_SYMBOL_ENUMERATION = 4,
    /// The snapshot's bookkeeping could not be allocated.
    KR_DECLINE_METADATA_MEMORY = 5,
    /// A host copy could not be allocated or would pass the host budget.
    KR_DECLINE_HOST_MEMORY = 6,
    /// A device-to-host copy failed.
    KR_DECLINE_COPY_FAILED = 7,
    /// The storage policy forces the device tier and the snapshot does not
    /// fit the device budget or cannot be allocated there.
    KR_DECLINE_DEVICE_MEMORY = 8,
    /// The allocation wrappers were taken out of the HSA tables they were
    /// installed into (a tool restored the runtime's entries): frees may have
    /// gone unseen, so what was tracked is dropped. Snapshots decline until
    /// `kr_memory_tracker_init` installs the wrappers again.
    KR_DECLINE_WRAPPERS_REMOVED = 9,
    /// Application async copies (`hsa_amd_memory_async_copy` and its
    /// variants) touching the agent's tracked memory were still in flight
    /// when the copy fence's timeout ran out (`kr_set_copy_fence_timeout`).
    KR_DECLINE_COPIES_IN_FLIGHT = 10,
}

/// Log levels, most severe first.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kr_log_level_t {
    KR_LOG_ERROR = 1,
    KR_LOG_WARN = 2,
    KR_LOG_INFO = 3,
    KR_LOG_DEBUG = 4,
    KR_LOG_TRACE = 5,
}

/// A log level as received from C. Carried as its integer so that a value
/// outside the enum is a handled input, not undefined behaviour; the header
/// spells it `kr_log_level_t` (see `cbindgen.toml`).
pub type kr_log_level_arg = u32;

/// Where snapshots keep their copies (`kr_set_storage_policy`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kr_storage_policy_t {
    /// Device memory up to the device budget, then pinned host memory up to
    /// the host budget, then pageable host memory. The default.
    KR_STORAGE_AUTO = 0,
    /// Device memory only; a snapshot that does not fit declines with
    /// `KR_DECLINE_DEVICE_MEMORY`.
    KR_STORAGE_DEVICE = 1,
    /// Pinned host memory only.
    KR_STORAGE_PINNED = 2,
    /// Pageable host memory only.
    KR_STORAGE_PAGEABLE = 3,
    /// The original design: a fresh pageable buffer and one blocking copy per
    /// region, no arena reuse, no discovery cache. For comparison.
    KR_STORAGE_BASELINE = 4,
}

/// A storage tier (`kr_snapshot_tier_bytes`, `kr_stats_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kr_storage_tier_t {
    KR_TIER_DEVICE = 0,
    KR_TIER_PINNED = 1,
    KR_TIER_PAGEABLE = 2,
}

/// A storage policy as received from C (an integer, so an unknown value is
/// a handled input; the header spells it `kr_storage_policy_t`).
pub type kr_storage_policy_arg = u32;

/// A storage tier as received from C (see `kr_storage_policy_arg`).
pub type kr_storage_tier_arg = u32;

/// Device budget meaning "the agent's free memory less a safety margin"
/// (the default; see `kr_set_device_budget`).
pub const KR_DEVICE_BUDGET_AUTO: u64 = u64::MAX;

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
    pub regions_restored: u64,
    pub regions_skipped: u64,
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
    /// or made while tracking was off): bytes and count.
    pub vmem_bytes: u64,
    pub vmem_regions: usize,
}

/// What a snapshot of an agent would take now (`kr_estimate_footprint`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kr_footprint_t {
    /// Bytes of the regions (before the 256-byte alignment of the arenas).
    pub bytes: u64,
    pub regions: usize,
}

/// A snapshot of one agent's replay state. Opaque to C.
pub struct kr_snapshot {
    pub(crate) inner: Snapshot,
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
    pub decline_reason: kr_decline_reason_t,
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
pub type kr_log_callback_t = Option<
    unsafe extern "C" fn(level: kr_log_level_t, message: *const c_char, user_data: *mut c_void),
>;

/// Runs pass number `pass` of the dispatch being replayed.
pub type kr_pass_fn_t = Option<unsafe extern "C" fn(pass: u32, user_data: *mut c_void)>;

impl From<Option<DeclineReason>> for kr_decline_reason_t {
    fn from(reason: Option<DeclineReason>) -> Self {
        use kr_decline_reason_t::*;
        match reason {
            None => KR_DECLINE_NONE,
            Some(DeclineReason::NotInitialized) => KR_DECLINE_NOT_INITIALIZED,
            Some(DeclineReason::Finalized) => KR_DECLINE_FINALIZED,
            Some(DeclineReason::NoExecutableIterator) => KR_DECLINE_NO_EXECUTABLE_ITERATOR,
            Some(DeclineReason::SymbolEnumeration) => KR_DECLINE_SYMBOL_ENUMERATION,
            Some(DeclineReason::MetadataMemory) => KR_DECLINE_METADATA_MEMORY,
            Some(DeclineReason::HostMemory) => KR_DECLINE_HOST_MEMORY,
            Some(DeclineReason::CopyFailed) => KR_DECLINE_COPY_FAILED,
            Some(DeclineReason::DeviceMemory) => KR_DECLINE_DEVICE_MEMORY,
            Some(DeclineReason::WrappersRemoved) => KR_DECLINE_WRAPPERS_REMOVED,
            Some(DeclineReason::CopiesInFlight) => KR_DECLINE_COPIES_IN_FLIGHT,
        }
    }
}

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
            decline_reason: o.decline.into(),
            restore_failures: o.restore_failures,
        }
    }
}

impl kr_log_level_t {
    pub(crate) fn from_level(level: log::Level) -> Self {
        match level {
            log::Level::Error => kr_log_level_t::KR_LOG_ERROR,
            log::Level::Warn => kr_log_level_t::KR_LOG_WARN,
            log::Level::Info => kr_log_level_t::KR_LOG_INFO,
            log::Level::Debug => kr_log_level_t::KR_LOG_DEBUG,
            log::Level::Trace => kr_log_level_t::KR_LOG_TRACE,
        }
    }

    /// The filter for a level received from C; values past TRACE clamp to
    /// TRACE and 0 (or below ERROR) turns logging off.
    pub(crate) fn filter_from_arg(level: kr_log_level_arg) -> log::LevelFilter {
        match level {
            0 => log::LevelFilter::Off,
            1 => log::LevelFilter::Error,
            2 => log::LevelFilter::Warn,
            3 => log::LevelFilter::Info,
            4 => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        }
    }
}

impl From<crate::memory_snapshot::storage::StoragePolicy> for kr_storage_policy_t {
    fn from(policy: crate::memory_snapshot::storage::StoragePolicy) -> Self {
        use crate::memory_snapshot::storage::StoragePolicy::*;
        match policy {
            Auto => kr_storage_policy_t::KR_STORAGE_AUTO,
            Device => kr_storage_policy_t::KR_STORAGE_DEVICE,
            Pinned => kr_storage_policy_t::KR_STORAGE_PINNED,
            Pageable => kr_storage_policy_t::KR_STORAGE_PAGEABLE,
            Baseline => kr_storage_policy_t::KR_STORAGE_BASELINE,
        }
    }
}
