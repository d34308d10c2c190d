//! Host memory a GPU can write (issue 19): what the new wrappers add to the
//! application's calls, and how fast host regions are captured and
//! restored, on the software HSA runtime.
//!
//! `cargo bench --bench host_memory` (a plain harness: it prints tables).
//! Each part runs in a process of its own (installation is once per
//! process); `--bench host_memory -- wrappers` or `-- copies` runs one.
//!
//! 1. **Wrappers**: `hsa_amd_memory_lock_to_pool` + `hsa_amd_memory_unlock`
//!    of a page-aligned 4 KiB and 1 MiB range for one GPU (to the CPU's
//!    fine-grained pool, as `hipHostRegister` does), and
//!    `hsa_amd_agents_allow_access` of one GPU on a 4 KiB CPU-pool
//!    allocation (`hipHostMalloc`'s grant), through the installed table
//!    (wrapped) and through the runtime's own entries, copied from its table
//!    before installation (unwrapped). Everything underneath is the software
//!    runtime's (its lock checks that the pages are mapped with `mincore`,
//!    its allow-access replaces the block's access list, both under its
//!    mutex), so the difference is what the wrappers add to a real call.
//!    Three states, as `benches/wrappers.rs` measures them: tracking off
//!    with nothing tracked (the wrappers' fast path), then tracking on with
//!    1,000 and with 100,000 tracked allocations (4 KiB device allocations
//!    through the wrapped allocator; the allow-access target is then a
//!    tracked host allocation). Each state: 41 rounds, each round one batch
//!    unwrapped and one wrapped (4,000 lock pairs or 20,000 grants), in
//!    alternating order; each batch's mean per call is a sample. Reported:
//!    the median and minimum of each path's samples; the overhead as the
//!    median of the per-round differences (wrapped − unwrapped of the same
//!    round) and as the difference of the minima. The software runtime's
//!    lock costs 1.5–2.5 µs, most of it in the kernel (`mincore`), so on a
//!    shared machine the lock rows' overhead is only good to ±100 ns per
//!    run: compare several runs.
//! 2. **Copies**: a CPU-pool allocation of 4 KiB to 256 MiB granted to the
//!    GPU, with the host-memory setting `all`, captured
//!    (`kernel_replay::snap`) and restored (`Snapshot::restore`), against
//!    `std::ptr::copy_nonoverlapping` of the same bytes out of the region
//!    into a touched buffer (capture) and back (restore). Two buffers: a
//!    `Vec<u8>` (malloc'd: where glibc maps it, its base is 16 bytes past a
//!    page, as the library's pageable arena's is) and a page-aligned one;
//!    on the development machine a copy whose destination is 16 bytes past
//!    its source modulo 4 KiB is 3-26x slower at some sizes (4-256 KiB, and
//!    from 192 MiB), so the two can differ by that much. Two warm-up
//!    windows first (the snapshot's pageable arena is then retained and
//!    reused, as in steady replay); then 15 rounds, each timing the memcpy
//!    out into each buffer, then windows (snapshot, restore, drop, each
//!    timed), then the memcpy back from each buffer. Small sizes repeat each
//!    in a sample (at least 16 MiB or 256 calls per sample). Reported:
//!    medians (minima) per call, and memcpy time / library time of the
//!    medians (1.0: as fast as memcpy). A snapshot has fixed costs beside
//!    its copies (the inventory, coverage and module-variable walks, the
//!    layout, the arena lease): the small sizes show them.
//!    `KR_BENCH_SIZES=4096,...` measures only those sizes (for a profiler:
//!    `<bench binary> --copies-child`).

use std::ffi::c_void;
use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use hsa_sim::PoolKind;
use kernel_replay::hsa::sys::hsa_amd_memory_pool_t;
use kernel_replay::hsa::{
    hsa_agent_t, hsa_status_t, AmdExtTable, CoreApiTable, HSA_STATUS_SUCCESS,
};
use kernel_replay::{HostMemory, MemoryKind};

type LockToPool = unsafe extern "C" fn(
    *mut c_void,
    usize,
    *mut hsa_agent_t,
    i32,
    hsa_amd_memory_pool_t,
    u32,
    *mut *mut c_void,
) -> hsa_status_t;
type Unlock = unsafe extern "C" fn(*mut c_void) -> hsa_status_t;
type AllowAccess =
    unsafe extern "C" fn(u32, *const hsa_agent_t, *const u32, *const c_void) -> hsa_status_t;

/// The three entries measured, from one table.
#[derive(Clone, Copy)]
struct Entries {
    lock: LockToPool,
    unlock: Unlock,
    allow: AllowAccess,
}

impl Entries {
    /// The entries of `amd` as they are now.
    ///
    /// # Safety
    /// `amd` is the runtime's live AMD table.
    unsafe fn of(amd: *const AmdExtTable) -> Entries {
        // SAFETY: the caller's promise.
        unsafe {
            Entries {
                lock: (*amd).hsa_amd_memory_lock_to_pool_fn.expect("lock_to_pool"),
                unlock: (*amd).hsa_amd_memory_unlock_fn.expect("unlock"),
                allow: (*amd).hsa_amd_agents_allow_access_fn.expect("allow_access"),
            }
        }
    }
}

fn amd_table() -> *mut AmdExtTable {
    hsa_sim::amd_ext_table_ptr().cast()
}

/// Installs the library over the software runtime's tables, the way a tool
/// does in its `OnLoad`; returns the runtime's own entries.
fn install() -> Entries {
    let core: *mut CoreApiTable = hsa_sim::core_table_ptr().cast();
    // SAFETY: the runtime's live table, before the wrappers go in.
    let unwrapped = unsafe { Entries::of(amd_table()) };
    // SAFETY: the runtime's own tables; single-threaded set-up.
    let installed = unsafe { kernel_replay::install(core, amd_table(), 0) };
    assert_eq!(installed, Ok(kernel_replay::Installed::Installed));
    extern "C" {
        fn hsa_rt_iterate_executables(
            callback: Option<kernel_replay::ExecutableCallback>,
            data: *mut c_void,
        ) -> hsa_status_t;
    }
    kernel_replay::set_executable_iterator(Some(hsa_rt_iterate_executables));
    kernel_replay::set_log_level(Some(kernel_replay::LogLevel::Error));
    unwrapped
}

/// `size` bytes of `pool` through the (wrapped) allocator, filled with `byte`.
fn pool_allocate(pool: hsa_sim::Pool, size: usize, byte: u8) -> *mut u8 {
    // SAFETY: the runtime's live AMD table and one of its pools.
    unsafe { kernel_replay::testing::app_allocate(amd_table(), pool.handle, size, byte) }
}

fn pool_free(p: *mut u8) {
    // SAFETY: the runtime's live table, a live allocation.
    let status = unsafe { (*amd_table()).hsa_amd_memory_pool_free_fn.unwrap()(p.cast()) };
    assert_eq!(status, HSA_STATUS_SUCCESS);
}

fn sorted(mut samples: Vec<f64>) -> Vec<f64> {
    samples.sort_by(f64::total_cmp);
    samples
}

fn median(samples: &[f64]) -> f64 {
    sorted(samples.to_vec())[samples.len() / 2]
}

fn min(samples: &[f64]) -> f64 {
    sorted(samples.to_vec())[0]
}

// ---- 1. the wrappers ------------------------------------------------------------------

/// Rounds of the wrapper part: many short batches, so that a pair of
/// batches sees the same machine and a preempted batch is an outlier the
/// median drops.
const WRAPPER_ROUNDS: usize = 41;

/// Page-aligned host memory of the application's own (what it would
/// `hipHostRegister`), touched.
struct HostBytes {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl HostBytes {
    fn new(size: usize) -> HostBytes {
        let layout = std::alloc::Layout::from_size_align(size, 4096).unwrap();
        // SAFETY: a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        // SAFETY: `size` bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr, 1, size) };
        HostBytes { ptr, layout }
    }
}

impl Drop for HostBytes {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// One measured operation: a closure over one table's entries, and the
/// calls per batch.
struct Operation<'a> {
    name: String,
    calls: usize,
    run: Box<dyn Fn(&Entries) + 'a>,
}

/// Mean ns per call of one batch.
fn batch_ns(op: &Operation, entries: &Entries) -> f64 {
    let start = Instant::now();
    for _ in 0..op.calls {
        (op.run)(black_box(entries));
    }
    start.elapsed().as_nanos() as f64 / op.calls as f64
}

/// Per-round samples (unwrapped, wrapped), in alternating order.
fn rounds(op: &Operation, raw: &Entries, wrapped: &Entries) -> (Vec<f64>, Vec<f64>) {
    // A warm-up batch of each.
    batch_ns(op, raw);
    batch_ns(op, wrapped);
    let mut samples = (Vec::new(), Vec::new());
    for round in 0..WRAPPER_ROUNDS {
        if round % 2 == 0 {
            samples.0.push(batch_ns(op, raw));
            samples.1.push(batch_ns(op, wrapped));
        } else {
            samples.1.push(batch_ns(op, wrapped));
            samples.0.push(batch_ns(op, raw));
        }
    }
    samples
}

/// One lock + unlock pair; the two statuses.
fn lock_pair(
    entries: &Entries,
    bytes: &HostBytes,
    size: usize,
    gpu: hsa_agent_t,
    pool: u64,
) -> (hsa_status_t, hsa_status_t) {
    let mut agents = [gpu];
    let mut agent_ptr = std::ptr::null_mut();
    // SAFETY: mapped host memory of at least `size` bytes; a one-agent list
    // that outlives the call.
    unsafe {
        let locked = (entries.lock)(
            bytes.ptr.cast(),
            size,
            agents.as_mut_ptr(),
            1,
            hsa_amd_memory_pool_t { handle: pool },
            0,
            &mut agent_ptr,
        );
        (locked, (entries.unlock)(bytes.ptr.cast()))
    }
}

/// One grant of `gpu` on the allocation at `ptr`; its status.
fn allow(entries: &Entries, ptr: *mut u8, gpu: hsa_agent_t) -> hsa_status_t {
    let agents = [gpu];
    // SAFETY: a live allocation; the list outlives the call.
    unsafe { (entries.allow)(1, agents.as_ptr(), std::ptr::null(), ptr.cast()) }
}

fn print_state(title: &str, ops: &[Operation], raw: &Entries, wrapped: &Entries) -> Vec<f64> {
    println!("### {title}\n");
    println!("| call | unwrapped: median (min) ns | wrapped: median (min) ns | wrapped − unwrapped: median of the per-round differences | min − min | wrapped / unwrapped (medians) |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut overheads = Vec::new();
    for op in ops {
        let (u, w) = rounds(op, raw, wrapped);
        let differences: Vec<f64> = u.iter().zip(&w).map(|(u, w)| w - u).collect();
        let over = median(&differences);
        overheads.push(over);
        println!(
            "| {} | {:.0} ({:.0}) | {:.0} ({:.0}) | {:+.0} | {:+.0} | {:.2} |",
            op.name,
            median(&u),
            min(&u),
            median(&w),
            min(&w),
            over,
            min(&w) - min(&u),
            median(&w) / median(&u),
        );
    }
    println!();
    overheads
}

fn wrappers_child() {
    let sim = hsa_sim::session(1);
    let unwrapped = install();
    // SAFETY: the live table, the wrappers in it now.
    let wrapped = unsafe { Entries::of(amd_table()) };
    let gpu = hsa_agent_t {
        handle: sim.gpu(0).handle,
    };
    let cpu = hsa_agent_t {
        handle: sim.cpu().handle,
    };
    let fine = sim.pool(sim.cpu(), PoolKind::SystemFine).handle;
    kernel_replay::set_host_memory(HostMemory::All);
    kernel_replay::set_tracking(false);

    let small = HostBytes::new(4096);
    let large = HostBytes::new(1 << 20);
    let untracked_host = pool_allocate(sim.pool(sim.cpu(), PoolKind::SystemFine), 4096, 2);
    // Every measured call succeeds, through either table (checked here,
    // not in the timed loops).
    const OK: hsa_status_t = HSA_STATUS_SUCCESS;
    for entries in [&unwrapped, &wrapped] {
        assert_eq!(lock_pair(entries, &small, 4096, gpu, fine), (OK, OK));
        assert_eq!(lock_pair(entries, &large, 1 << 20, gpu, fine), (OK, OK));
        assert_eq!(allow(entries, untracked_host, gpu), OK);
    }
    let (small, large) = (&small, &large);
    let ops = |host: *mut u8| -> Vec<Operation<'_>> {
        vec![
            Operation {
                name: "lock_to_pool + unlock, 4 KiB".into(),
                calls: 4_000,
                run: Box::new(move |e| {
                    black_box(lock_pair(e, small, 4096, gpu, fine));
                }),
            },
            Operation {
                name: "lock_to_pool + unlock, 1 MiB".into(),
                calls: 4_000,
                run: Box::new(move |e| {
                    black_box(lock_pair(e, large, 1 << 20, gpu, fine));
                }),
            },
            Operation {
                name: "allow_access, 4 KiB CPU-pool allocation".into(),
                calls: 20_000,
                run: Box::new(move |e| {
                    black_box(allow(e, host, gpu));
                }),
            },
        ]
    };

    println!("## 1. The new wrappers over the runtime's own entries (software runtime)\n");
    println!("{WRAPPER_ROUNDS} rounds of one unwrapped and one wrapped batch, alternating; ns per call (a lock + unlock pair is one call).\n");
    assert!(kernel_replay::testing::inventory_is_empty());
    let off = print_state(
        "Tracking off, nothing tracked",
        &ops(untracked_host),
        &unwrapped,
        &wrapped,
    );

    kernel_replay::set_tracking(true);
    let host = pool_allocate(sim.pool(sim.cpu(), PoolKind::SystemFine), 4096, 3);
    assert_eq!(allow(&wrapped, host, gpu), HSA_STATUS_SUCCESS);
    let device = sim.pool(sim.gpu(0), PoolKind::DeviceCoarse);
    let mut live: Vec<*mut u8> = Vec::new();
    let mut worst = off.iter().copied().fold(f64::MIN, f64::max);
    for target in [1_000usize, 100_000] {
        while live.len() < target {
            let mut p = std::ptr::null_mut();
            // SAFETY: the wrapped allocator; untouched 4 KiB device buffers.
            let status = unsafe {
                (*amd_table()).hsa_amd_memory_pool_allocate_fn.unwrap()(
                    hsa_amd_memory_pool_t {
                        handle: device.handle,
                    },
                    4096,
                    0,
                    &mut p,
                )
            };
            assert_eq!(status, HSA_STATUS_SUCCESS);
            live.push(p.cast());
        }
        // The device buffers (the GPU's), the host allocation (the CPU's).
        assert_eq!(kernel_replay::tracked(gpu).regions, target);
        assert_eq!(kernel_replay::tracked(cpu).regions, 1);
        // The path measured: a wrapped lock records the range (the CPU's),
        // its unlock retires it.
        let mut agents = [gpu];
        let mut agent_ptr = std::ptr::null_mut();
        // SAFETY: as in lock_pair.
        let locked = unsafe {
            (wrapped.lock)(
                small.ptr.cast(),
                4096,
                agents.as_mut_ptr(),
                1,
                hsa_amd_memory_pool_t { handle: fine },
                0,
                &mut agent_ptr,
            )
        };
        assert_eq!(locked, HSA_STATUS_SUCCESS);
        assert_eq!(kernel_replay::tracked(cpu).regions, 2);
        // SAFETY: the range just locked.
        let unlocked = unsafe { (wrapped.unlock)(small.ptr.cast()) };
        assert_eq!(unlocked, HSA_STATUS_SUCCESS);
        assert_eq!(kernel_replay::tracked(cpu).regions, 1);
        let on = print_state(
            &format!(
                "Tracking on, {} tracked allocations (+1 host allocation)",
                if target == 1_000 { "1,000" } else { "100,000" }
            ),
            &ops(host),
            &unwrapped,
            &wrapped,
        );
        worst = on.iter().copied().fold(worst, f64::max);
    }
    // The lock pairs left nothing locked behind (a lock is the CPU's).
    assert_eq!(kernel_replay::tracked(cpu).regions, 1);
    println!("summary: largest median overhead of a wrapped call over the unwrapped one: {worst:+.0} ns [target <= 300 ns]\n");
    for p in live {
        pool_free(p);
    }
    pool_free(host);
    pool_free(untracked_host);
    drop(sim);
}

// ---- 2. host-region capture and restore ---------------------------------------------

/// Rounds of the copy part.
const ROUNDS: usize = 15;

/// Times `calls` runs of `f`; seconds per call.
fn per_call(calls: usize, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..calls {
        f();
    }
    start.elapsed().as_secs_f64() / calls as f64
}

/// Samples of the operations of one size, seconds per call.
#[derive(Default)]
struct CopySamples {
    /// memcpy host region -> `Vec<u8>` (malloc'd, like the library's
    /// pageable arena), and -> a page-aligned buffer.
    out_vec: Vec<f64>,
    out_page: Vec<f64>,
    snap: Vec<f64>,
    /// memcpy `Vec<u8>` -> host region, and page-aligned buffer -> host region.
    back_vec: Vec<f64>,
    back_page: Vec<f64>,
    restore: Vec<f64>,
    drop: Vec<f64>,
}

fn label(size: usize) -> String {
    if size >= 1 << 20 {
        format!("{} MiB", size >> 20)
    } else {
        format!("{} KiB", size >> 10)
    }
}

/// A median (min) in µs, or ms from 16 MiB.
fn show(samples: &[f64], size: usize) -> String {
    if size >= 16 << 20 {
        format!(
            "{:.2} ({:.2}) ms",
            median(samples) * 1e3,
            min(samples) * 1e3
        )
    } else {
        format!(
            "{:.2} ({:.2}) µs",
            median(samples) * 1e6,
            min(samples) * 1e6
        )
    }
}

fn measure_copies(sim: &hsa_sim::SimSession, gpu: hsa_agent_t, size: usize) -> CopySamples {
    let pool = sim.pool(sim.cpu(), PoolKind::SystemFine);
    let host = pool_allocate(pool, size, 0x5A);
    // SAFETY: the runtime's live table, a live allocation.
    unsafe { kernel_replay::testing::app_allow_access(amd_table(), host, &[gpu]) };
    let mut vec_buffer = vec![1u8; size];
    let page_buffer = HostBytes::new(size);
    let calls = ((16 << 20) / size).clamp(1, 256);
    let window = || {
        let snapshot = kernel_replay::snap(gpu).expect("a complete snapshot");
        assert_eq!(snapshot.kind_bytes(MemoryKind::Host), size as u64);
        assert_eq!(snapshot.region_count(), 1);
        assert!(snapshot.restore().complete());
    };
    window();
    window();
    let copy = |from: *const u8, to: *mut u8| {
        per_call(calls, || {
            // SAFETY: both sides hold `size` bytes and do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(from, to, size) };
            black_box(to);
        })
    };
    let mut samples = CopySamples::default();
    for _ in 0..ROUNDS {
        samples.out_vec.push(copy(host, vec_buffer.as_mut_ptr()));
        samples.out_page.push(copy(host, page_buffer.ptr));
        // Steady replay: one window at a time, each snapshot dropped (its
        // arena handed back for the next) before the next is taken.
        let mut spent = [Duration::ZERO; 3];
        for _ in 0..calls {
            let start = Instant::now();
            let snapshot = kernel_replay::snap(gpu).expect("a complete snapshot");
            let taken = Instant::now();
            black_box(snapshot.restore());
            let restored = Instant::now();
            drop(snapshot);
            let dropped = Instant::now();
            spent[0] += taken - start;
            spent[1] += restored - taken;
            spent[2] += dropped - restored;
        }
        let [snap, restore, dropped] = spent.map(|t| t.as_secs_f64() / calls as f64);
        samples.snap.push(snap);
        samples.restore.push(restore);
        samples.drop.push(dropped);
        samples.back_vec.push(copy(vec_buffer.as_ptr(), host));
        samples.back_page.push(copy(page_buffer.ptr, host));
    }
    drop(vec_buffer);
    pool_free(host);
    kernel_replay::trim_retained();
    samples
}

fn copies_child(sizes: &[usize]) {
    let sim = hsa_sim::session(1);
    install();
    kernel_replay::set_tracking(true);
    kernel_replay::set_host_memory(HostMemory::All);
    let gpu = hsa_agent_t {
        handle: sim.gpu(0).handle,
    };
    let measured: Vec<(usize, CopySamples)> = sizes
        .iter()
        .map(|&size| (size, measure_copies(&sim, gpu, size)))
        .collect();
    let ratio = |memcpy: &[f64], library: &[f64]| median(memcpy) / median(library);
    println!("## 2. Host-region capture and restore against memcpy (software runtime)\n");
    println!("One CPU-pool allocation granted to the GPU, host memory `all`; {ROUNDS} rounds after 2 warm-up windows; median (min) per call.\n");
    println!("### Capture: `snap` against memcpy of the region into a buffer\n");
    println!("| size | calls per sample | memcpy into a `Vec<u8>` | memcpy into a page-aligned buffer | snap | memcpy (`Vec`) / snap | memcpy (page-aligned) / snap |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (size, m) in &measured {
        let size = *size;
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} |",
            label(size),
            ((16 << 20) / size).clamp(1, 256),
            show(&m.out_vec, size),
            show(&m.out_page, size),
            show(&m.snap, size),
            ratio(&m.out_vec, &m.snap),
            ratio(&m.out_page, &m.snap),
        );
    }
    println!("\n### Restore: `restore` against memcpy of a buffer into the region\n");
    println!("| size | memcpy from a `Vec<u8>` | memcpy from a page-aligned buffer | restore | memcpy (`Vec`) / restore | memcpy (page-aligned) / restore | snapshot drop |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (size, m) in &measured {
        let size = *size;
        println!(
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} µs |",
            label(size),
            show(&m.back_vec, size),
            show(&m.back_page, size),
            show(&m.restore, size),
            ratio(&m.back_vec, &m.restore),
            ratio(&m.back_page, &m.restore),
            median(&m.drop) * 1e6,
        );
    }
    println!();
    for (size, m) in &measured {
        let best_out = median(&m.out_vec).min(median(&m.out_page));
        let best_back = median(&m.back_vec).min(median(&m.back_page));
        println!(
            "summary {}: capture {:.2}x, restore {:.2}x of the faster memcpy [target >= 0.8]; \
             per call over it: snap {:+.2} us, restore {:+.2} us; faster memcpy out {:.1} GB/s, back {:.1} GB/s",
            label(*size),
            best_out / median(&m.snap),
            best_back / median(&m.restore),
            (median(&m.snap) - best_out) * 1e6,
            (median(&m.restore) - best_back) * 1e6,
            *size as f64 / best_out / 1e9,
            *size as f64 / best_back / 1e9,
        );
    }
    println!();
    drop(sim);
}

// ---- the two parts, each in its own process -----------------------------------------

fn run_child(args: &[&str]) {
    let started = Instant::now();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "{args:?} failed");
    eprintln!("({args:?}: {:.1} s)", started.elapsed().as_secs_f64());
}

const SIZES: [usize; 6] = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 64 << 20, 256 << 20];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--wrappers-child") => return wrappers_child(),
        Some("--copies-child") => {
            // KR_BENCH_SIZES=<bytes>,... measures those sizes only: for a
            // profiler.
            let sizes: Vec<usize> = match std::env::var("KR_BENCH_SIZES") {
                Ok(list) => list.split(',').map(|s| s.trim().parse().unwrap()).collect(),
                Err(_) => SIZES.to_vec(),
            };
            return copies_child(&sizes);
        }
        _ => {}
    }
    // `cargo bench` passes `--bench`; a part's name picks it.
    let wanted = |part: &str| {
        let named: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
        named.is_empty() || named.iter().any(|a| a.as_str() == part)
    };
    if wanted("wrappers") {
        run_child(&["--wrappers-child"]);
    }
    if wanted("copies") {
        run_child(&["--copies-child"]);
    }
}
