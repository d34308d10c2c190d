//! Re-registration, as rocprofiler-sdk's registration.cpp does it: the
//! runtime's original entries are written back into the live tables (taking
//! the wrappers out) and `memory_tracker_init` is called again. While the
//! wrappers are out, frees go unseen: a snapshot must notice, decline and
//! set the inventory aside rather than copy from freed memory, and the
//! second init must put the wrappers back, chaining to what the table holds
//! now, and keep each recorded allocation the runtime still reports as the
//! same one (new generation), dropping those freed meanwhile.
//! Each test runs in its own process (installation is process-global).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use hsa_sim::{fresh_amd_ext_table, fresh_core_table, PoolKind};
use kernel_replay::hsa::{hsa_status_t, AmdExtTable, CoreApiTable};

/// The SDK's `restore_table`: the runtime's original entries back into the
/// live tables, every tool's wrapper gone.
fn restore_original_tables() {
    restore_tables(true, true);
}

/// The runtime's original entries back into the core table, the AMD table,
/// or both.
fn restore_tables(core: bool, amd: bool) {
    let (core_original, amd_original) = (fresh_core_table(), fresh_amd_ext_table());
    // SAFETY: the runtime's live tables and same-sized original copies; no
    // other thread is calling through them.
    unsafe {
        if core {
            std::ptr::copy_nonoverlapping(
                core_original.as_bytes().as_ptr(),
                core_table().cast::<u8>(),
                std::mem::size_of::<CoreApiTable>(),
            );
        }
        if amd {
            std::ptr::copy_nonoverlapping(
                amd_original.as_bytes().as_ptr(),
                amd_table().cast::<u8>(),
                std::mem::size_of::<AmdExtTable>(),
            );
        }
    }
}

fn init() -> Result<kernel_replay::Installed, kernel_replay::InstallError> {
    // SAFETY: the runtime's own tables.
    unsafe { kernel_replay::install(core_table(), amd_table(), 0) }
}

/// The process-wide setup of each test: the runtime, installed, tracking on.
fn installed_session() -> hsa_sim::SimSession {
    let sim = hsa_sim::session(1);
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    assert!(kernel_replay::set_tracking(true));
    capture_logs(kernel_replay::LogLevel::Warn);
    sim
}

#[test]
fn a_snapshot_after_the_tables_were_restored_declines_until_init_revalidates() {
    if !in_child("a_snapshot_after_the_tables_were_restored_declines_until_init_revalidates") {
        return;
    }
    let sim = installed_session();
    let gpu = sim.gpu(0);
    let kept = device_buffer(&sim, gpu, 4096, 1);
    let freed = device_buffer(&sim, gpu, 4096, 2);
    let before = Snap::of(gpu);
    assert!(before.ok());
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 2);

    restore_original_tables();
    // The application frees and allocates while the wrappers are out.
    assert_eq!(pool_free(freed), SUCCESS);
    let unseen = device_buffer(&sim, gpu, 4096, 3);

    let declined = Snap::of(gpu);
    assert_eq!(
        declined.reason(),
        Some(kernel_replay::DeclineReason::WrappersRemoved)
    );
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        0,
        "the unvouched inventory is set aside"
    );
    assert!(!logs_containing("taken out of the HSA tables").is_empty());
    // An older snapshot's restore writes nothing it cannot vouch for.
    fill(kept, 4096, 9);
    let report = before.restore();
    assert_eq!((report.restored, report.failed), (0, 0));
    // SAFETY: a live snapshot.
    assert!(!before.restore_all(), "not a complete restore");
    assert!(all(kept, 4096, 9));
    assert_eq!(
        sim.count(hsa_sim::Counter::CopyViolations),
        0,
        "no copy touched the freed buffer"
    );
    assert!(sim.quarantine_intact());

    // The SDK calls init again: the wrappers go back in, and the buffer
    // still allocated is tracked again; the freed one is not (its block may
    // now be `unseen`'s, allocated behind the wrappers' back: not tracked).
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    let fresh = device_buffer(&sim, gpu, 8192, 4);
    fill(kept, 4096, 6);
    let after = Snap::of(gpu);
    assert!(after.ok(), "{:?}", after.reason());
    assert_eq!(
        after.regions(),
        2,
        "the kept buffer and the one allocated since"
    );
    fill(fresh, 8192, 5);
    fill(kept, 4096, 7);
    // SAFETY: a live snapshot.
    assert!(after.restore_all());
    assert!(all(fresh, 8192, 4));
    assert!(all(kept, 4096, 6));
    // The snapshot from before the re-registration holds the old generation:
    // it writes nothing, not even into the buffer kept.
    assert_eq!(before.restore().restored, 0);
    assert!(all(kept, 4096, 6));
    for p in [kept, unseen, fresh] {
        assert_eq!(pool_free(p), SUCCESS);
    }
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        0,
        "frees are seen again"
    );
}

#[test]
fn either_table_restored_on_its_own_is_noticed() {
    if !in_child("either_table_restored_on_its_own_is_noticed") {
        return;
    }
    let sim = installed_session();
    let gpu = sim.gpu(0);
    for (core, amd) in [(true, false), (false, true)] {
        let p = device_buffer(&sim, gpu, 4096, 1);
        assert!(Snap::of(gpu).ok());
        restore_tables(core, amd);
        assert_eq!(
            Snap::of(gpu).reason(),
            Some(kernel_replay::DeclineReason::WrappersRemoved),
            "core table restored: {core}, AMD table restored: {amd}"
        );
        assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
        assert!(init().is_ok());
        let after = Snap::of(gpu);
        assert!(after.ok(), "{:?}", after.reason());
        assert_eq!(pool_free(p), SUCCESS);
    }
}

#[test]
fn init_after_the_tables_were_restored_installs_again_before_any_snapshot() {
    if !in_child("init_after_the_tables_were_restored_installs_again_before_any_snapshot") {
        return;
    }
    let sim = installed_session();
    let gpu = sim.gpu(0);
    let freed = device_buffer(&sim, gpu, 4096, 2);
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);

    restore_original_tables();
    assert_eq!(pool_free(freed), SUCCESS);
    assert_eq!(
        init(),
        Ok(kernel_replay::Installed::Installed),
        "re-installed"
    );
    assert_eq!(
        init(),
        Ok(kernel_replay::Installed::AlreadyInstalled),
        "and only once"
    );
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        0,
        "the allocation freed while the wrappers were out is dropped"
    );
    // The freed block comes back to a new, tracked allocation.
    let reused = device_buffer(&sim, gpu, 4096, 7);
    assert_eq!(reused, freed, "address reuse");
    let snapshot = Snap::of(gpu);
    assert!(snapshot.ok());
    assert_eq!(snapshot.regions(), 1);
    fill(reused, 4096, 8);
    assert_eq!(snapshot.restore().restored, 1);
    assert!(all(reused, 4096, 7));
    assert_eq!(pool_free(reused), SUCCESS);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

/// Another tool's wrapper layered over ours, as the SDK's API tracing puts
/// its wrappers over the entries it found: it chains to what it replaced.
static LAYERED_NEXT: AtomicUsize = AtomicUsize::new(0);
static LAYERED_CALLS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn layered_pool_free(ptr: *mut std::ffi::c_void) -> hsa_status_t {
    LAYERED_CALLS.fetch_add(1, Ordering::Relaxed);
    let next = LAYERED_NEXT.load(Ordering::Relaxed);
    // SAFETY: set to the pool-free entry the table held (our wrapper).
    let next: unsafe extern "C" fn(*mut std::ffi::c_void) -> hsa_status_t =
        unsafe { std::mem::transmute(next) };
    // SAFETY: the caller's pointer, forwarded.
    unsafe { next(ptr) }
}

#[test]
fn a_wrapper_layered_over_ours_keeps_ours_in_place_and_is_never_chained_to() {
    if !in_child("a_wrapper_layered_over_ours_keeps_ours_in_place_and_is_never_chained_to") {
        return;
    }
    let sim = installed_session();
    let gpu = sim.gpu(0);
    // SAFETY: the runtime's live AMD table; our wrapper is in it.
    unsafe {
        let table = amd_table();
        let ours = (*table).hsa_amd_memory_pool_free_fn.expect("our wrapper");
        LAYERED_NEXT.store(ours as usize, Ordering::Relaxed);
        (*table).hsa_amd_memory_pool_free_fn = Some(layered_pool_free);
    }
    // Still in place: snapshots work, frees reach our wrapper.
    let buffer = device_buffer(&sim, gpu, 4096, 1);
    let snapshot = Snap::of(gpu);
    assert!(snapshot.ok(), "{:?}", snapshot.reason());
    assert_eq!(snapshot.regions(), 1);
    // init again must not capture the layered wrapper (which leads to ours).
    assert_eq!(init(), Ok(kernel_replay::Installed::AlreadyInstalled));
    assert_eq!(pool_free(buffer), SUCCESS);
    assert_eq!(LAYERED_CALLS.load(Ordering::Relaxed), 1);
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        0,
        "the free was seen"
    );
    assert_eq!(snapshot.restore().skipped_not_live, 1);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    let _ = sim.pool(gpu, PoolKind::DeviceCoarse);
}

#[test]
fn re_registration_keeps_every_buffer_still_allocated() {
    if !in_child("re_registration_keeps_every_buffer_still_allocated") {
        return;
    }
    // As a new user would: allocate, restore the tables, register again,
    // allocate again: both buffers are replay state.
    let sim = installed_session();
    let gpu = sim.gpu(0);
    let first = device_buffer(&sim, gpu, 4096, 1);
    let also_kept = device_buffer(&sim, gpu, 3000, 2);
    let freed = device_buffer(&sim, gpu, 4096, 3);
    restore_original_tables();
    assert_eq!(pool_free(freed), SUCCESS);
    capture_logs(kernel_replay::LogLevel::Info);
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    let said = logs_containing("recorded before are still the same");
    assert!(
        said.iter().any(|l| l.contains("2 of 3 allocation(s)")),
        "{said:?}"
    );
    capture_logs(kernel_replay::LogLevel::Warn);
    let second = device_buffer(&sim, gpu, 4096, 4);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 3);
    let snapshot = Snap::of(gpu);
    assert_eq!(snapshot.regions(), 3);
    assert_eq!(snapshot.bytes(), 4096 + 3000 + 4096);
    fill(first, 4096, 9);
    fill(also_kept, 3000, 9);
    fill(second, 4096, 9);
    // SAFETY: a live snapshot.
    assert!(snapshot.restore_all());
    assert!(all(first, 4096, 1) && all(also_kept, 3000, 2) && all(second, 4096, 4));
    // Frees of the kept buffers are seen (retired before the runtime frees).
    assert_eq!(pool_free(first), SUCCESS);
    assert_eq!(snapshot.restore().skipped_not_live, 1);
    for p in [also_kept, second] {
        assert_eq!(pool_free(p), SUCCESS);
    }
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn a_buffer_freed_and_replaced_unseen_by_a_different_one_is_dropped() {
    if !in_child("a_buffer_freed_and_replaced_unseen_by_a_different_one_is_dropped") {
        return;
    }
    let sim = installed_session();
    let gpu = sim.gpu(0);
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    let replaced = device_buffer(&sim, gpu, 8192, 1);
    restore_original_tables();
    assert_eq!(pool_free(replaced), SUCCESS);
    // The same block, handed out again behind the wrappers' back to a
    // smaller allocation (and then one from the fine-grained pool would be
    // another kind: a different allocation either way).
    let smaller = pool_allocate(sim.pool(gpu, PoolKind::DeviceCoarse), 4096, 0).unwrap();
    assert_eq!(smaller, replaced, "address reuse");
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    assert_eq!(
        kernel_replay::tracked(agent(gpu)).regions,
        0,
        "not the allocation that was recorded"
    );
    assert_eq!(pool_free(smaller), SUCCESS);
}

#[cfg(hsa_vmem)]
#[test]
fn re_registration_keeps_the_mappings_still_mapped() {
    if !in_child("re_registration_keeps_the_mappings_still_mapped") {
        return;
    }
    const CHUNK: usize = 64 << 10;
    let sim = installed_session();
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let mapped = |va: *mut u8| {
        let handle = handle_create(pool, CHUNK).unwrap();
        assert_eq!(map(va, CHUNK, handle), SUCCESS);
        assert_eq!(
            set_access(va, CHUNK, &[(gpu, RW), (sim.cpu(), RW)]),
            SUCCESS
        );
        fill(va, CHUNK, 1);
        handle
    };
    let (kept_va, gone_va) = (reserve(CHUNK).unwrap(), reserve(CHUNK).unwrap());
    let kept = mapped(kept_va);
    let gone = mapped(gone_va);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 2);
    restore_original_tables();
    // Unmapped behind the wrappers' back; the other stays mapped.
    assert_eq!(unmap(gone_va, CHUNK), SUCCESS);
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 1);
    let snapshot = Snap::of(gpu);
    assert_eq!((snapshot.regions(), snapshot.bytes()), (1, CHUNK as u64));
    fill(kept_va, CHUNK, 2);
    // SAFETY: a live snapshot.
    assert!(snapshot.restore_all());
    assert!(all(kept_va, CHUNK, 1));
    // Its unmap is seen again.
    assert_eq!(unmap(kept_va, CHUNK), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(gpu)).regions, 0);
    for handle in [kept, gone] {
        assert_eq!(handle_release(handle), SUCCESS);
    }
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn re_registration_with_nothing_recorded_says_nothing() {
    if !in_child("re_registration_with_nothing_recorded_says_nothing") {
        return;
    }
    let _sim = installed_session();
    restore_original_tables();
    capture_logs(kernel_replay::LogLevel::Info);
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    assert_eq!(
        logs_containing("recorded before are still the same"),
        Vec::<String>::new()
    );
}

#[test]
fn re_registration_keeps_the_managed_ranges_still_mapped() {
    if !in_child("re_registration_keeps_the_managed_ranges_still_mapped") {
        return;
    }
    let sim = installed_session();
    let gpu = sim.gpu(0);
    if is_baseline() {
        return; // the baseline policy does not capture managed memory
    }
    let size = 2 * 4096;
    let map = || map_anonymous(size, 0);
    let accessible = kernel_replay::hsa::sys::HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE;
    let (kept, unmapped) = (map(), map());
    for p in [kept, unmapped] {
        assert_eq!(svm_set(p, size, &[(accessible, gpu.handle)]), SUCCESS);
    }
    assert_eq!(
        Snap::of(gpu).kind_bytes(kernel_replay::MemoryKind::Managed),
        2 * size as u64
    );
    restore_original_tables();
    // ROCm 6.x's hipFree of managed memory while the wrappers are out.
    // SAFETY: our mapping, of that size.
    assert_eq!(unsafe { libc::munmap(unmapped.cast(), size) }, 0);
    assert_eq!(init(), Ok(kernel_replay::Installed::Installed));
    // The range the runtime still answers for is kept, the other dropped.
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!(
        snap.kind_bytes(kernel_replay::MemoryKind::Managed),
        size as u64
    );
    fill(kept, size, 9);
    assert!(snap.restore_all());
    assert!(all(kept, size, 0));
    drop(snap);
    // SAFETY: our mapping, of that size.
    assert_eq!(unsafe { libc::munmap(kept.cast(), size) }, 0);
}
