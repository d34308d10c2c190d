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
    assert_eq!(kr_host_bytes_in_use(), 0);
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
