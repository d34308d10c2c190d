//! What a snapshot covers and what it does not: the footprint estimate, the
//! untracked device memory (reported, logged once, in the stats), and the
//! application's allocations that the library's retained arenas must never
//! make fail.

mod common;

use common::*;
use hsa_sim::PoolKind;
use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;

const MIB: usize = 1 << 20;

#[test]
fn the_footprint_is_what_the_next_snapshot_takes() {
    let sim = session(2);
    // The baseline policy keeps no discovery cache: variables are counted
    // only by the policies that cache what a snapshot walked.
    let _policy = PolicyGuard::set(kr_storage_policy_t::KR_STORAGE_AUTO);
    let (gpu, other) = (sim.gpu(0), sim.gpu(1));
    device_buffer(&sim, gpu, 3 * MIB, 1);
    device_buffer(&sim, gpu, 4096, 2);
    device_buffer(&sim, other, MIB, 3);
    let exe = sim.executable_create();
    sim.add_variable(exe, gpu, "counter", 256, false);

    // Variables are counted once a snapshot has walked their executable.
    let before_walk = kr_estimate_footprint(agent(gpu));
    assert_eq!(
        (before_walk.regions, before_walk.bytes),
        (2, (3 * MIB + 4096) as u64)
    );
    let snap = Snap::of(gpu);
    let footprint = kr_estimate_footprint(agent(gpu));
    assert_eq!(
        (footprint.regions, footprint.bytes),
        (snap.regions(), snap.bytes()),
        "the estimate matches what was taken"
    );
    assert_eq!(footprint.regions, 3);
    assert_eq!(kr_estimate_footprint(agent(other)).regions, 1);
    assert_eq!(kr_estimate_footprint(agent(sim.cpu())).regions, 0);
}

#[test]
fn an_unloaded_executables_variables_leave_the_footprint() {
    let sim = session(1);
    let _policy = PolicyGuard::set(kr_storage_policy_t::KR_STORAGE_AUTO);
    let gpu = sim.gpu(0);
    device_buffer(&sim, gpu, 4096, 1);
    let exe = sim.executable_create();
    sim.add_variable(exe, gpu, "counter", 256, false);
    drop(Snap::of(gpu));
    assert_eq!(kr_estimate_footprint(agent(gpu)).regions, 2);

    // Unloaded: a snapshot now would not take its variable, and the
    // estimate says so at once (not only after the next snapshot's walk).
    assert_eq!(executable_destroy(exe), SUCCESS);
    let footprint = kr_estimate_footprint(agent(gpu));
    assert_eq!((footprint.regions, footprint.bytes), (1, 4096));
    let snap = Snap::of(gpu);
    assert_eq!((snap.regions(), snap.bytes()), (1, 4096));
}

#[test]
fn memory_allocated_before_tracking_is_reported_untracked_and_logged_once() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    assert!(!kr_set_tracking_enabled(false));
    let early = pool_allocate(pool, 96 * MIB, 0).unwrap();
    assert!(kr_set_tracking_enabled(true));
    device_buffer(&sim, gpu, MIB, 1);

    let untracked = kr_untracked_summary(agent(gpu));
    assert!(untracked.known);
    assert_eq!(untracked.bytes, 96 * MIB as u64);
    assert_eq!((untracked.vmem_regions, untracked.vmem_bytes), (0, 0));
    assert_eq!(kr_untracked_device_bytes(agent(gpu)), 96 * MIB as u64);

    // A snapshot's own arena is the library's, not the application's.
    let first = Snap::of(gpu);
    assert!(first.ok());
    assert_eq!(kr_untracked_device_bytes(agent(gpu)), 96 * MIB as u64);
    assert_eq!(stats2().untracked_device_bytes, 96 * MIB as u64);
    let warned = logs_containing("not covered by its snapshots");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains(&(96 * MIB).to_string()));
    let _second = Snap::of(gpu);
    assert_eq!(
        logs_containing("not covered by its snapshots").len(),
        1,
        "once per agent"
    );

    // Freed: nothing untracked any more.
    assert_eq!(pool_free(early), SUCCESS);
    assert_eq!(kr_untracked_device_bytes(agent(gpu)), 0);
}

#[test]
fn little_untracked_memory_is_not_logged_and_unknown_is_said() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    assert!(!kr_set_tracking_enabled(false));
    device_buffer(&sim, gpu, MIB, 0);
    assert!(kr_set_tracking_enabled(true));
    let _snap = Snap::of(gpu);
    assert!(logs_containing("not covered by its snapshots").is_empty());
    assert_eq!(kr_untracked_device_bytes(agent(gpu)), MIB as u64);

    // A runtime that does not report free memory: unknown, not zero-as-fact.
    sim.set_memory_avail_supported(false);
    let untracked = kr_untracked_summary(agent(gpu));
    assert!(!untracked.known);
    assert_eq!(untracked.bytes, 0);
    sim.set_memory_avail_supported(true);
}

#[test]
fn a_pool_allocation_refused_for_memory_is_retried_after_releasing_arenas() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let full = device_nearly_full(&sim, gpu);
    // Host arenas do not compete with device memory: they stay.
    let host_held = held_host();

    let ptr = pool_allocate(pool, full.after_release as usize, 0)
        .expect("the retried allocation succeeds");
    let after = stats2();
    assert_eq!(
        after.application_retries,
        full.stats.application_retries + 1
    );
    assert_eq!(
        after.bytes_released_for_application,
        full.stats.bytes_released_for_application + full.arena
    );
    assert_eq!(kr_device_bytes_in_use(), 0);
    assert_eq!(held_host(), host_held);
    assert_eq!(
        kr_tracked_count(agent(gpu)),
        2,
        "the retried allocation is tracked"
    );
    assert_eq!(pool_free(ptr), SUCCESS);

    // Nothing left to release: the runtime's refusal is the answer.
    assert!(pool_allocate(pool, full.after_release as usize + MIB, 0).is_err());
    assert_eq!(stats2().application_retries, after.application_retries);
}

#[test]
fn a_region_allocation_refused_for_memory_is_retried_too() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let full = device_nearly_full(&sim, gpu);
    let ptr = memory_allocate(
        sim.region(gpu, PoolKind::DeviceCoarse),
        full.after_release as usize,
    )
    .expect("the retried allocation succeeds");
    assert_eq!(
        stats2().application_retries,
        full.stats.application_retries + 1
    );
    assert_eq!(memory_free(ptr), SUCCESS);
}

#[test]
fn a_refusal_for_another_reason_is_not_retried() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let full = device_nearly_full(&sim, gpu);
    // Larger than the device: INVALID_ALLOCATION, which no release can cure.
    assert!(pool_allocate(pool, 32 << 30, 0).is_err());
    assert_eq!(stats2().application_retries, full.stats.application_retries);
    assert_eq!(kr_device_bytes_in_use(), full.arena, "the arena is kept");
}

#[test]
fn an_older_caller_gets_only_the_stats_it_declared() {
    let _sim = session(1);
    let mut old = [0xA5u8; std::mem::size_of::<kr_stats2_t>()];
    let declared = std::mem::size_of::<usize>() + std::mem::size_of::<kr_stats_t>();
    old[..std::mem::size_of::<usize>()].copy_from_slice(&declared.to_ne_bytes());
    // SAFETY: writable for the declared size (and more, to see it untouched).
    unsafe { kr_get_stats2(old.as_mut_ptr().cast()) };
    assert!(
        old[declared..].iter().all(|&b| b == 0xA5),
        "nothing past the declared size"
    );
    assert!(old[std::mem::size_of::<usize>()..declared]
        .iter()
        .any(|&b| b != 0xA5));
    // SAFETY: NULL is accepted.
    unsafe { kr_get_stats2(std::ptr::null_mut()) };
}

/// Host bytes the library holds (pinned and pageable arenas).
fn held_host() -> u64 {
    kr_host_bytes_in_use()
}
