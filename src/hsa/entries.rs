//! The runtime entry points the library captured, as typed function pointers
//! with small checked call helpers.
//!
//! Captured pointers are the runtime's own (un-wrapped) functions: copies and
//! symbol queries never re-enter the library's wrappers, and the wrappers
//! chain to exactly what the table held before installation.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;

use super::sys::{
    hsa_amd_memory_pool_t, hsa_amd_pointer_info_t, hsa_executable_symbol_info_t,
    hsa_executable_symbol_t, hsa_region_t,
};
use super::{
    hsa_agent_t, hsa_executable_t, hsa_status_t, AmdExtTable, CoreApiTable, HSA_STATUS_SUCCESS,
};

pub type MemoryAllocateFn =
    unsafe extern "C" fn(hsa_region_t, usize, *mut *mut c_void) -> hsa_status_t;
pub type MemoryFreeFn = unsafe extern "C" fn(*mut c_void) -> hsa_status_t;
pub type MemoryCopyFn = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> hsa_status_t;
pub type SymbolCallback = unsafe extern "C" fn(
    hsa_executable_t,
    hsa_agent_t,
    hsa_executable_symbol_t,
    *mut c_void,
) -> hsa_status_t;
pub type IterateAgentSymbolsFn = unsafe extern "C" fn(
    hsa_executable_t,
    hsa_agent_t,
    Option<SymbolCallback>,
    *mut c_void,
) -> hsa_status_t;
pub type SymbolGetInfoFn = unsafe extern "C" fn(
    hsa_executable_symbol_t,
    hsa_executable_symbol_info_t,
    *mut c_void,
) -> hsa_status_t;
pub type PoolAllocateFn =
    unsafe extern "C" fn(hsa_amd_memory_pool_t, usize, u32, *mut *mut c_void) -> hsa_status_t;
pub type PoolFreeFn = unsafe extern "C" fn(*mut c_void) -> hsa_status_t;
pub type PointerInfoFn = unsafe extern "C" fn(
    *const c_void,
    *mut hsa_amd_pointer_info_t,
    Option<unsafe extern "C" fn(usize) -> *mut c_void>,
    *mut u32,
    *mut *mut hsa_agent_t,
) -> hsa_status_t;

/// Reads one entry of a table through a raw pointer.
macro_rules! read_entry {
    ($table:expr, $field:ident) => {
        // SAFETY: callers only read tables that passed `tables::validate`,
        // which proved this entry lies inside the runtime's table.
        unsafe { ptr::addr_of!((*$table).$field).read() }
    };
}

/// Writes one entry of a table through a raw pointer.
macro_rules! write_entry {
    ($table:expr, $field:ident, $value:expr) => {
        // SAFETY: as for read_entry; the table is the runtime's mutable
        // dispatch table, which a tool's OnLoad is allowed to patch.
        unsafe { ptr::addr_of_mut!((*$table).$field).write($value) }
    };
}

/// The core-table entries the library uses.
#[derive(Clone, Copy)]
pub struct CoreEntries {
    /// What `hsa_memory_allocate_fn` held before the wrapper went in.
    pub memory_allocate: MemoryAllocateFn,
    /// What `hsa_memory_free_fn` held before the wrapper went in.
    pub memory_free: MemoryFreeFn,
    pub memory_copy: MemoryCopyFn,
    pub iterate_agent_symbols: IterateAgentSymbolsFn,
    pub symbol_get_info: SymbolGetInfoFn,
}

/// The AMD-extension-table entries the library uses.
#[derive(Clone, Copy)]
pub struct AmdEntries {
    /// What `hsa_amd_memory_pool_allocate_fn` held before the wrapper went in.
    pub pool_allocate: PoolAllocateFn,
    /// What `hsa_amd_memory_pool_free_fn` held before the wrapper went in.
    pub pool_free: PoolFreeFn,
    pub pointer_info: PointerInfoFn,
}

impl CoreEntries {
    /// Reads the entries out of a table.
    ///
    /// # Safety
    /// `table` must have passed `tables::validate::<CoreApiTable>`.
    pub unsafe fn capture(table: *const CoreApiTable) -> Option<Self> {
        Some(CoreEntries {
            memory_allocate: read_entry!(table, hsa_memory_allocate_fn)?,
            memory_free: read_entry!(table, hsa_memory_free_fn)?,
            memory_copy: read_entry!(table, hsa_memory_copy_fn)?,
            iterate_agent_symbols: read_entry!(table, hsa_executable_iterate_agent_symbols_fn)?,
            symbol_get_info: read_entry!(table, hsa_executable_symbol_get_info_fn)?,
        })
    }

    /// Replaces the allocation entry points of a table.
    ///
    /// # Safety
    /// As for [`CoreEntries::capture`].
    pub unsafe fn install(
        table: *mut CoreApiTable,
        allocate: MemoryAllocateFn,
        free: MemoryFreeFn,
    ) {
        write_entry!(table, hsa_memory_allocate_fn, Some(allocate));
        write_entry!(table, hsa_memory_free_fn, Some(free));
    }

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
        // SAFETY: forwarded from the caller.
        check(unsafe { (self.memory_copy)(dst, src, size) })
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
        let mut value = MaybeUninit::<T>::uninit();
        // SAFETY: `value` is writable storage of the attribute's width.
        check(unsafe { (self.symbol_get_info)(symbol, attribute, value.as_mut_ptr().cast()) })?;
        // SAFETY: the runtime reported success, so it wrote the attribute.
        Ok(unsafe { value.assume_init() })
    }
}

impl AmdEntries {
    /// Reads the entries out of a table.
    ///
    /// # Safety
    /// `table` must have passed `tables::validate::<AmdExtTable>`.
    pub unsafe fn capture(table: *const AmdExtTable) -> Option<Self> {
        Some(AmdEntries {
            pool_allocate: read_entry!(table, hsa_amd_memory_pool_allocate_fn)?,
            pool_free: read_entry!(table, hsa_amd_memory_pool_free_fn)?,
            pointer_info: read_entry!(table, hsa_amd_pointer_info_fn)?,
        })
    }

    /// Replaces the pool entry points of a table.
    ///
    /// # Safety
    /// As for [`AmdEntries::capture`].
    pub unsafe fn install(table: *mut AmdExtTable, allocate: PoolAllocateFn, free: PoolFreeFn) {
        write_entry!(table, hsa_amd_memory_pool_allocate_fn, Some(allocate));
        write_entry!(table, hsa_amd_memory_pool_free_fn, Some(free));
    }

    /// `hsa_amd_pointer_info` for one address, without the accessible-agents
    /// list. Returns the runtime's answer with `size` set to what it filled.
    /// The runtime only looks the address up; it never dereferences it.
    pub fn pointer_info(&self, address: usize) -> Result<hsa_amd_pointer_info_t, hsa_status_t> {
        let mut info = hsa_amd_pointer_info_t {
            size: std::mem::size_of::<hsa_amd_pointer_info_t>() as u32,
            ..Default::default()
        };
        // SAFETY: `info` is a properly sized, initialised struct with `size`
        // set as the API requires; no allocator, so no agent list is written.
        check(unsafe {
            (self.pointer_info)(
                address as *const c_void,
                &mut info,
                None,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        })?;
        Ok(info)
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

/// The loader-style executable iterator a tool hands to the library (the
/// shape of `hsa_ven_amd_loader_iterate_executables`).
pub type ExecutableCallback = unsafe extern "C" fn(hsa_executable_t, *mut c_void) -> hsa_status_t;
pub type IterateExecutablesFn =
    unsafe extern "C" fn(Option<ExecutableCallback>, *mut c_void) -> hsa_status_t;
