//! The async-copy fence: application copies in flight on tracked memory are
//! counted per agent, and a snapshot or restore of that agent waits for them.
//!
//! `hsa_amd_memory_async_copy` (and `_on_engine`, `_rect`) are not kernel
//! dispatches: they bypass the queues and the replay gate. A copy still
//! writing a tracked buffer while it is captured tears the snapshot, and one
//! landing after a restore leaks into the next pass. So the library wraps
//! them: a copy whose source or destination lies in memory the inventory
//! tracks for an agent counts as in flight on that agent until it completes.
//! Its completion is watched without changing what the application sees:
//! the runtime signals a proxy signal of the library's, and a handler
//! (`hsa_amd_signal_async_handler`) then does to the application's
//! completion signal exactly what the runtime would have (take it down by
//! one, or carry a failure's negative value over), and ends the count.
//!
//! A snapshot or restore opens a window on its agent: new fenced copies on
//! that agent wait until it closes, and the window waits for the copies in
//! flight, up to a timeout (`kr_set_copy_fence_timeout`, default 5 s); past
//! it the snapshot declines (`KR_DECLINE_COPIES_IN_FLIGHT`) and a restore
//! writes nothing. The library's own copies go through the un-wrapped
//! entries, so they are never fenced against themselves; copies a tool's
//! batch-copy function makes for the library, on the thread the library
//! called it on, pass open windows too ([`delegate`]).

use crate::support::sync::Recover;
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::hsa::entries::{AmdEntries, CoreEntries};
use crate::hsa::signals::SignalPool;
use crate::hsa::sys::{hsa_signal_t, hsa_signal_value_t, HSA_SIGNAL_CONDITION_LT};
use crate::hsa::HSA_STATUS_SUCCESS;

/// The default bound on a window's wait.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Copies in flight and open windows of one agent.
struct AgentFence {
    agent: u64,
    in_flight: u64,
    windows: u32,
}

/// The fences of every agent.
pub struct Fences {
    agents: Mutex<Vec<AgentFence>>,
    /// Notified whenever a count drops or a window closes.
    changed: Condvar,
    /// Threads waiting on `changed` (changed under the mutex): a change
    /// nobody waits for makes no futex call.
    waiting: AtomicU64,
    timeout_ns: AtomicU64,
}

impl Fences {
    pub const fn new() -> Self {
        Fences {
            agents: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            waiting: AtomicU64::new(0),
            timeout_ns: AtomicU64::new(DEFAULT_TIMEOUT.as_nanos() as u64),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<AgentFence>> {
        self.agents.locked()
    }

    pub fn set_timeout(&self, timeout: Duration) {
        self.timeout_ns.store(
            timeout.as_nanos().min(u64::MAX as u128) as u64,
            Ordering::Relaxed,
        );
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout_ns.load(Ordering::Relaxed))
    }

    /// The index of `agent`'s fence, created if new; `None` without memory.
    fn slot(agents: &mut Vec<AgentFence>, agent: u64) -> Option<usize> {
        if let Some(found) = agents.iter().position(|f| f.agent == agent) {
            return Some(found);
        }
        agents.try_reserve(1).ok()?;
        agents.push(AgentFence {
            agent,
            in_flight: 0,
            windows: 0,
        });
        Some(agents.len() - 1)
    }

    /// Counts a copy on `agent` in flight, after any open window on it has
    /// closed. False (nothing counted) without memory for the fence.
    pub fn enter(&self, agent: u64) -> bool {
        let mut agents = self.lock();
        let Some(slot) = Self::slot(&mut agents, agent) else {
            return false;
        };
        let delegated = DELEGATED.with(Cell::get);
        // Entries are never removed, so the index holds across the waits.
        while agents[slot].windows > 0 && !delegated {
            self.waiting.fetch_add(1, Ordering::Relaxed);
            agents = self
                .changed
                .wait(agents)
                .unwrap_or_else(PoisonError::into_inner);
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        agents[slot].in_flight += 1;
        true
    }

    /// Ends the count of a copy [`Fences::enter`] began.
    pub fn leave(&self, agent: u64) {
        let mut agents = self.lock();
        if let Some(fence) = agents.iter_mut().find(|f| f.agent == agent) {
            fence.in_flight = fence.in_flight.saturating_sub(1);
        }
        self.notify(agents);
    }

    /// Copies in flight on `agent` now.
    pub fn in_flight(&self, agent: u64) -> u64 {
        self.lock()
            .iter()
            .find(|f| f.agent == agent)
            .map_or(0, |f| f.in_flight)
    }

    /// Opens a window on `agent`: no new fenced copy on it starts until the
    /// window is dropped, and the copies in flight are waited for, up to the
    /// timeout. `Err(copies still in flight)` when they did not finish (the
    /// window is then closed again). Without memory for a fence there can
    /// be no fenced copy on the agent: the window opens at once.
    pub fn open_window(&self, agent: u64) -> Result<Window<'_>, u64> {
        let deadline = Instant::now() + self.timeout();
        let mut agents = self.lock();
        let Some(slot) = Self::slot(&mut agents, agent) else {
            return Ok(Window {
                fences: self,
                agent: None,
            });
        };
        agents[slot].windows += 1;
        loop {
            let in_flight = agents[slot].in_flight;
            if in_flight == 0 {
                return Ok(Window {
                    fences: self,
                    agent: Some(agent),
                });
            }
            let now = Instant::now();
            if now >= deadline {
                agents[slot].windows -= 1;
                self.notify(agents);
                return Err(in_flight);
            }
            self.waiting.fetch_add(1, Ordering::Relaxed);
            agents = self
                .changed
                .wait_timeout(agents, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn close_window(&self, agent: u64) {
        let mut agents = self.lock();
        if let Some(fence) = agents.iter_mut().find(|f| f.agent == agent) {
            fence.windows = fence.windows.saturating_sub(1);
        }
        self.notify(agents);
    }

    /// Releases the lock after a change and wakes the waiters, if any.
    /// `waiting` is read under the lock: a waiter counts itself under it
    /// before it waits, so none is missed.
    fn notify(&self, agents: MutexGuard<'_, Vec<AgentFence>>) {
        let anyone = self.waiting.load(Ordering::Relaxed) > 0;
        drop(agents);
        if anyone {
            self.changed.notify_all();
        }
    }
}

impl Default for Fences {
    fn default() -> Self {
        Self::new()
    }
}

/// An open window (see [`Fences::open_window`]); closed when dropped.
pub struct Window<'a> {
    fences: &'a Fences,
    agent: Option<u64>,
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        if let Some(agent) = self.agent {
            self.fences.close_window(agent);
        }
    }
}

/// One fenced copy: what its proxy's handler needs.
struct InFlight {
    fences: &'static Fences,
    signals: &'static SignalPool,
    core: &'static CoreEntries,
    agents: [Option<u64>; 2],
    application_signal: hsa_signal_t,
    proxy: hsa_signal_t,
}

/// Runs `submit` (the runtime's copy entry, given a completion signal) as a
/// copy in flight on `agents`. Returns what `submit` returned. Copies that
/// cannot be fenced (the runtime has no async handlers, no proxy signal or
/// no memory for the bookkeeping) go through unfenced.
pub fn fenced_copy(
    fences: &'static Fences,
    signals: &'static SignalPool,
    (core, amd): (&'static CoreEntries, &AmdEntries),
    agents: [Option<u64>; 2],
    application_signal: hsa_signal_t,
    submit: impl FnOnce(hsa_signal_t) -> crate::hsa::hsa_status_t,
) -> crate::hsa::hsa_status_t {
    let (Some(async_handler), Some(store)) = (
        amd.hsa_amd_signal_async_handler_fn,
        core.hsa_signal_store_screlease_fn,
    ) else {
        return submit(application_signal);
    };
    let Some(proxy) = signals.take_one(core) else {
        return submit(application_signal);
    };
    // SAFETY: our signal, not in use: armed below at 1.
    unsafe { store(proxy, 1) };
    let Some(state) = crate::support::fallible::leak(InFlight {
        fences,
        signals,
        core,
        agents,
        application_signal,
        proxy,
    }) else {
        signals.give_back(core, [proxy]);
        return submit(application_signal);
    };
    let mut entered = [None, None];
    for (slot, agent) in entered.iter_mut().zip(agents) {
        if let Some(agent) = agent {
            if fences.enter(agent) {
                *slot = Some(agent);
            }
        }
    }
    // SAFETY: `state` was leaked for the handler, which frees it.
    unsafe { (*state).agents = entered };
    // SAFETY: our proxy signal, a handler of the right type, its state.
    let armed = unsafe {
        async_handler(
            proxy,
            HSA_SIGNAL_CONDITION_LT,
            1,
            Some(on_copy_done),
            state.cast(),
        )
    };
    if armed != HSA_STATUS_SUCCESS {
        // SAFETY: not handed to the runtime: still ours.
        let state = unsafe { Box::from_raw(state) };
        state.release();
        return submit(application_signal);
    }
    let status = submit(proxy);
    if status != HSA_STATUS_SUCCESS {
        // The runtime took no copy: complete the proxy ourselves with a
        // value the handler forwards as "nothing to do".
        // SAFETY: our proxy; the armed handler fires and frees the state.
        unsafe { store(proxy, FORWARD_NOTHING) };
    }
    status
}

thread_local! {
    /// Set while this thread runs a tool's batch copy for the library.
    static DELEGATED: Cell<bool> = const { Cell::new(false) };
}

/// While the returned guard lives, the fenced copies this thread submits
/// are the library's own, delegated to a tool's batch-copy function inside
/// the library's window: they pass open windows instead of waiting for
/// them to close (which would never happen: the window waits for the tool).
pub fn delegate() -> Delegation {
    Delegation(DELEGATED.with(|d| d.replace(true)))
}

/// See [`delegate`]; restores the thread's previous state when dropped.
pub struct Delegation(bool);

impl Drop for Delegation {
    fn drop(&mut self) {
        let previous = self.0;
        DELEGATED.with(|d| d.set(previous));
    }
}

/// A proxy value below the armed condition that tells the handler the copy
/// was never submitted (nothing to forward).
const FORWARD_NOTHING: hsa_signal_value_t = i64::MIN;

impl InFlight {
    /// Ends the count and gives the proxy back.
    /// The proxy goes back first, then the count: once a copy is no longer
    /// counted in flight its proxy is idle, so a finalize that waited for
    /// the count destroys it.
    fn release(&self) {
        self.signals.give_back(self.core, [self.proxy]);
        for agent in self.agents.into_iter().flatten() {
            self.fences.leave(agent);
        }
    }
}

/// The proxy's handler: forwards the copy's completion to the application's
/// signal as the runtime would have done it, ends the count.
unsafe extern "C" fn on_copy_done(value: hsa_signal_value_t, arg: *mut c_void) -> bool {
    crate::support::unwind::catch_panic(false, || {
        // SAFETY: the state leaked by fenced_copy for this handler, which
        // runs once (it returns false: not re-armed).
        let state = unsafe { Box::from_raw(arg.cast::<InFlight>()) };
        let core = state.core;
        if value < 0 && value != FORWARD_NOTHING {
            // A failed copy: the runtime marks it with a negative value.
            if let Some(store) = core.hsa_signal_store_screlease_fn {
                // SAFETY: the application's completion signal, as the
                // runtime would have written it.
                unsafe { store(state.application_signal, value) };
            }
        } else if value == 0 {
            if let Some(subtract) = core.hsa_signal_subtract_screlease_fn {
                // SAFETY: as above: one completed copy takes it down by one.
                unsafe { subtract(state.application_signal, 1) };
            }
        }
        state.release();
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delegated() -> bool {
        DELEGATED.with(Cell::get)
    }

    #[test]
    fn a_delegated_copy_passes_an_open_window_until_its_guard_drops() {
        let fences = Fences::new();
        let _window = fences.open_window(7).expect("no copies in flight");
        assert!(!delegated());
        {
            let _outer = delegate();
            // Would wait forever for the window without the delegation.
            assert!(fences.enter(7));
            assert_eq!(fences.in_flight(7), 1);
            fences.leave(7);
            {
                let _inner = delegate();
                assert!(delegated());
            }
            assert!(delegated(), "the inner guard gives back the outer state");
        }
        assert!(!delegated(), "the thread's copies wait for windows again");
    }

    #[test]
    fn a_copy_waits_for_an_open_window_and_enters_once_it_closes() {
        let fences: &'static Fences = Box::leak(Box::new(Fences::new()));
        let window = fences.open_window(9).expect("no copies in flight");
        let copy = std::thread::spawn(move || fences.enter(9));
        // Held back: nothing counts while the window is open (a copy that
        // did not wait would have counted long before).
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(fences.in_flight(9), 0);
        assert!(!copy.is_finished());
        drop(window);
        assert!(copy.join().expect("the copy's thread"));
        assert_eq!(fences.in_flight(9), 1);
        fences.leave(9);
    }
}
