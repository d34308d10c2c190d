//! The application's HSA calls, made the way a program makes them: through
//! the software runtime's API tables, where the library's wrappers sit once
//! installed; and the runtime's loader-style executable iterator, as a tool
//! passes it to the library. Shared by the integration tests (`mod.rs`) and
//! the fuzz harness (`fuzz/src/app.rs` includes this file by path).

use std::ffi::c_void;

use hsa_sim::{Agent, Pool, Region};
use kernel_replay::ffi::types::*;
use kernel_replay::hsa::sys::{hsa_amd_memory_pool_t, hsa_region_t};
use kernel_replay::hsa::{hsa_agent_t, hsa_status_t, AmdExtTable, CoreApiTable};

pub const SUCCESS: hsa_status_t = kernel_replay::hsa::HSA_STATUS_SUCCESS;

/// `hsa_agent_t` of a simulated agent.
pub fn agent(a: Agent) -> hsa_agent_t {
    hsa_agent_t { handle: a.handle }
}

pub fn core_table() -> *mut CoreApiTable {
    hsa_sim::core_table_ptr().cast()
}

pub fn amd_table() -> *mut AmdExtTable {
    hsa_sim::amd_ext_table_ptr().cast()
}

/// `hsa_amd_memory_pool_allocate` as the application calls it: through the
/// runtime's AMD table.
pub fn pool_allocate(pool: Pool, size: usize, flags: u32) -> Result<*mut u8, hsa_status_t> {
    // SAFETY: the runtime's own, complete table.
    unsafe { pool_allocate_via(amd_table(), pool, size, flags) }
}

/// `hsa_amd_memory_pool_allocate` through `table`.
///
/// # Safety
/// `table` points to a complete AMD extension table (the runtime's, or a
/// copy of one).
pub unsafe fn pool_allocate_via(
    table: *mut AmdExtTable,
    pool: Pool,
    size: usize,
    flags: u32,
) -> Result<*mut u8, hsa_status_t> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: the caller's promise about the table.
    let status = unsafe {
        let allocate = (*table)
            .hsa_amd_memory_pool_allocate_fn
            .expect("pool allocate entry");
        allocate(
            hsa_amd_memory_pool_t {
                handle: pool.handle,
            },
            size,
            flags,
            &mut ptr,
        )
    };
    if status == SUCCESS {
        Ok(ptr.cast())
    } else {
        Err(status)
    }
}

/// `hsa_amd_memory_pool_free` through the runtime's AMD table.
pub fn pool_free(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*amd_table())
            .hsa_amd_memory_pool_free_fn
            .expect("pool free entry")(ptr.cast())
    }
}

/// `hsa_memory_allocate` through the runtime's core table.
pub fn memory_allocate(region: Region, size: usize) -> Result<*mut u8, hsa_status_t> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: a complete table from the runtime.
    let status = unsafe {
        (*core_table())
            .hsa_memory_allocate_fn
            .expect("memory allocate entry")(
            hsa_region_t {
                handle: region.handle,
            },
            size,
            &mut ptr,
        )
    };
    if status == SUCCESS {
        Ok(ptr.cast())
    } else {
        Err(status)
    }
}

/// `hsa_memory_free` through the runtime's core table.
pub fn memory_free(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_memory_free_fn
            .expect("memory free entry")(ptr.cast())
    }
}

/// `hsa_executable_destroy` as the application calls it: through the core
/// table (where the library's wrapper sits).
pub fn executable_destroy(exe: hsa_sim::Executable) -> hsa_status_t {
    // SAFETY: a complete table from the runtime.
    unsafe {
        (*core_table())
            .hsa_executable_destroy_fn
            .expect("executable destroy entry")(kernel_replay::hsa::hsa_executable_t {
            handle: exe.handle,
        })
    }
}

extern "C" {
    // The runtime's loader-style iterator, declared with the library's types
    // (the sim crate declares it with its own, layout-identical ones).
    fn hsa_sim_iterate_executables(
        callback: kr_executable_callback_t,
        data: *mut c_void,
    ) -> hsa_status_t;
}

/// The loader-style executable iterator, as a tool passes it.
pub fn sim_iterator() -> kr_iterate_executables_fn_t {
    Some(hsa_sim_iterate_executables)
}
