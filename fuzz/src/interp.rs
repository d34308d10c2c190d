//! The interpreter: runs ops through the library exactly as an application
//! and a tool would (allocations and frees through the runtime's wrapped
//! tables, `kr_*` for the tool side, direct stores for kernels), and after
//! every op asserts that the library and device memory are what the model
//! says they must be.

use std::ffi::c_void;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;
use kernel_replay::hsa::POOL_ALLOCATE_EXECUTABLE_FLAG;
use kernel_replay::DeclineReason;

use crate::app::{self, SUCCESS};
use crate::model::{
    pattern, Alloc, Exe, Expected, Model, Policy, Prediction, Report, Symbol, Var, MAX_H2D_FAULTS,
};
use crate::ops::{Fault, Op, PoolSel, QUERY_ATTRIBUTES, SIZE_CLASSES, VARIABLE_SIZES};

mod copies;
mod vmem;

/// How long the library's fence waits for application copies in flight
/// before a snapshot declines (`kr_set_copy_fence_timeout`): short, since
/// every copy the harness leaves pending is held by a dependency and the
/// wait always runs out.
pub const FENCE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(10);

/// Most live allocations an input may hold.
pub const MAX_ALLOCS: usize = 64;
/// Most live snapshots an input may hold.
pub const MAX_SNAPS: usize = 16;
/// Most executables created per input (each gets variables and kernels).
pub const MAX_EXES: usize = 4;
/// Most module variables.
pub const MAX_VARS: usize = 24;

/// What the interpreter has exercised so far in this process (so a runner
/// can show that every outcome it claims to check was reached).
pub mod stats {
    use std::sync::atomic::{AtomicU64, Ordering};

    pub static OPS: AtomicU64 = AtomicU64::new(0);
    pub static TRACKED_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
    pub static REUSED_ADDRESSES: AtomicU64 = AtomicU64::new(0);
    pub static FAILED_FREES: AtomicU64 = AtomicU64::new(0);
    /// Snapshots by decline reason (index = `kr_decline_reason_t`, 0 = ok).
    pub static SNAPS: [AtomicU64; 13] = [const { AtomicU64::new(0) }; 13];
    /// Complete snapshots taken under an arena policy.
    pub static ARENA_SNAPS: AtomicU64 = AtomicU64::new(0);
    pub static UNLOADS: AtomicU64 = AtomicU64::new(0);
    pub static RESTORED: AtomicU64 = AtomicU64::new(0);
    pub static SKIPPED_NOT_LIVE: AtomicU64 = AtomicU64::new(0);
    pub static RESTORE_FAILED: AtomicU64 = AtomicU64::new(0);
    pub static REPLAYS: AtomicU64 = AtomicU64::new(0);
    pub static FINALIZED: AtomicU64 = AtomicU64::new(0);
    /// Mappings that became tracked regions, and tracked ones retired by a
    /// set_access.
    pub static MAPPINGS_TRACKED: AtomicU64 = AtomicU64::new(0);
    pub static MAPPINGS_RETIRED: AtomicU64 = AtomicU64::new(0);
    /// Mapping regions a restore wrote back, and skipped as not live.
    pub static MAPPINGS_RESTORED: AtomicU64 = AtomicU64::new(0);
    pub static MAPPINGS_SKIPPED: AtomicU64 = AtomicU64::new(0);
    /// Handles mapped at a second address.
    pub static ALIASES: AtomicU64 = AtomicU64::new(0);
    /// Unmaps the runtime refused (partial, or injected).
    pub static REFUSED_UNMAPS: AtomicU64 = AtomicU64::new(0);
    /// Checks that saw mappings the library reports as not captured.
    pub static UNCAPTURED_MAPPINGS: AtomicU64 = AtomicU64::new(0);
    /// Application copies: completed, failed while executing, refused at
    /// submission, and accepted through the fence.
    pub static COMPLETED_COPIES: AtomicU64 = AtomicU64::new(0);
    pub static FAILED_COPIES: AtomicU64 = AtomicU64::new(0);
    pub static REFUSED_COPIES: AtomicU64 = AtomicU64::new(0);
    pub static FENCED_COPIES: AtomicU64 = AtomicU64::new(0);
    /// Restores that wrote nothing because a copy was in flight.
    pub static FENCED_RESTORES: AtomicU64 = AtomicU64::new(0);

    pub fn bump(counter: &AtomicU64, by: u64) {
        counter.fetch_add(by, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// A live snapshot and what it must be.
struct LiveSnap {
    handle: *mut kr_snapshot_t,
    agent: u64,
    /// The shared regions it holds (bases), until it is freed.
    claims: Vec<usize>,
    expected: Expected,
    /// Complete and taken under an arena policy (holds arenas).
    arena: bool,
    /// Its restores batch their copies (asynchronous copies, run by the
    /// runtime's one copy worker behind any pending application copy).
    batched: bool,
}

/// A replay window in progress (the pass callback's view).
struct Window {
    agent: u64,
    expected: Expected,
    /// Whether the window's own snapshot counts in the exact host figure.
    baseline: bool,
    target: Option<Target>,
    byte: u8,
    passes_seen: Vec<u32>,
    restore_failures: usize,
}

#[derive(Clone, Copy)]
enum Target {
    Alloc(u64),
    Var(u64),
}

/// Whether `Finalize` ops run. They need the library's fuzzing-only reset
/// (`Gate::reset_for_fuzzing`, compiled under `--cfg fuzzing`) so that one
/// input's finalize does not carry over to the next; without it they are
/// skipped.
pub const FINALIZE_ENABLED: bool = cfg!(fuzzing);

pub struct Interp {
    sim: hsa_sim::SimSession,
    /// GPU 0, GPU 1, the CPU agent.
    agents: [hsa_sim::Agent; 3],
    /// The runtime's copy-violation counter when the input started.
    violations_before: u64,
    /// Its count of uses of signals that do not exist, likewise.
    invalid_signals_before: u64,
    /// Blocks this input freed (base, mapped bytes), still quarantined: the
    /// runtime releases its oldest blocks first, and those are earlier
    /// inputs' (an input frees far fewer than its 65,536-block cap).
    freed: Vec<(usize, usize)>,
    model: Model,
    snaps: Vec<LiveSnap>,
    window: Option<Window>,
    /// Arenas are retained for reuse (an arena snapshot was freed since the
    /// last trim or finalize).
    retained: bool,
    /// `kr_set_batched_copies` (on at the start of every input).
    batched: bool,
    /// A check that failed inside the pass callback, raised after
    /// `kr_replay` returns (a panic may not unwind through C).
    pass_panic: Option<Box<dyn std::any::Any + Send>>,
    trace: bool,
    step: usize,
}

impl Interp {
    /// A clean state: the runtime reset (2 GPUs), the library installed
    /// (once per process) with the runtime's iterator, tracking off, no
    /// faults, no host budget, nothing tracked and no host memory held.
    pub fn new() -> Interp {
        let sim = clean_session();
        let agents = [sim.gpu(0), sim.gpu(1), sim.cpu()];
        let violations_before = sim.count(hsa_sim::Counter::CopyViolations);
        let invalid_signals_before = sim.count(hsa_sim::Counter::InvalidSignalUses);
        Interp {
            sim,
            agents,
            violations_before,
            invalid_signals_before,
            freed: Vec::new(),
            model: Model::new(),
            snaps: Vec::new(),
            window: None,
            retained: false,
            batched: true,
            pass_panic: None,
            trace: std::env::var_os("KR_FUZZ_TRACE").is_some(),
            step: 0,
        }
    }

    fn agent(&self, sel: u8) -> hsa_sim::Agent {
        self.agents[usize::from(sel % 3)]
    }

    /// Runs every op, checking after each, then cleans up (frees every live
    /// allocation, drops every snapshot) and checks the end state.
    pub fn run(mut self, ops: &[Op]) {
        for op in ops {
            if self.trace {
                eprintln!("[{}] {op:?}", self.step);
            }
            self.apply(op);
            self.check(op);
            stats::bump(&stats::OPS, 1);
            self.step += 1;
        }
        self.finish();
    }

    /// With `KR_FUZZ_TRACE`, prints what an op did under it.
    fn note(&self, what: std::fmt::Arguments) {
        if self.trace {
            eprintln!("      -> {what}");
        }
    }

    fn fail(&self, op: &Op, what: std::fmt::Arguments) -> ! {
        panic!(
            "step {} ({op:?}): {what}\n(rerun with KR_FUZZ_TRACE=1 for the op trace)",
            self.step
        )
    }

    // ---- ops -------------------------------------------------------------

    fn apply(&mut self, op: &Op) {
        if matches!(
            op,
            Op::Snap { .. }
                | Op::Replay { .. }
                | Op::DropSnapshot { .. }
                | Op::TrimRetained
                | Op::Storage { .. }
                | Op::Finalize
        ) {
            self.quiesce_faults();
        }
        match *op {
            Op::Allocate {
                agent,
                pool,
                size,
                executable,
                via_region,
            } => {
                if self.model.allocs.len() < MAX_ALLOCS {
                    let owner = if pool.device() {
                        self.agents[usize::from(agent % 2)]
                    } else {
                        self.sim.cpu()
                    };
                    let size = SIZE_CLASSES[usize::from(size % 16)];
                    self.allocate(op, owner, pool, size, executable, via_region, false);
                }
            }
            Op::Free { index, via_core } => {
                if self.model.allocs.is_empty() {
                    let status = if via_core {
                        app::memory_free(std::ptr::null_mut())
                    } else {
                        app::pool_free(std::ptr::null_mut())
                    };
                    if status != SUCCESS {
                        self.fail(op, format_args!("free(NULL) returned {status:#x}"));
                    }
                } else {
                    let i = usize::from(index) % self.model.allocs.len();
                    // The application never frees memory a copy of its own
                    // is still using.
                    if !self.model.copy_touches(self.model.allocs[i].ptr as usize) {
                        self.free(op, i, via_core);
                    }
                }
            }
            Op::FreeAndReuse { index } => {
                if !self.model.allocs.is_empty() {
                    let i = usize::from(index) % self.model.allocs.len();
                    if self.model.copy_touches(self.model.allocs[i].ptr as usize) {
                        return;
                    }
                    let (ptr, owner_sel, pool, size, executable, via_region) = {
                        let a = &self.model.allocs[i];
                        (a.ptr, a.owner, a.pool, a.size, a.executable, a.via_region)
                    };
                    if self.free(op, i, via_region) {
                        let owner = self
                            .agents
                            .iter()
                            .copied()
                            .find(|a| a.handle == owner_sel)
                            .expect("owner is a known agent");
                        // A refused allocation the library retries frees
                        // the competing retained arenas first, and reuse
                        // hands out the pool's most recently freed block
                        // that is large enough: after a retry that may be a
                        // released arena rather than the block just freed.
                        let retries = self.model.faults.failing_allocations > 0
                            && competing_retained(owner, pool) > 0;
                        self.sim.set_mode(hsa_sim::Mode::AddressReuse, true);
                        let new =
                            self.allocate(op, owner, pool, size, executable, via_region, true);
                        self.sim.set_mode(hsa_sim::Mode::AddressReuse, false);
                        if let Some(new) = new {
                            self.freed.retain(|&(base, _)| base != new as usize);
                            stats::bump(&stats::REUSED_ADDRESSES, u64::from(new == ptr));
                            if new != ptr && !retries {
                                self.fail(
                                    op,
                                    format_args!("address reuse gave {new:p}, not {ptr:p}"),
                                );
                            }
                        }
                    }
                }
            }
            Op::SetTracking(on) => {
                let now = kernel_replay::set_tracking(on);
                self.model.tracking = on && !self.model.finalized;
                if now != self.model.tracking {
                    self.fail(op, format_args!("kr_set_tracking_enabled returned {now}"));
                }
            }
            Op::AddModuleVariable { exe, agent, size } => {
                if self.model.vars.len() < MAX_VARS {
                    let Some(e) = self.executable(exe) else {
                        return;
                    };
                    let agent = self.agent(agent);
                    let size = VARIABLE_SIZES[usize::from(size % 8)];
                    let id = self.model.fresh_id();
                    let handle = self.model.exes[e].handle;
                    let ptr = self.sim.add_variable(
                        handle,
                        agent,
                        &format!("v{id}"),
                        size,
                        size % 3 == 0,
                    );
                    assert!(!ptr.is_null(), "the runtime made the variable");
                    // The program's initial value, as the loader would place it.
                    let shadow = pattern(id, size as usize);
                    // SAFETY: the variable's fresh storage of `size` bytes.
                    unsafe { app::store_bytes(ptr, &shadow) };
                    self.model.exes[e].symbols.push(Symbol {
                        agent: agent.handle,
                        variable: true,
                        size: size as usize,
                    });
                    self.model.vars.push(Var {
                        id,
                        ptr,
                        size: size as usize,
                        agent: agent.handle,
                        exe: e,
                        shadow,
                    });
                }
            }
            Op::AddKernel { exe, agent } => {
                let Some(e) = self.executable(exe) else {
                    return;
                };
                let agent = self.agent(agent);
                let handle = self.model.exes[e].handle;
                self.sim.add_kernel(handle, agent, "kernel");
                self.model.exes[e].symbols.push(Symbol {
                    agent: agent.handle,
                    variable: false,
                    size: 0,
                });
            }
            Op::Snap { agent } => {
                if self.snaps.len() < MAX_SNAPS {
                    let agent = self.agent(agent);
                    if self.model.policy.arenas()
                        && self.library_copies_would_wait(agent.handle, self.batched)
                    {
                        return;
                    }
                    let prediction = self.predict(agent);
                    let handle = kr_snap(app::agent(agent));
                    if handle.is_null() {
                        self.fail(op, format_args!("kr_snap returned NULL"));
                    }
                    // SAFETY: a live snapshot.
                    let reason =
                        DeclineReason::from_code(unsafe { kr_snapshot_decline_reason(handle) });
                    let expected = self.settle(prediction, reason);
                    self.check_snapshot(op, handle, &expected);
                    self.note(format_args!(
                        "snapshot {}: {:?}, {} regions",
                        self.snaps.len(),
                        expected.reason(),
                        expected.regions().len()
                    ));
                    stats::bump(
                        &stats::SNAPS[expected.reason().map_or(0, |r| r.code() as usize)],
                        1,
                    );
                    let arena = self.model.policy.arenas() && matches!(expected, Expected::Ok(_));
                    stats::bump(&stats::ARENA_SNAPS, arena as u64);
                    let claims = match &expected {
                        Expected::Ok(plan) => self.model.shared_bases(plan),
                        Expected::Declined(_) => Vec::new(),
                    };
                    self.snaps.push(LiveSnap {
                        handle,
                        agent: agent.handle,
                        claims,
                        expected,
                        arena,
                        batched: arena && self.batched,
                    });
                }
            }
            Op::Mutate {
                index,
                offset,
                len,
                byte,
            } => {
                if !self.model.allocs.is_empty() {
                    let i = usize::from(index) % self.model.allocs.len();
                    let alloc = &mut self.model.allocs[i];
                    let offset = usize::from(offset) % alloc.size;
                    let room = alloc.size - offset;
                    let len = match usize::from(len) % (room + 1) {
                        0 => room,
                        n => n,
                    };
                    // SAFETY: inside the live allocation.
                    unsafe { app::store(alloc.ptr.add(offset), len, byte) };
                    alloc.shadow[offset..offset + len].fill(byte);
                }
            }
            Op::MutateVariable { index, byte } => {
                if !self.model.vars.is_empty() {
                    let i = usize::from(index) % self.model.vars.len();
                    let var = &mut self.model.vars[i];
                    // SAFETY: the variable's storage.
                    unsafe { app::store(var.ptr, var.size, byte) };
                    var.shadow.fill(byte);
                }
            }
            Op::Restore { index } => {
                if self.snaps.is_empty() {
                    self.restore_null(op);
                } else {
                    let i = usize::from(index) % self.snaps.len();
                    let (handle, agent) = (self.snaps[i].handle, self.snaps[i].agent);
                    if self.snaps[i].batched && self.library_copies_would_wait(agent, true) {
                        return;
                    }
                    let expected = self.model.apply_restore(&self.snaps[i].expected, agent);
                    if expected.failed > 0 && self.model.in_flight(agent) > 0 {
                        stats::bump(&stats::FENCED_RESTORES, 1);
                    }
                    let got = restore(handle);
                    self.note(format_args!("restore of snapshot {i}: {got:?}"));
                    stats::bump(&stats::RESTORED, got.restored as u64);
                    stats::bump(&stats::SKIPPED_NOT_LIVE, got.skipped_not_live as u64);
                    stats::bump(&stats::RESTORE_FAILED, got.failed as u64);
                    if got != expected {
                        self.fail(
                            op,
                            format_args!(
                                "restore of snapshot {i} (agent {:#x}) reported {got:?}, model {expected:?}",
                                self.snaps[i].agent
                            ),
                        );
                    }
                }
            }
            Op::DropSnapshot { index } => {
                if !self.snaps.is_empty() {
                    let i = usize::from(index) % self.snaps.len();
                    let snap = self.snaps.remove(i);
                    // SAFETY: a live snapshot, freed once.
                    unsafe { kr_snapshot_free(snap.handle) };
                    if snap.arena && !self.model.finalized {
                        self.retained = true;
                    }
                }
            }
            Op::InjectFault(ref fault) => self.inject(fault),
            Op::Replay {
                agent,
                passes,
                target,
                byte,
            } => self.replay(op, agent, u32::from(passes % 5), target, byte),
            Op::Storage { policy, batched } => {
                {
                    let strategy = usize::from(policy / 5 % 5);
                    let policy = Policy::from_byte(policy);
                    let value = match policy {
                        Policy::Baseline => kernel_replay::StoragePolicy::Baseline,
                        Policy::Auto => kernel_replay::StoragePolicy::Auto,
                        Policy::Device => kernel_replay::StoragePolicy::Device,
                        Policy::Pinned => kernel_replay::StoragePolicy::Pinned,
                        Policy::Pageable => kernel_replay::StoragePolicy::Pageable,
                    };
                    assert!(kr_set_storage_policy(value as u32));
                    kernel_replay::set_batched_copies(batched);
                    // The fifth choice: auto with a tool's batch copy,
                    // which copies through the runtime (so its faults hold).
                    kernel_replay::set_strategy(
                        [
                            kernel_replay::Strategy::Auto,
                            kernel_replay::Strategy::Copies,
                            kernel_replay::Strategy::Scatter,
                            kernel_replay::Strategy::DirtyBlocks,
                            kernel_replay::Strategy::Auto,
                        ][strategy],
                    );
                    kernel_replay::set_batch_copy((strategy == 4).then(tool_copy));
                    self.batched = batched;
                    self.model.policy = policy;
                    // The device-to-host countdown is modelled for the
                    // baseline only.
                    if policy.arenas() {
                        self.sim.inject(hsa_sim::Fault::NthD2hCopy, 0, 0);
                        self.model.faults.d2h_countdown = None;
                    }
                }
            }
            Op::TrimRetained => {
                kernel_replay::trim_retained();
                self.retained = false;
            }
            Op::DestroyExecutable { exe } => self.destroy_executable(exe),
            Op::VmemReserve { .. }
            | Op::VmemMapNew { .. }
            | Op::VmemMapAlias { .. }
            | Op::VmemSetAccess { .. }
            | Op::VmemUnmap { .. }
            | Op::VmemRelease { .. }
            | Op::VmemAddressFree { .. }
            | Op::WriteMapping { .. } => self.vmem_op(op),
            Op::AsyncCopy {
                kind,
                dst,
                src,
                offset,
                len,
                hold,
                fault,
            } => self.async_copy(op, kind, dst, src, offset, len, hold, fault),
            Op::ReleaseDependency { index } => self.release_dependency(op, index),
            Op::Finalize => {
                if FINALIZE_ENABLED {
                    stats::bump(&stats::FINALIZED, 1);
                    kernel_replay::finalize();
                    self.model.finalize();
                    // Finalize releases what is retained.
                    self.retained = false;
                }
            }
        }
    }

    /// Index of executable `sel` if it is loaded and still takes symbols,
    /// else of a new one (up to `MAX_EXES` per input); None when neither.
    fn executable(&mut self, sel: u8) -> Option<usize> {
        let sel = usize::from(sel) % MAX_EXES;
        if let Some(exe) = self.model.exes.get(sel) {
            if exe.loaded && !exe.frozen {
                return Some(sel);
            }
        }
        if self.model.exes.len() >= MAX_EXES {
            return None;
        }
        let handle = self.sim.executable_create();
        self.model.exes.push(Exe {
            handle,
            refused: false,
            symbols: Vec::new(),
            loaded: true,
            cached_for: Vec::new(),
            frozen: false,
        });
        Some(self.model.exes.len() - 1)
    }

    /// Unloads a loaded executable through the wrapped core table, unless a
    /// snapshot taken without the registry holds one of its variables.
    fn destroy_executable(&mut self, sel: u8) {
        let loaded: Vec<usize> = (0..self.model.exes.len())
            .filter(|&e| self.model.exes[e].loaded)
            .collect();
        if loaded.is_empty() {
            return;
        }
        let e = loaded[usize::from(sel) % loaded.len()];
        let ids: Vec<u64> = self
            .model
            .vars
            .iter()
            .filter(|v| v.exe == e)
            .map(|v| v.id)
            .collect();
        let pinned = self.snaps.iter().any(|s| {
            s.expected.regions().iter().any(|r| {
                matches!(r.source, crate::model::Source::Var { id, registry: false, .. } if ids.contains(&id))
            })
        });
        if pinned {
            return;
        }
        let status = app::executable_destroy(self.model.exes[e].handle);
        assert_eq!(status, SUCCESS, "executable destroy");
        self.model.exes[e].loaded = false;
        for v in self.model.vars.iter().filter(|v| v.exe == e) {
            self.freed.push((v.ptr as usize, granules(v.size.max(1))));
        }
        self.model.vars.retain(|v| v.exe != e);
        stats::bump(&stats::UNLOADS, 1);
    }

    /// What the library may not be able to take a modelled fault through:
    /// under an arena policy, or while arenas are held, snapshots allocate
    /// and free arenas through the runtime (so an armed allocation or free
    /// failure would be theirs), and their copies are not the baseline's
    /// device-to-host ones. Such faults are disarmed before each library op.
    fn quiesce_faults(&mut self) {
        if self.model.policy.arenas() || self.arenas_held() {
            self.sim.inject(hsa_sim::Fault::NextAllocations, 0, 0);
            self.sim.inject(hsa_sim::Fault::NextFrees, 0, 0);
            self.model.faults.failing_allocations = 0;
            self.model.faults.failing_frees = 0;
        }
        if self.model.policy.arenas() {
            self.sim.inject(hsa_sim::Fault::NthD2hCopy, 0, 0);
            self.model.faults.d2h_countdown = None;
        }
    }

    /// Whether a snapshot or restore of `agent` with batched copies would
    /// submit asynchronous copies that the runtime's one copy worker runs
    /// only after a pending application copy, which a dependency holds
    /// back: the library would wait for them forever. (ROCr copies on an
    /// engine per agent; the software runtime does not.) Not when a copy in
    /// flight on the agent stops it at the fence first, or after finalize.
    fn library_copies_would_wait(&self, agent: u64, batched: bool) -> bool {
        batched
            && !self.model.copies.is_empty()
            && self.model.in_flight(agent) == 0
            && !self.model.finalized
    }

    /// Arenas are leased or retained: host figures are bounds, not exact.
    fn arenas_held(&self) -> bool {
        self.retained || self.snaps.iter().any(|s| s.arena)
    }

    /// The model's prediction of a snapshot of `agent`.
    fn predict(&mut self, agent: hsa_sim::Agent) -> Prediction {
        self.model.arenas_held = self.arenas_held();
        let is_gpu = agent != self.sim.cpu();
        let held: Vec<(u64, usize)> = self
            .snaps
            .iter()
            .flat_map(|s| s.claims.iter().map(|&base| (s.agent, base)))
            .collect();
        self.model
            .predict_snap(agent.handle, is_gpu, self.held_baseline_bytes(), &held)
    }

    /// The expectation once the library answered `reason`: the prediction,
    /// or HOST_MEMORY where the model allowed it (then the device-to-host
    /// countdown, which that capture may have advanced differently, is
    /// disarmed).
    fn settle(&mut self, prediction: Prediction, reason: Option<DeclineReason>) -> Expected {
        if reason == Some(DeclineReason::HostMemory)
            && prediction.host_memory_possible
            && prediction.expected.reason() != reason
        {
            self.sim.inject(hsa_sim::Fault::NthD2hCopy, 0, 0);
            self.model.faults.d2h_countdown = None;
            return Expected::Declined(DeclineReason::HostMemory);
        }
        prediction.expected
    }

    /// Allocates through the wrapped tables; returns the new base, or None
    /// if the model said the runtime must refuse.
    #[allow(clippy::too_many_arguments)]
    fn allocate(
        &mut self,
        op: &Op,
        owner: hsa_sim::Agent,
        pool: PoolSel,
        size: usize,
        executable: bool,
        via_region: bool,
        reuse: bool,
    ) -> Option<*mut u8> {
        let injected = self.model.allocation_fails();
        let (region, sim_pool) = (
            self.sim.region(owner, pool.sim_kind()),
            self.sim.pool(owner, pool.sim_kind()),
        );
        let call = || {
            if via_region {
                app::memory_allocate(region, size)
            } else {
                let flags = if executable {
                    POOL_ALLOCATE_EXECUTABLE_FLAG
                } else {
                    0
                };
                app::pool_allocate(sim_pool, size, flags)
            }
        };
        let ptr = self.allocate_with_retry(op, owner, pool, injected, call)?;
        let id = self.model.fresh_id();
        // A reused block still holds the poison of its free (like VRAM
        // garbage); the application initialises what it allocates.
        if reuse {
            // SAFETY: the fresh allocation of `size` bytes.
            let old = unsafe { app::view(ptr, size) };
            if old.iter().any(|&b| b != hsa_sim::POISON_BYTE) {
                self.fail(op, format_args!("a reused block was written while freed"));
            }
        }
        let shadow = pattern(id, size);
        // SAFETY: the fresh allocation of `size` bytes.
        unsafe { app::store_bytes(ptr, &shadow) };
        let tracked = self.model.must_track(pool, executable, via_region);
        stats::bump(&stats::TRACKED_ALLOCATIONS, tracked as u64);
        self.model.allocs.push(Alloc {
            id,
            ptr,
            size,
            owner: owner.handle,
            pool,
            via_region,
            executable: executable && !via_region,
            tracked,
            shadow,
        });
        Some(ptr)
    }

    /// Runs an application allocation (pool or region allocate, vmem
    /// handle create) of `owner`'s `pool`, `injected` with the runtime's
    /// OUT_OF_RESOURCES. The library retries such a refusal once after
    /// releasing the retained arenas that compete with it (README: the
    /// pool's GPU's device arenas, or every host arena for a system pool),
    /// so it must fail exactly when nothing competing was retained. Checks
    /// the retry counters; the result, or None for the predicted failure.
    fn allocate_with_retry<T>(
        &mut self,
        op: &Op,
        owner: hsa_sim::Agent,
        pool: PoolSel,
        injected: bool,
        call: impl FnOnce() -> Result<T, kernel_replay::hsa::hsa_status_t>,
    ) -> Option<T> {
        let competing = if injected {
            competing_retained(owner, pool)
        } else {
            0
        };
        let retried = injected && competing > 0;
        if retried {
            // The release frees arenas through the runtime: an armed free
            // failure would be the library's (as in `quiesce_faults`).
            self.sim.inject(hsa_sim::Fault::NextFrees, 0, 0);
            self.model.faults.failing_frees = 0;
        }
        let before = app::stats2();
        let value = match (call(), injected && !retried) {
            (Err(_), true) => return None,
            (Ok(value), false) => value,
            (Err(status), false) => {
                self.fail(op, format_args!("allocation failed with {status:#x}"))
            }
            (Ok(_), true) => self.fail(op, format_args!("injected allocation failure ignored")),
        };
        let after = app::stats2();
        let want = (
            before.application_retries + u64::from(retried),
            before.bytes_released_for_application + if retried { competing } else { 0 },
        );
        let got = (
            after.application_retries,
            after.bytes_released_for_application,
        );
        if got != want || (retried && competing_retained(owner, pool) != 0) {
            self.fail(
                op,
                format_args!(
                    "retries and bytes released for the application {got:?}, model {want:?} \
                     (competing arenas of {competing} bytes retained before)"
                ),
            );
        }
        Some(value)
    }

    /// Frees allocation `i` through the wrapped tables; true if it was freed.
    fn free(&mut self, op: &Op, i: usize, via_core: bool) -> bool {
        let ptr = self.model.allocs[i].ptr;
        let must_fail = self.model.free_fails();
        let status = if via_core {
            app::memory_free(ptr)
        } else {
            app::pool_free(ptr)
        };
        match (status == SUCCESS, must_fail) {
            (true, false) => {
                let alloc = self.model.allocs.remove(i);
                self.freed.push((alloc.ptr as usize, granules(alloc.size)));
                true
            }
            (false, true) => {
                stats::bump(&stats::FAILED_FREES, 1);
                false
            }
            (false, false) => self.fail(op, format_args!("free failed with {status:#x}")),
            (true, true) => self.fail(op, format_args!("injected free failure ignored")),
        }
    }

    fn restore_null(&self, op: &Op) {
        let mut report = kr_restore_report_t {
            restored: 9,
            skipped_not_live: 9,
            failed: 9,
        };
        // SAFETY: NULL is accepted; the report is writable.
        let n = unsafe { kr_restore_with_report(std::ptr::null(), &mut report) };
        if n != 0 || report != kr_restore_report_t::default() {
            self.fail(op, format_args!("restore of NULL: {n}, {report:?}"));
        }
    }

    fn inject(&mut self, fault: &Fault) {
        let faults = &mut self.model.faults;
        match *fault {
            Fault::PointerInfo(on) => {
                self.sim
                    .inject(hsa_sim::Fault::PointerInfo, 0, u64::from(on));
                faults.pointer_info = on;
            }
            Fault::NthD2hCopy(n) => {
                // Modelled for the baseline's blocking copies only.
                if !self.model.policy.arenas() {
                    let n = u64::from(n % 8);
                    self.sim.inject(hsa_sim::Fault::NthD2hCopy, 0, n);
                    faults.d2h_countdown = (n != 0).then_some(n);
                }
            }
            Fault::H2dIntoAllocation { index, offset } => {
                if !self.model.allocs.is_empty() {
                    let a = &self.model.allocs[usize::from(index) % self.model.allocs.len()];
                    let address = a.ptr as usize + usize::from(offset) % a.size;
                    add_h2d(&self.sim, faults, address);
                }
            }
            Fault::CopyFromAllocation { index, offset } => {
                if !self.model.allocs.is_empty() {
                    let a = &self.model.allocs[usize::from(index) % self.model.allocs.len()];
                    let address = a.ptr as usize + usize::from(offset) % a.size;
                    add_from(&self.sim, faults, address);
                }
            }
            Fault::CopyFromVariable { index } => {
                let vars: Vec<&Var> = self.model.vars.iter().filter(|v| v.size > 0).collect();
                if !vars.is_empty() {
                    let address = vars[usize::from(index) % vars.len()].ptr as usize;
                    add_from(&self.sim, faults, address);
                }
            }
            Fault::H2dIntoVariable { index } => {
                // A zero-size variable has no byte to cover.
                let vars: Vec<&Var> = self.model.vars.iter().filter(|v| v.size > 0).collect();
                if !vars.is_empty() {
                    let address = vars[usize::from(index) % vars.len()].ptr as usize;
                    add_h2d(&self.sim, faults, address);
                }
            }
            Fault::ClearH2d => {
                self.sim.inject(hsa_sim::Fault::H2dCopyInto, 0, 0);
                self.sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
                self.sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0);
                faults.h2d.clear();
                faults.from.clear();
            }
            Fault::RefuseSymbolWalk { exe, refuse } => {
                if !self.model.exes.is_empty() {
                    let e = usize::from(exe) % self.model.exes.len();
                    self.sim.inject(
                        hsa_sim::Fault::SymbolWalk,
                        self.model.exes[e].handle.handle,
                        u64::from(refuse),
                    );
                    self.model.exes[e].refused = refuse;
                }
            }
            Fault::FreeFailsOnce => {
                self.sim.inject(hsa_sim::Fault::NextFrees, 0, 1);
                faults.failing_frees = 1;
            }
            Fault::AllocationFailsOnce => {
                self.sim.inject(hsa_sim::Fault::NextAllocations, 0, 1);
                faults.failing_allocations = 1;
            }
            Fault::HostBudget(n) => {
                let bytes = u64::from(n) * 128;
                kr_set_host_budget(bytes);
                faults.host_budget = bytes;
            }
            Fault::HostBudgetAtEdge { agent, delta } => {
                let agent = self.agents[usize::from(agent % 3)];
                let edge = kernel_replay::host_bytes_in_use()
                    + kernel_replay::tracked(app::agent(agent)).bytes;
                let bytes = (edge + u64::from(delta % 5)).saturating_sub(2);
                kr_set_host_budget(bytes);
                faults.host_budget = bytes;
            }
            Fault::ExecutableIteration(on) => {
                self.sim
                    .inject(hsa_sim::Fault::ExecutableIteration, 0, u64::from(on));
                faults.iteration = on;
            }
            Fault::SymbolQuery { attribute, fail } => {
                let a = usize::from(attribute % 3);
                self.sim.inject(
                    hsa_sim::Fault::SymbolQuery,
                    u64::from(QUERY_ATTRIBUTES[a]),
                    u64::from(fail),
                );
                faults.query[a] = fail;
            }
            Fault::Vmem { op } => {
                if app::vmem_api().is_some() {
                    let op = usize::from(op % 5);
                    self.sim.inject(VMEM_OPS[op], 0, 1);
                    self.model.vmem.failing[op] = true;
                }
            }
            Fault::Iterator(set) => {
                // Unset: no iterator set and a runtime without the loader
                // extension, so none can be found; set: the runtime's own.
                kernel_replay::set_executable_iterator(if set {
                    app::sim_iterator()
                } else {
                    None
                });
                self.sim
                    .inject(hsa_sim::Fault::LoaderExtension, 0, u64::from(!set));
                faults.iterator_set = set;
            }
        }
    }

    // ---- the replay window -------------------------------------------------

    fn replay(&mut self, op: &Op, agent: u8, passes: u32, target: u8, byte: u8) {
        let agent = self.agent(agent);
        if passes >= 2
            && self.model.policy.arenas()
            && self.library_copies_would_wait(agent.handle, self.batched)
        {
            return;
        }
        let target = if !self.model.allocs.is_empty() {
            let a = &self.model.allocs[usize::from(target) % self.model.allocs.len()];
            Some(Target::Alloc(a.id))
        } else if !self.model.vars.is_empty() {
            let v = &self.model.vars[usize::from(target) % self.model.vars.len()];
            Some(Target::Var(v.id))
        } else {
            None
        };
        // Only a window of two or more passes snapshots.
        let prediction = if passes >= 2 {
            self.predict(agent)
        } else {
            Prediction {
                expected: Expected::Ok(Vec::new()),
                host_memory_possible: false,
            }
        };
        let arena_window = self.model.policy.arenas();
        self.window = Some(Window {
            agent: agent.handle,
            expected: prediction.expected.clone(),
            // Whether its own snapshot surely holds its bytes in baseline
            // buffers (not if the library may decline it for the budget).
            baseline: !arena_window && !prediction.host_memory_possible,
            target,
            byte,
            passes_seen: Vec::new(),
            restore_failures: 0,
        });
        // SAFETY: the pass function gets `self` back as user data and only
        // runs during this call.
        let result = unsafe {
            kr_replay(
                app::agent(agent),
                passes,
                Some(on_pass),
                (self as *mut Interp).cast(),
            )
        };
        let window = self.window.take().expect("window");
        if let Some(panic) = self.pass_panic.take() {
            resume_unwind(panic);
        }
        let expected = if passes >= 2 {
            self.settle(prediction, DeclineReason::from_code(result.decline_reason))
        } else {
            prediction.expected
        };
        if passes >= 2 && matches!(expected, Expected::Ok(_)) && arena_window {
            stats::bump(&stats::ARENA_SNAPS, 1);
            if !self.model.finalized {
                self.retained = true;
            }
        }
        let declined = passes >= 2 && !matches!(expected, Expected::Ok(_));
        let replayed = passes >= 2 && !declined;
        let passes_run = if replayed { passes } else { 1 };
        let want = kr_replay_result_t {
            replayed,
            passes_run,
            decline_reason: if passes >= 2 {
                expected.reason().map_or(0, DeclineReason::code)
            } else {
                0
            },
            restore_failures: window.restore_failures,
        };
        stats::bump(&stats::REPLAYS, u64::from(replayed));
        if result != want {
            self.fail(
                op,
                format_args!("kr_replay returned {result:?}, model {want:?}"),
            );
        }
        let seen: Vec<u32> = (0..passes_run).collect();
        if window.passes_seen != seen {
            self.fail(
                op,
                format_args!("passes ran {:?}, expected {seen:?}", window.passes_seen),
            );
        }
    }

    /// One pass of a replay window: from the second pass on, the restore
    /// that preceded it must have brought back exactly the captured state;
    /// then the "kernel" writes its target.
    fn pass(&mut self, pass: u32) {
        let window = self.window.as_mut().expect("a pass runs inside a window");
        window.passes_seen.push(pass);
        let window_baseline = window.baseline;
        let (target, byte) = (window.target, window.byte ^ pass as u8);
        let expected = window.expected.clone();
        let agent = window.agent;
        if pass > 0 {
            let report: Report = self.model.apply_restore(&expected, agent);
            self.window.as_mut().expect("window").restore_failures += report.failed;
        }
        // Every pass sees what the model says: captured bytes where restored.
        let op = Op::Replay {
            agent: 0,
            passes: pass as u8,
            target: 0,
            byte: 0,
        };
        self.check_memory(&op);
        if window_baseline {
            self.check_host(&op, expected.bytes(), false);
        } else {
            // An arena window's own snapshot holds arenas; a baseline one
            // that the library might have declined is only a bound.
            self.check_host(&op, 0, true);
        }
        match target {
            Some(Target::Alloc(id)) => {
                let a = self
                    .model
                    .allocs
                    .iter_mut()
                    .find(|a| a.id == id)
                    .expect("target live");
                // SAFETY: the live allocation.
                unsafe { app::store(a.ptr, a.size, byte) };
                a.shadow.fill(byte);
            }
            Some(Target::Var(id)) => {
                let v = self
                    .model
                    .vars
                    .iter_mut()
                    .find(|v| v.id == id)
                    .expect("target loaded");
                // SAFETY: the variable's storage.
                unsafe { app::store(v.ptr, v.size, byte) };
                v.shadow.fill(byte);
            }
            None => {}
        }
    }

    // ---- checks ------------------------------------------------------------

    /// Host bytes live baseline snapshots hold (buffers of exactly their
    /// regions' sizes).
    fn held_baseline_bytes(&self) -> u64 {
        self.snaps
            .iter()
            .filter(|s| !s.arena)
            .map(|s| s.expected.bytes())
            .sum()
    }

    /// `kr_host_bytes_in_use` is the baseline snapshots' bytes (`extra`
    /// more inside a baseline replay window) exactly when no arena is held,
    /// at least that otherwise; with no arena held, no device memory is held.
    fn check_host(&self, op: &Op, extra: u64, more_arenas: bool) {
        let held = self.held_baseline_bytes() + extra;
        let now = kernel_replay::host_bytes_in_use();
        let arenas = more_arenas || self.arenas_held();
        if (arenas && now < held) || (!arenas && now != held) {
            self.fail(
                op,
                format_args!("host bytes in use {now}, model {held} (arenas held: {arenas})"),
            );
        }
        if !arenas && kernel_replay::device_bytes_in_use() != 0 {
            self.fail(
                op,
                format_args!(
                    "{} device bytes held with no arena",
                    kernel_replay::device_bytes_in_use()
                ),
            );
        }
    }

    fn check_snapshot(&self, op: &Op, handle: *const kr_snapshot_t, expected: &Expected) {
        // SAFETY: a live snapshot.
        let (ok, reason, regions, bytes) = unsafe {
            (
                kr_snapshot_ok(handle),
                DeclineReason::from_code(kr_snapshot_decline_reason(handle)),
                kr_snapshot_region_count(handle),
                kr_snapshot_byte_count(handle),
            )
        };
        let want = (
            matches!(expected, Expected::Ok(_)),
            expected.reason(),
            expected.regions().len(),
            expected.bytes(),
        );
        if (ok, reason, regions, bytes) != want {
            self.fail(
                op,
                format_args!(
                    "snapshot is (ok, reason, regions, bytes) = {:?}, model {want:?}",
                    (ok, reason, regions, bytes)
                ),
            );
        }
    }

    /// What the library says a snapshot would take and what it does not
    /// cover, and the fence's counts, per agent.
    fn check_coverage(&mut self, op: &Op) {
        for agent in self.agents {
            let handle = app::agent(agent);
            let is_gpu = agent != self.sim.cpu();
            // The tracked regions (allocations and mappings) and the
            // variables of the loaded executables.
            let (regions, captured_bytes) = self.model.captured_totals(agent.handle, is_gpu);
            let (variables, variable_bytes) = self.model.estimated_variables(agent.handle);
            let want = (regions + variables, captured_bytes + variable_bytes);
            // The agent's own: what its memory in use is compared with.
            let (_, bytes) = self.model.tracked_totals(agent.handle);
            let footprint = kernel_replay::estimate_footprint(handle);
            if (footprint.regions, footprint.bytes) != want {
                self.fail(
                    op,
                    format_args!(
                        "footprint of agent {:#x} is (regions, bytes) = {:?}, model {want:?} \
                         ({variables} variables)",
                        agent.handle,
                        (footprint.regions, footprint.bytes)
                    ),
                );
            }
            // Mappings seen and not captured; device memory in use and not
            // tracked (exact while no device arena is held: its size is not
            // modelled).
            let untracked = kernel_replay::untracked(handle);
            let mappings = self.model.uncaptured_mappings(agent.handle);
            stats::bump(&stats::UNCAPTURED_MAPPINGS, u64::from(mappings.0 > 0));
            if (untracked.mappings, untracked.mapping_bytes) != mappings
                || untracked.bytes.is_some() != is_gpu
            {
                self.fail(
                    op,
                    format_args!(
                        "agent {:#x}: untracked summary {untracked:?}, model {mappings:?} \
                         mappings not captured",
                        agent.handle
                    ),
                );
            }
            if is_gpu && !self.arenas_held() {
                let in_use: u64 = self
                    .model
                    .allocs
                    .iter()
                    .filter(|a| a.pool.device() && a.owner == agent.handle)
                    .map(|a| granules(a.size) as u64)
                    .chain(
                        self.model
                            .vmem
                            .handles
                            .iter()
                            .filter(|h| h.gpu == agent.handle)
                            .map(|h| h.size as u64),
                    )
                    .sum();
                // Saturating, as the library computes it: a handle mapped
                // at two tracked addresses counts twice as tracked.
                if untracked.bytes != Some(in_use.saturating_sub(bytes)) {
                    self.fail(
                        op,
                        format_args!(
                            "agent {:#x}: {} untracked device bytes, model {} in use less {bytes} \
                             tracked",
                            agent.handle,
                            untracked.bytes.unwrap_or(0),
                            in_use
                        ),
                    );
                }
            }
            let in_flight = kernel_replay::testing::fence_in_flight(agent.handle);
            if in_flight != self.model.in_flight(agent.handle) {
                self.fail(
                    op,
                    format_args!(
                        "the fence counts {in_flight} copies in flight on agent {:#x}, model {}",
                        agent.handle,
                        self.model.in_flight(agent.handle)
                    ),
                );
            }
        }
    }

    fn check_memory(&self, op: &Op) {
        for a in &self.model.allocs {
            // SAFETY: a live allocation of `size` bytes.
            let now = unsafe { app::view(a.ptr, a.size) };
            if now != a.shadow.as_slice() {
                let at = now.iter().zip(&a.shadow).position(|(x, y)| x != y).unwrap();
                self.fail(
                    op,
                    format_args!(
                        "allocation {} at {:p} ({} bytes, tracked {}) differs at byte {at}: {:#04x}, model {:#04x}",
                        a.id, a.ptr, a.size, a.tracked, now[at], a.shadow[at]
                    ),
                );
            }
        }
        for v in &self.model.vars {
            // SAFETY: the variable's storage.
            let now = unsafe { app::view(v.ptr, v.size) };
            if now != v.shadow.as_slice() {
                self.fail(
                    op,
                    format_args!(
                        "module variable {} at {:p} differs from the model",
                        v.id, v.ptr
                    ),
                );
            }
        }
        // The runtime keeps freed blocks mapped and poisoned. Its own check
        // scans the whole quarantine (up to 256 MiB, most of it from earlier
        // inputs); the blocks this input freed are checked here instead.
        for &(base, len) in &self.freed {
            // SAFETY: a quarantined block: still mapped (see `freed`).
            let now = unsafe { app::view(base as *const u8, len) };
            if let Some(at) = now.iter().position(|&b| b != hsa_sim::POISON_BYTE) {
                self.fail(
                    op,
                    format_args!("freed memory at {base:#x} (+{at}) was written"),
                );
            }
        }
        self.check_vmem(op);
        if self.sim.count(hsa_sim::Counter::CopyViolations) != self.violations_before {
            self.fail(
                op,
                format_args!(
                    "{} copies touched freed or out-of-bounds memory",
                    self.sim.count(hsa_sim::Counter::CopyViolations) - self.violations_before
                ),
            );
        }
    }

    /// The invariants that hold after every op.
    fn check(&mut self, op: &Op) {
        self.check_memory(op);
        for agent in self.agents {
            let handle = app::agent(agent);
            let got = (
                kernel_replay::tracked(handle).regions,
                kernel_replay::tracked(handle).bytes,
            );
            let want = self.model.tracked_totals(agent.handle);
            if got != want {
                self.fail(
                    op,
                    format_args!(
                        "agent {:#x} tracks (count, bytes) = {got:?}, model {want:?}",
                        agent.handle
                    ),
                );
            }
        }
        self.check_coverage(op);
        self.check_host(op, 0, false);
        if kernel_replay::tracking() != self.model.tracking
            || kernel_replay::is_finalized() != self.model.finalized
        {
            self.fail(op, format_args!("tracking / finalized state differs"));
        }
        // Device and pinned arenas are runtime allocations too, and so are
        // the device kernels' buffers (a snapshot may hold a runner after a
        // trim).
        let live = self.sim.count(hsa_sim::Counter::LiveAllocations);
        let model = self.model.allocs.len() as u64;
        let library_held = self.arenas_held()
            || kernel_replay::testing::device_kernels_set_up()
            || !self.snaps.is_empty();
        if live < model || (live != model && !library_held) {
            self.fail(op, format_args!("the runtime holds {live} allocations"));
        }
        // Every kept snapshot still reads as it was made.
        for snap in &self.snaps {
            self.check_snapshot(op, snap.handle, &snap.expected);
        }
    }

    /// Frees everything through the wrappers (faults cleared first), drops
    /// every snapshot, and checks that nothing is left behind.
    fn finish(mut self) {
        clear_faults(&self.sim);
        let end = Op::Finalize;
        // The application waits for its copies before it frees anything.
        self.drain_copies(&end);
        for snap in self.snaps.drain(..) {
            // SAFETY: a live snapshot, freed once.
            unsafe { kr_snapshot_free(snap.handle) };
        }
        // Unload what is loaded, as a program does (the library's
        // executable registry hears of it), and give back retained arenas.
        for exe in &self.model.exes {
            if exe.loaded {
                assert_eq!(
                    app::executable_destroy(exe.handle),
                    SUCCESS,
                    "cleanup unload"
                );
            }
        }
        for v in &self.model.vars {
            self.freed.push((v.ptr as usize, granules(v.size.max(1))));
        }
        self.model.vars.clear();
        {
            kernel_replay::trim_retained();
            assert_eq!(
                kernel_replay::device_bytes_in_use(),
                0,
                "device arenas left after a trim"
            );
            assert!(kr_set_storage_policy(
                kernel_replay::StoragePolicy::Baseline as u32
            ));
        }
        for alloc in std::mem::take(&mut self.model.allocs) {
            let status = if alloc.via_region {
                app::memory_free(alloc.ptr)
            } else {
                app::pool_free(alloc.ptr)
            };
            assert_eq!(status, SUCCESS, "cleanup free");
            self.freed.push((alloc.ptr as usize, granules(alloc.size)));
        }
        self.vmem_cleanup();
        assert!(
            kernel_replay::testing::inventory_is_empty(),
            "allocations left in the inventory after every free"
        );
        assert_eq!(
            kernel_replay::host_bytes_in_use(),
            0,
            "host memory held with no snapshot"
        );
        self.check_memory(&end);
        assert_eq!(self.sim.count(hsa_sim::Counter::LiveAllocations), 0);
        for agent in self.agents {
            assert_eq!(
                kernel_replay::untracked(app::agent(agent)).mappings,
                0,
                "the library still lists mappings"
            );
        }
        assert_eq!(
            self.sim.count(hsa_sim::Counter::InvalidSignalUses),
            self.invalid_signals_before,
            "a signal was used after it was destroyed"
        );
        // Now and then, the runtime's own scan of its whole quarantine.
        static INPUTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        if INPUTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 4096 == 0 {
            assert!(self.sim.quarantine_intact(), "freed memory was written");
        }
        kernel_replay::set_host_budget(None);
        // No iterator set: snapshots find the runtime loader's, as under the SDK.
        kernel_replay::set_executable_iterator(None);
        kernel_replay::set_tracking(false);
    }
}

impl Default for Interp {
    fn default() -> Self {
        Self::new()
    }
}

/// The runtime's vmem operations, in the model's order (`model::VMEM_*`).
const VMEM_OPS: [hsa_sim::Fault; 5] = [
    hsa_sim::Fault::NthVmemHandleCreate,
    hsa_sim::Fault::NthVmemHandleRelease,
    hsa_sim::Fault::NthVmemMap,
    hsa_sim::Fault::NthVmemUnmap,
    hsa_sim::Fault::NthVmemSetAccess,
];

/// Bytes of the retained arenas the library releases when an allocation
/// from `pool` of `owner` is refused for lack of memory (README, "The
/// application's allocations never fail because of the library"): the
/// device arena of a GPU pool's agent, every host arena (pinned and
/// pageable) for a system pool. The model does not follow arena sizes, so
/// they are read from the library's storage state.
fn competing_retained(owner: hsa_sim::Agent, pool: PoolSel) -> u64 {
    use kernel_replay::Tier;
    if pool.device() {
        kernel_replay::testing::retained_for(app::agent(owner))[Tier::Device.index()]
    } else {
        let retained = kernel_replay::stats().retained_bytes;
        retained[Tier::Pinned.index()] + retained[Tier::Pageable.index()]
    }
}

/// Bytes the runtime maps for a block of `size` bytes (whole 4 KiB granules).
fn granules(size: usize) -> usize {
    size.div_ceil(4096) * 4096
}

/// Disarms every fault and mode the interpreter can set in the runtime.
/// The clean state every input starts from: the runtime reset (2 GPUs) for
/// the first input of the process and continued after, with every fault and
/// mode cleared; the library installed (once per process) with the runtime's
/// iterator, tracking off, the baseline policy, batched copies, no host
/// budget, nothing tracked and no memory held. Shared by the single-threaded
/// interpreter and the threaded runner (`threads.rs`).
pub fn clean_session() -> hsa_sim::SimSession {
    // The runtime is reset (one CPU, two GPUs) for the first input of
    // the process only. A reset starts a new handle epoch, so every agent
    // handle changes, and the library keeps per-agent storage state
    // (pools, arenas) for the life of the process, as for a real
    // runtime's fixed agents: resetting per input would grow that state
    // by three agents per input and slow every later input down. Each
    // input instead starts from the clean state the previous one left
    // (everything freed and unloaded, arenas trimmed: checked below),
    // with every fault and mode cleared here.
    static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let sim = if STARTED.swap(true, std::sync::atomic::Ordering::AcqRel) {
        hsa_sim::continue_session()
    } else {
        hsa_sim::session(2)
    };
    clear_faults(&sim);
    assert_eq!(sim.gpu_count(), 2, "the runtime was reset by someone else");
    assert_eq!(
        sim.count(hsa_sim::Counter::LiveAllocations),
        0,
        "an earlier input left runtime allocations"
    );
    app::install_once();
    #[cfg(fuzzing)]
    kernel_replay::testing::reset_gate_for_fuzzing();
    assert!(
        !kernel_replay::is_finalized(),
        "the library is finalized: build with --cfg fuzzing for the reset hook"
    );
    // No iterator set: snapshots find the runtime loader's, as under the SDK.
    kernel_replay::set_executable_iterator(None);
    kernel_replay::set_host_budget(None);
    kernel_replay::set_copy_fence_timeout(std::time::Duration::from_nanos(
        FENCE_TIMEOUT.as_nanos() as u64,
    ));
    assert_eq!(
        app::vmem_api().is_some(),
        sim.vmem_supported(),
        "the library and the runtime were built against the same headers"
    );
    assert_eq!(
        (
            sim.count(hsa_sim::Counter::VmemMappings),
            sim.count(hsa_sim::Counter::VmemHandles),
            sim.count(hsa_sim::Counter::VmemReservations)
        ),
        (0, 0, 0),
        "an earlier input left virtual memory"
    );
    for gpu in 0..2 {
        assert_eq!(
            kernel_replay::testing::fence_in_flight(sim.gpu(gpu).handle),
            0,
            "an earlier input left copies in flight"
        );
    }
    {
        assert!(kr_set_storage_policy(
            kernel_replay::StoragePolicy::Baseline as u32
        ));
        kernel_replay::set_batched_copies(true);
        kernel_replay::set_strategy(kernel_replay::Strategy::Auto);
        kernel_replay::set_batch_copy(None);
        assert_eq!(
            kernel_replay::device_bytes_in_use(),
            0,
            "an earlier input left arenas"
        );
    }
    assert!(!kernel_replay::set_tracking(false));
    assert!(
        kernel_replay::testing::inventory_is_empty(),
        "an earlier input left allocations in the inventory"
    );
    assert_eq!(
        kernel_replay::host_bytes_in_use(),
        0,
        "an earlier input left host memory held"
    );
    sim
}

fn clear_faults(sim: &hsa_sim::SimSession) {
    sim.inject(hsa_sim::Fault::NextFrees, 0, 0);
    sim.inject(hsa_sim::Fault::NextAllocations, 0, 0);
    sim.inject(hsa_sim::Fault::PointerInfo, 0, 0);
    sim.inject(hsa_sim::Fault::NthD2hCopy, 0, 0);
    sim.inject(hsa_sim::Fault::H2dCopyInto, 0, 0);
    sim.inject(hsa_sim::Fault::CopiesInto, 0, 0);
    sim.inject(hsa_sim::Fault::CopiesFrom, 0, 0);
    sim.inject(hsa_sim::Fault::ExecutableIteration, 0, 0);
    sim.inject(hsa_sim::Fault::LoaderExtension, 0, 0);
    for attribute in QUERY_ATTRIBUTES {
        sim.inject(hsa_sim::Fault::SymbolQuery, u64::from(attribute), 0);
    }
    sim.set_mode(hsa_sim::Mode::AddressReuse, false);
    sim.inject(hsa_sim::Fault::NthAsyncCopy, 0, 0);
    sim.inject(hsa_sim::Fault::NthAsyncCopyCompletion, 0, 0);
    for op in VMEM_OPS {
        sim.inject(op, 0, 0);
    }
}

/// Makes restores into `address` fail: copies of every direction into it
/// where the runtime can (storage tiers restore device-to-device), else
/// host-to-device copies (all the baseline's restores are).
fn add_h2d(sim: &hsa_sim::SimSession, faults: &mut crate::model::Faults, address: usize) {
    sim.inject(hsa_sim::Fault::CopiesInto, address as *const u8 as u64, 0);
    if faults.h2d.len() < MAX_H2D_FAULTS && !faults.h2d.contains(&address) {
        faults.h2d.push(address);
    }
}

/// Makes captures out of `address` fail.
fn add_from(sim: &hsa_sim::SimSession, faults: &mut crate::model::Faults, address: usize) {
    sim.inject(hsa_sim::Fault::CopiesFrom, address as *const u8 as u64, 0);
    if faults.from.len() < MAX_H2D_FAULTS && !faults.from.contains(&address) {
        faults.from.push(address);
    }
}

/// `kr_restore_with_report`, checked against its return value.
fn restore(handle: *const kr_snapshot_t) -> Report {
    let mut report = kr_restore_report_t {
        restored: 99,
        skipped_not_live: 99,
        failed: 99,
    };
    // SAFETY: a live snapshot and a writable report.
    let n = unsafe { kr_restore_with_report(handle, &mut report) };
    assert_eq!(n, report.restored, "return value is the restored count");
    Report {
        restored: report.restored,
        skipped_not_live: report.skipped_not_live,
        failed: report.failed,
    }
}

unsafe extern "C" fn on_pass(pass: u32, user_data: *mut c_void) {
    // SAFETY: the interpreter passed itself; nothing else borrows it during
    // kr_replay.
    let interp = unsafe { &mut *user_data.cast::<Interp>() };
    if interp.pass_panic.is_some() {
        return;
    }
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| interp.pass(pass))) {
        interp.pass_panic = Some(panic);
    }
}

/// A tool's batch copy as the fuzz model's tool writes one: each region by
/// the runtime's blocking copy, so the runtime's injected copy faults reach
/// it (and the library's fallback to its own copies) as they reach copies.
fn tool_copy() -> std::sync::Arc<kernel_replay::BatchCopyFn> {
    std::sync::Arc::new(
        |_agent, regions: &[kernel_replay::CopyRegion], _direction| {
            for region in regions {
                // SAFETY: the library hands over regions it keeps live for the
                // call, `size` bytes on each side.
                let status = unsafe {
                    crate::app::memory_copy(
                        region.dst as *mut u8,
                        region.src as *const u8,
                        region.size as usize,
                    )
                };
                if status != kernel_replay::hsa::HSA_STATUS_SUCCESS {
                    return Err(status);
                }
            }
            Ok(())
        },
    )
}
