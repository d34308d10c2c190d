//! The stress test: allocation churn through the wrappers on several threads
//! of two agents, with address reuse on, while each agent's replay window
//! (snapshot, a "kernel" writing, restore) runs over and over on its own
//! thread. No copy may touch freed memory, no restore may write into memory
//! that is no longer the captured allocation, and every restore must bring
//! each agent's long-lived buffers back exactly.
//!
//! A churn buffer is replay state too: a snapshot taken between its
//! allocation and its fill legitimately restores it to what it held then
//! (zeros, or the runtime's poison on a reused block). What it must never
//! hold is an *earlier* allocation's bytes at the same address: that would be
//! a stale restore into a reused address.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use hsa_sim::PoolKind;

const WINDOWS: usize = 150;
const STABLE: usize = 4;
const STABLE_SIZE: usize = 8192;

#[test]
fn churn_on_two_agents_during_their_replay_windows_never_touches_the_wrong_memory() {
    let sim = session(2);
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    let gpus = [sim.gpu(0), sim.gpu(1)];
    let pools = gpus.map(|g| sim.pool(g, PoolKind::DeviceCoarse).handle);
    let stop = AtomicBool::new(false);
    let restored = AtomicU64::new(0);
    let skipped = AtomicU64::new(0);
    let churned = AtomicU64::new(0);

    // Per agent, long-lived buffers every snapshot of it captures.
    let stable: Vec<Vec<usize>> = gpus
        .iter()
        .enumerate()
        .map(|(a, &g)| {
            (0..STABLE)
                .map(|i| device_buffer(&sim, g, STABLE_SIZE, (0x40 + 8 * a + i) as u8) as usize)
                .collect()
        })
        .collect();

    std::thread::scope(|s| {
        // Two churn threads per agent: allocate, fill, check, free.
        for worker in 0..4u8 {
            let (stop, churned) = (&stop, &churned);
            let pool = hsa_sim::Pool {
                handle: pools[usize::from(worker % 2)],
            };
            s.spawn(move || {
                let mut mine: Vec<(usize, usize, u8)> = Vec::new();
                let mut round = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    let tag = match worker.wrapping_mul(61).wrapping_add(round as u8) | 1 {
                        hsa_sim::POISON_BYTE => 0x11,
                        t => t,
                    };
                    let size = 4096 * (1 + (round as usize % 3));
                    let p = pool_allocate(pool, size, 0).expect("allocate");
                    fill(p, size, tag);
                    mine.push((p as usize, size, tag));
                    if mine.len() > 6 {
                        let (old, size, tag) = mine.remove((round as usize) % mine.len());
                        assert_only_its_own_bytes(old, size, tag);
                        assert_eq!(pool_free(old as *mut u8), SUCCESS);
                    }
                    churned.fetch_add(1, Ordering::Relaxed);
                }
                for (p, size, tag) in mine {
                    assert_only_its_own_bytes(p, size, tag);
                    assert_eq!(pool_free(p as *mut u8), SUCCESS);
                }
            });
        }
        // One replay-window thread per agent (the rule: one window per
        // agent at a time), both agents at once.
        for (a, &gpu) in gpus.iter().enumerate() {
            let (stop, restored, skipped, stable) = (&stop, &restored, &skipped, &stable[a]);
            s.spawn(move || {
                // Stops the churn even if an assertion below fails, so a
                // failure reports instead of hanging the test.
                let _stop_churn = StopOnDrop(stop);
                for window in 0..WINDOWS {
                    let snap = Snap::of(gpu);
                    assert!(snap.ok());
                    // The "kernel" writes the agent's buffers.
                    for &p in stable {
                        fill(p as *mut u8, STABLE_SIZE, window as u8);
                    }
                    let report = snap.restore();
                    assert_eq!(report.failed, 0);
                    for (i, &p) in stable.iter().enumerate() {
                        assert!(
                            all(p as *const u8, STABLE_SIZE, (0x40 + 8 * a + i) as u8),
                            "agent {a} buffer {i}"
                        );
                    }
                    restored.fetch_add(report.restored as u64, Ordering::Relaxed);
                    skipped.fetch_add(report.skipped_not_live as u64, Ordering::Relaxed);
                }
            });
        }
    });

    assert_eq!(
        sim.count(hsa_sim::Counter::CopyViolations),
        0,
        "a copy touched freed memory or ran out of bounds"
    );
    assert!(sim.quarantine_intact(), "freed memory was written");
    assert!(
        restored.load(Ordering::Relaxed) >= (2 * WINDOWS * STABLE) as u64,
        "the stable buffers were restored every time"
    );
    eprintln!(
        "{} windows on 2 agents: restored {} regions, skipped {} freed or reused; {} allocations churned",
        2 * WINDOWS,
        restored.load(Ordering::Relaxed),
        skipped.load(Ordering::Relaxed),
        churned.load(Ordering::Relaxed)
    );
    for p in stable.into_iter().flatten() {
        pool_free(p as *mut u8);
    }
    assert_eq!(
        kernel_replay::tracked(agent(gpus[0])).regions
            + kernel_replay::tracked(agent(gpus[1])).regions,
        0
    );
    assert_nothing_held();
}

/// Every byte of a churn buffer holds its own tag, or what it held when
/// allocated: zeros, or the poison of a reused block. A snapshot taken before
/// the fill restores the latter; one taken *during* the fill (the churn thread
/// writes without any lock, as a kernel would) captures, and so restores, a
/// mix of both. Any other value is another allocation's bytes.
fn assert_only_its_own_bytes(p: usize, size: usize, tag: u8) {
    let allowed = [tag, 0, hsa_sim::POISON_BYTE];
    let held = bytes(p as *const u8, size);
    if let Some(offset) = held.iter().position(|b| !allowed.contains(b)) {
        panic!(
            "buffer {p:#x} holds {:#x} at offset {offset} (its tag {tag:#x}): another allocation's bytes",
            held[offset]
        );
    }
}

struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
