//! The threaded runner from a fixed-seed PRNG: inputs decoded from random
//! bytes and run with an application thread and a tool thread at once (see
//! `fuzz/src/threads.rs`). Thread scheduling varies from run to run, so this
//! explores different interleavings of the same inputs each time; a failure
//! names the input's seed (`KR_FUZZ_ONLY=<seed>` reruns just that one, which
//! may need several runs to meet the same interleaving).
//!
//! `KR_FUZZ_THREAD_INPUTS` (default 300) and `KR_FUZZ_SEED` change the run.

use std::sync::atomic::Ordering::Relaxed;

use kernel_replay_fuzz::threads::{run_bytes, stats};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: a tiny deterministic byte source.
fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 56) as u8
        })
        .collect()
}

#[test]
fn threaded_inputs_keep_every_invariant() {
    let count = env_u64("KR_FUZZ_THREAD_INPUTS", 300);
    let base = env_u64("KR_FUZZ_SEED", 0x6b72_5f74_6872_6400);
    let only = std::env::var("KR_FUZZ_ONLY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    for i in 0..count {
        let seed = base.wrapping_add(i.wrapping_mul(0xD1B5_4A32_D192_ED03));
        if only.is_some_and(|s| s != seed) {
            continue;
        }
        let input = bytes(seed, 200);
        let outcome = std::panic::catch_unwind(|| run_bytes(&input));
        if let Err(panic) = outcome {
            eprintln!("threaded input with seed {seed} failed (KR_FUZZ_ONLY={seed} reruns it)");
            std::panic::resume_unwind(panic);
        }
    }
    let counts = [
        ("chunks mapped", &stats::CHUNKS_MAPPED),
        ("chunks revoked", &stats::CHUNKS_REVOKED),
        ("chunks unmapped", &stats::CHUNKS_UNMAPPED),
        ("application copies", &stats::COPIES),
        ("copies held by a dependency", &stats::HELD_COPIES),
    ];
    eprintln!(
        "{count} threaded inputs: {}",
        counts
            .iter()
            .map(|(what, n)| format!("{} {what}", n.load(Relaxed)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if only.is_none() && count >= 100 {
        for (what, n) in counts {
            let needs_vmem = what.starts_with("chunks");
            if kernel_replay::hsa::HAS_VMEM || !needs_vmem {
                assert!(n.load(Relaxed) > 0, "no {what} in the whole run");
            }
        }
    }
}
