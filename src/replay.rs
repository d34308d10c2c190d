//! The replay window around one dispatch, as rocprofiler-sdk's `queue.cpp`
//! runs it: the gate that decides whether a submission can be replayed, and
//! the snap / pass / restore / pass ... loop with its decline fallback.

use std::sync::atomic::{AtomicBool, Ordering};

use log::warn;

use crate::hsa::hsa_agent_t;
use crate::memory_snapshot::context::Context;
use crate::memory_snapshot::{self, DeclineReason};

/// What one replay window did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// True when passes ran with restores between them.
    pub replayed: bool,
    /// Passes run (1 when declined or `passes <= 1`).
    pub passes_run: u32,
    /// Why the snapshot declined, if it did.
    pub decline: Option<DeclineReason>,
    /// Region copies that failed across all restores of the window.
    pub restore_failures: usize,
}

/// Runs `passes` passes of one dispatch with identical inputs.
///
/// With `passes <= 1` the dispatch runs once and nothing is captured. If the
/// snapshot declines, the dispatch runs exactly once, un-replayed: restoring
/// a partial snapshot would corrupt application data. Otherwise pass 0 runs
/// on the live state and every later pass after a restore; no restore follows
/// the last pass, which leaves the application with exactly the state one
/// ordinary execution would have produced.
pub fn replay(
    cx: Context,
    agent: hsa_agent_t,
    passes: u32,
    mut run_pass: impl FnMut(u32),
) -> ReplayOutcome {
    let once = |decline| ReplayOutcome {
        replayed: false,
        passes_run: 1,
        decline,
        restore_failures: 0,
    };
    if passes <= 1 {
        run_pass(0);
        return once(None);
    }
    let snapshot = memory_snapshot::snap(cx, agent);
    if let Some(reason) = snapshot.decline_reason() {
        warn!("replay of {passes} passes declined ({reason}); running the dispatch once");
        run_pass(0);
        return once(Some(reason));
    }
    let mut restore_failures = 0;
    for pass in 0..passes {
        if pass > 0 {
            restore_failures += memory_snapshot::restore(cx, &snapshot).failed;
        }
        run_pass(pass);
    }
    ReplayOutcome {
        replayed: true,
        passes_run: passes,
        decline: None,
        restore_failures,
    }
}

/// True only for a submission that can be replayed: exactly one packet that
/// holds exactly one dispatch, with no graph launch active.
///
/// A graph launch, and a batch of several packets, each warn once per process
/// and then take the ordinary path: snapshot and restore around a graph's
/// runtime-managed memory and ordering is undefined.
pub fn replay_gate(packet_count: u64, dispatch_count: u64, graph_launch_active: bool) -> bool {
    if graph_launch_active {
        warn_once(
            &WARNED_GRAPH_LAUNCH,
            "HIP graph launches are not replayed; graph dispatches run once",
        );
        return false;
    }
    if packet_count > 1 {
        warn_once(
            &WARNED_MULTI_PACKET,
            "multi-packet submissions are not replayed; they run once",
        );
        return false;
    }
    packet_count == 1 && dispatch_count == 1
}

/// The gate's warn-once latches (one warning per process each).
static WARNED_GRAPH_LAUNCH: AtomicBool = AtomicBool::new(false);
static WARNED_MULTI_PACKET: AtomicBool = AtomicBool::new(false);

fn warn_once(latch: &AtomicBool, message: &str) {
    if !latch.swap(true, Ordering::Relaxed) {
        warn!("{message}");
    }
}
