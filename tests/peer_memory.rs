//! Peer memory: another GPU's device memory a GPU was given access to
//! (`hsa_amd_agents_allow_access`), which a multi-GPU kernel on that GPU
//! writes. A snapshot of the grantee captures it (kind `DevicePeer`) and
//! its restores write it back; memory not granted stays out; frees are
//! retired as for any tracked allocation.

mod common;

use common::*;
use hsa_sim::PoolKind;
use kernel_replay::MemoryKind;

#[test]
fn a_buffer_of_another_gpu_granted_to_the_replayed_one_is_captured_and_restored() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    let own = device_buffer(&sim, gpu0, 4096, 1);
    let peer = device_buffer(&sim, gpu1, 8192, 2);
    let not_granted = device_buffer(&sim, gpu1, 4096, 3);
    assert_eq!(allow_access(&[gpu0, gpu1], peer), SUCCESS);

    // The owner's own snapshot takes its buffers as its own.
    let owners = Snap::of(gpu1);
    assert_eq!(owners.kind_bytes(MemoryKind::Device), 8192 + 4096);
    assert_eq!(owners.kind_bytes(MemoryKind::DevicePeer), 0);
    drop(owners);
    let estimate = kernel_replay::estimate_footprint(agent(gpu0));
    let snap = Snap::of(gpu0);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!((snap.regions(), snap.bytes()), (2, 4096 + 8192));
    assert_eq!((estimate.regions, estimate.bytes), (2, 4096 + 8192));
    assert_eq!(snap.kind_bytes(MemoryKind::Device), 4096);
    assert_eq!(snap.kind_bytes(MemoryKind::DevicePeer), 8192);
    // Still gpu1's memory, not gpu0's: not in gpu0's tracked count.
    assert_eq!(kernel_replay::tracked(agent(gpu0)).regions, 1);

    // A pass on gpu0 writes its buffer and the peer's.
    fill(own, 4096, 9);
    fill(peer, 8192, 9);
    fill(not_granted, 4096, 9);
    // SAFETY: a live snapshot.
    assert!(snap.restore_all());
    assert!(all(own, 4096, 1) && all(peer, 8192, 2));
    assert!(all(not_granted, 4096, 9), "never granted: left alone");

    // Freed by its owner, the peer buffer is retired before the runtime
    // frees it: the next restore skips it.
    assert_eq!(pool_free(peer), SUCCESS);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    for p in [own, not_granted] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn fine_grained_peer_memory_is_peer_memory_and_host_memory_is_host_memory() {
    let sim = session(2);
    let (gpu0, gpu1, cpu) = (sim.gpu(0), sim.gpu(1), sim.cpu());
    let fine = pool_allocate(sim.pool(gpu1, PoolKind::DeviceFine), 4096, 0).unwrap();
    // Coarse host memory granted to the GPUs: host memory (the CPU's), not
    // peer memory, whoever else was granted it.
    let host = pool_allocate(sim.pool(cpu, PoolKind::SystemCoarse), 8192, 0).unwrap();
    assert_eq!(allow_access(&[gpu0], fine), SUCCESS);
    assert_eq!(allow_access(&[gpu0, gpu1], host), SUCCESS);
    let snap = Snap::of(gpu0);
    assert_eq!(snap.regions(), 2);
    assert_eq!(snap.kind_bytes(MemoryKind::DevicePeer), 4096);
    assert_eq!(snap.kind_bytes(MemoryKind::Host), 8192);
    for p in [fine, host] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn a_failed_grant_records_nothing() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    let peer = device_buffer(&sim, gpu1, 4096, 1);
    // An interior pointer is no allocation's base: the runtime refuses.
    // SAFETY: inside the buffer.
    let interior = unsafe { peer.add(64) };
    assert_ne!(allow_access(&[gpu0], interior), SUCCESS);
    assert_eq!(Snap::of(gpu0).regions(), 0);
    assert_eq!(pool_free(peer), SUCCESS);
}

#[test]
fn an_application_copy_into_granted_peer_memory_holds_the_grantees_snapshot_back() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    const SIZE: usize = 64 << 10;
    let peer = device_buffer(&sim, gpu1, SIZE, 0x11);
    assert_eq!(allow_access(&[gpu0, gpu1], peer), SUCCESS);
    let src = pool_allocate(sim.pool(sim.cpu(), PoolKind::SystemFine), SIZE, 0).unwrap();
    fill(src, SIZE, 0x99);
    let (dependency, done) = (signal_create(1), signal_create(1));
    assert_eq!(
        async_copy(peer, gpu1, src, sim.cpu(), SIZE, &[dependency], done),
        SUCCESS
    );
    // gpu0's snapshot captures gpu1's buffer: it waits for the copy into it
    // (here, held by a dependency, past a short timeout: declined).
    kernel_replay::set_copy_fence_timeout(std::time::Duration::from_millis(50));
    let snap = Snap::of(gpu0);
    kernel_replay::set_copy_fence_timeout(std::time::Duration::from_secs(5));
    assert_eq!(
        snap.reason(),
        Some(kernel_replay::DeclineReason::CopiesInFlight)
    );
    signal_store(dependency, 0);
    assert_eq!(
        signal_wait_below(done, 1, std::time::Duration::from_secs(10)),
        0
    );
    let snap = Snap::of(gpu0);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert!(all(peer, SIZE, 0x99));
    // And its restore: a copy into the peer buffer still held back past the
    // timeout means nothing is written.
    signal_store(dependency, 1);
    signal_store(done, 1);
    assert_eq!(
        async_copy(peer, gpu1, src, sim.cpu(), SIZE, &[dependency], done),
        SUCCESS
    );
    fill(peer, SIZE, 0x55);
    kernel_replay::set_copy_fence_timeout(std::time::Duration::from_millis(50));
    let report = snap.restore();
    kernel_replay::set_copy_fence_timeout(std::time::Duration::from_secs(5));
    assert_eq!((report.restored, report.failed), (0, 1));
    assert!(all(peer, SIZE, 0x55), "not written under a copy in flight");
    signal_store(dependency, 0);
    assert_eq!(
        signal_wait_below(done, 1, std::time::Duration::from_secs(10)),
        0
    );
    signal_destroy(dependency);
    signal_destroy(done);
    for p in [peer, src] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn two_agents_never_hold_one_shared_region_at_once() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    let shared = device_buffer(&sim, gpu1, 4096, 1);
    let own0 = device_buffer(&sim, gpu0, 4096, 2);
    assert_eq!(allow_access(&[gpu0, gpu1], shared), SUCCESS);
    let held = Snap::of(gpu1);
    assert!(held.ok());
    // gpu0 would capture the buffer gpu1's live snapshot holds: declined.
    let declined = Snap::of(gpu0);
    assert_eq!(
        declined.reason(),
        Some(kernel_replay::DeclineReason::SharedRegionBusy)
    );
    let detail = declined.0.as_ref().err().map(ToString::to_string);
    assert!(
        detail
            .as_deref()
            .is_some_and(|d| d.contains("free that snapshot first")),
        "{detail:?}"
    );
    // Another snapshot of gpu1 itself is not refused.
    assert!(Snap::of(gpu1).ok());
    drop(held);
    let now = Snap::of(gpu0);
    assert!(now.ok(), "{:?}", now.reason());
    // And the other way round.
    assert_eq!(
        Snap::of(gpu1).reason(),
        Some(kernel_replay::DeclineReason::SharedRegionBusy)
    );
    drop(now);
    // Memory nobody else may write is never claimed: both agents at once.
    assert_eq!(pool_free(shared), SUCCESS);
    let (a, b) = (Snap::of(gpu0), Snap::of(gpu1));
    assert!(a.ok() && b.ok());
    assert_eq!(pool_free(own0), SUCCESS);
}

/// Two agents replay at once, 50 windows each, both able to write one
/// shared buffer: every window whose snapshot was taken sees the same
/// inputs in every pass, and no pass finds the shared buffer changed under
/// it by the other replay's restores (a declined window runs once and
/// writes only its own buffer, as an application that does not race).
#[test]
fn concurrent_replays_on_two_agents_never_tear_a_shared_region() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    const SIZE: usize = 16 << 10;
    let shared = device_buffer(&sim, gpu1, SIZE, 0x5A) as usize;
    assert_eq!(allow_access(&[gpu0, gpu1], shared as *const u8), SUCCESS);
    let own = [
        device_buffer(&sim, gpu0, SIZE, 0x10) as usize,
        device_buffer(&sim, gpu1, SIZE, 0x20) as usize,
    ];
    let replayed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for (index, gpu) in [gpu0, gpu1].into_iter().enumerate() {
            let replayed = &replayed;
            scope.spawn(move || {
                let (own, shared) = (own[index] as *mut u8, shared as *mut u8);
                let mine = 0xA0 + index as u8;
                for _ in 0..50 {
                    let snap = Snap::of(gpu);
                    if !snap.ok() {
                        assert_eq!(
                            snap.reason(),
                            Some(kernel_replay::DeclineReason::SharedRegionBusy)
                        );
                        continue;
                    }
                    for _pass in 0..3 {
                        // The pass reads its inputs, then writes both buffers.
                        assert!(all(shared, SIZE, 0x5A), "shared input torn");
                        assert!(all(own, SIZE, 0x10 * (index as u8 + 1)));
                        fill(shared, SIZE, mine);
                        fill(own, SIZE, mine);
                        std::thread::yield_now();
                        assert!(
                            all(shared, SIZE, mine),
                            "another replay restored under a pass"
                        );
                        assert!(snap.restore_all());
                    }
                    replayed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    assert!(replayed.into_inner() > 0, "some windows replayed");
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    for p in [shared, own[0], own[1]] {
        assert_eq!(pool_free(p as *mut u8), SUCCESS);
    }
}

#[test]
fn grants_are_recorded_whichever_agent_the_library_saw_first() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    // gpu1's buffer granted to gpu0, then gpu0's granted to gpu1: each
    // owner is a GPU, whichever order the library met the agents in.
    let of_gpu1 = device_buffer(&sim, gpu1, 4096, 1);
    let of_gpu0 = device_buffer(&sim, gpu0, 8192, 2);
    assert_eq!(allow_access(&[gpu0, gpu1], of_gpu1), SUCCESS);
    assert_eq!(allow_access(&[gpu0, gpu1], of_gpu0), SUCCESS);
    let snap1 = Snap::of(gpu1);
    assert_eq!(snap1.kind_bytes(MemoryKind::DevicePeer), 8192);
    drop(snap1);
    let snap0 = Snap::of(gpu0);
    assert_eq!(snap0.kind_bytes(MemoryKind::DevicePeer), 4096);
    drop(snap0);
    for p in [of_gpu0, of_gpu1] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}
