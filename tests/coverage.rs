//! What a snapshot covers and what it does not: the footprint estimate, the
//! untracked device memory (reported, logged once, in the stats), and the
//! application's allocations that the library's retained arenas must never
//! make fail.

mod common;

use common::*;
use hsa_sim::PoolKind;

const MIB: usize = 1 << 20;

#[test]
fn the_footprint_is_what_the_next_snapshot_takes() {
    let sim = session(2);
    let (gpu, other) = (sim.gpu(0), sim.gpu(1));
    device_buffer(&sim, gpu, 3 * MIB, 1);
    device_buffer(&sim, gpu, 4096, 2);
    device_buffer(&sim, other, MIB, 3);
    let exe = sim.executable_create();
    sim.add_variable(exe, gpu, "counter", 64, false);
    sim.add_variable(exe, gpu, "table", 2 << 20, false);

    // Before any snapshot walked the executable (under every storage
    // policy, the baseline's included): the estimate walks it.
    let estimate = kernel_replay::estimate_footprint(agent(gpu));
    assert_eq!(
        (estimate.regions, estimate.bytes),
        (4, (5 * MIB + 4096 + 64) as u64)
    );
    let snap = Snap::of(gpu);
    assert_eq!(
        (estimate.regions, estimate.bytes),
        (snap.regions(), snap.bytes()),
        "the estimate matches what was taken"
    );
    let again = kernel_replay::estimate_footprint(agent(gpu));
    assert_eq!(
        (again.regions, again.bytes),
        (estimate.regions, estimate.bytes)
    );
    assert_eq!(kernel_replay::estimate_footprint(agent(other)).regions, 1);
    assert_eq!(
        kernel_replay::estimate_footprint(agent(sim.cpu())).regions,
        0
    );
}

#[test]
fn an_executable_loaded_after_a_snapshot_is_in_the_next_estimate() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    device_buffer(&sim, gpu, 4096, 1);
    drop(Snap::of(gpu));
    let exe = sim.executable_create();
    sim.add_variable(exe, gpu, "late", 512, false);
    let estimate = kernel_replay::estimate_footprint(agent(gpu));
    assert_eq!((estimate.regions, estimate.bytes), (2, 4096 + 512));
    let snap = Snap::of(gpu);
    assert_eq!((snap.regions(), snap.bytes()), (2, 4096 + 512));
}

#[test]
fn an_unloaded_executables_variables_leave_the_footprint() {
    let sim = session(1);
    let _policy = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let gpu = sim.gpu(0);
    device_buffer(&sim, gpu, 4096, 1);
    let exe = sim.executable_create();
    sim.add_variable(exe, gpu, "counter", 256, false);
    drop(Snap::of(gpu));
    assert_eq!(kernel_replay::estimate_footprint(agent(gpu)).regions, 2);

    // Unloaded: a snapshot now would not take its variable, and the
    // estimate says so at once (not only after the next snapshot's walk).
    assert_eq!(executable_destroy(exe), SUCCESS);
    let footprint = kernel_replay::estimate_footprint(agent(gpu));
    assert_eq!((footprint.regions, footprint.bytes), (1, 4096));
    let snap = Snap::of(gpu);
    assert_eq!((snap.regions(), snap.bytes()), (1, 4096));
}

#[test]
fn memory_allocated_before_tracking_is_reported_untracked_and_logged_once() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    assert!(!kernel_replay::set_tracking(false));
    let early = pool_allocate(pool, 96 * MIB, 0).unwrap();
    assert!(kernel_replay::set_tracking(true));
    device_buffer(&sim, gpu, MIB, 1);

    let untracked = kernel_replay::untracked(agent(gpu));
    assert!(untracked.bytes.is_some());
    assert_eq!(untracked.bytes, Some(96 * MIB as u64));
    assert_eq!((untracked.mappings, untracked.mapping_bytes), (0, 0));
    assert_eq!(
        kernel_replay::untracked(agent(gpu)).bytes.unwrap_or(0),
        96 * MIB as u64
    );

    // A snapshot's own arena is the library's, not the application's.
    let first = Snap::of(gpu);
    assert!(first.ok());
    assert_eq!(
        kernel_replay::untracked(agent(gpu)).bytes.unwrap_or(0),
        96 * MIB as u64
    );
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
    assert_eq!(kernel_replay::untracked(agent(gpu)).bytes.unwrap_or(0), 0);
}

#[test]
fn little_untracked_memory_is_not_logged_and_unknown_is_said() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    assert!(!kernel_replay::set_tracking(false));
    device_buffer(&sim, gpu, MIB, 0);
    assert!(kernel_replay::set_tracking(true));
    let _snap = Snap::of(gpu);
    assert!(logs_containing("not covered by its snapshots").is_empty());
    assert_eq!(
        kernel_replay::untracked(agent(gpu)).bytes.unwrap_or(0),
        MIB as u64
    );

    // A runtime that does not report free memory: unknown, not zero-as-fact.
    sim.set_mode(hsa_sim::Mode::MemoryAvailSupported, false);
    let untracked = kernel_replay::untracked(agent(gpu));
    assert_eq!(untracked.bytes, None, "unknown, not zero-as-fact");
    sim.set_mode(hsa_sim::Mode::MemoryAvailSupported, true);
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
    assert_eq!(kernel_replay::device_bytes_in_use(), 0);
    assert_eq!(held_host(), host_held);
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
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
    assert_eq!(
        kernel_replay::device_bytes_in_use(),
        full.arena,
        "the arena is kept"
    );
}

/// Host bytes the library holds (pinned and pageable arenas).
fn held_host() -> u64 {
    kernel_replay::host_bytes_in_use()
}

#[test]
fn a_retained_arena_that_holds_the_snapshot_is_reused_however_full_the_device() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let full = device_nearly_full(&sim, gpu);
    // Less free than the safety margin (at least 256 MiB): a device arena
    // sized from what is free would not hold the 256 MiB buffer, but the
    // retained one does, and it is the snapshot's to reuse.
    assert!(!kernel_replay::set_tracking(false));
    while memory_avail(gpu) >= 128 * MIB as u64 {
        pool_allocate(pool, 128 * MIB, 0).expect("filler");
    }
    assert!(kernel_replay::set_tracking(true));
    let snap = Snap::of(gpu);
    assert_eq!(
        snap.tier_bytes(kernel_replay::Tier::Device),
        256 * MIB as u64,
        "{:?}",
        snap.reason()
    );
    assert_eq!(kernel_replay::device_bytes_in_use(), full.arena);
}

#[test]
fn untracked_memory_is_measured_against_a_device_pool_set_by_the_tool() {
    // Pools set for an agent stay set: in a process of its own.
    if !in_child("untracked_memory_is_measured_against_a_device_pool_set_by_the_tool") {
        return;
    }
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    assert!(kernel_replay::set_storage_pools(
        agent(gpu),
        kernel_replay::StoragePools {
            device_pool: Some(kernel_replay::hsa::sys::hsa_amd_memory_pool_t {
                handle: pool.handle
            }),
            host_pool: None,
        }
    ));
    assert!(!kernel_replay::set_tracking(false));
    pool_allocate(pool, 96 * MIB, 0).unwrap();
    assert!(kernel_replay::set_tracking(true));
    device_buffer(&sim, gpu, MIB, 1);
    assert_eq!(
        kernel_replay::untracked(agent(gpu)).bytes,
        Some(96 * MIB as u64),
        "in use on the pool's device, less what is tracked"
    );
}
