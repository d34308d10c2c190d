//! Allocation churn through the wrappers on several threads, with address
//! reuse, while other threads snapshot and restore the same agent: no copy may
//! touch freed memory, and no restore may write into a reused address.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use hsa_sim::PoolKind;
use kernel_replay::ffi::*;

#[test]
fn churn_during_snapshots_and_restores_never_touches_freed_or_reused_memory() {
    let sim = session(2);
    sim.set_address_reuse(true);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let stop = AtomicBool::new(false);
    let restored = AtomicU64::new(0);
    let skipped = AtomicU64::new(0);

    // Long-lived buffers every snapshot captures and every restore must
    // bring back.
    let stable: Vec<usize> = (0..4)
        .map(|i| device_buffer(&sim, gpu, 8192, 0x40 + i) as usize)
        .collect();

    std::thread::scope(|s| {
        for worker in 0..3u8 {
            let stop = &stop;
            s.spawn(move || {
                let mut mine: Vec<(usize, u8)> = Vec::new();
                let mut round = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let tag = worker.wrapping_mul(31).wrapping_add(round as u8);
                    let size = 4096 * (1 + (round as usize % 3));
                    let p = pool_allocate(pool, size, 0).expect("allocate");
                    fill(p, size, tag);
                    mine.push((p as usize, tag));
                    if mine.len() > 6 {
                        let (old, _) = mine.remove((round as usize) % mine.len());
                        assert_eq!(pool_free(old as *mut u8), SUCCESS);
                    }
                }
                for (p, _) in mine {
                    assert_eq!(pool_free(p as *mut u8), SUCCESS);
                }
            });
        }
        for _ in 0..2 {
            let (stop, restored, skipped, stable) = (&stop, &restored, &skipped, &stable);
            s.spawn(move || {
                // Stops the churn even if an assertion below fails, so a
                // failure reports instead of hanging the test.
                let _stop_churn = StopOnDrop(stop);
                for _ in 0..200 {
                    let snap = Snap::of(gpu);
                    assert!(snap.ok());
                    let report = snap.restore();
                    assert_eq!(report.failed, 0);
                    restored.fetch_add(report.restored as u64, Ordering::Relaxed);
                    skipped.fetch_add(report.skipped_not_live as u64, Ordering::Relaxed);
                }
                for (i, &p) in stable.iter().enumerate() {
                    assert!(all(p as *const u8, 8192, 0x40 + i as u8));
                }
            });
        }
    });

    assert_eq!(
        sim.copy_violations(),
        0,
        "a copy touched freed memory or ran out of bounds"
    );
    assert!(sim.quarantine_intact(), "freed memory was written");
    assert!(
        restored.load(Ordering::Relaxed) >= 400 * 4,
        "the stable buffers were restored every time"
    );
    eprintln!(
        "restored {} regions, skipped {} freed or reused",
        restored.load(Ordering::Relaxed),
        skipped.load(Ordering::Relaxed)
    );
    for p in stable {
        pool_free(p as *mut u8);
    }
    assert_eq!(kr_tracked_count(agent(gpu)), 0);
    assert_nothing_held();
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
