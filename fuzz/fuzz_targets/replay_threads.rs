//! libFuzzer target: one input is a storage policy and rounds of two op
//! lists, an application thread's and a tool thread's, run at once against
//! the library (see `fuzz/src/threads.rs` and `fuzz/README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kernel_replay_fuzz::threads::run_bytes(data);
});
