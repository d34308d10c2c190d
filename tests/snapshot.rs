//! What a snapshot captures. (Every way it declines: tests/fault_matrix.rs.)

mod common;

use common::*;
use kernel_replay::{DeclineReason, DeviceBudget, StoragePolicy};

#[test]
fn captures_the_agents_tracked_allocations_and_module_variables() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    let a = device_buffer(&sim, gpu0, 1000, 0xA1);
    let b = device_buffer(&sim, gpu0, 70_000, 0xB2);
    let other = device_buffer(&sim, gpu1, 4096, 0xC3);
    let exe = sim.executable_create();
    let counter = sim.add_variable(exe, gpu0, "counter", 8, false);
    let table = sim.add_variable(exe, gpu0, "lookup", 256, true);
    let other_var = sim.add_variable(exe, gpu1, "peer_counter", 8, false);
    sim.add_kernel(exe, gpu0, "kernel");
    fill(counter, 8, 0x01);
    fill(table, 256, 0x02);
    fill(other_var, 8, 0x03);

    let snap = Snap::of(gpu0);
    assert!(snap.ok());
    assert_eq!(snap.reason(), None);
    assert_eq!(
        snap.regions(),
        4,
        "two buffers and two variables of gpu0; no kernel, nothing of gpu1"
    );
    assert_eq!(snap.bytes(), 1000 + 70_000 + 8 + 256);
    assert!(held() >= snap.bytes(), "the copies are held somewhere");
    if is_baseline() {
        assert_eq!(
            kernel_replay::host_bytes_in_use(),
            snap.bytes(),
            "the baseline holds exactly the bytes"
        );
    }
    if copies_move_everything() {
        assert_eq!(copies(&sim), 4, "one copy per region");
    }

    // A pass mutates everything; restore brings gpu0's state back only.
    for (p, n) in [
        (a, 1000),
        (b, 70_000),
        (other, 4096),
        (counter, 8),
        (table, 256),
        (other_var, 8),
    ] {
        fill(p, n, 0xEE);
    }
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (4, 0, 0)
    );
    assert!(all(a, 1000, 0xA1) && all(b, 70_000, 0xB2));
    assert!(all(counter, 8, 0x01) && all(table, 256, 0x02));
    assert!(
        all(other, 4096, 0xEE) && all(other_var, 8, 0xEE),
        "another agent's state is left alone"
    );
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);

    drop(snap);
    assert_nothing_held();
    for p in [a, b, other] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn restore_writes_the_captured_bytes_not_a_pattern() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let n = 10_000;
    let p = device_buffer(&sim, gpu, n, 0);
    let original: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
    // SAFETY: p is a live allocation of n bytes.
    unsafe { std::ptr::copy_nonoverlapping(original.as_ptr(), p, n) };
    let snap = Snap::of(gpu);
    for i in (0..n).step_by(3) {
        // SAFETY: in bounds.
        unsafe { *p.add(i) ^= 0x5A };
    }
    snap.restore();
    assert_eq!(bytes(p, n), original);
    assert_eq!(pool_free(p), SUCCESS);
}

#[test]
fn module_variables_are_discovered_at_every_snapshot() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let first = Snap::of(gpu);
    assert!(first.ok());
    assert_eq!(first.regions(), 0, "an empty capture is ok");
    // Loaded (or populated) after the first snapshot: found by the next one.
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "late", 64, true);
    fill(v, 64, 9);
    let second = Snap::of(gpu);
    assert_eq!(second.regions(), 1);
    fill(v, 64, 10);
    assert_eq!(second.restore().restored, 1);
    assert!(all(v, 64, 9));
}

#[test]
fn zero_and_oversized_symbols_are_skipped_with_a_warning_for_the_oversized() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let exe = sim.executable_create();
    sim.add_variable_raw(exe, gpu, "zero_address", 0, 64);
    sim.add_variable_raw(exe, gpu, "zero_size", 0x7000_0000, 0);
    let huge_address = 0x7100_0000u64;
    sim.add_variable_raw(exe, gpu, "huge", huge_address, (1u32 << 30) + 1);
    let exactly_cap = sim.add_variable(exe, gpu, "small", 16, false);
    fill(exactly_cap, 16, 4);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert_eq!(snap.regions(), 1);
    let warned = logs_containing("over the 1 GiB cap");
    assert_eq!(warned.len(), 1, "{:?}", logs());
    assert!(
        warned[0].contains(&format!("{huge_address:#x}"))
            && warned[0].contains(&((1u64 << 30) + 1).to_string())
    );
}

#[test]
fn a_variable_of_exactly_the_cap_is_not_skipped() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let exe = sim.executable_create();
    // No storage behind it: budgets far below 1 GiB make the snapshot
    // decline before any copy, which shows the variable was counted.
    sim.add_variable_raw(exe, gpu, "exactly_cap", 0x7200_0000, 1u32 << 30);
    kernel_replay::set_device_budget(DeviceBudget::Bytes(1 << 20));
    kernel_replay::set_host_budget(Some(1 << 20));
    let snap = Snap::of(gpu);
    assert_eq!(logs_containing("over the 1 GiB cap"), Vec::<String>::new());
    assert!(
        matches!(
            snap.reason(),
            Some(DeclineReason::HostMemory | DeclineReason::DeviceMemory)
        ),
        "{:?}",
        snap.reason()
    );
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn a_snapshot_names_the_agent_it_captured() {
    let sim = session(2);
    let gpu1 = sim.gpu(1);
    let snap = Snap::of(gpu1);
    let taken = snap.0.as_ref().map(|s| s.agent().handle);
    assert_eq!(taken.ok(), Some(agent(gpu1).handle));
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 1);
    let declined = Snap::of(gpu1);
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 0);
    let declined = declined.0.as_ref().err().map(|d| d.agent().handle);
    assert_eq!(declined, Some(agent(gpu1).handle));
}

#[test]
fn the_same_variable_reported_twice_is_captured_once() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "v", 32, false);
    sim.add_variable_raw(exe, gpu, "alias", v as u64, 32);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 1);
    assert_eq!(snap.bytes(), 32);
}

#[test]
fn two_symbols_at_one_address_keep_the_larger_extent() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    // An array and symbols naming its first elements (one reported before
    // the array, one after, in another executable): the capture must cover
    // the whole array whatever order the runtime reports them in.
    let early = sim.executable_create();
    let exe = sim.executable_create();
    let array = sim.add_variable(exe, gpu, "array", 64, false);
    sim.add_variable_raw(early, gpu, "first", array as u64, 16);
    sim.add_variable_raw(exe, gpu, "first_again", array as u64, 8);
    fill(array, 64, 0x21);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 1);
    assert_eq!(snap.bytes(), 64);
    fill(array, 64, 0x99);
    assert_eq!(snap.restore().restored, 1);
    assert!(all(array, 64, 0x21), "every byte of the larger extent");
}

#[test]
fn the_host_budget_holds_across_live_snapshots() {
    // The host budget bounds the host tiers; the device tier has its own.
    for host_policy in [
        kernel_replay::StoragePolicy::Baseline,
        kernel_replay::StoragePolicy::Pageable,
        kernel_replay::StoragePolicy::Pinned,
    ] {
        let sim = session(1);
        let _policy = PolicyGuard::set(host_policy);
        let gpu = sim.gpu(0);
        let a = device_buffer(&sim, gpu, 4096, 1);
        let b = device_buffer(&sim, gpu, 8192, 2);
        kernel_replay::set_host_budget(Some(4096 + 8192));
        let first = Snap::of(gpu);
        assert!(first.ok(), "{host_policy:?}: {:?}", logs());
        assert_eq!(
            kernel_replay::host_bytes_in_use(),
            4096 + 8192,
            "{host_policy:?}"
        );
        // A second one does not fit beside it, and leaves nothing behind.
        let second = Snap::of(gpu);
        assert_eq!(
            second.reason(),
            Some(kernel_replay::DeclineReason::HostMemory),
            "{host_policy:?}"
        );
        assert_eq!(
            kernel_replay::host_bytes_in_use(),
            4096 + 8192,
            "{host_policy:?}"
        );
        drop(first);
        assert!(
            Snap::of(gpu).ok(),
            "{host_policy:?}: it fits once the first is released"
        );
        assert_nothing_held();
        kernel_replay::set_host_budget(None);
        pool_free(a);
        pool_free(b);
    }
}

#[test]
fn a_region_freed_while_the_snapshot_runs_is_dropped_not_a_failure() {
    // The executable iterator runs inside kr_snap, after the inventory was
    // read: a free there is a free between inventory and copy.
    static FREE_ME: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    unsafe extern "C" fn iterate_and_free(
        callback: Option<kernel_replay::ExecutableCallback>,
        data: *mut std::ffi::c_void,
    ) -> kernel_replay::hsa::hsa_status_t {
        let p = FREE_ME.swap(0, std::sync::atomic::Ordering::SeqCst) as *mut u8;
        if !p.is_null() {
            assert_eq!(pool_free(p), SUCCESS);
        }
        // SAFETY: forwards to the runtime's iterator.
        unsafe { sim_iterator().unwrap()(callback, data) }
    }
    let sim = session(1);
    let gpu = sim.gpu(0);
    let keep = device_buffer(&sim, gpu, 4096, 1);
    let doomed = device_buffer(&sim, gpu, 4096, 2);
    FREE_ME.store(doomed as usize, std::sync::atomic::Ordering::SeqCst);
    kernel_replay::set_executable_iterator(Some(iterate_and_free));
    let snap = Snap::of(gpu);
    kernel_replay::set_executable_iterator(None);
    assert!(snap.ok());
    assert_eq!(snap.regions(), 1);
    assert_eq!(snap.bytes(), 4096);
    assert_eq!(
        sim.count(hsa_sim::Counter::CopyViolations),
        0,
        "the freed region was never read"
    );
    if copies_move_everything() {
        assert_eq!(copies(&sim), 1);
    }
    drop(snap);
    pool_free(keep);
}

#[test]
fn the_runtime_loaders_iterator_is_used_unless_the_tool_sets_one() {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    /// A tool's iterator that reports no executable at all.
    unsafe extern "C" fn reports_nothing(
        _: Option<kernel_replay::ExecutableCallback>,
        _: *mut std::ffi::c_void,
    ) -> kernel_replay::hsa::hsa_status_t {
        CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SUCCESS
    }
    let sim = session(1);
    let gpu = sim.gpu(0);
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "v", 64, false);
    fill(v, 64, 1);
    // No iterator set (the session's default): the loader extension's,
    // found through the runtime's core table, lists the executable.
    let through_loader = Snap::of(gpu);
    assert!(through_loader.ok());
    assert_eq!(through_loader.regions(), 1);
    // A tool's own iterator overrides it.
    kernel_replay::set_executable_iterator(Some(reports_nothing));
    let through_tool = Snap::of(gpu);
    kernel_replay::set_executable_iterator(None);
    assert!(through_tool.ok());
    assert_eq!(through_tool.regions(), 0);
    assert_eq!(CALLS.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Unset again: back to the loader's.
    assert_eq!(Snap::of(gpu).regions(), 1);
    // A runtime without the loader extension, and no iterator set.
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 1);
    let declined = Snap::of(gpu);
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 0);
    assert_eq!(
        declined.reason(),
        Some(kernel_replay::DeclineReason::NoExecutableIterator)
    );
}

#[test]
fn snapshots_of_an_unknown_agent_are_empty_and_ok() {
    let sim = session(1);
    device_buffer(&sim, sim.gpu(0), 4096, 1);
    let snap = Snap::of(hsa_sim::Agent {
        handle: 0xDEAD_BEEF,
    });
    assert!(snap.ok());
    assert_eq!(snap.regions(), 0);
    assert_eq!(
        kernel_replay::tracked(agent(hsa_sim::Agent {
            handle: 0xDEAD_BEEF
        }))
        .regions,
        0
    );
}

#[test]
fn a_baseline_snapshot_of_module_variables_only() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let _policy = PolicyGuard::set(StoragePolicy::Baseline);
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "only", 32, false);
    let w = sim.add_variable(exe, gpu, "also", 16, false);
    fill(v, 32, 1);
    fill(w, 16, 2);
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!((snap.regions(), snap.bytes()), (2, 48));
    fill(v, 32, 7);
    fill(w, 16, 7);
    assert!(snap.restore_all());
    assert!(all(v, 32, 1) && all(w, 16, 2));
}

#[test]
fn batched_copies_reuse_their_completion_signals() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let _policy = PolicyGuard::set(StoragePolicy::Auto);
    let _batch = BatchGuard::set(true);
    let buffers: Vec<_> = (0..4u8)
        .map(|i| device_buffer(&sim, gpu, 4096, i))
        .collect();
    let first = Snap::of(gpu);
    assert!(first.restore_all());
    drop(first);
    let signals = sim.count(hsa_sim::Counter::LiveSignals);
    assert!(signals > 0, "the copies were batched");
    for _ in 0..20 {
        let snap = Snap::of(gpu);
        assert!(snap.restore_all());
    }
    assert_eq!(
        sim.count(hsa_sim::Counter::LiveSignals),
        signals,
        "no snapshot or restore keeps signals of its own"
    );
    for p in buffers {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn discovery_picks_a_coarse_device_pool_and_a_fine_grained_host_pool() {
    use hsa_sim::PoolKind;
    use kernel_replay::testing::storage_pools;
    let sim = session(2);
    let cpu = sim.cpu();
    let host = Some((sim.pool(cpu, PoolKind::SystemFine).handle, cpu.handle));
    for gpu in sim.gpus() {
        let device = Some(sim.pool(gpu, PoolKind::DeviceCoarse).handle);
        assert_eq!(storage_pools(agent(gpu)), (device, host), "{gpu:?}");
    }
    assert_eq!(
        storage_pools(agent(cpu)),
        (None, None),
        "a CPU agent has no tier of its own"
    );
}
