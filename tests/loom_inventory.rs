//! Model checks (loom) of the inventory's concurrency protocol: retire before
//! free, copies under the read lock after the generation check, and reinstate
//! on a failed free. loom runs each scenario under every interleaving its
//! memory model allows and reports any data race on the modelled memory.
//!
//! Run with: RUSTFLAGS="--cfg loom" cargo test --release --test loom_inventory
#![cfg(loom)]

use kernel_replay::memory_tracker::inventory::{Inventory, TrackedRegion};
use kernel_replay::memory_tracker::kind::MemoryKind;
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
    let generation = world
        .inventory
        .record(BASE, SIZE, AGENT, MemoryKind::Device);
    world.device.owner.store(generation, Relaxed);
    TrackedRegion {
        base: BASE,
        size: SIZE,
        generation,
        memory: MemoryKind::Device,
        owner: AGENT,
        shared: false,
        coarse: false,
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

// ---- locked host memory: one record for several locks ----------------------

/// The GPU the locked range is granted to (grant bit 1).
const GPU: u64 = 9;

/// `hsa_amd_memory_lock_to_pool` for one GPU through the wrapper: the
/// runtime counts the lock (`owner` holds the runtime's lock count here),
/// then the wrapper records or counts it.
fn lock(world: &World) {
    world.device.owner.fetch_add(1, Relaxed);
    world.inventory.lock(BASE, SIZE, AGENT, 1, false);
}

/// `hsa_amd_memory_unlock` through the wrapper (`locks.rs`): counted down
/// while other locks are held, retired before the runtime's last unlock.
fn unlock(world: &World) {
    world
        .inventory
        .unlock_then(BASE, || world.device.owner.fetch_sub(1, Relaxed), |_| true);
}

/// A restore of the locked range as the GPU's snapshot holds it.
fn restore_locked(world: &World, region: &TrackedRegion) -> bool {
    world
        .inventory
        .with_live(region, || {
            assert!(
                world.device.owner.load(Relaxed) > 0,
                "restore wrote host memory the runtime had unlocked"
            );
            // SAFETY (loom): as in restore.
            world.device.data.with_mut(|p| unsafe { *p = CAPTURED });
        })
        .is_some()
}

#[test]
fn two_racing_locks_are_both_counted_and_only_the_last_unlock_retires() {
    loom::model(|| {
        let w = world();
        let lockers: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || lock(&w))
            })
            .collect();
        for locker in lockers {
            locker.join().unwrap();
        }
        let mut regions = Vec::new();
        w.inventory
            .collect_agent(GPU, Some(1), &mut regions)
            .unwrap();
        assert_eq!(regions.len(), 1, "one record for the range");
        let region = regions[0];
        assert_eq!(region.memory, MemoryKind::Locked);
        let unlockers: Vec<_> = (0..2)
            .map(|_| {
                let w = w.clone();
                thread::spawn(move || unlock(&w))
            })
            .collect();
        restore_locked(&w, &region);
        for unlocker in unlockers {
            unlocker.join().unwrap();
        }
        assert_eq!(w.device.owner.load(Relaxed), 0);
        assert!(
            !restore_locked(&w, &region),
            "unlocked: never written again"
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

// ---- executables: admitted lazily, retired before the runtime unloads ------

use kernel_replay::memory_tracker::executables::{Executables, Identity};
use loom::sync::atomic::AtomicBool;
use loom::sync::Mutex;

const HANDLE: u64 = 0xE0;

/// The runtime's loader: its lock (held across the iterator's callbacks and
/// taken by destroy and load, as ROCr's), and the executable at `HANDLE`:
/// whether one is loaded, which load it is (a handle comes back for the next
/// executable), and its variable's storage.
struct Loader {
    lock: Mutex<()>,
    loaded: AtomicBool,
    incarnation: AtomicU64,
    variable: UnsafeCell<u64>,
}

struct Program {
    executables: Executables,
    loader: Loader,
}

fn program() -> Arc<Program> {
    let executables = Executables::new();
    executables.start_tracking_destroys();
    Arc::new(Program {
        executables,
        loader: Loader {
            lock: Mutex::new(()),
            loaded: AtomicBool::new(true),
            incarnation: AtomicU64::new(1),
            variable: UnsafeCell::new(0),
        },
    })
}

/// `hsa_executable_destroy` through the library's wrapper.
fn destroy(p: &Program, runtime_refuses: bool) {
    p.executables.retire_then_destroy(
        HANDLE,
        || {
            let _loader = p.loader.lock.lock().unwrap();
            if !runtime_refuses {
                p.loader.loaded.store(false, Relaxed);
            }
            !runtime_refuses
        },
        |ok| *ok,
    );
}

/// A new executable loaded at the same handle.
fn load_again(p: &Program) {
    let _loader = p.loader.lock.lock().unwrap();
    p.loader.incarnation.fetch_add(1, Relaxed);
    p.loader.loaded.store(true, Relaxed);
}

/// What a snapshot does with the executable: list it through the loader's
/// iterator (the registry identifies it inside the callback, under the
/// loader's lock), then copy its variable under the registry's read view.
/// Returns whether it copied.
fn snapshot_copies_variable(p: &Program) -> bool {
    let listed = {
        let _loader = p.loader.lock.lock().unwrap();
        p.loader.loaded.load(Relaxed).then(|| {
            (
                p.executables.identify(HANDLE),
                p.loader.incarnation.load(Relaxed),
            )
        })
    };
    let Some((Identity::Loaded(exe), incarnation)) = listed else {
        return false;
    };
    let view = p.executables.live_view();
    if !view.contains(exe) {
        return false;
    }
    assert!(
        p.loader.loaded.load(Relaxed) && p.loader.incarnation.load(Relaxed) == incarnation,
        "a copy reached an executable that is unloaded or another one"
    );
    // SAFETY (loom): a race with the loader's own use is reported by loom.
    p.loader.variable.with_mut(|v| unsafe { *v = CAPTURED });
    true
}

#[test]
fn an_executable_whose_destroy_has_begun_is_never_admitted_or_copied() {
    loom::model(|| {
        let p = program();
        let unloader = {
            let p = p.clone();
            thread::spawn(move || destroy(&p, false))
        };
        snapshot_copies_variable(&p);
        unloader.join().unwrap();
        assert!(!snapshot_copies_variable(&p), "nothing left to copy");
    });
}

#[test]
fn a_handle_loaded_again_is_a_new_executable_to_an_older_identity() {
    loom::model(|| {
        let p = program();
        let churn = {
            let p = p.clone();
            thread::spawn(move || {
                destroy(&p, false);
                load_again(&p);
            })
        };
        snapshot_copies_variable(&p);
        churn.join().unwrap();
        assert!(
            snapshot_copies_variable(&p),
            "the new executable is admitted"
        );
    });
}

#[test]
fn a_refused_destroy_leaves_the_executable_copyable() {
    loom::model(|| {
        let p = program();
        let unloader = {
            let p = p.clone();
            thread::spawn(move || destroy(&p, true))
        };
        snapshot_copies_variable(&p);
        unloader.join().unwrap();
        assert!(snapshot_copies_variable(&p));
    });
}
