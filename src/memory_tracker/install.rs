//! Installing the wrappers (the SDK's `memory_tracker_init`), and installing
//! them again after a tool took them out.
//!
//! A table kind is installed into one table at a time. A repeated call with
//! a table that holds our wrappers (or another tool's wrapper layered over
//! them) leaves it alone: capturing an entry that leads back to our wrapper
//! would make the wrapper its own next pointer and recurse forever on the
//! first allocation. A call with a table our wrappers were taken out of (the
//! SDK's re-registration writes the runtime's original entries back first)
//! installs again, chaining to what the table holds now, and drops what the
//! inventory and the executable registry recorded before: frees and unloads
//! made while the wrappers were out were not seen. See `hooks.rs`.

use std::sync::{Mutex, PoisonError};

use log::{info, warn};

use std::mem::offset_of;

use crate::context::GLOBAL;
use crate::hsa::entries::{
    AmdEntries, CoreEntries, ExecutableDestroyFn, MemoryAllocateFn, MemoryFreeFn, PoolAllocateFn,
    PoolFreeFn,
};
use crate::hsa::tables::{self, TableError};
use crate::hsa::{AmdExtTable, CoreApiTable};
use crate::memory_tracker::hooks::{Hooked, Hooks, Placement};
use crate::memory_tracker::{forget_unseen, wrappers};

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
    let core_outcome = (!core.is_null()).then(|| unsafe { install_core(core) });
    // SAFETY: as above.
    let amd_outcome = (!amd_ext.is_null()).then(|| unsafe { install_amd(amd_ext) });
    let outcomes = [core_outcome, amd_outcome];
    let installed = |kind| outcomes.contains(&Some(kind));
    if installed(Kind::Reinstalled) {
        warn!("allocation wrappers installed again: they had been taken out of the HSA tables");
    }
    if installed(Kind::Installed) || installed(Kind::Reinstalled) {
        info!("allocation wrappers installed (core table: {core_outcome:?}, AMD table: {amd_outcome:?})");
        InstallOutcome::Installed
    } else {
        InstallOutcome::AlreadyInstalled
    }
}

/// What happened to one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Installed,
    /// Installed after our wrappers had been taken out.
    Reinstalled,
    /// Left alone: it (or the table installed before) still leads to ours.
    AlreadyInstalled,
    /// Left alone: an entry it needs cannot be chained (see the log).
    Refused,
}

/// Whether a table of a kind may receive the wrappers, given where the
/// previous installation (if any) stands.
///
/// # Safety
/// `table` passed `tables::validate`; a previously installed table is still
/// readable.
unsafe fn may_install<E>(hooks: &Hooks<E>, table: *mut u8) -> Option<Kind> {
    let installed_into = hooks.table()?;
    let placement = if installed_into == table {
        // SAFETY: the caller's promise.
        unsafe { hooks.placement_in(table) }
    } else {
        // Another table of the same kind: only once ours are out of the
        // first (one installation per kind at a time).
        // SAFETY: the caller's promise.
        match unsafe { hooks.placement() } {
            Some(Placement::TakenOut) => unsafe { hooks.placement_in(table) },
            _ => Placement::Ours,
        }
    };
    match placement {
        Placement::TakenOut => None,
        Placement::Ours | Placement::Layered => Some(Kind::AlreadyInstalled),
    }
}

/// The next pointer of one wrapped entry: what the table holds, unless that
/// is our own wrapper, which must never chain to itself; then what the
/// previous installation chained to.
fn next_of<F: Copy>(
    found: F,
    ours: usize,
    previous: Option<F>,
    as_addr: fn(F) -> usize,
) -> Option<F> {
    if as_addr(found) != ours {
        return Some(found);
    }
    previous
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_core(table: *mut CoreApiTable) -> Kind {
    let hooks = &GLOBAL.core_hooks;
    let raw = table.cast::<u8>();
    // SAFETY: forwarded.
    if let Some(kind) = unsafe { may_install(hooks, raw) } {
        return kind;
    }
    let previous = hooks.entries().copied();
    // SAFETY: validated by the caller.
    let Some(mut entries) = (unsafe { CoreEntries::capture(table) }) else {
        return Kind::Refused;
    };
    let ours_allocate = wrappers::memory_allocate as MemoryAllocateFn as usize;
    let ours_free = wrappers::memory_free as MemoryFreeFn as usize;
    let ours_destroy = wrappers::executable_destroy as ExecutableDestroyFn as usize;
    let chained = (
        next_of(
            entries.memory_allocate,
            ours_allocate,
            previous.map(|p| p.memory_allocate),
            |f| f as usize,
        ),
        next_of(
            entries.memory_free,
            ours_free,
            previous.map(|p| p.memory_free),
            |f| f as usize,
        ),
    );
    let (Some(allocate), Some(free)) = chained else {
        warn!("CoreApiTable already holds this library's wrapper and nothing to chain it to; not installed");
        return Kind::Refused;
    };
    entries.memory_allocate = allocate;
    entries.memory_free = free;
    // The destroy wrapper goes in only where the table has the entry; with
    // it, the executable registry can vouch for module variables.
    entries.optional.executable_destroy = entries.optional.executable_destroy.and_then(|found| {
        next_of(
            found,
            ours_destroy,
            previous.and_then(|p| p.optional.executable_destroy),
            |f| f as usize,
        )
    });
    let destroy = entries.optional.executable_destroy;
    let hooked = [
        Hooked {
            offset: offset_of!(CoreApiTable, hsa_memory_allocate_fn),
            wrapper: ours_allocate,
        },
        Hooked {
            offset: offset_of!(CoreApiTable, hsa_memory_free_fn),
            wrapper: ours_free,
        },
        Hooked {
            offset: offset_of!(CoreApiTable, hsa_executable_destroy_fn),
            wrapper: ours_destroy,
        },
    ];
    let chained_to = [
        allocate as usize,
        free as usize,
        destroy.map_or(0, |f| f as usize),
    ];
    let used = if destroy.is_some() { 3 } else { 2 };
    if !hooks.record(raw, entries, &hooked[..used], &chained_to[..used]) {
        warn!("no host memory to record the core table's installation; not installed");
        return Kind::Refused;
    }
    if previous.is_some() {
        forget_unseen(&GLOBAL);
    }
    // SAFETY: validated by the caller; the entries are recorded first, so
    // the wrappers never run without a next pointer.
    unsafe {
        CoreEntries::install(
            table,
            wrappers::memory_allocate,
            wrappers::memory_free,
            destroy.map(|_| wrappers::executable_destroy as ExecutableDestroyFn),
        )
    };
    if destroy.is_some() {
        GLOBAL.executables.start_tracking_destroys();
    }
    if previous.is_some() {
        Kind::Reinstalled
    } else {
        Kind::Installed
    }
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_amd(table: *mut AmdExtTable) -> Kind {
    let hooks = &GLOBAL.amd_hooks;
    let raw = table.cast::<u8>();
    // SAFETY: forwarded.
    if let Some(kind) = unsafe { may_install(hooks, raw) } {
        return kind;
    }
    let previous = hooks.entries().copied();
    // SAFETY: validated by the caller.
    let Some(mut entries) = (unsafe { AmdEntries::capture(table) }) else {
        return Kind::Refused;
    };
    let ours_allocate = wrappers::pool_allocate as PoolAllocateFn as usize;
    let ours_free = wrappers::pool_free as PoolFreeFn as usize;
    let chained = (
        next_of(
            entries.pool_allocate,
            ours_allocate,
            previous.map(|p| p.pool_allocate),
            |f| f as usize,
        ),
        next_of(
            entries.pool_free,
            ours_free,
            previous.map(|p| p.pool_free),
            |f| f as usize,
        ),
    );
    let (Some(allocate), Some(free)) = chained else {
        warn!("AmdExtTable already holds this library's wrapper and nothing to chain it to; not installed");
        return Kind::Refused;
    };
    entries.pool_allocate = allocate;
    entries.pool_free = free;
    let hooked = [
        Hooked {
            offset: offset_of!(AmdExtTable, hsa_amd_memory_pool_allocate_fn),
            wrapper: ours_allocate,
        },
        Hooked {
            offset: offset_of!(AmdExtTable, hsa_amd_memory_pool_free_fn),
            wrapper: ours_free,
        },
    ];
    if !hooks.record(raw, entries, &hooked, &[allocate as usize, free as usize]) {
        warn!("no host memory to record the AMD table's installation; not installed");
        return Kind::Refused;
    }
    if previous.is_some() {
        forget_unseen(&GLOBAL);
    }
    // SAFETY: as in install_core.
    unsafe { AmdEntries::install(table, wrappers::pool_allocate, wrappers::pool_free) };
    if previous.is_some() {
        Kind::Reinstalled
    } else {
        Kind::Installed
    }
}
