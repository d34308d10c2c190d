//! Hand-written op sequences: one per area the fuzzer covers, written into
//! the starting corpus (`seed-*`, by `write_seed_corpus` in
//! `tests/seeded.rs`), and run by the seeded test.

use crate::ops::Fault::*;
use crate::ops::Op::{self, *};
use crate::ops::Perm::{Absent, None as NoAccess, Ro, Rw};
use crate::ops::PoolSel::*;
use crate::ops::{Access, CopyFault, CopyKind, Perm};

fn alloc(agent: u8, size: u8) -> Op {
    Allocate {
        agent,
        pool: DeviceCoarse,
        size,
        executable: false,
        via_region: false,
    }
}

fn mutate(index: u8, byte: u8) -> Op {
    Mutate {
        index,
        offset: 0,
        len: 0,
        byte,
    }
}

/// A new one-chunk handle of GPU `agent`'s coarse pool mapped at reserved
/// chunk `at`, read-write for its owner and the CPU.
fn map_new(agent: u8, at: u8) -> Op {
    VmemMapNew {
        agent,
        fine: false,
        chunks: 0,
        at,
        access: Some(access(Rw, Absent, Rw)),
    }
}

fn access(owner: Perm, peer: Perm, cpu: Perm) -> Access {
    Access {
        owner,
        peer,
        cpu,
        owner_again: Absent,
    }
}

fn write_mapping(mapping: u8, byte: u8) -> Op {
    WriteMapping {
        mapping,
        offset: 0,
        len: 0,
        byte,
    }
}

fn set_access(mapping: u8, access: Access) -> Op {
    VmemSetAccess {
        mapping,
        span: 0,
        access,
    }
}

fn copy(kind: CopyKind, dst: u8, src: u8, hold: bool, fault: CopyFault) -> Op {
    AsyncCopy {
        kind,
        dst,
        src,
        offset: 0,
        len: 0xFFFF,
        hold,
        fault,
    }
}

fn system_fine(size: u8) -> Op {
    Allocate {
        agent: 0,
        pool: SystemFine,
        size,
        executable: false,
        via_region: false,
    }
}

/// `(name, ops)` of every hand-written seed.
pub fn seeds() -> Vec<(&'static str, Vec<Op>)> {
    vec![
        (
            "snap-mutate-restore",
            vec![
                SetTracking(true),
                alloc(0, 12),
                alloc(0, 5),
                alloc(1, 9),
                AddModuleVariable {
                    exe: 0,
                    agent: 0,
                    size: 5,
                },
                Snap { agent: 0 },
                mutate(0, 0xAA),
                mutate(1, 0xBB),
                MutateVariable { index: 0, byte: 1 },
                Restore { index: 0 },
                Free {
                    index: 1,
                    via_core: false,
                },
                mutate(0, 0xCC),
                Restore { index: 0 },
                DropSnapshot { index: 0 },
            ],
        ),
        (
            "free-and-reuse",
            vec![
                SetTracking(true),
                alloc(0, 12),
                alloc(0, 12),
                Snap { agent: 0 },
                FreeAndReuse { index: 1 },
                mutate(1, 0x99),
                mutate(0, 0x98),
                Restore { index: 0 },
                Free {
                    index: 0,
                    via_core: true,
                },
                Restore { index: 0 },
            ],
        ),
        (
            // The library retries a refused allocation after releasing the
            // retained device arena; with address reuse on, the retry takes
            // that arena's block (freed last), not the one the application
            // just freed. Found by cargo fuzz.
            "free-and-reuse-after-a-retry",
            vec![
                SetTracking(true),
                Storage {
                    policy: 2,
                    batched: true,
                },
                alloc(0, 12),
                Snap { agent: 0 },
                DropSnapshot { index: 0 },
                InjectFault(AllocationFailsOnce),
                FreeAndReuse { index: 0 },
                mutate(0, 0x42),
                Snap { agent: 0 },
                mutate(0, 0x43),
                Restore { index: 0 },
            ],
        ),
        (
            "copy-faults",
            vec![
                SetTracking(true),
                alloc(0, 9),
                alloc(0, 4),
                AddModuleVariable {
                    exe: 0,
                    agent: 0,
                    size: 4,
                },
                InjectFault(NthD2hCopy(2)),
                Snap { agent: 0 },
                Snap { agent: 0 },
                InjectFault(H2dIntoAllocation {
                    index: 0,
                    offset: 17,
                }),
                InjectFault(H2dIntoVariable { index: 0 }),
                mutate(0, 1),
                mutate(1, 2),
                MutateVariable { index: 0, byte: 3 },
                Restore { index: 1 },
                InjectFault(ClearH2d),
                Restore { index: 1 },
            ],
        ),
        (
            "host-budget",
            vec![
                SetTracking(true),
                alloc(0, 12),
                alloc(1, 12),
                InjectFault(HostBudget(40)),
                Snap { agent: 0 },
                Snap { agent: 1 },
                DropSnapshot { index: 0 },
                Snap { agent: 1 },
                InjectFault(HostBudget(0)),
                Snap { agent: 0 },
                // Exactly at the edge fits; one byte short declines.
                InjectFault(HostBudgetAtEdge { agent: 1, delta: 2 }),
                Snap { agent: 1 },
                InjectFault(HostBudgetAtEdge { agent: 1, delta: 1 }),
                Snap { agent: 1 },
            ],
        ),
        (
            "symbol-enumeration",
            vec![
                SetTracking(true),
                alloc(1, 6),
                AddModuleVariable {
                    exe: 0,
                    agent: 1,
                    size: 6,
                },
                AddKernel { exe: 1, agent: 1 },
                AddModuleVariable {
                    exe: 2,
                    agent: 0,
                    size: 0,
                },
                InjectFault(RefuseSymbolWalk {
                    exe: 1,
                    refuse: true,
                }),
                Snap { agent: 1 },
                InjectFault(RefuseSymbolWalk {
                    exe: 1,
                    refuse: false,
                }),
                InjectFault(SymbolQuery {
                    attribute: 2,
                    fail: true,
                }),
                Snap { agent: 1 },
                Snap { agent: 2 },
                InjectFault(SymbolQuery {
                    attribute: 2,
                    fail: false,
                }),
                InjectFault(ExecutableIteration(true)),
                Snap { agent: 0 },
                InjectFault(ExecutableIteration(false)),
                InjectFault(Iterator(false)),
                Snap { agent: 1 },
                InjectFault(Iterator(true)),
                Snap { agent: 1 },
            ],
        ),
        (
            "failed-free-and-allocation",
            vec![
                SetTracking(true),
                alloc(0, 7),
                Snap { agent: 0 },
                InjectFault(FreeFailsOnce),
                Free {
                    index: 0,
                    via_core: false,
                },
                mutate(0, 5),
                Restore { index: 0 },
                InjectFault(AllocationFailsOnce),
                alloc(0, 7),
                FreeAndReuse { index: 0 },
                Restore { index: 0 },
            ],
        ),
        (
            "classification",
            vec![
                SetTracking(true),
                Allocate {
                    agent: 0,
                    pool: DeviceFine,
                    size: 8,
                    executable: false,
                    via_region: false,
                },
                Allocate {
                    agent: 0,
                    pool: SystemKernarg,
                    size: 8,
                    executable: false,
                    via_region: true,
                },
                Allocate {
                    agent: 1,
                    pool: DeviceCoarse,
                    size: 8,
                    executable: true,
                    via_region: false,
                },
                Allocate {
                    agent: 1,
                    pool: DeviceCoarse,
                    size: 8,
                    executable: false,
                    via_region: true,
                },
                Allocate {
                    agent: 0,
                    pool: SystemCoarse,
                    size: 3,
                    executable: false,
                    via_region: false,
                },
                Allocate {
                    agent: 0,
                    pool: SystemFine,
                    size: 3,
                    executable: false,
                    via_region: false,
                },
                InjectFault(PointerInfo(true)),
                alloc(0, 3),
                InjectFault(PointerInfo(false)),
                Snap { agent: 2 },
                Snap { agent: 1 },
                mutate(4, 7),
                mutate(3, 7),
                Restore { index: 0 },
                Restore { index: 1 },
            ],
        ),
        (
            "tracking-off-still-retires",
            vec![
                SetTracking(true),
                alloc(0, 10),
                alloc(0, 11),
                SetTracking(false),
                alloc(0, 12),
                Snap { agent: 0 },
                Free {
                    index: 0,
                    via_core: false,
                },
                FreeAndReuse { index: 0 },
                Restore { index: 0 },
            ],
        ),
        (
            "replay",
            vec![
                SetTracking(true),
                alloc(0, 9),
                alloc(0, 2),
                AddModuleVariable {
                    exe: 0,
                    agent: 0,
                    size: 5,
                },
                Replay {
                    agent: 0,
                    passes: 4,
                    target: 0,
                    byte: 0x40,
                },
                InjectFault(H2dIntoAllocation {
                    index: 1,
                    offset: 0,
                }),
                Replay {
                    agent: 0,
                    passes: 3,
                    target: 1,
                    byte: 0x41,
                },
                InjectFault(NthD2hCopy(1)),
                Replay {
                    agent: 0,
                    passes: 2,
                    target: 0,
                    byte: 0x42,
                },
                Replay {
                    agent: 1,
                    passes: 1,
                    target: 0,
                    byte: 0x43,
                },
            ],
        ),
        (
            "arena-policies",
            vec![
                SetTracking(true),
                Storage {
                    policy: 1,
                    batched: true,
                },
                alloc(0, 12),
                alloc(0, 5),
                Allocate {
                    agent: 0,
                    pool: SystemCoarse,
                    size: 9,
                    executable: false,
                    via_region: false,
                },
                AddModuleVariable {
                    exe: 0,
                    agent: 0,
                    size: 5,
                },
                Snap { agent: 0 },
                Snap { agent: 2 },
                mutate(0, 0x11),
                MutateVariable { index: 0, byte: 2 },
                InjectFault(H2dIntoAllocation {
                    index: 1,
                    offset: 3,
                }),
                Restore { index: 0 },
                Restore { index: 1 },
                InjectFault(ClearH2d),
                DropSnapshot { index: 0 },
                InjectFault(CopyFromAllocation {
                    index: 0,
                    offset: 9,
                }),
                Snap { agent: 0 },
                InjectFault(ClearH2d),
                Storage {
                    policy: 2,
                    batched: false,
                },
                Snap { agent: 0 },
                Snap { agent: 2 },
                Storage {
                    policy: 3,
                    batched: true,
                },
                Snap { agent: 1 },
                Snap { agent: 2 },
                DestroyExecutable { exe: 0 },
                Restore { index: 1 },
                Storage {
                    policy: 4,
                    batched: true,
                },
                Replay {
                    agent: 0,
                    passes: 3,
                    target: 0,
                    byte: 5,
                },
                InjectFault(HostBudget(1)),
                Snap { agent: 0 },
                TrimRetained,
                Storage {
                    policy: 0,
                    batched: true,
                },
                Snap { agent: 0 },
            ],
        ),
        (
            "finalize",
            vec![
                SetTracking(true),
                alloc(0, 12),
                AddModuleVariable {
                    exe: 0,
                    agent: 0,
                    size: 4,
                },
                Snap { agent: 0 },
                mutate(0, 1),
                Finalize,
                Restore { index: 0 },
                SetTracking(true),
                alloc(0, 12),
                Snap { agent: 0 },
                Replay {
                    agent: 0,
                    passes: 3,
                    target: 0,
                    byte: 9,
                },
                Free {
                    index: 0,
                    via_core: false,
                },
                Restore { index: 0 },
            ],
        ),
        // A hipMallocAsync-style heap: chunks of one reserved range, each
        // its own handle; one given back and mapped again with another
        // handle while a snapshot is held.
        (
            "vmem-heap",
            vec![
                SetTracking(true),
                VmemReserve { chunks: 3 },
                map_new(0, 0),
                map_new(0, 1),
                map_new(0, 2),
                write_mapping(0, 0x10),
                write_mapping(1, 0x11),
                write_mapping(2, 0x12),
                Snap { agent: 0 },
                write_mapping(0, 0xEE),
                write_mapping(1, 0xEE),
                write_mapping(2, 0xEE),
                // Chunk 1 unmapped and released: skipped, never written.
                VmemUnmap { mapping: 1, how: 0 },
                VmemRelease { handle: 1 },
                Restore { index: 0 },
                // Mapped again with a new handle: not the captured mapping.
                map_new(0, 1),
                write_mapping(2, 0x33),
                Restore { index: 0 },
                VmemAddressFree { reservation: 0 },
                Snap { agent: 0 },
                Replay {
                    agent: 0,
                    passes: 3,
                    target: 0,
                    byte: 0x40,
                },
            ],
        ),
        // One handle at two addresses: both views are captured and restored.
        (
            "vmem-alias",
            vec![
                SetTracking(true),
                map_new(1, 0),
                VmemMapAlias { handle: 0, at: 2 },
                set_access(1, access(Rw, Absent, Rw)),
                write_mapping(0, 0x44),
                Snap { agent: 1 },
                write_mapping(1, 0x55),
                Restore { index: 0 },
                VmemUnmap { mapping: 0, how: 0 },
                write_mapping(0, 0x66),
                Restore { index: 0 },
                VmemRelease { handle: 0 },
                write_mapping(0, 0x67),
                Restore { index: 0 },
            ],
        ),
        // Which access makes a mapping replay state, and what a change of
        // access does to a held snapshot.
        (
            "vmem-access",
            vec![
                SetTracking(true),
                VmemMapNew {
                    agent: 1,
                    fine: false,
                    chunks: 1,
                    at: 0,
                    access: None,
                },
                Snap { agent: 1 },
                set_access(0, access(Ro, Absent, Rw)),
                set_access(0, access(Rw, Absent, Rw)),
                write_mapping(0, 0x21),
                Snap { agent: 1 },
                // A peer granted access: the owner keeps its access where
                // the runtime merges permissions (ROCm 6.4+), not otherwise.
                set_access(0, access(Absent, Rw, Rw)),
                write_mapping(0, 0x22),
                Restore { index: 1 },
                set_access(0, access(NoAccess, Absent, Rw)),
                write_mapping(0, 0x23),
                Restore { index: 1 },
                // Tracked again: a new generation the old snapshot skips.
                set_access(0, access(Rw, Ro, Rw)),
                Restore { index: 1 },
                // ROCr unmaps whole mappings only.
                VmemUnmap { mapping: 0, how: 2 },
                VmemUnmap { mapping: 0, how: 3 },
                Snap { agent: 1 },
                write_mapping(0, 0x24),
                Restore { index: 2 },
                // One set_access over three contiguous mappings (ROCm 6.4+).
                VmemMapNew {
                    agent: 1,
                    fine: false,
                    chunks: 0,
                    at: 2,
                    access: None,
                },
                VmemMapNew {
                    agent: 0,
                    fine: false,
                    chunks: 0,
                    at: 3,
                    access: None,
                },
                VmemSetAccess {
                    mapping: 0,
                    span: 2,
                    access: access(Rw, Rw, Rw),
                },
                // Fine-grained, or made while tracking is off: seen, not
                // captured (kr_untracked_summary).
                VmemReserve { chunks: 1 },
                VmemMapNew {
                    agent: 0,
                    fine: true,
                    chunks: 0,
                    at: 4,
                    access: Some(access(Rw, Absent, Rw)),
                },
                SetTracking(false),
                map_new(0, 5),
                Snap { agent: 0 },
                Snap { agent: 1 },
            ],
        ),
        // The minimal input for the bug the fuzzer found in 8a464da: a
        // second descriptor for the owner takes its access away (the
        // runtime applies descriptors in order); the mapping must no longer
        // be tracked, and the held snapshot must not write it.
        (
            "vmem-owner-revoked-by-a-later-descriptor",
            vec![
                SetTracking(true),
                map_new(0, 0),
                write_mapping(0, 0x11),
                Snap { agent: 0 },
                VmemSetAccess {
                    mapping: 0,
                    span: 0,
                    access: Access {
                        owner: Rw,
                        peer: Absent,
                        cpu: Rw,
                        owner_again: NoAccess,
                    },
                },
                write_mapping(0, 0x22),
                Restore { index: 0 },
            ],
        ),
        // Runtime failures of each vmem call, and a handle create refused
        // for lack of memory that the library retries after releasing its
        // retained device arena.
        (
            "vmem-faults",
            vec![
                SetTracking(true),
                InjectFault(Vmem { op: 0 }),
                map_new(0, 0),
                InjectFault(Vmem { op: 2 }),
                map_new(0, 0),
                VmemMapAlias { handle: 0, at: 1 },
                InjectFault(Vmem { op: 4 }),
                set_access(0, access(Rw, Absent, Rw)),
                set_access(0, access(Rw, Absent, Rw)),
                write_mapping(0, 0x31),
                Snap { agent: 0 },
                InjectFault(Vmem { op: 3 }),
                VmemUnmap { mapping: 0, how: 0 },
                InjectFault(Vmem { op: 4 }),
                set_access(0, access(NoAccess, Absent, Rw)),
                write_mapping(0, 0x32),
                Restore { index: 0 },
                InjectFault(Vmem { op: 1 }),
                VmemRelease { handle: 0 },
                VmemRelease { handle: 0 },
                Restore { index: 0 },
                VmemUnmap { mapping: 0, how: 0 },
                Restore { index: 0 },
                Storage {
                    policy: 2,
                    batched: true,
                },
                alloc(0, 12),
                Snap { agent: 0 },
                DropSnapshot { index: 1 },
                InjectFault(Vmem { op: 0 }),
                map_new(0, 2),
                Snap { agent: 0 },
            ],
        ),
        // An application copy held by a dependency: snapshots of its agent
        // decline and restores write nothing until it is released; refused
        // and failing copies; rect and engine copies, into a mapping too.
        (
            "async-copy-fence",
            vec![
                SetTracking(true),
                alloc(0, 12),
                system_fine(12),
                Snap { agent: 0 },
                copy(CopyKind::Linear, 0, 1, true, CopyFault::None),
                Snap { agent: 0 },
                Restore { index: 0 },
                Snap { agent: 1 },
                ReleaseDependency { index: 0 },
                Snap { agent: 0 },
                mutate(0, 0x77),
                Restore { index: 3 },
                copy(CopyKind::Linear, 0, 1, false, CopyFault::Refuse),
                copy(CopyKind::Linear, 0, 1, false, CopyFault::FailCompletion),
                AsyncCopy {
                    kind: CopyKind::Rect,
                    dst: 0,
                    src: 1,
                    offset: 8,
                    len: 0x4321,
                    hold: true,
                    fault: CopyFault::None,
                },
                copy(CopyKind::Engine, 1, 0, false, CopyFault::None),
                Snap { agent: 0 },
                ReleaseDependency { index: 0 },
                Restore { index: 3 },
                map_new(0, 0),
                write_mapping(0, 0x5A),
                Snap { agent: 0 },
                copy(CopyKind::Linear, 2, 1, true, CopyFault::None),
                Snap { agent: 0 },
                Restore { index: 5 },
                ReleaseDependency { index: 0 },
                Restore { index: 5 },
            ],
        ),
        // Copies run in submission order: one held back holds back the
        // ones after it (copies touching no tracked memory are not fenced);
        // a copy out of an address with a copy fault fails while executing.
        (
            "async-copy-queue",
            vec![
                Storage {
                    policy: 2,
                    batched: false,
                },
                SetTracking(true),
                alloc(0, 12),
                alloc(1, 12),
                system_fine(12),
                copy(CopyKind::Linear, 2, 2, true, CopyFault::None),
                copy(CopyKind::Linear, 0, 2, true, CopyFault::None),
                copy(CopyKind::Linear, 1, 2, false, CopyFault::None),
                Snap { agent: 1 },
                ReleaseDependency { index: 1 },
                Snap { agent: 0 },
                ReleaseDependency { index: 0 },
                Snap { agent: 0 },
                InjectFault(CopyFromAllocation {
                    index: 1,
                    offset: 100,
                }),
                copy(CopyKind::Rect, 0, 1, false, CopyFault::None),
                InjectFault(ClearH2d),
                Snap { agent: 1 },
            ],
        ),
    ]
}
