//! The threaded runner: an application thread churning allocations and
//! loading and unloading executables, against a tool thread running replay
//! windows on the same agent, so that the next race is found by the fuzzer.
//!
//! An input is a storage policy and a list of rounds; each round gives both
//! threads a short op list (decoded one byte per op) and runs them at once.
//! Thread scheduling is the operating system's, so one input does not fix
//! one interleaving: the op mix and the yields shape the interleavings, and
//! many runs of an input explore them. Between rounds both threads are
//! joined, and the invariants are checked at that quiescent point:
//!
//! - no copy touched freed or unloaded memory, ran out of bounds, or wrote
//!   the quarantine (the runtime's own counters);
//! - every byte of each application buffer and variable is its owner's tag,
//!   or what it held when it was created (zeros, or the runtime's poison on
//!   a reused block), which a snapshot taken before the fill legitimately
//!   restores; never another allocation's tag (a stale restore into a
//!   reused address);
//! - the inventory holds exactly the live tracked allocations;
//! - and, inside the tool thread, every restore brings the tool's own
//!   buffers (which only it writes) back to exactly what was captured.
//!
//! At the end everything is freed and unloaded and the state is clean for
//! the next input (what `interp::clean_session` checks).

use std::sync::atomic::{AtomicU8, Ordering};

use kernel_replay::ffi::types::*;
use kernel_replay::ffi::*;

use crate::app::{self, SUCCESS};
use crate::interp::clean_session;

/// Rounds per input, at most.
pub const MAX_ROUNDS: usize = 8;
/// Ops per thread per round, at most.
pub const MAX_OPS_PER_ROUND: usize = 24;
/// Live application buffers / executables, at most.
const MAX_LIVE: usize = 12;
/// The tool's own buffers: captured by every snapshot, written only by it.
const TOOL_BUFFERS: usize = 3;
const TOOL_BUFFER_SIZE: usize = 8192;
const SIZES: [usize; 4] = [256, 4096, 20_000, 65_536];
const POISON: u8 = hsa_sim::HSA_SIM_POISON_BYTE;

/// What the application thread does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppOp {
    /// A tracked device buffer, then a kernel filling it with its tag.
    Allocate(u8),
    /// Frees one of its buffers (checked first).
    Free(u8),
    /// A kernel writes one of its buffers again (its own tag).
    Write(u8),
    /// Loads an executable with one variable, filled with its tag.
    Load(u8),
    /// Unloads one through the library's `hsa_executable_destroy` wrapper.
    Unload(u8),
    Yield,
}

/// What the tool thread does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolOp {
    /// A replay window of 2 to 4 passes: each pass writes the tool's
    /// buffers, each restore must bring them back.
    Window(u8),
    /// Takes a snapshot and keeps it (replacing the kept one).
    Snap,
    /// Restores the kept snapshot.
    Restore,
    /// Drops the kept snapshot.
    Drop,
    Yield,
}

/// One decoded input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    pub policy: kr_storage_policy_t,
    pub address_reuse: bool,
    pub rounds: Vec<(Vec<AppOp>, Vec<ToolOp>)>,
}

const POLICIES: [kr_storage_policy_t; 5] = [
    kr_storage_policy_t::KR_STORAGE_AUTO,
    kr_storage_policy_t::KR_STORAGE_DEVICE,
    kr_storage_policy_t::KR_STORAGE_PINNED,
    kr_storage_policy_t::KR_STORAGE_PAGEABLE,
    kr_storage_policy_t::KR_STORAGE_BASELINE,
];

impl Input {
    /// Byte 0: policy and address reuse; then per round one byte each for
    /// the two op counts, followed by the ops (one byte each: kind in the
    /// low three bits, operand in the rest). Bytes that run out read as 0.
    pub fn decode(data: &[u8]) -> Input {
        let mut bytes = data.iter().copied();
        let mut next = move || bytes.next();
        let head = next().unwrap_or(0);
        let mut rounds = Vec::new();
        while rounds.len() < MAX_ROUNDS {
            let Some(counts) = next() else { break };
            let app_ops = usize::from(counts & 0x0F) % (MAX_OPS_PER_ROUND / 2) * 2;
            let tool_ops = usize::from(counts >> 4) % (MAX_OPS_PER_ROUND / 2) * 2;
            let app = (0..app_ops.max(1))
                .map(|_| decode_app(next().unwrap_or(0)))
                .collect();
            let tool = (0..tool_ops.max(1))
                .map(|_| decode_tool(next().unwrap_or(0)))
                .collect();
            rounds.push((app, tool));
        }
        Input {
            policy: POLICIES[usize::from(head % 5)],
            address_reuse: head & 0x80 != 0,
            rounds,
        }
    }
}

fn decode_app(byte: u8) -> AppOp {
    let operand = byte >> 3;
    match byte & 7 {
        0 | 1 => AppOp::Allocate(operand),
        2 => AppOp::Free(operand),
        3 => AppOp::Write(operand),
        4 => AppOp::Load(operand),
        5 => AppOp::Unload(operand),
        _ => AppOp::Yield,
    }
}

fn decode_tool(byte: u8) -> ToolOp {
    match byte & 7 {
        0..=2 => ToolOp::Window(byte >> 3),
        3 => ToolOp::Snap,
        4 => ToolOp::Restore,
        5 => ToolOp::Drop,
        _ => ToolOp::Yield,
    }
}

/// A buffer or variable of the application, with the tag its kernel writes.
struct Owned {
    ptr: *mut u8,
    size: usize,
    tag: u8,
}

/// An application executable and its variable.
struct Loaded {
    exe: hsa_sim::Executable,
    variable: Owned,
}

/// The application thread's state.
struct App {
    gpu: hsa_sim::Agent,
    pool: hsa_sim::Pool,
    buffers: Vec<Owned>,
    executables: Vec<Loaded>,
}

// SAFETY: raw pointers to simulated device memory, used by one thread at a
// time (the runner moves the state into a scoped thread and back).
unsafe impl Send for App {}

/// Tags are never 0 or the poison, so neither is mistaken for an owner.
fn next_tag() -> u8 {
    static NEXT: AtomicU8 = AtomicU8::new(1);
    loop {
        let tag = NEXT.fetch_add(1, Ordering::Relaxed);
        if tag != 0 && tag != POISON {
            return tag;
        }
    }
}

/// Asserts that every byte of `owned` is its tag or a creation-time value.
fn check_owned(owned: &Owned, what: &str) {
    // SAFETY: a live simulated allocation or variable of `size` bytes.
    let bytes = unsafe { crate::app::view(owned.ptr, owned.size) };
    if let Some((at, &byte)) = bytes
        .iter()
        .enumerate()
        .find(|(_, &b)| b != owned.tag && b != 0 && b != POISON)
    {
        panic!(
            "{what} at {:p} (tag {:#04x}) holds {byte:#04x} at offset {at}: \
             another allocation's bytes",
            owned.ptr, owned.tag
        );
    }
}

impl App {
    fn apply(&mut self, sim: &hsa_sim::SimSession, op: AppOp) {
        match op {
            AppOp::Allocate(size) if self.buffers.len() < MAX_LIVE => {
                let size = SIZES[usize::from(size) % SIZES.len()];
                let ptr = app::pool_allocate(self.pool, size, 0).expect("device allocation");
                let owned = Owned {
                    ptr,
                    size,
                    tag: next_tag(),
                };
                // SAFETY: the fresh allocation of `size` bytes.
                unsafe { app::store(ptr, size, owned.tag) };
                self.buffers.push(owned);
            }
            AppOp::Free(pick) if !self.buffers.is_empty() => {
                let owned = self
                    .buffers
                    .swap_remove(usize::from(pick) % self.buffers.len());
                check_owned(&owned, "buffer");
                assert_eq!(app::pool_free(owned.ptr), SUCCESS);
            }
            AppOp::Write(pick) if !self.buffers.is_empty() => {
                let owned = &self.buffers[usize::from(pick) % self.buffers.len()];
                // SAFETY: a live buffer of the application.
                unsafe { app::store(owned.ptr, owned.size, owned.tag) };
            }
            AppOp::Load(size) if self.executables.len() < MAX_LIVE => {
                let exe = sim.executable_create();
                let size = 64 << (size % 4);
                let ptr = sim.add_variable(exe, self.gpu, "counter", size as u32, false);
                assert!(!ptr.is_null());
                let variable = Owned {
                    ptr,
                    size,
                    tag: next_tag(),
                };
                // SAFETY: the variable's fresh storage.
                unsafe { app::store(ptr, size, variable.tag) };
                self.executables.push(Loaded { exe, variable });
            }
            AppOp::Unload(pick) if !self.executables.is_empty() => {
                let loaded = self
                    .executables
                    .swap_remove(usize::from(pick) % self.executables.len());
                check_owned(&loaded.variable, "variable");
                assert_eq!(app::executable_destroy(loaded.exe), SUCCESS);
            }
            AppOp::Yield => std::thread::yield_now(),
            _ => {}
        }
    }

    fn check(&self) {
        for owned in &self.buffers {
            check_owned(owned, "buffer");
        }
        for loaded in &self.executables {
            check_owned(&loaded.variable, "variable");
        }
    }
}

/// The tool thread's state: its own buffers and the snapshot it keeps.
struct Tool {
    gpu: hsa_sim::Agent,
    buffers: Vec<*mut u8>,
    kept: Option<*mut kr_snapshot_t>,
    /// The tool buffers' bytes when `kept` was taken.
    kept_bytes: Vec<u8>,
    round: u8,
}

// SAFETY: as for App.
unsafe impl Send for Tool {}

impl Tool {
    fn buffer_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(TOOL_BUFFERS * TOOL_BUFFER_SIZE);
        for &p in &self.buffers {
            // SAFETY: the tool's live buffers.
            bytes.extend_from_slice(unsafe { crate::app::view(p, TOOL_BUFFER_SIZE) });
        }
        bytes
    }

    fn scribble(&mut self) {
        self.round = self.round.wrapping_add(1);
        for (i, &p) in self.buffers.iter().enumerate() {
            // SAFETY: the tool's live buffers.
            unsafe { app::store(p, TOOL_BUFFER_SIZE, self.round ^ (i as u8 * 31)) };
        }
    }

    fn snap(&self) -> *mut kr_snapshot_t {
        let snapshot = kr_snap(app::agent(self.gpu));
        assert!(!snapshot.is_null());
        // SAFETY: a live snapshot.
        let ok = unsafe { kr_snapshot_ok(snapshot) };
        // SAFETY: as above.
        let reason = unsafe { kr_snapshot_decline_reason(snapshot) };
        assert!(ok, "a snapshot declined under concurrency: {reason:?}");
        snapshot
    }

    /// Restores and checks that the tool's buffers are back to `expected`.
    fn restore_and_check(&self, snapshot: *mut kr_snapshot_t, expected: &[u8]) {
        let mut report = kr_restore_report_t::default();
        // SAFETY: a live snapshot and a writable report.
        unsafe { kr_restore_with_report(snapshot, &mut report) };
        assert_eq!(report.failed, 0, "a restore copy failed: {report:?}");
        assert!(
            self.buffer_bytes() == expected,
            "a restore did not bring the tool's buffers back"
        );
    }

    fn drop_kept(&mut self) {
        if let Some(snapshot) = self.kept.take() {
            // SAFETY: the kept snapshot, freed once.
            unsafe { kr_snapshot_free(snapshot) };
        }
    }

    fn apply(&mut self, op: ToolOp) {
        match op {
            ToolOp::Window(passes) => {
                let expected = self.buffer_bytes();
                let snapshot = self.snap();
                for _ in 0..2 + passes % 3 {
                    self.scribble();
                    self.restore_and_check(snapshot, &expected);
                }
                // SAFETY: the window's snapshot, freed once.
                unsafe { kr_snapshot_free(snapshot) };
            }
            ToolOp::Snap => {
                self.drop_kept();
                self.kept_bytes = self.buffer_bytes();
                self.kept = Some(self.snap());
            }
            ToolOp::Restore => {
                if let Some(snapshot) = self.kept {
                    self.scribble();
                    let expected = std::mem::take(&mut self.kept_bytes);
                    self.restore_and_check(snapshot, &expected);
                    self.kept_bytes = expected;
                }
            }
            ToolOp::Drop => self.drop_kept(),
            ToolOp::Yield => std::thread::yield_now(),
        }
    }
}

/// Runs one input from a clean state; panics on the first broken invariant.
pub fn run_bytes(data: &[u8]) {
    run(&Input::decode(data));
}

/// Runs one decoded input from a clean state.
pub fn run(input: &Input) {
    let sim = clean_session();
    assert!(kr_set_storage_policy(input.policy as u32));
    sim.set_address_reuse(input.address_reuse);
    assert!(kr_set_tracking_enabled(true));
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    let violations_before = sim.copy_violations();
    let mut app_state = App {
        gpu,
        pool,
        buffers: Vec::new(),
        executables: Vec::new(),
    };
    let mut tool = Tool {
        gpu,
        buffers: (0..TOOL_BUFFERS)
            .map(|_| app::pool_allocate(pool, TOOL_BUFFER_SIZE, 0).expect("tool buffer"))
            .collect(),
        kept: None,
        kept_bytes: Vec::new(),
        round: 0,
    };
    tool.scribble();

    for (app_ops, tool_ops) in &input.rounds {
        std::thread::scope(|s| {
            let (app_state, tool, sim) = (&mut app_state, &mut tool, &sim);
            s.spawn(move || app_ops.iter().for_each(|&op| app_state.apply(sim, op)));
            s.spawn(move || tool_ops.iter().for_each(|&op| tool.apply(op)));
        });
        // Quiescent: both threads joined.
        assert_eq!(
            sim.copy_violations(),
            violations_before,
            "a copy touched freed or unloaded memory, or ran out of bounds"
        );
        app_state.check();
        let tracked = app_state.buffers.len() + TOOL_BUFFERS;
        assert_eq!(
            kr_tracked_count(app::agent(gpu)),
            tracked,
            "the inventory is not the live tracked allocations"
        );
    }

    // Clean up to the state the next input expects.
    tool.drop_kept();
    for loaded in app_state.executables.drain(..) {
        assert_eq!(app::executable_destroy(loaded.exe), SUCCESS);
    }
    for owned in app_state.buffers.drain(..) {
        assert_eq!(app::pool_free(owned.ptr), SUCCESS);
    }
    for &p in &tool.buffers {
        assert_eq!(app::pool_free(p), SUCCESS);
    }
    assert!(sim.quarantine_intact(), "freed memory was written");
    assert_eq!(sim.copy_violations(), violations_before);
    kr_trim_retained();
    assert_eq!(kr_device_bytes_in_use(), 0);
    assert_eq!(kr_host_bytes_in_use(), 0);
    assert!(kr_set_storage_policy(
        kr_storage_policy_t::KR_STORAGE_BASELINE as u32
    ));
    sim.set_address_reuse(false);
    kr_set_tracking_enabled(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_is_total_and_bounded() {
        let empty = Input::decode(&[]);
        assert!(empty.rounds.is_empty());
        let full = Input::decode(&[0xFF; 4096]);
        assert_eq!(full.rounds.len(), MAX_ROUNDS);
        assert!(full
            .rounds
            .iter()
            .all(|(a, t)| a.len() <= MAX_OPS_PER_ROUND && t.len() <= MAX_OPS_PER_ROUND));
        assert!(full.address_reuse);
    }
}
