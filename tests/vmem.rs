//! Virtual-memory mappings (`hsa_amd_vmem_*`, ROCm 6.0+ headers) as tracked
//! regions: which mappings are replay state, when they become tracked, how
//! unmaps, access changes and aliases are handled, and that a restore stays
//! byte-exact and never writes an address that is no longer mapped.

#![cfg(hsa_vmem)]

mod common;

use common::*;
use hsa_sim::{Agent, PoolKind, SimSession};

/// One physical chunk (HIP's stream-ordered heap uses 32 MiB; the software
/// runtime commits memory only when touched, but tests fill what they map,
/// so they keep it small).
const CHUNK: usize = 64 << 10;

/// A handle of `size` bytes from `gpu`'s pool of `kind`, mapped at `va`.
fn map_new(sim: &SimSession, gpu: Agent, kind: PoolKind, va: *mut u8, size: usize) -> u64 {
    assert!(
        sim.vmem_supported(),
        "the runtime is built against the same headers"
    );
    let handle = handle_create(sim.pool(gpu, kind), size).expect("handle create");
    assert_eq!(map(va, size, handle), SUCCESS);
    handle
}

/// Read-write access for `gpu` and for the CPU (whose view the tests write
/// through, standing in for kernels).
fn grant(sim: &SimSession, gpu: Agent, va: *mut u8, size: usize) {
    assert_eq!(set_access(va, size, &[(gpu, RW), (sim.cpu(), RW)]), SUCCESS);
}

/// A reserved range of `chunks` chunks, each its own coarse-grained handle
/// of `gpu`, mapped and made accessible: a `hipMallocAsync`-style heap.
fn heap(sim: &SimSession, gpu: Agent, chunks: usize) -> (*mut u8, Vec<u64>) {
    let va = reserve(chunks * CHUNK).expect("reserve");
    let handles = (0..chunks)
        .map(|i| {
            // SAFETY: inside the reserved range.
            let chunk = unsafe { va.add(i * CHUNK) };
            let handle = map_new(sim, gpu, PoolKind::DeviceCoarse, chunk, CHUNK);
            grant(sim, gpu, chunk, CHUNK);
            fill(chunk, CHUNK, 0x10 + i as u8);
            handle
        })
        .collect();
    (va, handles)
}

fn footprint(gpu: Agent) -> (usize, u64) {
    let f = kernel_replay::estimate_footprint(agent(gpu));
    (f.regions, f.bytes)
}

fn at(va: *mut u8, chunk: usize) -> *mut u8 {
    // SAFETY: callers stay inside their reserved range.
    unsafe { va.add(chunk * CHUNK) }
}

#[test]
fn a_mapping_is_tracked_once_its_owner_may_write_it_and_restores_byte_exact() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    assert_eq!(
        footprint(gpu),
        (0, 0),
        "mapped, but no agent may use it yet"
    );

    grant(&sim, gpu, va, CHUNK);
    assert_eq!(footprint(gpu), (1, CHUNK as u64));
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);
    assert!(snap.ok());
    assert_eq!((snap.regions(), snap.bytes()), (1, CHUNK as u64));

    fill(va, CHUNK, 0x22);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (1, 0, 0)
    );
    assert!(all(va, CHUNK, 0x11));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn a_chunk_unmapped_while_a_snapshot_is_held_is_skipped_never_written() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (va, handles) = heap(&sim, gpu, 4);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 4);
    for i in 0..4 {
        fill(at(va, i), CHUNK, 0xEE);
    }

    // The heap gives chunk 2 back: unmapped and released.
    assert_eq!(unmap(at(va, 2), CHUNK), SUCCESS);
    assert_eq!(handle_release(handles[2]), SUCCESS);
    assert_eq!(footprint(gpu).0, 3);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live, report.failed),
        (3, 1, 0)
    );
    for i in [0, 1, 3] {
        assert!(all(at(va, i), CHUNK, 0x10 + i as u8), "chunk {i} restored");
    }
    assert_eq!(
        sim.count(hsa_sim::Counter::CopyViolations),
        0,
        "the unmapped chunk was never touched"
    );

    // Mapped again with another handle: another region, not the captured
    // one, so the old snapshot leaves it alone.
    map_new(&sim, gpu, PoolKind::DeviceCoarse, at(va, 2), CHUNK);
    grant(&sim, gpu, at(va, 2), CHUNK);
    fill(at(va, 2), CHUNK, 0x33);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (3, 1));
    assert!(all(at(va, 2), CHUNK, 0x33));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn one_handle_mapped_at_two_addresses_restores_both_views() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let first = reserve(CHUNK).unwrap();
    let second = reserve(CHUNK).unwrap();
    let handle = map_new(&sim, gpu, PoolKind::DeviceCoarse, first, CHUNK);
    assert_eq!(map(second, CHUNK, handle), SUCCESS);
    grant(&sim, gpu, first, CHUNK);
    grant(&sim, gpu, second, CHUNK);
    assert_eq!(footprint(gpu).0, 2, "two regions, the same bytes twice");

    fill(first, CHUNK, 0x44);
    assert!(all(second, CHUNK, 0x44), "the runtime aliases the views");
    let snap = Snap::of(gpu);
    fill(second, CHUNK, 0x55);
    assert_eq!(snap.restore().restored, 2);
    assert!(all(first, CHUNK, 0x44) && all(second, CHUNK, 0x44));

    // One view unmapped: the other is still restored, exactly.
    assert_eq!(unmap(first, CHUNK), SUCCESS);
    fill(second, CHUNK, 0x66);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert!(all(second, CHUNK, 0x44));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn a_partial_unmap_is_refused_and_the_mapping_stays_tracked() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);

    // ROCr unmaps whole mappings only.
    assert_ne!(unmap(va, CHUNK / 2), SUCCESS);
    assert_ne!(unmap(at(va, 0).wrapping_add(CHUNK / 2), CHUNK / 2), SUCCESS);
    assert_eq!(sim.count(hsa_sim::Counter::VmemMappings), 1);
    fill(va, CHUNK, 0x22);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live),
        (1, 0),
        "same generation"
    );
    assert!(all(va, CHUNK, 0x11));
}

#[test]
fn a_failed_unmap_leaves_the_mapping_tracked_with_its_generation() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (va, _) = heap(&sim, gpu, 2);
    let snap = Snap::of(gpu);
    sim.inject(hsa_sim::Fault::NthVmemUnmap, 0, 1);
    assert_ne!(unmap(at(va, 1), CHUNK), SUCCESS);
    fill(at(va, 1), CHUNK, 0x77);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (2, 0));
    assert!(all(at(va, 1), CHUNK, 0x11));
}

#[test]
fn a_failed_map_or_set_access_tracks_nothing_new() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(2 * CHUNK).unwrap();
    let handle = handle_create(sim.pool(gpu, PoolKind::DeviceCoarse), CHUNK).unwrap();
    sim.inject(hsa_sim::Fault::NthVmemMap, 0, 1);
    assert_ne!(map(va, CHUNK, handle), SUCCESS);
    assert_eq!(map(va, CHUNK, handle), SUCCESS);
    sim.inject(hsa_sim::Fault::NthVmemSetAccess, 0, 1);
    assert_ne!(
        set_access(va, CHUNK, &[(gpu, RW), (sim.cpu(), RW)]),
        SUCCESS
    );
    assert_eq!(footprint(gpu).0, 0);
    grant(&sim, gpu, va, CHUNK);
    assert_eq!(footprint(gpu).0, 1);

    // A failing set_access on a tracked mapping changes nothing: the mapping
    // keeps its generation, so a held snapshot still restores it.
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);
    sim.inject(hsa_sim::Fault::NthVmemSetAccess, 0, 1);
    assert_ne!(
        set_access(va, CHUNK, &[(gpu, NONE), (sim.cpu(), RW)]),
        SUCCESS
    );
    fill(va, CHUNK, 0x22);
    assert_eq!(snap.restore().restored, 1);
    assert!(all(va, CHUNK, 0x11));
}

#[test]
fn revoking_the_owner_retires_the_mapping_and_regranting_tracks_it_anew() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);

    assert_eq!(
        set_access(va, CHUNK, &[(gpu, NONE), (sim.cpu(), RW)]),
        SUCCESS
    );
    assert_eq!(get_access(va, gpu).unwrap_or(NONE), NONE);
    assert_eq!(footprint(gpu).0, 0, "no longer replay state");
    fill(va, CHUNK, 0x22);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (0, 1));
    assert!(
        all(va, CHUNK, 0x22),
        "not written while the owner had no access"
    );

    // Read-only for its owner: kernels cannot write it, nothing to restore.
    assert_eq!(
        set_access(va, CHUNK, &[(gpu, RO), (sim.cpu(), RW)]),
        SUCCESS
    );
    assert_eq!(footprint(gpu).0, 0);

    grant(&sim, gpu, va, CHUNK);
    assert_eq!(footprint(gpu).0, 1);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live),
        (0, 1),
        "a new generation: the old snapshot does not know it"
    );
    assert!(all(va, CHUNK, 0x22));
    let fresh = Snap::of(gpu);
    fill(va, CHUNK, 0x33);
    assert_eq!(fresh.restore().restored, 1);
    assert!(all(va, CHUNK, 0x22));
}

#[test]
fn a_later_descriptor_that_takes_the_owners_access_away_retires_the_mapping() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);

    // Two descriptors for the owner: the runtime applies them in order, so
    // the last one wins and the owner may no longer write the mapping.
    assert_eq!(
        set_access(va, CHUNK, &[(gpu, RW), (sim.cpu(), RW), (gpu, NONE)]),
        SUCCESS
    );
    assert_ne!(get_access(va, gpu), Ok(RW));
    assert_eq!(footprint(gpu), (0, 0), "no longer replay state");
    fill(va, CHUNK, 0x22);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (0, 1));
    assert!(
        all(va, CHUNK, 0x22),
        "not written while the owner had no access"
    );
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn granting_a_peer_keeps_the_mapping_exactly_when_the_runtime_keeps_the_owner() {
    let sim = session(2);
    let (gpu, peer) = (sim.gpu(0), sim.gpu(1));
    let va = reserve(CHUNK).unwrap();
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);

    // ROCm 6.0 - 6.2 replace the permissions (the owner loses its access);
    // 6.4 and later merge them (it keeps it). Either way the mapping is
    // tracked exactly when the runtime says its owner may still write it.
    assert_eq!(
        set_access(va, CHUNK, &[(peer, RW), (sim.cpu(), RW)]),
        SUCCESS
    );
    let owner_keeps = get_access(va, gpu) == Ok(RW);
    assert_eq!(footprint(gpu).0, owner_keeps as usize);
    assert_eq!(footprint(peer).0, 0, "owned by the handle's agent");
    fill(va, CHUNK, 0x22);
    let report = snap.restore();
    if owner_keeps {
        assert_eq!(report.restored, 1, "kept its generation");
        assert!(all(va, CHUNK, 0x11));
    } else {
        assert_eq!(report.skipped_not_live, 1);
        assert!(all(va, CHUNK, 0x22));
    }
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn one_set_access_over_contiguous_mappings_tracks_each_where_the_runtime_allows_it() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(3 * CHUNK).unwrap();
    for i in 0..3 {
        map_new(&sim, gpu, PoolKind::DeviceCoarse, at(va, i), CHUNK);
    }
    // ROCm 6.4+ accepts a range of contiguous mappings; 6.0 - 6.2 want one
    // mapping per call. Whatever the runtime accepted is tracked.
    let status = set_access(va, 3 * CHUNK, &[(gpu, RW), (sim.cpu(), RW)]);
    let expected = if status == SUCCESS { 3 } else { 0 };
    assert_eq!(footprint(gpu), (expected, (expected * CHUNK) as u64));
}

#[test]
fn fine_grained_and_inaccessible_mappings_are_reported_not_captured() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(3 * CHUNK).unwrap();
    map_new(&sim, gpu, PoolKind::DeviceFine, at(va, 0), CHUNK);
    grant(&sim, gpu, at(va, 0), CHUNK);
    map_new(&sim, gpu, PoolKind::DeviceCoarse, at(va, 1), CHUNK);
    assert_eq!(set_access(at(va, 1), CHUNK, &[(sim.cpu(), RW)]), SUCCESS);
    map_new(&sim, gpu, PoolKind::DeviceCoarse, at(va, 2), CHUNK);
    grant(&sim, gpu, at(va, 2), CHUNK);

    assert_eq!(footprint(gpu), (1, CHUNK as u64));
    let untracked = kernel_replay::untracked(agent(gpu));
    assert!(untracked.bytes.is_some());
    assert_eq!(
        (untracked.mappings, untracked.mapping_bytes),
        (2, 2 * CHUNK as u64)
    );
    assert_eq!(
        untracked.bytes,
        Some(2 * CHUNK as u64),
        "the runtime's in-use figure less the tracked mapping"
    );
    assert_eq!(kernel_replay::untracked(agent(gpu)).bytes, untracked.bytes);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 1);
    assert_eq!(stats2().untracked_device_bytes, 2 * CHUNK as u64);

    // Dropping what was tracked (as when the wrappers were found taken out)
    // drops the mappings the wrappers saw too.
    kernel_replay::testing::forget_tracked();
    let untracked = kernel_replay::untracked(agent(gpu));
    assert_eq!((untracked.mappings, untracked.mapping_bytes), (0, 0));
}

#[test]
fn mappings_made_while_tracking_was_off_are_not_captured() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    assert!(!kernel_replay::set_tracking(false));
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    kernel_replay::set_tracking(true);
    assert_eq!(footprint(gpu).0, 0);
    assert_eq!(kernel_replay::untracked(agent(gpu)).mappings, 1);
}

#[test]
fn a_handle_create_refused_for_memory_is_retried_after_releasing_arenas() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, PoolKind::DeviceCoarse);
    let free = device_nearly_full(&sim, gpu);

    let handle = handle_create(pool, free.after_release as usize)
        .expect("the retried handle create succeeds");
    let after = stats2();
    assert_eq!(
        after.application_retries,
        free.stats.application_retries + 1
    );
    assert_eq!(
        after.bytes_released_for_application,
        free.stats.bytes_released_for_application + free.arena
    );
    assert_eq!(kernel_replay::device_bytes_in_use(), 0);
    assert_eq!(handle_release(handle), SUCCESS);

    // A refusal the arenas cannot cure is the application's answer, untouched.
    assert!(handle_create(pool, 8 << 30).is_err());
    assert_eq!(stats2().application_retries, after.application_retries);
}

#[test]
fn the_vmem_wrappers_pass_the_runtimes_errors_through() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    // Map into nothing reserved, unmap what is not mapped, access to nothing.
    let mut outside = [0u8; 64];
    assert_ne!(map(outside.as_mut_ptr(), CHUNK, 1), SUCCESS);
    assert_ne!(unmap(va, CHUNK), SUCCESS);
    assert_ne!(set_access(va, CHUNK, &[(gpu, RW)]), SUCCESS);
    assert_eq!(footprint(gpu).0, 0);
    assert_eq!(address_free(va, CHUNK), SUCCESS);
    assert_eq!(sim.count(hsa_sim::Counter::VmemReservations), 0);
}

#[test]
fn a_mapping_unmapped_behind_the_wrappers_back_is_dropped_when_its_address_is_mapped_again() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let va = reserve(CHUNK).unwrap();
    let first = map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    fill(va, CHUNK, 0x11);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 1);

    // Unmapped through the runtime's own entry (an application calling the
    // runtime directly): the wrappers never see it.
    let runtime = hsa_sim::fresh_amd_ext_table();
    // SAFETY: a copy of the runtime's AMD table, as the runtime fills it.
    let runtime = unsafe {
        &*runtime
            .as_bytes()
            .as_ptr()
            .cast::<kernel_replay::hsa::AmdExtTable>()
    };
    // SAFETY: the runtime's unmap entry, on the range mapped above.
    let status = unsafe { runtime.hsa_amd_vmem_unmap_fn.expect("unmap entry")(va.cast(), CHUNK) };
    assert_eq!(status, SUCCESS);
    assert_eq!(handle_release(first), SUCCESS);

    // Mapped again through the wrappers: new memory, whatever the inventory
    // still held there.
    map_new(&sim, gpu, PoolKind::DeviceCoarse, va, CHUNK);
    grant(&sim, gpu, va, CHUNK);
    fill(va, CHUNK, 0x22);
    let report = snap.restore();
    assert_eq!(
        (report.restored, report.skipped_not_live),
        (0, 1),
        "the old snapshot's mapping is gone"
    );
    assert!(all(va, CHUNK, 0x22));
    let fresh = Snap::of(gpu);
    assert_eq!(fresh.regions(), 1, "the new mapping is tracked");
    fill(va, CHUNK, 0x33);
    assert!(fresh.restore_all());
    assert!(all(va, CHUNK, 0x22));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn unmapping_past_a_gap_leaves_the_mapping_before_the_gap_alone() {
    let sim = session(1);
    let gpu = sim.gpu(0);
    let (va, handles) = heap(&sim, gpu, 4);
    // Chunk 1 goes first, then chunk 2: chunk 0 now ends before the range.
    for i in [1, 2] {
        assert_eq!(unmap(at(va, i), CHUNK), SUCCESS);
        assert_eq!(handle_release(handles[i]), SUCCESS);
    }
    assert_eq!(footprint(gpu), (2, 2 * CHUNK as u64), "chunks 0 and 3");
    let untracked = kernel_replay::untracked(agent(gpu));
    assert_eq!(
        (untracked.mappings, untracked.mapping_bytes),
        (0, 0),
        "an unmapped chunk is no longer noted"
    );
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 2);
    fill(at(va, 0), CHUNK, 0xEE);
    assert!(snap.restore_all());
    assert!(all(at(va, 0), CHUNK, 0x10));
}
