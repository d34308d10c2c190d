//! Shared support of the integration tests: the application side of the
//! software HSA runtime (calls through its tables, where the library's
//! wrappers sit once installed), process isolation for tests of
//! process-global behaviour, log capture and an allocator that can be told
//! to fail.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::{Mutex, Once, PoisonError};

use hsa_sim::{Agent, NotingAllocator};
use kernel_replay::{
    DeclineReason, Declined, DeviceBudget, LogLevel, RestoreReport, Snapshot, StoragePolicy, Tier,
};

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
        capture_logs(LogLevel::Warn);
        // SAFETY: the runtime's own tables.
        let installed = unsafe { kernel_replay::install(core_table(), amd_table(), 0) };
        assert_eq!(installed, Ok(kernel_replay::Installed::Installed));
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
    kernel_replay::trim_retained();
    sim.reset(gpus);
    // The reset released every allocation and mapping behind the wrappers'
    // back (as a runtime torn down and started again would): what the
    // library recorded in the last session is dropped the way it drops what
    // it can no longer trust.
    kernel_replay::testing::forget_tracked();
    kernel_replay::set_executable_iterator(None);
    kernel_replay::set_host_budget(None);
    kernel_replay::set_device_budget(DeviceBudget::Auto);
    kernel_replay::set_host_memory(kernel_replay::HostMemory::Auto);
    kernel_replay::set_coverage(kernel_replay::Coverage::Warn);
    kernel_replay::testing::assume_hip_loaded(None);
    assert!(kernel_replay::set_tracking(true));
    capture_logs(LogLevel::Warn);
    logs_clear();
    sim
}

// ---- snapshots ------------------------------------------------------------

/// A snapshot, taken or declined.
pub struct Snap(pub Result<Snapshot, Declined>);

impl Snap {
    pub fn of(gpu: Agent) -> Snap {
        Snap(kernel_replay::snap(agent(gpu)))
    }
    pub fn ok(&self) -> bool {
        self.0.is_ok()
    }
    /// Why it declined (`None`: complete).
    pub fn reason(&self) -> Option<DeclineReason> {
        self.0.as_ref().err().map(Declined::reason)
    }
    pub fn regions(&self) -> usize {
        self.0.as_ref().map_or(0, Snapshot::region_count)
    }
    pub fn bytes(&self) -> u64 {
        self.0.as_ref().map_or(0, Snapshot::byte_count)
    }
    /// Restores it; a declined snapshot restores nothing.
    pub fn restore(&self) -> RestoreReport {
        self.0.as_ref().map(Snapshot::restore).unwrap_or_default()
    }
    /// rocprofiler-sdk's `restore`: restored whole (false when declined).
    pub fn restore_all(&self) -> bool {
        self.0.as_ref().is_ok_and(|s| s.restore().complete())
    }
    /// Bytes the snapshot keeps in `tier`.
    pub fn tier_bytes(&self, tier: Tier) -> u64 {
        self.0.as_ref().map_or(0, |s| s.tier_bytes(tier))
    }
    /// Bytes the snapshot captured of memory kind `memory`.
    /// Bytes of `memory` the agent can write that the snapshot left out.
    pub fn not_covered(&self, memory: kernel_replay::MemoryKind) -> u64 {
        self.0
            .as_ref()
            .map_or(0, |s| s.not_covered().bytes[memory.index()])
    }
    pub fn kind_bytes(&self, memory: kernel_replay::MemoryKind) -> u64 {
        self.0.as_ref().map_or(0, |s| s.kind_bytes(memory))
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

static LOGS: Mutex<Vec<(LogLevel, String)>> = Mutex::new(Vec::new());

/// The test binaries' logger: the library logs through the `log` facade, so
/// a program that installed its own logger receives its messages.
struct Capture;

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        // The capture is the test's, not the library's: it may allocate even
        // inside a section where the library's allocations are made to fail.
        let failing = FAIL_AT_OR_ABOVE.try_with(|t| t.replace(0)).unwrap_or(0);
        let text = record.args().to_string();
        LOGS.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((LogLevel::of(record.level()), text));
        let _ = FAIL_AT_OR_ABOVE.try_with(|t| t.set(failing));
    }

    fn flush(&self) {}
}

/// Routes the library's log into the capture buffer, at `level`.
pub fn capture_logs(level: LogLevel) {
    static CAPTURE: Capture = Capture;
    static ONCE: Once = Once::new();
    ONCE.call_once(|| log::set_logger(&CAPTURE).expect("the first logger"));
    kernel_replay::set_log_level(Some(level));
}

pub fn logs_clear() {
    LOGS.lock().unwrap_or_else(PoisonError::into_inner).clear();
}

pub fn logs() -> Vec<(LogLevel, String)> {
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
pub fn policy() -> StoragePolicy {
    kernel_replay::storage_policy()
}

pub fn is_baseline() -> bool {
    policy() == StoragePolicy::Baseline
}

/// Every copy the runtime performed or refused, whatever its direction (a
/// snapshot may keep its copy in device, pinned or pageable memory).
pub fn copies(sim: &hsa_sim::SimSession) -> u64 {
    use hsa_sim::Counter::*;
    [
        CopiesHostToHost,
        CopiesHostToDevice,
        CopiesDeviceToHost,
        CopiesDeviceToDevice,
    ]
    .into_iter()
    .map(|d| sim.count(d))
    .sum()
}

/// Whether snapshots move their bytes by the runtime's copies alone, so
/// that `copies` counts every region (not under a forced kernel strategy,
/// `KERNEL_REPLAY_STRATEGY=scatter|dirty`, where one dispatch moves them).
pub fn copies_move_everything() -> bool {
    matches!(
        kernel_replay::strategy(),
        kernel_replay::Strategy::Auto | kernel_replay::Strategy::Copies
    )
}

/// Memory the library holds for snapshots, host and device.
pub fn held() -> u64 {
    kernel_replay::host_bytes_in_use() + kernel_replay::device_bytes_in_use()
}

/// Once retained arenas are trimmed, nothing is held unless a snapshot is
/// alive: this fails if a snapshot leaked its memory.
pub fn assert_nothing_held() {
    kernel_replay::trim_retained();
    assert_eq!(
        kernel_replay::host_bytes_in_use(),
        0,
        "host bytes held with no live snapshot"
    );
    assert_eq!(
        kernel_replay::device_bytes_in_use(),
        0,
        "device bytes held with no live snapshot"
    );
}

/// Runs the rest of a test under `policy`, restoring the process's policy
/// when dropped.
pub struct PolicyGuard(StoragePolicy);

impl PolicyGuard {
    pub fn set(policy: StoragePolicy) -> PolicyGuard {
        let previous = kernel_replay::storage_policy();
        kernel_replay::set_storage_policy(policy);
        PolicyGuard(previous)
    }
}

impl Drop for PolicyGuard {
    fn drop(&mut self) {
        kernel_replay::set_storage_policy(self.0);
    }
}

/// The library's counters.
pub fn stats() -> kernel_replay::Stats {
    kernel_replay::stats()
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
        kernel_replay::set_batched_copies(enabled);
        BatchGuard
    }
}

impl Drop for BatchGuard {
    fn drop(&mut self) {
        kernel_replay::set_batched_copies(batched_by_default());
    }
}

/// The library's counters (every one).
pub fn stats2() -> kernel_replay::Counters {
    kernel_replay::stats().counters
}

/// A device left with too little free memory for what its retained arena
/// holds (see [`device_nearly_full`]).
pub struct NearlyFull {
    /// Bytes of the retained device arena.
    pub arena: u64,
    /// Free device memory once the arena is released.
    pub after_release: u64,
    /// The statistics before anything was refused.
    pub stats: kernel_replay::Counters,
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
    let policy = PolicyGuard::set(StoragePolicy::Auto);
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    pool_allocate(pool, BUFFER, 0).expect("buffer");
    // Not tracked (as memory allocated before tracking began), so that the
    // snapshot captures only the buffer.
    assert!(!kernel_replay::set_tracking(false));
    for _ in 0..14 {
        pool_allocate(pool, 1 << 30, 0).expect("filler");
    }
    assert!(kernel_replay::set_tracking(true));
    {
        let snap = Snap::of(gpu);
        assert!(snap.ok());
        assert_eq!(snap.tier_bytes(Tier::Device), BUFFER as u64);
    }
    let arena = kernel_replay::device_bytes_in_use();
    assert!(arena >= BUFFER as u64, "the arena is retained");
    NearlyFull {
        arena,
        after_release: memory_avail(gpu) + arena,
        stats: stats2(),
        _policy: policy,
    }
}

/// Anonymous read-write memory (ROCm 6.x's `hipMallocManaged` reserves it
/// with `mmap`), filled with `byte`.
pub fn map_anonymous(size: usize, byte: u8) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(ptr, libc::MAP_FAILED);
    let ptr = ptr.cast::<u8>();
    // SAFETY: `size` writable bytes just mapped.
    unsafe { std::ptr::write_bytes(ptr, byte, size) };
    ptr
}
