//! The deterministic runner: op sequences from a fixed-seed PRNG, decoded
//! with the fuzz target's own decoder (`arbitrary::Unstructured` over the
//! random bytes) and run against the model. No cargo-fuzz, no nightly.
//!
//! Build it with `RUSTFLAGS="--cfg fuzzing"` (what `fuzz/ci.sh` does): that
//! compiles the library's fuzzing-only reset hook (`Gate::reset_for_fuzzing`),
//! which lets one sequence finalize without finalizing the next. Without the
//! cfg everything still runs except `Finalize` ops, which are skipped (a
//! finalize is irreversible in a normal build); the run says so.
//!
//! `KR_FUZZ_SEQUENCES` (default 2000), `KR_FUZZ_OPS` (default 60) and
//! `KR_FUZZ_SEED` change the run; a failure names the sequence's seed, and
//! `KR_FUZZ_ONLY=<seed>` with `KR_FUZZ_TRACE=1` replays just that one with
//! its op trace.

use kernel_replay_fuzz::interp::{stats, FINALIZE_ENABLED};
use kernel_replay_fuzz::ops::{
    decode_ops, encode_ops, Access, CopyFault, CopyKind, Fault, Op, Perm, PoolSel,
};
use kernel_replay_fuzz::{run_ops, seeds, MAX_OPS};

/// xorshift64*: tiny, deterministic, good enough to make bytes.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 56) as u8).collect()
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Decodes one sequence of exactly `ops` ops from the PRNG with `seed`.
fn sequence(seed: u64, ops: usize) -> Vec<Op> {
    let mut rng = XorShift::new(seed);
    // At most 11 bytes per op, so this always yields `ops` ops.
    let bytes = rng.bytes(ops * 12);
    let mut sequence = decode_ops(&bytes, ops);
    sequence.truncate(ops);
    sequence
}

/// The seeded runner's first seed, unless `KR_FUZZ_SEED` says otherwise.
const BASE_SEED: u64 = 0x6b72_5f66_757a_7a00;

/// The seed of the runner's sequence `i`.
fn seed_of(base: u64, i: u64) -> u64 {
    base.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The runner's sequence `i` (of `ops` ops, from `seed`).
fn runner_sequence(i: u64, seed: u64, ops: usize) -> Vec<Op> {
    let mut sequence = sequence(seed, ops);
    // Every input starts with tracking off; half the sequences turn it
    // on first, so that most of their ops act on tracked memory.
    if i % 2 == 1 {
        sequence.insert(0, Op::SetTracking(true));
        sequence.truncate(ops);
    }
    // Every input starts in the baseline storage policy; a third of the
    // sequences start in one of the arena policies instead.
    if i % 3 == 2 {
        sequence.insert(
            0,
            Op::Storage {
                policy: 1 + (i / 3 % 4) as u8,
                batched: i % 2 == 0,
            },
        );
        sequence.truncate(ops);
    }
    sequence
}

#[test]
fn seeded_sequences_match_the_model() {
    let count = env_u64("KR_FUZZ_SEQUENCES", 2000);
    let ops = env_u64("KR_FUZZ_OPS", 60) as usize;
    let base = env_u64("KR_FUZZ_SEED", BASE_SEED);
    let only = std::env::var("KR_FUZZ_ONLY")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if !FINALIZE_ENABLED {
        eprintln!(
            "note: built without --cfg fuzzing: Finalize ops are skipped \
             (RUSTFLAGS=\"--cfg fuzzing\" runs them)"
        );
    }
    let started = std::time::Instant::now();
    for i in 0..count {
        let seed = seed_of(base, i);
        if only.is_some_and(|s| s != seed) {
            continue;
        }
        let sequence = runner_sequence(i, seed, ops);
        let outcome = std::panic::catch_unwind(|| run_ops(&sequence));
        if let Err(panic) = outcome {
            eprintln!(
                "sequence {i} (seed {seed}) failed after {:.2?}; rerun with \
                 KR_FUZZ_ONLY={seed} KR_FUZZ_TRACE=1",
                started.elapsed()
            );
            std::panic::resume_unwind(panic);
        }
    }
    let snaps: Vec<u64> = stats::SNAPS.iter().map(stats::get).collect();
    eprintln!(
        "{count} sequences of {ops} ops in {:.1?}: {} ops, {} tracked allocations, \
         {} reused addresses, {} failed frees, snapshots by reason {snaps:?} \
         (0 = ok, 2 finalized, 3 no iterator, 4 symbols, 6 host memory, 7 copy, 8 device memory, \
         10 copies in flight, 11 shared region busy), \
         regions restored {} / skipped {} / failed {}, {} replays, {} finalizes, \
         {} complete arena snapshots, {} unloads; mappings tracked {} / retired by access {} / \
         restored {} / skipped {}, {} aliases, {} refused unmaps, {} checks with uncaptured \
         mappings; copies completed {} / failed {} / refused {} / fenced {}, {} restores held \
         back by the fence",
        started.elapsed(),
        stats::get(&stats::OPS),
        stats::get(&stats::TRACKED_ALLOCATIONS),
        stats::get(&stats::REUSED_ADDRESSES),
        stats::get(&stats::FAILED_FREES),
        stats::get(&stats::RESTORED),
        stats::get(&stats::SKIPPED_NOT_LIVE),
        stats::get(&stats::RESTORE_FAILED),
        stats::get(&stats::REPLAYS),
        stats::get(&stats::FINALIZED),
        stats::get(&stats::ARENA_SNAPS),
        stats::get(&stats::UNLOADS),
        stats::get(&stats::MAPPINGS_TRACKED),
        stats::get(&stats::MAPPINGS_RETIRED),
        stats::get(&stats::MAPPINGS_RESTORED),
        stats::get(&stats::MAPPINGS_SKIPPED),
        stats::get(&stats::ALIASES),
        stats::get(&stats::REFUSED_UNMAPS),
        stats::get(&stats::UNCAPTURED_MAPPINGS),
        stats::get(&stats::COMPLETED_COPIES),
        stats::get(&stats::FAILED_COPIES),
        stats::get(&stats::REFUSED_COPIES),
        stats::get(&stats::FENCED_COPIES),
        stats::get(&stats::FENCED_RESTORES),
    );
    if only.is_none() && count >= 500 {
        // The generator reaches every outcome the oracle checks.
        for (reason, &n) in snaps.iter().enumerate() {
            if matches!(reason, 0 | 3 | 4 | 6 | 7 | 10) || (reason == 2 && FINALIZE_ENABLED) {
                assert!(n > 0, "no snapshot with decline reason {reason}");
            }
        }
        for (what, counter) in [
            ("tracked allocation", &stats::TRACKED_ALLOCATIONS),
            ("reused address", &stats::REUSED_ADDRESSES),
            ("failed free", &stats::FAILED_FREES),
            ("restored region", &stats::RESTORED),
            ("region skipped as not live", &stats::SKIPPED_NOT_LIVE),
            ("failed region restore", &stats::RESTORE_FAILED),
            ("replay", &stats::REPLAYS),
        ] {
            assert!(stats::get(counter) > 0, "no {what} in the whole run");
        }
        for (what, counter) in [
            ("complete arena snapshot", &stats::ARENA_SNAPS),
            ("executable unload", &stats::UNLOADS),
            ("completed application copy", &stats::COMPLETED_COPIES),
            (
                "application copy failing while executing",
                &stats::FAILED_COPIES,
            ),
            ("refused application copy", &stats::REFUSED_COPIES),
            ("fenced application copy", &stats::FENCED_COPIES),
            ("restore held back by the fence", &stats::FENCED_RESTORES),
        ] {
            assert!(stats::get(counter) > 0, "no {what} in the whole run");
        }
        if kernel_replay::hsa::HAS_VMEM {
            for (what, counter) in [
                ("tracked mapping", &stats::MAPPINGS_TRACKED),
                ("mapping retired by a set_access", &stats::MAPPINGS_RETIRED),
                ("restored mapping", &stats::MAPPINGS_RESTORED),
                ("mapping skipped as not live", &stats::MAPPINGS_SKIPPED),
                ("aliased handle", &stats::ALIASES),
                ("refused unmap", &stats::REFUSED_UNMAPS),
                (
                    "mapping reported as not captured",
                    &stats::UNCAPTURED_MAPPINGS,
                ),
            ] {
                assert!(stats::get(counter) > 0, "no {what} in the whole run");
            }
        }
    }
}

#[test]
fn hand_written_seeds_run_clean() {
    for (name, ops) in seeds::seeds() {
        if std::env::var_os("KR_FUZZ_TRACE").is_some() {
            eprintln!("== seed {name}");
        }
        let outcome = std::panic::catch_unwind(|| run_ops(&ops));
        assert!(outcome.is_ok(), "seed {name} failed");
    }
}

#[test]
fn the_byte_format_round_trips() {
    for (name, ops) in seeds::seeds() {
        assert_eq!(
            decode_ops(&encode_ops(&ops), usize::MAX),
            ops,
            "seed {name}"
        );
    }
    let every = vec![
        Op::Allocate {
            agent: 1,
            pool: PoolSel::SystemFine,
            size: 200,
            executable: true,
            via_region: true,
        },
        Op::InjectFault(Fault::H2dIntoAllocation {
            index: 3,
            offset: 0xBEEF,
        }),
        Op::Mutate {
            index: 1,
            offset: 513,
            len: 0xFFFF,
            byte: 0,
        },
        Op::Finalize,
        Op::InjectFault(Fault::HostBudgetAtEdge { agent: 2, delta: 4 }),
        Op::InjectFault(Fault::SymbolQuery {
            attribute: 1,
            fail: true,
        }),
        Op::InjectFault(Fault::Iterator(false)),
        Op::InjectFault(Fault::CopyFromAllocation {
            index: 2,
            offset: 300,
        }),
        Op::InjectFault(Fault::CopyFromVariable { index: 9 }),
        Op::Storage {
            policy: 3,
            batched: true,
        },
        Op::TrimRetained,
        Op::DestroyExecutable { exe: 1 },
        Op::Replay {
            agent: 2,
            passes: 4,
            target: 7,
            byte: 255,
        },
        Op::InjectFault(Fault::Vmem { op: 4 }),
        Op::VmemReserve { chunks: 200 },
        Op::VmemMapNew {
            agent: 3,
            fine: true,
            chunks: 9,
            at: 77,
            access: Some(Access {
                owner: Perm::Absent,
                peer: Perm::Ro,
                cpu: Perm::None,
                owner_again: Perm::Rw,
            }),
        },
        Op::VmemMapNew {
            agent: 0,
            fine: false,
            chunks: 1,
            at: 2,
            access: None,
        },
        Op::VmemMapAlias { handle: 5, at: 250 },
        Op::VmemSetAccess {
            mapping: 1,
            span: 2,
            access: Access {
                owner: Perm::None,
                peer: Perm::Rw,
                cpu: Perm::Absent,
                owner_again: Perm::None,
            },
        },
        Op::VmemUnmap { mapping: 3, how: 3 },
        Op::VmemRelease { handle: 1 },
        Op::VmemAddressFree { reservation: 2 },
        Op::WriteMapping {
            mapping: 4,
            offset: 0x1234,
            len: 0xFFFF,
            byte: 0x5A,
        },
        Op::AsyncCopy {
            kind: CopyKind::Rect,
            dst: 1,
            src: 200,
            offset: 0xABCD,
            len: 7,
            hold: true,
            fault: CopyFault::FailCompletion,
        },
        Op::AsyncCopy {
            kind: CopyKind::Engine,
            dst: 0,
            src: 0,
            offset: 0,
            len: 0,
            hold: false,
            fault: CopyFault::Refuse,
        },
        Op::ReleaseDependency { index: 3 },
    ];
    assert_eq!(decode_ops(&encode_ops(&every), usize::MAX), every);
    // Truncated input decodes, zero-filled, and never panics.
    for n in 0..120 {
        let bytes = encode_ops(&every);
        decode_ops(&bytes[..n.min(bytes.len())], usize::MAX);
    }
}

/// Writes a starting corpus for `cargo fuzz run replay_ops` in today's byte
/// format: every hand-written seed (`seed-<name>`) and the seeded runner's
/// first `KR_FUZZ_CORPUS_SEQUENCES` (default 200) sequences of the default
/// seed (`seq-<i>`), each checked to decode back to the ops it was written
/// from. Into `KR_FUZZ_CORPUS_DIR`, else `fuzz/corpus/replay_ops`
/// (git-ignored: no corpus is committed, so none can outlive a change of
/// the op format).
/// `fuzz/ci.sh` runs it into a scratch directory before fuzzing:
/// `cargo test --manifest-path fuzz/Cargo.toml --test seeded -- --ignored write_seed_corpus`
#[test]
#[ignore]
fn write_seed_corpus() {
    let dir = match std::env::var_os("KR_FUZZ_CORPUS_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/replay_ops"),
    };
    let count = env_u64("KR_FUZZ_CORPUS_SEQUENCES", 200);
    let length = env_u64("KR_FUZZ_OPS", 60) as usize;
    let inputs = seeds::seeds()
        .into_iter()
        .map(|(name, ops)| (format!("seed-{name}"), ops))
        .chain((0..count).map(|i| {
            let sequence = runner_sequence(i, seed_of(BASE_SEED, i), length);
            (format!("seq-{i:04}"), sequence)
        }));
    std::fs::create_dir_all(&dir).unwrap();
    let mut written = 0;
    for (name, ops) in inputs {
        let bytes = encode_ops(&ops);
        // What the target runs: the first MAX_OPS ops of the bytes.
        assert!(!ops.is_empty(), "{name} is empty");
        assert_eq!(
            decode_ops(&bytes, MAX_OPS),
            ops,
            "{name} decodes to other ops"
        );
        std::fs::write(dir.join(name), bytes).unwrap();
        written += 1;
    }
    eprintln!("{written} inputs written to {}", dir.display());
}
