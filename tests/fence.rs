//! The async-copy fence: application copies in flight on tracked memory
//! hold back a snapshot or restore of that agent (up to a timeout, past
//! which the snapshot declines and the restore writes nothing), and the
//! application observes its completion signal exactly as without the
//! library.

mod common;

use std::time::Duration;

use common::*;
use hsa_sim::{Agent, PoolKind, SimSession};

const SIZE: usize = 64 << 10;
const LONG: Duration = Duration::from_secs(10);

/// Sets the fence timeout for one test, back to the default afterwards.
struct FenceTimeout;

impl FenceTimeout {
    fn set(timeout: Duration) -> FenceTimeout {
        kernel_replay::set_copy_fence_timeout(std::time::Duration::from_nanos(
            timeout.as_nanos() as u64
        ));
        FenceTimeout
    }
}

impl Drop for FenceTimeout {
    fn drop(&mut self) {
        kernel_replay::set_copy_fence_timeout(std::time::Duration::from_nanos(5_000_000_000));
    }
}

/// A tracked device buffer and an untracked host source of another byte.
fn buffers(sim: &SimSession, gpu: Agent) -> (*mut u8, *mut u8) {
    let dst = device_buffer(sim, gpu, SIZE, 0x11);
    let src = pool_allocate(sim.pool(sim.cpu(), PoolKind::SystemFine), SIZE, 0).unwrap();
    fill(src, SIZE, 0x99);
    (dst, src)
}

#[test]
fn a_copy_held_by_a_dependency_declines_the_snapshot_after_the_timeout() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    let dependency = signal_create(1);
    let done = signal_create(1);
    let before = stats2();
    assert_eq!(
        async_copy(dst, gpu, src, sim.cpu(), SIZE, &[dependency], done),
        SUCCESS
    );
    assert_eq!(stats2().fenced_copies, before.fenced_copies + 1);

    {
        let _timeout = FenceTimeout::set(Duration::from_millis(50));
        let snap = Snap::of(gpu);
        assert!(!snap.ok());
        assert_eq!(
            snap.reason(),
            Some(kernel_replay::DeclineReason::CopiesInFlight)
        );
        let detail = snap.0.as_ref().err().map(ToString::to_string);
        assert!(
            detail
                .as_deref()
                .is_some_and(|d| d.contains("1 application async copy(ies)")
                    && d.contains("still in flight after 50 ms")),
            "the timeout set is the one waited: {detail:?}"
        );
        let after = stats2();
        assert_eq!(after.fence_timeouts, before.fence_timeouts + 1);
        assert_eq!(
            after.declines[kernel_replay::DeclineReason::CopiesInFlight.code() as usize],
            before.declines[kernel_replay::DeclineReason::CopiesInFlight.code() as usize] + 1
        );
    }

    // The copy runs; the application sees its signal go from 1 to 0, as
    // the runtime alone would have done it.
    signal_store(dependency, 0);
    assert_eq!(signal_wait_below(done, 1, LONG), 0);
    assert!(all(dst, SIZE, 0x99));
    assert_eq!(signal_load(done), 0);
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "nothing in flight any more");
    signal_destroy(dependency);
    signal_destroy(done);
}

#[test]
fn a_replay_restore_waits_for_a_copy_in_flight_so_it_cannot_leak_into_the_next_pass() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    let snap = Snap::of(gpu);
    let dependency = signal_create(1);
    let done = signal_create(1);
    // Pass 1 writes the buffer, and an application copy into it is still
    // pending when the profiler restores for pass 2.
    fill(dst, SIZE, 0x22);
    assert_eq!(
        async_copy(dst, gpu, src, sim.cpu(), SIZE, &[dependency], done),
        SUCCESS
    );
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        signal_store(dependency, 0);
    });
    let before = stats2();
    let report = snap.restore();
    release.join().unwrap();
    assert_eq!(report.restored, 1);
    assert_eq!(
        signal_load(done),
        0,
        "the copy completed before the restore wrote"
    );
    assert!(
        all(dst, SIZE, 0x11),
        "the restore, not the copy, wrote last"
    );
    assert_eq!(stats2().fence_waits, before.fence_waits + 1);
    signal_destroy(dependency);
    signal_destroy(done);
}

#[test]
fn a_restore_past_the_timeout_writes_nothing_and_says_so() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    let snap = Snap::of(gpu);
    let dependency = signal_create(1);
    let done = signal_create(1);
    fill(dst, SIZE, 0x22);
    assert_eq!(
        async_copy(dst, gpu, src, sim.cpu(), SIZE, &[dependency], done),
        SUCCESS
    );
    {
        let _timeout = FenceTimeout::set(Duration::from_millis(50));
        let report = snap.restore();
        assert_eq!((report.restored, report.failed), (0, 1));
        // SAFETY: a live snapshot.
        assert!(!snap.restore_all());
    }
    assert!(all(dst, SIZE, 0x22), "nothing written under the copy");
    signal_store(dependency, 0);
    assert_eq!(signal_wait_below(done, 1, LONG), 0);
    assert!(all(dst, SIZE, 0x99));
    signal_destroy(dependency);
    signal_destroy(done);
}

#[test]
fn failed_and_refused_copies_reach_the_application_as_without_the_library() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    let done = signal_create(1);

    // Refused at submission: the status comes back, the signal is untouched,
    // and no count is left behind.
    sim.inject(hsa_sim::Fault::NthAsyncCopy, 0, 1);
    assert_ne!(
        async_copy(dst, gpu, src, sim.cpu(), SIZE, &[], done),
        SUCCESS
    );
    assert_eq!(signal_load(done), 1);

    // Failing while executing: the runtime's negative value is carried over.
    sim.inject(hsa_sim::Fault::NthAsyncCopyCompletion, 0, 1);
    assert_eq!(
        async_copy(dst, gpu, src, sim.cpu(), SIZE, &[], done),
        SUCCESS
    );
    assert!(signal_wait_below(done, 0, LONG) < 0);
    assert!(all(dst, SIZE, 0x11));

    let _timeout = FenceTimeout::set(Duration::from_millis(50));
    wait_until(|| Snap::of(gpu).ok());
    assert_eq!(sim.count(hsa_sim::Counter::InvalidSignalUses), 0);
    signal_destroy(done);
}

#[test]
fn copies_that_touch_no_tracked_memory_are_not_fenced() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let cpu_pool = sim.pool(sim.cpu(), PoolKind::SystemFine);
    let a = pool_allocate(cpu_pool, SIZE, 0).unwrap();
    let b = pool_allocate(cpu_pool, SIZE, 0).unwrap();
    assert!(!kernel_replay::set_tracking(false));
    let untracked = device_buffer(&sim, gpu, SIZE, 0);
    assert!(kernel_replay::set_tracking(true));
    let _tracked = device_buffer(&sim, gpu, SIZE, 0);
    let done = signal_create(1);
    let before = stats2();
    assert_eq!(
        async_copy(b, sim.cpu(), a, sim.cpu(), SIZE, &[], done),
        SUCCESS
    );
    assert_eq!(signal_wait_below(done, 1, LONG), 0);
    signal_store(done, 1);
    assert_eq!(
        async_copy(untracked, gpu, a, sim.cpu(), SIZE, &[], done),
        SUCCESS
    );
    assert_eq!(signal_wait_below(done, 1, LONG), 0);
    assert_eq!(stats2().fenced_copies, before.fenced_copies);
    // Nothing in flight on the agent: a snapshot does not count a wait.
    assert!(Snap::of(gpu).ok());
    assert_eq!(stats2().fence_waits, before.fence_waits);
    signal_destroy(done);
}

#[test]
fn rect_and_engine_copies_are_fenced_too() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    let dependency = signal_create(1);
    let done = signal_create(1);
    let _timeout = FenceTimeout::set(Duration::from_millis(50));

    // A rect copy whose last row lands in the tracked buffer.
    assert_eq!(
        async_copy_rect(dst, src, 256, 256, SIZE / 256, gpu, &[dependency], done),
        SUCCESS
    );
    assert_eq!(
        Snap::of(gpu).reason(),
        Some(kernel_replay::DeclineReason::CopiesInFlight)
    );
    signal_store(dependency, 0);
    assert_eq!(signal_wait_below(done, 1, LONG), 0);
    assert!(all(dst, SIZE, 0x99));
    assert!(Snap::of(gpu).ok());

    kernel_replay::with_vmem! {
        fn on_engine(sim: &SimSession, gpu: Agent, dst: *mut u8, src: *mut u8) {
            let dependency = signal_create(1);
            let done = signal_create(1);
            fill(src, SIZE, 0x55);
            assert_eq!(
                async_copy_on_engine(dst, gpu, src, sim.cpu(), SIZE, &[dependency], done),
                SUCCESS
            );
            assert_eq!(Snap::of(gpu).reason(), Some(kernel_replay::DeclineReason::CopiesInFlight));
            signal_store(dependency, 0);
            assert_eq!(signal_wait_below(done, 1, LONG), 0);
            assert!(all(dst, SIZE, 0x55));
            assert!(Snap::of(gpu).ok());
            signal_destroy(dependency);
            signal_destroy(done);
        }
    }
    #[cfg(hsa_vmem)]
    on_engine(&sim, gpu, dst, src);
    signal_destroy(dependency);
    signal_destroy(done);
}

#[test]
fn a_copy_submitted_during_a_snapshot_waits_for_it_and_then_runs() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    // Snapshots on one thread while the application copies on another:
    // every snapshot holds the buffer whole (all of one byte), never torn.
    let (dst_addr, src_addr) = (dst as usize, src as usize);
    let cpu = sim.cpu();
    let copier = std::thread::spawn(move || {
        let done = signal_create(1);
        for round in 0..200u32 {
            fill(src_addr as *mut u8, SIZE, 0x40 + (round % 2) as u8);
            signal_store(done, 1);
            let status = async_copy(
                dst_addr as *mut u8,
                gpu,
                src_addr as *const u8,
                cpu,
                SIZE,
                &[],
                done,
            );
            assert_eq!(status, SUCCESS);
            assert_eq!(signal_wait_below(done, 1, LONG), 0);
        }
        signal_destroy(done);
    });
    let mut held = Vec::new();
    while !copier.is_finished() && held.len() < 64 {
        let snap = Snap::of(gpu);
        if snap.ok() {
            held.push(snap);
        }
    }
    copier.join().unwrap();
    assert!(!held.is_empty());
    for snap in held {
        fill(dst, SIZE, 0x00);
        assert_eq!(snap.restore().restored, 1);
        // Restored from the captured bytes: one value throughout.
        let restored = bytes(dst, SIZE);
        assert!(
            restored.iter().all(|&b| b == restored[0]),
            "a torn snapshot"
        );
        assert!(restored[0] == 0x11 || restored[0] == 0x40 || restored[0] == 0x41);
    }
}

#[test]
fn proxy_signals_and_handlers_do_not_pile_up() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (dst, src) = buffers(&sim, gpu);
    let done = signal_create(1);
    let signals = sim.count(hsa_sim::Counter::LiveSignals);
    for _ in 0..50 {
        signal_store(done, 1);
        assert_eq!(
            async_copy(dst, gpu, src, sim.cpu(), SIZE, &[], done),
            SUCCESS
        );
        assert_eq!(signal_wait_below(done, 1, LONG), 0);
    }
    wait_until(|| sim.count(hsa_sim::Counter::SignalHandlers) == 0);
    assert!(
        sim.count(hsa_sim::Counter::LiveSignals) <= signals + 2,
        "proxies are reused: {} signals more",
        sim.count(hsa_sim::Counter::LiveSignals) - signals
    );
    signal_destroy(done);
}

/// Polls `done` for up to ten seconds (a handler runs on the runtime's
/// thread right after the copy's completion is visible).
fn wait_until(mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + LONG;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_copy_between_two_agents_tracked_memory_holds_back_both_and_one_agent_once() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    let on0 = device_buffer(&sim, gpu0, SIZE, 0x10);
    let on1 = device_buffer(&sim, gpu1, SIZE, 0x20);
    let also_on0 = device_buffer(&sim, gpu0, SIZE, 0x30);
    let in_flight = |gpu: Agent| kernel_replay::testing::fence_in_flight(agent(gpu).handle);
    for (dst, src, expected) in [(on0, on1, [1, 1]), (on0, also_on0, [1, 0])] {
        let dependency = signal_create(1);
        let done = signal_create(1);
        assert_eq!(
            async_copy(dst, gpu0, src, gpu0, SIZE, &[dependency], done),
            SUCCESS
        );
        assert_eq!([in_flight(gpu0), in_flight(gpu1)], expected);
        signal_store(dependency, 0);
        assert_eq!(signal_wait_below(done, 1, LONG), 0);
        wait_until(|| in_flight(gpu0) == 0 && in_flight(gpu1) == 0);
        signal_destroy(dependency);
        signal_destroy(done);
    }
    assert!(all(on0, SIZE, 0x30), "both copies ran");
}
