//! The fault matrix: every decline reason and every restore failure, each
//! produced by injection in the software runtime (or by failing host
//! allocations), each checked for the same guarantees:
//!
//! - the snapshot declines with the expected reason, or the restore report
//!   counts the failure;
//! - a declined snapshot writes nothing, and a failed region is left as it was;
//! - every other region is unaffected (restored, or untouched by a decline);
//! - `kr_host_bytes_in_use` returns to zero;
//! - the process keeps working: the next snapshot and restore succeed.

mod common;

use common::*;
use hsa_sim::{Agent, CopyDirection, PoolKind, SimSession};
use kernel_replay::ffi::types::kr_decline_reason_t::{self, *};
use kernel_replay::ffi::*;
use kernel_replay::hsa::sys::{
    HSA_EXECUTABLE_SYMBOL_INFO_TYPE, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
    HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE,
};

/// Device state every case starts from: three buffers and a module variable
/// on gpu0 (the replayed agent), one buffer on gpu1.
struct Fixture {
    gpu: Agent,
    regions: Vec<(*mut u8, usize, u8)>,
    other_agent: (*mut u8, usize, u8),
    exe: hsa_sim::Executable,
    extra: Vec<*mut u8>,
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
            exe,
            extra: Vec::new(),
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
        assert_eq!(kr_host_bytes_in_use(), 0);
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
    reason: kr_decline_reason_t,
    arm: fn(&SimSession, &mut Fixture),
    snap: fn(&Fixture) -> Snap,
    disarm: fn(&SimSession, &Fixture),
}

fn plain_snap(f: &Fixture) -> Snap {
    Snap::of(f.gpu)
}

fn nothing(_: &SimSession, _: &Fixture) {}

fn decline_cases() -> Vec<DeclineCase> {
    let mut cases = vec![
        DeclineCase {
            name: "no executable iterator",
            reason: KR_DECLINE_NO_EXECUTABLE_ITERATOR,
            arm: |_, _| kr_set_executable_iterator(None),
            snap: plain_snap,
            disarm: |_, _| kr_set_executable_iterator(sim_iterator()),
        },
        DeclineCase {
            name: "executable iterator fails",
            reason: KR_DECLINE_SYMBOL_ENUMERATION,
            arm: |sim, _| sim.fail_executable_iteration(true),
            snap: plain_snap,
            disarm: |sim, _| sim.fail_executable_iteration(false),
        },
        DeclineCase {
            name: "symbol walk refused",
            reason: KR_DECLINE_SYMBOL_ENUMERATION,
            arm: |sim, f| sim.refuse_symbol_walk(f.exe, true),
            snap: plain_snap,
            disarm: |sim, f| sim.refuse_symbol_walk(f.exe, false),
        },
        DeclineCase {
            name: "symbol kind query fails",
            reason: KR_DECLINE_SYMBOL_ENUMERATION,
            arm: |sim, _| sim.fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_TYPE, true),
            snap: plain_snap,
            disarm: |sim, _| sim.fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_TYPE, false),
        },
        DeclineCase {
            name: "variable address query fails",
            reason: KR_DECLINE_SYMBOL_ENUMERATION,
            arm: |sim, _| sim.fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, true),
            snap: plain_snap,
            disarm: |sim, _| {
                sim.fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS, false)
            },
        },
        DeclineCase {
            name: "variable size query fails",
            reason: KR_DECLINE_SYMBOL_ENUMERATION,
            arm: |sim, _| sim.fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, true),
            snap: plain_snap,
            disarm: |sim, _| sim.fail_symbol_query(HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE, false),
        },
        DeclineCase {
            // 2,000 more tracked regions of 64 bytes: the region lists run to
            // tens of KiB while no host copy reaches 16 KiB.
            name: "metadata allocation fails",
            reason: KR_DECLINE_METADATA_MEMORY,
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
            name: "host budget exceeded",
            reason: KR_DECLINE_HOST_MEMORY,
            arm: |_, _| kr_set_host_budget(4096 + 8192),
            snap: plain_snap,
            disarm: |_, _| kr_set_host_budget(0),
        },
        DeclineCase {
            // The 8 KiB region's host copy fails after the 4 KiB one was taken.
            name: "host buffer allocation fails",
            reason: KR_DECLINE_HOST_MEMORY,
            arm: |_, _| (),
            snap: |f| with_allocations_failing_at(8192, || Snap::of(f.gpu)),
            disarm: nothing,
        },
    ];
    // Four regions are copied: fail each copy in turn, first to last.
    for (nth, name) in [
        (1, "first copy fails"),
        (2, "second copy fails"),
        (3, "third copy fails"),
        (4, "last copy fails"),
    ] {
        cases.push(DeclineCase {
            name,
            reason: KR_DECLINE_COPY_FAILED,
            arm: match nth {
                1 => |sim, _| sim.fail_nth_d2h_copy(1),
                2 => |sim, _| sim.fail_nth_d2h_copy(2),
                3 => |sim, _| sim.fail_nth_d2h_copy(3),
                _ => |sim, _| sim.fail_nth_d2h_copy(4),
            },
            snap: plain_snap,
            disarm: nothing,
        });
    }
    cases
}

#[test]
fn every_decline_reason_declines_cleanly_and_the_process_recovers() {
    let cases = decline_cases();
    for case in &cases {
        let sim = session(2);
        let mut f = Fixture::new(&sim);
        let earlier = Snap::of(f.gpu);
        assert!(earlier.ok());
        let held = kr_host_bytes_in_use();
        (case.arm)(&sim, &mut f);
        logs_clear();
        let d2h = sim.copy_count(CopyDirection::DeviceToHost);

        let declined = (case.snap)(&f);
        assert!(!declined.ok(), "{}: declined", case.name);
        assert_eq!(declined.reason(), case.reason, "{}", case.name);
        assert_eq!(
            (declined.regions(), declined.bytes()),
            (0, 0),
            "{}",
            case.name
        );
        assert_eq!(
            kr_host_bytes_in_use(),
            held,
            "{}: partial buffers released at once",
            case.name
        );
        assert_eq!(
            logs_containing("declined").len(),
            1,
            "{}: one log line {:?}",
            case.name,
            logs()
        );
        assert!(sim.copy_count(CopyDirection::DeviceToHost) <= d2h + 4);
        assert!(
            f.all_original(),
            "{}: a snapshot attempt changes no device memory",
            case.name
        );

        // A declined snapshot writes nothing.
        f.mutate_all();
        let h2d = sim.copy_count(CopyDirection::HostToDevice);
        let report = declined.restore();
        assert_eq!(
            (report.restored, report.skipped_not_live, report.failed),
            (0, 0, 0),
            "{}",
            case.name
        );
        assert_eq!(
            sim.copy_count(CopyDirection::HostToDevice),
            h2d,
            "{}",
            case.name
        );
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
        assert_eq!(kr_host_bytes_in_use(), 0, "{}", case.name);

        (case.disarm)(&sim, &f);
        f.assert_recovers();
        assert_eq!(sim.copy_violations(), 0, "{}", case.name);
        f.release();
    }
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
            name: "host-to-device copy into a tracked buffer fails",
            arm: |sim, f| {
                sim.fail_h2d_copy_into(f.buffer(1));
                f.buffer(1)
            },
            failed: 1,
            skipped: 0,
            after: |f, p| all(p, 8192, !0x22) && !f.holds_original(p),
            disarm: |sim, _| sim.clear_h2d_copy_faults(),
        },
        RestoreCase {
            name: "host-to-device copy into a module variable fails",
            arm: |sim, f| {
                sim.fail_h2d_copy_into(f.variable());
                f.variable()
            },
            failed: 1,
            skipped: 0,
            after: |_, p| all(p, 64, !0x55),
            disarm: |sim, _| sim.clear_h2d_copy_faults(),
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
                sim.set_address_reuse(true);
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
            disarm: |sim, _| sim.set_address_reuse(false),
        },
    ]
}

#[test]
fn every_restore_failure_is_reported_and_the_other_regions_restored() {
    for case in restore_cases() {
        let sim = session(2);
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
            "{}",
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
        assert_eq!(sim.copy_violations(), 0, "{}", case.name);
        assert!(
            sim.quarantine_intact(),
            "{}: nothing freed was written",
            case.name
        );
        drop(snap);
        assert_eq!(kr_host_bytes_in_use(), 0, "{}", case.name);
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
    capture_logs(kernel_replay::ffi::types::kr_log_level_t::KR_LOG_WARN);
    let declined = Snap::of(sim.gpu(0));
    assert_eq!(declined.reason(), KR_DECLINE_NOT_INITIALIZED);
    assert_eq!(kr_host_bytes_in_use(), 0);
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
    kr_finalize();
    let declined = Snap::of(f.gpu);
    assert_eq!(declined.reason(), KR_DECLINE_FINALIZED);
    f.mutate_all();
    let report = earlier.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (0, 4, 0)
    );
    assert!(f.all_mutated(), "nothing written after the teardown guard");
    drop(earlier);
    drop(declined);
    assert_eq!(kr_host_bytes_in_use(), 0);
    // The process keeps working: allocations and frees still go through.
    f.release();
    assert_eq!(sim.live_allocation_count(), 0);
}
