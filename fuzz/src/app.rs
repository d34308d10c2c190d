//! The application side: HSA calls made the way a program makes them,
//! through the software runtime's API tables, where the library's wrappers
//! sit once installed; and direct loads and stores of device memory (the
//! simulated device memory is host memory), standing in for kernels.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;

use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;

// The application's HSA calls through the runtime's tables, and the
// runtime's executable iterator: the same code the integration tests use.
#[path = "../../tests/common/app.rs"]
mod calls;
pub use calls::*;

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

/// The library's extended statistics (`kr_get_stats2`).
pub fn stats2() -> kr_stats2_t {
    let mut stats = kr_stats2_t {
        struct_size: std::mem::size_of::<kr_stats2_t>(),
        ..kr_stats2_t::default()
    };
    // SAFETY: a writable struct of the size it declares.
    unsafe { kr_get_stats2(&mut stats) };
    stats
}
