//! Hand-written op sequences: one per area the fuzzer covers, kept in the
//! corpus (`fuzz/corpus/replay_ops/seed-*`) as starting points, and run by
//! the seeded test.

use crate::ops::Fault::*;
use crate::ops::Op::{self, *};
use crate::ops::PoolSel::*;

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
    ]
}
