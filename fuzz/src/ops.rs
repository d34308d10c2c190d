//! The operation language: what an application and a profiling tool can do
//! to the library, one small step at a time.
//!
//! Every field is decoded from single bytes (`u16` from two, little endian),
//! with a hand-written [`Arbitrary`] impl rather than `#[derive(Arbitrary)]`
//! for two reasons: the op kinds get weights (a finalize is rare, since
//! everything after it only checks that nothing happens), and the byte format
//! is stable and simple, so [`Op::encode`] can write hand-made corpus
//! inputs that decode to exactly the ops they were written from. A byte
//! stream that runs out decodes as zeros (what `Unstructured` gives).
//!
//! Indices (`index`, `exe`, ...) are taken modulo the number of live things
//! of that kind when the op runs; an op whose target does not exist is a
//! no-op (or the NULL case of the call, where the API has one).

use arbitrary::{Arbitrary, Result, Unstructured};

/// An agent selector: 0 and 1 are the two GPUs, 2 the CPU agent (which owns
/// the system pools).
pub type AgentSel = u8;

/// The pool an allocation comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolSel {
    DeviceCoarse,
    DeviceFine,
    SystemKernarg,
    SystemCoarse,
    SystemFine,
}

impl PoolSel {
    /// A pool of the CPU agent (system memory), not of a GPU.
    pub fn is_system(self) -> bool {
        matches!(
            self,
            PoolSel::SystemKernarg | PoolSel::SystemCoarse | PoolSel::SystemFine
        )
    }

    /// Coarse kinds are drawn more often: most applications' memory.
    fn from_byte(b: u8) -> PoolSel {
        match b % 8 {
            0..=2 => PoolSel::DeviceCoarse,
            3 => PoolSel::DeviceFine,
            4 => PoolSel::SystemKernarg,
            5 | 6 => PoolSel::SystemCoarse,
            _ => PoolSel::SystemFine,
        }
    }

    fn to_byte(self) -> u8 {
        match self {
            PoolSel::DeviceCoarse => 0,
            PoolSel::DeviceFine => 3,
            PoolSel::SystemKernarg => 4,
            PoolSel::SystemCoarse => 5,
            PoolSel::SystemFine => 7,
        }
    }

    /// Whether the library must track an allocation from this pool (absent
    /// every other reason not to): device memory and system memory of
    /// either grain (system memory owned by the CPU agent); never kernarg.
    pub fn tracked(self) -> bool {
        self != PoolSel::SystemKernarg
    }

    /// Whether the pool belongs to a GPU (else to the CPU agent).
    pub fn device(self) -> bool {
        matches!(self, PoolSel::DeviceCoarse | PoolSel::DeviceFine)
    }

    pub fn sim_kind(self) -> hsa_sim::PoolKind {
        match self {
            PoolSel::DeviceCoarse => hsa_sim::PoolKind::DeviceCoarse,
            PoolSel::DeviceFine => hsa_sim::PoolKind::DeviceFine,
            PoolSel::SystemKernarg => hsa_sim::PoolKind::SystemKernarg,
            PoolSel::SystemCoarse => hsa_sim::PoolKind::SystemCoarse,
            PoolSel::SystemFine => hsa_sim::PoolKind::SystemFine,
        }
    }
}

/// Allocation sizes: small, around the 4 KiB granule, and a few odd ones.
pub const SIZE_CLASSES: [usize; 16] = [
    1, 2, 7, 16, 64, 100, 255, 512, 1000, 2048, 3000, 4095, 4096, 4097, 6000, 8192,
];

/// Module-variable sizes (0 is a symbol the snapshot must skip).
pub const VARIABLE_SIZES: [u32; 8] = [0, 1, 4, 8, 16, 100, 256, 4096];

/// Attributes a symbol query can be made to fail for (the three the
/// library asks: TYPE, VARIABLE_ADDRESS, VARIABLE_SIZE).
pub const QUERY_ATTRIBUTES: [u32; 3] = [
    hsa_sim::HSA_EXECUTABLE_SYMBOL_INFO_TYPE,
    hsa_sim::HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
    hsa_sim::HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE,
];

/// A fault injected into the software runtime, or a tool-side setting that
/// makes snapshots decline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Every `hsa_amd_pointer_info` fails while on (allocations go untracked).
    PointerInfo(bool),
    /// The n-th device-to-host copy from now fails (n = 1..=7); 0 disarms.
    NthD2hCopy(u8),
    /// Copies into `base + offset` of live allocation `index` fail: a
    /// restore of it fails (up to 16 addresses in all, as the runtime
    /// keeps). Host-to-device copies only with the original runtime, every
    /// direction with one that has `Fault::CopiesInto`.
    H2dIntoAllocation { index: u8, offset: u16 },
    /// Copies into module variable `index` fail.
    H2dIntoVariable { index: u8 },
    /// Clears every copy fault (into and from).
    ClearH2d,
    /// The symbol walk of executable `exe` is refused (or allowed again).
    RefuseSymbolWalk { exe: u8, refuse: bool },
    /// The next free fails (and frees nothing).
    FreeFailsOnce,
    /// The next allocation fails.
    AllocationFailsOnce,
    /// `kr_set_host_budget`: 0 is unlimited, else `n * 128` bytes.
    HostBudget(u8),
    /// `kr_set_host_budget` right at the edge of the next snapshot of
    /// `agent`: what live snapshots hold, plus the bytes `agent` tracks,
    /// plus `delta % 5 - 2` (so -2..=2; a result of 0 means unlimited).
    HostBudgetAtEdge { agent: u8, delta: u8 },
    /// The loader iterator fails before any callback while on.
    ExecutableIteration(bool),
    /// `hsa_executable_symbol_get_info` fails for one attribute while on.
    SymbolQuery { attribute: u8, fail: bool },
    /// The runtime's iterator set with `kr_set_executable_iterator` (true),
    /// or none set and a runtime without the AMD loader extension, so that
    /// none can be found (false).
    Iterator(bool),
    /// Copies out of `base + offset` of live allocation `index` fail: a
    /// capture of it fails (needs `Fault::CopiesFrom`; else no-op).
    CopyFromAllocation { index: u8, offset: u16 },
    /// Copies out of module variable `index` fail.
    CopyFromVariable { index: u8 },
    /// The next `hsa_amd_vmem_*` call of one kind (`op % 5`: handle create,
    /// handle release, map, unmap, set_access) that passes the runtime's
    /// argument checks fails and changes nothing (`Fault::NthVmem*`;
    /// a handle create with OUT_OF_RESOURCES, which the library may retry).
    /// A no-op without the vmem API.
    Vmem { op: u8 },
}

impl Fault {
    fn decode(u: &mut Unstructured) -> Fault {
        match byte(u) % 16 {
            0 => Fault::PointerInfo(rarely(u)),
            1 => Fault::NthD2hCopy(byte(u) % 8),
            2 => Fault::H2dIntoAllocation {
                index: byte(u),
                offset: word(u),
            },
            3 => Fault::H2dIntoVariable { index: byte(u) },
            4 => Fault::ClearH2d,
            5 => Fault::RefuseSymbolWalk {
                exe: byte(u),
                refuse: flag(u),
            },
            6 => Fault::FreeFailsOnce,
            7 => Fault::AllocationFailsOnce,
            8 => Fault::HostBudget(byte(u)),
            9 => Fault::ExecutableIteration(rarely(u)),
            10 => Fault::SymbolQuery {
                attribute: byte(u) % 3,
                fail: rarely(u),
            },
            11 => Fault::Iterator(!rarely(u)),
            12 => Fault::HostBudgetAtEdge {
                agent: byte(u),
                delta: byte(u) % 5,
            },
            13 => Fault::CopyFromAllocation {
                index: byte(u),
                offset: word(u),
            },
            14 => Fault::CopyFromVariable { index: byte(u) },
            _ => Fault::Vmem { op: byte(u) % 5 },
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Fault::PointerInfo(on) => out.extend([0, if on { 3 } else { 0 }]),
            Fault::NthD2hCopy(n) => out.extend([1, n]),
            Fault::H2dIntoAllocation { index, offset } => {
                out.extend([2, index]);
                out.extend(offset.to_le_bytes());
            }
            Fault::H2dIntoVariable { index } => out.extend([3, index]),
            Fault::ClearH2d => out.push(4),
            Fault::RefuseSymbolWalk { exe, refuse } => out.extend([5, exe, refuse as u8]),
            Fault::FreeFailsOnce => out.push(6),
            Fault::AllocationFailsOnce => out.push(7),
            Fault::HostBudget(n) => out.extend([8, n]),
            Fault::ExecutableIteration(on) => out.extend([9, if on { 3 } else { 0 }]),
            Fault::SymbolQuery { attribute, fail } => {
                out.extend([10, attribute, if fail { 3 } else { 0 }])
            }
            Fault::Iterator(set) => out.extend([11, if set { 0 } else { 3 }]),
            Fault::HostBudgetAtEdge { agent, delta } => out.extend([12, agent, delta]),
            Fault::CopyFromAllocation { index, offset } => {
                out.extend([13, index]);
                out.extend(offset.to_le_bytes());
            }
            Fault::CopyFromVariable { index } => out.extend([14, index]),
            Fault::Vmem { op } => out.extend([15, op]),
        }
    }
}

/// What one `hsa_amd_vmem_set_access` descriptor grants an agent, or no
/// descriptor for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Perm {
    Absent,
    None,
    Ro,
    Rw,
}

impl Perm {
    fn from_bits(bits: u8) -> Perm {
        match bits & 3 {
            0 => Perm::Absent,
            1 => Perm::None,
            2 => Perm::Ro,
            _ => Perm::Rw,
        }
    }

    fn to_bits(self) -> u8 {
        match self {
            Perm::Absent => 0,
            Perm::None => 1,
            Perm::Ro => 2,
            Perm::Rw => 3,
        }
    }
}

/// The descriptors of one `hsa_amd_vmem_set_access`: the mapping's owner
/// GPU (read-write most often: that is what makes a mapping replay state),
/// the other GPU, the CPU agent, and rarely a second descriptor for the
/// owner after the first (the runtime applies descriptors in order, so the
/// last one for an agent wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub owner: Perm,
    pub peer: Perm,
    pub cpu: Perm,
    pub owner_again: Perm,
}

impl Access {
    fn decode(u: &mut Unstructured) -> Access {
        let a = byte(u);
        let again = byte(u);
        Access {
            owner: match a & 7 {
                4 => Perm::Ro,
                5 => Perm::None,
                6 => Perm::Absent,
                _ => Perm::Rw,
            },
            peer: Perm::from_bits(a >> 3),
            cpu: Perm::from_bits(a >> 5),
            owner_again: if again % 16 == 15 {
                Perm::from_bits(again >> 4)
            } else {
                Perm::Absent
            },
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let owner = match self.owner {
            Perm::Rw => 0,
            Perm::Ro => 4,
            Perm::None => 5,
            Perm::Absent => 6,
        };
        out.push(owner | self.peer.to_bits() << 3 | self.cpu.to_bits() << 5);
        out.push(match self.owner_again {
            Perm::Absent => 0,
            again => 15 | again.to_bits() << 4,
        });
    }
}

/// Which asynchronous copy entry an application copy goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// `hsa_amd_memory_async_copy`.
    Linear,
    /// `hsa_amd_memory_async_copy_rect`: a few rows of a pitched box.
    Rect,
    /// `hsa_amd_memory_async_copy_on_engine` (ROCm 6.0+ headers; a linear
    /// copy with older ones).
    Engine,
}

/// A runtime fault armed for one application copy only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyFault {
    None,
    /// Refused at submission (`inject(Fault::NthAsyncCopy, 0, 1)`): the
    /// completion signal is never touched.
    Refuse,
    /// Accepted, then fails while executing
    /// (`inject(Fault::NthAsyncCopyCompletion, 0, 1)`): nothing copied, the
    /// completion signal set to -1.
    FailCompletion,
}

/// One step of an application + tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Allocate through the wrapped tables: `hsa_amd_memory_pool_allocate`
    /// (with the executable flag if `executable`), or `hsa_memory_allocate`
    /// on the region of the same memory if `via_region`. `agent` picks the
    /// GPU of a device pool; system pools belong to the CPU agent.
    Allocate {
        agent: AgentSel,
        pool: PoolSel,
        size: u8,
        executable: bool,
        via_region: bool,
    },
    /// Free live allocation `index` (through the core table's
    /// `hsa_memory_free` if `via_core`, else the AMD table's pool free).
    /// With nothing live: a free of NULL.
    Free {
        index: u8,
        via_core: bool,
    },
    /// Free, then allocate the same size from the same pool the same way
    /// with the runtime's address reuse on: the address comes back as a new
    /// allocation.
    FreeAndReuse {
        index: u8,
    },
    /// `kr_set_tracking_enabled`.
    SetTracking(bool),
    /// A `__device__` variable of `VARIABLE_SIZES[size % 8]` bytes visible to
    /// `agent`, in executable `exe` (a new executable when `exe` is past the
    /// last one; at most 3).
    AddModuleVariable {
        exe: u8,
        agent: AgentSel,
        size: u8,
    },
    /// A kernel symbol (a non-variable the walk must pass over).
    AddKernel {
        exe: u8,
        agent: AgentSel,
    },
    /// `kr_snap(agent)`; the snapshot is kept (at most 16 live).
    Snap {
        agent: AgentSel,
    },
    /// A kernel's store: `len` bytes of `byte` at `offset` in live allocation
    /// `index` (both taken modulo what fits; `len` 0 means to the end).
    Mutate {
        index: u8,
        offset: u16,
        len: u16,
        byte: u8,
    },
    /// A kernel's store into module variable `index` (all of it).
    MutateVariable {
        index: u8,
        byte: u8,
    },
    /// `kr_restore_with_report` of snapshot `index` (NULL if none is live).
    Restore {
        index: u8,
    },
    /// `kr_snapshot_free` of snapshot `index`.
    DropSnapshot {
        index: u8,
    },
    InjectFault(Fault),
    /// `kr_replay(agent, passes % 5, ...)`: each pass checks that it sees
    /// the captured state, then stores `byte ^ pass` into target `target`
    /// (a live allocation, else a module variable).
    Replay {
        agent: AgentSel,
        passes: u8,
        target: u8,
        byte: u8,
    },
    /// `kr_set_storage_policy` (`policy % 5`: baseline, auto, device,
    /// pinned, pageable) and `kernel_replay::set_batched_copies(batched)`, and
    /// `policy / 5` the device-kernel strategy (auto, copies, scatter, dirty
    /// blocks: the software runtime runs the kernels' own source). Inputs start
    /// in baseline. Needs a library with storage tiers (else a no-op).
    Storage {
        policy: u8,
        batched: bool,
    },
    /// `kr_trim_retained`.
    TrimRetained,
    /// `hsa_executable_destroy` of loaded executable `exe`, through the
    /// wrapped core table (the library's registry sees it).
    DestroyExecutable {
        exe: u8,
    },
    /// `kr_finalize` (rare: selector 255 and a second byte below 64).
    Finalize,

    // ---- virtual memory (no-ops without the vmem API) ----
    /// `hsa_amd_vmem_address_reserve` of `chunks % 4 + 1` chunks (at most 4
    /// reservations).
    VmemReserve {
        chunks: u8,
    },
    /// A new physical handle of `chunks % 2 + 1` chunks from GPU `agent %
    /// 2`'s coarse (or `fine`) device pool, mapped at chunk `at` of the
    /// reserved chunks (a reservation of 4 chunks is made first if there is
    /// none), then given `access` if any: a `hipMallocAsync` chunk.
    VmemMapNew {
        agent: AgentSel,
        fine: bool,
        chunks: u8,
        at: u8,
        access: Option<Access>,
    },
    /// Live handle `handle` (not released) mapped again at chunk `at`: one
    /// handle at two addresses.
    VmemMapAlias {
        handle: u8,
        at: u8,
    },
    /// `hsa_amd_vmem_set_access` over live mapping `mapping` and up to
    /// `span % 3` more mappings contiguous with it (accepted as one range
    /// by ROCm 6.4+ only).
    VmemSetAccess {
        mapping: u8,
        span: u8,
        access: Access,
    },
    /// `hsa_amd_vmem_unmap` of live mapping `mapping`: whole (`how % 4` 0
    /// or 1), or a part the runtime refuses (2: its start with less than
    /// its size, 3: from its second page).
    VmemUnmap {
        mapping: u8,
        how: u8,
    },
    /// `hsa_amd_vmem_handle_release` of live handle `handle` (its memory
    /// lives on while mapped).
    VmemRelease {
        handle: u8,
    },
    /// `hsa_amd_vmem_address_free` of reservation `reservation` (refused
    /// while a mapping is inside).
    VmemAddressFree {
        reservation: u8,
    },
    /// A kernel's store into live mapping `mapping`: `len` bytes of `byte`
    /// at `offset` (modulo what fits; `len` 0 to the end). Every mapping of
    /// the handle sees it.
    WriteMapping {
        mapping: u8,
        offset: u16,
        len: u16,
        byte: u8,
    },

    // ---- application async copies ----
    /// An application copy between two endpoints (live allocations, then
    /// mappings some GPU may read and write; indices modulo their number),
    /// `len` bytes at offsets derived from `offset` (modulo what fits), with
    /// a fresh completion signal at 1. With `hold`, it depends on a fresh
    /// signal held at 1 until a `ReleaseDependency`. `fault` arms a runtime
    /// fault for this copy alone.
    AsyncCopy {
        kind: CopyKind,
        dst: u8,
        src: u8,
        offset: u16,
        len: u16,
        hold: bool,
        fault: CopyFault,
    },
    /// Stores 0 into held dependency `index` (oldest first); the copies it
    /// held then run, in submission order.
    ReleaseDependency {
        index: u8,
    },
}

fn byte(u: &mut Unstructured) -> u8 {
    u8::arbitrary(u).unwrap_or(0)
}

fn word(u: &mut Unstructured) -> u16 {
    u16::from_le_bytes([byte(u), byte(u)])
}

fn flag(u: &mut Unstructured) -> bool {
    byte(u) & 1 == 1
}

/// True one time in four: faults that stay on until turned off (pointer
/// info, executable iteration, symbol queries, no iterator) are switched on
/// less often than off, so they do not shadow everything after them.
fn rarely(u: &mut Unstructured) -> bool {
    byte(u) % 4 == 3
}

// Selector ranges (out of 256) of each op kind.
const ALLOCATE: u8 = 0; // 0..36
const FREE: u8 = 36; // 36..48
const FREE_AND_REUSE: u8 = 48; // 48..58
const SET_TRACKING: u8 = 58; // 58..72
const ADD_VARIABLE: u8 = 72; // 72..79
const ADD_KERNEL: u8 = 79; // 79..81
const SNAP: u8 = 81; // 81..104
const MUTATE: u8 = 104; // 104..126
const MUTATE_VARIABLE: u8 = 126; // 126..132
const RESTORE: u8 = 132; // 132..158
const DROP_SNAPSHOT: u8 = 158; // 158..167
const INJECT_FAULT: u8 = 167; // 167..191
const REPLAY: u8 = 191; // 191..201
const STORAGE: u8 = 201; // 201..205
const TRIM_RETAINED: u8 = 205; // 205..207
const DESTROY_EXECUTABLE: u8 = 207; // 207..210
const EXTENDED: u8 = 210; // 210..255, then a kind byte (below)
const FINALIZE: u8 = 255; // 255, then a byte < 64 (else a Snap)

// Kind ranges (out of 32) of the extended ops: virtual memory and
// application async copies.
const VMEM_RESERVE: u8 = 0; // 0..2
const VMEM_MAP_NEW: u8 = 2; // 2..8
const VMEM_MAP_ALIAS: u8 = 8; // 8..10
const VMEM_SET_ACCESS: u8 = 10; // 10..14
const VMEM_UNMAP: u8 = 14; // 14..17
const VMEM_RELEASE: u8 = 17; // 17..19
const VMEM_ADDRESS_FREE: u8 = 19; // 19..20
const WRITE_MAPPING: u8 = 20; // 20..23
const ASYNC_COPY: u8 = 23; // 23..29
const RELEASE_DEPENDENCY: u8 = 29; // 29..32

fn decode_extended(u: &mut Unstructured) -> Op {
    match byte(u) % 32 {
        k if k < VMEM_MAP_NEW => Op::VmemReserve { chunks: byte(u) },
        k if k < VMEM_MAP_ALIAS => Op::VmemMapNew {
            agent: byte(u),
            fine: byte(u) % 4 == 3,
            chunks: byte(u),
            at: byte(u),
            access: if byte(u) % 8 == 7 {
                None
            } else {
                Some(Access::decode(u))
            },
        },
        k if k < VMEM_SET_ACCESS => Op::VmemMapAlias {
            handle: byte(u),
            at: byte(u),
        },
        k if k < VMEM_UNMAP => Op::VmemSetAccess {
            mapping: byte(u),
            span: byte(u),
            access: Access::decode(u),
        },
        k if k < VMEM_RELEASE => Op::VmemUnmap {
            mapping: byte(u),
            how: byte(u) % 4,
        },
        k if k < VMEM_ADDRESS_FREE => Op::VmemRelease { handle: byte(u) },
        k if k < WRITE_MAPPING => Op::VmemAddressFree {
            reservation: byte(u),
        },
        k if k < ASYNC_COPY => Op::WriteMapping {
            mapping: byte(u),
            offset: word(u),
            len: word(u),
            byte: byte(u),
        },
        k if k < RELEASE_DEPENDENCY => Op::AsyncCopy {
            kind: match byte(u) % 4 {
                0 | 1 => CopyKind::Linear,
                2 => CopyKind::Rect,
                _ => CopyKind::Engine,
            },
            dst: byte(u),
            src: byte(u),
            offset: word(u),
            len: word(u),
            hold: byte(u) % 3 == 2,
            fault: match byte(u) % 8 {
                6 => CopyFault::Refuse,
                7 => CopyFault::FailCompletion,
                _ => CopyFault::None,
            },
        },
        _ => Op::ReleaseDependency { index: byte(u) },
    }
}

impl Op {
    /// Decodes one op (never fails: missing bytes read as zero).
    pub fn decode(u: &mut Unstructured) -> Op {
        let selector = byte(u);
        match selector {
            s if s < FREE => Op::Allocate {
                agent: byte(u),
                pool: PoolSel::from_byte(byte(u)),
                size: byte(u),
                executable: byte(u) % 8 == 7,
                via_region: byte(u) % 4 == 3,
            },
            s if s < FREE_AND_REUSE => Op::Free {
                index: byte(u),
                via_core: flag(u),
            },
            s if s < SET_TRACKING => Op::FreeAndReuse { index: byte(u) },
            s if s < ADD_VARIABLE => Op::SetTracking(byte(u) % 4 != 0),
            s if s < ADD_KERNEL => Op::AddModuleVariable {
                exe: byte(u),
                agent: byte(u),
                size: byte(u),
            },
            s if s < SNAP => Op::AddKernel {
                exe: byte(u),
                agent: byte(u),
            },
            s if s < MUTATE => Op::Snap { agent: byte(u) },
            s if s < MUTATE_VARIABLE => Op::Mutate {
                index: byte(u),
                offset: word(u),
                len: word(u),
                byte: byte(u),
            },
            s if s < RESTORE => Op::MutateVariable {
                index: byte(u),
                byte: byte(u),
            },
            s if s < DROP_SNAPSHOT => Op::Restore { index: byte(u) },
            s if s < INJECT_FAULT => Op::DropSnapshot { index: byte(u) },
            s if s < REPLAY => Op::InjectFault(Fault::decode(u)),
            s if s < STORAGE => Op::Replay {
                agent: byte(u),
                passes: byte(u),
                target: byte(u),
                byte: byte(u),
            },
            s if s < TRIM_RETAINED => Op::Storage {
                // Policy (mod 5) and device-kernel strategy (/ 5).
                policy: byte(u) % 20,
                batched: flag(u),
            },
            s if s < DESTROY_EXECUTABLE => Op::TrimRetained,
            s if s < EXTENDED => Op::DestroyExecutable { exe: byte(u) },
            s if s < FINALIZE => decode_extended(u),
            _ => {
                let second = byte(u);
                if second < 64 {
                    Op::Finalize
                } else {
                    Op::Snap { agent: second }
                }
            }
        }
    }

    /// The bytes [`Op::decode`] reads back as this op (canonical form).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Op::Allocate {
                agent,
                pool,
                size,
                executable,
                via_region,
            } => out.extend([
                ALLOCATE,
                agent,
                pool.to_byte(),
                size,
                if executable { 7 } else { 0 },
                if via_region { 3 } else { 0 },
            ]),
            Op::Free { index, via_core } => out.extend([FREE, index, via_core as u8]),
            Op::FreeAndReuse { index } => out.extend([FREE_AND_REUSE, index]),
            Op::SetTracking(on) => out.extend([SET_TRACKING, on as u8]),
            Op::AddModuleVariable { exe, agent, size } => {
                out.extend([ADD_VARIABLE, exe, agent, size])
            }
            Op::AddKernel { exe, agent } => out.extend([ADD_KERNEL, exe, agent]),
            Op::Snap { agent } => out.extend([SNAP, agent]),
            Op::Mutate {
                index,
                offset,
                len,
                byte,
            } => {
                out.extend([MUTATE, index]);
                out.extend(offset.to_le_bytes());
                out.extend(len.to_le_bytes());
                out.push(byte);
            }
            Op::MutateVariable { index, byte } => out.extend([MUTATE_VARIABLE, index, byte]),
            Op::Restore { index } => out.extend([RESTORE, index]),
            Op::DropSnapshot { index } => out.extend([DROP_SNAPSHOT, index]),
            Op::InjectFault(ref fault) => {
                out.push(INJECT_FAULT);
                fault.encode(out);
            }
            Op::Replay {
                agent,
                passes,
                target,
                byte,
            } => out.extend([REPLAY, agent, passes, target, byte]),
            Op::Storage { policy, batched } => out.extend([STORAGE, policy, batched as u8]),
            Op::TrimRetained => out.push(TRIM_RETAINED),
            Op::DestroyExecutable { exe } => out.extend([DESTROY_EXECUTABLE, exe]),
            Op::Finalize => out.extend([FINALIZE, 0]),
            Op::VmemReserve { chunks } => out.extend([EXTENDED, VMEM_RESERVE, chunks]),
            Op::VmemMapNew {
                agent,
                fine,
                chunks,
                at,
                access,
            } => {
                out.extend([
                    EXTENDED,
                    VMEM_MAP_NEW,
                    agent,
                    if fine { 3 } else { 0 },
                    chunks,
                    at,
                ]);
                match access {
                    None => out.push(7),
                    Some(access) => {
                        out.push(0);
                        access.encode(out);
                    }
                }
            }
            Op::VmemMapAlias { handle, at } => out.extend([EXTENDED, VMEM_MAP_ALIAS, handle, at]),
            Op::VmemSetAccess {
                mapping,
                span,
                access,
            } => {
                out.extend([EXTENDED, VMEM_SET_ACCESS, mapping, span]);
                access.encode(out);
            }
            Op::VmemUnmap { mapping, how } => out.extend([EXTENDED, VMEM_UNMAP, mapping, how]),
            Op::VmemRelease { handle } => out.extend([EXTENDED, VMEM_RELEASE, handle]),
            Op::VmemAddressFree { reservation } => {
                out.extend([EXTENDED, VMEM_ADDRESS_FREE, reservation])
            }
            Op::WriteMapping {
                mapping,
                offset,
                len,
                byte,
            } => {
                out.extend([EXTENDED, WRITE_MAPPING, mapping]);
                out.extend(offset.to_le_bytes());
                out.extend(len.to_le_bytes());
                out.push(byte);
            }
            Op::AsyncCopy {
                kind,
                dst,
                src,
                offset,
                len,
                hold,
                fault,
            } => {
                let kind = match kind {
                    CopyKind::Linear => 0,
                    CopyKind::Rect => 2,
                    CopyKind::Engine => 3,
                };
                out.extend([EXTENDED, ASYNC_COPY, kind, dst, src]);
                out.extend(offset.to_le_bytes());
                out.extend(len.to_le_bytes());
                out.push(if hold { 2 } else { 0 });
                out.push(match fault {
                    CopyFault::None => 0,
                    CopyFault::Refuse => 6,
                    CopyFault::FailCompletion => 7,
                });
            }
            Op::ReleaseDependency { index } => out.extend([EXTENDED, RELEASE_DEPENDENCY, index]),
        }
    }
}

impl<'a> Arbitrary<'a> for Op {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        Ok(Op::decode(u))
    }
}

/// Decodes up to `max_ops` ops from `data`.
pub fn decode_ops(data: &[u8], max_ops: usize) -> Vec<Op> {
    let mut u = Unstructured::new(data);
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < max_ops {
        ops.push(Op::decode(&mut u));
    }
    ops
}

/// The bytes of a sequence of ops.
pub fn encode_ops(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        op.encode(&mut out);
    }
    out
}
