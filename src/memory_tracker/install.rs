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

use crate::support::sync::Recover;
use std::mem::offset_of;
use std::sync::Mutex;

use log::{info, warn};

use super::TRACKER;
use crate::hsa::entries::{
    capture, drop_incomplete_groups, entry_at, set_entry_at, AmdEntries, ApiTable, CoreEntries,
    Role,
};
use crate::hsa::tables::{self, TableError};
use crate::hsa::{AmdExtTable, CoreApiTable};
use crate::memory_tracker::hooks::{Hooked, Hooks, Placement};
use crate::memory_tracker::process_marker::{self, Owner};
use crate::memory_tracker::{revalidate, wrappers};

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
    let _serialised = INSTALL.locked();

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

/// The tables as our wrappers fill them: each entry the list marks `WRAP`
/// holds its wrapper (`wrappers::<name>`, which must have exactly the
/// field's type), every other entry `None`.
macro_rules! wrapper_tables {
    ($($table:ident $field:ident $name:ident $role:ident $need:ident;)*) => {
        fn wrapper_tables() -> (CoreApiTable, AmdExtTable) {
            let mut core = CoreApiTable::default();
            let mut amd = AmdExtTable::default();
            $(wrapper_tables!(@put $role $table core amd $field $name);)*
            (core, amd)
        }
    };
    (@put wrap core $core:ident $amd:ident $field:ident $name:ident) => {
        $core.$field = Some(wrappers::$name);
    };
    (@put wrap amd $core:ident $amd:ident $field:ident $name:ident) => {
        $amd.$field = Some(wrappers::$name);
    };
    (@put call $table:ident $core:ident $amd:ident $field:ident $name:ident) => {};
}

kernel_replay_hsa_sys::library_entries!(wrapper_tables);

/// The entries one installation replaces: each wrapped entry of the table
/// gets our wrapper, and the captured copy the entry it chains to: what the
/// table held, unless the table holds our own wrapper there (it must never
/// chain to itself): then the previous installation's next entry.
struct Chain<T> {
    /// The runtime's entries, each wrapped one replaced by its next.
    entries: T,
    hooked: Vec<Hooked>,
    chained_to: Vec<usize>,
    /// An entry holds our wrapper with nothing to chain it to.
    refused: bool,
}

impl<T: ApiTable> Chain<T> {
    /// Plans the installation into a table whose entries were captured.
    fn plan(mut entries: T, ours: &T, previous: Option<&T>) -> Option<Self> {
        let mut refused = false;
        for entry in T::library_entries().filter(|e| e.role == Role::Wrap) {
            let found = entry_at(&entries, entry.offset);
            let wrapper = entry_at(ours, entry.offset);
            let next = match previous {
                _ if found != wrapper => found,
                Some(previous) => entry_at(previous, entry.offset),
                None => 0,
            };
            refused |= found != 0 && next == 0;
            // SAFETY: `next` is 0 or an entry of this field, from this table
            // or the one the previous installation captured.
            unsafe { set_entry_at(&mut entries, entry.offset, next) };
        }
        // A group the runtime does not carry whole is left alone.
        drop_incomplete_groups(&mut entries);
        let wrapped = T::library_entries()
            .filter(|e| e.role == Role::Wrap && entry_at(&entries, e.offset) != 0);
        let (mut hooked, mut chained_to) = (Vec::new(), Vec::new());
        for entry in wrapped {
            hooked.try_reserve(1).ok()?;
            chained_to.try_reserve(1).ok()?;
            hooked.push(Hooked {
                offset: entry.offset,
                wrapper: entry_at(ours, entry.offset),
            });
            chained_to.push(entry_at(&entries, entry.offset));
        }
        Some(Chain {
            entries,
            hooked,
            chained_to,
            refused,
        })
    }

    fn wraps(&self, offset: usize) -> bool {
        self.hooked.iter().any(|hooked| hooked.offset == offset)
    }
}

/// Records the installation, writes our wrappers into the table and, on a
/// re-installation, re-validates what was recorded before.
///
/// # Safety
/// `table` passed `tables::validate`; every hooked offset is an entry the
/// table has (an entry the capture read from it).
unsafe fn put_in<E, T: ApiTable>(
    hooks: &Hooks<E>,
    table: *mut u8,
    entries: E,
    chain: &Chain<T>,
    reinstall: bool,
) -> Kind {
    if chain.refused {
        warn!("the table holds this library's wrapper and nothing to chain it to; not installed");
        return Kind::Refused;
    }
    if !hooks.record(table, entries, &chain.hooked, &chain.chained_to) {
        warn!("no host memory to record the installation; not installed");
        return Kind::Refused;
    }
    for hooked in &chain.hooked {
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
        // After the wrappers are in: from here on every free is seen, so a
        // record kept below is retired by its free like any other.
        revalidate::revalidate(&TRACKER);
        Kind::Reinstalled
    } else {
        Kind::Installed
    }
}

/// Captures a table and puts the wrappers in.
///
/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_table<E: Copy, T: ApiTable>(
    hooks: &Hooks<E>,
    table: *mut T,
    ours: &T,
    unwrap: fn(&E) -> &T,
    wrap: fn(T) -> E,
) -> (Kind, Option<Chain<T>>) {
    let raw = table.cast::<u8>();
    // SAFETY: forwarded.
    if let Some(kind) = unsafe { may_install(hooks, raw) } {
        return (kind, None);
    }
    let previous = hooks.entries().copied();
    // SAFETY: validated by the caller.
    let captured = unsafe { capture(table.cast_const()) };
    let Some(chain) = Chain::plan(captured, ours, previous.as_ref().map(unwrap)) else {
        warn!("no host memory to plan the installation; not installed");
        return (Kind::Refused, None);
    };
    // SAFETY: validated; every hooked entry is one the table has.
    let kind = unsafe { put_in(hooks, raw, wrap(chain.entries), &chain, previous.is_some()) };
    (kind, Some(chain))
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_core(table: *mut CoreApiTable) -> Kind {
    let (ours, _) = wrapper_tables();
    // SAFETY: forwarded.
    let (kind, chain) =
        unsafe { install_table(&TRACKER.core_hooks, table, &ours, |e| &e.0, CoreEntries) };
    // With the destroy wrapper in, the executable registry can vouch for
    // module variables.
    let tracks_destroys =
        chain.is_some_and(|c| c.wraps(offset_of!(CoreApiTable, hsa_executable_destroy_fn)));
    if tracks_destroys && matches!(kind, Kind::Installed | Kind::Reinstalled) {
        TRACKER.executables.start_tracking_destroys();
    }
    kind
}

/// # Safety
/// `table` passed `tables::validate`.
unsafe fn install_amd(table: *mut AmdExtTable) -> Kind {
    let (_, ours) = wrapper_tables();
    // SAFETY: forwarded.
    unsafe { install_table(&TRACKER.amd_hooks, table, &ours, |e| &e.0, AmdEntries) }.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: usize = offset_of!(CoreApiTable, hsa_memory_free_fn);

    fn table_with_free(address: usize) -> CoreApiTable {
        let mut table = CoreApiTable::default();
        // SAFETY: any address stands in for an entry; the plan never calls it.
        unsafe { set_entry_at(&mut table, FREE, address) };
        table
    }

    #[test]
    fn a_table_holding_our_wrapper_with_nothing_to_chain_to_is_refused() {
        let ours = table_with_free(0x1000);
        // The runtime's own entry: chained to.
        let plan = Chain::plan(table_with_free(0x2000), &ours, None).unwrap();
        assert!(!plan.refused);
        assert_eq!(entry_at(&plan.entries, FREE), 0x2000);
        assert!(plan.wraps(FREE));
        assert!(
            !plan.wraps(offset_of!(CoreApiTable, hsa_executable_destroy_fn)),
            "an entry the table lacks is not wrapped"
        );
        // Our wrapper already there, no earlier installation to say what it
        // chains to: refused (it would chain to itself).
        assert!(
            Chain::plan(table_with_free(0x1000), &ours, None)
                .unwrap()
                .refused
        );
        // Our wrapper there after an installation: what that one chained to.
        let previous = table_with_free(0x3000);
        let plan = Chain::plan(table_with_free(0x1000), &ours, Some(&previous)).unwrap();
        assert!(!plan.refused);
        assert_eq!(entry_at(&plan.entries, FREE), 0x3000);
        // ... unless that was nothing either.
        let empty = CoreApiTable::default();
        assert!(
            Chain::plan(table_with_free(0x1000), &ours, Some(&empty))
                .unwrap()
                .refused
        );
    }
}
