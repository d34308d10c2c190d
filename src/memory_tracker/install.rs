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

use super::TRACKER;
#[cfg(hsa_vmem)]
use crate::hsa::entries::{vmem, AsyncCopyOnEngineFn};
use crate::hsa::entries::{
    AmdEntries, AsyncCopyFn, AsyncCopyRectFn, CoreEntries, ExecutableDestroyFn, MemoryAllocateFn,
    MemoryFreeFn, PoolAllocateFn, PoolFreeFn,
};
use crate::hsa::tables::{self, TableError};
use crate::hsa::{AmdExtTable, CoreApiTable};
use crate::memory_tracker::hooks::{Hooked, Hooks, Placement};
use crate::memory_tracker::process_marker::{self, Owner};
use crate::memory_tracker::{forget_unseen, wrappers};

/// What an installation attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallOutcome {
    /// At least one table received wrappers.
    Installed,
    /// Not the first library instance; nothing touched.
    Skipped,
    /// Every table passed was of a kind already installed, or another copy
    /// of the library installed first in this process; nothing touched.
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
    // One copy per process (see `process_marker`), before anything is touched.
    if let Owner::Other { version } = process_marker::owner() {
        warn!("another copy of kernel-replay (version {version}) installed its wrappers in this process first; this copy installs nothing");
        return InstallOutcome::AlreadyInstalled;
    }
    let _serialised = INSTALL.lock().unwrap_or_else(PoisonError::into_inner);

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
        process_marker::claim();
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
            // SAFETY: as above.
            Some(Placement::TakenOut) => unsafe { hooks.placement_in(table) },
            _ => Placement::Ours,
        }
    };
    match placement {
        Placement::TakenOut => None,
        Placement::Ours | Placement::Layered => Some(Kind::AlreadyInstalled),
    }
}

/// The entries one installation replaces, built entry by entry: each
/// captured entry becomes the next pointer of our wrapper, unless the table
/// holds our own wrapper there (it must never chain to itself): then the
/// previous installation's next pointer is kept.
struct Chain {
    hooked: [Hooked; MAX_HOOKED],
    chained_to: [usize; MAX_HOOKED],
    used: usize,
    /// A required entry could not be chained.
    refused: bool,
}

/// Most entries of one table the library replaces.
const MAX_HOOKED: usize = 12;

impl Chain {
    fn new() -> Self {
        Chain {
            hooked: [Hooked {
                offset: 0,
                wrapper: 0,
            }; MAX_HOOKED],
            chained_to: [0; MAX_HOOKED],
            used: 0,
            refused: false,
        }
    }

    /// Chains one entry the table has: returns the next pointer our wrapper
    /// calls, or `None` (the entry refuses the installation).
    fn link<F: Copy>(
        &mut self,
        found: F,
        offset: usize,
        wrapper: usize,
        previous: Option<F>,
        address: fn(F) -> usize,
    ) -> Option<F> {
        let next = if address(found) != wrapper {
            Some(found)
        } else {
            previous
        };
        match (next, self.used < MAX_HOOKED) {
            (Some(next), true) => {
                self.hooked[self.used] = Hooked { offset, wrapper };
                self.chained_to[self.used] = address(next);
                self.used += 1;
                Some(next)
            }
            _ => {
                self.refused = true;
                None
            }
        }
    }

    /// Chains a required entry (the table has it: validated).
    fn required<F: Copy>(
        &mut self,
        found: F,
        offset: usize,
        wrapper: usize,
        previous: Option<F>,
        address: fn(F) -> usize,
    ) -> F {
        self.link(found, offset, wrapper, previous, address)
            .unwrap_or(found)
    }

    /// Chains an entry the table may lack (then nothing is wrapped).
    fn optional<F: Copy>(
        &mut self,
        found: Option<F>,
        offset: usize,
        wrapper: usize,
        previous: Option<F>,
        address: fn(F) -> usize,
    ) -> Option<F> {
        self.link(found?, offset, wrapper, previous, address)
    }

    fn hooked(&self) -> &[Hooked] {
        &self.hooked[..self.used]
    }

    fn chained_to(&self) -> &[usize] {
        &self.chained_to[..self.used]
    }
}

/// Records the installation, drops what a re-installation can no longer
/// trust, and writes our wrappers into the table.
///
/// # Safety
/// `table` passed `tables::validate`; every hooked offset is an entry the
/// table has (an entry the capture read from it).
unsafe fn put_in<E>(
    hooks: &Hooks<E>,
    table: *mut u8,
    entries: E,
    chain: &Chain,
    reinstall: bool,
) -> Kind {
    if chain.refused {
        warn!("the table holds this library's wrapper and nothing to chain it to; not installed");
        return Kind::Refused;
    }
    if !hooks.record(table, entries, chain.hooked(), chain.chained_to()) {
        warn!("no host memory to record the installation; not installed");
        return Kind::Refused;
    }
    if reinstall {
        forget_unseen(&TRACKER);
    }
    for hooked in chain.hooked() {
        // SAFETY: the caller's promise; the entries are recorded first, so
        // the wrappers never run without a next pointer. A tool's OnLoad may
        // patch the runtime's dispatch table.
        unsafe {
            table
                .add(hooked.offset)
                .cast::<usize>()
                .write(hooked.wrapper)
        };
    }
    if reinstall {
        Kind::Reinstalled
    } else {
        Kind::Installed
    }
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_core(table: *mut CoreApiTable) -> Kind {
    let hooks = &TRACKER.core_hooks;
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
    let mut chain = Chain::new();
    entries.memory_allocate = chain.required(
        entries.memory_allocate,
        offset_of!(CoreApiTable, hsa_memory_allocate_fn),
        wrappers::memory_allocate as MemoryAllocateFn as usize,
        previous.map(|p| p.memory_allocate),
        |f| f as usize,
    );
    entries.memory_free = chain.required(
        entries.memory_free,
        offset_of!(CoreApiTable, hsa_memory_free_fn),
        wrappers::memory_free as MemoryFreeFn as usize,
        previous.map(|p| p.memory_free),
        |f| f as usize,
    );
    // The destroy wrapper goes in only where the table has the entry; with
    // it, the executable registry can vouch for module variables.
    entries.optional.executable_destroy = chain.optional(
        entries.optional.executable_destroy,
        offset_of!(CoreApiTable, hsa_executable_destroy_fn),
        wrappers::executable_destroy as ExecutableDestroyFn as usize,
        previous.and_then(|p| p.optional.executable_destroy),
        |f| f as usize,
    );
    let tracks_destroys = entries.optional.executable_destroy.is_some();
    // SAFETY: validated; every hooked entry was captured from the table.
    let kind = unsafe { put_in(hooks, raw, entries, &chain, previous.is_some()) };
    if tracks_destroys && matches!(kind, Kind::Installed | Kind::Reinstalled) {
        TRACKER.executables.start_tracking_destroys();
    }
    kind
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_amd(table: *mut AmdExtTable) -> Kind {
    let hooks = &TRACKER.amd_hooks;
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
    let mut chain = Chain::new();
    entries.pool_allocate = chain.required(
        entries.pool_allocate,
        offset_of!(AmdExtTable, hsa_amd_memory_pool_allocate_fn),
        wrappers::pool_allocate as PoolAllocateFn as usize,
        previous.map(|p| p.pool_allocate),
        |f| f as usize,
    );
    entries.pool_free = chain.required(
        entries.pool_free,
        offset_of!(AmdExtTable, hsa_amd_memory_pool_free_fn),
        wrappers::pool_free as PoolFreeFn as usize,
        previous.map(|p| p.pool_free),
        |f| f as usize,
    );
    // The async-copy fence, where the table has the entries.
    let optional = &mut entries.optional;
    let before = previous.map(|p| p.optional);
    optional.async_copy = chain.optional(
        optional.async_copy,
        offset_of!(AmdExtTable, hsa_amd_memory_async_copy_fn),
        wrappers::async_copy as AsyncCopyFn as usize,
        before.and_then(|p| p.async_copy),
        |f| f as usize,
    );
    optional.async_copy_rect = chain.optional(
        optional.async_copy_rect,
        offset_of!(AmdExtTable, hsa_amd_memory_async_copy_rect_fn),
        wrappers::async_copy_rect as AsyncCopyRectFn as usize,
        before.and_then(|p| p.async_copy_rect),
        |f| f as usize,
    );
    #[cfg(hsa_vmem)]
    {
        optional.async_copy_on_engine = chain.optional(
            optional.async_copy_on_engine,
            offset_of!(AmdExtTable, hsa_amd_memory_async_copy_on_engine_fn),
            wrappers::async_copy_on_engine as AsyncCopyOnEngineFn as usize,
            before.and_then(|p| p.async_copy_on_engine),
            |f| f as usize,
        );
        // Virtual memory: mappings become tracked regions.
        if let Some(vmem) = optional.vmem.as_mut() {
            let was = before.and_then(|p| p.vmem);
            let linked = (
                chain.link(
                    vmem.handle_create,
                    offset_of!(AmdExtTable, hsa_amd_vmem_handle_create_fn),
                    wrappers::vmem_handle_create as vmem::HandleCreateFn as usize,
                    was.map(|p| p.handle_create),
                    |f| f as usize,
                ),
                chain.link(
                    vmem.map,
                    offset_of!(AmdExtTable, hsa_amd_vmem_map_fn),
                    wrappers::vmem_map as vmem::MapFn as usize,
                    was.map(|p| p.map),
                    |f| f as usize,
                ),
                chain.link(
                    vmem.unmap,
                    offset_of!(AmdExtTable, hsa_amd_vmem_unmap_fn),
                    wrappers::vmem_unmap as vmem::UnmapFn as usize,
                    was.map(|p| p.unmap),
                    |f| f as usize,
                ),
                chain.link(
                    vmem.set_access,
                    offset_of!(AmdExtTable, hsa_amd_vmem_set_access_fn),
                    wrappers::vmem_set_access as vmem::SetAccessFn as usize,
                    was.map(|p| p.set_access),
                    |f| f as usize,
                ),
            );
            if let (Some(create), Some(map), Some(unmap), Some(set_access)) = linked {
                vmem.handle_create = create;
                vmem.map = map;
                vmem.unmap = unmap;
                vmem.set_access = set_access;
            }
        }
    }
    // SAFETY: validated; every hooked entry was captured from the table.
    unsafe { put_in(hooks, raw, entries, &chain, previous.is_some()) }
}
