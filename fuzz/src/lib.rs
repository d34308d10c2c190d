//! Model-based fuzzing of kernel-replay.
//!
//! An input is a sequence of [`ops::Op`]s, the things an application and a
//! profiling tool do: allocate and free device memory (through the software
//! HSA runtime's API tables, where the library's wrappers sit), turn
//! tracking on and off, load module variables, snapshot, let a "kernel"
//! write memory, restore, replay, inject runtime faults, finalize. The
//! [`interp::Interp`] runs them against the library and, after every op,
//! checks the library and device memory against a [`model::Model`] of what
//! must be true (see `fuzz/README.md` for the list).
//!
//! Used by the libFuzzer target `fuzz_targets/replay_ops.rs` and by the
//! deterministic seeded runner `tests/seeded.rs`. The threaded runner
//! ([`threads`]) races an application thread against a tool thread; it is
//! the libFuzzer target `fuzz_targets/replay_threads.rs` and runs seeded in
//! `tests/seeded_threads.rs`.

pub mod app;
pub mod interp;
pub mod model;
pub mod ops;
pub mod seeds;
pub mod threads;

/// Host copies past the end of a block the library allocated are counted
/// violations, not heap corruption (see `hsa_sim::NotingAllocator`).
#[global_allocator]
static ALLOCATOR: hsa_sim::NotingAllocator = hsa_sim::NotingAllocator;

/// Most ops run from one input.
pub const MAX_OPS: usize = 256;

/// Runs one input from a clean state (see [`interp::Interp::new`]); panics
/// on the first broken invariant.
pub fn run_bytes(data: &[u8]) {
    run_ops(&ops::decode_ops(data, MAX_OPS));
}

/// Runs one op sequence from a clean state.
pub fn run_ops(ops: &[ops::Op]) {
    interp::Interp::new().run(ops);
}
