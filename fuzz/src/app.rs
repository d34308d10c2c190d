//! The application side: HSA calls made the way a program makes them,
//! through the software runtime's API tables, where the library's wrappers
//! sit once installed; and direct loads and stores of device memory (the
//! simulated device memory is host memory), standing in for kernels.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;

use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;
use kernel_replay::hsa::sys::{hsa_amd_memory_pool_t, hsa_region_t};
use kernel_replay::hsa::{hsa_agent_t, hsa_status_t, AmdExtTable, CoreApiTable};

pub const SUCCESS: hsa_status_t = kernel_replay::hsa::HSA_STATUS_SUCCESS;

pub fn agent(a: hsa_sim::Agent) -> hsa_agent_t {
    hsa_agent_t { handle: a.handle }
}

fn core_table() -> *mut CoreApiTable {
    hsa_sim::core_table_ptr().cast()
}

fn amd_table() -> *mut AmdExtTable {
    hsa_sim::amd_ext_table_ptr().cast()
}

/// `hsa_amd_memory_pool_allocate` through the AMD table.
pub fn pool_allocate(
    pool: hsa_sim::Pool,
    size: usize,
    flags: u32,
) -> Result<*mut u8, hsa_status_t> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: the runtime's complete table.
    let status = unsafe {
        (*amd_table())
            .hsa_amd_memory_pool_allocate_fn
            .expect("pool allocate entry")(
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

/// `hsa_memory_allocate` through the core table.
pub fn region_allocate(region: hsa_sim::Region, size: usize) -> Result<*mut u8, hsa_status_t> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: the runtime's complete table.
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

/// `hsa_amd_memory_pool_free` through the AMD table.
pub fn pool_free(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: the runtime's complete table.
    unsafe {
        (*amd_table())
            .hsa_amd_memory_pool_free_fn
            .expect("pool free entry")(ptr.cast())
    }
}

/// `hsa_memory_free` through the core table.
pub fn memory_free(ptr: *mut u8) -> hsa_status_t {
    // SAFETY: the runtime's complete table.
    unsafe {
        (*core_table())
            .hsa_memory_free_fn
            .expect("memory free entry")(ptr.cast())
    }
}

/// `hsa_executable_destroy` through the core table (where the library with
/// storage tiers has its registry wrapper).
pub fn executable_destroy(exe: hsa_sim::Executable) -> hsa_status_t {
    // SAFETY: the runtime's complete table.
    unsafe {
        (*core_table())
            .hsa_executable_destroy_fn
            .expect("executable destroy entry")(kernel_replay::hsa::hsa_executable_t {
            handle: exe.handle,
        })
    }
}

/// A kernel's store.
///
/// # Safety
/// `[ptr, ptr + len)` lies in a live simulated allocation or variable.
pub unsafe fn store(ptr: *mut u8, len: usize, byte: u8) {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::write_bytes(ptr, byte, len) }
}

/// A kernel's store of a whole buffer.
///
/// # Safety
/// `[ptr, ptr + bytes.len())` lies in a live simulated allocation or variable.
pub unsafe fn store_bytes(ptr: *mut u8, bytes: &[u8]) {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) }
}

/// A kernel's view of device memory.
///
/// # Safety
/// `[ptr, ptr + len)` lies in a live simulated allocation or variable.
pub unsafe fn view<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's promise.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

// ---- the tool side ---------------------------------------------------------

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

/// Every log message goes here: it is checked for being a readable string
/// (so each formatting path the fuzzer reaches is exercised) and dropped.
unsafe extern "C" fn swallow_log(_: kr_log_level_t, message: *const c_char, _: *mut c_void) {
    assert!(!message.is_null(), "log message is NULL");
    // SAFETY: the library passes a NUL-terminated message valid for the call.
    let text = unsafe { CStr::from_ptr(message) };
    assert!(!text.to_bytes().is_empty(), "empty log message");
}

/// Installs the library over the runtime's tables, once per process (the
/// tables are never rewritten by a reset, so the wrappers stay), and routes
/// every log message, down to trace, to a silent sink.
pub fn install_once() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the runtime's own tables.
        let status = unsafe { kr_memory_tracker_init(core_table(), amd_table(), 0) };
        assert_eq!(status, kr_status_t::KR_STATUS_SUCCESS, "install");
        kr_set_log_callback(Some(swallow_log), std::ptr::null_mut());
        kr_set_log_level(kr_log_level_t::KR_LOG_TRACE as u32);
    });
}
