//! Real host out-of-memory: a child process under a low RLIMIT_AS snapshots a
//! tracked footprint larger than what the limit leaves. `malloc` really fails
//! there (no injection), the snapshot must decline with HOST_MEMORY, release
//! what it took, and the process must carry on and exit normally.

mod common;

use common::*;
use hsa_sim::PoolKind;

const REGION: usize = 64 << 20;
const REGIONS: usize = 8;

/// The process's current address-space size, from /proc.
fn vm_size() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmSize:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib << 10
}

fn limit_address_space(bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: bytes,
    };
    // SAFETY: plain system call on a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
}

#[test]
fn a_footprint_over_the_address_space_limit_declines_with_host_memory() {
    if !in_child("a_footprint_over_the_address_space_limit_declines_with_host_memory") {
        return;
    }
    let sim = session(1);
    // A forced device tier declines with DEVICE_MEMORY here (tested
    // elsewhere); every other policy ends in host memory.
    let _policy = (policy() == kernel_replay::StoragePolicy::Device)
        .then(|| PolicyGuard::set(kernel_replay::StoragePolicy::Auto));
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    // 512 MiB of "device" memory (the runtime's, in this process).
    let buffers: Vec<_> = (0..REGIONS)
        .map(|i| {
            let p = pool_allocate(pool, REGION, 0).expect("device allocation");
            fill(p, REGION, i as u8);
            p
        })
        .collect();

    // Leave room for about two host copies, not eight.
    limit_address_space(vm_size() + (2 * REGION + REGION / 2) as u64);

    let snap = Snap::of(gpu);
    assert!(!snap.ok());
    assert_eq!(
        snap.reason(),
        Some(kernel_replay::DeclineReason::HostMemory)
    );
    assert_eq!(
        held(),
        0,
        "the copies taken before the failure are released"
    );
    assert!(
        logs_containing("cannot be allocated").len() == 1,
        "{:?}",
        logs()
    );
    drop(snap);

    // The process carries on: a footprint that fits snapshots and restores.
    for &p in &buffers[1..] {
        assert_eq!(pool_free(p), SUCCESS);
    }
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert_eq!(snap.bytes(), REGION as u64);
    fill(buffers[0], REGION, 0xFF);
    assert_eq!(snap.restore().restored, 1);
    assert!(all(buffers[0], REGION, 0));
    drop(snap);
    assert_eq!(pool_free(buffers[0]), SUCCESS);
}
