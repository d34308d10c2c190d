//! The virtual-memory and async-handler parts of the control interface,
//! driven through the runtime's `AmdExtTable` as a tool would. The entries
//! are read at their offsets in the ROCm 6.0+ layout, which only ever grew
//! at the end (hsa_amd_signal_async_handler_fn sits at 72 in every
//! generation). The semantics themselves are covered by the C++
//! sim_selftest.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use hsa_sim::{
    amd_ext_table_ptr, header_table_versions, session, Agent, Pool, PoolKind, VmemOp,
    HSA_STATUS_ERROR, HSA_STATUS_SUCCESS,
};

/// `hsa_amd_vmem_alloc_handle_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct VmemHandle {
    handle: u64,
}

/// `hsa_signal_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Signal {
    handle: u64,
}

/// `hsa_amd_memory_access_desc_t`: 16 bytes, the agent at 8.
#[repr(C)]
struct AccessDesc {
    permissions: u32,
    agent: Agent,
}

type ReserveFn = unsafe extern "C" fn(*mut *mut c_void, usize, u64, u64) -> u32;
type FreeFn = unsafe extern "C" fn(*mut c_void, usize) -> u32;
type HandleCreateFn = unsafe extern "C" fn(Pool, usize, u32, u64, *mut VmemHandle) -> u32;
type HandleReleaseFn = unsafe extern "C" fn(VmemHandle) -> u32;
type MapFn = unsafe extern "C" fn(*mut c_void, usize, usize, VmemHandle, u64) -> u32;
type UnmapFn = unsafe extern "C" fn(*mut c_void, usize) -> u32;
type SetAccessFn = unsafe extern "C" fn(*mut c_void, usize, *const AccessDesc, usize) -> u32;
type SignalCreateFn = unsafe extern "C" fn(i64, u32, *const Agent, u64, *mut Signal) -> u32;
type Handler = unsafe extern "C" fn(i64, *mut c_void) -> bool;
type AsyncHandlerFn = unsafe extern "C" fn(Signal, u32, i64, Option<Handler>, *mut c_void) -> u32;

const RESERVE: usize = 456;
const ADDRESS_FREE: usize = 464;
const HANDLE_CREATE: usize = 472;
const HANDLE_RELEASE: usize = 480;
const MAP: usize = 488;
const UNMAP: usize = 496;
const SET_ACCESS: usize = 504;
const SIGNAL_ASYNC_HANDLER: usize = 72;

const PAGE: usize = 4096;
const PERMISSION_RW: u32 = 3;
const MEMORY_TYPE_NONE: u32 = 0;
const CONDITION_EQ: u32 = 0;

/// The entry at `offset` of the runtime's AmdExtTable, which must be set.
///
/// # Safety
/// `F` must be the entry's function pointer type.
unsafe fn entry<F: Copy>(offset: usize) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<usize>());
    let table = amd_ext_table_ptr().cast::<u8>();
    // SAFETY: the offset is inside the table (checked against its size).
    let address = unsafe { *table.add(offset).cast::<usize>() };
    assert_ne!(address, 0, "no entry at offset {offset}");
    // SAFETY: a non-null entry of type F (the caller's promise).
    unsafe { std::mem::transmute_copy(&address) }
}

/// hsa_amd_signal_create_fn: 280 from ROCm 6.0 on, 264 in the 5.2 layout.
fn signal_create_offset() -> usize {
    let [_, _, amd_major, _] = header_table_versions();
    if amd_major >= 2 {
        280
    } else {
        264
    }
}

fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    done()
}

#[test]
fn vmem_counts_and_faults() {
    let sim = session(2);
    let [_, _, amd_major, _] = header_table_versions();
    // ROCm 6.0 bumped every table major to 2 and brought the vmem API.
    assert_eq!(sim.vmem_supported(), amd_major >= 2);
    assert_eq!(sim.vmem_mapping_count(), 0);
    assert_eq!(sim.vmem_handle_count(), 0);
    assert_eq!(sim.vmem_reservation_count(), 0);
    if !sim.vmem_supported() {
        // 5.2 headers: nothing to drive; the switch exists and does nothing.
        sim.fail_nth_vmem(VmemOp::Map, 1);
        return;
    }
    // SAFETY (every entry call below): entries of the 6.0+ layout with the
    // types declared above; pointers are valid for the calls.
    unsafe {
        let reserve: ReserveFn = entry(RESERVE);
        let free: FreeFn = entry(ADDRESS_FREE);
        let create: HandleCreateFn = entry(HANDLE_CREATE);
        let release: HandleReleaseFn = entry(HANDLE_RELEASE);
        let map: MapFn = entry(MAP);
        let unmap: UnmapFn = entry(UNMAP);
        let set_access: SetAccessFn = entry(SET_ACCESS);

        let mut va: *mut c_void = std::ptr::null_mut();
        assert_eq!(reserve(&mut va, 2 * PAGE, 0, 0), HSA_STATUS_SUCCESS);
        assert_eq!(sim.vmem_reservation_count(), 1);
        let pool = sim.pool(sim.gpu(0), PoolKind::DeviceCoarse);
        let mut handle = VmemHandle { handle: 0 };
        sim.fail_nth_vmem(VmemOp::HandleCreate, 1);
        assert_ne!(
            create(pool, 2 * PAGE, MEMORY_TYPE_NONE, 0, &mut handle),
            HSA_STATUS_SUCCESS
        );
        assert_eq!(sim.vmem_handle_count(), 0);
        assert_eq!(
            create(pool, 2 * PAGE, MEMORY_TYPE_NONE, 0, &mut handle),
            HSA_STATUS_SUCCESS
        );
        assert_eq!(sim.vmem_handle_count(), 1);

        sim.fail_nth_vmem(VmemOp::Map, 1);
        assert_eq!(map(va, 2 * PAGE, 0, handle, 0), HSA_STATUS_ERROR);
        assert_eq!(sim.vmem_mapping_count(), 0);
        assert_eq!(map(va, 2 * PAGE, 0, handle, 0), HSA_STATUS_SUCCESS);
        assert_eq!(sim.vmem_mapping_count(), 1);

        let desc = AccessDesc {
            permissions: PERMISSION_RW,
            agent: sim.cpu(),
        };
        sim.fail_nth_vmem(VmemOp::SetAccess, 1);
        assert_eq!(set_access(va, 2 * PAGE, &desc, 1), HSA_STATUS_ERROR);
        assert_eq!(set_access(va, 2 * PAGE, &desc, 1), HSA_STATUS_SUCCESS);
        let bytes = va.cast::<u8>();
        *bytes.add(PAGE + 1) = 42;
        assert_eq!(*bytes.add(PAGE + 1), 42);

        // Released while mapped: it lives until the unmap.
        assert_eq!(release(handle), HSA_STATUS_SUCCESS);
        assert_eq!(sim.vmem_handle_count(), 1);
        sim.fail_nth_vmem(VmemOp::Unmap, 1);
        assert_eq!(unmap(va, 2 * PAGE), HSA_STATUS_ERROR);
        assert_eq!(unmap(va, 2 * PAGE), HSA_STATUS_SUCCESS);
        assert_eq!(sim.vmem_mapping_count(), 0);
        assert_eq!(sim.vmem_handle_count(), 0);
        assert_eq!(free(va, 2 * PAGE), HSA_STATUS_SUCCESS);
        assert_eq!(sim.vmem_reservation_count(), 0);

        // Reset releases what is left.
        assert_eq!(reserve(&mut va, PAGE, 0, 0), HSA_STATUS_SUCCESS);
        assert_eq!(
            create(pool, PAGE, MEMORY_TYPE_NONE, 0, &mut handle),
            HSA_STATUS_SUCCESS
        );
        assert_eq!(map(va, PAGE, 0, handle, 0), HSA_STATUS_SUCCESS);
        sim.fail_nth_vmem(VmemOp::HandleRelease, 1);
        sim.reset(2);
        assert_eq!(sim.vmem_mapping_count(), 0);
        assert_eq!(sim.vmem_handle_count(), 0);
        assert_eq!(sim.vmem_reservation_count(), 0);
    }
}

static CALLS: AtomicU32 = AtomicU32::new(0);

unsafe extern "C" fn count_once(_value: i64, _arg: *mut c_void) -> bool {
    CALLS.fetch_add(1, Ordering::SeqCst);
    false
}

#[test]
fn signal_handlers_are_counted_until_they_end() {
    let sim = session(1);
    // SAFETY: entries every generation has, with the types declared above.
    unsafe {
        let create: SignalCreateFn = entry(signal_create_offset());
        let async_handler: AsyncHandlerFn = entry(SIGNAL_ASYNC_HANDLER);
        let before = sim.signal_handler_count();
        let mut pending = Signal { handle: 0 };
        assert_eq!(
            create(1, 0, std::ptr::null(), 0, &mut pending),
            HSA_STATUS_SUCCESS
        );
        // Never satisfied: armed until the process ends.
        assert_eq!(
            async_handler(
                pending,
                CONDITION_EQ,
                0,
                Some(count_once),
                std::ptr::null_mut()
            ),
            HSA_STATUS_SUCCESS
        );
        assert_eq!(sim.signal_handler_count(), before + 1);
        // Satisfied at once: called once, then it ends (returns false).
        let mut ready = Signal { handle: 0 };
        assert_eq!(
            create(0, 0, std::ptr::null(), 0, &mut ready),
            HSA_STATUS_SUCCESS
        );
        assert_eq!(
            async_handler(
                ready,
                CONDITION_EQ,
                0,
                Some(count_once),
                std::ptr::null_mut()
            ),
            HSA_STATUS_SUCCESS
        );
        assert!(eventually(
            || CALLS.load(Ordering::SeqCst) == 1 && sim.signal_handler_count() == before + 1
        ));
        // A NULL handler is refused.
        assert_ne!(
            async_handler(ready, CONDITION_EQ, 0, None, std::ptr::null_mut()),
            HSA_STATUS_SUCCESS
        );
        // Handlers survive a reset, like signals.
        sim.reset(1);
        assert_eq!(sim.signal_handler_count(), before + 1);
    }
}
