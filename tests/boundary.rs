//! The C boundary: NULL accepted everywhere a pointer can be passed,
//! out-of-range enum values and counts, unknown agents, a snapshot whose
//! allocations are all gone, the version string, and calls from many
//! threads at once. Every case has a documented result and none may crash.

mod common;

use std::ffi::CStr;

use common::*;
use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;
use kernel_replay::{DeclineReason, LogLevel, Tier};

/// A snapshot through the C ABI, freed on drop.
struct CSnap(*mut kr_snapshot_t);

impl CSnap {
    fn of(gpu: hsa_sim::Agent) -> CSnap {
        let ptr = kr_snap(agent(gpu));
        assert!(!ptr.is_null(), "kr_snap returns a handle");
        CSnap(ptr)
    }
    fn ok(&self) -> bool {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_ok(self.0) }
    }
    fn regions(&self) -> usize {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_region_count(self.0) }
    }
    fn bytes(&self) -> u64 {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_byte_count(self.0) }
    }
    fn restore(&self) -> kr_restore_report_t {
        let mut report = kr_restore_report_t {
            restored: 99,
            skipped_not_live: 99,
            failed: 99,
        };
        // SAFETY: a live snapshot and a writable report.
        let restored = unsafe { kr_restore_with_report(self.0, &mut report) };
        assert_eq!(
            restored, report.restored,
            "the return value is the restored count"
        );
        report
    }
}

impl Drop for CSnap {
    fn drop(&mut self) {
        // SAFETY: owned, freed once.
        unsafe { kr_snapshot_free(self.0) }
    }
}

/// A pass function that counts its calls in `user_data` (a `u32`).
unsafe extern "C" fn count_pass(_pass: u32, user_data: *mut std::ffi::c_void) {
    // SAFETY: the tests pass a live `u32`.
    unsafe { *user_data.cast::<u32>() += 1 };
}

/// An agent handle the runtime never handed out.
const UNKNOWN: hsa_sim::Agent = hsa_sim::Agent {
    handle: 0x00DE_AD00,
};

#[test]
fn null_is_accepted_everywhere() {
    let _sim = session(1);
    // SAFETY: NULL is documented as accepted by each of these.
    unsafe {
        assert!(!kr_snapshot_ok(std::ptr::null()));
        assert_eq!(
            kr_snapshot_decline_reason(std::ptr::null()),
            DeclineReason::MetadataMemory.code()
        );
        assert_eq!(kr_snapshot_region_count(std::ptr::null()), 0);
        assert_eq!(kr_snapshot_byte_count(std::ptr::null()), 0);
        assert_eq!(kr_restore(std::ptr::null()), 0);
        assert_eq!(
            kr_restore_with_report(std::ptr::null(), std::ptr::null_mut()),
            0
        );
        assert_eq!(
            kr_snapshot_copy_method(std::ptr::null()),
            kernel_replay::CopyMethod::Copies
        );
        assert!(!kr_snapshot_incremental(std::ptr::null()));
        kr_snapshot_free(std::ptr::null_mut());
    }
    kr_set_batch_copy(None, std::ptr::null_mut());
    kr_set_executable_iterator(None);
    kr_set_log_callback(None, std::ptr::null_mut());
    kr_set_executable_iterator(sim_iterator());
}

#[test]
fn out_of_range_values_are_refused_or_clamped() {
    let sim = session(1);
    let before = kr_storage_policy();
    assert!(!kr_set_storage_policy(5), "one past the last policy");
    assert!(!kr_set_storage_policy(u32::MAX));
    assert_eq!(
        kr_storage_policy(),
        before,
        "a refused policy changes nothing"
    );

    device_buffer(&sim, sim.gpu(0), 8192, 3);
    let snap = CSnap::of(sim.gpu(0));
    assert!(snap.ok());
    // Tiers as C would pass them.
    let tier_bytes = |snapshot: *const kr_snapshot_t, tier: u32| {
        // SAFETY: a live snapshot (or NULL, which is accepted).
        unsafe { kr_snapshot_tier_bytes(snapshot, tier) }
    };
    let per_tier: u64 = Tier::ALL.iter().map(|t| tier_bytes(snap.0, t.code())).sum();
    assert_eq!(per_tier, snap.bytes(), "the tiers hold every captured byte");
    assert_eq!(tier_bytes(snap.0, 3), 0);
    assert_eq!(tier_bytes(snap.0, u32::MAX), 0);
    assert_eq!(tier_bytes(std::ptr::null(), 0), 0);

    // The stats with nowhere to write them: nothing happens.
    // SAFETY: NULL is documented as accepted.
    unsafe { kr_get_stats(std::ptr::null_mut()) };

    // Levels clamp: 0 turns logging off, anything above trace is trace.
    // A replay without a pass function logs an error, so it shows the level.
    let log_an_error = || {
        // SAFETY: no pass function, nothing else is dereferenced.
        unsafe { kr_replay(agent(UNKNOWN), 2, None, std::ptr::null_mut()) }
    };
    kr_set_log_level(0);
    logs_clear();
    log_an_error();
    assert!(logs().is_empty(), "level 0 is off");
    kr_set_log_level(u32::MAX);
    log_an_error();
    assert_eq!(logs_containing("without a pass function").len(), 1);
    kr_set_log_level(LogLevel::Warn.code());
}

#[test]
fn replay_counts_and_missing_pass_functions_have_a_clear_result() {
    let sim = session(1);
    device_buffer(&sim, sim.gpu(0), 4096, 1);
    for passes in [0u32, 1] {
        let mut calls = 0u32;
        // SAFETY: a pass function and the counter it writes.
        let result = unsafe {
            kr_replay(
                agent(sim.gpu(0)),
                passes,
                Some(count_pass),
                (&mut calls as *mut u32).cast(),
            )
        };
        assert_eq!(calls, 1, "{passes} passes: the dispatch still runs once");
        assert_eq!(result.passes_run, 1);
        assert!(!result.replayed, "nothing to replay with {passes} passes");
    }
    // No pass function: nothing runs, nothing is captured, an error is logged.
    let snapshots_before = stats().counters.snapshots;
    // SAFETY: no pass function, nothing else is dereferenced.
    let result = unsafe { kr_replay(agent(sim.gpu(0)), 3, None, std::ptr::null_mut()) };
    assert_eq!(result.passes_run, 0);
    assert!(!result.replayed);
    assert_eq!(stats().counters.snapshots, snapshots_before);
    assert_nothing_held();
}

#[test]
fn unknown_agents_have_nothing_tracked_and_replay_like_any_other() {
    let sim = session(1);
    let buffer = device_buffer(&sim, sim.gpu(0), 4096, 7);
    assert_eq!(kr_tracked_count(agent(UNKNOWN)), 0);
    assert_eq!(kr_tracked_bytes(agent(UNKNOWN)), 0);

    let mut calls = 0u32;
    // SAFETY: a pass function and the counter it writes.
    let result = unsafe {
        kr_replay(
            agent(UNKNOWN),
            3,
            Some(count_pass),
            (&mut calls as *mut u32).cast(),
        )
    };
    assert_eq!(
        (calls, result.passes_run, result.restore_failures),
        (3, 3, 0)
    );
    assert!(result.replayed, "an empty snapshot is a valid snapshot");

    // Pools chosen for an agent the runtime does not know, and pool handles
    // it never handed out, are accepted and only ever used for that agent.
    assert!(kr_set_storage_pools(
        agent(UNKNOWN),
        0xBAD0,
        0xBAD1,
        agent(UNKNOWN)
    ));
    fill(buffer, 4096, 7);
    let snap = CSnap::of(sim.gpu(0));
    assert!(snap.ok());
    fill(buffer, 4096, 8);
    assert_eq!(snap.restore().restored, 1);
    assert!(all(buffer, 4096, 7));
    // A snapshot of that agent itself has nothing to capture and needs no
    // storage, so the bogus pools are never touched.
    let other = CSnap::of(UNKNOWN);
    assert!(other.ok());
    assert_eq!(other.regions(), 0);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn a_snapshot_whose_allocations_are_all_freed_restores_nothing_and_writes_nothing() {
    let sim = session(1);
    let buffers: Vec<*mut u8> = (0..4)
        .map(|i| device_buffer(&sim, sim.gpu(0), 4096 << i, 0x40 + i as u8))
        .collect();
    let snap = CSnap::of(sim.gpu(0));
    assert!(snap.ok());
    assert_eq!(snap.regions(), buffers.len());
    for &b in &buffers {
        assert_eq!(pool_free(b), SUCCESS);
    }
    for _ in 0..2 {
        let report = snap.restore();
        assert_eq!(
            (report.restored, report.skipped_not_live, report.failed),
            (0, buffers.len(), 0)
        );
    }
    // Freed memory is quarantined and poisoned by the runtime: a restore
    // that wrote any of it would break the poison or count a violation.
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert!(sim.quarantine_intact());
    drop(snap);
    assert_nothing_held();
}

#[test]
fn the_version_is_the_crate_version() {
    // SAFETY: a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(kr_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn snapshots_of_two_agents_run_concurrently_from_many_threads() {
    let sim = session(2);
    let gpus = [sim.gpu(0), sim.gpu(1)];
    let buffers: Vec<_> = gpus
        .iter()
        .enumerate()
        .flat_map(|(i, &g)| (0..8).map(move |j| (i, j, g)))
        .map(|(i, j, g)| {
            (
                i,
                device_buffer(&sim, g, 4096 * (j + 1), (i * 16 + j) as u8),
            )
        })
        .map(|(i, p)| (i, p as usize))
        .collect();
    std::thread::scope(|s| {
        for t in 0..8 {
            let gpu = gpus[t % 2];
            s.spawn(move || {
                for _ in 0..50 {
                    let snap = CSnap::of(gpu);
                    assert!(snap.ok());
                    assert_eq!(snap.regions(), 8);
                    assert_eq!(snap.restore().restored, 8);
                    assert!(kr_tracked_count(agent(gpu)) == 8);
                }
            });
        }
    });
    assert_nothing_held();
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    for (_, p) in buffers {
        assert_eq!(pool_free(p as *mut u8), SUCCESS);
    }
}

#[test]
fn kr_snap_returns_null_only_when_the_handle_cannot_be_allocated() {
    let sim = session(1);
    // Nothing to capture, so the only allocation kr_snap needs is its handle.
    let snap = with_allocations_failing_at(1, || kr_snap(agent(sim.gpu(0))));
    assert!(snap.is_null());
    assert_eq!(
        // SAFETY: NULL is accepted.
        unsafe { kr_snapshot_decline_reason(snap) },
        DeclineReason::MetadataMemory.code()
    );
    let snap = CSnap::of(sim.gpu(0));
    assert!(snap.ok());
}

#[test]
fn every_export_from_many_threads_at_once() {
    let sim = session(2);
    let gpus = [sim.gpu(0), sim.gpu(1)];
    let pools = gpus.map(|g| sim.pool(g, hsa_sim::PoolKind::DeviceCoarse).handle);
    std::thread::scope(|s| {
        for t in 0..6usize {
            s.spawn(move || {
                let gpu = gpus[t % 2];
                let pool = hsa_sim::Pool {
                    handle: pools[t % 2],
                };
                for round in 0..100 {
                    // SAFETY: the runtime's own tables; already installed, so
                    // every call answers ALREADY_INSTALLED and changes nothing.
                    let status = unsafe { kr_memory_tracker_init(core_table(), amd_table(), 0) };
                    assert_eq!(status, kr_status_t::AlreadyInstalled);
                    let p = pool_allocate(pool, 4096 * (1 + round % 4), 0).unwrap();
                    kr_set_executable_iterator(sim_iterator());
                    kr_set_log_level(2);
                    let _ = kr_replay_gate(1, 1, false);
                    let _ = kr_tracked_count(agent(gpu)) + kr_tracked_bytes(agent(gpu)) as usize;
                    let snap = CSnap::of(gpu);
                    assert!(snap.ok());
                    let report = snap.restore();
                    assert_eq!(report.failed, 0);
                    assert_eq!(pool_free(p), SUCCESS);
                    let _ = kr_host_bytes_in_use();
                    assert!(kr_tracking_enabled());
                    assert!(!kr_is_finalized());
                }
            });
        }
    });
    assert_eq!(
        kr_tracked_count(agent(gpus[0])) + kr_tracked_count(agent(gpus[1])),
        0
    );
    assert_nothing_held();
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert!(sim.quarantine_intact());
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

#[test]
fn a_declined_snapshot_is_not_ok_through_the_c_abi() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    device_buffer(&sim, gpu, 4096, 1);
    // No iterator set and a runtime without the loader extension.
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 1);
    let snap = CSnap::of(gpu);
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 0);
    assert!(!snap.ok());
    assert_eq!((snap.regions(), snap.bytes()), (0, 0));
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (0, 0, 0)
    );
    assert!(CSnap::of(gpu).ok(), "the next one is complete");
}

/// What the C batch-copy function below saw.
#[derive(Default)]
struct ToolCalls {
    calls: usize,
    regions: usize,
    directions: Vec<kernel_replay::CopyDirection>,
}

/// A tool's batch copy as a C tool writes one: it copies each region (the
/// software runtime's device memory is host memory) and records the call
/// in its `user_data`.
unsafe extern "C" fn c_batch_copy(
    _agent: kernel_replay::hsa::hsa_agent_t,
    regions: *const kr_copy_region_t,
    count: usize,
    direction: kernel_replay::CopyDirection,
    user_data: *mut std::ffi::c_void,
) -> kernel_replay::hsa::hsa_status_t {
    // SAFETY: the ToolCalls the test registered, alive for the test.
    let seen = unsafe { &mut *user_data.cast::<ToolCalls>() };
    seen.calls += 1;
    seen.regions += count;
    seen.directions.push(direction);
    // SAFETY: `count` records, valid for the call.
    for r in unsafe { std::slice::from_raw_parts(regions, count) } {
        // SAFETY: both sides valid for `size` bytes, as the library promises.
        unsafe {
            std::ptr::copy_nonoverlapping(r.src as *const u8, r.dst as *mut u8, r.size as usize)
        };
    }
    kernel_replay::hsa::HSA_STATUS_SUCCESS
}

#[test]
fn a_c_batch_copy_function_gets_the_regions_and_its_user_data() {
    let sim = session(1);
    let _batched = BatchGuard::set(true);
    let mut seen = ToolCalls::default();
    kr_set_batch_copy(Some(c_batch_copy), std::ptr::from_mut(&mut seen).cast());
    let buffers: Vec<*mut u8> = (0..3)
        .map(|i| device_buffer(&sim, sim.gpu(0), 5000, 0x40 + i))
        .collect();
    let snap = CSnap::of(sim.gpu(0));
    assert!(snap.ok());
    // Arenas the agent reaches (not the baseline's buffers, not pageable
    // memory) go to the tool.
    let reachable = !is_baseline() && policy() != kernel_replay::StoragePolicy::Pageable;
    // SAFETY: a live snapshot.
    let method = unsafe { kr_snapshot_copy_method(snap.0) };
    for &p in &buffers {
        fill(p, 5000, 0);
    }
    // SAFETY: a live snapshot.
    assert!(unsafe { kr_restore_all(snap.0) });
    kr_set_batch_copy(None, std::ptr::null_mut());
    for (i, &p) in buffers.iter().enumerate() {
        assert!(all(p, 5000, 0x40 + i as u8), "buffer {i}");
    }
    if reachable {
        assert_eq!(method, kernel_replay::CopyMethod::BatchCopy);
        assert_eq!(seen.calls, 2);
        assert_eq!(seen.regions, 2 * buffers.len());
        assert_eq!(
            seen.directions,
            [
                kernel_replay::CopyDirection::Capture,
                kernel_replay::CopyDirection::Restore
            ]
        );
    } else {
        assert_eq!(method, kernel_replay::CopyMethod::Copies);
        assert_eq!(seen.calls, 0);
    }
    // Unregistered: no further calls.
    drop(snap);
    let again = CSnap::of(sim.gpu(0));
    assert!(again.ok());
    assert_eq!(seen.calls, if reachable { 2 } else { 0 });
}
