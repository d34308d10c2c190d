//! Tests of the Rust layer over the test runtime's host backend: sessions,
//! topology, the tables handed to a tool, executables and the control
//! interface through the bindings. The runtime's semantics are the C++
//! conformance suite's (testing/hsa-runtime/conformance), which calls it
//! through the real table structs.

use std::thread;
use std::time::Duration;

use hsa_sim::{
    amd_ext_table_ptr, core_table_ptr, fresh_amd_ext_table, fresh_core_table,
    header_table_versions, session, Counter, PoolKind, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE,
    POISON_BYTE,
};

/// The `ApiTableVersion` at the start of a table: major, minor (= size), step.
fn version(table: *const std::ffi::c_void) -> [u32; 3] {
    let words = table.cast::<u32>();
    // SAFETY: every table starts with four u32 version fields.
    unsafe { [*words, *words.add(1), *words.add(2)] }
}

#[test]
fn session_builds_the_requested_topology() {
    let sim = session(3);
    assert_eq!(sim.gpu_count(), 3);
    let gpus = sim.gpus();
    assert_eq!(gpus.len(), 3);
    assert!(!sim.cpu().is_null());
    assert!(gpus.iter().all(|gpu| !gpu.is_null() && *gpu != sim.cpu()));
    assert_ne!(gpus[0], gpus[1]);
    assert!(sim.gpu(3).is_null());

    let coarse = sim.pool(gpus[0], PoolKind::DeviceCoarse);
    assert!(!coarse.is_null());
    assert_ne!(coarse, sim.pool(gpus[0], PoolKind::DeviceFine));
    assert_ne!(coarse, sim.pool(gpus[1], PoolKind::DeviceCoarse));
    assert_eq!(
        sim.region(gpus[0], PoolKind::DeviceCoarse).handle,
        coarse.handle
    );
    // GPUs own the device kinds, the CPU the system kinds.
    assert!(sim.pool(gpus[0], PoolKind::SystemKernarg).is_null());
    assert!(sim.pool(sim.cpu(), PoolKind::DeviceFine).is_null());
    assert!(!sim.pool(sim.cpu(), PoolKind::SystemKernarg).is_null());
    // A handle of one kind is never one of another.
    assert_ne!(coarse.handle, gpus[0].handle);
}

#[test]
fn handles_from_before_a_reset_are_unknown() {
    let sim = session(2);
    let old_gpu = sim.gpu(0);
    let old_exe = sim.executable_create();
    sim.reset(2);
    assert_ne!(sim.gpu(0), old_gpu);
    assert!(sim.pool(old_gpu, PoolKind::DeviceCoarse).is_null());
    assert!(sim
        .add_variable(old_exe, sim.gpu(0), "v", 4, false)
        .is_null());
    assert!(sim.executables().is_empty());
}

#[test]
fn tables_carry_rocr_version_fields_and_are_stable() {
    let _sim = session(1);
    let core = core_table_ptr();
    let amd = amd_ext_table_ptr();
    assert!(!core.is_null() && !amd.is_null());
    let core_copy = fresh_core_table();
    let amd_copy = fresh_amd_ext_table();
    // As the headers the runtime was compiled against declare, whichever
    // ROCm generation they are (minor_id: the table's size, as ROCr fills it).
    let [core_major, core_step, amd_major, amd_step] = header_table_versions();
    assert!(core_major >= 1 && amd_major >= 1);
    let [major, minor, step] = version(core);
    assert_eq!((major, step), (core_major, core_step));
    assert_eq!(minor as usize, core_copy.as_bytes().len());
    let [major, minor, step] = version(amd);
    assert_eq!((major, step), (amd_major, amd_step));
    assert_eq!(minor as usize, amd_copy.as_bytes().len());

    // A fresh copy matches the runtime's own (un-wrapped) table.
    let size = version(core)[1] as usize;
    // SAFETY: the table is `size` bytes of static storage.
    let live = unsafe { std::slice::from_raw_parts(core.cast::<u8>(), size) };
    assert_eq!(&core_copy.as_bytes()[..size], live);

    // Resets and new sessions keep the same tables.
    drop(_sim);
    let _sim = session(2);
    assert_eq!(core_table_ptr(), core);
    assert_eq!(amd_ext_table_ptr(), amd);
}

#[test]
fn variables_get_zeroed_storage_that_is_quarantined_on_destroy() {
    let sim = session(2);
    let exe = sim.executable_create();
    let var = sim.add_variable(exe, sim.gpu(1), "counter", 64, false);
    assert!(!var.is_null());
    // SAFETY: the runtime gave 64 bytes of storage at `var`.
    let storage = unsafe { std::slice::from_raw_parts_mut(var, 64) };
    assert!(storage.iter().all(|&b| b == 0));
    storage[0] = 7;
    sim.add_variable_raw(exe, sim.gpu(1), "raw", 0, 0);
    sim.add_kernel(exe, sim.gpu(1), "kernel.kd");
    // Variable storage is not an allocation.
    assert_eq!(sim.count(hsa_sim::Counter::LiveAllocations), 0);
    assert_eq!(sim.executables(), vec![exe]);

    sim.executable_destroy(exe);
    assert!(sim.executables().is_empty());
    // Freed storage stays mapped in the quarantine, all poison.
    // SAFETY: quarantined memory stays mapped until reset.
    let freed = unsafe { std::slice::from_raw_parts(var, 64) };
    assert!(freed.iter().all(|&b| b == POISON_BYTE));
    assert!(sim.quarantine_intact());
    assert_eq!(sim.count(hsa_sim::Counter::QuarantinedBytes), 4096);
}

#[test]
fn executables_are_listed_in_creation_order() {
    let sim = session(1);
    let created: Vec<_> = (0..4).map(|_| sim.executable_create()).collect();
    assert_eq!(sim.executables(), created);
    sim.executable_destroy(created[1]);
    assert_eq!(sim.executables(), vec![created[0], created[2], created[3]]);
    sim.inject(hsa_sim::Fault::ExecutableIteration, 0, 1);
    assert!(sim.executables().is_empty());
}

#[test]
fn counters_and_faults_start_cleared() {
    let sim = session(2);
    sim.inject(hsa_sim::Fault::NextAllocations, 0, 3);
    sim.inject(hsa_sim::Fault::PointerInfo, 0, 1);
    sim.inject(
        hsa_sim::Fault::SymbolQuery,
        u64::from(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE),
        1,
    );
    sim.inject(hsa_sim::Fault::Locks, 0, 1);
    sim.inject(hsa_sim::Fault::Unlocks, 0, 1);
    sim.inject(hsa_sim::Fault::SvmAttributesSet, 0, 1);
    sim.inject(hsa_sim::Fault::SvmAttributesGet, 0, 1);
    sim.inject(hsa_sim::Fault::SvmPrefetch, 0, 1);
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    sim.set_mode(hsa_sim::Mode::Xnack, true);
    drop(sim);

    let sim = session(2);
    for counter in [
        Counter::CopiesHostToHost,
        Counter::CopiesHostToDevice,
        Counter::CopiesDeviceToHost,
        Counter::CopiesDeviceToDevice,
        Counter::CopyViolations,
        Counter::AsyncCopies,
        Counter::InvalidSignalUses,
        Counter::LiveAllocations,
        Counter::QuarantinedBytes,
        Counter::Locks,
        Counter::Unlocks,
        Counter::LockedRanges,
        Counter::SvmMigrations,
        Counter::SvmPrefetches,
        Counter::SvmRanges,
    ] {
        assert_eq!(sim.count(counter), 0, "{counter:?}");
    }
    assert!(sim.quarantine_intact());
    assert_eq!(sim.allocation_flags(std::ptr::null()), None);
}

#[test]
fn sessions_serialize_tests() {
    // While one thread holds a session, another cannot reset the runtime.
    let sim = session(4);
    let other = thread::spawn(|| {
        let sim = session(1);
        sim.gpu_count()
    });
    thread::sleep(Duration::from_millis(50));
    assert_eq!(sim.gpu_count(), 4);
    drop(sim);
    assert_eq!(other.join().unwrap(), 1);
}

#[test]
fn a_panicking_test_does_not_poison_the_next_session() {
    let result = thread::spawn(|| {
        let _sim = session(1);
        panic!("test failure while holding the session");
    })
    .join();
    assert!(result.is_err());
    let sim = session(2);
    assert_eq!(sim.gpu_count(), 2);
}
