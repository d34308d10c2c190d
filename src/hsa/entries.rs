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
    hsa_agent_info_t, hsa_amd_copy_direction_t, hsa_amd_memory_pool_info_t, hsa_amd_memory_pool_t,
    hsa_amd_pointer_info_t, hsa_dim3_t, hsa_executable_symbol_info_t, hsa_executable_symbol_t,
    hsa_pitched_ptr_t, hsa_region_t, hsa_signal_condition_t, hsa_signal_t, hsa_signal_value_t,
    hsa_ven_amd_loader_1_03_pfn_t, hsa_wait_state_t, HSA_EXTENSION_AMD_LOADER,
};
use super::{
    hsa_agent_t, hsa_executable_t, hsa_status_t, AmdExtTable, CoreApiTable, HSA_STATUS_SUCCESS,
};

pub type MemoryAllocateFn =
    unsafe extern "C" fn(hsa_region_t, usize, *mut *mut c_void) -> hsa_status_t;
pub type MemoryFreeFn = unsafe extern "C" fn(*mut c_void) -> hsa_status_t;
/// `hsa_memory_copy`.
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

pub type ExecutableDestroyFn = unsafe extern "C" fn(hsa_executable_t) -> hsa_status_t;
pub type SystemGetMajorExtensionTableFn =
    unsafe extern "C" fn(u16, u16, usize, *mut c_void) -> hsa_status_t;
pub type AgentCallback = unsafe extern "C" fn(hsa_agent_t, *mut c_void) -> hsa_status_t;
pub type IterateAgentsFn = unsafe extern "C" fn(Option<AgentCallback>, *mut c_void) -> hsa_status_t;
pub type AgentGetInfoFn =
    unsafe extern "C" fn(hsa_agent_t, hsa_agent_info_t, *mut c_void) -> hsa_status_t;
pub type SignalCreateFn = unsafe extern "C" fn(
    hsa_signal_value_t,
    u32,
    *const hsa_agent_t,
    *mut hsa_signal_t,
) -> hsa_status_t;
pub type SignalDestroyFn = unsafe extern "C" fn(hsa_signal_t) -> hsa_status_t;
pub type SignalStoreFn = unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t);
pub type SignalSubtractFn = unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t);
pub type SignalWaitFn = unsafe extern "C" fn(
    hsa_signal_t,
    hsa_signal_condition_t,
    hsa_signal_value_t,
    u64,
    hsa_wait_state_t,
) -> hsa_signal_value_t;
pub type PoolCallback = unsafe extern "C" fn(hsa_amd_memory_pool_t, *mut c_void) -> hsa_status_t;
pub type IteratePoolsFn =
    unsafe extern "C" fn(hsa_agent_t, Option<PoolCallback>, *mut c_void) -> hsa_status_t;
pub type PoolGetInfoFn = unsafe extern "C" fn(
    hsa_amd_memory_pool_t,
    hsa_amd_memory_pool_info_t,
    *mut c_void,
) -> hsa_status_t;
pub type AllowAccessFn =
    unsafe extern "C" fn(u32, *const hsa_agent_t, *const u32, *const c_void) -> hsa_status_t;
pub type AsyncCopyRectFn = unsafe extern "C" fn(
    *const hsa_pitched_ptr_t,
    *const hsa_dim3_t,
    *const hsa_pitched_ptr_t,
    *const hsa_dim3_t,
    *const hsa_dim3_t,
    hsa_agent_t,
    hsa_amd_copy_direction_t,
    u32,
    *const hsa_signal_t,
    hsa_signal_t,
) -> hsa_status_t;
#[cfg(hsa_vmem)]
pub type AsyncCopyOnEngineFn = unsafe extern "C" fn(
    *mut c_void,
    hsa_agent_t,
    *const c_void,
    hsa_agent_t,
    usize,
    u32,
    *const hsa_signal_t,
    hsa_signal_t,
    super::sys::hsa_amd_sdma_engine_id_t,
    bool,
) -> hsa_status_t;
pub type SignalHandler = unsafe extern "C" fn(hsa_signal_value_t, *mut c_void) -> bool;
pub type SignalAsyncHandlerFn = unsafe extern "C" fn(
    hsa_signal_t,
    hsa_signal_condition_t,
    hsa_signal_value_t,
    Option<SignalHandler>,
    *mut c_void,
) -> hsa_status_t;
/// `hsa_amd_memory_async_copy`.
pub type AsyncCopyFn = unsafe extern "C" fn(
    *mut c_void,
    hsa_agent_t,
    *const c_void,
    hsa_agent_t,
    usize,
    u32,
    *const hsa_signal_t,
    hsa_signal_t,
) -> hsa_status_t;

/// Reads one entry of a table through a raw pointer.
macro_rules! read_entry {
    ($table:expr, $field:ident) => {
        // SAFETY: callers only read tables that passed `tables::validate`,
        // which proved this entry lies inside the runtime's table.
        unsafe { ptr::addr_of!((*$table).$field).read() }
    };
}

/// Reads an optional entry: `None` when the table (`version.minor_id` bytes)
/// ends before it, or it is NULL.
macro_rules! read_optional {
    ($table:expr, $ty:ty, $field:ident) => {{
        let size = table_size($table.cast());
        if std::mem::offset_of!($ty, $field) + std::mem::size_of::<usize>() <= size {
            read_entry!($table, $field)
        } else {
            None
        }
    }};
}

/// A copy of a runtime table: the bytes the runtime filled (`minor_id`, at
/// most the struct's size), zeros (`None` entries) past them.
///
/// # Safety
/// `table` must have passed `tables::validate` for `T`.
unsafe fn copy_of_table<T: Default>(table: *const T) -> T {
    let mut copy = T::default();
    let size = table_size(table.cast()).min(std::mem::size_of::<T>());
    // SAFETY: the runtime's table holds `size` readable bytes (validated);
    // `copy` is a distinct, writable T of at least that size; a table is
    // plain data (integers and nullable function pointers), so any bytes
    // the runtime wrote are a valid T.
    unsafe { ptr::copy_nonoverlapping(table.cast::<u8>(), ptr::from_mut(&mut copy).cast(), size) };
    copy
}

/// `version.minor_id`: the table's size as the runtime filled it.
fn table_size(table: *const super::sys::ApiTableVersion) -> usize {
    // SAFETY: every table starts with its version (checked by the caller's
    // validation before any entry is read).
    unsafe { table.read_unaligned() }.minor_id as usize
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
    /// Entries the fast snapshot paths use when the runtime has them.
    pub optional: OptionalCore,
}

/// Core entries the library uses when present: storage-tier discovery
/// (agents), batched copies (signals), and the executable registry
/// (`hsa_executable_destroy`, which the library wraps).
#[derive(Clone, Copy, Default)]
pub struct OptionalCore {
    pub iterate_agents: Option<IterateAgentsFn>,
    pub agent_get_info: Option<AgentGetInfoFn>,
    pub signal_create: Option<SignalCreateFn>,
    pub signal_destroy: Option<SignalDestroyFn>,
    pub signal_store: Option<SignalStoreFn>,
    pub signal_subtract: Option<SignalSubtractFn>,
    pub signal_wait: Option<SignalWaitFn>,
    /// What `hsa_executable_destroy_fn` held before the wrapper went in.
    pub executable_destroy: Option<ExecutableDestroyFn>,
    /// How the loader extension's table (and its executable iterator) is
    /// found when the tool names no iterator.
    pub system_get_major_extension_table: Option<SystemGetMajorExtensionTableFn>,
    /// The whole table as the runtime filled it at install (entries past
    /// its size read as `None`), before any wrapper went in: the un-wrapped
    /// queue, ISA and code-object entries the library's own device kernels
    /// use, typed by the bindings rather than by hand.
    pub runtime: CoreApiTable,
}

/// AMD-extension entries the library uses when present: pool discovery,
/// pinned host access, asynchronous copies (and the handler that watches an
/// application copy's completion), and virtual memory.
#[derive(Clone, Copy, Default)]
pub struct OptionalAmd {
    pub iterate_pools: Option<IteratePoolsFn>,
    pub pool_get_info: Option<PoolGetInfoFn>,
    pub allow_access: Option<AllowAccessFn>,
    /// What `hsa_amd_memory_async_copy_fn` held before the fence's wrapper.
    pub async_copy: Option<AsyncCopyFn>,
    /// What `hsa_amd_memory_async_copy_rect_fn` held before the wrapper.
    pub async_copy_rect: Option<AsyncCopyRectFn>,
    /// What `hsa_amd_memory_async_copy_on_engine_fn` held (ROCm 6.0+).
    #[cfg(hsa_vmem)]
    pub async_copy_on_engine: Option<AsyncCopyOnEngineFn>,
    pub signal_async_handler: Option<SignalAsyncHandlerFn>,
    #[cfg(hsa_vmem)]
    pub vmem: Option<vmem::VmemEntries>,
}

/// The AMD-extension-table entries the library uses.
#[derive(Clone, Copy)]
pub struct AmdEntries {
    /// What `hsa_amd_memory_pool_allocate_fn` held before the wrapper went in.
    pub pool_allocate: PoolAllocateFn,
    /// What `hsa_amd_memory_pool_free_fn` held before the wrapper went in.
    pub pool_free: PoolFreeFn,
    pub pointer_info: PointerInfoFn,
    pub optional: OptionalAmd,
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
            optional: OptionalCore {
                iterate_agents: read_optional!(table, CoreApiTable, hsa_iterate_agents_fn),
                agent_get_info: read_optional!(table, CoreApiTable, hsa_agent_get_info_fn),
                signal_create: read_optional!(table, CoreApiTable, hsa_signal_create_fn),
                signal_destroy: read_optional!(table, CoreApiTable, hsa_signal_destroy_fn),
                signal_store: read_optional!(table, CoreApiTable, hsa_signal_store_screlease_fn),
                signal_subtract: read_optional!(
                    table,
                    CoreApiTable,
                    hsa_signal_subtract_screlease_fn
                ),
                signal_wait: read_optional!(table, CoreApiTable, hsa_signal_wait_scacquire_fn),
                executable_destroy: read_optional!(table, CoreApiTable, hsa_executable_destroy_fn),
                system_get_major_extension_table: read_optional!(
                    table,
                    CoreApiTable,
                    hsa_system_get_major_extension_table_fn
                ),
                // SAFETY: validated by the caller.
                runtime: unsafe { copy_of_table(table) },
            },
        })
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
            optional: OptionalAmd {
                iterate_pools: read_optional!(
                    table,
                    AmdExtTable,
                    hsa_amd_agent_iterate_memory_pools_fn
                ),
                pool_get_info: read_optional!(table, AmdExtTable, hsa_amd_memory_pool_get_info_fn),
                allow_access: read_optional!(table, AmdExtTable, hsa_amd_agents_allow_access_fn),
                async_copy: read_optional!(table, AmdExtTable, hsa_amd_memory_async_copy_fn),
                async_copy_rect: read_optional!(
                    table,
                    AmdExtTable,
                    hsa_amd_memory_async_copy_rect_fn
                ),
                #[cfg(hsa_vmem)]
                async_copy_on_engine: read_optional!(
                    table,
                    AmdExtTable,
                    hsa_amd_memory_async_copy_on_engine_fn
                ),
                signal_async_handler: read_optional!(
                    table,
                    AmdExtTable,
                    hsa_amd_signal_async_handler_fn
                ),
                #[cfg(hsa_vmem)]
                vmem: (|| {
                    Some(vmem::VmemEntries {
                        handle_create: read_optional!(
                            table,
                            AmdExtTable,
                            hsa_amd_vmem_handle_create_fn
                        )?,
                        map: read_optional!(table, AmdExtTable, hsa_amd_vmem_map_fn)?,
                        unmap: read_optional!(table, AmdExtTable, hsa_amd_vmem_unmap_fn)?,
                        set_access: read_optional!(table, AmdExtTable, hsa_amd_vmem_set_access_fn)?,
                        get_access: read_optional!(table, AmdExtTable, hsa_amd_vmem_get_access_fn)?,
                        properties_from_handle: read_optional!(
                            table,
                            AmdExtTable,
                            hsa_amd_vmem_get_alloc_properties_from_handle_fn
                        )?,
                    })
                })(),
            },
        })
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
/// Called by an executable iterator once per loaded executable.
pub type ExecutableCallback = unsafe extern "C" fn(hsa_executable_t, *mut c_void) -> hsa_status_t;
/// Lists the loaded executables (the shape of the AMD loader extension's
/// `hsa_ven_amd_loader_iterate_executables`).
pub type IterateExecutablesFn =
    unsafe extern "C" fn(Option<ExecutableCallback>, *mut c_void) -> hsa_status_t;

impl CoreEntries {
    /// The AMD loader extension's executable iterator
    /// (`hsa_ven_amd_loader_iterate_executables`, loader table 1.03), through
    /// `hsa_system_get_major_extension_table`, if the runtime has it.
    pub fn loader_executable_iterator(&self) -> Option<IterateExecutablesFn> {
        let get_table = self.optional.system_get_major_extension_table?;
        let mut table = MaybeUninit::<hsa_ven_amd_loader_1_03_pfn_t>::zeroed();
        // SAFETY: `table` is writable for the length given; ROCr copies at
        // most that many bytes of its loader table (1.03 and later are
        // supersets of earlier versions).
        let status = unsafe {
            get_table(
                HSA_EXTENSION_AMD_LOADER as u16,
                1,
                std::mem::size_of::<hsa_ven_amd_loader_1_03_pfn_t>(),
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

/// The virtual-memory entries the library wraps or asks (ROCm 6.0 and later
/// tables; absent from older headers, and then nothing is wrapped).
#[cfg(hsa_vmem)]
pub mod vmem {
    use std::ffi::c_void;

    use super::super::sys::{
        hsa_access_permission_t, hsa_amd_memory_access_desc_t, hsa_amd_memory_pool_t,
        hsa_amd_memory_type_t, hsa_amd_vmem_alloc_handle_t,
    };
    use super::super::{hsa_agent_t, hsa_status_t};

    pub type HandleCreateFn = unsafe extern "C" fn(
        hsa_amd_memory_pool_t,
        usize,
        hsa_amd_memory_type_t,
        u64,
        *mut hsa_amd_vmem_alloc_handle_t,
    ) -> hsa_status_t;
    pub type MapFn = unsafe extern "C" fn(
        *mut c_void,
        usize,
        usize,
        hsa_amd_vmem_alloc_handle_t,
        u64,
    ) -> hsa_status_t;
    pub type UnmapFn = unsafe extern "C" fn(*mut c_void, usize) -> hsa_status_t;
    pub type SetAccessFn = unsafe extern "C" fn(
        *mut c_void,
        usize,
        *const hsa_amd_memory_access_desc_t,
        usize,
    ) -> hsa_status_t;
    pub type GetAccessFn = unsafe extern "C" fn(
        *mut c_void,
        *mut hsa_access_permission_t,
        hsa_agent_t,
    ) -> hsa_status_t;
    pub type PropertiesFromHandleFn = unsafe extern "C" fn(
        hsa_amd_vmem_alloc_handle_t,
        *mut hsa_amd_memory_pool_t,
        *mut hsa_amd_memory_type_t,
    ) -> hsa_status_t;

    /// What the runtime's AMD table held for the virtual-memory entries.
    #[derive(Clone, Copy)]
    pub struct VmemEntries {
        /// Wrapped (a failure for lack of memory is retried once after the
        /// library's retained arenas are released).
        pub handle_create: HandleCreateFn,
        /// Wrapped (the mapping is noted).
        pub map: MapFn,
        /// Wrapped (tracked mappings retired first).
        pub unmap: UnmapFn,
        /// Wrapped (mappings tracked once their owner may write them).
        pub set_access: SetAccessFn,
        pub get_access: GetAccessFn,
        pub properties_from_handle: PropertiesFromHandleFn,
    }
}
