//! The replay helper and gate, as queue.cpp drives them.

mod common;

use common::*;
use kernel_replay::ReplayOutcome;

/// What the pass function saw: per pass, the input bytes at entry.
struct Kernel {
    buffer: *mut u8,
    counter: *mut u8,
    seen: Vec<(u32, Vec<u8>, u8)>,
}

/// A "kernel" that accumulates into its buffer and bumps a module counter.
fn accumulate(pass: u32, k: &mut Kernel) {
    let input = bytes(k.buffer, 64);
    let counter = bytes(k.counter, 1)[0];
    k.seen.push((pass, input.clone(), counter));
    let out: Vec<u8> = input
        .iter()
        .map(|b| b.wrapping_mul(3).wrapping_add(1))
        .collect();
    // SAFETY: live allocations of those sizes.
    unsafe {
        std::ptr::copy_nonoverlapping(out.as_ptr(), k.buffer, 64);
        *k.counter = counter + 1;
    }
}

fn kernel(sim: &hsa_sim::SimSession) -> Kernel {
    let gpu = sim.gpu(0);
    let buffer = device_buffer(sim, gpu, 64, 0);
    for i in 0..64 {
        // SAFETY: in bounds.
        unsafe { *buffer.add(i) = i as u8 };
    }
    let exe = sim.executable_create();
    let counter = sim.add_variable(exe, gpu, "pass_counter", 1, false);
    Kernel {
        buffer,
        counter,
        seen: Vec::new(),
    }
}

fn replay(gpu: hsa_sim::Agent, passes: u32, k: &mut Kernel) -> ReplayOutcome {
    kernel_replay::replay(agent(gpu), passes, |pass| accumulate(pass, k))
}

#[test]
fn every_pass_sees_the_inputs_of_the_first() {
    let sim = session(1);
    let mut k = kernel(&sim);
    let result = replay(sim.gpu(0), 5, &mut k);
    assert!(result.replayed);
    assert_eq!(result.passes_run, 5);
    assert_eq!(result.decline, None);
    assert_eq!(result.restore_failures, 0);
    assert_eq!(
        k.seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    let first = &k.seen[0];
    for s in &k.seen {
        assert_eq!(
            (&s.1, s.2),
            (&first.1, first.2),
            "pass {} saw other inputs",
            s.0
        );
    }
    // One snapshot of two regions (buffer and counter), a restore of both
    // before passes 1..4.
    if copies_move_everything() {
        assert_eq!(copies(&sim), 2 + 4 * 2);
    }
    // No restore after the last pass: the application keeps one pass's result.
    let expected: Vec<u8> = first
        .1
        .iter()
        .map(|b| b.wrapping_mul(3).wrapping_add(1))
        .collect();
    assert_eq!(bytes(k.buffer, 64), expected);
    assert_eq!(bytes(k.counter, 1)[0], 1);
    // The window's snapshot was freed: trimming what it left for reuse
    // leaves nothing held.
    assert_nothing_held();
}

#[test]
fn one_pass_or_none_runs_once_without_a_snapshot() {
    for passes in [0, 1] {
        let sim = session(1);
        let mut k = kernel(&sim);
        let result = replay(sim.gpu(0), passes, &mut k);
        assert_eq!(
            (result.replayed, result.passes_run, result.decline),
            (false, 1, None)
        );
        assert_eq!(k.seen.len(), 1);
        assert_eq!(copies(&sim), 0);
    }
}

#[test]
fn a_declined_snapshot_runs_the_dispatch_exactly_once() {
    let sim = session(1);
    let mut k = kernel(&sim);
    sim.inject(hsa_sim::Fault::CopiesFrom, k.counter as u64, 0);
    let result = replay(sim.gpu(0), 5, &mut k);
    assert_eq!(
        (result.replayed, result.passes_run, result.decline),
        (false, 1, Some(kernel_replay::DeclineReason::CopyFailed))
    );
    assert_eq!(k.seen.len(), 1);
    assert_eq!(k.seen[0].0, 0);
    if copies_move_everything() {
        assert_eq!(copies(&sim), 2, "the two capture copies, no restore");
    }
    assert_eq!(logs_containing("running the dispatch once").len(), 1);
}

#[test]
fn restore_failures_are_counted_across_the_window() {
    let sim = session(1);
    let mut k = kernel(&sim);
    sim.inject(hsa_sim::Fault::CopiesInto, k.counter as u64, 0);
    let result = replay(sim.gpu(0), 4, &mut k);
    assert!(result.replayed);
    assert_eq!(
        result.restore_failures, 3,
        "one failed region in each of 3 restores"
    );
    // The buffer was still restored every time.
    assert!(k.seen.iter().all(|s| s.1 == k.seen[0].1));
}

#[test]
fn the_gate_admits_exactly_one_packet_with_one_dispatch() {
    if !in_child("the_gate_admits_exactly_one_packet_with_one_dispatch") {
        return;
    }
    let _sim = session(1);
    assert!(kernel_replay::replay_gate(1, 1, false));
    for (packets, dispatches) in [(0, 0), (1, 0), (0, 1), (1, 2)] {
        assert!(
            !kernel_replay::replay_gate(packets, dispatches, false),
            "{packets} packets, {dispatches} dispatches"
        );
    }
    assert!(logs().is_empty(), "those are silent: {:?}", logs());

    // A graph launch and a batch each warn once per process, then stay silent.
    for _ in 0..3 {
        assert!(!kernel_replay::replay_gate(1, 1, true));
        assert!(!kernel_replay::replay_gate(3, 3, false));
    }
    assert_eq!(logs_containing("graph").len(), 1);
    assert_eq!(logs_containing("multi-packet").len(), 1);
    assert!(kernel_replay::replay_gate(1, 1, false));
}
