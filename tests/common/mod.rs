//! Shared support of the integration tests: the application side of the
//! software HSA runtime (calls through its tables, where the library's
//! wrappers sit once installed), process isolation for tests of
//! process-global behaviour, log capture and an allocator that can be told
//! to fail.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::{Mutex, Once, PoisonError};

use hsa_sim::{Agent, NotingAllocator};
use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;

mod app;
pub use app::*;

// ---- the application side ------------------------------------------------

/// A coarse-grained device buffer on `agent`, filled with `byte`.
pub fn device_buffer(sim: &hsa_sim::SimSession, gpu: Agent, size: usize, byte: u8) -> *mut u8 {
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    let ptr = pool_allocate(pool, size, 0).expect("device allocation");
    fill(ptr, size, byte);
    ptr
}

/// Writes device memory directly (the simulated device memory is host memory,
/// standing in for a kernel's stores).
pub fn fill(ptr: *mut u8, size: usize, byte: u8) {
    // SAFETY: tests only pass live simulated allocations of at least `size`.
    unsafe { std::ptr::write_bytes(ptr, byte, size) }
}

/// Reads device memory directly (as a kernel's loads would).
pub fn bytes(ptr: *const u8, size: usize) -> Vec<u8> {
    // SAFETY: tests only pass live simulated allocations of at least `size`.
    unsafe { std::slice::from_raw_parts(ptr, size) }.to_vec()
}

pub fn all(ptr: *const u8, size: usize, byte: u8) -> bool {
    bytes(ptr, size).iter().all(|&b| b == byte)
}

// ---- the library installed over the runtime --------------------------------

/// Installs the library over the runtime's tables, once per process.
/// Tracking is left as it is.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the runtime's own tables.
        let status = unsafe { kr_memory_tracker_init(core_table(), amd_table(), 0) };
        assert_eq!(status, kr_status_t::KR_STATUS_SUCCESS);
    });
}

/// A test session: the runtime reset to `gpus` GPUs, the library installed,
/// tracking on, no executable iterator set (snapshots use the runtime
/// loader's, found through its extension table, as under rocprofiler-sdk),
/// no host budget, warnings captured.
pub fn session(gpus: u32) -> hsa_sim::SimSession {
    // Arenas retained from the last session live in the runtime's old
    // topology: release them before the reset frees that memory.
    let sim = hsa_sim::continue_session();
    install();
    kr_trim_retained();
    sim.reset(gpus);
    // The reset released every allocation and mapping behind the wrappers'
    // back (as a runtime torn down and started again would): what the
    // library recorded in the last session is dropped the way it drops what
    // it can no longer trust.
    kernel_replay::memory_tracker::forget_unseen(&kernel_replay::context::GLOBAL);
    kr_set_executable_iterator(None);
    kr_set_host_budget(0);
    kr_set_device_budget(kernel_replay::ffi::types::KR_DEVICE_BUDGET_AUTO);
    assert!(kr_set_tracking_enabled(true));
    capture_logs(kr_log_level_t::KR_LOG_WARN);
    logs_clear();
    sim
}

// ---- snapshots ------------------------------------------------------------

/// An owned `kr_snapshot_t`.
pub struct Snap(pub *mut kr_snapshot_t);

impl Snap {
    pub fn of(gpu: Agent) -> Snap {
        let ptr = kr_snap(agent(gpu));
        assert!(!ptr.is_null(), "kr_snap returns a handle");
        Snap(ptr)
    }
    pub fn ok(&self) -> bool {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_ok(self.0) }
    }
    pub fn reason(&self) -> kr_decline_reason_t {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_decline_reason(self.0) }
    }
    pub fn regions(&self) -> usize {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_region_count(self.0) }
    }
    pub fn bytes(&self) -> u64 {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_byte_count(self.0) }
    }
    pub fn restore(&self) -> kr_restore_report_t {
        let mut report = kr_restore_report_t {
            restored: 99,
            skipped_not_live: 99,
            failed: 99,
        };
        // SAFETY: a live snapshot and a writable report.
        let restored = unsafe { kr_restore_with_report(self.0, &mut report) };
        assert_eq!(
            restored, report.restored,
            "return value is the restored count"
        );
        report
    }
}

impl Drop for Snap {
    fn drop(&mut self) {
        // SAFETY: owned, freed once.
        unsafe { kr_snapshot_free(self.0) }
    }
}

// ---- process isolation ------------------------------------------------------

const CHILD_ENV: &str = "KR_TEST_CHILD";

/// For tests of process-global, irreversible behaviour (installation,
/// finalize): returns true in a child process that runs only `test`; in the
/// parent, runs that child (with `envs`) and asserts it passed, then returns
/// false.
pub fn in_child(test: &str) -> bool {
    in_child_with(test, &[])
}

pub fn in_child_with(test: &str, envs: &[(&str, &str)]) -> bool {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test) {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test)
        .envs(envs.iter().copied())
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "isolated test {test} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    false
}

// ---- log capture ------------------------------------------------------------

static LOGS: Mutex<Vec<(kr_log_level_t, String)>> = Mutex::new(Vec::new());

pub unsafe extern "C" fn capture_log(
    level: kr_log_level_t,
    message: *const c_char,
    _: *mut c_void,
) {
    // The capture is the test's, not the library's: it may allocate even
    // inside a section where the library's allocations are made to fail.
    let failing = FAIL_AT_OR_ABOVE.try_with(|t| t.replace(0)).unwrap_or(0);
    // SAFETY: the library passes a NUL-terminated message valid for the call.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    LOGS.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((level, text));
    let _ = FAIL_AT_OR_ABOVE.try_with(|t| t.set(failing));
}

/// Routes the library's log into the capture buffer, at `level`.
pub fn capture_logs(level: kr_log_level_t) {
    kr_set_log_callback(Some(capture_log), std::ptr::null_mut());
    kr_set_log_level(level as u32);
}

pub fn logs_clear() {
    LOGS.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

pub fn logs() -> Vec<(kr_log_level_t, String)> {
    LOGS.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Captured messages containing `needle`.
pub fn logs_containing(needle: &str) -> Vec<String> {
    logs()
        .into_iter()
        .map(|(_, m)| m)
        .filter(|m| m.contains(needle))
        .collect()
}

// ---- an allocator that fails on request -------------------------------------

thread_local! {
    /// Allocations of at least this many bytes fail on this thread (0: none).
    static FAIL_AT_OR_ABOVE: Cell<usize> = const { Cell::new(0) };
}

/// Runs `body` with every allocation of `threshold` bytes or more failing on
/// this thread, the way `malloc` fails under real memory pressure.
pub fn with_allocations_failing_at<R>(threshold: usize, body: impl FnOnce() -> R) -> R {
    /// Ends the failing section even when `body` panics.
    struct Section;
    impl Drop for Section {
        fn drop(&mut self) {
            let _ = FAIL_AT_OR_ABOVE.try_with(|t| t.set(0));
        }
    }
    FAIL_AT_OR_ABOVE.with(|t| t.set(threshold));
    let _section = Section;
    body()
}

fn must_fail(size: usize) -> bool {
    // A failed assertion inside the failing section must still be able to
    // format and report itself (else the whole binary aborts).
    FAIL_AT_OR_ABOVE
        .try_with(|t| t.get())
        .is_ok_and(|t| t != 0 && size >= t)
        && !std::thread::panicking()
}

/// The test binaries' allocator: the runtime's noting allocator (a copy
/// past the end of host memory is a counted violation, not heap corruption),
/// failing on request.
pub struct FailingAllocator;

// SAFETY: forwards to the noting allocator, or returns NULL (a permitted
// answer of `alloc`) when told to fail.
unsafe impl GlobalAlloc for FailingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if must_fail(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { NotingAllocator.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if must_fail(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { NotingAllocator.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if must_fail(new_size) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { NotingAllocator.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { NotingAllocator.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: FailingAllocator = FailingAllocator;

// ---- storage policies ---------------------------------------------------------
//
// The integration tests run under whatever storage policy is in force
// (KERNEL_REPLAY_STORAGE; scripts/test.sh runs them under each), so their
// assertions hold for every policy. These helpers say what differs.

/// The policy the process runs under.
pub fn policy() -> kr_storage_policy_t {
    kr_storage_policy()
}

pub fn is_baseline() -> bool {
    policy() == kr_storage_policy_t::KR_STORAGE_BASELINE
}

/// Every copy the runtime performed or refused, whatever its direction (a
/// snapshot may keep its copy in device, pinned or pageable memory).
pub fn copies(sim: &hsa_sim::SimSession) -> u64 {
    use hsa_sim::CopyDirection::*;
    [HostToHost, HostToDevice, DeviceToHost, DeviceToDevice]
        .into_iter()
        .map(|d| sim.copy_count(d))
        .sum()
}

/// Memory the library holds for snapshots, host and device.
pub fn held() -> u64 {
    kr_host_bytes_in_use() + kr_device_bytes_in_use()
}

/// Once retained arenas are trimmed, nothing is held unless a snapshot is
/// alive: this fails if a snapshot leaked its memory.
pub fn assert_nothing_held() {
    kr_trim_retained();
    assert_eq!(
        kr_host_bytes_in_use(),
        0,
        "host bytes held with no live snapshot"
    );
    assert_eq!(
        kr_device_bytes_in_use(),
        0,
        "device bytes held with no live snapshot"
    );
}

/// Runs the rest of a test under `policy`, restoring the process's policy
/// when dropped.
pub struct PolicyGuard(kr_storage_policy_t);

impl PolicyGuard {
    pub fn set(policy: kr_storage_policy_t) -> PolicyGuard {
        let previous = kr_storage_policy();
        assert!(kr_set_storage_policy(policy as u32));
        PolicyGuard(previous)
    }
}

impl Drop for PolicyGuard {
    fn drop(&mut self) {
        kr_set_storage_policy(self.0 as u32);
    }
}

/// The library's counters.
pub fn stats() -> kr_stats_t {
    let mut stats = kr_stats_t::default();
    // SAFETY: a writable struct.
    unsafe { kr_get_stats(&mut stats) };
    stats
}

impl Snap {
    /// Bytes the snapshot keeps in `tier`.
    pub fn tier_bytes(&self, tier: kr_storage_tier_t) -> u64 {
        // SAFETY: a live snapshot.
        unsafe { kr_snapshot_tier_bytes(self.0, tier as u32) }
    }
}

/// Whether the process batches copies by default (`KERNEL_REPLAY_COPY`).
pub fn batched_by_default() -> bool {
    !std::env::var("KERNEL_REPLAY_COPY").is_ok_and(|v| v.eq_ignore_ascii_case("blocking"))
}

/// Turns batched copies on or off for the rest of a test, restoring the
/// process default when dropped.
pub struct BatchGuard;

impl BatchGuard {
    pub fn set(enabled: bool) -> BatchGuard {
        kr_set_batched_copies(enabled);
        BatchGuard
    }
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        kr_set_batched_copies(batched_by_default());
    }
}

/// The library's extended statistics.
pub fn stats2() -> kr_stats2_t {
    let mut stats = kr_stats2_t {
        struct_size: std::mem::size_of::<kr_stats2_t>(),
        ..kr_stats2_t::default()
    };
    // SAFETY: a writable struct of the size it declares.
    unsafe { kr_get_stats2(&mut stats) };
    stats
}

/// A device left with too little free memory for what its retained arena
/// holds (see [`device_nearly_full`]).
pub struct NearlyFull {
    /// Bytes of the retained device arena.
    pub arena: u64,
    /// Free device memory once the arena is released.
    pub after_release: u64,
    /// The statistics before anything was refused.
    pub stats: kr_stats2_t,
    /// Arenas exist under the automatic policy (whatever the process's is).
    _policy: PolicyGuard,
}

/// Fills `gpu` the way a large application does: a 256 MiB tracked buffer
/// captured into a device arena that the library retains after the
/// snapshot is freed, and 14 GiB of untracked allocations, so that what is free
/// is less than what releasing the arena would free. Nothing is written, so
/// the software runtime commits only the arena.
pub fn device_nearly_full(sim: &hsa_sim::SimSession, gpu: Agent) -> NearlyFull {
    const BUFFER: usize = 256 << 20;
    let policy = PolicyGuard::set(kr_storage_policy_t::KR_STORAGE_AUTO);
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    pool_allocate(pool, BUFFER, 0).expect("buffer");
    // Not tracked (as memory allocated before tracking began), so that the
    // snapshot captures only the buffer.
    assert!(!kr_set_tracking_enabled(false));
    for _ in 0..14 {
        pool_allocate(pool, 1 << 30, 0).expect("filler");
    }
    assert!(kr_set_tracking_enabled(true));
    {
        let snap = Snap::of(gpu);
        assert!(snap.ok());
        assert_eq!(
            snap.tier_bytes(kr_storage_tier_t::KR_TIER_DEVICE),
            BUFFER as u64
        );
    }
    let arena = kr_device_bytes_in_use();
    assert!(arena >= BUFFER as u64, "the arena is retained");
    NearlyFull {
        arena,
        after_release: memory_avail(gpu) + arena,
        stats: stats2(),
        _policy: policy,
    }
}
