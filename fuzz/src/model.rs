//! The model: what MUST be true of the library and of device memory after
//! each op, computed independently of the library from the documented
//! behaviour (README, `kernel_replay.h`, `hsa_sim.h`).
//!
//! It holds the application's view (live allocations and module variables
//! with the bytes each must hold), which allocations the inventory must
//! hold, the faults armed in the runtime, and for each snapshot what it must
//! have captured. Predictions that consume a fault (the n-th device-to-host
//! copy, the next free or allocation) advance the model's copy of it exactly
//! as the runtime advances its own.

use kernel_replay::ffi::types::kr_decline_reason_t;

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
}

#[derive(Debug)]
pub struct Exe {
    pub handle: hsa_sim::Executable,
    pub refused: bool,
    pub symbols: Vec<Symbol>,
    /// False once destroyed (unloaded).
    pub loaded: bool,
    /// Agents whose walk of it the library's discovery cache holds (arena
    /// policies only).
    pub cached_for: Vec<u64>,
    /// No symbols are added once a walk is cached: a loaded code object's
    /// symbols do not change.
    pub frozen: bool,
}

/// Where a captured region came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Alloc {
        id: u64,
        ptr: usize,
        size: usize,
    },
    /// `registry`: captured with the executable registry (a library with
    /// storage tiers), so restored only while its executable is loaded.
    Var {
        id: u64,
        ptr: usize,
        size: usize,
        registry: bool,
    },
}

impl Source {
    pub fn ptr(&self) -> usize {
        match *self {
            Source::Alloc { ptr, .. } | Source::Var { ptr, .. } => ptr,
        }
    }
    pub fn size(&self) -> usize {
        match *self {
            Source::Alloc { size, .. } | Source::Var { size, .. } => size,
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
    Declined(kr_decline_reason_t),
}

impl Expected {
    pub fn reason(&self) -> kr_decline_reason_t {
        match self {
            Expected::Ok(_) => kr_decline_reason_t::KR_DECLINE_NONE,
            Expected::Declined(reason) => *reason,
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
    next_id: u64,
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
            && pool.coarse()
            && !executable_flag
            && !self.faults.pointer_info
    }

    /// `(count, bytes)` the inventory must report for `agent`.
    pub fn tracked_totals(&self, agent: u64) -> (usize, u64) {
        self.allocs
            .iter()
            .filter(|a| a.tracked && a.owner == agent)
            .fold((0, 0), |(n, b), a| (n + 1, b + a.size as u64))
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
        if self.faults.iteration {
            return true;
        }
        let [type_fails, address_fails, size_fails] = self.faults.query;
        let cache = self.policy.arenas();
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
    pub fn predict_snap(&mut self, agent: u64, is_gpu: bool, in_use: u64) -> Prediction {
        use kr_decline_reason_t::*;
        let budget = self.faults.host_budget;
        // With arenas the host room depends on arena sizes the model does
        // not follow: any capture may then meet the budget.
        let host_memory_possible = budget != 0 && (self.policy.arenas() || self.arenas_held);
        let declined = |reason| Prediction {
            expected: Expected::Declined(reason),
            host_memory_possible: false,
        };
        if self.finalized {
            return declined(KR_DECLINE_FINALIZED);
        }
        if !self.faults.iterator_set {
            return declined(KR_DECLINE_NO_EXECUTABLE_ITERATOR);
        }
        if self.discovery_fails(agent) {
            return declined(KR_DECLINE_SYMBOL_ENUMERATION);
        }
        // Tracked allocations in address order, then the non-empty
        // variables of loaded executables in address order.
        let mut tracked: Vec<&Alloc> = self
            .allocs
            .iter()
            .filter(|a| a.tracked && a.owner == agent)
            .collect();
        tracked.sort_by_key(|a| a.ptr as usize);
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
            .iter()
            .map(|a| Captured {
                source: Source::Alloc {
                    id: a.id,
                    ptr: a.ptr as usize,
                    size: a.size,
                },
                bytes: a.shadow.clone(),
            })
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
            // regions.
            if self.policy == Policy::Device && !is_gpu && !plan.is_empty() {
                return declined(KR_DECLINE_DEVICE_MEMORY);
            }
            if self.policy == Policy::Pinned && !is_gpu && !plan.is_empty() {
                return declined(KR_DECLINE_HOST_MEMORY);
            }
            let copy_fails = plan
                .iter()
                .any(|r| self.faults.from_covers(r.source.ptr(), r.source.size()));
            return outcome(if copy_fails {
                Expected::Declined(KR_DECLINE_COPY_FAILED)
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
                return outcome(Expected::Declined(KR_DECLINE_HOST_MEMORY));
            }
            claimed += size;
            let d2h_fails = self.faults.d2h_copy_fails();
            if d2h_fails
                || self
                    .faults
                    .from_covers(region.source.ptr(), region.source.size())
            {
                return outcome(Expected::Declined(KR_DECLINE_COPY_FAILED));
            }
        }
        outcome(Expected::Ok(plan))
    }

    /// What a restore of `expected` must do, applied to the model's device
    /// memory.
    pub fn apply_restore(&mut self, expected: &Expected) -> Report {
        let mut report = Report::default();
        let Expected::Ok(regions) = expected else {
            return report;
        };
        if self.finalized {
            report.skipped_not_live = regions.len();
            return report;
        }
        for region in regions {
            let (ptr, size) = (region.source.ptr(), region.source.size());
            let shadow = match region.source {
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
            if covers(&self.faults.h2d, ptr, size) {
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
    }
}
