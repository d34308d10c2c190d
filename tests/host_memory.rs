//! Host memory a GPU can write: host-pool allocations granted to it
//! (`hipHostMalloc`) and host memory locked for it (`hipHostRegister`).
//! Captured and restored by the CPU as the host-memory setting says; what
//! it leaves out is reported, or declined under strict coverage; HIP's own
//! staging and hostcall buffers are not disturbed by a replay under the
//! default.

mod common;

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use hsa_sim::{Agent, PoolKind};
use kernel_replay::testing::assume_hip_loaded;
use kernel_replay::{Coverage, DeclineReason, HostMemory, MemoryKind, Tier};

/// Host memory the application owns (what it would `hipHostRegister`),
/// page-aligned, filled with `byte`.
struct HostBytes {
    ptr: *mut u8,
    layout: Layout,
}

impl HostBytes {
    fn new(size: usize, byte: u8) -> HostBytes {
        let layout = Layout::from_size_align(size, 4096).unwrap();
        // SAFETY: a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        fill(ptr, size, byte);
        HostBytes { ptr, layout }
    }
}

impl Drop for HostBytes {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// A host-pool allocation of `kind`, filled with `byte`.
fn host_buffer(sim: &hsa_sim::SimSession, kind: PoolKind, size: usize, byte: u8) -> *mut u8 {
    let p = pool_allocate(sim.pool(sim.cpu(), kind), size, 0).unwrap();
    fill(p, size, byte);
    p
}

fn fine_pool(sim: &hsa_sim::SimSession) -> hsa_sim::Pool {
    sim.pool(sim.cpu(), PoolKind::SystemFine)
}

fn coarse_pool(sim: &hsa_sim::SimSession) -> hsa_sim::Pool {
    sim.pool(sim.cpu(), PoolKind::SystemCoarse)
}

#[test]
fn host_pool_memory_granted_to_the_gpu_is_captured_and_restored_by_the_cpu() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    // No HIP in the process: every host byte granted to the GPU is taken.
    assume_hip_loaded(Some(false));
    let fine = host_buffer(&sim, PoolKind::SystemFine, 4096, 1);
    let coarse = host_buffer(&sim, PoolKind::SystemCoarse, 8192, 2);
    let not_granted = host_buffer(&sim, PoolKind::SystemFine, 4096, 3);
    // ROCr allocates a CPU pool's memory for the CPU alone: no GPU can
    // write it yet, so nothing is captured.
    assert_eq!(Snap::of(gpu).kind_bytes(MemoryKind::Host), 0);
    assert_eq!(allow_access(&[gpu], fine), SUCCESS);
    assert_eq!(allow_access(&[gpu], coarse), SUCCESS);

    let estimate = kernel_replay::estimate_footprint(agent(gpu));
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!((snap.regions(), snap.bytes()), (2, 4096 + 8192));
    assert_eq!((estimate.regions, estimate.bytes), (2, 4096 + 8192));
    assert_eq!(snap.kind_bytes(MemoryKind::Host), 4096 + 8192);
    // Kept in pageable host memory, copied by the CPU.
    assert_eq!(snap.tier_bytes(Tier::Pageable), 4096 + 8192);
    assert_eq!(snap.not_covered(MemoryKind::Host), 0);

    // A pass writes them all.
    for (p, size) in [(fine, 4096), (coarse, 8192), (not_granted, 4096)] {
        fill(p, size, 9);
    }
    assert!(snap.restore_all());
    assert!(all(fine, 4096, 1) && all(coarse, 8192, 2));
    assert!(all(not_granted, 4096, 9), "never granted: left alone");

    // Freed, a host buffer is retired before the runtime frees it.
    assert_eq!(pool_free(fine), SUCCESS);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    for p in [coarse, not_granted] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn a_grant_that_replaces_the_list_takes_the_buffer_out_of_the_old_gpus_snapshots() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    assume_hip_loaded(Some(false));
    let host = host_buffer(&sim, PoolKind::SystemFine, 4096, 1);
    assert_eq!(allow_access(&[gpu0, gpu1], host), SUCCESS);
    assert_eq!(Snap::of(gpu0).kind_bytes(MemoryKind::Host), 4096);
    // ROCr: upon return only the listed agents have access.
    assert_eq!(allow_access(&[gpu1], host), SUCCESS);
    assert_eq!(Snap::of(gpu0).kind_bytes(MemoryKind::Host), 0);
    assert_eq!(Snap::of(gpu1).kind_bytes(MemoryKind::Host), 4096);
    // A list of CPUs only takes it from every GPU.
    assert_eq!(allow_access(&[sim.cpu()], host), SUCCESS);
    assert_eq!(Snap::of(gpu1).kind_bytes(MemoryKind::Host), 0);
    assert_eq!(pool_free(host), SUCCESS);
}

#[test]
fn under_hip_only_registered_memory_is_captured_and_the_rest_is_reported() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    assume_hip_loaded(Some(true));
    let fine = host_buffer(&sim, PoolKind::SystemFine, 4096, 1);
    let coarse = host_buffer(&sim, PoolKind::SystemCoarse, 8192, 2);
    for p in [fine, coarse] {
        assert_eq!(allow_access(&[gpu], p), SUCCESS);
    }
    // hipHostRegister: locked to the fine-grained CPU pool.
    let registered = HostBytes::new(16384, 3);
    memory_lock_to_pool(registered.ptr, 16384, &[gpu], fine_pool(&sim)).unwrap();
    // HIP's pinning of pageable memory for one copy: the coarse-grained pool.
    let pinned = HostBytes::new(4096, 4);
    memory_lock_to_pool(pinned.ptr, 4096, &[gpu], coarse_pool(&sim)).unwrap();

    let before = stats2();
    let estimate = kernel_replay::estimate_footprint(agent(gpu));
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!(snap.kind_bytes(MemoryKind::Locked), 16384);
    assert_eq!(snap.kind_bytes(MemoryKind::Host), 0);
    assert_eq!((estimate.regions, estimate.bytes), (1, 16384));
    assert_eq!(snap.not_covered(MemoryKind::Host), 4096 + 8192);
    assert_eq!(snap.not_covered(MemoryKind::Locked), 4096);
    let after = stats2();
    let host = MemoryKind::Host.index();
    assert_eq!(
        after.bytes_not_covered_by_kind[host] - before.bytes_not_covered_by_kind[host],
        4096 + 8192
    );
    // Said once per agent, naming the bytes.
    assert_eq!(logs_containing("do not cover").len(), 1, "{:?}", logs());
    assert_eq!(logs_containing("16384 bytes of host memory").len(), 1);
    drop(snap);
    assert!(Snap::of(gpu).ok());
    assert_eq!(logs_containing("do not cover").len(), 1);

    // Strict coverage declines instead.
    kernel_replay::set_coverage(Coverage::Strict);
    assert_eq!(Snap::of(gpu).reason(), Some(DeclineReason::UncoveredMemory));
    kernel_replay::set_coverage(Coverage::Warn);

    kernel_replay::set_host_memory(HostMemory::All);
    let everything = Snap::of(gpu);
    assert_eq!(everything.kind_bytes(MemoryKind::Host), 4096 + 8192);
    assert_eq!(everything.kind_bytes(MemoryKind::Locked), 16384 + 4096);
    drop(everything);
    kernel_replay::set_host_memory(HostMemory::Off);
    let none = Snap::of(gpu);
    assert_eq!(none.kind_bytes(MemoryKind::Locked), 0);
    assert_eq!(none.not_covered(MemoryKind::Locked), 16384 + 4096);
    drop(none);
    // Nothing left out, nothing declined, even when strict.
    kernel_replay::set_coverage(Coverage::Strict);
    kernel_replay::set_host_memory(HostMemory::All);
    assert!(Snap::of(gpu).ok());
    for p in [registered.ptr, pinned.ptr] {
        assert_eq!(memory_unlock(p), SUCCESS);
    }
    for p in [fine, coarse] {
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn locked_memory_is_captured_for_its_gpus_and_retired_at_its_last_unlock() {
    let sim = session(2);
    let (gpu0, gpu1, cpu) = (sim.gpu(0), sim.gpu(1), sim.cpu());
    // hipHostRegister on two GPUs: one lock per GPU, each naming one.
    let registered = HostBytes::new(8192, 1);
    for gpu in [gpu0, gpu1] {
        let agent_ptr = memory_lock_to_pool(registered.ptr, 8192, &[gpu], fine_pool(&sim)).unwrap();
        assert_eq!(agent_ptr, registered.ptr);
    }
    // No agent list: every GPU. A list of CPUs only: none, nothing locked.
    let everyone = HostBytes::new(4096, 2);
    memory_lock(everyone.ptr, 4096, &[]).unwrap();
    let nobody = HostBytes::new(4096, 3);
    memory_lock(nobody.ptr, 4096, &[cpu]).unwrap();

    for gpu in [gpu1, gpu0] {
        let snap = Snap::of(gpu);
        assert_eq!(snap.kind_bytes(MemoryKind::Locked), 8192 + 4096, "{gpu:?}");
    }
    let snap = Snap::of(gpu0);
    fill(registered.ptr, 8192, 9);
    fill(everyone.ptr, 4096, 9);
    fill(nobody.ptr, 4096, 9);
    assert!(snap.restore_all());
    assert!(all(registered.ptr, 8192, 1) && all(everyone.ptr, 4096, 2));
    assert!(all(nobody.ptr, 4096, 9));

    // The first unlock leaves the other GPU's lock: still captured.
    assert_eq!(memory_unlock(registered.ptr), SUCCESS);
    fill(registered.ptr, 8192, 9);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (2, 0));
    assert!(all(registered.ptr, 8192, 1));
    // The last one retires it before the runtime unlocks.
    assert_eq!(memory_unlock(registered.ptr), SUCCESS);
    fill(registered.ptr, 8192, 9);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert!(all(registered.ptr, 8192, 9), "unlocked: no longer written");
    drop(snap);
    assert_eq!(Snap::of(gpu0).kind_bytes(MemoryKind::Locked), 4096);
    // Unlocking what is not locked only chains (ROCr: success).
    assert_eq!(memory_unlock(nobody.ptr), SUCCESS);
    assert_eq!(memory_unlock(everyone.ptr), SUCCESS);
    assert_eq!(Snap::of(gpu0).kind_bytes(MemoryKind::Locked), 0);
}

#[test]
fn a_failed_lock_records_nothing() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let bytes = HostBytes::new(4096, 1);
    sim.inject(hsa_sim::Fault::Locks, 0, 1);
    assert!(memory_lock(bytes.ptr, 4096, &[gpu]).is_err());
    assert_eq!(Snap::of(gpu).kind_bytes(MemoryKind::Locked), 0);
    // A lock to a GPU's pool is refused by the runtime: nothing either.
    let device_pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    assert!(memory_lock_to_pool(bytes.ptr, 4096, &[gpu], device_pool).is_err());
    assert_eq!(Snap::of(gpu).kind_bytes(MemoryKind::Locked), 0);
}

/// Steps of a helper thread, told by the main thread.
fn step(rx: &mpsc::Receiver<()>) {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the main thread's go");
}

/// A pageable `hipMemcpy` on another stream while a dispatch is replayed:
/// HIP copies the application's pageable bytes into its staging buffer with
/// the CPU, then from there to the device. A restore between the two
/// writes the staging buffer back under the copy.
fn copy_through_staging_during_a_restore(sim: &hsa_sim::SimSession, gpu: Agent) -> bool {
    // HIP's staging buffer: the coarse-grained CPU pool, granted to every GPU.
    let staging = host_buffer(sim, PoolKind::SystemCoarse, 65536, 0);
    assert_eq!(allow_access(&[gpu], staging), SUCCESS);
    let device = device_buffer(sim, gpu, 65536, 0);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    let (go, wait) = mpsc::channel();
    let (staged, staged_rx) = mpsc::channel();
    let (staging_at, device_at) = (staging as usize, device as usize);
    let cpu = sim.cpu();
    let copier = std::thread::spawn(move || {
        let (staging, device) = (staging_at as *mut u8, device_at as *mut u8);
        fill(staging, 65536, 7);
        staged.send(()).unwrap();
        step(&wait);
        let done = signal_create(1);
        assert_eq!(
            async_copy(device, gpu, staging, cpu, 65536, &[], done),
            SUCCESS
        );
        assert_eq!(signal_wait_below(done, 1, Duration::from_secs(10)), 0);
        signal_destroy(done);
        all(device, 65536, 7)
    });
    staged_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Between two passes of the replayed dispatch.
    assert!(snap.restore_all());
    go.send(()).unwrap();
    let intact = copier.join().unwrap();
    drop(snap);
    assert_eq!(pool_free(device), SUCCESS);
    assert_eq!(pool_free(staging), SUCCESS);
    intact
}

#[test]
fn a_pageable_copy_through_a_staging_buffer_is_not_disturbed_by_a_replay_under_hip() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    assume_hip_loaded(Some(true));
    assert!(copy_through_staging_during_a_restore(&sim, gpu));
    // What the default keeps away: taking every host buffer rewrites the
    // staging buffer under the copy.
    kernel_replay::set_host_memory(HostMemory::All);
    assert!(!copy_through_staging_during_a_restore(&sim, gpu));
}

/// A device `printf`'s hostcall buffer: the kernel posts request `n + 1`
/// where the buffer says `n` were served; the listener thread serves only
/// the request it expects by its own count (as clr's listener keeps its own
/// state beside the buffer's). Returns how many of `passes` passes were
/// served, with a restore between passes.
fn hostcall_passes(sim: &hsa_sim::SimSession, gpu: Agent, passes: u64) -> u64 {
    // clr's hostcall buffer: the fine-grained CPU pool, granted to every GPU.
    let buffer = host_buffer(sim, PoolKind::SystemFine, 4096, 0);
    assert_eq!(allow_access(&[gpu], buffer), SUCCESS);
    let words = buffer as usize;
    // Word 0: requests served (the listener's); word 1: the request posted.
    let word = move |i: usize| (words as *mut u64).wrapping_add(i);
    let listener = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_millis(300 * passes);
        let mut served = 0;
        while Instant::now() < deadline {
            // SAFETY: the buffer lives until this thread is joined.
            if unsafe { std::ptr::read_volatile(word(1)) } == served + 1 {
                served += 1;
                // SAFETY: as above.
                unsafe { std::ptr::write_volatile(word(0), served) };
            }
            std::thread::yield_now();
        }
    });
    let snap = Snap::of(gpu);
    let mut served = 0;
    for _ in 0..passes {
        // The pass: post the next request and wait for its answer.
        // SAFETY: the buffer is live.
        let request = unsafe { std::ptr::read_volatile(word(0)) } + 1;
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(word(1), request) };
        let deadline = Instant::now() + Duration::from_millis(200);
        // SAFETY: as above.
        while unsafe { std::ptr::read_volatile(word(0)) } < request && Instant::now() < deadline {
            std::thread::yield_now();
        }
        // SAFETY: as above.
        if unsafe { std::ptr::read_volatile(word(0)) } == request {
            served += 1;
        }
        assert!(snap.restore_all());
    }
    listener.join().unwrap();
    drop(snap);
    assert_eq!(pool_free(buffer), SUCCESS);
    served
}

#[test]
fn a_hostcall_buffer_serviced_by_a_listener_thread_is_not_rewound_under_hip() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    assume_hip_loaded(Some(true));
    assert_eq!(hostcall_passes(&sim, gpu, 3), 3);
    // Rewound between passes, the buffer and its listener disagree: the
    // kernel reposts request 1, which the listener answered already, and
    // no pass after the first is served.
    kernel_replay::set_host_memory(HostMemory::All);
    assert_eq!(hostcall_passes(&sim, gpu, 3), 1);
}
