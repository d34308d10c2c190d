//! The runtime entry points the library captured, and what it does with
//! each: both derived from the project's one list of HSA entries
//! (`hsa-sys/hsa_entries.def`, expanded here by `library_entries!`).
//!
//! The captured entries are a copy of the runtime's table as it was at
//! install, typed by the bindings: every entry the library calls is the
//! runtime's own (copies and symbol queries never re-enter the library's
//! wrappers), and every entry it wrapped holds what the wrapper chains to.
//! An entry the runtime lacks (past its table's size, NULL, or one of a
//! group the runtime does not carry whole) reads as `None`.

use std::ffi::c_void;
use std::mem::{offset_of, size_of, MaybeUninit};
use std::ops::Deref;
use std::ptr;

use super::sys::{
    hsa_amd_memory_pool_t, hsa_amd_pointer_info_t, hsa_executable_symbol_info_t,
    hsa_executable_symbol_t, hsa_ven_amd_loader_1_03_pfn_t, ApiTableVersion,
    HSA_AMD_EXT_API_TABLE_MAJOR_VERSION, HSA_CORE_API_TABLE_MAJOR_VERSION,
    HSA_EXTENSION_AMD_LOADER,
};
use super::{
    hsa_executable_t, hsa_status_t, AmdExtTable, CoreApiTable, HSA_STATUS_ERROR_NOT_INITIALIZED,
    HSA_STATUS_SUCCESS,
};

// ---- what the library does with each entry (the list) ------------------------------

/// Which table an entry lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// `CoreApiTable`.
    Core,
    /// `AmdExtTable`.
    Amd,
}

/// What the library does with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Puts its wrapper in (`memory_tracker/wrappers.rs`), chaining to what
    /// the table held.
    Wrap,
    /// Calls the runtime's entry.
    Call,
}

/// Whether the library can do without an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The table guard refuses a table without it.
    Required,
    /// Used when the runtime has it.
    Optional,
    /// Used only if the runtime has every entry of the named group (the
    /// virtual-memory wrappers, the device kernels' entries).
    Group(&'static str),
}

/// One entry of the list that the library wraps or calls.
#[derive(Debug, Clone, Copy)]
pub struct LibraryEntry {
    /// The table it lives in.
    pub table: TableKind,
    /// The field's name in the table struct.
    pub field: &'static str,
    /// Its offset in the table.
    pub offset: usize,
    /// What the library does with it.
    pub role: Role,
    /// Whether the library can do without it.
    pub need: Need,
}

macro_rules! table_struct {
    (core) => {
        CoreApiTable
    };
    (amd) => {
        AmdExtTable
    };
}

macro_rules! define_library_entries {
    ($($table:ident $field:ident $name:ident $role:ident $need:ident;)*) => {
        /// Every entry the library wraps or calls that the headers built
        /// against carry, in the list's order.
        pub const LIBRARY_ENTRIES: &[LibraryEntry] = &[$(
            LibraryEntry {
                table: <table_struct!($table) as ApiTable>::KIND,
                field: stringify!($field),
                offset: offset_of!(table_struct!($table), $field),
                role: define_library_entries!(@role $role),
                need: define_library_entries!(@need $need),
            },
        )*];
    };
    (@role wrap) => { Role::Wrap };
    (@role call) => { Role::Call };
    (@need required) => { Need::Required };
    (@need optional) => { Need::Optional };
    (@need $group:ident) => { Need::Group(stringify!($group)) };
}

kernel_replay_hsa_sys::library_entries!(define_library_entries);

// ---- the tables --------------------------------------------------------------------

/// An HSA API table the library installs into: plain data (integers and
/// nullable function pointers) that starts with its `ApiTableVersion`.
pub trait ApiTable: Copy + Default + 'static {
    /// Which table it is.
    const KIND: TableKind;
    /// The struct's name, for messages.
    const NAME: &'static str;
    /// The major version of the headers built against.
    const MAJOR_VERSION: u32;

    /// The list's entries of this table.
    fn library_entries() -> impl Iterator<Item = &'static LibraryEntry> {
        LIBRARY_ENTRIES.iter().filter(|e| e.table == Self::KIND)
    }
}

impl ApiTable for CoreApiTable {
    const KIND: TableKind = TableKind::Core;
    const NAME: &'static str = "CoreApiTable";
    const MAJOR_VERSION: u32 = HSA_CORE_API_TABLE_MAJOR_VERSION;
}

impl ApiTable for AmdExtTable {
    const KIND: TableKind = TableKind::Amd;
    const NAME: &'static str = "AmdExtTable";
    const MAJOR_VERSION: u32 = HSA_AMD_EXT_API_TABLE_MAJOR_VERSION;
}

/// `version.minor_id`: the table's size as the runtime filled it.
///
/// # Safety
/// `table` points to at least an `ApiTableVersion`.
pub unsafe fn table_size<T: ApiTable>(table: *const T) -> usize {
    // SAFETY: every table starts with its version (the caller's promise).
    unsafe { table.cast::<ApiTableVersion>().read_unaligned() }.minor_id as usize
}

/// The entry at `offset` of a table, as an address (0: none).
pub fn entry_at<T: ApiTable>(table: &T, offset: usize) -> usize {
    debug_assert!(offset + size_of::<usize>() <= size_of::<T>());
    // SAFETY: `offset` is a field's offset in T (the list's), inside the
    // table, pointer-sized and aligned; a nullable function pointer reads as
    // an address.
    unsafe {
        ptr::from_ref(table)
            .cast::<u8>()
            .add(offset)
            .cast::<usize>()
            .read()
    }
}

/// Sets the entry at `offset` of a table to `address`.
///
/// # Safety
/// `address` is 0 or the address of a function of the entry's type.
pub unsafe fn set_entry_at<T: ApiTable>(table: &mut T, offset: usize, address: usize) {
    debug_assert!(offset + size_of::<usize>() <= size_of::<T>());
    // SAFETY: as in `entry_at`; the caller vouches for the value, so the
    // field holds a valid `Option` of its function type.
    unsafe {
        ptr::from_mut(table)
            .cast::<u8>()
            .add(offset)
            .cast::<usize>()
            .write(address)
    }
}

/// What the runtime's table holds: the bytes it filled (`minor_id`, at most
/// the struct's size), zeros (`None` entries) past them; then every group
/// the runtime does not carry whole is dropped (all its entries `None`).
///
/// # Safety
/// `table` must have passed `tables::validate`.
pub unsafe fn capture<T: ApiTable>(table: *const T) -> T {
    let mut copy = T::default();
    // SAFETY: validated: the table starts with its version.
    let size = unsafe { table_size(table) }.min(size_of::<T>());
    // SAFETY: the runtime's table holds `size` readable bytes (validated);
    // `copy` is a distinct, writable T of at least that size; a table is
    // plain data, so any bytes the runtime wrote are a valid T.
    unsafe { ptr::copy_nonoverlapping(table.cast::<u8>(), ptr::from_mut(&mut copy).cast(), size) };
    drop_incomplete_groups(&mut copy);
    copy
}

/// Clears every entry of each group one of whose entries is `None`.
pub fn drop_incomplete_groups<T: ApiTable>(table: &mut T) {
    let incomplete: Vec<&'static str> = T::library_entries()
        .filter_map(|e| match e.need {
            Need::Group(group) if entry_at(table, e.offset) == 0 => Some(group),
            _ => None,
        })
        .collect();
    for entry in T::library_entries() {
        if matches!(entry.need, Need::Group(group) if incomplete.contains(&group)) {
            // SAFETY: 0 is `None` for every entry.
            unsafe { set_entry_at(table, entry.offset, 0) };
        }
    }
}

// ---- the captured entries --------------------------------------------------------

/// The captured core table (see the module documentation).
#[derive(Clone, Copy, Default)]
pub struct CoreEntries(pub CoreApiTable);

/// The captured AMD-extension table (see the module documentation).
#[derive(Clone, Copy, Default)]
pub struct AmdEntries(pub AmdExtTable);

impl Deref for CoreEntries {
    type Target = CoreApiTable;
    fn deref(&self) -> &CoreApiTable {
        &self.0
    }
}

impl Deref for AmdEntries {
    type Target = AmdExtTable;
    fn deref(&self) -> &AmdExtTable {
        &self.0
    }
}

/// Turns an HSA status into a `Result`.
pub fn check(status: hsa_status_t) -> Result<(), hsa_status_t> {
    if status == HSA_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(status)
    }
}

/// The entry, or the status a call the runtime cannot take answers.
pub fn present<F>(entry: Option<F>) -> Result<F, hsa_status_t> {
    entry.ok_or(HSA_STATUS_ERROR_NOT_INITIALIZED)
}

impl CoreEntries {
    /// `hsa_memory_copy` through the captured (un-wrapped) entry.
    ///
    /// # Safety
    /// `dst` and `src` must be valid for `size` bytes in the sense HSA
    /// requires: host memory the caller owns, or device memory the runtime
    /// knows to be live.
    pub unsafe fn copy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
    ) -> Result<(), hsa_status_t> {
        let copy = present(self.hsa_memory_copy_fn)?;
        // SAFETY: forwarded from the caller.
        check(unsafe { copy(dst, src, size) })
    }

    /// Reads one fixed-width symbol attribute.
    ///
    /// `T` must be the attribute's documented type (`hsa_symbol_kind_t`,
    /// `u64` address, `u32` size): the runtime writes exactly that many bytes.
    pub fn symbol_info<T: Copy>(
        &self,
        symbol: hsa_executable_symbol_t,
        attribute: hsa_executable_symbol_info_t,
    ) -> Result<T, hsa_status_t> {
        let get_info = present(self.hsa_executable_symbol_get_info_fn)?;
        let mut value = MaybeUninit::<T>::uninit();
        // SAFETY: `value` is writable storage of the attribute's width.
        check(unsafe { get_info(symbol, attribute, value.as_mut_ptr().cast()) })?;
        // SAFETY: the runtime reported success, so it wrote the attribute.
        Ok(unsafe { value.assume_init() })
    }

    /// The AMD loader extension's executable iterator
    /// (`hsa_ven_amd_loader_iterate_executables`, loader table 1.03), through
    /// `hsa_system_get_major_extension_table`, if the runtime has it.
    pub fn loader_executable_iterator(&self) -> Option<IterateExecutablesFn> {
        let get_table = self.hsa_system_get_major_extension_table_fn?;
        let mut table = MaybeUninit::<hsa_ven_amd_loader_1_03_pfn_t>::zeroed();
        // SAFETY: `table` is writable for the length given; ROCr copies at
        // most that many bytes of its loader table (1.03 and later are
        // supersets of earlier versions).
        let status = unsafe {
            get_table(
                HSA_EXTENSION_AMD_LOADER as u16,
                1,
                size_of::<hsa_ven_amd_loader_1_03_pfn_t>(),
                table.as_mut_ptr().cast(),
            )
        };
        check(status).ok()?;
        // SAFETY: zero-initialised, then filled by the runtime with function
        // pointers (or left NULL): every bit pattern written is a valid
        // Option of a function pointer.
        let table = unsafe { table.assume_init() };
        table.hsa_ven_amd_loader_iterate_executables
    }
}

impl AmdEntries {
    /// `hsa_amd_memory_pool_allocate` through the captured (un-wrapped)
    /// entry: the library's own memory is never tracked.
    pub fn allocate(
        &self,
        pool: hsa_amd_memory_pool_t,
        size: usize,
        flags: u32,
    ) -> Result<*mut c_void, hsa_status_t> {
        let allocate = present(self.hsa_amd_memory_pool_allocate_fn)?;
        let mut base = ptr::null_mut();
        // SAFETY: a writable out-parameter.
        check(unsafe { allocate(pool, size, flags, &mut base) })?;
        Ok(base)
    }

    /// `hsa_amd_memory_pool_free` through the captured entry.
    ///
    /// # Safety
    /// `base` is memory the library allocated and no longer uses.
    pub unsafe fn free(&self, base: *mut c_void) -> Result<(), hsa_status_t> {
        let free = present(self.hsa_amd_memory_pool_free_fn)?;
        // SAFETY: forwarded.
        check(unsafe { free(base) })
    }

    /// `hsa_amd_pointer_info` for one address, without the accessible-agents
    /// list. Returns the runtime's answer with `size` set to what it filled.
    /// The runtime only looks the address up; it never dereferences it.
    pub fn pointer_info(&self, address: usize) -> Result<hsa_amd_pointer_info_t, hsa_status_t> {
        let pointer_info = present(self.hsa_amd_pointer_info_fn)?;
        let mut info = hsa_amd_pointer_info_t {
            size: size_of::<hsa_amd_pointer_info_t>() as u32,
            ..Default::default()
        };
        // SAFETY: `info` is a properly sized, initialised struct with `size`
        // set as the API requires; no allocator, so no agent list is written.
        check(unsafe {
            pointer_info(
                address as *const c_void,
                &mut info,
                None,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        })?;
        Ok(info)
    }

    /// The agents `hsa_amd_pointer_info` says may access the allocation
    /// holding `address`. The runtime allocates the list with the allocator
    /// it is given (C's `malloc`) and the caller frees it.
    pub fn accessible_agents(&self, address: usize) -> Result<Vec<u64>, hsa_status_t> {
        // C's allocator, which the runtime is given for its list (declared
        // here, out of the header generator's sight).
        extern "C" {
            fn malloc(size: usize) -> *mut c_void;
            fn free(ptr: *mut c_void);
        }
        let pointer_info = present(self.hsa_amd_pointer_info_fn)?;
        let mut info = hsa_amd_pointer_info_t {
            size: size_of::<hsa_amd_pointer_info_t>() as u32,
            ..Default::default()
        };
        let (mut count, mut list): (u32, *mut super::hsa_agent_t) = (0, ptr::null_mut());
        // SAFETY: a properly sized struct and writable out-parameters; the
        // runtime fills `list` with `count` agents from `malloc`.
        check(unsafe {
            pointer_info(
                address as *const c_void,
                &mut info,
                Some(malloc),
                &mut count,
                &mut list,
            )
        })?;
        if list.is_null() {
            return Ok(Vec::new());
        }
        let mut agents = Vec::new();
        let reserved = agents.try_reserve_exact(count as usize);
        if reserved.is_ok() {
            // SAFETY: the runtime wrote `count` agents at `list`.
            let listed = unsafe { std::slice::from_raw_parts(list, count as usize) };
            agents.extend(listed.iter().map(|a| a.handle));
        }
        // SAFETY: `list` came from `malloc` and is freed once.
        unsafe { free(list.cast()) };
        reserved.map_err(|_| super::sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES)?;
        Ok(agents)
    }
}

/// Called by an executable iterator once per loaded executable.
pub type ExecutableCallback = unsafe extern "C" fn(hsa_executable_t, *mut c_void) -> hsa_status_t;
/// Lists the loaded executables (the shape of the AMD loader extension's
/// `hsa_ven_amd_loader_iterate_executables`), as a tool may hand it to the
/// library.
pub type IterateExecutablesFn =
    unsafe extern "C" fn(Option<ExecutableCallback>, *mut c_void) -> hsa_status_t;
