//! Snapshot and restore cost on the software HSA runtime, every policy
//! measured in one run so the ratios hold.
//!
//! `cargo bench --bench snapshot` (a plain harness: it prints tables).
//!
//! 1. **Fixed cost** of one replay window (snapshot + restore) of 1,000
//!    tracked regions of 4 KiB, with 100 loaded executables of 50 symbols
//!    each (49 kernels and one 64-byte variable): 1,100 regions. "Fixed"
//!    means everything but the copied bytes: the runtime's copy engine is
//!    replaced by one that completes at once (`hsa_memory_copy` returns,
//!    an async copy takes its completion signal down by one). Every other
//!    entry is the software runtime's own (allocation, pointer and symbol
//!    queries, the loader), except, in the first table, signals: there they
//!    are plain memory, as ROCr's are, so the figure is the library's own
//!    cost; the second table keeps the software runtime's mutex-based
//!    signals. Each configuration runs in its own process (installation is
//!    once per process). Steady state: 3 warm-up windows, then the median
//!    of 200.
//! 2. **Throughput** of a window over 1 GiB in 64 regions, with the
//!    runtime's real copies, next to a plain memcpy of the same bytes both
//!    ways.

use std::ffi::c_void;
use std::hint::black_box;
use std::process::Command;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use hsa_sim::PoolKind;
use kernel_replay::hsa::sys::{
    hsa_amd_memory_pool_t, hsa_signal_condition_t, hsa_signal_t, hsa_signal_value_t,
    hsa_wait_state_t, HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_GTE, HSA_SIGNAL_CONDITION_LT,
    HSA_SIGNAL_CONDITION_NE,
};
use kernel_replay::hsa::{
    hsa_agent_t, hsa_status_t, AmdExtTable, CoreApiTable, HSA_STATUS_SUCCESS,
};
use kernel_replay::StoragePolicy;

// ---- the runtime the library is installed over ----------------------------------

/// When set, the copy engine completes every copy at once.
static NO_COPY: AtomicBool = AtomicBool::new(false);
/// When set, signals are plain memory (see memory_signal_*).
static MEMORY_SIGNALS: AtomicBool = AtomicBool::new(false);
/// The runtime's tables before the shims went in (their copy entries).
static mut REAL_CORE: Option<CoreApiTable> = None;
static mut REAL_AMD: Option<AmdExtTable> = None;
static mut RUNTIME_SUBTRACT: Option<unsafe extern "C" fn(hsa_signal_t, hsa_signal_value_t)> = None;

unsafe extern "C" fn copy_shim(dst: *mut c_void, src: *const c_void, size: usize) -> hsa_status_t {
    if NO_COPY.load(Ordering::Relaxed) {
        return HSA_STATUS_SUCCESS;
    }
    // SAFETY: set before installation, never changed after.
    unsafe {
        (*ptr::addr_of!(REAL_CORE))
            .as_ref()
            .unwrap()
            .hsa_memory_copy_fn
            .unwrap()(dst, src, size)
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn async_copy_shim(
    dst: *mut c_void,
    dst_agent: hsa_agent_t,
    src: *const c_void,
    src_agent: hsa_agent_t,
    size: usize,
    deps: u32,
    dep_signals: *const hsa_signal_t,
    completion: hsa_signal_t,
) -> hsa_status_t {
    if NO_COPY.load(Ordering::Relaxed) {
        // Completion takes the signal down by one, as the runtime's does.
        if MEMORY_SIGNALS.load(Ordering::Relaxed) {
            // SAFETY: a signal from memory_signal_create.
            unsafe { memory_signal_subtract(completion, 1) };
        } else {
            // SAFETY: set before installation.
            unsafe { RUNTIME_SUBTRACT.unwrap()(completion, 1) };
        }
        return HSA_STATUS_SUCCESS;
    }
    // SAFETY: as above.
    unsafe {
        (*ptr::addr_of!(REAL_AMD))
            .as_ref()
            .unwrap()
            .hsa_amd_memory_async_copy_fn
            .unwrap()(
            dst,
            dst_agent,
            src,
            src_agent,
            size,
            deps,
            dep_signals,
            completion,
        )
    }
}

fn memory_signal(signal: hsa_signal_t) -> &'static AtomicI64 {
    // SAFETY: handles of memory signals are leaked AtomicI64s.
    unsafe { &*(signal.handle as *const AtomicI64) }
}

unsafe extern "C" fn memory_signal_create(
    initial: hsa_signal_value_t,
    _: u32,
    _: *const hsa_agent_t,
    signal: *mut hsa_signal_t,
) -> hsa_status_t {
    let value = Box::leak(Box::new(AtomicI64::new(initial)));
    // SAFETY: the caller's out-parameter.
    unsafe {
        *signal = hsa_signal_t {
            handle: value as *const AtomicI64 as u64,
        }
    };
    HSA_STATUS_SUCCESS
}

unsafe extern "C" fn memory_signal_store(signal: hsa_signal_t, value: hsa_signal_value_t) {
    memory_signal(signal).store(value, Ordering::Release);
}

unsafe extern "C" fn memory_signal_subtract(signal: hsa_signal_t, value: hsa_signal_value_t) {
    memory_signal(signal).fetch_sub(value, Ordering::AcqRel);
}

unsafe extern "C" fn memory_signal_wait(
    signal: hsa_signal_t,
    condition: hsa_signal_condition_t,
    compare: hsa_signal_value_t,
    _: u64,
    _: hsa_wait_state_t,
) -> hsa_signal_value_t {
    loop {
        let value = memory_signal(signal).load(Ordering::Acquire);
        let done = match condition {
            HSA_SIGNAL_CONDITION_EQ => value == compare,
            HSA_SIGNAL_CONDITION_NE => value != compare,
            HSA_SIGNAL_CONDITION_LT => value < compare,
            HSA_SIGNAL_CONDITION_GTE => value >= compare,
            _ => true,
        };
        if done {
            return value;
        }
        std::hint::spin_loop();
    }
}

fn install(no_copy: bool, memory_signals: bool) {
    let core: *mut CoreApiTable = hsa_sim::core_table_ptr().cast();
    let amd: *mut AmdExtTable = hsa_sim::amd_ext_table_ptr().cast();
    NO_COPY.store(no_copy, Ordering::Relaxed);
    MEMORY_SIGNALS.store(memory_signals, Ordering::Relaxed);
    // SAFETY: the runtime's own tables; single-threaded set-up.
    unsafe {
        REAL_CORE = Some(*core);
        REAL_AMD = Some(*amd);
        RUNTIME_SUBTRACT = (*core).hsa_signal_subtract_screlease_fn;
        (*core).hsa_memory_copy_fn = Some(copy_shim);
        (*amd).hsa_amd_memory_async_copy_fn = Some(async_copy_shim);
        if memory_signals {
            (*core).hsa_signal_create_fn = Some(memory_signal_create);
            (*core).hsa_signal_store_screlease_fn = Some(memory_signal_store);
            (*core).hsa_signal_wait_scacquire_fn = Some(memory_signal_wait);
        }
        assert_eq!(
            kernel_replay::install(core, amd, 0),
            Ok(kernel_replay::Installed::Installed)
        );
    }
    extern "C" {
        fn hsa_rt_iterate_executables(
            callback: Option<kernel_replay::ExecutableCallback>,
            data: *mut c_void,
        ) -> hsa_status_t;
    }
    kernel_replay::set_executable_iterator(Some(hsa_rt_iterate_executables));
    // The copy engine's own costs: in this runtime the device kernels run on
    // the CPU (and the memory-signal shims above stand in for every signal,
    // the queue's doorbell included), so their cost here says nothing of a
    // GPU's; their figures come from the H200 (bench/results/README.md).
    kernel_replay::set_strategy(kernel_replay::Strategy::Copies);
    kernel_replay::set_tracking(true);
    kernel_replay::set_log_level(Some(kernel_replay::LogLevel::Error));
}

// ---- the application side ------------------------------------------------------------

fn allocate(pool: hsa_sim::Pool, size: usize) -> *mut u8 {
    let amd: *mut AmdExtTable = hsa_sim::amd_ext_table_ptr().cast();
    let mut p = std::ptr::null_mut();
    // SAFETY: the wrapped table entry.
    let status = unsafe {
        (*amd).hsa_amd_memory_pool_allocate_fn.unwrap()(
            hsa_amd_memory_pool_t {
                handle: pool.handle,
            },
            size,
            0,
            &mut p,
        )
    };
    assert_eq!(status, HSA_STATUS_SUCCESS);
    // SAFETY: a fresh allocation of `size` bytes (host memory in this runtime).
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0x5A, size) };
    p.cast()
}

fn free(p: *mut u8) {
    let amd: *mut AmdExtTable = hsa_sim::amd_ext_table_ptr().cast();
    // SAFETY: the wrapped table entry, a live allocation.
    unsafe { (*amd).hsa_amd_memory_pool_free_fn.unwrap()(p.cast()) };
}

/// One replay window: snapshot, restore, free. Returns its duration.
fn window(agent: hsa_agent_t) -> Duration {
    let start = Instant::now();
    let snap = kernel_replay::snap(agent).expect("a complete snapshot");
    black_box(snap.restore());
    drop(snap);
    start.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn measure(agent: hsa_agent_t, warmup: usize, runs: usize) -> Duration {
    for _ in 0..warmup {
        window(agent);
    }
    median((0..runs).map(|_| window(agent)).collect())
}

fn name(policy: StoragePolicy) -> &'static str {
    match policy {
        StoragePolicy::Auto => "auto (device arena, batched)",
        StoragePolicy::Device => "device",
        StoragePolicy::Pinned => "pinned arena, batched",
        StoragePolicy::Pageable => "pageable arena, blocking",
        StoragePolicy::Baseline => "baseline (the design)",
    }
}

const FIXED_POLICIES: [StoragePolicy; 3] = [
    StoragePolicy::Baseline,
    StoragePolicy::Pageable,
    StoragePolicy::Auto,
];

/// Child process: the fixed-cost window of every policy, one line each
/// (`policy-number microseconds`).
fn fixed_cost_child(memory_signals: bool) {
    let sim = hsa_sim::session(1);
    install(true, memory_signals);
    let gpu = sim.gpu(0);
    let agent = hsa_agent_t { handle: gpu.handle };
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let small: Vec<*mut u8> = (0..1000).map(|_| allocate(pool, 4096)).collect();
    for e in 0..100 {
        let exe = sim.executable_create();
        let v = sim.add_variable(exe, gpu, &format!("state_{e}"), 64, false);
        // SAFETY: 64 bytes of variable storage.
        unsafe { std::ptr::write_bytes(v, 1, 64) };
        for k in 0..49 {
            sim.add_kernel(exe, gpu, &format!("kernel_{e}_{k}"));
        }
    }
    // KR_BENCH_ONLY=<policy number> measures one policy, many times: for a
    // profiler.
    let only: Option<u32> = std::env::var("KR_BENCH_ONLY")
        .ok()
        .and_then(|v| v.parse().ok());
    for policy in FIXED_POLICIES
        .into_iter()
        .filter(|p| only.is_none_or(|o| o == *p as u32))
    {
        kernel_replay::set_storage_policy(policy);
        let t = measure(agent, 3, if only.is_some() { 5000 } else { 200 });
        println!("{} {:.3}", policy as u32, t.as_secs_f64() * 1e6);
    }
    for p in small {
        free(p);
    }
}

/// Runs the fixed-cost child; returns microseconds per policy.
fn fixed_costs(memory_signals: bool) -> Vec<(StoragePolicy, f64)> {
    let mode = if memory_signals {
        "--fixed-memory-signals"
    } else {
        "--fixed-runtime-signals"
    };
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(mode)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let (policy, us) = line.split_once(' ')?;
            let number: u32 = policy.parse().ok()?;
            let policy = FIXED_POLICIES.into_iter().find(|p| *p as u32 == number)?;
            Some((policy, us.parse().ok()?))
        })
        .collect()
}

fn print_fixed(title: &str, rows: &[(StoragePolicy, f64)]) {
    let baseline = rows
        .iter()
        .find(|r| r.0 == StoragePolicy::Baseline)
        .unwrap()
        .1;
    println!("{title}\n");
    println!("| policy | us per window | baseline / policy |");
    println!("|---|---:|---:|");
    for &(policy, us) in rows {
        println!("| {} | {us:.1} | {:.1} |", name(policy), baseline / us);
    }
    println!();
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("--fixed-memory-signals") => return fixed_cost_child(true),
        Some("--fixed-runtime-signals") => return fixed_cost_child(false),
        _ => {}
    }
    println!("## Fixed cost of a replay window (snapshot + restore), copied bytes excluded\n");
    println!("1,000 tracked regions of 4 KiB + 100 executables x 50 symbols (1,100 regions); median of 200.\n");
    let memory = fixed_costs(true);
    print_fixed(
        "Signals as plain memory (as ROCr's): the library's own cost.",
        &memory,
    );
    let runtime = fixed_costs(false);
    print_fixed(
        "The software runtime's signals (a mutex and a hash lookup per operation).",
        &runtime,
    );

    // ---- throughput, with the runtime's real copies ----------------------------------
    let sim = hsa_sim::session(1);
    install(false, false);
    let gpu = sim.gpu(0);
    let agent = hsa_agent_t { handle: gpu.handle };
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    const REGION: usize = 16 << 20;
    const REGIONS: usize = 64;
    let big: Vec<*mut u8> = (0..REGIONS).map(|_| allocate(pool, REGION)).collect();
    let mut host = vec![0u8; REGION * REGIONS];
    let mut memcpy_both_ways = || {
        let start = Instant::now();
        for (i, &p) in big.iter().enumerate() {
            // SAFETY: live regions of REGION bytes; `host` holds them all.
            unsafe { std::ptr::copy_nonoverlapping(p, host.as_mut_ptr().add(i * REGION), REGION) };
        }
        for (i, &p) in big.iter().enumerate() {
            // SAFETY: as above.
            unsafe { std::ptr::copy_nonoverlapping(host.as_ptr().add(i * REGION), p, REGION) };
        }
        start.elapsed()
    };
    memcpy_both_ways();
    let memcpy = median((0..5).map(|_| memcpy_both_ways()).collect());
    let moved = 2.0 * (REGION * REGIONS) as f64;
    let rate = |t: Duration| moved / t.as_secs_f64() / 1e9;
    println!("## Throughput: 1 GiB in 64 regions, snapshot + restore (2 GiB moved); median of 5\n");
    println!("| path | ms per window | GB/s moved | plain memcpy time / window time |");
    println!("|---|---:|---:|---:|");
    println!(
        "| plain memcpy (both ways) | {:.1} | {:.2} | 1.00 |",
        memcpy.as_secs_f64() * 1e3,
        rate(memcpy)
    );
    let mut auto_ratio = 0.0;
    for policy in [
        StoragePolicy::Baseline,
        StoragePolicy::Pageable,
        StoragePolicy::Pinned,
        StoragePolicy::Auto,
    ] {
        kernel_replay::set_storage_policy(policy);
        let t = measure(agent, 1, 5);
        let ratio = memcpy.as_secs_f64() / t.as_secs_f64();
        if policy == StoragePolicy::Auto {
            auto_ratio = ratio;
        }
        println!(
            "| {} | {:.1} | {:.2} | {ratio:.2} |",
            name(policy),
            t.as_secs_f64() * 1e3,
            rate(t)
        );
        kernel_replay::trim_retained();
    }
    drop(host);
    for p in big {
        free(p);
    }
    let at = |rows: &[(StoragePolicy, f64)], p| rows.iter().find(|r| r.0 == p).unwrap().1;
    let (auto_us, baseline_us) = (
        at(&memory, StoragePolicy::Auto),
        at(&memory, StoragePolicy::Baseline),
    );
    println!(
        "\nsummary: fixed cost (auto) {auto_us:.1} us [target <= 100], {:.1}x under the baseline [target >= 10]; \
         1 GiB window (auto) at {auto_ratio:.2} of plain memcpy [target >= 0.9]",
        baseline_us / auto_us
    );
    drop(sim);
}
