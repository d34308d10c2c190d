//! Installing the wrappers (the SDK's `memory_tracker_init`).
//!
//! Each table kind is installed at most once per process. A second library
//! instance, or a second call, must leave the tables alone: capturing a table
//! that already holds our wrapper would make the wrapper its own next pointer
//! and recurse forever on the first allocation.

use std::sync::{Mutex, PoisonError};

use log::{info, warn};

use crate::context::GLOBAL;
use crate::hsa::entries::{
    AmdEntries, CoreEntries, ExecutableDestroyFn, MemoryAllocateFn, MemoryFreeFn, PoolAllocateFn,
    PoolFreeFn,
};
use crate::hsa::tables::{self, TableError};
use crate::hsa::{AmdExtTable, CoreApiTable};
use crate::memory_tracker::wrappers;

/// What an installation attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallOutcome {
    /// At least one table received wrappers.
    Installed,
    /// Not the first library instance; nothing touched.
    Skipped,
    /// Every table passed was of a kind already installed; nothing touched.
    AlreadyInstalled,
    /// Both tables NULL.
    InvalidArgument,
    /// A table failed the version/size guard; nothing installed.
    Incompatible(TableError),
}

/// Serialises installs, so two threads cannot both capture the same table.
static INSTALL: Mutex<()> = Mutex::new(());

/// Validates both tables, then installs into each kind not installed yet.
///
/// # Safety
/// Each non-NULL pointer must be a table as ROCr hands it to a tool: readable
/// and writable for `version.minor_id` bytes, and not concurrently patched
/// by anyone else.
pub unsafe fn install(
    core: *mut CoreApiTable,
    amd_ext: *mut AmdExtTable,
    lib_instance: u64,
) -> InstallOutcome {
    if core.is_null() && amd_ext.is_null() {
        return InstallOutcome::InvalidArgument;
    }
    if lib_instance > 0 {
        info!("library instance {lib_instance}: wrappers are installed only by instance 0");
        return InstallOutcome::Skipped;
    }
    let _serialised = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);
    // Settings from the environment are read now, not at the first snapshot:
    // reading them allocates, and a snapshot may run under memory pressure.
    GLOBAL.storage.policy.get();
    GLOBAL.batch_copies();

    // Every table is checked before anything is changed.
    let checks = [
        // SAFETY: non-NULL tables are the caller's promise (see above).
        (!core.is_null()).then(|| unsafe { tables::validate(core.cast_const()) }),
        // SAFETY: as above.
        (!amd_ext.is_null()).then(|| unsafe { tables::validate(amd_ext.cast_const()) }),
    ];
    for check in checks.into_iter().flatten() {
        if let Err(error) = check {
            warn!("incompatible HSA API table, nothing installed: {error}");
            return InstallOutcome::Incompatible(error);
        }
    }

    // SAFETY: both tables (where non-NULL) passed validation.
    let installed_core = !core.is_null() && unsafe { install_core(core) };
    // SAFETY: as above.
    let installed_amd = !amd_ext.is_null() && unsafe { install_amd(amd_ext) };
    if installed_core || installed_amd {
        info!(
            "allocation wrappers installed (core table: {installed_core}, AMD table: {installed_amd})"
        );
        InstallOutcome::Installed
    } else {
        InstallOutcome::AlreadyInstalled
    }
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_core(table: *mut CoreApiTable) -> bool {
    if GLOBAL.core().is_some() {
        return false;
    }
    // SAFETY: validated by the caller.
    let Some(entries) = (unsafe { CoreEntries::capture(table) }) else {
        return false;
    };
    let ours = (
        wrappers::memory_allocate as MemoryAllocateFn as usize,
        wrappers::memory_free as MemoryFreeFn as usize,
    );
    if entries.memory_allocate as usize == ours.0 || entries.memory_free as usize == ours.1 {
        warn!("CoreApiTable already holds this library's wrapper; not chaining it to itself");
        return false;
    }
    if !GLOBAL.set_core(entries) {
        return false;
    }
    // The destroy wrapper goes in only where the table has the entry; with
    // it, the executable registry can vouch for module variables.
    let destroy = entries
        .optional
        .executable_destroy
        .filter(|&f| f as usize != wrappers::executable_destroy as ExecutableDestroyFn as usize)
        .map(|_| wrappers::executable_destroy as ExecutableDestroyFn);
    // SAFETY: validated by the caller; the entries are captured first, so the
    // wrappers never run without a next pointer.
    unsafe {
        CoreEntries::install(
            table,
            wrappers::memory_allocate,
            wrappers::memory_free,
            destroy,
        )
    };
    if destroy.is_some() {
        GLOBAL.executables.start_tracking_destroys();
    }
    true
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_amd(table: *mut AmdExtTable) -> bool {
    if GLOBAL.amd().is_some() {
        return false;
    }
    // SAFETY: validated by the caller.
    let Some(entries) = (unsafe { AmdEntries::capture(table) }) else {
        return false;
    };
    let ours = (
        wrappers::pool_allocate as PoolAllocateFn as usize,
        wrappers::pool_free as PoolFreeFn as usize,
    );
    if entries.pool_allocate as usize == ours.0 || entries.pool_free as usize == ours.1 {
        warn!("AmdExtTable already holds this library's wrapper; not chaining it to itself");
        return false;
    }
    if !GLOBAL.set_amd(entries) {
        return false;
    }
    // SAFETY: as in install_core.
    unsafe { AmdEntries::install(table, wrappers::pool_allocate, wrappers::pool_free) };
    true
}
