//! The library's own kernels on the software runtime, which loads the
//! embedded gfx942 code object, takes the AQL dispatches on its queues and
//! runs the same kernel source on the CPU: scatter copies, dirty-block
//! restore, incremental snapshots, a tool's batch copy, fallbacks to
//! copies, and verify mode.
//!
//! Each test sets the strategy it tests and puts `Auto` back, so the other
//! tests of this binary see the process's default.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use hsa_sim::SimSession;
use kernel_replay::{CopyDirection, CopyMethod, CopyRegion, StoragePolicy, Strategy};

/// Bytes per hashed block (`KR_BLOCK_BYTES`).
const BLOCK: usize = 4096;

/// A session with `strategy`, under the arena policies the kernels serve
/// (the baseline never uses them); `None` when this run forces another
/// policy that cannot.
fn kernel_session(strategy: Strategy) -> Option<KernelSession> {
    if is_baseline() || policy() == StoragePolicy::Pageable {
        return None;
    }
    let sim = session(1);
    kernel_replay::set_strategy(strategy);
    kernel_replay::set_verify(false);
    // The kernels go with batched copies (KERNEL_REPLAY_COPY=blocking turns
    // both off); the setting goes back with the session.
    kernel_replay::set_batched_copies(true);
    Some(KernelSession {
        _settings: Settings,
        sim,
    })
}

/// A session whose strategy and verify settings go back to the defaults
/// when it ends, while it still holds the runtime (fields drop in order).
struct KernelSession {
    _settings: Settings,
    sim: SimSession,
}

impl std::ops::Deref for KernelSession {
    type Target = SimSession;
    fn deref(&self) -> &SimSession {
        &self.sim
    }
}

struct Settings;
impl Drop for Settings {
    fn drop(&mut self) {
        kernel_replay::set_strategy(Strategy::Auto);
        kernel_replay::set_verify(false);
        kernel_replay::set_batch_copy(None);
        let blocking = std::env::var("KERNEL_REPLAY_COPY").is_ok_and(|v| v.trim() == "blocking");
        kernel_replay::set_batched_copies(!blocking);
    }
}

fn counters() -> kernel_replay::Counters {
    kernel_replay::stats().counters
}

/// `count` buffers of `size` bytes, buffer i filled with byte i + 1.
fn buffers(sim: &SimSession, count: usize, size: usize) -> Vec<*mut u8> {
    (0..count)
        .map(|i| device_buffer(sim, sim.gpu(0), size, (i + 1) as u8))
        .collect()
}

#[test]
fn many_small_regions_go_in_one_scatter_dispatch_each_way() {
    let Some(sim) = kernel_session(Strategy::Scatter) else {
        return;
    };
    let regions = buffers(&sim.sim, 300, 4096);
    let before = counters();
    let dispatched = sim.dispatch_count(Some("kr_scatter_copy"));
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    assert_eq!(
        sim.dispatch_count(Some("kr_scatter_copy")),
        dispatched + 1,
        "the capture is one dispatch"
    );
    for (i, &p) in regions.iter().enumerate() {
        fill(p, 4096, 0xA0 ^ i as u8);
    }
    let copies_before = copies(&sim.sim);
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (300, 0));
    assert_eq!(report.device.method, CopyMethod::Scatter);
    assert_eq!(report.device.regions, 300);
    assert!(!report.device.fell_back);
    assert_eq!(sim.dispatch_count(Some("kr_scatter_copy")), dispatched + 2);
    assert_eq!(
        copies(&sim.sim),
        copies_before,
        "no runtime copy was needed"
    );
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, 4096, (i + 1) as u8), "region {i} restored");
    }
    assert_eq!(counters().scatter_dispatches - before.scatter_dispatches, 2);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn a_large_region_is_split_into_records_and_restored_whole() {
    let Some(sim) = kernel_session(Strategy::Scatter) else {
        return;
    };
    // 1 MiB + 3 bytes: five records of at most 256 KiB, the last one short.
    let size = (1 << 20) + 3;
    let p = device_buffer(&sim.sim, sim.gpu(0), size, 0);
    for i in 0..size {
        // SAFETY: inside the buffer.
        unsafe { *p.add(i) = (i % 251) as u8 };
    }
    let expected = bytes(p, size);
    let snap = Snap::of(sim.gpu(0));
    fill(p, size, 0xEE);
    assert!(snap.restore_all());
    assert_eq!(bytes(p, size), expected);
}

#[test]
fn dirty_blocks_restore_only_what_a_pass_wrote() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    // Region sizes around the block size, so partial last blocks are in.
    let sizes = [BLOCK, 3 * BLOCK + 5, 1, 2 * BLOCK, 10 * BLOCK - 1];
    let regions: Vec<*mut u8> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| device_buffer(&sim.sim, sim.gpu(0), size, 0x30 + i as u8))
        .collect();
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    let before = counters();
    // Write one byte in block 2 of region 1 (its partial tail block is 3),
    // the only byte of region 2, and bytes in blocks 0 and 9 of region 4.
    // SAFETY: each inside its buffer.
    unsafe {
        *regions[1].add(3 * BLOCK + 4) ^= 0xFF;
        *regions[2].add(0) ^= 0xFF;
        *regions[4].add(7) ^= 0xFF;
        *regions[4].add(9 * BLOCK + 100) ^= 0xFF;
    }
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (5, 0));
    assert_eq!(report.device.method, CopyMethod::DirtyBlocks);
    let total_blocks: u64 = sizes.iter().map(|s| s.div_ceil(BLOCK) as u64).sum();
    assert_eq!(report.device.blocks_compared, total_blocks);
    assert_eq!(report.device.blocks_copied, 4, "exactly the blocks written");
    for (i, (&p, &size)) in regions.iter().zip(&sizes).enumerate() {
        assert!(all(p, size, 0x30 + i as u8), "region {i} restored");
    }
    // Nothing written since: nothing to copy.
    let again = snap.restore();
    assert_eq!(again.device.blocks_copied, 0);
    let after = counters();
    assert_eq!(
        after.dirty_block_dispatches - before.dirty_block_dispatches,
        2
    );
    assert_eq!(after.blocks_copied - before.blocks_copied, 4);
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn dirty_blocks_never_touch_a_freed_region_or_its_reused_address() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    let gpu = sim.gpu(0);
    let stays = device_buffer(&sim.sim, gpu, 2 * BLOCK, 0x11);
    let goes = device_buffer(&sim.sim, gpu, 2 * BLOCK, 0x22);
    let snap = Snap::of(gpu);
    assert_eq!(snap.regions(), 2);
    fill(stays, 2 * BLOCK, 0x98);
    assert_eq!(pool_free(goes), SUCCESS);
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    let reused = pool_allocate(pool, 2 * BLOCK, 0).unwrap();
    assert_eq!(reused, goes, "the runtime handed the freed address back");
    fill(reused, 2 * BLOCK, 0x99);

    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert!(all(stays, 2 * BLOCK, 0x11));
    assert!(
        all(reused, 2 * BLOCK, 0x99),
        "the new owner's data is intact"
    );
    assert_eq!(
        report.device.blocks_compared, 2,
        "the freed region's blocks left the table"
    );
    // Later restores keep it out too.
    fill(reused, 2 * BLOCK, 0x77);
    let again = snap.restore();
    assert_eq!(again.skipped_not_live, 1);
    assert!(all(reused, 2 * BLOCK, 0x77));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert!(sim.quarantine_intact());
}

#[test]
fn without_a_code_object_for_the_agent_copies_are_used() {
    let Some(sim) = kernel_session(Strategy::Scatter) else {
        return;
    };
    let gpu = sim.gpu(0);
    assert!(sim.set_agent_isa(gpu, Some("amdgcn-amd-amdhsa--gfx600")));
    let regions = buffers(&sim.sim, 100, 4096);
    let dispatched = sim.dispatch_count(None);
    let snap = Snap::of(gpu);
    for &p in &regions {
        fill(p, 4096, 0);
    }
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (100, 0));
    assert_eq!(report.device.method, CopyMethod::Copies);
    assert_eq!(sim.dispatch_count(None), dispatched, "no kernel ran");
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, 4096, (i + 1) as u8));
    }
}

#[test]
fn a_queue_the_runtime_refuses_falls_back_to_copies() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    sim.inject(hsa_sim::Fault::NextQueueCreations, 0, 1);
    let regions = buffers(&sim.sim, 10, BLOCK);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    for &p in &regions {
        fill(p, BLOCK, 0);
    }
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (10, 0));
    assert_eq!(report.device.method, CopyMethod::Copies);
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, BLOCK, (i + 1) as u8));
    }
}

#[test]
fn a_faulting_dispatch_hands_its_regions_to_the_copies() {
    let Some(sim) = kernel_session(Strategy::Scatter) else {
        return;
    };
    let regions = buffers(&sim.sim, 80, 4096);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    for &p in &regions {
        fill(p, 4096, 0);
    }
    let before = counters();
    sim.inject(hsa_sim::Fault::NextDispatches, 0, 1);
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (80, 0));
    assert!(report.device.fell_back);
    assert_eq!(counters().kernel_fallbacks - before.kernel_fallbacks, 1);
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, 4096, (i + 1) as u8), "region {i} restored by copies");
    }
    // The faulted queue is not used again; copies keep restoring.
    for &p in &regions {
        fill(p, 4096, 0);
    }
    let again = snap.restore();
    assert_eq!((again.restored, again.failed), (80, 0));
    assert!(all(regions[0], 4096, 1));
}

#[test]
fn a_capture_whose_dispatch_faults_restores_with_copies() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    let regions = buffers(&sim.sim, 8, 2 * BLOCK);
    sim.inject(hsa_sim::Fault::NextDispatches, 0, 1);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok(), "the copies captured what the kernel could not");
    for &p in &regions {
        fill(p, 2 * BLOCK, 0);
    }
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (8, 0));
    assert_eq!(
        report.device.method,
        CopyMethod::Copies,
        "its hashes are not trusted"
    );
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, 2 * BLOCK, (i + 1) as u8));
    }
}

#[test]
fn verify_mode_compares_every_byte_after_a_restore() {
    for strategy in [Strategy::Copies, Strategy::Scatter, Strategy::DirtyBlocks] {
        let Some(sim) = kernel_session(strategy) else {
            return;
        };
        kernel_replay::set_verify(true);
        let regions = buffers(&sim.sim, 70, 3000);
        let snap = Snap::of(sim.gpu(0));
        for &p in regions.iter().step_by(3) {
            fill(p, 3000, 0x5A);
        }
        let before = counters();
        let report = snap.restore();
        let verified = report
            .verify
            .unwrap_or_else(|| panic!("{strategy:?}: verify mode checks the restore"));
        assert_eq!(verified.regions, 70, "{strategy:?}");
        assert_eq!(verified.mismatched_regions, 0, "{strategy:?}");
        assert!(report.complete());
        let after = counters();
        assert_eq!(after.verified_restores - before.verified_restores, 1);
        assert_eq!(
            after.verify_mismatched_bytes,
            before.verify_mismatched_bytes
        );
    }
}

#[test]
fn verify_mode_counts_a_restore_that_left_bytes_wrong() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    kernel_replay::set_verify(true);
    let gpu = sim.gpu(0);
    let p = device_buffer(&sim.sim, gpu, 2 * BLOCK, 0x42);
    let snap = Snap::of(gpu);
    // A write the runtime's copies cannot see: the copy into this address
    // fails, and the dispatch faults, so nothing restores it.
    fill(p, 2 * BLOCK, 0x43);
    sim.inject(hsa_sim::Fault::NextDispatches, 0, 1);
    sim.inject(hsa_sim::Fault::CopiesInto, p as u64, 0);
    let before = counters();
    let report = snap.restore();
    sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
    let verified = report.verify.expect("verify mode checks the restore");
    assert_eq!(verified.mismatched_regions, 1);
    assert_eq!(verified.mismatched_bytes, (2 * BLOCK) as u64);
    assert!(!report.complete());
    let after = counters();
    assert_eq!(
        after.verify_mismatched_regions - before.verify_mismatched_regions,
        1
    );
}

#[test]
fn auto_takes_dirty_blocks_for_a_large_pinned_footprint_and_copies_for_a_small_one() {
    let Some(sim) = kernel_session(Strategy::Auto) else {
        return;
    };
    let _pinned = PolicyGuard::set(StoragePolicy::Pinned);
    // 64 MiB in two regions: dirty blocks.
    let big: Vec<*mut u8> = (0..2)
        .map(|i| device_buffer(&sim.sim, sim.gpu(0), 32 << 20, 0x60 + i))
        .collect();
    let snap = Snap::of(sim.gpu(0));
    assert_eq!(snap.tier_bytes(kernel_replay::Tier::Pinned), 64 << 20);
    // SAFETY: inside the buffer.
    unsafe { *big[1].add(12345) ^= 1 };
    let report = snap.restore();
    assert_eq!(report.device.method, CopyMethod::DirtyBlocks);
    assert_eq!(report.device.blocks_copied, 1);
    assert!(all(big[1], 32 << 20, 0x61));
    drop(snap);
    for &p in &big {
        assert_eq!(pool_free(p), SUCCESS);
    }
    // One small region: copies.
    let small = device_buffer(&sim.sim, sim.gpu(0), 1 << 20, 0x70);
    let snap = Snap::of(sim.gpu(0));
    fill(small, 1 << 20, 0);
    let report = snap.restore();
    assert_eq!(report.device.method, CopyMethod::Copies);
    assert!(all(small, 1 << 20, 0x70));
}

/// The snapshot inside a `Snap` that must have succeeded.
fn taken(snap: &Snap) -> &kernel_replay::Snapshot {
    snap.0.as_ref().expect("the snapshot succeeded")
}

/// Regions of mixed sizes (partial last blocks included), region i filled
/// with 0x30 + i.
fn mixed_regions(sim: &SimSession) -> (Vec<*mut u8>, Vec<usize>) {
    let sizes = vec![BLOCK, 3 * BLOCK + 5, 1, 2 * BLOCK, 10 * BLOCK - 1];
    let regions = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| device_buffer(sim, sim.gpu(0), size, 0x30 + i as u8))
        .collect();
    (regions, sizes)
}

/// Overwrites every region with `byte`, restores `snap`, and checks each
/// region is back to what `mixed_regions` filled it with.
fn assert_restores_mixed(snap: &Snap, regions: &[*mut u8], sizes: &[usize], byte: u8) {
    for (&p, &size) in regions.iter().zip(sizes) {
        fill(p, size, byte);
    }
    assert!(snap.restore_all());
    for (i, (&p, &size)) in regions.iter().zip(sizes).enumerate() {
        assert!(all(p, size, 0x30 + i as u8), "region {i}");
    }
}

fn contents(regions: &[*mut u8], sizes: &[usize]) -> Vec<Vec<u8>> {
    regions
        .iter()
        .zip(sizes)
        .map(|(&p, &s)| bytes(p, s))
        .collect()
}

#[test]
fn consecutive_snapshots_of_the_same_regions_copy_only_changed_blocks() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    let (regions, sizes) = mixed_regions(&sim.sim);
    let total_blocks: u64 = sizes.iter().map(|s| s.div_ceil(BLOCK) as u64).sum();
    let before = counters();
    let first = Snap::of(sim.gpu(0));
    assert_eq!(taken(&first).copy_method(), CopyMethod::DirtyBlocks);
    assert!(!taken(&first).incremental(), "nothing to start from");
    assert_eq!(
        counters().blocks_copied - before.blocks_copied,
        total_blocks,
        "a full capture copies every block, and counts each once"
    );
    drop(first);

    // The next dispatch writes three blocks; the next snapshot copies them
    // and nothing else.
    // SAFETY: each inside its buffer.
    unsafe {
        *regions[1].add(2 * BLOCK + 1) ^= 0x0F;
        *regions[2].add(0) ^= 0x0F;
        *regions[4].add(9 * BLOCK) ^= 0x0F;
    }
    let expected = contents(&regions, &sizes);
    let before = counters();
    let second = Snap::of(sim.gpu(0));
    assert!(taken(&second).incremental());
    let after = counters();
    assert_eq!(
        after.incremental_snapshots - before.incremental_snapshots,
        1
    );
    assert_eq!(after.blocks_compared - before.blocks_compared, total_blocks);
    assert_eq!(after.blocks_copied - before.blocks_copied, 3);

    // What it holds is the whole state at its capture, unchanged blocks
    // included: every block written since comes back.
    for &p in &regions {
        // SAFETY: inside the buffer (every region has a byte 0).
        unsafe { *p ^= 0xFF };
    }
    fill(regions[4], sizes[4], 0);
    let report = second.restore();
    assert_eq!((report.restored, report.failed), (5, 0));
    assert_eq!(contents(&regions, &sizes), expected);
    drop(second);

    // Verify mode checks an incremental capture byte by byte as well.
    kernel_replay::set_verify(true);
    let before = counters();
    let third = Snap::of(sim.gpu(0));
    assert!(taken(&third).incremental());
    let after = counters();
    assert_eq!(after.verified_captures - before.verified_captures, 1);
    assert_eq!(
        after.verify_mismatched_bytes,
        before.verify_mismatched_bytes
    );
    assert_eq!(
        after.blocks_copied - before.blocks_copied,
        0,
        "nothing changed"
    );
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
}

#[test]
fn an_arena_another_snapshot_wrote_in_between_is_captured_in_full() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    let (regions, sizes) = mixed_regions(&sim.sim);
    let original = contents(&regions, &sizes);
    drop(Snap::of(sim.gpu(0)));
    // A snapshot with copies takes the retained arenas and writes other
    // bytes into them; the block table's hashes no longer describe them.
    kernel_replay::set_strategy(Strategy::Copies);
    for (&p, &size) in regions.iter().zip(&sizes) {
        fill(p, size, 0xC1);
    }
    let between = Snap::of(sim.gpu(0));
    assert_eq!(taken(&between).copy_method(), CopyMethod::Copies);
    drop(between);
    // Back to the first content, whose hashes the table still holds: an
    // incremental capture would find nothing changed and keep 0xC1.
    kernel_replay::set_strategy(Strategy::DirtyBlocks);
    for (&p, bytes) in regions.iter().zip(&original) {
        // SAFETY: the buffer holds bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len()) };
    }
    let snap = Snap::of(sim.gpu(0));
    assert!(!taken(&snap).incremental());
    for (&p, &size) in regions.iter().zip(&sizes) {
        fill(p, size, 0x00);
    }
    assert!(snap.restore_all());
    assert_eq!(contents(&regions, &sizes), original);
}

#[test]
fn a_changed_region_list_or_a_released_arena_means_a_full_capture() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    let (regions, sizes) = mixed_regions(&sim.sim);
    drop(Snap::of(sim.gpu(0)));
    assert!(taken(&Snap::of(sim.gpu(0))).incremental());
    // One more region: the layout changed.
    let extra = device_buffer(&sim.sim, sim.gpu(0), BLOCK, 0x77);
    let snap = Snap::of(sim.gpu(0));
    assert!(!taken(&snap).incremental());
    fill(extra, BLOCK, 0);
    assert!(snap.restore_all());
    assert!(all(extra, BLOCK, 0x77));
    drop(snap);
    // A region moved (freed, the same size allocated elsewhere): as many
    // blocks as before, other pairs.
    assert!(taken(&Snap::of(sim.gpu(0))).incremental());
    assert_eq!(pool_free(extra), SUCCESS);
    let moved = device_buffer(&sim.sim, sim.gpu(0), BLOCK, 0x78);
    assert_ne!(moved, extra);
    let snap = Snap::of(sim.gpu(0));
    assert!(!taken(&snap).incremental());
    fill(moved, BLOCK, 0);
    assert!(snap.restore_all());
    assert!(all(moved, BLOCK, 0x78));
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    drop(snap);
    // The retained arenas released: fresh ones hold nothing yet.
    kernel_replay::trim_retained();
    let snap = Snap::of(sim.gpu(0));
    assert!(!taken(&snap).incremental());
    assert_restores_mixed(&snap, &regions, &sizes, 0);
    drop(snap);
    // A snapshot held while the next is taken keeps its arenas: the next
    // gets new ones and captures in full.
    let held = Snap::of(sim.gpu(0));
    assert!(taken(&held).incremental());
    assert!(!taken(&Snap::of(sim.gpu(0))).incremental());
}

#[test]
fn a_capture_that_fell_back_to_copies_is_not_a_base_for_the_next() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    let (regions, sizes) = mixed_regions(&sim.sim);
    drop(Snap::of(sim.gpu(0)));
    sim.inject(hsa_sim::Fault::NextDispatches, 0, 1);
    let faulted = Snap::of(sim.gpu(0));
    assert_eq!(taken(&faulted).copy_method(), CopyMethod::Copies);
    drop(faulted);
    // The table's hashes may be half-updated: the next capture is full.
    let snap = Snap::of(sim.gpu(0));
    assert!(!taken(&snap).incremental());
    assert_restores_mixed(&snap, &regions, &sizes, 0xEE);
}

/// What a test's batch-copy function saw: per call, the direction and the
/// regions.
type Calls = Arc<Mutex<Vec<(CopyDirection, Vec<CopyRegion>)>>>;

/// Registers a batch-copy function that records its calls and copies with
/// the CPU (the software runtime's device memory is host memory), or fails
/// without copying.
fn register_tool_copy(fail: bool) -> Calls {
    let calls: Calls = Arc::default();
    let seen = calls.clone();
    kernel_replay::set_batch_copy(Some(Arc::new(
        move |_agent, regions: &[CopyRegion], direction| {
            seen.lock().unwrap().push((direction, regions.to_vec()));
            if fail {
                return Err(kernel_replay::hsa::HSA_STATUS_ERROR);
            }
            for r in regions {
                // SAFETY: the library hands over regions it owns or has
                // checked live, `size` bytes each side.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        r.src as *const u8,
                        r.dst as *mut u8,
                        r.size as usize,
                    )
                };
            }
            Ok(())
        },
    )));
    calls
}

#[test]
fn a_registered_batch_copy_moves_the_regions_instead_of_the_kernels() {
    let Some(sim) = kernel_session(Strategy::Auto) else {
        return;
    };
    let calls = register_tool_copy(false);
    let regions = buffers(&sim.sim, 10, 3000);
    let before = counters();
    let dispatched = sim.dispatch_count(None);
    let copies_before = copies(&sim.sim);
    let snap = Snap::of(sim.gpu(0));
    assert_eq!(taken(&snap).copy_method(), CopyMethod::BatchCopy);
    {
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 1, "one call for the whole capture");
        assert_eq!(calls[0].0, CopyDirection::Capture);
        assert_eq!(calls[0].1.len(), 10);
        let mut sources: Vec<u64> = calls[0].1.iter().map(|r| r.src).collect();
        sources.sort_unstable();
        let mut expected: Vec<u64> = regions.iter().map(|&p| p as u64).collect();
        expected.sort_unstable();
        assert_eq!(sources, expected, "each region once, read from the device");
        assert!(calls[0].1.iter().all(|r| r.size == 3000));
    }
    for &p in &regions {
        fill(p, 3000, 0);
    }
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (10, 0));
    assert_eq!(report.device.method, CopyMethod::BatchCopy);
    for (i, &p) in regions.iter().enumerate() {
        assert!(
            all(p, 3000, (i + 1) as u8),
            "region {i} restored by the tool"
        );
    }
    assert_eq!(calls.lock().unwrap()[1].0, CopyDirection::Restore);
    assert_eq!(
        sim.dispatch_count(None),
        dispatched,
        "no kernel of ours ran"
    );
    assert_eq!(copies(&sim.sim), copies_before, "nor a runtime copy");
    let after = counters();
    assert_eq!(after.batch_copy_calls - before.batch_copy_calls, 2);
    assert_eq!(after.batch_copy_failures, before.batch_copy_failures);

    // The copies strategy keeps the runtime's copies; unregistered, the
    // kernels are back.
    kernel_replay::set_strategy(Strategy::Copies);
    assert_eq!(
        taken(&Snap::of(sim.gpu(0))).copy_method(),
        CopyMethod::Copies
    );
    kernel_replay::set_strategy(Strategy::Scatter);
    kernel_replay::set_batch_copy(None);
    assert_eq!(
        taken(&Snap::of(sim.gpu(0))).copy_method(),
        CopyMethod::Scatter
    );
    assert_eq!(calls.lock().unwrap().len(), 2);
    assert_eq!(kernel_replay::strategy(), Strategy::Scatter);
}

#[test]
fn a_failing_batch_copy_hands_its_regions_to_the_copies() {
    let Some(sim) = kernel_session(Strategy::Auto) else {
        return;
    };
    let calls = register_tool_copy(true);
    let regions = buffers(&sim.sim, 6, BLOCK);
    let before = counters();
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok(), "the library copied what the tool did not");
    for &p in &regions {
        fill(p, BLOCK, 0);
    }
    let report = snap.restore();
    assert_eq!((report.restored, report.failed), (6, 0));
    assert!(report.device.fell_back);
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, BLOCK, (i + 1) as u8), "region {i}");
    }
    assert_eq!(calls.lock().unwrap().len(), 2);
    let after = counters();
    assert_eq!(after.batch_copy_calls - before.batch_copy_calls, 2);
    assert_eq!(after.batch_copy_failures - before.batch_copy_failures, 2);
}

#[test]
fn a_batch_copy_may_use_the_wrapped_async_copy_on_its_own_thread() {
    let Some(sim) = kernel_session(Strategy::Auto) else {
        return;
    };
    let _device = PolicyGuard::set(StoragePolicy::Device);
    let gpu = sim.gpu(0);
    // The tool copies with hsa_amd_memory_async_copy through the table the
    // library wrapped: tracked memory, so the fence sees each copy, inside
    // the library's own window.
    kernel_replay::set_batch_copy(Some(Arc::new(
        move |_agent, regions: &[CopyRegion], _direction| {
            let done = signal_create(regions.len() as i64);
            for r in regions {
                let status = async_copy(
                    r.dst as *mut u8,
                    gpu,
                    r.src as *const u8,
                    gpu,
                    r.size as usize,
                    &[],
                    done,
                );
                if status != SUCCESS {
                    return Err(status);
                }
            }
            let left = signal_wait_below(done, 1, std::time::Duration::from_secs(10));
            signal_destroy(done);
            if left == 0 {
                Ok(())
            } else {
                Err(kernel_replay::hsa::HSA_STATUS_ERROR)
            }
        },
    )));
    let regions = buffers(&sim.sim, 4, BLOCK);
    let before = counters();
    let snap = Snap::of(gpu);
    assert_eq!(taken(&snap).copy_method(), CopyMethod::BatchCopy);
    for &p in &regions {
        fill(p, BLOCK, 0);
    }
    let report = snap.restore();
    assert!(!report.device.fell_back);
    for (i, &p) in regions.iter().enumerate() {
        assert!(all(p, BLOCK, (i + 1) as u8), "region {i}");
    }
    let after = counters();
    assert_eq!(after.batch_copy_failures, before.batch_copy_failures);
    assert!(after.fenced_copies - before.fenced_copies >= 8);
}

/// The buffer `freeing_iterator` frees on its next call (0: none).
static FREE_DURING_DISCOVERY: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// A tool's executable iterator that, once, frees a tracked buffer before
/// listing (a tool's iterator may run anything), then lists as the loader.
unsafe extern "C" fn freeing_iterator(
    callback: Option<kernel_replay::ExecutableCallback>,
    data: *mut std::ffi::c_void,
) -> kernel_replay::hsa::hsa_status_t {
    let buffer = FREE_DURING_DISCOVERY.swap(0, std::sync::atomic::Ordering::Relaxed);
    if buffer != 0 {
        assert_eq!(pool_free(buffer as *mut u8), SUCCESS);
    }
    // SAFETY: forwarded to the loader-style iterator.
    unsafe { sim_iterator().expect("the runtime's iterator")(callback, data) }
}

#[test]
fn a_region_freed_while_it_is_captured_leaves_the_plan_in_step() {
    let Some(sim) = kernel_session(Strategy::DirtyBlocks) else {
        return;
    };
    sim.set_mode(hsa_sim::Mode::AddressReuse, true);
    let gpu = sim.gpu(0);
    // Three regions in address order: the first is freed during the
    // capture, the second after it; the plan must still know where the
    // second one's blocks are, to take them out of the table.
    let mut made: Vec<*mut u8> = (0..3)
        .map(|_| device_buffer(&sim.sim, gpu, 3 * BLOCK, 0x11))
        .collect();
    made.sort();
    let (goes, freed_later, stays) = (made[0], made[1], made[2]);
    FREE_DURING_DISCOVERY.store(goes as usize, std::sync::atomic::Ordering::Relaxed);
    kernel_replay::set_executable_iterator(Some(freeing_iterator));
    let snap = Snap::of(gpu);
    kernel_replay::set_executable_iterator(None);
    assert!(snap.ok(), "{:?}", snap.reason());
    assert_eq!(snap.regions(), 2);
    fill(stays, 3 * BLOCK, 0x98);
    assert_eq!(pool_free(freed_later), SUCCESS);
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    let reused = pool_allocate(pool, 3 * BLOCK, 0).unwrap();
    assert_eq!(reused, freed_later, "the runtime handed the address back");
    fill(reused, 3 * BLOCK, 0x77);
    let report = snap.restore();
    assert_eq!((report.restored, report.skipped_not_live), (1, 1));
    assert!(all(stays, 3 * BLOCK, 0x11), "restored");
    assert!(
        all(reused, 3 * BLOCK, 0x77),
        "the new owner's data is intact"
    );
    assert_eq!(sim.count(hsa_sim::Counter::CopyViolations), 0);
    assert_eq!(pool_free(reused), SUCCESS);
    assert_eq!(pool_free(stays), SUCCESS);
}
