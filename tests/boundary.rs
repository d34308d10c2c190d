//! The C boundary: NULL accepted everywhere a pointer can be passed, the
//! version string, and calls from many threads at once.

mod common;

use std::ffi::CStr;

use common::*;
use kernel_replay::ffi::types::kr_decline_reason_t::*;
use kernel_replay::ffi::*;

#[test]
fn null_is_accepted_everywhere() {
    let _sim = session(1);
    // SAFETY (all): NULL is documented as accepted by each of these.
    unsafe {
        assert!(!kr_snapshot_ok(std::ptr::null()));
        assert_eq!(
            kr_snapshot_decline_reason(std::ptr::null()),
            KR_DECLINE_METADATA_MEMORY
        );
        assert_eq!(kr_snapshot_region_count(std::ptr::null()), 0);
        assert_eq!(kr_snapshot_byte_count(std::ptr::null()), 0);
        assert_eq!(kr_restore(std::ptr::null()), 0);
        assert_eq!(
            kr_restore_with_report(std::ptr::null(), std::ptr::null_mut()),
            0
        );
        kr_snapshot_free(std::ptr::null_mut());
    }
    kr_set_executable_iterator(None);
    kr_set_log_callback(None, std::ptr::null_mut());
    kr_set_executable_iterator(sim_iterator());
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
                    let snap = Snap::of(gpu);
                    assert!(snap.ok());
                    assert_eq!(snap.regions(), 8);
                    assert_eq!(snap.restore().restored, 8);
                    assert!(kr_tracked_count(agent(gpu)) == 8);
                }
            });
        }
    });
    assert_nothing_held();
    assert_eq!(sim.copy_violations(), 0);
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
    // SAFETY: NULL is accepted.
    assert_eq!(
        unsafe { kr_snapshot_decline_reason(snap) },
        KR_DECLINE_METADATA_MEMORY
    );
    let snap = Snap::of(sim.gpu(0));
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
                    assert_eq!(
                        status,
                        kernel_replay::ffi::types::kr_status_t::KR_STATUS_ALREADY_INSTALLED
                    );
                    let p = pool_allocate(pool, 4096 * (1 + round % 4), 0).unwrap();
                    kr_set_executable_iterator(sim_iterator());
                    kr_set_log_level(2);
                    let _ = kr_replay_gate(1, 1, false);
                    let _ = kr_tracked_count(agent(gpu)) + kr_tracked_bytes(agent(gpu)) as usize;
                    let snap = Snap::of(gpu);
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
    assert_eq!(sim.copy_violations(), 0);
    assert!(sim.quarantine_intact());
}
