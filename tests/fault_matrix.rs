//! The fault matrix: every decline reason and every restore failure, each
//! produced by injection in the software runtime (or by failing host
//! allocations), each checked for the same guarantees:
//!
//! - the snapshot declines with the expected reason, or the restore report
//!   counts the failure;
//! - a declined snapshot writes nothing, and a failed region is left as it was;
//! - every other region is unaffected (restored, or untouched by a decline);
//! - the memory it took is returned (`kr_host_bytes_in_use` and
//!   `kr_device_bytes_in_use` back to zero once retained arenas are trimmed);
//! - the process keeps working: the next snapshot and restore succeed.
//!
//! Everything runs under the storage policy in force (scripts/test.sh runs
//! the tests under each); a case that only one policy can reach says so.

mod common;

use common::*;
use hsa_sim::{Agent, PoolKind, SimSession};
use kernel_replay::hsa::sys::{
    HSA_EXECUTABLE_SYMBOL_INFO_TYPE, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
    HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE,
};
use kernel_replay::{DeclineReason, StoragePolicy};

/// Device state every case starts from: three buffers and a module variable
/// on gpu0 (the replayed agent), one buffer on gpu1.
struct Fixture {
    gpu: Agent,
    regions: Vec<(*mut u8, usize, u8)>,
    other_agent: (*mut u8, usize, u8),
    extra: Vec<*mut u8>,
    /// An executable loaded by a case after the first snapshot.
    late_exe: Option<hsa_sim::Executable>,
}

impl Fixture {
    fn new(sim: &SimSession) -> Fixture {
        let gpu = sim.gpu(0);
        let mut regions: Vec<_> = [(4096, 0x11), (8192, 0x22), (100, 0x33)]
            .map(|(n, b)| (device_buffer(sim, gpu, n, b), n, b))
            .into();
        let exe = sim.executable_create();
        let var = sim.add_variable(exe, gpu, "state", 64, false);
        fill(var, 64, 0x55);
        regions.push((var, 64, 0x55));
        let other = device_buffer(sim, sim.gpu(1), 4096, 0x44);
        Fixture {
            gpu,
            regions,
            other_agent: (other, 4096, 0x44),

            extra: Vec::new(),
            late_exe: None,
        }
    }

    fn mutate_all(&self) {
        for &(p, n, b) in &self.regions {
            fill(p, n, !b);
        }
    }

    fn holds_original(&self, p: *mut u8) -> bool {
        let &(_, n, b) = self
            .regions
            .iter()
            .find(|r| r.0 == p)
            .expect("a fixture region");
        all(p, n, b)
    }

    fn all_original(&self) -> bool {
        self.regions.iter().all(|&(p, n, b)| all(p, n, b))
    }

    fn all_mutated(&self) -> bool {
        self.regions.iter().all(|&(p, n, b)| all(p, n, !b))
    }

    fn buffer(&self, i: usize) -> *mut u8 {
        self.regions[i].0
    }

    fn variable(&self) -> *mut u8 {
        self.regions[3].0
    }

    /// The process keeps working: a fresh snapshot captures and restores.
    fn assert_recovers(&self) {
        for &(p, n, b) in &self.regions {
            fill(p, n, b);
        }
        let snap = Snap::of(self.gpu);
        assert!(
            snap.ok(),
            "the next snapshot succeeds ({:?})",
            snap.reason()
        );
        self.mutate_all();
        let report = snap.restore();
        assert_eq!(report.failed, 0);
        assert!(self.all_original(), "the next restore restores");
        drop(snap);
        assert_nothing_held();
    }

    fn release(self) {
        for &(p, _, _) in &self.regions[..3] {
            pool_free(p);
        }
        pool_free(self.other_agent.0);
        for p in self.extra {
            pool_free(p);
        }
    }
}

/// A way to make `kr_snap` decline.
struct DeclineCase {
    name: &'static str,
    reason: DeclineReason,
    /// What the decline's detail (its `Display`, and the log line) says.
    says: &'static str,
    /// The policies that can reach this decline.
    applies: fn(StoragePolicy) -> bool,
    arm: fn(&SimSession, &mut Fixture),
    snap: fn(&Fixture) -> Snap,
    disarm: fn(&SimSession, &Fixture),
}

fn plain_snap(f: &Fixture) -> Snap {
    Snap::of(f.gpu)
}

fn nothing(_: &SimSession, _: &Fixture) {}

fn any_policy(_: StoragePolicy) -> bool {
    true
}

/// A policy that keeps copies in host memory (the host budget and the host
/// allocator apply to it).
fn host_tiers(policy: StoragePolicy) -> bool {
    policy != StoragePolicy::Device
}

/// A policy whose host copies come from the process's own allocator.
fn pageable_host(policy: StoragePolicy) -> bool {
    matches!(policy, StoragePolicy::Pageable | StoragePolicy::Baseline)
}

/// Loads a second executable, never discovered before, whose walk the case
/// then breaks (discovered executables are cached, so breaking the first
/// one's walk would not be noticed by a policy that caches).
fn fresh_executable(sim: &SimSession, f: &mut Fixture) -> hsa_sim::Executable {
    let exe = sim.executable_create();
    let v = sim.add_variable(exe, f.gpu, "late", 16, false);
    fill(v, 16, 0x66);
    f.late_exe = Some(exe);
    exe
}

fn decline_cases() -> Vec<DeclineCase> {
    let mut cases = vec![
        DeclineCase {
            name: "no executable iterator (none set, no loader extension)",
            reason: DeclineReason::NoExecutableIterator,
            says: "no executable iterator: none set",
            applies: any_policy,
            arm: |sim, _| {
                kernel_replay::set_executable_iterator(None);
                sim.inject(hsa_sim::Fault::LoaderExtension, 0, 1);
            },
            snap: plain_snap,
            disarm: |sim, _| sim.inject(hsa_sim::Fault::LoaderExtension, 0, 0),
        },
        DeclineCase {
            name: "executable iterator fails",
            reason: DeclineReason::SymbolEnumeration,
            says: "the executable iterator failed with HSA status 0x",
            applies: any_policy,
            arm: |sim, _| sim.inject(hsa_sim::Fault::ExecutableIteration, 0, 1),
            snap: plain_snap,
            disarm: |sim, _| sim.inject(hsa_sim::Fault::ExecutableIteration, 0, 0),
        },
        DeclineCase {
            name: "symbol walk refused",
            reason: DeclineReason::SymbolEnumeration,
            says: "symbol walk of executable 0x",
            applies: any_policy,
            arm: |sim, f| {
                let exe = fresh_executable(sim, f);
                sim.inject(hsa_sim::Fault::SymbolWalk, exe.handle, 1);
            },
            snap: plain_snap,
            disarm: |sim, f| sim.inject(hsa_sim::Fault::SymbolWalk, f.late_exe.unwrap().handle, 0),
        },
        DeclineCase {
            name: "symbol kind query fails",
            reason: DeclineReason::SymbolEnumeration,
            says: "symbol query (attribute 0) in executable 0x",
            applies: any_policy,
            arm: |sim, f| {
                fresh_executable(sim, f);
                sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(HSA_EXECUTABLE_SYMBOL_INFO_TYPE),
                    1,
                );
            },
            snap: plain_snap,
            disarm: |sim, _| {
                sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(HSA_EXECUTABLE_SYMBOL_INFO_TYPE),
                    0,
                )
            },
        },
        DeclineCase {
            name: "variable address query fails",
            reason: DeclineReason::SymbolEnumeration,
            says: "symbol query (attribute 21) in executable 0x",
            applies: any_policy,
            arm: |sim, f| {
                fresh_executable(sim, f);
                sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS),
                    1,
                );
            },
            snap: plain_snap,
            disarm: |sim, _| {
                sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS),
                    0,
                )
            },
        },
        DeclineCase {
            name: "variable size query fails",
            reason: DeclineReason::SymbolEnumeration,
            says: "symbol query (attribute 9) in executable 0x",
            applies: any_policy,
            arm: |sim, f| {
                fresh_executable(sim, f);
                sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE),
                    1,
                );
            },
            snap: plain_snap,
            disarm: |sim, _| {
                sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE),
                    0,
                )
            },
        },
        DeclineCase {
            // 2,000 more tracked regions of 64 bytes: the region lists run to
            // tens of KiB while no host copy reaches 16 KiB.
            name: "metadata allocation fails",
            reason: DeclineReason::MetadataMemory,
            says: "",
            applies: any_policy,
            arm: |sim, f| {
                let pool = sim.pool(f.gpu, PoolKind::DeviceCoarse);
                f.extra = (0..2000)
                    .map(|_| pool_allocate(pool, 64, 0).unwrap())
                    .collect();
            },
            snap: |f| with_allocations_failing_at(16 << 10, || Snap::of(f.gpu)),
            disarm: nothing,
        },
        DeclineCase {
            // No device tier, and a host budget the footprint passes.
            name: "host budget exceeded",
            reason: DeclineReason::HostMemory,
            says: "would pass the host budget",
            applies: host_tiers,
            arm: |_, _| {
                kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Bytes(0));
                kernel_replay::set_host_budget(Some(4096 + 8192));
            },
            snap: plain_snap,
            disarm: |_, _| {
                kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Auto);
                kernel_replay::set_host_budget(None);
            },
        },
        DeclineCase {
            // The process's allocator refuses 8 KiB and more: the baseline's
            // 8 KiB region copy, or the pageable arena.
            name: "host buffer allocation fails",
            reason: DeclineReason::HostMemory,
            says: "cannot be allocated",
            applies: pageable_host,
            arm: |_, _| (),
            snap: |f| with_allocations_failing_at(8192, || Snap::of(f.gpu)),
            disarm: nothing,
        },
        DeclineCase {
            name: "pinned arena allocation fails",
            reason: DeclineReason::HostMemory,
            says: "bytes of host memory for the snapshot cannot be allocated",
            applies: |p| p == StoragePolicy::Pinned,
            arm: |sim, _| sim.inject(hsa_sim::Fault::NextAllocations, 0, 1),
            snap: plain_snap,
            disarm: nothing,
        },
        DeclineCase {
            name: "device arena allocation fails",
            reason: DeclineReason::DeviceMemory,
            says: "bytes of device memory for the snapshot cannot be allocated",
            applies: |p| p == StoragePolicy::Device,
            arm: |sim, _| sim.inject(hsa_sim::Fault::NextAllocations, 0, 1),
            snap: plain_snap,
            disarm: nothing,
        },
        DeclineCase {
            name: "device budget exceeded",
            reason: DeclineReason::DeviceMemory,
            says: "would pass the device budget",
            applies: |p| p == StoragePolicy::Device,
            arm: |_, _| kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Bytes(4096)),
            snap: plain_snap,
            disarm: |_, _| kernel_replay::set_device_budget(kernel_replay::DeviceBudget::Auto),
        },
        DeclineCase {
            // The baseline's own injection: the n-th device-to-host copy.
            name: "second device-to-host copy fails",
            reason: DeclineReason::CopyFailed,
            says: "failed with HSA status",
            applies: |p| p == StoragePolicy::Baseline,
            arm: |sim, _| sim.inject(hsa_sim::Fault::NthD2hCopy, 0, 2),
            snap: plain_snap,
            disarm: nothing,
        },
    ];
    // Four regions are copied: fail the copy out of each in turn, whatever
    // engine (blocking or batched) and tier the copy uses.
    for (region, name) in [
        (0, "first region's copy fails"),
        (1, "second region's copy fails"),
        (2, "third region's copy fails"),
        (3, "module variable's copy fails"),
    ] {
        cases.push(DeclineCase {
            name,
            reason: DeclineReason::CopyFailed,
            says: "failed with HSA status",
            applies: any_policy,
            arm: match region {
                0 => |sim, f| sim.inject(hsa_sim::Fault::CopiesFrom, f.regions[0].0 as u64, 0),
                1 => |sim, f| sim.inject(hsa_sim::Fault::CopiesFrom, f.regions[1].0 as u64, 0),
                2 => |sim, f| sim.inject(hsa_sim::Fault::CopiesFrom, f.regions[2].0 as u64, 0),
                _ => |sim, f| sim.inject(hsa_sim::Fault::CopiesFrom, f.regions[3].0 as u64, 0),
            },
            snap: plain_snap,
            disarm: |sim, _| {
                sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
                sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0)
            },
        });
    }
    cases
}

/// Every storage policy: each has declines and copy paths only it reaches,
/// so one plain `cargo test` (and each cargo-mutants run) covers them all,
/// not only the policy the process was started with.
const POLICIES: [StoragePolicy; 5] = [
    StoragePolicy::Auto,
    StoragePolicy::Device,
    StoragePolicy::Pinned,
    StoragePolicy::Pageable,
    StoragePolicy::Baseline,
];

#[test]
fn every_decline_reason_declines_cleanly_and_the_process_recovers() {
    for policy in POLICIES {
        decline_matrix(policy);
    }
}

/// The decline cases that apply to `policy`, each run under it.
fn decline_matrix(policy: StoragePolicy) {
    let cases = decline_cases();
    let mut ran = 0;
    for case in cases.iter().filter(|c| (c.applies)(policy)) {
        ran += 1;
        let sim = session(2);
        // Set under the runtime's lock, which keeps the other tests out.
        let _policy = PolicyGuard::set(policy);
        let mut f = Fixture::new(&sim);
        let earlier = Snap::of(f.gpu);
        assert!(earlier.ok());
        let held_before = held();
        (case.arm)(&sim, &mut f);
        logs_clear();

        let declined = (case.snap)(&f);
        assert!(!declined.ok(), "{}: declined", case.name);
        assert_eq!(
            declined.reason(),
            Some(case.reason),
            "{} ({policy:?})",
            case.name
        );
        assert_eq!(
            (declined.regions(), declined.bytes()),
            (0, 0),
            "{}",
            case.name
        );
        assert!(
            held() <= held_before,
            "{}: what it took is released at once",
            case.name
        );
        assert_eq!(
            logs_containing("declined").len(),
            1,
            "{}: one log line {:?}",
            case.name,
            logs()
        );
        let detail = declined.0.as_ref().err().map(ToString::to_string);
        let detail = detail.unwrap_or_default();
        assert!(
            detail.contains(case.says) && detail.contains("declined ("),
            "{}: {detail:?} says {:?}",
            case.name,
            case.says
        );
        assert_eq!(
            logs_containing(&format!("declined ({}): ", case.reason))
                .iter()
                .filter(|line| line.contains(case.says))
                .count(),
            1,
            "{}: the log line says it too {:?}",
            case.name,
            logs()
        );
        assert!(
            f.all_original(),
            "{}: a snapshot attempt changes no device memory",
            case.name
        );

        // A declined snapshot writes nothing.
        f.mutate_all();
        let copies_before = copies(&sim);
        let report = declined.restore();
        assert_eq!(
            (report.restored, report.skipped_not_live, report.failed),
            (0, 0, 0),
            "{}",
            case.name
        );
        assert_eq!(copies(&sim), copies_before, "{}", case.name);
        assert!(f.all_mutated(), "{}", case.name);
        // An earlier, complete snapshot is unaffected by the decline.
        assert_eq!(earlier.restore().restored, 4, "{}", case.name);
        assert!(f.all_original(), "{}", case.name);
        assert!(
            all(f.other_agent.0, f.other_agent.1, f.other_agent.2),
            "{}",
            case.name
        );
        drop(declined);
        drop(earlier);
        assert_nothing_held();

        (case.disarm)(&sim, &f);
        f.assert_recovers();
        assert_eq!(
            sim.count(hsa_sim::Counter::CopyViolations),
            0,
            "{}",
            case.name
        );
        f.release();
    }
    assert!(ran >= 12, "{policy:?}: only {ran} decline cases ran");
}

/// A way to make one region of a restore fail or be skipped.
struct RestoreCase {
    name: &'static str,
    /// Arms the fault after the snapshot; returns the affected region.
    arm: fn(&SimSession, &Fixture) -> *mut u8,
    failed: usize,
    skipped: usize,
    /// What the affected region holds afterwards.
    after: fn(&Fixture, *mut u8) -> bool,
    disarm: fn(&SimSession, &Fixture),
}

fn restore_cases() -> Vec<RestoreCase> {
    vec![
        RestoreCase {
            name: "the copy into a tracked buffer fails",
            arm: |sim, f| {
                sim.inject(hsa_sim::Fault::CopiesInto, f.buffer(1) as u64, 0);
                f.buffer(1)
            },
            failed: 1,
            skipped: 0,
            after: |f, p| all(p, 8192, !0x22) && !f.holds_original(p),
            disarm: |sim, _| {
                sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
                sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0)
            },
        },
        RestoreCase {
            name: "the copy into a module variable fails",
            arm: |sim, f| {
                sim.inject(hsa_sim::Fault::CopiesInto, f.variable() as u64, 0);
                f.variable()
            },
            failed: 1,
            skipped: 0,
            after: |_, p| all(p, 64, !0x55),
            disarm: |sim, _| {
                sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
                sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0)
            },
        },
        RestoreCase {
            name: "a tracked buffer was freed",
            arm: |_, f| {
                assert_eq!(pool_free(f.buffer(0)), SUCCESS);
                f.buffer(0)
            },
            failed: 0,
            skipped: 1,
            after: |_, _| true,
            disarm: nothing,
        },
        RestoreCase {
            name: "a tracked buffer was freed and its address reused",
            arm: |sim, f| {
                sim.set_mode(hsa_sim::Mode::AddressReuse, true);
                assert_eq!(pool_free(f.buffer(0)), SUCCESS);
                let again =
                    pool_allocate(sim.pool(f.gpu, PoolKind::DeviceCoarse), 4096, 0).unwrap();
                assert_eq!(again, f.buffer(0));
                fill(again, 4096, 0x77);
                again
            },
            failed: 0,
            skipped: 1,
            after: |_, p| all(p, 4096, 0x77),
            disarm: |sim, _| sim.set_mode(hsa_sim::Mode::AddressReuse, false),
        },
    ]
}

#[test]
fn every_restore_failure_is_reported_and_the_other_regions_restored() {
    for policy in POLICIES {
        restore_matrix(policy);
    }
}

/// Every restore case, each run under `policy`.
fn restore_matrix(policy: StoragePolicy) {
    for case in restore_cases() {
        let sim = session(2);
        // Set under the runtime's lock, which keeps the other tests out.
        let _policy = PolicyGuard::set(policy);
        let mut f = Fixture::new(&sim);
        let snap = Snap::of(f.gpu);
        assert!(snap.ok());
        f.mutate_all();
        let affected = (case.arm)(&sim, &f);
        logs_clear();
        let report = snap.restore();
        assert_eq!(
            (report.restored, report.skipped_not_live, report.failed),
            (4 - case.failed - case.skipped, case.skipped, case.failed),
            "{} ({policy:?})",
            case.name
        );
        assert_eq!(
            logs().len(),
            1,
            "{}: the failure is logged {:?}",
            case.name,
            logs()
        );
        for &(p, n, b) in &f.regions {
            if p != affected {
                assert!(all(p, n, b), "{}: another region is restored", case.name);
            }
        }
        assert!(
            (case.after)(&f, affected),
            "{}: the affected region",
            case.name
        );
        assert!(
            all(f.other_agent.0, f.other_agent.1, f.other_agent.2),
            "{}",
            case.name
        );
        assert_eq!(
            sim.count(hsa_sim::Counter::CopyViolations),
            0,
            "{}",
            case.name
        );
        assert!(
            sim.quarantine_intact(),
            "{}: nothing freed was written",
            case.name
        );
        drop(snap);
        assert_nothing_held();
        (case.disarm)(&sim, &f);

        // Replace a freed buffer so the fixture is whole again, then recover.
        if case.skipped == 1 {
            let p = affected;
            if case.name.contains("reused") {
                pool_free(p);
            }
            let fresh = device_buffer(&sim, f.gpu, 4096, 0x11);
            f.regions[0].0 = fresh;
        }
        f.assert_recovers();
        f.release();
    }
}

#[test]
fn not_initialized_declines_and_installing_later_recovers() {
    if !in_child("not_initialized_declines_and_installing_later_recovers") {
        return;
    }
    let sim = hsa_sim::session(2);
    capture_logs(kernel_replay::LogLevel::Warn);
    let declined = Snap::of(sim.gpu(0));
    assert_eq!(
        declined.reason(),
        Some(kernel_replay::DeclineReason::NotInitialized)
    );
    assert_nothing_held();
    assert_eq!(declined.restore().restored, 0);
    assert_eq!(logs_containing("declined").len(), 1);
    drop(declined);
    let sim = {
        drop(sim);
        session(2)
    };
    let f = Fixture::new(&sim);
    f.assert_recovers();
}

#[test]
fn finalize_declines_snapshots_and_stops_restores() {
    if !in_child("finalize_declines_snapshots_and_stops_restores") {
        return;
    }
    let sim = session(2);
    let f = Fixture::new(&sim);
    let earlier = Snap::of(f.gpu);
    kernel_replay::finalize();
    let declined = Snap::of(f.gpu);
    assert_eq!(
        declined.reason(),
        Some(kernel_replay::DeclineReason::Finalized)
    );
    f.mutate_all();
    let report = earlier.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (0, 4, 0)
    );
    assert!(f.all_mutated(), "nothing written after the teardown guard");
    drop(earlier);
    drop(declined);
    assert_nothing_held();
    // The process keeps working: allocations and frees still go through.
    f.release();
    assert_eq!(sim.count(hsa_sim::Counter::LiveAllocations), 0);
}
