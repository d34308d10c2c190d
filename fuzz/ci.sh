#!/usr/bin/env bash
# The fuzzing job: the seeded runners (the single-threaded model and the
# threaded race runner), then bounded libFuzzer runs of replay_ops from a
# corpus written now (no corpus is kept in the tree) and of replay_threads.
# Fails on any broken invariant or crash. Stable Rust is enough (no
# sanitizer: -s none).
#
#   fuzz/ci.sh                      # 120 s of replay_ops, 60 s of replay_threads
#   FUZZ_SECONDS=1800 FUZZ_THREAD_SECONDS=600 fuzz/ci.sh    # longer
#
# Needs what the main build needs (HSA headers, libclang for bindgen):
# scripts/setup.sh installs them and is run first when present.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-120}
FUZZ_THREAD_SECONDS=${FUZZ_THREAD_SECONDS:-60}
CARGO_FUZZ_VERSION=0.13.2
export CARGO_TERM_COLOR=never

step() { printf '\n== %s\n' "$*"; }

if [ -x scripts/setup.sh ]; then
  ./scripts/setup.sh
fi

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  step "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

# --cfg fuzzing compiles the library's reset hook, so Finalize ops run too.
step "seeded runners (2000 sequences of 60 ops; 300 threaded inputs)"
RUSTFLAGS="--cfg fuzzing" cargo test --manifest-path fuzz/Cargo.toml --test seeded --test seeded_threads

step "cargo fuzz build"
cargo fuzz build -s none

# Scratch space: each target's corpus (what it starts from and what
# libFuzzer adds) and its crash artifacts. Nothing in the tree changes.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# replay_ops starts from the hand-written seeds and the seeded runner's first
# 200 sequences, encoded now in today's op format and each checked to decode
# back to its ops: a committed corpus would decode to other sequences after
# the next change of the format. Runs the test binary built above.
step "starting corpus for replay_ops"
mkdir -p "$work/replay_ops/corpus"
KR_FUZZ_CORPUS_DIR="$work/replay_ops/corpus" RUSTFLAGS="--cfg fuzzing" \
  cargo test --manifest-path fuzz/Cargo.toml --test seeded -- \
  --ignored --exact write_seed_corpus --nocapture
seeds=$(find "$work/replay_ops/corpus" -type f | wc -l)
if [ "$seeds" -eq 0 ]; then
  echo "write_seed_corpus wrote no input (did the test run?)" >&2
  exit 1
fi

# fuzz TARGET SECONDS [LIBFUZZER_ARGS...]
fuzz() {
  local target=$1 seconds=$2
  shift 2
  mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
  step "cargo fuzz run $target for ${seconds}s"
  local status=0
  cargo fuzz run "$target" -s none "$work/$target/corpus" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix="$work/$target/artifacts/" -print_final_stats=1 "$@" || status=$?
  local crashes
  crashes=$(find "$work/$target/artifacts" -type f | wc -l)
  if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    echo "fuzzing $target failed (exit $status, $crashes artifact(s)):" >&2
    for f in "$work/$target/artifacts"/*; do
      [ -f "$f" ] || continue
      echo "--- $f ($(wc -c <"$f") bytes): $(od -An -tx1 -v "$f" | tr -s ' \n' ' ')" >&2
    done
    echo "reproduce: save the bytes to a file and run" \
      "cargo fuzz run $target -s none FILE (KR_FUZZ_TRACE=1 prints replay_ops' ops)" >&2
    exit 1
  fi
  echo "fuzzing $target: clean after ${seconds}s"
}

fuzz replay_ops "$FUZZ_SECONDS"
# Threaded inputs are rounds of op lists: from an empty corpus, full-length
# inputs from the start (no length ramp), so every run races a few hundred
# ops.
fuzz replay_threads "$FUZZ_THREAD_SECONDS" -len_control=0 -max_len=200
