//! Storage tiers, arenas, batched copies, the discovery cache and the
//! counters: what each policy does with a snapshot's copies.

mod common;

use common::*;
use hsa_sim::PoolKind;

/// Two buffers and a module variable on gpu0, filled with known bytes.
fn workload(sim: &hsa_sim::SimSession) -> Vec<(*mut u8, usize, u8)> {
    let gpu = sim.gpu(0);
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "v", 64, false);
    fill(v, 64, 3);
    vec![
        (device_buffer(sim, gpu, 100_000, 1), 100_000, 1),
        (device_buffer(sim, gpu, 4096, 2), 4096, 2),
        (v, 64, 3),
    ]
}

fn mutate(regions: &[(*mut u8, usize, u8)]) {
    for &(p, n, b) in regions {
        fill(p, n, !b);
    }
}

fn restored(regions: &[(*mut u8, usize, u8)]) -> bool {
    regions.iter().all(|&(p, n, b)| all(p, n, b))
}

const TOTAL: u64 = 100_000 + 4096 + 64;

#[test]
fn auto_keeps_everything_in_device_memory_when_it_fits() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let regions = workload(&sim);
    let tracked_before = kernel_replay::tracked(agent(sim.gpu(0))).regions;
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Device), TOTAL);
    assert_eq!(
        snap.tier_bytes(kernel_replay::Tier::Pinned)
            + snap.tier_bytes(kernel_replay::Tier::Pageable),
        0
    );
    assert!(kernel_replay::device_bytes_in_use() >= TOTAL);
    assert_eq!(kernel_replay::host_bytes_in_use(), 0);
    // The arena is the library's: never tracked, never captured itself.
    assert_eq!(
        kernel_replay::tracked(agent(sim.gpu(0))).regions,
        tracked_before
    );
    assert_eq!(snap.regions(), 3);
    if copies_move_everything() {
        assert_eq!(
            copies(&sim),
            sim.count(hsa_sim::Counter::CopiesDeviceToDevice),
            "device-to-device only"
        );
    }
    mutate(&regions);
    assert_eq!(snap.restore().restored, 3);
    assert!(restored(&regions));
}

#[test]
fn auto_spills_past_the_device_budget_to_pinned_then_pageable() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let regions = workload(&sim);
    // Room for the first region only on the device.
    kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Bytes(100_000));
    let snap = Snap::of(sim.gpu(0));
    let (device, pinned) = (
        snap.tier_bytes(kernel_replay::Tier::Device),
        snap.tier_bytes(kernel_replay::Tier::Pinned),
    );
    assert!(
        device > 0 && device <= 100_000,
        "the device takes what fits: {device}"
    );
    assert!(pinned > 0, "the rest goes to pinned memory");
    assert_eq!(device + pinned, TOTAL);
    drop(snap);
    kernel_replay::trim_retained();
    // Without a device tier and with too little host budget for pinned and
    // pageable together, it declines.
    kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Bytes(0));
    kernel_replay::set_host_budget(Some(TOTAL + 3 * 256)); // room for the aligned packing
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok(), "{:?}", logs());
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Device), 0);
    assert!(snap.tier_bytes(kernel_replay::Tier::Pinned) > 0);
    mutate(&regions);
    assert_eq!(snap.restore().restored, 3);
    assert!(restored(&regions));
    drop(snap);
    kernel_replay::set_host_budget(Some(1000));
    kernel_replay::trim_retained();
    assert_eq!(
        Snap::of(sim.gpu(0)).reason(),
        Some(kernel_replay::DeclineReason::HostMemory)
    );
    kernel_replay::set_host_budget(None);
    kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Auto);
}

#[test]
fn auto_falls_back_when_a_tier_cannot_be_allocated() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let regions = workload(&sim);
    // The device arena allocation fails, then the pinned one: pageable.
    sim.inject(hsa_sim::Fault::NextAllocations, 0, 2);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Pageable), TOTAL);
    assert!(kernel_replay::host_bytes_in_use() >= TOTAL);
    mutate(&regions);
    assert_eq!(snap.restore().restored, 3);
    assert!(restored(&regions));
}

#[test]
fn a_runtime_without_the_free_memory_query_sizes_the_device_tier_by_the_pool() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    sim.set_mode(hsa_sim::Mode::MemoryAvailSupported, false);
    workload(&sim);
    let snap = Snap::of(sim.gpu(0));
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Device), TOTAL);
}

#[test]
fn each_forced_policy_keeps_copies_in_its_own_tier() {
    for (policy, tier) in [
        (
            kernel_replay::StoragePolicy::Device,
            Some(kernel_replay::Tier::Device),
        ),
        (
            kernel_replay::StoragePolicy::Pinned,
            Some(kernel_replay::Tier::Pinned),
        ),
        (
            kernel_replay::StoragePolicy::Pageable,
            Some(kernel_replay::Tier::Pageable),
        ),
        (
            kernel_replay::StoragePolicy::Baseline,
            Some(kernel_replay::Tier::Pageable),
        ),
    ] {
        let sim = session(1);
        let _p = PolicyGuard::set(policy);
        assert_eq!(kernel_replay::storage_policy(), policy);
        let regions = workload(&sim);
        let snap = Snap::of(sim.gpu(0));
        assert!(snap.ok(), "{policy:?}");
        let tier = tier.unwrap();
        assert_eq!(snap.tier_bytes(tier), TOTAL, "{policy:?}");
        mutate(&regions);
        assert_eq!(snap.restore().restored, 3, "{policy:?}");
        assert!(restored(&regions), "{policy:?}");
        if policy == kernel_replay::StoragePolicy::Baseline {
            assert_eq!(
                sim.count(hsa_sim::Counter::AsyncCopies),
                0,
                "the baseline copies one blocking copy at a time"
            );
            assert_eq!(
                kernel_replay::host_bytes_in_use(),
                TOTAL,
                "one buffer per region, exactly"
            );
        }
    }
}

#[test]
fn a_forced_device_tier_that_does_not_fit_declines_with_device_memory() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    workload(&sim);
    kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Bytes(50_000));
    let snap = Snap::of(sim.gpu(0));
    assert_eq!(
        snap.reason(),
        Some(kernel_replay::DeclineReason::DeviceMemory)
    );
    assert!(logs_containing("device budget").len() == 1, "{:?}", logs());
    // It says how much did not fit: the aligned regions up to the first that
    // passed the budget (100,000 bytes alone do).
    let detail = snap.0.as_ref().err().map(ToString::to_string);
    let needed: u64 = detail
        .as_deref()
        .and_then(|d| d.split(" bytes of device memory").next())
        .and_then(|d| d.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        (100_096..=100_096 + 4096 + 256).contains(&needed),
        "{detail:?}"
    );
    assert_nothing_held();
    kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Auto);
    // Host memory is kept in pageable memory whatever the policy: a CPU
    // agent's own snapshot under the forced device tier completes.
    let cpu = sim.cpu();
    host_buffer_on(&sim, cpu);
    let host = Snap::of(cpu);
    assert_eq!((host.reason(), host.regions()), (None, 1));
    assert_eq!(host.tier_bytes(kernel_replay::Tier::Pageable), 4096);
}

fn host_buffer_on(sim: &hsa_sim::SimSession, cpu: hsa_sim::Agent) {
    let p = pool_allocate(sim.pool(cpu, PoolKind::SystemCoarse), 4096, 0).unwrap();
    fill(p, 4096, 9);
}

#[test]
fn steady_replay_reuses_its_arenas_and_allocates_nothing() {
    for policy in [
        kernel_replay::StoragePolicy::Auto,
        kernel_replay::StoragePolicy::Device,
        kernel_replay::StoragePolicy::Pinned,
        kernel_replay::StoragePolicy::Pageable,
    ] {
        let sim = session(1);
        let _p = PolicyGuard::set(policy);
        let regions = workload(&sim);
        // The first window allocates its arena; later windows reuse it.
        drop(Snap::of(sim.gpu(0)));
        let live = sim.count(hsa_sim::Counter::LiveAllocations);
        let held_after_first = held();
        for _ in 0..10 {
            let snap = Snap::of(sim.gpu(0));
            mutate(&regions);
            assert_eq!(snap.restore().restored, 3);
            assert!(restored(&regions));
        }
        assert_eq!(
            sim.count(hsa_sim::Counter::LiveAllocations),
            live,
            "{policy:?}: no runtime allocation per window"
        );
        assert_eq!(
            held(),
            held_after_first,
            "{policy:?}: the same arena every time"
        );
        let stats = stats();
        assert_eq!(
            stats.retained_bytes.iter().sum::<u64>(),
            held(),
            "{policy:?}"
        );
        // Trimming releases it, and the count says how much.
        let released = kernel_replay::trim_retained();
        assert_eq!(released, held_after_first, "{policy:?}");
        assert_nothing_held();
        if copies_move_everything() {
            // (Trimming also releases the device kernels' buffers.)
            assert_eq!(
                sim.count(hsa_sim::Counter::LiveAllocations),
                live - u64::from(policy != kernel_replay::StoragePolicy::Pageable)
            );
        }
    }
}

#[test]
fn two_live_snapshots_of_one_agent_get_two_arenas_and_the_larger_is_kept() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    let gpu = sim.gpu(0);
    let small = device_buffer(&sim, gpu, 4096, 1);
    let first = Snap::of(gpu);
    let big = device_buffer(&sim, gpu, 1 << 20, 2);
    let second = Snap::of(gpu);
    assert_eq!(
        kernel_replay::device_bytes_in_use(),
        4096 + (4096 + (1 << 20))
    );
    fill(small, 4096, 7);
    assert_eq!(
        first.restore().restored,
        1,
        "each snapshot restores from its own arena"
    );
    assert!(all(small, 4096, 1));
    drop(first);
    drop(second);
    // The high-water mark stays: the 1 MiB arena.
    assert_eq!(stats().retained_bytes[0], 4096 + (1 << 20));
    pool_free(big);
}

#[test]
fn batched_copies_go_through_async_copy_unless_turned_off() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    let _b = BatchGuard::set(true);
    let regions = workload(&sim);
    let snap = Snap::of(sim.gpu(0));
    mutate(&regions);
    snap.restore();
    assert!(restored(&regions));
    if copies_move_everything() {
        assert_eq!(
            sim.count(hsa_sim::Counter::AsyncCopies),
            6,
            "three regions captured, three restored"
        );
    }
    drop(snap);
    kernel_replay::set_batched_copies(false);
    let before = sim.count(hsa_sim::Counter::AsyncCopies);
    let snap = Snap::of(sim.gpu(0));
    mutate(&regions);
    snap.restore();
    assert!(restored(&regions));
    assert_eq!(
        sim.count(hsa_sim::Counter::AsyncCopies),
        before,
        "blocking copies only"
    );
}

#[test]
fn a_refused_async_submission_falls_back_to_a_blocking_copy() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    let _b = BatchGuard::set(true);
    let regions = workload(&sim);
    let snap = Snap::of(sim.gpu(0));
    mutate(&regions);
    sim.inject(hsa_sim::Fault::NthAsyncCopy, 0, 2);
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (3, 0));
    assert!(restored(&regions));
}

#[test]
fn more_regions_than_the_copy_window_are_all_copied_and_checked() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let buffers: Vec<*mut u8> = (0..300u32)
        .map(|i| {
            let p = pool_allocate(pool, 512, 0).unwrap();
            fill(p, 512, i as u8);
            p
        })
        .collect();
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 300);
    for &p in &buffers {
        fill(p, 512, 0xEE);
    }
    // One failure deep in the batch is attributed to its region.
    sim.inject(hsa_sim::Fault::CopiesInto, buffers[200] as u64, 0);
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (299, 1));
    for (i, &p) in buffers.iter().enumerate() {
        assert!(
            all(p, 512, if i == 200 { 0xEE } else { i as u8 }),
            "region {i}"
        );
    }
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn discovery_walks_each_executable_once_while_it_stays_loaded() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let gpu = sim.gpu(0);
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, gpu, "v", 32, false);
    fill(v, 32, 1);
    assert_eq!(Snap::of(gpu).regions(), 1);
    // Symbol queries now fail, but the executable was walked completely:
    // the cache answers.
    sim.inject(
        hsa_sim::Fault::SymbolQuery,
        u64::from(kernel_replay::hsa::sys::HSA_EXECUTABLE_SYMBOL_INFO_TYPE),
        1,
    );
    let cached = Snap::of(gpu);
    assert!(cached.ok(), "{:?}", logs());
    assert_eq!(cached.regions(), 1);
    // A new executable is still discovered at snapshot time (and its walk
    // meets the failing query).
    let late = sim.executable_create();
    sim.add_variable(late, gpu, "w", 8, false);
    assert_eq!(
        Snap::of(gpu).reason(),
        Some(kernel_replay::DeclineReason::SymbolEnumeration)
    );
    sim.inject(
        hsa_sim::Fault::SymbolQuery,
        u64::from(kernel_replay::hsa::sys::HSA_EXECUTABLE_SYMBOL_INFO_TYPE),
        0,
    );
    assert_eq!(Snap::of(gpu).regions(), 2);
    // The baseline walks everything every time.
    let _b = PolicyGuard::set(kernel_replay::StoragePolicy::Baseline);
    sim.inject(
        hsa_sim::Fault::SymbolQuery,
        u64::from(kernel_replay::hsa::sys::HSA_EXECUTABLE_SYMBOL_INFO_TYPE),
        1,
    );
    assert_eq!(
        Snap::of(gpu).reason(),
        Some(kernel_replay::DeclineReason::SymbolEnumeration)
    );
}

#[test]
fn the_discovery_cache_answers_only_for_the_agent_it_walked() {
    let sim = session(2);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    let exe = sim.executable_create();
    let mine = [
        sim.add_variable(exe, gpu0, "a0", 32, false),
        sim.add_variable(exe, gpu0, "b0", 16, false),
    ];
    let theirs = sim.add_variable(exe, gpu1, "a1", 80, false);
    // Twice each way: the first snapshot of each agent walks, the second is
    // answered from the cache.
    for round in 0..2 {
        for (gpu, regions, bytes) in [(gpu0, 2, 48), (gpu1, 1, 80)] {
            let snap = Snap::of(gpu);
            assert!(snap.ok());
            assert_eq!(
                (snap.regions(), snap.bytes()),
                (regions, bytes),
                "round {round}: only the agent's own variables"
            );
        }
    }
    // A restore of gpu1's snapshot writes gpu1's variable only.
    fill(theirs, 80, 1);
    let snap = Snap::of(gpu1);
    fill(theirs, 80, 2);
    fill(mine[0], 32, 7);
    fill(mine[1], 16, 7);
    assert_eq!(snap.restore().restored, 1);
    assert!(all(theirs, 80, 1));
    assert!(all(mine[0], 32, 7) && all(mine[1], 16, 7));
}

#[test]
fn repeated_snapshots_under_an_explicit_device_budget_reuse_their_arena() {
    for policy in [
        kernel_replay::StoragePolicy::Auto,
        kernel_replay::StoragePolicy::Device,
    ] {
        let sim = session(1);
        let _p = PolicyGuard::set(policy);
        let regions = workload(&sim);
        // Room for one snapshot's arena (the three regions, 256-byte
        // aligned: 104,448 bytes), not for two: the arena retained from the
        // previous snapshot is this snapshot's to reuse, not a second one.
        kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Bytes(150_000));
        for round in 0..3 {
            let snap = Snap::of(sim.gpu(0));
            assert!(snap.ok(), "{policy:?} round {round}: {:?}", snap.reason());
            assert_eq!(
                snap.tier_bytes(kernel_replay::Tier::Device),
                TOTAL,
                "{policy:?} round {round}: everything stays on the device"
            );
            mutate(&regions);
            assert_eq!(snap.restore().restored, 3);
            assert!(restored(&regions));
        }
        assert!(kernel_replay::device_bytes_in_use() <= 150_000);
        kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Auto);
    }
}

#[test]
fn an_unloaded_executable_is_forgotten_and_its_variables_not_written() {
    for policy in [
        kernel_replay::StoragePolicy::Auto,
        kernel_replay::StoragePolicy::Pageable,
        kernel_replay::StoragePolicy::Baseline,
    ] {
        let sim = session(1);
        let _p = PolicyGuard::set(policy);
        sim.set_mode(hsa_sim::Mode::AddressReuse, true);
        let gpu = sim.gpu(0);
        let exe = sim.executable_create();
        let v = sim.add_variable(exe, gpu, "v", 4096, false);
        fill(v, 4096, 1);
        let keep = device_buffer(&sim, gpu, 4096, 2);
        let snap = Snap::of(gpu);
        assert_eq!(snap.regions(), 2);
        // Unloaded through the table (the library's wrapper sees it); its
        // storage goes back to the runtime and may be handed out again.
        assert_eq!(executable_destroy(exe), SUCCESS);
        let reused = pool_allocate(sim.pool(gpu, PoolKind::DeviceCoarse), 4096, 0).unwrap();
        fill(reused, 4096, 0x77);
        fill(keep, 4096, 0xEE);
        let report = snap.restore();
        assert_eq!(
            (report.restored, report.skipped_not_live),
            (1, 1),
            "{policy:?}"
        );
        assert!(
            all(reused, 4096, 0x77),
            "{policy:?}: the unloaded variable's memory is not written"
        );
        assert!(all(keep, 4096, 2));
        assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
        assert!(sim.quarantine_intact());
        // A new executable, whatever handle it gets, is walked anew.
        let again = sim.executable_create();
        let w = sim.add_variable(again, gpu, "w", 16, false);
        fill(w, 16, 5);
        assert_eq!(Snap::of(gpu).regions(), 3, "{policy:?}: keep, reused, w");
    }
}

#[test]
fn counters_add_up() {
    let sim = session(1);
    let regions = workload(&sim);
    kernel_replay::reset_stats();
    let snap = Snap::of(sim.gpu(0));
    mutate(&regions);
    snap.restore();
    snap.restore();
    sim.inject(hsa_sim::Fault::CopiesFrom, regions[0].0 as u64, 0);
    assert_eq!(
        Snap::of(sim.gpu(0)).reason(),
        Some(kernel_replay::DeclineReason::CopyFailed)
    );
    let s = stats().counters;
    assert_eq!(s.snapshots, 1);
    assert_eq!(
        s.declines[kernel_replay::DeclineReason::CopyFailed.code() as usize],
        1
    );
    assert_eq!(s.declines.iter().sum::<u64>(), 1);
    assert_eq!(s.bytes_captured, TOTAL);
    assert_eq!(
        (
            s.restores,
            s.regions_restored,
            s.regions_skipped,
            s.regions_failed
        ),
        (2, 6, 0, 0)
    );
    assert_eq!(s.bytes_restored, 2 * TOTAL);
    assert!(s.snap_ns > 0 && s.restore_ns > 0);
    kernel_replay::reset_stats();
    assert_eq!(stats().counters.snapshots + stats().counters.restores, 0);
}

#[test]
fn overridden_pools_are_used_and_a_zero_pool_disables_its_tier() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Auto);
    let gpu = sim.gpu(0);
    let regions = workload(&sim);
    let host = sim.pool(sim.cpu(), PoolKind::SystemFine);
    // No device pool: auto goes to the given host pool.
    assert!(kernel_replay::set_storage_pools(
        agent(gpu),
        kernel_replay::StoragePools {
            device_pool: None,
            host_pool: Some((
                kernel_replay::hsa::sys::hsa_amd_memory_pool_t {
                    handle: host.handle
                },
                agent(sim.cpu())
            )),
        }
    ));
    let snap = Snap::of(gpu);
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Pinned), TOTAL);
    mutate(&regions);
    assert_eq!(snap.restore().restored, 3);
    assert!(restored(&regions));
    // The device policy then has no tier for this GPU, and says so.
    let _d = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    let declined = Snap::of(gpu);
    assert_eq!(
        declined.reason(),
        Some(kernel_replay::DeclineReason::DeviceMemory)
    );
    let detail = declined.0.as_ref().err().map(ToString::to_string);
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("the agent has no device tier")),
        "{detail:?}"
    );
}

#[test]
fn a_forced_tier_the_agent_lacks_declines_only_for_memory_that_needs_it() {
    use kernel_replay::StoragePolicy;
    let sim = session(1);
    // A CPU agent has neither a device tier nor a pinned one.
    let cpu = sim.cpu();
    for policy in [StoragePolicy::Device, StoragePolicy::Pinned] {
        let _p = PolicyGuard::set(policy);
        let empty = Snap::of(cpu);
        assert_eq!(
            (empty.reason(), empty.regions()),
            (None, 0),
            "{policy:?}: nothing to keep, so no tier is lacking"
        );
    }
    // Its host memory needs neither: kept pageable under every policy.
    host_buffer_on(&sim, cpu);
    for policy in [StoragePolicy::Device, StoragePolicy::Pinned] {
        let _p = PolicyGuard::set(policy);
        let snap = Snap::of(cpu);
        assert_eq!((snap.reason(), snap.regions()), (None, 1), "{policy:?}");
        assert_eq!(snap.tier_bytes(kernel_replay::Tier::Pageable), 4096);
    }
}

#[test]
fn pinned_arenas_are_made_reachable_by_the_replayed_agent() {
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Pinned);
    let _b = BatchGuard::set(true);
    // As on hardware: an async copy whose agent cannot reach both sides is
    // a violation.
    sim.set_mode(hsa_sim::Mode::StrictAsyncAccess, true);
    let regions = workload(&sim);
    let snap = Snap::of(sim.gpu(0));
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Pinned), TOTAL);
    mutate(&regions);
    assert!(snap.restore_all());
    assert!(restored(&regions));
    sim.set_mode(hsa_sim::Mode::StrictAsyncAccess, false);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn kernel_replay_copy_blocking_turns_batching_off_and_anything_else_leaves_it_on() {
    const NAME: &str =
        "kernel_replay_copy_blocking_turns_batching_off_and_anything_else_leaves_it_on";
    // Two children, one per setting (the parent's own may be either).
    if !in_child_with(NAME, &[("KERNEL_REPLAY_COPY", "blocking")])
        && !in_child_with(NAME, &[("KERNEL_REPLAY_COPY", "batched")])
    {
        return;
    }
    let blocking = std::env::var("KERNEL_REPLAY_COPY").as_deref() == Ok("blocking");
    let sim = session(1);
    let _p = PolicyGuard::set(kernel_replay::StoragePolicy::Device);
    // The copy engine is what is tested: no device kernels (a process-wide
    // setting, and this runs in a child of its own).
    kernel_replay::set_strategy(kernel_replay::Strategy::Copies);
    let regions = workload(&sim);
    let before = sim.count(hsa_sim::Counter::AsyncCopies);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    assert_eq!(
        sim.count(hsa_sim::Counter::AsyncCopies) > before,
        !blocking,
        "KERNEL_REPLAY_COPY={}",
        std::env::var("KERNEL_REPLAY_COPY").unwrap_or_default()
    );
    mutate(&regions);
    assert!(snap.restore_all());
    assert!(restored(&regions));
}
