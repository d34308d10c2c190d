//! Rust access to the software HSA runtime the tests run the library against.
//!
//! No machine these tests run on has an AMD GPU, so the C++ runtime built
//! from this crate (`hsa_sim.h`) stands in for ROCr: it fills the real
//! `CoreApiTable` / `AmdExtTable` with entry points that follow ROCr's
//! documented behaviour and adds what a test needs on top (quarantined,
//! poisoned frees, copy bounds checking, address reuse, fault injection).
//!
//! Two layers:
//!
//! * the raw `hsa_sim_*` declarations, one for each function of `hsa_sim.h`,
//!   with its enums as `u32` constants;
//! * [`session`], which serializes the tests that share the (process-global)
//!   runtime and gives safe methods on a [`SimSession`].
//!
//! The runtime is reached by the library under test only through the tables:
//! pass [`core_table_ptr`] / [`amd_ext_table_ptr`] where ROCr would hand its
//! tables to a tool.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_char, c_void, CString};
use std::sync::{Mutex, MutexGuard, PoisonError};

// ---- handle types ------------------------------------------------------------

macro_rules! handle_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name {
            /// The opaque handle; 0 is never a valid one.
            pub handle: u64,
        }

        impl $name {
            /// Whether this is the null handle (what the runtime returns for
            /// "none").
            pub fn is_null(self) -> bool {
                self.handle == 0
            }
        }
    };
}

handle_type!(
    /// An `hsa_agent_t`.
    Agent
);
handle_type!(
    /// An `hsa_amd_memory_pool_t`.
    Pool
);
handle_type!(
    /// An `hsa_region_t`. As in ROCr, it has the same value as the [`Pool`]
    /// of the same memory.
    Region
);
handle_type!(
    /// An `hsa_executable_t`.
    Executable
);

// ---- constants (the enums of hsa_sim.h) --------------------------------------

/// `hsa_sim_pool_kind_t`: VRAM, coarse-grained (GPU agents).
pub const HSA_SIM_POOL_DEVICE_COARSE: u32 = 0;
/// `hsa_sim_pool_kind_t`: VRAM, fine-grained (GPU agents).
pub const HSA_SIM_POOL_DEVICE_FINE: u32 = 1;
/// `hsa_sim_pool_kind_t`: fine-grained system memory (the CPU agent).
pub const HSA_SIM_POOL_SYSTEM_FINE: u32 = 2;
/// `hsa_sim_pool_kind_t`: the kernarg pool, KERNARG_INIT | FINE_GRAINED (the CPU agent).
pub const HSA_SIM_POOL_SYSTEM_KERNARG: u32 = 3;
/// `hsa_sim_pool_kind_t`: coarse-grained system memory (the CPU agent).
pub const HSA_SIM_POOL_SYSTEM_COARSE: u32 = 4;

/// `hsa_sim_copy_direction_t` values.
pub const HSA_SIM_COPY_HOST_TO_HOST: u32 = 0;
pub const HSA_SIM_COPY_HOST_TO_DEVICE: u32 = 1;
pub const HSA_SIM_COPY_DEVICE_TO_HOST: u32 = 2;
pub const HSA_SIM_COPY_DEVICE_TO_DEVICE: u32 = 3;

/// `hsa_sim_vmem_op_t` values, for [`hsa_sim_fail_nth_vmem`].
pub const HSA_SIM_VMEM_HANDLE_CREATE: u32 = 0;
pub const HSA_SIM_VMEM_HANDLE_RELEASE: u32 = 1;
pub const HSA_SIM_VMEM_MAP: u32 = 2;
pub const HSA_SIM_VMEM_UNMAP: u32 = 3;
pub const HSA_SIM_VMEM_SET_ACCESS: u32 = 4;

/// The byte freed (quarantined) memory is filled with.
pub const HSA_SIM_POISON_BYTE: u8 = 0xDD;

/// `hsa_status_t` values the control interface returns.
pub const HSA_STATUS_SUCCESS: u32 = 0;
pub const HSA_STATUS_INFO_BREAK: u32 = 1;
pub const HSA_STATUS_ERROR: u32 = 0x1000;
pub const HSA_STATUS_ERROR_INVALID_ARGUMENT: u32 = 0x1001;

/// `hsa_executable_symbol_info_t` values, for [`SimSession::fail_symbol_query`].
pub const HSA_EXECUTABLE_SYMBOL_INFO_TYPE: u32 = 0;
pub const HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH: u32 = 1;
pub const HSA_EXECUTABLE_SYMBOL_INFO_NAME: u32 = 2;
pub const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE: u32 = 9;
pub const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_IS_CONST: u32 = 10;
pub const HSA_EXECUTABLE_SYMBOL_INFO_AGENT: u32 = 20;
pub const HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS: u32 = 21;

/// Callback of [`hsa_sim_iterate_executables`]: returns an `hsa_status_t`.
pub type ExecutableCallback = unsafe extern "C" fn(Executable, *mut c_void) -> u32;

// ---- raw interface -------------------------------------------------------------

extern "C" {
    // topology
    pub fn hsa_sim_reset(gpu_count: u32);
    pub fn hsa_sim_gpu_count() -> u32;
    pub fn hsa_sim_cpu_agent() -> Agent;
    pub fn hsa_sim_gpu_agent(index: u32) -> Agent;
    /// `kind` must be one of the `HSA_SIM_POOL_*` values.
    pub fn hsa_sim_pool(agent: Agent, kind: u32) -> Pool;
    /// `kind` must be one of the `HSA_SIM_POOL_*` values.
    pub fn hsa_sim_region(agent: Agent, kind: u32) -> Region;

    // tables (`CoreApiTable*` / `AmdExtTable*`)
    pub fn hsa_sim_core_table() -> *mut c_void;
    pub fn hsa_sim_amd_ext_table() -> *mut c_void;
    pub fn hsa_sim_fill_core_table(out: *mut c_void);
    pub fn hsa_sim_fill_amd_ext_table(out: *mut c_void);
    pub fn hsa_sim_core_table_size() -> usize;
    pub fn hsa_sim_header_table_versions(out: *mut u32);
    pub fn hsa_sim_amd_ext_table_size() -> usize;

    // executables
    pub fn hsa_sim_executable_create() -> Executable;
    pub fn hsa_sim_executable_add_variable(
        exe: Executable,
        agent: Agent,
        name: *const c_char,
        size: u32,
        is_constant: bool,
    ) -> *mut c_void;
    pub fn hsa_sim_executable_add_variable_raw(
        exe: Executable,
        agent: Agent,
        name: *const c_char,
        address: u64,
        size: u32,
    );
    pub fn hsa_sim_executable_add_kernel(exe: Executable, agent: Agent, name: *const c_char);
    pub fn hsa_sim_executable_destroy(exe: Executable);
    pub fn hsa_sim_iterate_executables(
        callback: Option<ExecutableCallback>,
        data: *mut c_void,
    ) -> u32;

    // ISAs, queues and the library's kernels
    /// `isa` is a NUL-terminated ISA name, or null for none.
    pub fn hsa_sim_set_agent_isa(agent: Agent, isa: *const c_char) -> bool;
    /// `kernel` is a NUL-terminated kernel name, or null for every kernel.
    pub fn hsa_sim_dispatch_count(kernel: *const c_char) -> u64;
    pub fn hsa_sim_live_queue_count() -> u64;

    // modes
    pub fn hsa_sim_note_host_block(base: *const c_void, size: usize);
    pub fn hsa_sim_forget_host_block(base: *const c_void);
    pub fn hsa_sim_set_address_reuse(enabled: bool);
    pub fn hsa_sim_set_strict_async_access(enabled: bool);

    // fault injection
    pub fn hsa_sim_fail_pointer_info(fail: bool);
    pub fn hsa_sim_fail_nth_d2h_copy(n: u64);
    pub fn hsa_sim_fail_h2d_copy_into(device_addr: *const c_void);
    pub fn hsa_sim_refuse_symbol_walk(exe: Executable, refuse: bool);
    /// `attribute` is an `hsa_executable_symbol_info_t` value.
    pub fn hsa_sim_fail_symbol_query(attribute: u32, fail: bool);
    pub fn hsa_sim_fail_executable_iteration(fail: bool);
    pub fn hsa_sim_fail_loader_extension(fail: bool);
    pub fn hsa_sim_fail_next_allocations(count: u32);
    pub fn hsa_sim_fail_next_frees(count: u32);
    pub fn hsa_sim_fail_nth_async_copy(n: u64);
    pub fn hsa_sim_fail_nth_async_copy_completion(n: u64);
    pub fn hsa_sim_fail_next_queue_creations(count: u32);
    pub fn hsa_sim_fail_next_code_object_loads(count: u32);
    pub fn hsa_sim_fault_next_dispatches(count: u32);

    // observation
    /// `direction` is one of the `HSA_SIM_COPY_*` values.
    pub fn hsa_sim_copy_count(direction: u32) -> u64;
    pub fn hsa_sim_copy_violations() -> u64;
    pub fn hsa_sim_live_allocation_count() -> u64;
    pub fn hsa_sim_quarantine_intact() -> bool;
    pub fn hsa_sim_async_copy_count() -> u64;
    pub fn hsa_sim_allocation_flags(ptr: *const c_void, flags: *mut u32) -> bool;
    pub fn hsa_sim_quarantined_bytes() -> u64;
    pub fn hsa_sim_pointer_info_count() -> u64;
    pub fn hsa_sim_fail_copies_into(addr: *const c_void);
    pub fn hsa_sim_fail_copies_from(addr: *const c_void);
    pub fn hsa_sim_set_memory_avail_supported(supported: bool);
    pub fn hsa_sim_live_signal_count() -> u64;
    pub fn hsa_sim_signal_handler_count() -> u64;
    pub fn hsa_sim_invalid_signal_uses() -> u64;

    // virtual memory (hsa_amd_vmem_*, ROCm 6.0+ headers)
    pub fn hsa_sim_vmem_supported() -> bool;
    pub fn hsa_sim_vmem_mapping_count() -> u64;
    pub fn hsa_sim_vmem_handle_count() -> u64;
    pub fn hsa_sim_vmem_reservation_count() -> u64;
    /// `op` is one of the `HSA_SIM_VMEM_*` values.
    pub fn hsa_sim_fail_nth_vmem(op: u32, n: u64);
}

// ---- safe layer ------------------------------------------------------------------

/// The memory a pool (or region) is, by its owner's kind.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolKind {
    /// VRAM, coarse-grained (GPU agents).
    DeviceCoarse = HSA_SIM_POOL_DEVICE_COARSE,
    /// VRAM, fine-grained (GPU agents).
    DeviceFine = HSA_SIM_POOL_DEVICE_FINE,
    /// Fine-grained system memory (the CPU agent).
    SystemFine = HSA_SIM_POOL_SYSTEM_FINE,
    /// The kernarg pool (the CPU agent).
    SystemKernarg = HSA_SIM_POOL_SYSTEM_KERNARG,
    /// Coarse-grained system memory (the CPU agent).
    SystemCoarse = HSA_SIM_POOL_SYSTEM_COARSE,
}

/// Direction of a counted copy.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyDirection {
    HostToHost = HSA_SIM_COPY_HOST_TO_HOST,
    HostToDevice = HSA_SIM_COPY_HOST_TO_DEVICE,
    DeviceToHost = HSA_SIM_COPY_DEVICE_TO_HOST,
    DeviceToDevice = HSA_SIM_COPY_DEVICE_TO_DEVICE,
}

/// A vmem operation [`SimSession::fail_nth_vmem`] can make fail.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VmemOp {
    /// `hsa_amd_vmem_handle_create` (fails with OUT_OF_RESOURCES).
    HandleCreate = HSA_SIM_VMEM_HANDLE_CREATE,
    /// `hsa_amd_vmem_handle_release` (fails with HSA_STATUS_ERROR, as the others).
    HandleRelease = HSA_SIM_VMEM_HANDLE_RELEASE,
    /// `hsa_amd_vmem_map`.
    Map = HSA_SIM_VMEM_MAP,
    /// `hsa_amd_vmem_unmap`.
    Unmap = HSA_SIM_VMEM_UNMAP,
    /// `hsa_amd_vmem_set_access`.
    SetAccess = HSA_SIM_VMEM_SET_ACCESS,
}

/// Serializes the tests of a process that use the runtime.
static SIM_LOCK: Mutex<()> = Mutex::new(());

fn lock_sim() -> MutexGuard<'static, ()> {
    // A test that panicked while holding the lock leaves nothing inconsistent
    // behind that the next reset would not clear.
    SIM_LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Exclusive use of the runtime for one test.
///
/// Dropping it does *not* reset the runtime, so what a test left behind can
/// still be inspected (see [`continue_session`]); the next [`session`] resets.
/// Taking a second session on the same thread while holding one deadlocks.
pub struct SimSession {
    _guard: MutexGuard<'static, ()>,
}

/// Waits for exclusive use of the runtime, then resets it to one CPU agent
/// and `gpu_count` GPU agents with no allocations, executables, faults,
/// counters or modes.
pub fn session(gpu_count: u32) -> SimSession {
    let guard = lock_sim();
    // SAFETY: plain call; the runtime is thread-safe.
    unsafe { hsa_sim_reset(gpu_count) };
    SimSession { _guard: guard }
}

/// Waits for exclusive use of the runtime without resetting it: it is as the
/// last session left it.
pub fn continue_session() -> SimSession {
    SimSession { _guard: lock_sim() }
}

/// The runtime's `CoreApiTable*`, as ROCr hands it to a tool. Filled once and
/// never rewritten by a reset, so wrappers a tool installs in it stay.
pub fn core_table_ptr() -> *mut c_void {
    // SAFETY: returns a pointer to static storage.
    unsafe { hsa_sim_core_table() }
}

/// The runtime's `AmdExtTable*` (see [`core_table_ptr`]).
pub fn amd_ext_table_ptr() -> *mut c_void {
    // SAFETY: returns a pointer to static storage.
    unsafe { hsa_sim_amd_ext_table() }
}

/// An owned, fresh (un-wrapped) copy of one of the runtime's tables.
pub struct TableCopy {
    words: Box<[u64]>,
}

impl TableCopy {
    fn filled(size: usize, fill: unsafe extern "C" fn(*mut c_void)) -> TableCopy {
        // u64 words give the table the alignment of its function pointers.
        let mut words = vec![0u64; size.div_ceil(8)].into_boxed_slice();
        // SAFETY: `words` holds at least `size` bytes, suitably aligned.
        unsafe { fill(words.as_mut_ptr().cast()) };
        TableCopy { words }
    }

    /// The table, as a `CoreApiTable*` or `AmdExtTable*`.
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.words.as_mut_ptr().cast()
    }

    /// Makes the table `extra` bytes longer (multiple of 8) with NULL
    /// entries at the end and `version.minor_id` saying so: the table a
    /// newer runtime, whose table grew at the end, would hand out.
    pub fn grow(&mut self, extra: usize) {
        assert!(extra % 8 == 0, "tables grow by whole entries");
        let mut words = std::mem::take(&mut self.words).into_vec();
        words.resize(words.len() + extra / 8, 0);
        self.words = words.into_boxed_slice();
        // The version's minor_id is the second u32 of the table.
        let minor = self.words[0] >> 32;
        let grown = minor + extra as u64;
        self.words[0] = (self.words[0] & 0xFFFF_FFFF) | (grown << 32);
    }

    /// The table's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the words are initialized plain data.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast(), self.words.len() * 8) }
    }
}

/// A fresh copy of the `CoreApiTable`.
pub fn fresh_core_table() -> TableCopy {
    // SAFETY: plain call.
    TableCopy::filled(
        unsafe { hsa_sim_core_table_size() },
        hsa_sim_fill_core_table,
    )
}

/// A fresh copy of the `AmdExtTable`.
pub fn fresh_amd_ext_table() -> TableCopy {
    // SAFETY: plain call.
    TableCopy::filled(
        unsafe { hsa_sim_amd_ext_table_size() },
        hsa_sim_fill_amd_ext_table,
    )
}

fn c_name(name: &str) -> CString {
    CString::new(name).expect("symbol names must not contain NUL")
}

unsafe extern "C" fn push_executable(exe: Executable, data: *mut c_void) -> u32 {
    // SAFETY: `data` is the Vec passed by `SimSession::executables`.
    unsafe { (*data.cast::<Vec<Executable>>()).push(exe) };
    HSA_STATUS_SUCCESS
}

// SAFETY (for every call below): the runtime's control functions are
// thread-safe, take handles by value, and never dereference the pointers a
// fault setter or lookup is given; names are valid NUL-terminated strings.
impl SimSession {
    /// Resets again within this session.
    pub fn reset(&self, gpu_count: u32) {
        unsafe { hsa_sim_reset(gpu_count) }
    }

    // -- topology --

    pub fn gpu_count(&self) -> u32 {
        unsafe { hsa_sim_gpu_count() }
    }

    /// The CPU agent.
    pub fn cpu(&self) -> Agent {
        unsafe { hsa_sim_cpu_agent() }
    }

    /// GPU agent `index`; the null handle when `index >= gpu_count()`.
    pub fn gpu(&self, index: u32) -> Agent {
        unsafe { hsa_sim_gpu_agent(index) }
    }

    /// All GPU agents, in order.
    pub fn gpus(&self) -> Vec<Agent> {
        (0..self.gpu_count()).map(|i| self.gpu(i)).collect()
    }

    /// The pool of that kind owned by `agent`; null if it has none (GPUs own
    /// the device kinds, the CPU the system kinds).
    pub fn pool(&self, agent: Agent, kind: PoolKind) -> Pool {
        unsafe { hsa_sim_pool(agent, kind as u32) }
    }

    /// The region of that kind owned by `agent` (same handle as the pool).
    pub fn region(&self, agent: Agent, kind: PoolKind) -> Region {
        unsafe { hsa_sim_region(agent, kind as u32) }
    }

    /// See [`core_table_ptr`].
    pub fn core_table(&self) -> *mut c_void {
        core_table_ptr()
    }

    /// See [`amd_ext_table_ptr`].
    pub fn amd_ext_table(&self) -> *mut c_void {
        amd_ext_table_ptr()
    }

    // -- executables --

    pub fn executable_create(&self) -> Executable {
        unsafe { hsa_sim_executable_create() }
    }

    /// Adds a variable with `size` bytes of zeroed device storage (living
    /// until the executable is destroyed) and returns its address; null if
    /// the executable or agent is unknown.
    pub fn add_variable(
        &self,
        exe: Executable,
        agent: Agent,
        name: &str,
        size: u32,
        is_constant: bool,
    ) -> *mut u8 {
        let name = c_name(name);
        unsafe { hsa_sim_executable_add_variable(exe, agent, name.as_ptr(), size, is_constant) }
            .cast()
    }

    /// Adds a variable reporting exactly this address and size, with no
    /// storage behind it.
    pub fn add_variable_raw(
        &self,
        exe: Executable,
        agent: Agent,
        name: &str,
        address: u64,
        size: u32,
    ) {
        let name = c_name(name);
        unsafe { hsa_sim_executable_add_variable_raw(exe, agent, name.as_ptr(), address, size) }
    }

    pub fn add_kernel(&self, exe: Executable, agent: Agent, name: &str) {
        let name = c_name(name);
        unsafe { hsa_sim_executable_add_kernel(exe, agent, name.as_ptr()) }
    }

    /// The ISA `agent` reports and code objects must suit (`None`: no ISA,
    /// as the CPU agent); false for an unknown agent. See `hsa_sim.h`.
    pub fn set_agent_isa(&self, agent: Agent, isa: Option<&str>) -> bool {
        let isa = isa.map(c_name);
        let ptr = isa.as_ref().map_or(std::ptr::null(), |name| name.as_ptr());
        unsafe { hsa_sim_set_agent_isa(agent, ptr) }
    }

    /// Dispatches of `kernel` that ran since reset (`None`: of every kernel).
    pub fn dispatch_count(&self, kernel: Option<&str>) -> u64 {
        let kernel = kernel.map(c_name);
        let ptr = kernel
            .as_ref()
            .map_or(std::ptr::null(), |name| name.as_ptr());
        unsafe { hsa_sim_dispatch_count(ptr) }
    }

    /// AQL queues created and not destroyed.
    pub fn live_queue_count(&self) -> u64 {
        unsafe { hsa_sim_live_queue_count() }
    }

    /// Unloads the executable; its variable storage is quarantined.
    pub fn executable_destroy(&self, exe: Executable) {
        unsafe { hsa_sim_executable_destroy(exe) }
    }

    /// The loaded executables in load order (ignores an injected iteration
    /// failure: then the list is empty).
    pub fn executables(&self) -> Vec<Executable> {
        let mut list: Vec<Executable> = Vec::new();
        unsafe {
            hsa_sim_iterate_executables(
                Some(push_executable),
                (&mut list as *mut Vec<Executable>).cast(),
            )
        };
        list
    }

    // -- modes --

    /// Address reuse: allocations first take back the newest large-enough
    /// freed block of the same pool.
    pub fn set_address_reuse(&self, enabled: bool) {
        unsafe { hsa_sim_set_address_reuse(enabled) }
    }

    /// Whether the runtime answers HSA_AMD_AGENT_INFO_MEMORY_AVAIL (on after
    /// reset; off models a runtime older than the query).
    pub fn set_memory_avail_supported(&self, supported: bool) {
        unsafe { hsa_sim_set_memory_avail_supported(supported) }
    }

    /// Strict async access: an async copy whose copying agent cannot reach
    /// both buffers (as on real hardware) is a violation. See `hsa_sim.h`.
    pub fn set_strict_async_access(&self, enabled: bool) {
        unsafe { hsa_sim_set_strict_async_access(enabled) }
    }

    // -- fault injection --

    pub fn fail_pointer_info(&self, fail: bool) {
        unsafe { hsa_sim_fail_pointer_info(fail) }
    }

    /// The n-th device-to-host `hsa_memory_copy` from now fails (1 = the
    /// next); 0 disarms.
    pub fn fail_nth_d2h_copy(&self, n: u64) {
        unsafe { hsa_sim_fail_nth_d2h_copy(n) }
    }

    /// Host-to-device copies whose destination covers `device_addr` fail (up
    /// to 16 addresses).
    pub fn fail_h2d_copy_into(&self, device_addr: *const u8) {
        unsafe { hsa_sim_fail_h2d_copy_into(device_addr.cast()) }
    }

    /// Copies of any direction (sync: error; async: fails while executing)
    /// whose destination covers `addr` fail (up to 16 addresses).
    pub fn fail_copies_into(&self, addr: *const u8) {
        unsafe { hsa_sim_fail_copies_into(addr.cast()) }
    }

    /// Copies of any direction whose source covers `addr` fail.
    pub fn fail_copies_from(&self, addr: *const u8) {
        unsafe { hsa_sim_fail_copies_from(addr.cast()) }
    }

    /// Clears every address given to [`Self::fail_copies_into`] and
    /// [`Self::fail_copies_from`].
    pub fn clear_copy_faults(&self) {
        unsafe {
            hsa_sim_fail_copies_into(std::ptr::null());
            hsa_sim_fail_copies_from(std::ptr::null());
        }
    }

    /// Clears every address given to [`Self::fail_h2d_copy_into`].
    pub fn clear_h2d_copy_faults(&self) {
        unsafe { hsa_sim_fail_h2d_copy_into(std::ptr::null()) }
    }

    pub fn refuse_symbol_walk(&self, exe: Executable, refuse: bool) {
        unsafe { hsa_sim_refuse_symbol_walk(exe, refuse) }
    }

    /// `attribute` is an `hsa_executable_symbol_info_t` value (see the
    /// `HSA_EXECUTABLE_SYMBOL_INFO_*` constants).
    pub fn fail_symbol_query(&self, attribute: u32, fail: bool) {
        unsafe { hsa_sim_fail_symbol_query(attribute, fail) }
    }

    pub fn fail_executable_iteration(&self, fail: bool) {
        unsafe { hsa_sim_fail_executable_iteration(fail) }
    }

    /// `hsa_system_get_major_extension_table` fails while set: a runtime
    /// without the AMD loader extension.
    pub fn fail_loader_extension(&self, fail: bool) {
        unsafe { hsa_sim_fail_loader_extension(fail) }
    }

    /// The next `count` `hsa_queue_create` calls fail with OUT_OF_RESOURCES.
    pub fn fail_next_queue_creations(&self, count: u32) {
        unsafe { hsa_sim_fail_next_queue_creations(count) }
    }

    /// The next `count` code-object loads fail with OUT_OF_RESOURCES.
    pub fn fail_next_code_object_loads(&self, count: u32) {
        unsafe { hsa_sim_fail_next_code_object_loads(count) }
    }

    /// The next `count` kernel dispatches fault (the queue's error callback
    /// gets MEMORY_APERTURE_VIOLATION; the queue is suspended).
    pub fn fault_next_dispatches(&self, count: u32) {
        unsafe { hsa_sim_fault_next_dispatches(count) }
    }

    pub fn fail_next_allocations(&self, count: u32) {
        unsafe { hsa_sim_fail_next_allocations(count) }
    }

    pub fn fail_next_frees(&self, count: u32) {
        unsafe { hsa_sim_fail_next_frees(count) }
    }

    /// The n-th `hsa_amd_memory_async_copy` from now is refused (1 = the
    /// next); 0 disarms.
    pub fn fail_nth_async_copy(&self, n: u64) {
        unsafe { hsa_sim_fail_nth_async_copy(n) }
    }

    /// The n-th accepted async copy from now fails while executing: nothing
    /// is copied and its completion signal is set to -1 (1 = the next); 0
    /// disarms.
    pub fn fail_nth_async_copy_completion(&self, n: u64) {
        unsafe { hsa_sim_fail_nth_async_copy_completion(n) }
    }

    // -- observation --

    pub fn copy_count(&self, direction: CopyDirection) -> u64 {
        unsafe { hsa_sim_copy_count(direction as u32) }
    }

    pub fn copy_violations(&self) -> u64 {
        unsafe { hsa_sim_copy_violations() }
    }

    pub fn live_allocation_count(&self) -> u64 {
        unsafe { hsa_sim_live_allocation_count() }
    }

    pub fn quarantine_intact(&self) -> bool {
        unsafe { hsa_sim_quarantine_intact() }
    }

    /// `hsa_amd_pointer_info` calls since reset.
    pub fn pointer_info_count(&self) -> u64 {
        unsafe { hsa_sim_pointer_info_count() }
    }

    pub fn quarantined_bytes(&self) -> u64 {
        unsafe { hsa_sim_quarantined_bytes() }
    }

    pub fn async_copy_count(&self) -> u64 {
        unsafe { hsa_sim_async_copy_count() }
    }

    /// The flags of the live allocation at base `ptr`, if it is one.
    pub fn allocation_flags(&self, ptr: *const u8) -> Option<u32> {
        let mut flags = 0u32;
        unsafe { hsa_sim_allocation_flags(ptr.cast(), &mut flags) }.then_some(flags)
    }

    /// Signals alive now (they survive resets: compare before and after).
    pub fn live_signal_count(&self) -> u64 {
        unsafe { hsa_sim_live_signal_count() }
    }

    pub fn invalid_signal_uses(&self) -> u64 {
        unsafe { hsa_sim_invalid_signal_uses() }
    }

    /// Handlers registered with `hsa_amd_signal_async_handler` that have not
    /// ended (a running one counts). They survive resets, like signals.
    pub fn signal_handler_count(&self) -> u64 {
        unsafe { hsa_sim_signal_handler_count() }
    }

    // -- virtual memory --

    /// Whether the runtime implements the vmem API and
    /// `hsa_amd_memory_async_copy_on_engine`: it was compiled against ROCm
    /// 6.0 or later headers (not 5.2). Tests of vmem skip when false.
    pub fn vmem_supported(&self) -> bool {
        unsafe { hsa_sim_vmem_supported() }
    }

    /// Live `hsa_amd_vmem_map` mappings.
    pub fn vmem_mapping_count(&self) -> u64 {
        unsafe { hsa_sim_vmem_mapping_count() }
    }

    /// vmem handles that still exist: unreleased, or released but mapped.
    pub fn vmem_handle_count(&self) -> u64 {
        unsafe { hsa_sim_vmem_handle_count() }
    }

    /// Reservations not yet freed.
    pub fn vmem_reservation_count(&self) -> u64 {
        unsafe { hsa_sim_vmem_reservation_count() }
    }

    /// The n-th call of `op` from now that passes its argument checks fails,
    /// changing nothing (1 = the next); 0 disarms.
    pub fn fail_nth_vmem(&self, op: VmemOp, n: u64) {
        unsafe { hsa_sim_fail_nth_vmem(op as u32, n) }
    }
}

// ---- the test programs' allocator ----------------------------------------------

/// A global allocator for the programs that test against this runtime: the
/// system's, telling the runtime the extent of every block it hands out
/// ([`hsa_sim_note_host_block`]), so that a copy running past the end of
/// host memory the library under test allocated (a pageable arena, a host
/// buffer) is a counted violation that copies nothing, instead of heap
/// corruption that kills the whole test program.
pub struct NotingAllocator;

impl NotingAllocator {
    fn noted(ptr: *mut u8, size: usize) -> *mut u8 {
        // SAFETY: a plain registration call; NULL is ignored.
        unsafe { hsa_sim_note_host_block(ptr.cast(), size) };
        ptr
    }

    fn forget(ptr: *mut u8) {
        // SAFETY: a plain unregistration call.
        unsafe { hsa_sim_forget_host_block(ptr.cast()) };
    }
}

// SAFETY: every block comes from, and goes back to, the system allocator
// unchanged; the runtime is only told about it.
unsafe impl GlobalAlloc for NotingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        Self::noted(unsafe { System.alloc(layout) }, layout.size())
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded.
        Self::noted(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            Self::forget(ptr);
        }
        Self::noted(moved, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::forget(ptr);
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// The table versions the HSA headers the runtime was compiled against
/// declare: `[core major, core step, AMD major, AMD step]`.
pub fn header_table_versions() -> [u32; 4] {
    let mut out = [0u32; 4];
    // SAFETY: a writable array of four.
    unsafe { hsa_sim_header_table_versions(out.as_mut_ptr()) };
    out
}
