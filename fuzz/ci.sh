#!/usr/bin/env bash
# The fuzzing job: the seeded (deterministic) runner, then a bounded
# libFuzzer run of replay_ops over the kept corpus. Fails on any broken
# invariant or crash. Stable Rust is enough (no sanitizer: -s none).
#
#   fuzz/ci.sh                      # 120 s of fuzzing
#   FUZZ_SECONDS=1800 fuzz/ci.sh    # longer
#
# Needs what the main build needs (HSA headers, libclang for bindgen):
# scripts/setup.sh installs them and is run first when present.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-120}
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
step "seeded runner (2000 sequences of 60 ops)"
RUSTFLAGS="--cfg fuzzing" cargo test --manifest-path fuzz/Cargo.toml --test seeded

step "cargo fuzz build replay_ops"
cargo fuzz build -s none replay_ops

# New inputs go to a scratch directory (the first one libFuzzer is given);
# the kept corpus is only read, so the work tree does not change.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
step "cargo fuzz run replay_ops for ${FUZZ_SECONDS}s"
status=0
cargo fuzz run replay_ops -s none "$work/corpus" fuzz/corpus/replay_ops -- \
  -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=30 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1 || status=$?
crashes=$(find "$work/artifacts" -type f | wc -l)
if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  echo "fuzzing failed (exit $status, $crashes artifact(s)):" >&2
  for f in "$work/artifacts"/*; do
    [ -f "$f" ] || continue
    echo "--- $f ($(wc -c <"$f") bytes): $(od -An -tx1 -v "$f" | tr -s ' \n' ' ')" >&2
  done
  echo "reproduce: save the bytes to a file and run" \
    "cargo fuzz run replay_ops -s none FILE (KR_FUZZ_TRACE=1 prints the ops)" >&2
  exit 1
fi
echo "fuzzing: clean after ${FUZZ_SECONDS}s"
