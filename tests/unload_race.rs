//! A module unload racing snapshots and restores.
//!
//! One thread loads an executable with a `__device__` variable, writes the
//! variable (a kernel's stores) and unloads the executable through the
//! library's `hsa_executable_destroy` wrapper, thousands of times; another
//! snapshots and restores in a loop. The runtime lists an executable until
//! its destroy has unloaded it, so a snapshot can list one whose destroy has
//! already begun: the library must never admit it again, or a capture or a
//! later restore would touch its unloaded storage. The runtime counts every
//! copy that touches freed (quarantined) storage and checks that nothing
//! wrote the quarantine behind its back.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;

const UNLOADS: usize = 3_000;
const VARIABLE_SIZE: u32 = 256;

#[test]
fn snapshots_never_touch_an_executable_whose_destroy_has_begun() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    // A tracked buffer, so every snapshot also has an allocation to copy.
    let buffer = device_buffer(&sim, gpu, 4096, 0x5A);
    let done = AtomicBool::new(false);
    let (windows, restored) = (AtomicU64::new(0), AtomicU64::new(0));

    std::thread::scope(|s| {
        s.spawn(|| {
            for round in 0..UNLOADS {
                let exe = sim.executable_create();
                let storage = sim.add_variable(exe, gpu, "counter", VARIABLE_SIZE, false);
                assert!(!storage.is_null());
                fill(storage, VARIABLE_SIZE as usize, (round % 251) as u8 | 1);
                assert_eq!(executable_destroy(exe), SUCCESS);
            }
            done.store(true, Ordering::Release);
        });
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                let snapshot = Snap::of(gpu);
                assert!(snapshot.ok(), "declined: {:?}", snapshot.reason());
                let report = snapshot.restore();
                assert_eq!(report.failed, 0);
                windows.fetch_add(1, Ordering::Relaxed);
                restored.fetch_add(report.restored as u64, Ordering::Relaxed);
            }
        });
    });

    assert!(windows.load(Ordering::Relaxed) > 0);
    assert_eq!(
        sim.count(hsa_sim::Counter::CopyViolations),
        0,
        "a capture or restore touched an unloaded executable's storage"
    );
    assert!(
        sim.quarantine_intact(),
        "a restore wrote an unloaded executable's storage"
    );
    assert!(all(buffer, 4096, 0x5A));
    assert!(restored.load(Ordering::Relaxed) >= windows.load(Ordering::Relaxed));
    assert_eq!(pool_free(buffer), SUCCESS);
}
