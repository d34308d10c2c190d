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
    /// Every table passed belongs to a kind already installed; nothing changed.
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
    /// No executable iterator set (`kr_set_executable_iterator`).
    KR_DECLINE_NO_EXECUTABLE_ITERATOR = 3,
    /// The executable iterator, a symbol walk or a symbol query failed.
    KR_DECLINE_SYMBOL_ENUMERATION = 4,
    /// The snapshot's bookkeeping could not be allocated.
    KR_DECLINE_METADATA_MEMORY = 5,
    /// A host copy could not be allocated or would pass the host budget.
    KR_DECLINE_HOST_MEMORY = 6,
    /// A device-to-host copy failed.
    KR_DECLINE_COPY_FAILED = 7,
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
