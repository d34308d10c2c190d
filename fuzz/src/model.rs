//! The model: what MUST be true of the library and of device memory after
//! each op, computed independently of the library from the documented
//! behaviour (README, `kernel_replay.h`, `hsa_rt.h`).
//!
//! It holds the application's view (live allocations and module variables
//! with the bytes each must hold), which allocations the inventory must
//! hold, the faults armed in the runtime, and for each snapshot what it must
//! have captured. Predictions that consume a fault (the n-th device-to-host
//! copy, the next free or allocation) advance the model's copy of it exactly
//! as the runtime advances its own.

use kernel_replay::DeclineReason;

use crate::interp::stats;
use crate::ops::PoolSel;

/// A live allocation the application made.
#[derive(Debug)]
pub struct Alloc {
    /// Unique within one input; a reused address gets a new id.
    pub id: u64,
    pub ptr: *mut u8,
    pub size: usize,
    /// Handle of the owning agent (`hsa_amd_pointer_info::agentOwner`).
    pub owner: u64,
    pub pool: PoolSel,
    pub via_region: bool,
    pub executable: bool,
    /// Whether the inventory must hold it.
    pub tracked: bool,
    /// The bytes device memory must hold.
    pub shadow: Vec<u8>,
}

impl Alloc {
    /// System memory every GPU may reach: `hsa_memory_allocate`'s (ROCr
    /// maps it for all GPUs; a CPU pool's allocation is the CPU's alone
    /// until `hsa_amd_agents_allow_access`, which the fuzzer does not call).
    pub fn granted_to_gpus(&self) -> bool {
        self.pool.is_system() && self.via_region
    }

    /// Whether a snapshot of `agent` (a GPU if `is_gpu`) captures it: its
    /// own tracked memory, and tracked host memory granted to it (every
    /// host byte is taken: no HIP in the fuzzer's process).
    pub fn captured_by(&self, agent: u64, is_gpu: bool) -> bool {
        self.tracked && (self.owner == agent || (is_gpu && self.granted_to_gpus()))
    }

    /// Whether the copy fence counts copies touching it: tracked memory a
    /// snapshot may take (host memory only once a GPU was granted it).
    pub fn fenced(&self) -> bool {
        self.tracked && (!self.pool.is_system() || self.granted_to_gpus())
    }
}

/// A module-scope variable of a loaded executable.
#[derive(Debug)]
pub struct Var {
    pub id: u64,
    pub ptr: *mut u8,
    pub size: usize,
    pub agent: u64,
    /// Index of its executable in `Model::exes`.
    pub exe: usize,
    pub shadow: Vec<u8>,
}

/// A symbol of an executable, as the walk sees it.
#[derive(Debug, Clone, Copy)]
pub struct Symbol {
    pub agent: u64,
    pub variable: bool,
    /// A variable's size (0 for kernels and empty variables).
    pub size: usize,
}

#[derive(Debug)]
pub struct Exe {
    pub handle: hsa_sim::Executable,
    pub refused: bool,
    pub symbols: Vec<Symbol>,
    /// False once destroyed (unloaded).
    pub loaded: bool,
    /// Agents whose walk of it the library's discovery cache holds (arena
    /// policies only; an unloaded executable's entries are dropped by the
    /// next discovery that lists the executables).
    pub cached_for: Vec<u64>,
    /// No symbols are added once a walk is cached: a loaded code object's
    /// symbols do not change.
    pub frozen: bool,
}

/// Where a captured region came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// A tracked allocation: `owner` its agent, `host` system memory (the
    /// CPU copies it), `shared` host memory GPUs were granted (one agent's
    /// live snapshot at a time).
    Alloc {
        id: u64,
        ptr: usize,
        size: usize,
        owner: u64,
        host: bool,
        shared: bool,
    },
    /// `registry`: captured with the executable registry (a library with
    /// storage tiers), so restored only while its executable is loaded.
    Var {
        id: u64,
        ptr: usize,
        size: usize,
        registry: bool,
    },
    /// A tracked virtual-memory mapping; `id` is its generation (a new one
    /// each time the mapping becomes tracked).
    Mapping { id: u64, ptr: usize, size: usize },
}

impl Source {
    pub fn ptr(&self) -> usize {
        match *self {
            Source::Alloc { ptr, .. } | Source::Var { ptr, .. } | Source::Mapping { ptr, .. } => {
                ptr
            }
        }
    }
    pub fn size(&self) -> usize {
        match *self {
            Source::Alloc { size, .. }
            | Source::Var { size, .. }
            | Source::Mapping { size, .. } => size,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Captured {
    pub source: Source,
    pub bytes: Vec<u8>,
}

/// What a snapshot must be.
#[derive(Debug, Clone)]
pub enum Expected {
    Ok(Vec<Captured>),
    Declined(DeclineReason),
}

impl Expected {
    pub fn reason(&self) -> Option<DeclineReason> {
        match self {
            Expected::Ok(_) => None,
            Expected::Declined(reason) => Some(*reason),
        }
    }
    pub fn regions(&self) -> &[Captured] {
        match self {
            Expected::Ok(regions) => regions,
            Expected::Declined(_) => &[],
        }
    }
    pub fn bytes(&self) -> u64 {
        self.regions().iter().map(|r| r.bytes.len() as u64).sum()
    }
}

/// What a restore must report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Report {
    pub restored: usize,
    pub skipped_not_live: usize,
    pub failed: usize,
}

/// The runtime's armed faults and the tool's settings, as the model knows
/// them.
#[derive(Debug, Default)]
pub struct Faults {
    pub pointer_info: bool,
    /// Device-to-host copies left until the failing one (1 = the next).
    pub d2h_countdown: Option<u64>,
    /// Addresses copies into which fail (restores; the runtime keeps 16).
    pub h2d: Vec<usize>,
    /// Addresses copies out of which fail (captures; the runtime keeps 16).
    pub from: Vec<usize>,
    pub failing_frees: u32,
    pub failing_allocations: u32,
    pub host_budget: u64,
    pub iteration: bool,
    /// Failing symbol-query attributes (indices into `QUERY_ATTRIBUTES`).
    pub query: [bool; 3],
    pub iterator_set: bool,
}

pub const MAX_H2D_FAULTS: usize = 16;

fn covers(addresses: &[usize], begin: usize, size: usize) -> bool {
    addresses.iter().any(|&a| a >= begin && a - begin < size)
}

impl Faults {
    /// True if a restore copy to `[dst, dst + size)` must fail.
    pub fn h2d_covers(&self, dst: usize, size: usize) -> bool {
        covers(&self.h2d, dst, size)
    }

    /// True if a capture copy from `[src, src + size)` must fail.
    pub fn from_covers(&self, src: usize, size: usize) -> bool {
        covers(&self.from, src, size)
    }

    /// One device-to-host copy: true if it must fail.
    pub fn d2h_copy_fails(&mut self) -> bool {
        match self.d2h_countdown {
            Some(1) => {
                self.d2h_countdown = None;
                true
            }
            Some(n) => {
                self.d2h_countdown = Some(n - 1);
                false
            }
            None => false,
        }
    }
}

/// The application's and the library's state as they must be.
#[derive(Debug, Default)]
pub struct Model {
    pub allocs: Vec<Alloc>,
    pub vars: Vec<Var>,
    pub exes: Vec<Exe>,
    pub tracking: bool,
    pub finalized: bool,
    pub faults: Faults,
    /// The storage policy (`Baseline` unless the library has tiers and an
    /// op chose another).
    pub policy: Policy,
    /// The library holds arenas (leased to live snapshots or retained) whose
    /// size the model does not follow: host-memory figures and the host
    /// budget are then only bounded, not exact.
    pub arenas_held: bool,
    /// Virtual memory (empty without the vmem API).
    pub vmem: Vmem,
    /// Application async copies not yet completed, in submission order (the
    /// runtime runs them in that order, each once its dependency is 0).
    pub copies: Vec<PendingCopy>,
    /// Dependency signals held at 1 by the application, oldest first.
    pub held: Vec<u64>,
    next_id: u64,
}

/// Bytes of one virtual-memory chunk: the page size (handles are whole
/// 4 KiB granules, mappings whole pages).
pub const CHUNK: usize = 4096;

/// A reserved virtual range of whole chunks.
#[derive(Debug)]
pub struct Reservation {
    pub base: usize,
    pub chunks: usize,
}

impl Reservation {
    pub fn end(&self) -> usize {
        self.base + self.chunks * CHUNK
    }
}

/// A physical handle (`hsa_amd_vmem_handle_create`), alive while it is not
/// released or still mapped.
#[derive(Debug)]
pub struct Handle {
    pub value: u64,
    /// The GPU whose device pool backs it.
    pub gpu: u64,
    pub coarse: bool,
    pub size: usize,
    pub released: bool,
    /// The harness's own view of its bytes: the handle mapped read-write
    /// for the CPU at a private address through the runtime's un-wrapped
    /// table (the library never sees it), through which kernels' stores are
    /// made and memory is checked whatever the application's mappings
    /// allow the CPU.
    pub probe: usize,
    /// The bytes it must hold.
    pub shadow: Vec<u8>,
}

/// A mapping the application made (`hsa_amd_vmem_map`).
#[derive(Debug)]
pub struct Mapping {
    pub va: usize,
    pub size: usize,
    pub handle: u64,
    /// The handle's GPU (the owner the library gives the region).
    pub owner: u64,
    pub coarse: bool,
    /// Whether the inventory must hold it.
    pub tracked: bool,
    /// Its generation while tracked.
    pub id: u64,
    /// The wrappers noted it (made through them since the last finalize).
    pub seen: bool,
    /// The library classified its handle's pool (a set_access over it).
    pub classified: bool,
}

/// The application's virtual memory.
#[derive(Debug, Default)]
pub struct Vmem {
    pub reservations: Vec<Reservation>,
    pub handles: Vec<Handle>,
    pub mappings: Vec<Mapping>,
    /// Armed `inject(Fault::NthVmem*, 0, 1)` per operation (create, release,
    /// map, unmap, set_access).
    pub failing: [bool; 5],
    /// Whether the runtime takes one set_access over several contiguous
    /// mappings (ROCm 6.4+ headers), once seen.
    pub spans_accepted: Option<bool>,
}

pub const VMEM_HANDLE_CREATE: usize = 0;
pub const VMEM_HANDLE_RELEASE: usize = 1;
pub const VMEM_MAP: usize = 2;
pub const VMEM_UNMAP: usize = 3;
pub const VMEM_SET_ACCESS: usize = 4;

impl Vmem {
    /// Consumes the armed fault of `op`: true if this call (one that passes
    /// the runtime's argument checks) must fail.
    pub fn fails(&mut self, op: usize) -> bool {
        std::mem::take(&mut self.failing[op])
    }

    pub fn handle(&self, value: u64) -> &Handle {
        self.handles
            .iter()
            .find(|h| h.value == value)
            .expect("a live handle")
    }

    pub fn handle_mut(&mut self, value: u64) -> &mut Handle {
        self.handles
            .iter_mut()
            .find(|h| h.value == value)
            .expect("a live handle")
    }

    /// Whether `[va, va + size)` meets a mapping.
    pub fn meets_mapping(&self, va: usize, size: usize) -> bool {
        self.mappings
            .iter()
            .any(|m| m.va < va + size && va < m.va + m.size)
    }

    /// The reservation holding all of `[va, va + size)`.
    pub fn reservation_holding(&self, va: usize, size: usize) -> Option<&Reservation> {
        self.reservations
            .iter()
            .find(|r| r.base <= va && va + size <= r.end())
    }
}

/// Where an endpoint of an application copy lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// Allocation `id`.
    Alloc(u64),
    /// Handle `value`, through one of its mappings (at the same offsets:
    /// a mapping shows its handle from byte 0).
    Handle(u64),
}

/// One endpoint: where, its first byte, and the mapping or allocation
/// address it was reached through.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    pub loc: Loc,
    /// The allocation's base or the mapping's address.
    pub base: usize,
    pub size: usize,
}

/// One row of a copy: `len` bytes from `src_off` to `dst_off`.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub dst_off: usize,
    pub src_off: usize,
    pub len: usize,
}

/// An application copy the runtime accepted and has not completed.
#[derive(Debug, Clone)]
pub struct PendingCopy {
    /// The application's completion signal (value 1 until it completes).
    pub signal: u64,
    /// The dependency signal, if it was given one (`Model::held` while 1).
    pub dependency: Option<u64>,
    pub dst: Endpoint,
    pub src: Endpoint,
    pub rows: Vec<Row>,
    /// Agents whose tracked memory it touched when submitted: the fence
    /// counts it in flight there.
    pub fenced: Vec<u64>,
    /// It fails while executing (nothing copied, signal -1).
    pub fails: bool,
}

impl PendingCopy {
    /// Whether it touches `[base, base + size)` through the same address.
    pub fn touches(&self, base: usize) -> bool {
        self.dst.base == base || self.src.base == base
    }
}

/// `kr_storage_policy_t`, as far as the model distinguishes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    /// One buffer and one blocking copy per region: modelled exactly.
    #[default]
    Baseline,
    Auto,
    Device,
    Pinned,
    Pageable,
}

impl Policy {
    pub fn from_byte(b: u8) -> Policy {
        match b % 5 {
            0 => Policy::Baseline,
            1 => Policy::Auto,
            2 => Policy::Device,
            3 => Policy::Pinned,
            _ => Policy::Pageable,
        }
    }

    /// Arenas, batched copies, the discovery cache and the registry.
    pub fn arenas(self) -> bool {
        self != Policy::Baseline
    }
}

/// A predicted snapshot, and which other outcome the library may pick
/// where the model cannot tell (arena sizes it does not follow).
#[derive(Debug, Clone)]
pub struct Prediction {
    pub expected: Expected,
    /// The library may decline with HOST_MEMORY instead.
    pub host_memory_possible: bool,
}

/// The bytes an application writes into a fresh buffer: distinct per
/// allocation, so a region written into the wrong place shows.
pub fn pattern(id: u64, len: usize) -> Vec<u8> {
    let seed = (id as u8).wrapping_mul(0x3B) ^ 0x5A;
    (0..len)
        .map(|i| seed.wrapping_add((i as u8).wrapping_mul(7)) ^ ((i >> 8) as u8))
        .collect()
}

impl Model {
    pub fn new() -> Self {
        Model {
            faults: Faults {
                iterator_set: true,
                ..Faults::default()
            },
            next_id: 1,
            ..Model::default()
        }
    }

    pub fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Whether the inventory must record a successful allocation.
    pub fn must_track(&self, pool: PoolSel, executable: bool, via_region: bool) -> bool {
        // The executable flag exists only on the pool-allocate path.
        let executable_flag = executable && !via_region;
        self.tracking
            && !self.finalized
            && pool.tracked()
            && !executable_flag
            && !self.faults.pointer_info
    }

    /// `(count, bytes)` the inventory must report for `agent`.
    pub fn tracked_totals(&self, agent: u64) -> (usize, u64) {
        let allocs = self
            .allocs
            .iter()
            .filter(|a| a.tracked && a.owner == agent)
            .map(|a| a.size);
        let mappings = self
            .vmem
            .mappings
            .iter()
            .filter(|m| m.tracked && m.owner == agent)
            .map(|m| m.size);
        allocs
            .chain(mappings)
            .fold((0, 0), |(n, b), size| (n + 1, b + size as u64))
    }

    /// `(count, bytes)` of the allocations and mappings a snapshot of
    /// `agent` takes (`kr_estimate_footprint` less the variables).
    pub fn captured_totals(&self, agent: u64, is_gpu: bool) -> (usize, u64) {
        let (regions, bytes) = self.tracked_totals(agent);
        self.allocs
            .iter()
            .filter(|a| a.captured_by(agent, is_gpu) && a.owner != agent)
            .fold((regions, bytes), |(n, b), a| (n + 1, b + a.size as u64))
    }

    /// `(count, bytes)` of the module variables `kr_estimate_footprint`
    /// adds to the tracked regions for `agent`: it walks the loaded
    /// executables as a snapshot does, through the discovery cache under
    /// every policy (so what it walks is cached), and counts what the cache
    /// holds for the loaded ones: every loaded executable's variables when
    /// the walk succeeds, those walked before a failure otherwise. Nothing
    /// after finalize, or without an iterator to walk with.
    pub fn estimated_variables(&mut self, agent: u64) -> (usize, u64) {
        if self.finalized {
            return (0, 0);
        }
        if self.faults.iterator_set {
            self.walk_fails(agent, true);
        }
        self.cached_variables(agent)
    }

    /// `(count, bytes)` of the non-empty module variables of loaded
    /// executables the discovery cache holds for `agent`.
    pub fn cached_variables(&self, agent: u64) -> (usize, u64) {
        self.exes
            .iter()
            .filter(|e| e.loaded && e.cached_for.contains(&agent))
            .flat_map(|e| e.symbols.iter())
            .filter(|s| s.variable && s.agent == agent && s.size > 0)
            .fold((0, 0), |(n, b), s| (n + 1, b + s.size as u64))
    }

    /// Mappings owned by `agent` the wrappers saw and classified that are
    /// not tracked (`kr_untracked_summary`): count and bytes.
    pub fn uncaptured_mappings(&self, agent: u64) -> (usize, u64) {
        self.vmem
            .mappings
            .iter()
            .filter(|m| m.seen && m.classified && m.owner == agent && !m.tracked)
            .fold((0, 0), |(n, b), m| (n + 1, b + m.size as u64))
    }

    /// Copies pending that the fence counts in flight on `agent`.
    pub fn in_flight(&self, agent: u64) -> u64 {
        self.copies
            .iter()
            .filter(|c| c.fenced.contains(&agent))
            .count() as u64
    }

    /// Whether a pending copy is held back by a dependency (the runtime's
    /// one copy worker then waits, and every later async copy with it).
    pub fn copies_blocked(&self) -> bool {
        !self.copies.is_empty()
    }

    /// Whether a pending copy touches the allocation or mapping at `base`.
    pub fn copy_touches(&self, base: usize) -> bool {
        self.copies.iter().any(|c| c.touches(base))
    }

    /// The bytes at an endpoint's location.
    pub fn bytes_at(&mut self, loc: Loc) -> &mut Vec<u8> {
        match loc {
            Loc::Alloc(id) => {
                &mut self
                    .allocs
                    .iter_mut()
                    .find(|a| a.id == id)
                    .expect("a copy's allocation is live")
                    .shadow
            }
            Loc::Handle(value) => &mut self.vmem.handle_mut(value).shadow,
        }
    }

    /// The effect of a completed copy on device memory: row by row, each
    /// read when it runs (like the runtime's memmove per row).
    pub fn apply_copy(&mut self, copy: &PendingCopy) {
        for row in &copy.rows {
            let bytes = self.bytes_at(copy.src.loc)[row.src_off..row.src_off + row.len].to_vec();
            self.bytes_at(copy.dst.loc)[row.dst_off..row.dst_off + row.len].copy_from_slice(&bytes);
        }
    }

    /// The one allocation-time fault: true if this allocation must fail.
    pub fn allocation_fails(&mut self) -> bool {
        if self.faults.failing_allocations > 0 {
            self.faults.failing_allocations -= 1;
            true
        } else {
            false
        }
    }

    /// The one free-time fault: true if this free must fail.
    pub fn free_fails(&mut self) -> bool {
        if self.faults.failing_frees > 0 {
            self.faults.failing_frees -= 1;
            true
        } else {
            false
        }
    }

    /// Whether discovering the module variables of `agent` must fail. Walks
    /// executables in load order like the library; under an arena policy an
    /// executable walked completely before for `agent` comes from the cache
    /// (no runtime call, so no fault), and each complete walk is cached.
    fn discovery_fails(&mut self, agent: u64) -> bool {
        self.walk_fails(agent, self.policy.arenas())
    }

    /// The walk of discovery, with or without the cache; true if it fails.
    fn walk_fails(&mut self, agent: u64, cache: bool) -> bool {
        if self.faults.iteration {
            return true;
        }
        let [type_fails, address_fails, size_fails] = self.faults.query;
        if cache {
            // The executables were listed: the cache drops the entries of
            // those no longer loaded.
            for exe in self.exes.iter_mut().filter(|e| !e.loaded) {
                exe.cached_for.clear();
            }
        }
        for exe in self.exes.iter_mut().filter(|e| e.loaded) {
            if cache && exe.cached_for.contains(&agent) {
                continue;
            }
            let fails = exe.refused
                || exe.symbols.iter().any(|s| {
                    s.agent == agent
                        && (type_fails || (s.variable && (address_fails || size_fails)))
                });
            if fails {
                return true;
            }
            if cache {
                exe.cached_for.push(agent);
                exe.frozen = true;
            }
        }
        false
    }

    /// What `kr_snap(agent)` must return, with `in_use` host bytes held by
    /// live snapshots (exactly, when no arenas are held). `is_gpu`: the agent
    /// is a GPU (only GPUs have a device tier). Advances the device-to-host
    /// fault countdown by the copies a baseline capture makes.
    ///
    /// `held`: the shared regions (agent, base) other live snapshots hold;
    /// a snapshot that would capture one of another agent's declines.
    pub fn predict_snap(
        &mut self,
        agent: u64,
        is_gpu: bool,
        in_use: u64,
        held: &[(u64, usize)],
    ) -> Prediction {
        // Host memory a GPU captures is the CPU's: the snapshot waits for
        // the copies in flight on it too.
        let host_owners: Vec<u64> = self
            .allocs
            .iter()
            .filter(|a| a.captured_by(agent, is_gpu) && a.owner != agent)
            .map(|a| a.owner)
            .collect();
        let fenced =
            self.in_flight(agent) > 0 || host_owners.iter().any(|&owner| self.in_flight(owner) > 0);
        let budget = self.faults.host_budget;
        // With arenas the host room depends on arena sizes the model does
        // not follow: any capture may then meet the budget.
        let host_memory_possible = budget != 0 && (self.policy.arenas() || self.arenas_held);
        let declined = |reason| Prediction {
            expected: Expected::Declined(reason),
            host_memory_possible: false,
        };
        if self.finalized {
            return declined(DeclineReason::Finalized);
        }
        if !self.faults.iterator_set {
            return declined(DeclineReason::NoExecutableIterator);
        }
        if self.discovery_fails(agent) {
            return declined(DeclineReason::SymbolEnumeration);
        }
        // An application copy in flight on the agent's tracked memory is
        // waited for up to the fence timeout; the harness's pending copies
        // are all held by a dependency, so the wait runs out.
        if fenced {
            return declined(DeclineReason::CopiesInFlight);
        }
        // Tracked allocations and mappings in address order, then the
        // non-empty variables of loaded executables in address order.
        let mut tracked: Vec<Captured> = self
            .allocs
            .iter()
            .filter(|a| a.captured_by(agent, is_gpu))
            .map(|a| Captured {
                source: Source::Alloc {
                    id: a.id,
                    ptr: a.ptr as usize,
                    size: a.size,
                    owner: a.owner,
                    host: a.pool.is_system(),
                    shared: a.granted_to_gpus(),
                },
                bytes: a.shadow.clone(),
            })
            .chain(
                self.vmem
                    .mappings
                    .iter()
                    .filter(|m| m.tracked && m.owner == agent)
                    .map(|m| Captured {
                        source: Source::Mapping {
                            id: m.id,
                            ptr: m.va,
                            size: m.size,
                        },
                        bytes: self.vmem.handle(m.handle).shadow[..m.size].to_vec(),
                    }),
            )
            .collect();
        tracked.sort_by_key(|r| r.source.ptr());
        // Shared regions (host memory GPUs were granted): one agent's live
        // snapshot at a time.
        let busy = self.shared_bases(&tracked).into_iter().any(|base| {
            held.iter()
                .any(|&(holder, held_base)| holder != agent && held_base == base)
        });
        if busy {
            return declined(DeclineReason::SharedRegionBusy);
        }
        let mut vars: Vec<&Var> = self
            .vars
            .iter()
            .filter(|v| v.agent == agent && v.size > 0)
            .collect();
        vars.sort_by_key(|v| v.ptr as usize);
        // The library wraps `hsa_executable_destroy` and every capture
        // (baseline too) records its variables' executable: restores skip
        // those of an unloaded executable.
        let registry = true;
        let plan: Vec<Captured> = tracked
            .into_iter()
            .chain(vars.iter().map(|v| Captured {
                source: Source::Var {
                    id: v.id,
                    ptr: v.ptr as usize,
                    size: v.size,
                    registry,
                },
                bytes: v.shadow.clone(),
            }))
            .collect();
        let outcome = |expected| Prediction {
            expected,
            host_memory_possible,
        };
        if self.policy.arenas() {
            // The whole layout is leased first, then every region copied.
            // Only a GPU has a device pool and a host pool to pin from: a
            // forced device or pinned tier cannot hold the CPU agent's
            // regions, but for host memory, always kept pageable.
            let needs_a_tier = !is_gpu && plan.iter().any(|r| !self.by_cpu(&r.source));
            if self.policy == Policy::Device && needs_a_tier {
                return declined(DeclineReason::DeviceMemory);
            }
            if self.policy == Policy::Pinned && needs_a_tier {
                return declined(DeclineReason::HostMemory);
            }
            let copy_fails = plan.iter().any(|r| {
                !self.by_cpu(&r.source) && self.faults.from_covers(r.source.ptr(), r.source.size())
            });
            return outcome(if copy_fails {
                Expected::Declined(DeclineReason::CopyFailed)
            } else {
                Expected::Ok(plan)
            });
        }
        // Baseline, region by region: claim the host buffer against the
        // budget, then copy from the device.
        let mut claimed = 0u64;
        for region in &plan {
            let size = region.bytes.len() as u64;
            if budget != 0 && in_use + claimed + size > budget {
                return outcome(Expected::Declined(DeclineReason::HostMemory));
            }
            claimed += size;
            // Host memory is copied by the CPU: no runtime copy to fail.
            if self.by_cpu(&region.source) {
                continue;
            }
            let d2h_fails = self.faults.d2h_copy_fails();
            if d2h_fails
                || self
                    .faults
                    .from_covers(region.source.ptr(), region.source.size())
            {
                return outcome(Expected::Declined(DeclineReason::CopyFailed));
            }
        }
        outcome(Expected::Ok(plan))
    }

    /// The bases of the shared regions among `plan`: host memory granted to
    /// GPUs, which more than one agent's snapshot can take.
    pub fn shared_bases(&self, plan: &[Captured]) -> Vec<usize> {
        plan.iter()
            .filter_map(|r| match r.source {
                Source::Alloc { ptr, shared, .. } => shared.then_some(ptr),
                Source::Var { .. } | Source::Mapping { .. } => None,
            })
            .collect()
    }

    /// Whether the library copies a captured region with the CPU (host
    /// memory), so the runtime's copy faults do not reach it.
    fn by_cpu(&self, source: &Source) -> bool {
        matches!(*source, Source::Alloc { host: true, .. })
    }

    /// What a restore of `expected` must do, applied to the model's device
    /// memory.
    pub fn apply_restore(&mut self, expected: &Expected, agent: u64) -> Report {
        let mut report = Report::default();
        let Expected::Ok(regions) = expected else {
            return report;
        };
        if self.finalized {
            report.skipped_not_live = regions.len();
            return report;
        }
        // An application copy in flight on the agent's tracked memory (or
        // on the CPU's, for its host regions) past the fence timeout:
        // nothing is written, every region failed.
        let owners_busy = regions.iter().any(|r| match r.source {
            Source::Alloc { owner, .. } => self.in_flight(owner) > 0,
            Source::Var { .. } | Source::Mapping { .. } => false,
        });
        if self.in_flight(agent) > 0 || owners_busy {
            report.failed = regions.len();
            return report;
        }
        for region in regions {
            let (ptr, size) = (region.source.ptr(), region.source.size());
            let by_cpu = self.by_cpu(&region.source);
            let shadow = match region.source {
                Source::Mapping { id, .. } => {
                    let Some(handle) = self
                        .vmem
                        .mappings
                        .iter()
                        .find(|m| m.id == id && m.tracked)
                        .map(|m| m.handle)
                    else {
                        report.skipped_not_live += 1;
                        stats::bump(&stats::MAPPINGS_SKIPPED, 1);
                        continue;
                    };
                    let shadow = &mut self.vmem.handle_mut(handle).shadow;
                    shadow[..size].copy_from_slice(&region.bytes);
                    report.restored += 1;
                    stats::bump(&stats::MAPPINGS_RESTORED, 1);
                    continue;
                }
                Source::Alloc { id, .. } => {
                    match self.allocs.iter_mut().find(|a| a.id == id && a.tracked) {
                        Some(alloc) => &mut alloc.shadow,
                        None => {
                            report.skipped_not_live += 1;
                            continue;
                        }
                    }
                }
                Source::Var { id, registry, .. } => {
                    match self.vars.iter_mut().find(|v| v.id == id) {
                        Some(var) => &mut var.shadow,
                        // Unloaded: only a registry snapshot can hold it.
                        None if registry => {
                            report.skipped_not_live += 1;
                            continue;
                        }
                        None => panic!("harness: a baseline snapshot's variable was unloaded"),
                    }
                }
            };
            if !by_cpu && covers(&self.faults.h2d, ptr, size) {
                report.failed += 1;
            } else {
                shadow.copy_from_slice(&region.bytes);
                report.restored += 1;
            }
        }
        report
    }

    /// The teardown guard.
    pub fn finalize(&mut self) {
        self.finalized = true;
        self.tracking = false;
        for alloc in &mut self.allocs {
            alloc.tracked = false;
        }
        // The inventory, the mappings the wrappers saw and the discovery
        // cache are dropped.
        for mapping in &mut self.vmem.mappings {
            mapping.tracked = false;
            mapping.seen = false;
            mapping.classified = false;
        }
        for exe in &mut self.exes {
            exe.cached_for.clear();
        }
    }
}
