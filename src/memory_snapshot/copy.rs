//! The copy engine: one blocking `hsa_memory_copy` per region, or, where the
//! runtime has `hsa_amd_memory_async_copy` and signals, every region's copy
//! submitted together and waited for once.
//!
//! Batched copies keep a window of in-flight copies, each with its own
//! completion signal from a reused pool, so a failed copy is attributed to
//! its region (a snapshot declines, a restore reports it) and every copy has
//! finished before the caller releases the locks it holds. A submission the
//! runtime refuses falls back to a blocking copy of that region.

use std::collections::VecDeque;
use std::ffi::c_void;

use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::sys::{hsa_signal_t, HSA_SIGNAL_CONDITION_LT, HSA_WAIT_STATE_BLOCKED};
use crate::hsa::{hsa_agent_t, hsa_status_t, HSA_STATUS_ERROR, HSA_STATUS_SUCCESS};
use crate::memory_snapshot::context::Context;

/// Copies in flight at once. Each holds one signal: a small, fixed number,
/// since runtimes limit interrupt-capable signals.
pub(crate) const WINDOW: usize = 64;

/// One region's copy.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    pub dst: usize,
    pub dst_agent: hsa_agent_t,
    pub src: usize,
    pub src_agent: hsa_agent_t,
    pub size: usize,
    /// False when one side is pageable host memory: the runtime's async
    /// engine needs pinned or device memory on both sides.
    pub async_ok: bool,
    /// Both sides are host memory (a host region and its pageable copy):
    /// the CPU copies it, while the GPU is idle between passes.
    pub by_cpu: bool,
    /// Managed memory: only the named GPU may copy it (an async copy with
    /// both agents that GPU, or the device kernels on it), never the CPU or
    /// `hsa_memory_copy`, which would migrate the pages it touches.
    pub gpu_only: bool,
}

/// `hsa_amd_memory_async_copy`'s type.
type AsyncCopyFn = unsafe extern "C" fn(
    *mut c_void,
    hsa_agent_t,
    *const c_void,
    hsa_agent_t,
    usize,
    u32,
    *const hsa_signal_t,
    hsa_signal_t,
) -> hsa_status_t;

impl Transfer {
    /// Submits the transfer as one async copy completing on `signal`.
    ///
    /// # Safety
    /// Both sides are valid for `size` bytes until the copy completes, and
    /// `signal` is ours, not in flight.
    unsafe fn submit(&self, async_copy: AsyncCopyFn, signal: hsa_signal_t) -> hsa_status_t {
        // SAFETY: the caller's promise; no dependencies.
        unsafe {
            async_copy(
                self.dst as *mut c_void,
                self.dst_agent,
                self.src as *const c_void,
                self.src_agent,
                self.size,
                0,
                std::ptr::null(),
                signal,
            )
        }
    }
}

/// Copies `size` bytes from `src` to `dst` and waits: by the CPU when
/// `by_cpu` (both sides host memory), else through `hsa_memory_copy`.
///
/// # Safety
/// Both sides are valid for `size` bytes, and host memory when `by_cpu`.
pub(crate) unsafe fn copy_now(
    core: &CoreEntries,
    dst: usize,
    src: usize,
    size: usize,
    by_cpu: bool,
) -> Result<(), hsa_status_t> {
    if by_cpu {
        // SAFETY: the caller's promise; a region and its copy never overlap.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, size) };
        return Ok(());
    }
    // SAFETY: the caller's promise.
    unsafe { core.copy(dst as *mut c_void, src as *const c_void, size) }
}

/// One asynchronous copy on the transfer's agents, waited for: how a
/// GPU-only transfer (managed memory) is copied one at a time. Fails when
/// the runtime has no async copies or signals, or refuses the copy: never
/// falls back to a copy by another agent.
///
/// # Safety
/// Both sides are valid for `size` bytes until it returns.
pub(crate) unsafe fn copy_on_agent(
    cx: Context,
    core: &CoreEntries,
    transfer: &Transfer,
) -> Result<(), hsa_status_t> {
    let (Some(async_copy), Some(wait), Some(store)) = (
        cx.amd().and_then(|amd| amd.hsa_amd_memory_async_copy_fn),
        core.hsa_signal_wait_scacquire_fn,
        core.hsa_signal_store_screlease_fn,
    ) else {
        return Err(HSA_STATUS_ERROR);
    };
    let signal = cx.tracker.signals.take_one(core).ok_or(HSA_STATUS_ERROR)?;
    // SAFETY: a signal of ours, not in flight.
    unsafe { store(signal, 1) };
    // SAFETY: the caller's promise about both sides; a signal of ours.
    let status = unsafe { transfer.submit(async_copy, signal) };
    let result = if status == HSA_STATUS_SUCCESS {
        // SAFETY: our signal with one copy on it: 0 on success, negative
        // on a failed copy.
        let value = unsafe {
            wait(
                signal,
                HSA_SIGNAL_CONDITION_LT,
                1,
                u64::MAX,
                HSA_WAIT_STATE_BLOCKED,
            )
        };
        if value == 0 {
            Ok(())
        } else {
            Err(HSA_STATUS_ERROR)
        }
    } else {
        Err(status)
    };
    cx.tracker.signals.give_back(core, [signal]);
    result
}

/// The outcome of one transfer, by the caller's index.
type Outcome = (usize, Result<(), hsa_status_t>);

/// What a set of transfers did: how many succeeded, and which failed (by the
/// caller's index) with what status. Only failures are listed: they are rare.
#[derive(Debug, Default)]
pub struct Finished {
    pub succeeded: usize,
    pub failures: Vec<(usize, hsa_status_t)>,
}

/// The value a completion signal starts from. Each copy on a signal takes it
/// down by one; the signal is only reset after a failure, so a copy costs a
/// submission and a wait, never an extra store.
const SIGNAL_START: i64 = 1 << 62;

/// A completion signal and the value it holds while no copy is in flight.
#[derive(Clone, Copy)]
struct Slot {
    signal: hsa_signal_t,
    value: i64,
}

/// Batched copies: the runtime has async copies and signals (checked once,
/// when the copier is made).
struct Batched {
    amd: &'static AmdEntries,
    /// Signals not in flight.
    idle: Vec<Slot>,
    in_flight: VecDeque<(usize, Slot)>,
}

/// Runs a set of transfers; see the module documentation.
pub struct Copier<'a> {
    cx: Context,
    core: &'a CoreEntries,
    batched: Option<Batched>,
    finished: Finished,
}

impl<'a> Copier<'a> {
    /// A copier for up to `count` transfers, batched when `batch` and the
    /// runtime supports it. Fails only if its bookkeeping cannot be allocated.
    pub fn new(cx: Context, core: &'a CoreEntries, count: usize, batch: bool) -> Option<Self> {
        let mut failures = Vec::new();
        failures.try_reserve_exact(count).ok()?;
        let batched = if batch {
            Self::batched(cx, core, count)
        } else {
            None
        };
        Some(Copier {
            cx,
            core,
            batched,
            finished: Finished {
                succeeded: 0,
                failures,
            },
        })
    }

    fn batched(cx: Context, core: &CoreEntries, count: usize) -> Option<Batched> {
        let amd = cx.amd()?;
        amd.hsa_amd_memory_async_copy_fn?;
        core.hsa_signal_wait_scacquire_fn?;
        let store = core.hsa_signal_store_screlease_fn?;
        let signals = cx.tracker.signals.take(core, count.clamp(1, WINDOW));
        if signals.is_empty() {
            return None;
        }
        let mut idle = Vec::new();
        if idle.try_reserve_exact(signals.len()).is_err() {
            cx.tracker.signals.give_back(core, signals);
            return None;
        }
        for signal in signals {
            // SAFETY: a signal of ours, not in flight.
            unsafe { store(signal, SIGNAL_START) };
            idle.push(Slot {
                signal,
                value: SIGNAL_START,
            });
        }
        let mut in_flight = VecDeque::new();
        if in_flight.try_reserve(idle.len()).is_err() {
            let signals = idle.into_iter().map(|slot| slot.signal);
            cx.tracker.signals.give_back(core, signals);
            return None;
        }
        Some(Batched {
            amd,
            idle,
            in_flight,
        })
    }

    /// Copies (or queues) one transfer.
    ///
    /// # Safety
    /// Both sides must be valid for `size` bytes until [`Copier::finish`]
    /// returns (or the copier is dropped), and the caller must keep them so
    /// (e.g. by holding the inventory's read lock) until then.
    pub unsafe fn copy(&mut self, index: usize, transfer: &Transfer) {
        if transfer.size == 0 {
            // Nothing to move; and a runtime need not signal a zero-byte
            // async copy at all (ROCr does not), which would leave a waiter
            // hanging.
            self.finished.succeeded += 1;
            return;
        }
        let Copier {
            batched,
            finished,
            core,
            ..
        } = self;
        let batched = batched
            .as_mut()
            .filter(|_| transfer.async_ok && !transfer.by_cpu);
        if let Some((async_copy, batched)) =
            batched.and_then(|b| Some((b.amd.hsa_amd_memory_async_copy_fn?, b)))
        {
            if batched.idle.is_empty() {
                if let Some(done) = Self::complete_oldest(core, batched) {
                    finished.record(done);
                }
            }
            if let Some(slot) = batched.idle.pop() {
                // SAFETY: the caller's promise about both sides; the
                // signal is ours until completed.
                let status = unsafe { transfer.submit(async_copy, slot.signal) };
                if status == HSA_STATUS_SUCCESS {
                    batched.in_flight.push_back((index, slot));
                    return;
                }
                // Refused at submission: the signal was not used.
                batched.idle.push(slot);
            }
        }
        // SAFETY: forwarded.
        unsafe { self.blocking(index, transfer) }
    }

    /// # Safety
    /// As for [`Copier::copy`].
    unsafe fn blocking(&mut self, index: usize, transfer: &Transfer) {
        if transfer.gpu_only {
            // SAFETY: the caller's promise.
            let result = unsafe { copy_on_agent(self.cx, self.core, transfer) };
            self.finished.record((index, result));
            return;
        }
        // SAFETY: the caller's promise.
        let result = unsafe {
            copy_now(
                self.core,
                transfer.dst,
                transfer.src,
                transfer.size,
                transfer.by_cpu,
            )
        };
        self.finished.record((index, result));
    }

    /// Waits for the oldest copy in flight.
    fn complete_oldest(core: &CoreEntries, batched: &mut Batched) -> Option<Outcome> {
        let (Some(wait), Some(store)) = (
            core.hsa_signal_wait_scacquire_fn,
            core.hsa_signal_store_screlease_fn,
        ) else {
            return None;
        };
        let (index, mut slot) = batched.in_flight.pop_front()?;
        // SAFETY: a signal of ours with one copy in flight: it drops below
        // its value when the copy completes, by one on success; ROCr marks a
        // failed copy by a negative value.
        let value = unsafe {
            wait(
                slot.signal,
                HSA_SIGNAL_CONDITION_LT,
                slot.value,
                u64::MAX,
                HSA_WAIT_STATE_BLOCKED,
            )
        };
        let outcome = if value == slot.value - 1 {
            slot.value = value;
            Ok(())
        } else {
            // SAFETY: the copy is done; the signal is ours again.
            unsafe { store(slot.signal, SIGNAL_START) };
            slot.value = SIGNAL_START;
            Err(HSA_STATUS_ERROR)
        };
        batched.idle.push(slot);
        Some((index, outcome))
    }

    /// Counts `count` transfers done elsewhere (by the device kernels) as
    /// succeeded.
    pub fn count_succeeded(&mut self, count: usize) {
        self.finished.succeeded += count;
    }

    /// Waits for every copy in flight and returns what they all did.
    pub fn finish(mut self) -> Finished {
        self.drain();
        std::mem::take(&mut self.finished)
    }

    fn drain(&mut self) {
        if let Some(batched) = self.batched.as_mut() {
            while let Some(done) = Self::complete_oldest(self.core, batched) {
                self.finished.record(done);
            }
        }
    }
}

impl Finished {
    fn record(&mut self, (index, result): Outcome) {
        match result {
            Ok(()) => self.succeeded += 1,
            // Capacity for every transfer was reserved up front.
            Err(status) => self.failures.push((index, status)),
        }
    }
}

impl Drop for Copier<'_> {
    /// Never leaves a copy in flight, even on an early return: the caller's
    /// locks are released right after.
    fn drop(&mut self) {
        self.drain();
        if let Some(batched) = self.batched.take() {
            let signals = batched.idle.into_iter().map(|slot| slot.signal);
            self.cx.tracker.signals.give_back(self.core, signals);
        }
    }
}
