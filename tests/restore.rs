//! Restore: what is written back, what is skipped, and how failures are
//! reported.

mod common;

use common::*;
use hsa_sim::PoolKind;
use kernel_replay::RestoreReport;

#[test]
fn declined_snapshots_restore_nothing() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let p = device_buffer(&sim, gpu, 4096, 1);
    // No iterator set and a runtime without the loader extension: declined.
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 1);
    let declined = Snap::of(gpu);
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 0);
    assert!(!declined.ok());
    fill(p, 4096, 2);
    assert_eq!(declined.restore(), RestoreReport::default());
    assert!(
        !declined.restore_all(),
        "a declined snapshot is not restored"
    );
    assert_eq!(copies(&sim), 0);
    assert!(all(p, 4096, 2));
}

#[test]
fn a_reused_address_is_another_allocation_and_is_not_written() {
    let sim = session(1);
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let stays = device_buffer(&sim, gpu, 4096, 0x11);
    let goes = device_buffer(&sim, gpu, 4096, 0x22);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 2);

    assert_eq!(pool_free(goes), SUCCESS);
    let reused = pool_allocate(pool, 4096, 0).unwrap();
    assert_eq!(reused, goes, "the runtime handed the freed address back");
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        2,
        "the new allocation is tracked"
    );
    fill(reused, 4096, 0x99);
    fill(stays, 4096, 0x98);

    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (1, 1, 0)
    );
    assert!(all(reused, 4096, 0x99), "the new owner's data is intact");
    assert!(all(stays, 4096, 0x11));
    assert_eq!(
        logs_containing("no longer the captured allocation").len(),
        1
    );
    pool_free(stays);
    pool_free(reused);
}

#[test]
fn a_freed_region_is_skipped_and_freed_memory_is_never_touched() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let a = device_buffer(&sim, gpu, 4096, 1);
    let b = device_buffer(&sim, gpu, 4096, 2);
    let snap = Snap::of(gpu);
    pool_free(b);
    fill(a, 4096, 9);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (1, 1, 0)
    );
    assert!(all(a, 4096, 1));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert!(sim.quarantine_intact());
    pool_free(a);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (0, 2, 0)
    );
    assert!(sim.quarantine_intact());
}

#[test]
fn a_failed_copy_is_reported_and_the_other_regions_are_still_restored() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let a = device_buffer(&sim, gpu, 4096, 1);
    let b = device_buffer(&sim, gpu, 4096, 2);
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "v", 16, false);
    let w = sim.add_variable(exe, gpu, "w", 16, false);
    fill(v, 16, 3);
    fill(w, 16, 4);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 4);
    for (p, n) in [(a, 4096), (b, 4096), (v, 16), (w, 16)] {
        fill(p, n, 0xEE);
    }
    sim.inject(hsa_sim::Fault::CopiesInto, a as u64, 0);
    sim.inject(hsa_sim::Fault::CopiesInto, v as u64, 0);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (2, 0, 2)
    );
    assert!(
        all(a, 4096, 0xEE) && all(v, 16, 0xEE),
        "the failed copies wrote nothing"
    );
    assert!(all(b, 4096, 2) && all(w, 16, 4));
    assert_eq!(logs_containing("failed with HSA status").len(), 2);
    sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
    sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0);
    assert_eq!(snap.restore().restored, 4, "a later restore succeeds");
    assert!(all(a, 4096, 1) && all(v, 16, 3));
}

#[test]
fn a_region_shrunk_below_the_captured_size_is_not_written() {
    // The same base handed back for a smaller allocation must not receive
    // the larger captured copy.
    let sim = session(1);
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let p = device_buffer(&sim, gpu, 8192, 1);
    let snap = Snap::of(gpu);
    pool_free(p);
    let q = pool_allocate(pool, 100, 0).unwrap();
    assert_eq!(q, p);
    assert_eq!(snap.restore().skipped_not_live, 1);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    pool_free(q);
}

#[test]
fn restores_repeat_and_each_returns_the_original_state() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let p = device_buffer(&sim, gpu, 4096, 5);
    let snap = Snap::of(gpu);
    for round in 0..10u8 {
        fill(p, 4096, 100 + round);
        assert_eq!(snap.restore().restored, 1);
        assert!(all(p, 4096, 5));
    }
    if copies_move_everything() {
        assert_eq!(copies(&sim), 11, "captured once, restored ten times");
    }
    pool_free(p);
}

/// Nine small buffers on `gpu`, each filled with its index.
fn nine_buffers(sim: &hsa_sim::SimSession, gpu: hsa_sim::Agent) -> Vec<*mut u8> {
    (0..9u8).map(|i| device_buffer(sim, gpu, 256, i)).collect()
}

#[test]
fn the_first_eight_skipped_regions_are_named_and_the_rest_counted() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let buffers = nine_buffers(&sim, gpu);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 9);
    for &p in &buffers[..8] {
        assert_eq!(pool_free(p), SUCCESS);
    }
    logs_clear();
    assert_eq!(snap.restore().skipped_not_live, 8);
    assert_eq!(
        logs_containing("no longer the captured allocation").len(),
        8
    );
    assert_eq!(
        logs_containing("more region(s)"),
        Vec::<String>::new(),
        "eight are all named"
    );
    assert_eq!(pool_free(buffers[8]), SUCCESS);
    logs_clear();
    assert_eq!(snap.restore().skipped_not_live, 9);
    assert_eq!(
        logs_containing("no longer the captured allocation").len(),
        8
    );
    assert_eq!(
        logs_containing("more region(s)"),
        ["restore skipped 1 more region(s)"]
    );
}

#[test]
fn the_first_eight_failed_regions_are_named_and_the_rest_counted() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let buffers = nine_buffers(&sim, gpu);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 9);
    for &p in &buffers[..8] {
        sim.inject(hsa_sim::Fault::CopiesInto, p as u64, 0);
    }
    logs_clear();
    assert_eq!(snap.restore().failed, 8);
    assert_eq!(logs_containing("failed with HSA status").len(), 8);
    assert_eq!(
        logs_containing("more region(s)"),
        Vec::<String>::new(),
        "eight are all named"
    );
    sim.inject(hsa_sim::Fault::CopiesInto, buffers[8] as u64, 0);
    logs_clear();
    assert_eq!(snap.restore().failed, 9);
    assert_eq!(logs_containing("failed with HSA status").len(), 8);
    assert_eq!(
        logs_containing("more region(s)"),
        ["restore failed for 1 more region(s)"]
    );
    sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
    sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0);
    for p in buffers {
        assert_eq!(pool_free(p), SUCCESS);
    }
}
