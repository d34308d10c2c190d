//! Where the wrappers are: the table each kind was installed into, the
//! entries captured from it (what the wrappers chain to), and whether the
//! wrappers are still in the table's call path.
//!
//! A tool may take the wrappers out again: rocprofiler-sdk's re-registration
//! writes the runtime's original entries back into the tables and then calls
//! `memory_tracker_init` once more. While they are out, allocations go
//! unrecorded and, worse, frees go unretired, so the inventory can list
//! memory the runtime has released. A snapshot therefore checks first; a
//! re-install captures what the table holds now and drops what was recorded
//! before, since it can no longer be trusted.
//!
//! A table entry the library replaced reads, later, as one of:
//! - **our wrapper**: in place;
//! - **what we wrapped** (an entry captured as the wrapper's next, at this or
//!   an earlier install): taken out, since calls now skip the wrapper;
//! - **a function of the runtime itself** (it lives in the shared object
//!   the table lives in, and that is not this library's): taken out, as
//!   when every tool's wrappers are replaced by the runtime's originals;
//! - **anything else**: another tool's wrapper layered over ours (the SDK
//!   puts its API-tracing wrappers over the entries it found, ours among
//!   them), so the call still reaches ours: in place.
//!
//! Captured entries are replaced, never freed: a wrapper running on another
//! thread may still be reading the old ones.

use crate::support::sync::Recover;
use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One table entry the library replaces: its offset in the table and the
/// wrapper it puts there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hooked {
    pub offset: usize,
    pub wrapper: usize,
}

/// The installation of one table kind (`E`: the entries captured from it).
pub struct Hooks<E: 'static> {
    entries: AtomicPtr<E>,
    table: AtomicPtr<u8>,
    state: Mutex<HookState<E>>,
}

// SAFETY: the raw pointers in the state are leaked, immutable entries,
// shared read-only by design; everything else is behind the mutex.
unsafe impl<E: Sync> Send for HookState<E> {}

struct HookState<E> {
    /// The entries replaced in `table`.
    hooked: Vec<Hooked>,
    /// Every value captured as a wrapper's next, at any install.
    wrapped: Vec<usize>,
    /// Entries captured by earlier installs: kept for the process (a wrapper
    /// may still read them), and listed so they stay reachable.
    superseded: Vec<*mut E>,
}

/// What a table's replaced entries say now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Every replaced entry holds our wrapper.
    Ours,
    /// At least one is another tool's wrapper over ours; none was taken out.
    Layered,
    /// At least one entry no longer reaches our wrapper.
    TakenOut,
}

impl<E: 'static> Hooks<E> {
    pub const fn new() -> Self {
        Hooks {
            entries: AtomicPtr::new(ptr::null_mut()),
            table: AtomicPtr::new(ptr::null_mut()),
            state: Mutex::new(HookState {
                hooked: Vec::new(),
                wrapped: Vec::new(),
                superseded: Vec::new(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, HookState<E>> {
        self.state.locked()
    }

    /// The captured entries, once installed. On the allocation path: one
    /// atomic load.
    #[inline(always)]
    pub fn entries(&self) -> Option<&'static E> {
        let entries = self.entries.load(Ordering::Acquire);
        // SAFETY: only ever set from a leaked Box (never freed), or null.
        unsafe { entries.as_ref() }
    }

    /// The table the wrappers were last installed into, if any.
    pub fn table(&self) -> Option<*mut u8> {
        let table = self.table.load(Ordering::Acquire);
        (!table.is_null()).then_some(table)
    }

    /// Records an installation into `table`: the entries captured from it
    /// (leaked: readers may outlive a later re-install), the entries replaced
    /// and the values their wrappers chain to. False, changing nothing, if
    /// there is no memory for the record.
    pub fn record(
        &self,
        table: *mut u8,
        entries: E,
        hooked: &[Hooked],
        chained_to: &[usize],
    ) -> bool {
        let mut state = self.state();
        if state.hooked.try_reserve(hooked.len()).is_err()
            || state.wrapped.try_reserve(chained_to.len()).is_err()
            || state.superseded.try_reserve(1).is_err()
        {
            return false;
        }
        let Some(leaked) = crate::support::fallible::leak(entries) else {
            return false;
        };
        let previous = self.entries.load(Ordering::Acquire);
        if !previous.is_null() {
            state.superseded.push(previous);
        }
        state.hooked.clear();
        state.hooked.extend_from_slice(hooked);
        for &value in chained_to {
            if !state.wrapped.contains(&value) {
                state.wrapped.push(value);
            }
        }
        self.entries.store(leaked, Ordering::Release);
        self.table.store(table, Ordering::Release);
        true
    }

    /// Where our wrappers stand in the installed table (`None`: never
    /// installed).
    ///
    /// # Safety
    /// The installed table must still be readable (ROCr's and the SDK's
    /// tables live as long as the process).
    pub unsafe fn placement(&self) -> Option<Placement> {
        let table = self.table()?;
        // SAFETY: forwarded.
        Some(unsafe { self.placement_in(table) })
    }

    /// Where our wrappers stand in `table` (which may be another table of
    /// the same kind): judged by the entries replaced at the last install.
    ///
    /// # Safety
    /// `table` must be readable for every replaced entry's offset.
    pub unsafe fn placement_in(&self, table: *mut u8) -> Placement {
        let state = self.state();
        let mut placement = Placement::Ours;
        for hooked in &state.hooked {
            // SAFETY: the caller's promise; entries are pointer-aligned. The
            // owning tool may write the table at any time, hence volatile.
            let value = unsafe { ptr::read_volatile(table.add(hooked.offset).cast::<usize>()) };
            if value == hooked.wrapper {
                continue;
            }
            if state.wrapped.contains(&value) || runtime_function(table, value, hooked.wrapper) {
                return Placement::TakenOut;
            }
            placement = Placement::Layered;
        }
        placement
    }
}

impl<E: 'static> Default for Hooks<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// glibc's `Dl_info`. (Not part of the C header: `cbindgen:ignore`.)
///
/// cbindgen:ignore
#[repr(C)]
struct DlInfo {
    fname: *const c_char,
    fbase: *mut c_void,
    sname: *const c_char,
    saddr: *mut c_void,
}

// glibc's dladdr, for `object_of`; not part of the C header (cbindgen skips
// an item documented exactly "cbindgen:ignore").
#[allow(unused_doc_comments)]
/// cbindgen:ignore
extern "C" {
    fn dladdr(address: *const c_void, info: *mut DlInfo) -> c_int;
}

/// The base of the loaded object holding `address`, if it is in one.
fn object_of(address: usize) -> Option<usize> {
    let mut info = DlInfo {
        fname: ptr::null(),
        fbase: ptr::null_mut(),
        sname: ptr::null(),
        saddr: ptr::null_mut(),
    };
    // SAFETY: dladdr only looks the address up; `info` is writable.
    let found = unsafe { dladdr(address as *const c_void, &mut info) } != 0;
    (found && !info.fbase.is_null()).then_some(info.fbase as usize)
}

/// Whether `function` belongs to the runtime that owns `table`: it lives in
/// the loaded object the table lives in, and that object is not the one
/// holding our wrapper (a program linking runtime and library statically has
/// them in one object, and then nothing can be told this way).
fn runtime_function(table: *mut u8, function: usize, our_wrapper: usize) -> bool {
    match (object_of(table as usize), object_of(function)) {
        (Some(runtime), Some(owner)) => runtime == owner && object_of(our_wrapper) != Some(runtime),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function of this test binary (where the library is linked).
    fn own() {}

    fn ours() -> usize {
        own as fn() as usize
    }

    /// Functions of the C library, a shared object of its own.
    fn in_libc() -> (usize, usize) {
        (
            libc::malloc as unsafe extern "C" fn(usize) -> *mut c_void as usize,
            libc::free as unsafe extern "C" fn(*mut c_void) as usize,
        )
    }

    #[test]
    fn object_of_finds_the_loaded_object_of_an_address() {
        let (malloc, free) = in_libc();
        let libc_base = object_of(malloc).expect("libc is a loaded object");
        assert_eq!(object_of(free), Some(libc_base));
        let own = object_of(ours()).expect("the test binary is one");
        assert_ne!(own, libc_base);
        assert_eq!(object_of(0), None, "no object holds address 0");
    }

    #[test]
    fn a_runtime_function_lives_in_the_tables_object_and_not_in_ours() {
        let (malloc, free) = in_libc();
        let ours = ours();
        // The "table" in libc: a libc function found in it is the runtime's.
        let table = malloc as *mut u8;
        assert!(runtime_function(table, free, ours));
        // A function of another object (another tool's wrapper) is not.
        assert!(!runtime_function(table, ours, ours));
        // Runtime and library in one object: nothing can be told.
        assert!(!runtime_function(table, free, malloc));
        // An address in no object.
        assert!(!runtime_function(table, 0, ours));
    }

    #[test]
    fn a_reinstall_keeps_the_earlier_entries_listed() {
        let hooks: Hooks<u64> = Hooks::new();
        let mut table = [0usize; 2];
        let table = table.as_mut_ptr().cast::<u8>();
        let hooked = [Hooked {
            offset: 0,
            wrapper: 1,
        }];
        assert!(hooks.record(table, 7, &hooked, &[10]));
        assert!(hooks.state().superseded.is_empty(), "nothing replaced yet");
        let first = hooks.entries.load(Ordering::Acquire);
        assert!(hooks.record(table, 8, &hooked, &[10, 11]));
        assert_eq!(hooks.state().superseded, [first]);
        assert_eq!(hooks.entries(), Some(&8));
        assert_eq!(hooks.state().wrapped, [10, 11], "each value once");
    }
}
