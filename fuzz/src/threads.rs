//! The threaded runner: an application thread churning allocations and
//! loading and unloading executables, a thread mapping, unmapping and
//! changing the access of virtual-memory chunks (with the vmem API), and a
//! thread copying into tracked buffers with `hsa_amd_memory_async_copy`,
//! against a tool thread running replay windows on the same agent, so that
//! the next race is found by the fuzzer.
//!
//! An input is a storage policy and a list of rounds; each round gives the
//! threads a short op list each (decoded one byte per op) and runs them at
//! once.
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
//! - every mapped chunk holds its current tag or zeros (its handle's fresh
//!   bytes), never an earlier tag: a restore never writes a chunk unmapped,
//!   mapped again or no longer writable by its owner since the capture;
//! - every buffer the copy thread writes holds one value throughout, one
//!   some copy put there whole (or its first fill): no torn snapshot;
//! - the inventory holds exactly the live tracked allocations and the
//!   mapped chunks their owner may write;
//! - every wait is bounded: an application copy completes (its signal
//!   1 -> 0) within seconds, and no snapshot declines for copies in flight
//!   (the fence's timeout is set to seconds; past it the run fails);
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

/// What the new threads did in this process (so the seeded runner can show
/// that the generator reaches them).
pub mod stats {
    use std::sync::atomic::AtomicU64;

    pub static CHUNKS_MAPPED: AtomicU64 = AtomicU64::new(0);
    pub static CHUNKS_REVOKED: AtomicU64 = AtomicU64::new(0);
    pub static CHUNKS_UNMAPPED: AtomicU64 = AtomicU64::new(0);
    pub static COPIES: AtomicU64 = AtomicU64::new(0);
    pub static HELD_COPIES: AtomicU64 = AtomicU64::new(0);
}

fn bump(counter: &std::sync::atomic::AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

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
const POISON: u8 = hsa_sim::POISON_BYTE;

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

/// What the virtual-memory thread does to its chunks (one reserved range
/// of [`CHUNKS`] chunks on the GPU; a no-op without the vmem API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmemOp {
    /// A new coarse-grained handle mapped at chunk `n % CHUNKS`, read-write
    /// for the GPU and the CPU, filled with a new tag.
    Map(u8),
    /// Unmaps the chunk and releases its handle (checked first).
    Unmap(u8),
    /// Takes the GPU's access away (the CPU keeps it), then refills the
    /// chunk with a new tag: no restore may write it any more.
    Revoke(u8),
    /// Gives the GPU read-write access again: tracked anew.
    Grant(u8),
    /// A kernel writes the chunk again (its tag).
    Write(u8),
    Yield,
}

/// What the copy thread does with its tracked buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyOp {
    /// Fills the untracked source with a new tag and copies it all into
    /// buffer `n % 2`, then waits for the completion.
    Copy(u8),
    /// Copies buffer `1 - n % 2` into buffer `n % 2` (both tracked).
    Between(u8),
    /// As `Copy`, held by a dependency that the thread releases after a
    /// few yields (a snapshot meanwhile waits at the fence).
    Held(u8),
    /// As `Copy`, as a rect copy of 16 rows of 256 bytes.
    Rect(u8),
    Yield,
}

/// One round: each thread's ops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Round {
    pub app: Vec<AppOp>,
    pub tool: Vec<ToolOp>,
    pub vmem: Vec<VmemOp>,
    pub copy: Vec<CopyOp>,
}

/// One decoded input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    pub policy: kernel_replay::StoragePolicy,
    pub address_reuse: bool,
    pub rounds: Vec<Round>,
}

const POLICIES: [kernel_replay::StoragePolicy; 5] = [
    kernel_replay::StoragePolicy::Auto,
    kernel_replay::StoragePolicy::Device,
    kernel_replay::StoragePolicy::Pinned,
    kernel_replay::StoragePolicy::Pageable,
    kernel_replay::StoragePolicy::Baseline,
];

impl Input {
    /// Byte 0: policy and address reuse; then per round two bytes of op
    /// counts (application and tool thread, vmem and copy thread: a nibble
    /// each), followed by the ops (one byte each: kind in the low three
    /// bits, operand in the rest). Bytes that run out read as 0.
    pub fn decode(data: &[u8]) -> Input {
        let mut bytes = data.iter().copied();
        let mut next = move || bytes.next();
        let head = next().unwrap_or(0);
        let mut rounds = Vec::new();
        while rounds.len() < MAX_ROUNDS {
            let Some(counts) = next() else { break };
            let more = next().unwrap_or(0);
            let count = |nibble: u8| usize::from(nibble) % (MAX_OPS_PER_ROUND / 2) * 2;
            let (app_ops, tool_ops) = (count(counts & 0x0F), count(counts >> 4));
            let (vmem_ops, copy_ops) = (count(more & 0x0F), count(more >> 4));
            let app = (0..app_ops.max(1))
                .map(|_| decode_app(next().unwrap_or(0)))
                .collect();
            let tool = (0..tool_ops.max(1))
                .map(|_| decode_tool(next().unwrap_or(0)))
                .collect();
            let vmem = (0..vmem_ops)
                .map(|_| decode_vmem(next().unwrap_or(0)))
                .collect();
            let copy = (0..copy_ops)
                .map(|_| decode_copy(next().unwrap_or(0)))
                .collect();
            rounds.push(Round {
                app,
                tool,
                vmem,
                copy,
            });
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

fn decode_vmem(byte: u8) -> VmemOp {
    let operand = byte >> 3;
    match byte & 7 {
        0 | 1 => VmemOp::Map(operand),
        2 => VmemOp::Unmap(operand),
        3 => VmemOp::Revoke(operand),
        4 => VmemOp::Grant(operand),
        5 => VmemOp::Write(operand),
        _ => VmemOp::Yield,
    }
}

fn decode_copy(byte: u8) -> CopyOp {
    let operand = byte >> 3;
    match byte & 7 {
        0 | 1 => CopyOp::Copy(operand),
        2 => CopyOp::Between(operand),
        3 => CopyOp::Held(operand),
        4 => CopyOp::Rect(operand),
        _ => CopyOp::Yield,
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

/// Chunks of the vmem thread's reserved range, and their size.
const CHUNKS: usize = 4;
const CHUNK: usize = crate::model::CHUNK;
/// Bytes of each buffer of the copy thread.
const COPY_SIZE: usize = 4096;
/// How long an application copy may take, and the fence may hold a
/// snapshot back: past it the run fails (a hang, not a slow machine).
const BOUNDED: std::time::Duration = std::time::Duration::from_secs(10);

/// A mapped chunk of the vmem thread.
struct Chunk {
    handle: u64,
    tag: u8,
    /// The GPU may read and write it: a tracked region.
    writable: bool,
    /// It may hold zeros (its handle's fresh bytes, which a snapshot taken
    /// before the first fill captured); not after a revoke and refill.
    zeros: bool,
}

/// The vmem thread's state: one reserved range of chunks on the GPU.
struct Vmem {
    api: &'static app::VmemApi,
    gpu: hsa_sim::Agent,
    cpu: hsa_sim::Agent,
    pool: hsa_sim::Pool,
    base: *mut u8,
    chunks: [Option<Chunk>; CHUNKS],
}

// SAFETY: as for App.
unsafe impl Send for Vmem {}

/// Asserts that every byte of a chunk is its tag, or zeros where allowed.
fn check_chunk(ptr: *const u8, chunk: &Chunk) {
    // SAFETY: a mapped chunk the CPU may read (every set_access keeps it
    // read-write for the CPU).
    let bytes = unsafe { crate::app::view(ptr, CHUNK) };
    if let Some((at, &byte)) = bytes
        .iter()
        .enumerate()
        .find(|(_, &b)| b != chunk.tag && !(b == 0 && chunk.zeros))
    {
        panic!(
            "mapped chunk at {ptr:p} (tag {:#04x}, zeros allowed: {}) holds {byte:#04x} at \
             offset {at}: a restore wrote a mapping it no longer covers",
            chunk.tag, chunk.zeros
        );
    }
}

impl Vmem {
    fn at(&self, i: usize) -> *mut u8 {
        // SAFETY: inside the reserved range.
        unsafe { self.base.add(i * CHUNK) }
    }

    fn grant(&self, i: usize, gpu: u32) {
        let grants = [(self.gpu, gpu), (self.cpu, app::PERM_RW)];
        assert_eq!((self.api.set_access)(self.at(i), CHUNK, &grants), SUCCESS);
    }

    fn apply(&mut self, op: VmemOp) {
        let index = |n: u8| usize::from(n) % CHUNKS;
        match op {
            VmemOp::Map(n) if self.chunks[index(n)].is_none() => {
                let i = index(n);
                let handle = (self.api.handle_create)(self.pool, CHUNK).expect("handle create");
                assert_eq!((self.api.map)(self.at(i), CHUNK, handle), SUCCESS);
                self.grant(i, app::PERM_RW);
                let tag = next_tag();
                // SAFETY: the mapped chunk, read-write for the CPU.
                unsafe { app::store(self.at(i), CHUNK, tag) };
                self.chunks[i] = Some(Chunk {
                    handle,
                    tag,
                    writable: true,
                    zeros: true,
                });
                bump(&stats::CHUNKS_MAPPED);
            }
            VmemOp::Unmap(n) => {
                let i = index(n);
                if let Some(chunk) = self.chunks[i].take() {
                    check_chunk(self.at(i), &chunk);
                    assert_eq!((self.api.unmap)(self.at(i), CHUNK), SUCCESS);
                    assert_eq!((self.api.handle_release)(chunk.handle), SUCCESS);
                    bump(&stats::CHUNKS_UNMAPPED);
                }
            }
            VmemOp::Revoke(n) => {
                let i = index(n);
                let ptr = self.at(i);
                if self.chunks[i].as_ref().is_some_and(|c| c.writable) {
                    self.grant(i, app::PERM_NONE);
                    assert_ne!((self.api.get_access)(ptr, self.gpu), Ok(app::PERM_RW));
                    let chunk = self.chunks[i].as_mut().expect("mapped");
                    check_chunk(ptr, chunk);
                    // Retired before the runtime took the access away: from
                    // now on no restore may write it, so a new tag shows any
                    // that does.
                    chunk.tag = next_tag();
                    chunk.writable = false;
                    bump(&stats::CHUNKS_REVOKED);
                    chunk.zeros = false;
                    // SAFETY: the mapped chunk, read-write for the CPU.
                    unsafe { app::store(ptr, CHUNK, chunk.tag) };
                }
            }
            VmemOp::Grant(n) => {
                let i = index(n);
                if self.chunks[i].as_ref().is_some_and(|c| !c.writable) {
                    self.grant(i, app::PERM_RW);
                    self.chunks[i].as_mut().expect("mapped").writable = true;
                }
            }
            VmemOp::Write(n) => {
                let i = index(n);
                if let Some(chunk) = &self.chunks[i] {
                    // SAFETY: the mapped chunk, read-write for the CPU.
                    unsafe { app::store(self.at(i), CHUNK, chunk.tag) };
                }
            }
            VmemOp::Yield => std::thread::yield_now(),
            VmemOp::Map(_) => {}
        }
    }

    fn check(&self) {
        for (i, chunk) in self.chunks.iter().enumerate() {
            if let Some(chunk) = chunk {
                check_chunk(self.at(i), chunk);
            }
        }
    }

    /// Chunks the inventory must hold.
    fn tracked(&self) -> usize {
        self.chunks.iter().flatten().filter(|c| c.writable).count()
    }

    fn cleanup(&mut self) {
        for i in 0..CHUNKS {
            self.apply(VmemOp::Unmap(i as u8));
        }
        assert_eq!((self.api.address_free)(self.base, CHUNKS * CHUNK), SUCCESS);
    }
}

/// The copy thread's state: an untracked host source and two tracked
/// device buffers only copies write, with every value each may hold.
struct Copier {
    gpu: hsa_sim::Agent,
    cpu: hsa_sim::Agent,
    src: *mut u8,
    dsts: [*mut u8; 2],
    allowed: [Vec<u8>; 2],
}

// SAFETY: as for App.
unsafe impl Send for Copier {}

impl Copier {
    /// Submits a copy (through `submit`, given the completion signal) and
    /// waits for it: the signal must go from 1 to 0 within [`BOUNDED`].
    fn wait_for(submit: impl FnOnce(app::hsa_signal_t) -> kernel_replay::hsa::hsa_status_t) {
        bump(&stats::COPIES);
        let done = app::signal_create(1);
        assert_eq!(submit(done), SUCCESS, "an application copy was refused");
        assert_eq!(
            app::signal_wait_below(done, 1, BOUNDED),
            0,
            "an application copy did not complete within {BOUNDED:?}"
        );
        app::signal_destroy(done);
    }

    /// Fills the source with a new tag that buffer `i` may then hold.
    fn fill_source(&mut self, i: usize) {
        let tag = next_tag();
        // SAFETY: the thread's own host buffer, no copy of it in flight.
        unsafe { app::store(self.src, COPY_SIZE, tag) };
        self.allowed[i].push(tag);
    }

    fn apply(&mut self, op: CopyOp) {
        let index = |n: u8| usize::from(n) % 2;
        let (gpu, cpu, src) = (self.gpu, self.cpu, self.src);
        match op {
            CopyOp::Copy(n) => {
                let i = index(n);
                self.fill_source(i);
                let dst = self.dsts[i];
                Self::wait_for(|done| app::async_copy(dst, gpu, src, cpu, COPY_SIZE, &[], done));
            }
            CopyOp::Between(n) => {
                let (i, j) = (index(n), 1 - index(n));
                let more = self.allowed[j].clone();
                self.allowed[i].extend(more);
                let (dst, from) = (self.dsts[i], self.dsts[j]);
                Self::wait_for(|done| app::async_copy(dst, gpu, from, gpu, COPY_SIZE, &[], done));
            }
            CopyOp::Held(n) => {
                let i = index(n);
                self.fill_source(i);
                let dst = self.dsts[i];
                let dependency = app::signal_create(1);
                bump(&stats::HELD_COPIES);
                Self::wait_for(|done| {
                    let status =
                        app::async_copy(dst, gpu, src, cpu, COPY_SIZE, &[dependency], done);
                    for _ in 0..3 {
                        std::thread::yield_now();
                    }
                    app::signal_store(dependency, 0);
                    status
                });
                app::signal_destroy(dependency);
            }
            CopyOp::Rect(n) => {
                let i = index(n);
                self.fill_source(i);
                let dst = self.dsts[i];
                Self::wait_for(|done| {
                    app::async_copy_rect(dst, src, 256, 256, COPY_SIZE / 256, gpu, &[], done)
                });
            }
            CopyOp::Yield => std::thread::yield_now(),
        }
    }

    /// Every buffer holds one value throughout, one a copy put there whole.
    fn check(&self) {
        for (dst, allowed) in self.dsts.iter().zip(&self.allowed) {
            // SAFETY: the thread's live buffers.
            let bytes = unsafe { crate::app::view(*dst, COPY_SIZE) };
            let first = bytes[0];
            assert!(
                bytes.iter().all(|&b| b == first) && allowed.contains(&first),
                "copied buffer at {dst:p} holds {first:#04x} and {:?} (allowed {allowed:x?}): \
                 a torn copy or snapshot",
                bytes.iter().find(|&&b| b != first)
            );
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
    sim.set_mode(hsa_sim::Mode::AddressReuse, input.address_reuse);
    assert!(kernel_replay::set_tracking(true));
    let gpu = sim.gpu(0);
    let pool = sim.pool(gpu, hsa_sim::PoolKind::DeviceCoarse);
    let violations_before = sim.count(hsa_sim::Counter::CopyViolations);
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
    // Snapshots wait for application copies in flight: long enough that
    // only a hang runs out.
    kernel_replay::set_copy_fence_timeout(std::time::Duration::from_nanos(
        BOUNDED.as_nanos() as u64
    ));
    let mut vmem = app::vmem_api().map(|api| Vmem {
        api,
        gpu,
        cpu: sim.cpu(),
        pool,
        base: (api.reserve)(CHUNKS * CHUNK).expect("reserve"),
        chunks: [const { None }; CHUNKS],
    });
    let mut copier = Copier {
        gpu,
        cpu: sim.cpu(),
        src: app::pool_allocate(
            sim.pool(sim.cpu(), hsa_sim::PoolKind::SystemFine),
            COPY_SIZE,
            0,
        )
        .expect("copy source"),
        dsts: [0, 1].map(|_| app::pool_allocate(pool, COPY_SIZE, 0).expect("copy buffer")),
        allowed: [Vec::new(), Vec::new()],
    };
    for (i, &dst) in copier.dsts.iter().enumerate() {
        let tag = next_tag();
        // SAFETY: the fresh buffer.
        unsafe { app::store(dst, COPY_SIZE, tag) };
        copier.allowed[i].push(tag);
    }

    for round in &input.rounds {
        std::thread::scope(|s| {
            let (app_state, tool, sim) = (&mut app_state, &mut tool, &sim);
            s.spawn(move || round.app.iter().for_each(|&op| app_state.apply(sim, op)));
            s.spawn(move || round.tool.iter().for_each(|&op| tool.apply(op)));
            if let Some(vmem) = vmem.as_mut().filter(|_| !round.vmem.is_empty()) {
                s.spawn(move || round.vmem.iter().for_each(|&op| vmem.apply(op)));
            }
            if !round.copy.is_empty() {
                let copier = &mut copier;
                s.spawn(move || round.copy.iter().for_each(|&op| copier.apply(op)));
            }
        });
        // Quiescent: every thread joined.
        assert_eq!(
            sim.count(hsa_sim::Counter::CopyViolations),
            violations_before,
            "a copy touched freed, unloaded or unmapped memory, or ran out of bounds"
        );
        app_state.check();
        copier.check();
        let chunks = vmem.as_ref().map_or(0, |v| {
            v.check();
            v.tracked()
        });
        let tracked = app_state.buffers.len() + TOOL_BUFFERS + copier.dsts.len() + chunks;
        assert_eq!(
            kernel_replay::tracked(app::agent(gpu)).regions,
            tracked,
            "the inventory is not the live tracked allocations and mappings"
        );
        // The fence's count drops in the completion handler, just after
        // the application's signal was set.
        let deadline = std::time::Instant::now() + BOUNDED;
        while kernel_replay::testing::fence_in_flight(gpu.handle) != 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the fence counts a copy in flight after every copy completed"
            );
            std::thread::yield_now();
        }
    }

    // Clean up to the state the next input expects.
    if let Some(vmem) = vmem.as_mut() {
        vmem.cleanup();
    }
    for p in copier.dsts.into_iter().chain([copier.src]) {
        assert_eq!(app::pool_free(p), SUCCESS);
    }
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
    assert_eq!(
        sim.count(hsa_sim::Counter::CopyViolations),
        violations_before
    );
    kernel_replay::trim_retained();
    assert_eq!(kernel_replay::device_bytes_in_use(), 0);
    assert_eq!(kernel_replay::host_bytes_in_use(), 0);
    assert!(kr_set_storage_policy(
        kernel_replay::StoragePolicy::Baseline as u32
    ));
    sim.set_mode(hsa_sim::Mode::AddressReuse, false);
    kernel_replay::set_tracking(false);
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
        assert!(full.rounds.iter().all(|r| [
            r.app.len(),
            r.tool.len(),
            r.vmem.len(),
            r.copy.len()
        ]
        .iter()
        .all(|&n| n <= MAX_OPS_PER_ROUND)));
        assert!(full.address_reuse);
    }
}
