//! HSA bindings: the types and API-table layouts of the headers built
//! against (the `kernel-replay-hsa-sys` crate), the table guard, and typed
//! handles on the runtime entry points the library captured.
//!
//! The library never links `libhsa-runtime64`; every call goes through a
//! function pointer taken from a `CoreApiTable` / `AmdExtTable` that the host
//! tool hands to `kr_memory_tracker_init`.

pub(crate) mod entries;
pub(crate) mod query;
pub(crate) mod signals;
pub(crate) mod tables;

/// The raw bindings (the `kernel-replay-hsa-sys` crate): every HSA type,
/// constant and API-table layout of the headers built against.
pub use kernel_replay_hsa_sys as sys;

pub use sys::{hsa_agent_t, hsa_executable_t, hsa_status_t, AmdExtTable, CoreApiTable};

pub use sys::{HSA_STATUS_ERROR, HSA_STATUS_ERROR_NOT_INITIALIZED, HSA_STATUS_SUCCESS};

pub use sys::{
    HAS_VMEM, POOL_ALLOCATE_EXECUTABLE_FLAG, POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED,
};
