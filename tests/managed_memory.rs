//! Managed (shared virtual) memory (`hipMallocManaged`): a range a GPU was
//! given access to with `hsa_amd_svm_attributes_set` is captured and
//! restored by that GPU, never by the CPU, so no page migrates; taken away,
//! unmapped or freed, it is not written; XNACK makes any system memory
//! writable, which is reported.

mod common;

use common::*;
use hsa_sim::{Counter, Mode};
use kernel_replay::hsa::sys::{
    HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE as ACCESSIBLE,
    HSA_AMD_SVM_ATTRIB_AGENT_ACCESSIBLE_IN_PLACE as IN_PLACE,
    HSA_AMD_SVM_ATTRIB_AGENT_NO_ACCESS as NO_ACCESS,
    HSA_AMD_SVM_ATTRIB_PREFERRED_LOCATION as PREFERRED_LOCATION,
};
use kernel_replay::{Coverage, DeclineReason, HostMemory, MemoryKind, Tier};

const SIZE: usize = 3 * 4096;

/// ROCm 6.x's `hipFree` of managed memory: `munmap`, no HSA call.
fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: a mapping of ours, of that size.
    assert_eq!(unsafe { libc::munmap(ptr.cast(), size) }, 0);
}

/// `hipMallocManaged`: mapped, then made accessible to `gpus`.
fn managed(gpus: &[hsa_sim::Agent], size: usize, byte: u8) -> *mut u8 {
    let ptr = map_anonymous(size, byte);
    let pairs: Vec<(u32, u64)> = gpus.iter().map(|g| (ACCESSIBLE, g.handle)).collect();
    assert_eq!(svm_set(ptr, size, &pairs), SUCCESS);
    ptr
}

#[test]
fn a_managed_range_is_captured_and_restored_by_the_gpu_without_migrating() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    // The runtime checks every copy's agent can reach both sides.
    sim.set_mode(Mode::StrictAsyncAccess, true);
    let ptr = managed(&[gpu], SIZE, 1);
    // Resident on the GPU, where the kernel left it.
    assert_eq!(svm_prefetch(ptr, SIZE, gpu), SUCCESS);
    assert_eq!(sim.svm_location(ptr), gpu);
    sim.reset_counters();

    let estimate = kernel_replay::estimate_footprint(agent(gpu));
    let snap = Snap::of(gpu);
    assert!(snap.ok(), "{:?}", snap.reason());
    if is_baseline() {
        // Pageable copies no GPU can write: reported, not captured.
        assert_eq!(snap.kind_bytes(MemoryKind::Managed), 0);
        assert_eq!(snap.not_covered(MemoryKind::Managed), SIZE as u64);
        assert_eq!(estimate.bytes, 0);
        unmap(ptr, SIZE);
        return;
    }
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), SIZE as u64);
    assert_eq!((estimate.regions, estimate.bytes), (1, SIZE as u64));
    assert_eq!(snap.not_covered(MemoryKind::Managed), 0);
    // Kept where the GPU reaches it.
    assert_eq!(snap.tier_bytes(Tier::Pageable), 0);
    let captured = sim.svm_bytes(gpu);
    assert!(captured >= SIZE as u64, "the GPU read it: {captured}");

    fill(ptr, SIZE, 9);
    assert!(snap.restore_all());
    assert!(all(ptr, SIZE, 1));
    // Moved by the GPU, none through the CPU; no page moved.
    assert!(sim.svm_bytes(gpu) >= captured + SIZE as u64);
    assert_eq!(sim.svm_bytes(sim.cpu()), 0);
    assert_eq!(sim.count(Counter::SvmMigrations), 0);
    assert_eq!(sim.svm_location(ptr), gpu);
    assert_eq!(sim.count(Counter::CopyViolations), 0);

    // Verify mode reads it through the GPU too.
    kernel_replay::set_verify(true);
    fill(ptr, SIZE, 7);
    let report = snap.restore();
    kernel_replay::set_verify(false);
    let verified = report.verify.expect("verified");
    assert_eq!((verified.regions, verified.mismatched_regions), (1, 0));
    assert_eq!(sim.svm_bytes(sim.cpu()), 0);
    assert_eq!(sim.count(Counter::SvmMigrations), 0);
    drop(snap);
    unmap(ptr, SIZE);
}

#[test]
fn only_the_gpus_given_access_capture_a_range_and_no_access_takes_it_away() {
    let sim = session(2);
    let (gpu0, gpu1) = (sim.gpu(0), sim.gpu(1));
    if is_baseline() {
        return; // managed memory is not captured there (see above)
    }
    // Attributes that give no access record nothing.
    let ptr = map_anonymous(SIZE, 1);
    assert_eq!(
        svm_set(ptr, SIZE, &[(PREFERRED_LOCATION, gpu0.handle)]),
        SUCCESS
    );
    assert_eq!(Snap::of(gpu0).kind_bytes(MemoryKind::Managed), 0);
    // hipMemAdvise(SetAccessedBy) on part of it: the whole range is recorded
    // from its start; the runtime then says the rest is not reachable.
    assert_eq!(svm_set(ptr, 4096, &[(IN_PLACE, gpu0.handle)]), SUCCESS);
    assert_eq!(Snap::of(gpu0).kind_bytes(MemoryKind::Managed), 4096);
    assert_eq!(svm_set(ptr, SIZE, &[(ACCESSIBLE, gpu0.handle)]), SUCCESS);
    let snap = Snap::of(gpu0);
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), SIZE as u64);
    assert_eq!(
        Snap::of(gpu1).kind_bytes(MemoryKind::Managed),
        0,
        "never given"
    );
    drop(snap);

    // Taken away from part of it: the runtime answers NO_ACCESS for the
    // range, so it is reported, not captured.
    assert_eq!(svm_set(ptr, 4096, &[(NO_ACCESS, gpu0.handle)]), SUCCESS);
    let snap = Snap::of(gpu0);
    assert!(snap.ok());
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), 0);
    assert_eq!(snap.not_covered(MemoryKind::Managed), SIZE as u64);
    assert_eq!(kernel_replay::estimate_footprint(agent(gpu0)).bytes, 0);
    drop(snap);
    // Taken away from all of it: no longer the GPU's at all.
    assert_eq!(svm_set(ptr, SIZE, &[(NO_ACCESS, gpu0.handle)]), SUCCESS);
    let snap = Snap::of(gpu0);
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), 0);
    assert_eq!(snap.not_covered(MemoryKind::Managed), 0);
    drop(snap);
    // The host-memory setting `off` leaves managed memory out too.
    assert_eq!(svm_set(ptr, SIZE, &[(ACCESSIBLE, gpu1.handle)]), SUCCESS);
    kernel_replay::set_host_memory(HostMemory::Off);
    let snap = Snap::of(gpu1);
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), 0);
    assert_eq!(snap.not_covered(MemoryKind::Managed), SIZE as u64);
    kernel_replay::set_host_memory(HostMemory::Auto);
    drop(snap);
    unmap(ptr, SIZE);
}

#[test]
fn a_range_unmapped_behind_the_librarys_back_is_skipped_not_written() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    if is_baseline() {
        return;
    }
    let kept = managed(&[gpu], SIZE, 2);
    let ptr = managed(&[gpu], SIZE, 1);
    let snap = Snap::of(gpu);
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), 2 * SIZE as u64);
    // ROCm 6.x's hipFree: munmap, no HSA call.
    unmap(ptr, SIZE);
    fill(kept, SIZE, 9);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert!(all(kept, SIZE, 2));
    assert_eq!(sim.count(Counter::CopyViolations), 0);
    drop(snap);
    // The next snapshot does not take it either.
    assert_eq!(Snap::of(gpu).kind_bytes(MemoryKind::Managed), SIZE as u64);
    unmap(kept, SIZE);
}

#[test]
fn xnack_on_reports_any_system_memory_and_strict_coverage_declines() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let ptr = managed(&[gpu], SIZE, 1);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    let system_memory = |snap: &Snap| snap.0.as_ref().is_ok_and(|s| s.not_covered().system_memory);
    assert!(!system_memory(&snap), "XNACK off: nothing to report");
    drop(snap);
    sim.set_mode(Mode::Xnack, true);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert!(system_memory(&snap));
    drop(snap);
    kernel_replay::set_coverage(Coverage::Strict);
    assert_eq!(Snap::of(gpu).reason(), Some(DeclineReason::UncoveredMemory));
    kernel_replay::set_coverage(Coverage::Warn);
    sim.set_mode(Mode::Xnack, false);
    unmap(ptr, SIZE);
}

#[test]
fn with_xnack_a_restore_of_pages_resident_on_the_host_pulls_them_to_the_gpu() {
    // What the library cannot avoid: pages the kernel never touched sit on
    // the host, and a GPU with AGENT_ACCESSIBLE reading them under XNACK
    // faults them over. Pages the kernel touched (resident on the GPU) do
    // not move (see the first test).
    let sim = session(1);
    let gpu = sim.gpu(0);
    if is_baseline() {
        return;
    }
    sim.set_mode(Mode::Xnack, true);
    let ptr = managed(&[gpu], SIZE, 1);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert!(sim.count(Counter::SvmMigrations) > 0);
    assert_eq!(sim.svm_location(ptr), gpu);
    // IN_PLACE pages stay where they are.
    let in_place = map_anonymous(SIZE, 3);
    assert_eq!(svm_set(in_place, SIZE, &[(IN_PLACE, gpu.handle)]), SUCCESS);
    drop(snap);
    sim.reset_counters();
    let snap = Snap::of(gpu);
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), 2 * SIZE as u64);
    assert!(snap.restore_all());
    assert_eq!(sim.count(Counter::SvmMigrations), 0);
    assert_eq!(sim.svm_location(in_place), sim.cpu());
    sim.set_mode(Mode::Xnack, false);
    drop(snap);
    unmap(ptr, SIZE);
    unmap(in_place, SIZE);
}

/// ROCm 7.x: managed memory is a NO_REGISTER reservation, freed with
/// `hsa_amd_vmem_address_free`: retired before the runtime unmaps it.
#[cfg(hsa_vmem)]
#[test]
fn freed_through_vmem_address_free_it_is_retired_before_the_runtime_frees_it() {
    use kernel_replay::hsa::sys::hsa_amd_pointer_info_t;
    let sim = session(1);
    let gpu = sim.gpu(0);
    // HSA_AMD_VMEM_ADDRESS_NO_REGISTER (7.x headers; 1 << 0).
    let mut va = std::ptr::null_mut();
    // SAFETY: the runtime's own table; a writable out-parameter.
    let status = unsafe {
        (*amd_table())
            .hsa_amd_vmem_address_reserve_fn
            .expect("reserve entry")(&mut va, SIZE, 0, 1)
    };
    assert_eq!(status, SUCCESS);
    let va: *mut u8 = va.cast();
    let mut info = hsa_amd_pointer_info_t {
        size: std::mem::size_of::<hsa_amd_pointer_info_t>() as u32,
        ..Default::default()
    };
    // SAFETY: a sized struct, no agent list.
    unsafe {
        (*amd_table())
            .hsa_amd_pointer_info_fn
            .expect("pointer info")(
            va.cast(),
            &mut info,
            None,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if !std::ptr::eq(info.hostBaseAddress.cast::<u8>(), va) {
        // Headers before 7.x: no NO_REGISTER flag, a plain reservation.
        assert_eq!(address_free(va, SIZE), SUCCESS);
        return;
    }
    fill(va, SIZE, 1);
    assert_eq!(svm_set(va, SIZE, &[(ACCESSIBLE, gpu.handle)]), SUCCESS);
    let snap = Snap::of(gpu);
    if is_baseline() {
        assert_eq!(snap.not_covered(MemoryKind::Managed), SIZE as u64);
        drop(snap);
        assert_eq!(address_free(va, SIZE), SUCCESS);
        return;
    }
    assert_eq!(snap.kind_bytes(MemoryKind::Managed), SIZE as u64);
    // A free the runtime refuses (not the reservation's size) keeps it.
    assert_ne!(address_free(va, SIZE + 4096), SUCCESS);
    fill(va, SIZE, 9);
    assert!(snap.restore_all());
    assert!(all(va, SIZE, 1));
    assert_eq!(address_free(va, SIZE), SUCCESS);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (0, 1));
    assert_eq!(sim.count(Counter::CopyViolations), 0);
    drop(snap);
    assert_eq!(Snap::of(gpu).kind_bytes(MemoryKind::Managed), 0);
}
