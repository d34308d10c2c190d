//! Cost of the allocation wrappers on the host program's allocation path.
//!
//! `cargo bench --bench wrappers` (a plain harness: it prints a table).
//!
//! The runtime underneath is a trivial fake (a bump allocator and a fixed
//! pointer-info answer) so the numbers are the wrappers' own cost, not the
//! software runtime's. Each figure is the median of 15 batches, all measured
//! in one run, and compared as differences and ratios within that run.

use std::ffi::c_void;
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use kernel_replay::hsa::sys::{
    hsa_amd_memory_pool_t, hsa_amd_pointer_info_t, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
    HSA_EXT_POINTER_TYPE_HSA,
};
use kernel_replay::hsa::{
    hsa_agent_t, hsa_status_t, AmdExtTable, CoreApiTable, HSA_STATUS_SUCCESS,
};

type PoolAllocate =
    unsafe extern "C" fn(hsa_amd_memory_pool_t, usize, u32, *mut *mut c_void) -> hsa_status_t;
type PoolFree = unsafe extern "C" fn(*mut c_void) -> hsa_status_t;

static NEXT_ADDRESS: AtomicUsize = AtomicUsize::new(1 << 40);

unsafe extern "C" fn fake_allocate(
    _: hsa_amd_memory_pool_t,
    size: usize,
    _: u32,
    ptr: *mut *mut c_void,
) -> hsa_status_t {
    let address = NEXT_ADDRESS.fetch_add(size.max(4096), Ordering::Relaxed);
    // SAFETY: the caller passes a writable out-pointer.
    unsafe { *ptr = address as *mut c_void };
    HSA_STATUS_SUCCESS
}

unsafe extern "C" fn fake_free(_: *mut c_void) -> hsa_status_t {
    HSA_STATUS_SUCCESS
}

unsafe extern "C" fn fake_pointer_info(
    _: *const c_void,
    info: *mut hsa_amd_pointer_info_t,
    _: Option<unsafe extern "C" fn(usize) -> *mut c_void>,
    _: *mut u32,
    _: *mut *mut hsa_agent_t,
) -> hsa_status_t {
    // SAFETY: the library passes a sized, writable struct.
    unsafe {
        (*info).type_ = HSA_EXT_POINTER_TYPE_HSA;
        (*info).agentOwner = hsa_agent_t { handle: 1 };
        (*info).global_flags = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED;
    }
    HSA_STATUS_SUCCESS
}

/// Median nanoseconds per allocate/free pair through `allocate`/`free`.
fn pair_ns(allocate: PoolAllocate, free: PoolFree, pairs: usize) -> f64 {
    let pool = hsa_amd_memory_pool_t { handle: 1 };
    let mut samples: Vec<f64> = (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..pairs {
                let mut p = std::ptr::null_mut();
                // SAFETY: the fake runtime, or the wrappers over it.
                unsafe {
                    black_box(allocate(pool, black_box(4096), 0, &mut p));
                    black_box(free(black_box(p)));
                }
            }
            start.elapsed().as_nanos() as f64 / pairs as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    // A complete AMD table from the software runtime, with the pool entries
    // and the pointer query replaced by the trivial fakes.
    let mut core = hsa_sim::fresh_core_table();
    let mut amd = hsa_sim::fresh_amd_ext_table();
    let amd_table: *mut AmdExtTable = amd.as_mut_ptr().cast();
    // SAFETY: a full-size table copy owned here.
    unsafe {
        (*amd_table).hsa_amd_memory_pool_allocate_fn = Some(fake_allocate);
        (*amd_table).hsa_amd_memory_pool_free_fn = Some(fake_free);
        (*amd_table).hsa_amd_pointer_info_fn = Some(fake_pointer_info);
    }
    #[cfg(hsa_vmem)]
    vmem::put_fakes(amd_table);
    // SAFETY: full-size tables that live until the end of main.
    let installed =
        unsafe { kernel_replay::install(core.as_mut_ptr().cast::<CoreApiTable>(), amd_table, 0) };
    assert_eq!(installed, Ok(kernel_replay::Installed::Installed));
    // SAFETY: as above; the wrappers are installed now.
    let (wrapped_allocate, wrapped_free) = unsafe {
        (
            (*amd_table).hsa_amd_memory_pool_allocate_fn.unwrap(),
            (*amd_table).hsa_amd_memory_pool_free_fn.unwrap(),
        )
    };
    let (raw_allocate, raw_free): (PoolAllocate, PoolFree) =
        (black_box(fake_allocate), black_box(fake_free));

    let pairs = 2_000_000;
    let unwrapped = pair_ns(raw_allocate, raw_free, pairs);
    kernel_replay::set_tracking(false);
    let disabled = pair_ns(wrapped_allocate, wrapped_free, pairs);

    println!("allocate + free pair, fake runtime underneath (median of 15 batches)\n");
    println!("| path | ns per pair | over the unwrapped call |");
    println!("|---|---:|---:|");
    println!("| unwrapped (the runtime's own entries) | {unwrapped:.2} | |");
    println!(
        "| wrapped, tracking off | {disabled:.2} | {:+.2} ns |",
        disabled - unwrapped
    );

    kernel_replay::set_tracking(true);
    let pool = hsa_amd_memory_pool_t { handle: 1 };
    let mut live: Vec<*mut c_void> = Vec::new();
    let mut per_size = Vec::new();
    for target in [1_000usize, 10_000, 100_000] {
        while live.len() < target {
            let mut p = std::ptr::null_mut();
            // SAFETY: the wrappers over the fake runtime.
            unsafe { wrapped_allocate(pool, 4096, 0, &mut p) };
            live.push(p);
        }
        let enabled = pair_ns(wrapped_allocate, wrapped_free, 200_000);
        per_size.push((target, enabled));
        println!(
            "| wrapped, tracking on, {target} live | {enabled:.2} | {:+.2} ns (record + retire) |",
            enabled - unwrapped
        );
    }
    let growth = per_size[2].1 / per_size[0].1;
    println!(
        "\ntracking on: {:.0} ns per pair at 100,000 live (target <= 300 ns); \
         x{growth:.2} from 1,000 to 100,000 live (log2 ratio of sizes is x{:.2})",
        per_size[2].1,
        (100_000f64).log2() / (1_000f64).log2()
    );
    println!(
        "tracking off: {:+.2} ns per pair over the unwrapped call (target <= 2 ns)",
        disabled - unwrapped
    );
    for p in live {
        // SAFETY: as above.
        unsafe { wrapped_free(p) };
    }
    assert_eq!(kernel_replay::tracked(hsa_agent_t { handle: 1 }).regions, 0);

    #[cfg(hsa_vmem)]
    vmem::bench(amd_table);
}

/// A virtual-memory mapping made, made writable (so it becomes a tracked
/// region), and unmapped, through fakes of the runtime's entries.
#[cfg(hsa_vmem)]
mod vmem {
    use std::ffi::c_void;
    use std::hint::black_box;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;

    use kernel_replay::hsa::sys::{
        hsa_access_permission_t, hsa_amd_memory_access_desc_t, hsa_amd_memory_pool_t,
        hsa_amd_memory_type_t, hsa_amd_vmem_alloc_handle_t, HSA_ACCESS_PERMISSION_RW,
    };
    use kernel_replay::hsa::{hsa_agent_t, hsa_status_t, AmdExtTable, HSA_STATUS_SUCCESS};

    type Map = unsafe extern "C" fn(
        *mut c_void,
        usize,
        usize,
        hsa_amd_vmem_alloc_handle_t,
        u64,
    ) -> hsa_status_t;
    type Unmap = unsafe extern "C" fn(*mut c_void, usize) -> hsa_status_t;
    type SetAccess = unsafe extern "C" fn(
        *mut c_void,
        usize,
        *const hsa_amd_memory_access_desc_t,
        usize,
    ) -> hsa_status_t;

    /// The device pool the fake handle comes from: a real coarse-grained
    /// pool of the software runtime's GPU, so the classification walks real
    /// agents and pools (once: it is cached per pool).
    static POOL: AtomicU64 = AtomicU64::new(0);
    static AGENT: AtomicU64 = AtomicU64::new(0);

    unsafe extern "C" fn fake_map(
        _: *mut c_void,
        _: usize,
        _: usize,
        _: hsa_amd_vmem_alloc_handle_t,
        _: u64,
    ) -> hsa_status_t {
        HSA_STATUS_SUCCESS
    }
    unsafe extern "C" fn fake_unmap(_: *mut c_void, _: usize) -> hsa_status_t {
        HSA_STATUS_SUCCESS
    }
    unsafe extern "C" fn fake_set_access(
        _: *mut c_void,
        _: usize,
        _: *const hsa_amd_memory_access_desc_t,
        _: usize,
    ) -> hsa_status_t {
        HSA_STATUS_SUCCESS
    }
    unsafe extern "C" fn fake_get_access(
        _: *mut c_void,
        perms: *mut hsa_access_permission_t,
        _: hsa_agent_t,
    ) -> hsa_status_t {
        // SAFETY: a writable out-parameter.
        unsafe { *perms = HSA_ACCESS_PERMISSION_RW };
        HSA_STATUS_SUCCESS
    }
    unsafe extern "C" fn fake_properties(
        _: hsa_amd_vmem_alloc_handle_t,
        pool: *mut hsa_amd_memory_pool_t,
        _: *mut hsa_amd_memory_type_t,
    ) -> hsa_status_t {
        // SAFETY: a writable out-parameter.
        unsafe { (*pool).handle = POOL.load(Ordering::Relaxed) };
        HSA_STATUS_SUCCESS
    }

    /// Median ns per map + set_access + unmap of one 2 MiB page.
    fn triple_ns(map: Map, set_access: SetAccess, unmap: Unmap) -> f64 {
        let desc = hsa_amd_memory_access_desc_t {
            permissions: HSA_ACCESS_PERMISSION_RW,
            agent_handle: hsa_agent_t {
                handle: AGENT.load(Ordering::Relaxed),
            },
        };
        let handle = hsa_amd_vmem_alloc_handle_t { handle: 0x77 };
        let mut samples: Vec<f64> = (0..15)
            .map(|_| {
                let start = Instant::now();
                let pairs = 200_000;
                for i in 0..pairs {
                    let va = (0x7000_0000_0000usize + (i % 64) * (2 << 20)) as *mut c_void;
                    // SAFETY: the fakes, or the wrappers over them.
                    unsafe {
                        black_box(map(va, 2 << 20, 0, handle, 0));
                        black_box(set_access(va, 2 << 20, &desc, 1));
                        black_box(unmap(va, 2 << 20));
                    }
                }
                start.elapsed().as_nanos() as f64 / pairs as f64
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    }

    /// Puts the fakes into the (not yet installed) table.
    pub fn put_fakes(amd_table: *mut AmdExtTable) {
        let sim = hsa_sim::continue_session();
        let gpu = sim.gpu(0);
        POOL.store(
            sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse).handle,
            Ordering::Relaxed,
        );
        AGENT.store(gpu.handle, Ordering::Relaxed);
        // SAFETY: a full-size table copy owned by main.
        unsafe {
            (*amd_table).hsa_amd_vmem_map_fn = Some(fake_map);
            (*amd_table).hsa_amd_vmem_unmap_fn = Some(fake_unmap);
            (*amd_table).hsa_amd_vmem_set_access_fn = Some(fake_set_access);
            (*amd_table).hsa_amd_vmem_get_access_fn = Some(fake_get_access);
            (*amd_table).hsa_amd_vmem_get_alloc_properties_from_handle_fn = Some(fake_properties);
        }
    }

    /// The wrapped path (tracking on: every mapping becomes a tracked
    /// region) against the fakes themselves.
    pub fn bench(amd_table: *mut AmdExtTable) {
        // SAFETY: the installed table copy.
        let (map, set_access, unmap) = unsafe {
            (
                (*amd_table).hsa_amd_vmem_map_fn.expect("wrapped"),
                (*amd_table).hsa_amd_vmem_set_access_fn.expect("wrapped"),
                (*amd_table).hsa_amd_vmem_unmap_fn.expect("wrapped"),
            )
        };
        let (raw_map, raw_set, raw_unmap): (Map, SetAccess, Unmap) = (
            black_box(fake_map),
            black_box(fake_set_access),
            black_box(fake_unmap),
        );
        let unwrapped = triple_ns(raw_map, raw_set, raw_unmap);
        kernel_replay::set_tracking(true);
        let tracked = triple_ns(map, set_access, unmap);
        assert_eq!(
            kernel_replay::tracked(hsa_agent_t {
                handle: AGENT.load(Ordering::Relaxed)
            })
            .regions,
            0
        );
        println!("\nvirtual-memory mapping: map + set_access (read-write for its GPU) + unmap of a 2 MiB page, fake runtime underneath (median of 15 batches)\n");
        println!("| path | ns per mapping | over the unwrapped calls |");
        println!("|---|---:|---:|");
        println!("| unwrapped | {unwrapped:.2} | |");
        println!("| wrapped, tracking on (recorded as a tracked region, retired at unmap) | {tracked:.2} | {:+.2} ns |", tracked - unwrapped);
        println!("\ntracked mapping: {:+.0} ns over the unwrapped map + set_access + unmap (target <= 300 ns)", tracked - unwrapped);
    }
}
