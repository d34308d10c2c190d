//! The application side: HSA calls made the way a program makes them,
//! through the software runtime's API tables, where the library's wrappers
//! sit once installed; and direct loads and stores of device memory (the
//! simulated device memory is host memory), standing in for kernels.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;

use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;
use kernel_replay::hsa::hsa_status_t;

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
unsafe extern "C" fn swallow_log(
    _: kernel_replay::LogLevel,
    message: *const c_char,
    _: *mut c_void,
) {
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
        let status = unsafe { kernel_replay::install(core_table(), amd_table(), 0) };
        assert_eq!(status, Ok(kernel_replay::Installed::Installed), "install");
        kr_set_log_callback(Some(swallow_log), std::ptr::null_mut());
        kr_set_log_level(kernel_replay::LogLevel::Trace as u32);
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

// ---- virtual memory, for every header generation ------------------------------

/// A permission as the runtime encodes `hsa_access_permission_t` (the 5.2
/// headers do not declare the type).
pub const PERM_NONE: u32 = 0;
pub const PERM_RO: u32 = 1;
pub const PERM_RW: u32 = 3;

/// The application's `hsa_amd_vmem_*` calls (through the runtime's AMD
/// table, where the library's wrappers sit) and the harness's private views
/// of physical handles, as plain function pointers, so that the interpreter
/// names no vmem type and compiles against headers without the API
/// ([`vmem_api`] is then `None`).
pub struct VmemApi {
    pub reserve: fn(usize) -> Result<*mut u8, hsa_status_t>,
    pub address_free: fn(*mut u8, usize) -> hsa_status_t,
    pub handle_create: fn(hsa_sim::Pool, usize) -> Result<u64, hsa_status_t>,
    pub handle_release: fn(u64) -> hsa_status_t,
    pub map: fn(*mut u8, usize, u64) -> hsa_status_t,
    pub unmap: fn(*mut u8, usize) -> hsa_status_t,
    /// Descriptors of (agent, permission), in order.
    pub set_access: fn(*mut u8, usize, &[(hsa_sim::Agent, u32)]) -> hsa_status_t,
    pub get_access: fn(*mut u8, hsa_sim::Agent) -> Result<u32, hsa_status_t>,
    /// `hsa_amd_memory_async_copy_on_engine` on SDMA engine 0.
    #[allow(clippy::type_complexity)]
    pub async_copy_on_engine: fn(
        *mut u8,
        hsa_sim::Agent,
        *const u8,
        hsa_sim::Agent,
        usize,
        &[hsa_signal_t],
        hsa_signal_t,
    ) -> hsa_status_t,
    /// A private view of the first `size` bytes of a handle, read-write for
    /// the CPU (the agent given), made through the runtime's un-wrapped
    /// table: the library never sees it.
    pub probe_map: fn(u64, usize, hsa_sim::Agent) -> *mut u8,
    /// Takes a view [`VmemApi::probe_map`] made away again.
    pub probe_unmap: fn(*mut u8, usize),
}

mod no_vmem {
    /// Headers without the vmem API: none (shadowed by the item
    /// `kernel_replay::with_vmem!` defines otherwise).
    #[allow(dead_code)]
    pub fn vmem_api() -> Option<&'static super::VmemApi> {
        None
    }
}
#[allow(unused_imports)]
pub use no_vmem::*;

kernel_replay::with_vmem! {
    /// The vmem API of headers that declare it.
    pub fn vmem_api() -> Option<&'static VmemApi> {
        Some(&with_vmem_api::API)
    }

    mod with_vmem_api {
        use std::sync::OnceLock;

        use kernel_replay::hsa::sys::{
            hsa_amd_memory_access_desc_t, hsa_amd_vmem_alloc_handle_t,
            HSA_ACCESS_PERMISSION_RW,
        };
        use kernel_replay::hsa::{hsa_status_t, AmdExtTable};

        use super::{agent, calls, SUCCESS, VmemApi};

        pub static API: VmemApi = VmemApi {
            reserve: calls::reserve,
            address_free: calls::address_free,
            handle_create: calls::handle_create,
            handle_release: calls::handle_release,
            map: calls::map,
            unmap: calls::unmap,
            set_access,
            get_access,
            async_copy_on_engine: calls::async_copy_on_engine,
            probe_map,
            probe_unmap,
        };

        fn set_access(va: *mut u8, size: usize, grants: &[(hsa_sim::Agent, u32)]) -> hsa_status_t {
            let grants: Vec<_> = grants.iter().map(|&(a, p)| (a, p as _)).collect();
            calls::set_access(va, size, &grants)
        }

        fn get_access(va: *mut u8, a: hsa_sim::Agent) -> Result<u32, hsa_status_t> {
            // hsa_access_permission_t is an integer whose width the
            // headers choose.
            #[allow(clippy::unnecessary_cast)]
            calls::get_access(va, a).map(|p| p as u32)
        }

        /// The runtime's own AMD table, without the library's wrappers.
        fn raw() -> &'static AmdExtTable {
            static TABLE: OnceLock<usize> = OnceLock::new();
            let table = *TABLE.get_or_init(|| {
                Box::leak(Box::new(hsa_sim::fresh_amd_ext_table())).as_mut_ptr() as usize
            });
            // SAFETY: a complete table, leaked for the life of the process.
            unsafe { &*(table as *const AmdExtTable) }
        }

        fn probe_map(handle: u64, size: usize, cpu: hsa_sim::Agent) -> *mut u8 {
            let table = raw();
            let mut va = std::ptr::null_mut();
            let handle = hsa_amd_vmem_alloc_handle_t { handle };
            let access = hsa_amd_memory_access_desc_t {
                permissions: HSA_ACCESS_PERMISSION_RW,
                agent_handle: agent(cpu),
            };
            // SAFETY: the runtime's own entries; writable out-parameters and
            // a descriptor that outlives the call.
            unsafe {
                assert_eq!(table.hsa_amd_vmem_address_reserve_fn.unwrap()(&mut va, size, 0, 0), SUCCESS);
                assert_eq!(table.hsa_amd_vmem_map_fn.unwrap()(va, size, 0, handle, 0), SUCCESS);
                assert_eq!(table.hsa_amd_vmem_set_access_fn.unwrap()(va, size, &access, 1), SUCCESS);
            }
            va.cast()
        }

        fn probe_unmap(va: *mut u8, size: usize) {
            let table = raw();
            // SAFETY: a view probe_map made, unmapped once.
            unsafe {
                assert_eq!(table.hsa_amd_vmem_unmap_fn.unwrap()(va.cast(), size), SUCCESS);
                assert_eq!(table.hsa_amd_vmem_address_free_fn.unwrap()(va.cast(), size), SUCCESS);
            }
        }
    }
}
