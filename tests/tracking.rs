//! Allocation tracking through the installed wrappers: the gate, the
//! classifier's exclusions, retire-before-free and the teardown guard.

mod common;

use common::*;
use hsa_sim::PoolKind;
use kernel_replay::hsa::POOL_ALLOCATE_EXECUTABLE_FLAG;

#[test]
fn tracking_is_off_by_default_and_then_records_nothing() {
    if !in_child("tracking_is_off_by_default_and_then_records_nothing") {
        return;
    }
    let sim = hsa_sim::session(1);
    install();
    assert!(!kernel_replay::tracking(), "off by default");
    let gpu = sim.gpu(0);
    let p = pool_allocate(sim.pool(gpu, PoolKind::DeviceCoarse), 4096, 0).unwrap();
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    assert!(kernel_replay::set_tracking(true));
    assert!(kernel_replay::tracking());
    let q = pool_allocate(sim.pool(gpu, PoolKind::DeviceCoarse), 4096, 0).unwrap();
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        1,
        "only the allocation made while on"
    );
    assert!(!kernel_replay::set_tracking(false));
    assert_eq!(pool_free(p), SUCCESS);
    assert_eq!(pool_free(q), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
}

#[test]
fn memory_that_is_not_kernarg_nor_executable_is_tracked() {
    let sim = session(2);
    let (gpu0, gpu1, cpu) = (sim.gpu(0), sim.gpu(1), sim.cpu());
    let mut live = Vec::new();
    let mut alloc = |pool, size, flags| {
        let p = pool_allocate(pool, size, flags).unwrap();
        live.push(p);
        p
    };
    alloc(sim.pool(gpu0, PoolKind::DeviceCoarse), 1000, 0);
    alloc(sim.pool(gpu0, PoolKind::DeviceCoarse), 3000, 0);
    alloc(sim.pool(gpu1, PoolKind::DeviceCoarse), 500, 0);
    // Fine-grained device memory: tracked, its own kind.
    alloc(sim.pool(gpu0, PoolKind::DeviceFine), 2048, 0);
    // Fine-grained host memory: tracked, owned by the CPU agent.
    alloc(sim.pool(cpu, PoolKind::SystemFine), 4096, 0);
    // Excluded: kernarg, executable-flag coarse allocations.
    alloc(sim.pool(cpu, PoolKind::SystemKernarg), 4096, 0);
    alloc(
        sim.pool(gpu0, PoolKind::DeviceCoarse),
        4096,
        POOL_ALLOCATE_EXECUTABLE_FLAG,
    );
    alloc(
        sim.pool(gpu0, PoolKind::DeviceCoarse),
        4096,
        POOL_ALLOCATE_EXECUTABLE_FLAG | 1,
    );
    // Coarse-grained system memory is coarse-grained and not kernarg: tracked,
    // owned by the CPU agent.
    alloc(sim.pool(cpu, PoolKind::SystemCoarse), 256, 0);

    assert_eq!(kernel_replay::tracked(agent(gpu0)).regions, 3);
    assert_eq!(
        kernel_replay::tracked(agent(gpu0)).bytes,
        6048,
        "the size the application asked for"
    );
    assert_eq!(kernel_replay::tracked(agent(gpu1)).regions, 1);
    assert_eq!(kernel_replay::tracked(agent(gpu1)).bytes, 500);
    assert_eq!(kernel_replay::tracked(agent(cpu)).regions, 2);
    assert_eq!(kernel_replay::tracked(agent(cpu)).bytes, 4096 + 256);
    for p in live {
        assert_eq!(pool_free(p), SUCCESS);
    }
    assert_eq!(
        kernel_replay::tracked(agent(gpu0)).regions
            + kernel_replay::tracked(agent(gpu1)).regions
            + kernel_replay::tracked(agent(cpu)).regions,
        0
    );
}

#[test]
fn hsa_memory_allocate_is_tracked_by_region_kind() {
    let sim = session(1);
    let (gpu, cpu) = (sim.gpu(0), sim.cpu());
    let coarse = memory_allocate(sim.region(gpu, PoolKind::DeviceCoarse), 8192).unwrap();
    let kernarg = memory_allocate(sim.region(cpu, PoolKind::SystemKernarg), 64).unwrap();
    let fine = memory_allocate(sim.region(cpu, PoolKind::SystemFine), 64).unwrap();
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 1);
    assert_eq!(kernel_replay::tracked(agent(gpu)).bytes, 8192);
    // System memory, not kernarg: the CPU's host memory.
    assert_eq!(kernel_replay::tracked(agent(cpu)).regions, 1);
    assert_eq!(kernel_replay::tracked(agent(cpu)).bytes, 64);
    // Either free entry retires: ROCr frees any allocation through both.
    assert_eq!(pool_free(coarse), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    assert_eq!(memory_free(kernarg), SUCCESS);
    assert_eq!(memory_free(fine), SUCCESS);
}

#[test]
fn a_failed_pointer_query_leaves_the_allocation_untracked() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    sim.inject(hsa_sim::Fault::PointerInfo, 0, 1);
    let p = pool_allocate(sim.pool(gpu, PoolKind::DeviceCoarse), 4096, 0).unwrap();
    let q = memory_allocate(sim.region(gpu, PoolKind::DeviceCoarse), 4096).unwrap();
    sim.inject(hsa_sim::Fault::PointerInfo, 0, 0);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    assert_eq!(pool_free(p), SUCCESS);
    assert_eq!(memory_free(q), SUCCESS);
}

#[test]
fn a_failed_allocation_records_nothing() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    sim.inject(hsa_sim::Fault::NextAllocations, 0, 2);
    assert!(pool_allocate(sim.pool(gpu, PoolKind::DeviceCoarse), 4096, 0).is_err());
    assert!(memory_allocate(sim.region(gpu, PoolKind::DeviceCoarse), 4096).is_err());
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
}

#[test]
fn free_retires_and_a_failed_free_reinstates_the_same_allocation() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let p = device_buffer(&sim, gpu, 4096, 0x11);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert_eq!(snap.regions(), 1);

    // The free fails: the memory is still that allocation, so the entry comes
    // back with its generation and the snapshot still restores it.
    sim.inject(hsa_sim::Fault::NextFrees, 0, 1);
    assert_ne!(pool_free(p), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 1);
    fill(p, 4096, 0x22);
    assert_eq!(snap.restore().restored, 1);
    assert!(all(p, 4096, 0x11));

    // A successful free retires it: nothing is written to the freed memory.
    assert_eq!(pool_free(p), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (0, 1, 0)
    );
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert!(sim.quarantine_intact());
}

#[test]
fn a_recorded_allocation_is_retired_even_after_tracking_was_turned_off() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let p = device_buffer(&sim, gpu, 4096, 1);
    let snap = Snap::of(gpu);
    assert!(!kernel_replay::set_tracking(false));
    assert_eq!(pool_free(p), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    assert_eq!(snap.restore().skipped_not_live, 1);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert!(sim.quarantine_intact());
}

#[test]
fn after_finalize_wrappers_only_chain_and_nothing_is_captured() {
    if !in_child("after_finalize_wrappers_only_chain_and_nothing_is_captured") {
        return;
    }
    let sim = session(1);
    let gpu = sim.gpu(0);
    let coarse = sim.pool(gpu, PoolKind::DeviceCoarse);
    let empty = Snap::of(gpu);
    assert_eq!((empty.ok(), empty.regions()), (true, 0));
    let before = device_buffer(&sim, gpu, 4096, 0x33);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert!(!kernel_replay::is_finalized());
    // A second arena, retained once its snapshot is gone, and an
    // application async copy through the fence (which leaves an idle proxy
    // signal): finalize gives both back to the runtime.
    drop(Snap::of(gpu));
    assert_eq!(
        kernel_replay::testing::retained_for(agent(gpu)) == [0; 3],
        is_baseline(),
        "the baseline keeps no arenas"
    );
    let host = pool_allocate(sim.pool(sim.cpu(), PoolKind::SystemFine), 4096, 0).unwrap();
    fill(host, 4096, 0x33);
    let done = signal_create(1);
    assert_eq!(
        async_copy(before, gpu, host, sim.cpu(), 4096, &[], done),
        SUCCESS
    );
    assert_eq!(
        signal_wait_below(done, 1, std::time::Duration::from_secs(10)),
        0
    );
    signal_destroy(done);
    assert_eq!(pool_free(host), SUCCESS);
    // The application's signal falls before the fence's handler has put its
    // proxy back: wait until the copy is no longer counted in flight.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while kernel_replay::testing::fence_in_flight(gpu.handle) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the fence's count never fell"
        );
        std::thread::yield_now();
    }

    kernel_replay::finalize();
    assert_eq!(kernel_replay::testing::retained_for(agent(gpu)), [0; 3]);
    // Under a forced kernel strategy the live snapshot below still holds
    // the device kernels' runner, and its completion signal with it, until
    // it is dropped.
    assert_eq!(
        sim.count(hsa_sim::Counter::LiveSignals),
        u64::from(!copies_move_everything()),
        "the copy engine's and the fence's signals are destroyed"
    );
    assert!(kernel_replay::is_finalized());
    assert!(!kernel_replay::tracking());
    assert!(
        !kernel_replay::set_tracking(true),
        "tracking cannot come back"
    );
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        0,
        "the inventory is dropped"
    );

    // Allocation and free still work, through to the runtime, unrecorded.
    // (The live snapshot may hold an arena in the runtime's memory too.)
    let live = sim.count(hsa_sim::Counter::LiveAllocations);
    let after = pool_allocate(coarse, 4096, 0).unwrap();
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    assert_eq!(sim.count(hsa_sim::Counter::LiveAllocations), live + 1);
    assert_eq!(pool_free(after), SUCCESS);
    assert_eq!(pool_free(before), SUCCESS);
    assert_eq!(sim.count(hsa_sim::Counter::LiveAllocations), live - 1);

    // Snapshots decline; an earlier snapshot writes nothing.
    let late = Snap::of(gpu);
    assert!(!late.ok());
    assert_eq!(late.reason(), Some(kernel_replay::DeclineReason::Finalized));
    let copies_before = copies(&sim);
    logs_clear();
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (0, 1, 0)
    );
    assert_eq!(copies(&sim), copies_before);
    assert_eq!(
        logs_containing("restore after kr_finalize"),
        ["restore after kr_finalize: 1 region(s) not written"]
    );
    logs_clear();
    assert!(!empty.restore().complete());
    assert_eq!(
        logs_containing("restore after kr_finalize"),
        Vec::<String>::new(),
        "an empty snapshot has nothing to warn about"
    );
    // Finalize released what was retained; the last snapshot's arena goes
    // back to the runtime with it.
    drop(snap);
    drop(late);
    drop(empty);
    assert_eq!(
        sim.count(hsa_sim::Counter::LiveAllocations),
        0,
        "nothing of the library's left in the runtime"
    );
    assert_eq!(
        kernel_replay::host_bytes_in_use() + kernel_replay::device_bytes_in_use(),
        0
    );
    kernel_replay::finalize();
    assert!(kernel_replay::is_finalized(), "finalize twice is harmless");
}

#[test]
fn the_executable_flag_is_checked_before_any_pointer_query() {
    let sim = session(1);
    let pool = sim.pool(sim.gpu(0), PoolKind::DeviceCoarse);
    let queries = sim.count(hsa_sim::Counter::PointerInfoQueries);
    let exec = pool_allocate(pool, 4096, POOL_ALLOCATE_EXECUTABLE_FLAG).unwrap();
    assert_eq!(
        sim.count(hsa_sim::Counter::PointerInfoQueries),
        queries,
        "no query for an executable allocation"
    );
    let plain = pool_allocate(pool, 4096, 0).unwrap();
    assert_eq!(
        sim.count(hsa_sim::Counter::PointerInfoQueries),
        queries + 1,
        "one query for a plain one"
    );
    assert!(!kernel_replay::set_tracking(false));
    let untracked = pool_allocate(pool, 4096, 0).unwrap();
    assert_eq!(
        sim.count(hsa_sim::Counter::PointerInfoQueries),
        queries + 1,
        "no query while tracking is off"
    );
    for p in [exec, plain, untracked] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn setting_aside_what_was_tracked_warns_only_when_there_was_something() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    const WARNING: &str = "are set aside (not captured, not restored)";
    kernel_replay::testing::set_aside_tracked();
    assert_eq!(
        logs_containing(WARNING),
        Vec::<String>::new(),
        "nothing to set aside"
    );

    // Allocations only.
    let p = device_buffer(&sim, gpu, 4096, 1);
    kernel_replay::testing::set_aside_tracked();
    let warned = logs_containing(WARNING);
    assert_eq!(warned.len(), 1, "{:?}", logs());
    assert!(
        warned[0].contains("the 1 tracked allocation(s)"),
        "{warned:?}"
    );
    assert_eq!(pool_free(p), SUCCESS);

    // Executables only: a snapshot registered the loaded one.
    let exe = sim.executable_create();
    sim.add_variable(exe, gpu, "v", 16, false);
    assert!(Snap::of(gpu).ok());
    logs_clear();
    kernel_replay::testing::set_aside_tracked();
    let warned = logs_containing(WARNING);
    assert_eq!(warned.len(), 1, "{:?}", logs());
    assert!(
        warned[0].contains("the 0 tracked allocation(s)"),
        "{warned:?}"
    );
    logs_clear();
    kernel_replay::testing::set_aside_tracked();
    assert_eq!(
        logs_containing(WARNING),
        Vec::<String>::new(),
        "all set aside"
    );
}

#[test]
fn fine_grained_device_memory_is_captured_restored_and_reported_as_its_kind() {
    use kernel_replay::MemoryKind;
    let sim = session(1);
    let gpu = sim.gpu(0);
    let coarse = device_buffer(&sim, gpu, 8192, 1);
    let fine = pool_allocate(sim.pool(gpu, PoolKind::DeviceFine), 4096, 0).unwrap();
    fill(fine, 4096, 2);
    let before = stats2().bytes_captured_by_kind;
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!(snap.regions(), 2);
    assert_eq!(snap.kind_bytes(MemoryKind::Device), 8192);
    assert_eq!(snap.kind_bytes(MemoryKind::DeviceFine), 4096);
    let after = stats2().bytes_captured_by_kind;
    assert_eq!(after[MemoryKind::Device.code() as usize] - before[0], 8192);
    assert_eq!(
        after[MemoryKind::DeviceFine.code() as usize] - before[1],
        4096
    );
    assert!(after[2..].iter().zip(&before[2..]).all(|(a, b)| a == b));
    // A kernel's atomics on the fine-grained buffer (pass 1) do not leak
    // into pass 2.
    fill(fine, 4096, 9);
    fill(coarse, 8192, 9);
    // SAFETY: a live snapshot.
    assert!(snap.restore_all());
    assert!(all(fine, 4096, 2) && all(coarse, 8192, 1));
    // No longer reported as device memory the snapshot does not cover.
    assert_eq!(kernel_replay::untracked(agent(gpu)).bytes, Some(0));
    for p in [coarse, fine] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}
