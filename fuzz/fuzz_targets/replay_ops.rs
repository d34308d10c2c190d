//! libFuzzer target: one input is one op sequence run from a clean state
//! against the model (see `fuzz/README.md`).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kernel_replay_fuzz::run_bytes(data);
});
