//! Model checks (loom) of the inventory's concurrency protocol: retire before
//! free, copies under the read lock after the generation check, and reinstate
//! on a failed free. loom runs each scenario under every interleaving its
//! memory model allows and reports any data race on the modelled memory.
//!
//! Run with: RUSTFLAGS="--cfg loom" cargo test --release --test loom_inventory
#![cfg(loom)]

use kernel_replay::memory_tracker::inventory::{Inventory, TrackedRegion};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering::Relaxed};
use loom::sync::Arc;
use loom::thread;

const BASE: usize = 0x1000;
const SIZE: usize = 64;
const AGENT: u64 = 7;
const CAPTURED: u64 = 0xC0FFEE;
const NEW_OWNER_DATA: u64 = 0xBEEF;

/// The runtime's side of one allocation: which allocation (generation) owns
/// the memory now (0 once freed), and its contents. `owner` is relaxed on
/// purpose: only the inventory's lock may order it against the library.
struct Device {
    owner: AtomicU64,
    data: UnsafeCell<u64>,
}

struct World {
    inventory: Inventory,
    device: Device,
}

/// An application allocation through the wrapper: the runtime allocates,
/// then the wrapper records it.
fn allocate(world: &World) -> TrackedRegion {
    let generation = world.inventory.record(BASE, SIZE, AGENT);
    world.device.owner.store(generation, Relaxed);
    TrackedRegion {
        base: BASE,
        size: SIZE,
        generation,
    }
}

/// A free through the wrapper; `fails` models the runtime refusing it.
fn free(world: &World, fails: bool) {
    world.inventory.retire_then_free(
        BASE,
        || {
            if !fails {
                world.device.owner.store(0, Relaxed);
            }
            !fails
        },
        |ok| *ok,
    );
}

/// What restore does for one tracked region. Returns whether it wrote.
fn restore(world: &World, region: &TrackedRegion) -> bool {
    world
        .inventory
        .with_live(region, || {
            assert_eq!(
                world.device.owner.load(Relaxed),
                region.generation,
                "restore reached memory that is no longer the captured allocation"
            );
            // SAFETY (loom): a race with another access is reported by loom.
            world.device.data.with_mut(|p| unsafe { *p = CAPTURED });
        })
        .is_some()
}

/// What snap does for one tracked region. Returns whether it read.
fn capture(world: &World, region: &TrackedRegion) -> bool {
    world
        .inventory
        .with_live(region, || {
            assert_eq!(world.device.owner.load(Relaxed), region.generation);
            // SAFETY (loom): as above.
            world.device.data.with(|p| unsafe { *p });
        })
        .is_some()
}

fn world() -> Arc<World> {
    Arc::new(World {
        inventory: Inventory::new(),
        device: Device {
            owner: AtomicU64::new(0),
            data: UnsafeCell::new(0),
        },
    })
}

#[test]
fn restore_never_writes_memory_being_freed() {
    loom::model(|| {
        let w = world();
        let region = allocate(&w);
        let freer = {
            let w = w.clone();
            thread::spawn(move || free(&w, false))
        };
        restore(&w, &region);
        freer.join().unwrap();
        assert_eq!(w.device.owner.load(Relaxed), 0);
        assert!(
            !restore(&w, &region),
            "a freed allocation is never written again"
        );
    });
}

#[test]
fn a_reused_address_is_never_written_by_an_older_snapshot() {
    loom::model(|| {
        let w = world();
        let region = allocate(&w);
        let churn = {
            let w = w.clone();
            thread::spawn(move || {
                free(&w, false);
                let again = allocate(&w);
                // The new owner writes its data with no lock, as a kernel would.
                // SAFETY (loom): a race with restore's write is reported by loom.
                w.device.data.with_mut(|p| unsafe { *p = NEW_OWNER_DATA });
                again
            })
        };
        restore(&w, &region);
        let again = churn.join().unwrap();
        assert_ne!(again.generation, region.generation);
        // Whatever the interleaving, the new owner's data survives.
        assert_eq!(w.device.data.with(|p| unsafe { *p }), NEW_OWNER_DATA);
        assert!(!restore(&w, &region));
    });
}

#[test]
fn a_failed_free_keeps_the_allocation_restorable() {
    loom::model(|| {
        let w = world();
        let region = allocate(&w);
        let freer = {
            let w = w.clone();
            thread::spawn(move || free(&w, true))
        };
        // A restore concurrent with the failed free may be skipped (the entry
        // is briefly retired) but never writes anything but the allocation.
        restore(&w, &region);
        freer.join().unwrap();
        assert!(restore(&w, &region), "reinstated with the same generation");
        assert_eq!(w.device.data.with(|p| unsafe { *p }), CAPTURED);
    });
}

#[test]
fn capture_never_reads_memory_freed_or_reused_under_it() {
    loom::model(|| {
        let w = world();
        let region = allocate(&w);
        let churn = {
            let w = w.clone();
            thread::spawn(move || {
                free(&w, false);
                allocate(&w);
                // SAFETY (loom): a race with capture's read is reported by loom.
                w.device.data.with_mut(|p| unsafe { *p = NEW_OWNER_DATA });
            })
        };
        capture(&w, &region);
        churn.join().unwrap();
        assert!(!capture(&w, &region), "the old snapshot region is gone");
    });
}

// Snapshots and restores of the *same* agent at the same time are not part
// of the protocol: both hold the read lock, so a capture can read a region
// while a restore writes it (loom reports exactly that race). The replay
// window serialises them per agent, as rocprofiler-sdk does with its agent
// lock; the README states it.

/// What a batched restore does: one read view held across every region's
/// copy (the copies complete before the view is dropped).
fn restore_batch(world: &World, regions: &[TrackedRegion]) -> usize {
    let view = world.inventory.live_view();
    let mut written = 0;
    for region in regions {
        if view.contains(region) {
            assert_eq!(world.device.owner.load(Relaxed), region.generation);
            // SAFETY (loom): a race with another access is reported by loom.
            world.device.data.with_mut(|p| unsafe { *p = CAPTURED });
            written += 1;
        }
    }
    written
}

#[test]
fn a_batched_restore_never_writes_memory_freed_or_reused_under_it() {
    loom::model(|| {
        let w = world();
        let region = allocate(&w);
        let churn = {
            let w = w.clone();
            thread::spawn(move || {
                free(&w, false);
                allocate(&w);
                // SAFETY (loom): a race with the batch's write is reported.
                w.device.data.with_mut(|p| unsafe { *p = NEW_OWNER_DATA });
            })
        };
        restore_batch(&w, &[region, region]);
        churn.join().unwrap();
        assert_eq!(w.device.data.with(|p| unsafe { *p }), NEW_OWNER_DATA);
        assert_eq!(restore_batch(&w, &[region]), 0);
    });
}
