#!/usr/bin/env bash
# Mutation testing of the tracker (the classifier included) and the snapshot modules
# with cargo-mutants (from crates.io): each mutant is a small, plausible bug
# planted in one place; the workspace's tests must fail for it. Not part of
# CI (a full run takes about two hours on two cores); run it after changing
# those modules and record what survives in MUTANTS.md, each survivor
# either killed by a new test or explained as equivalent, and named by file
# and function (missed.txt's line:column moves with every edit).
#
#   scripts/mutants.sh                 # every mutant of the two areas
#   scripts/mutants.sh --shard 0/4     # a quarter (extra arguments go to cargo mutants)
#
# Results: target/mutants/mutants.out (missed.txt lists the survivors,
# caught.txt, timeout.txt, unviable.txt). Configuration: .cargo/mutants.toml
# and the `mutants` profile in Cargo.toml (no debug info: faster links).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

CARGO_MUTANTS_VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q "$CARGO_MUTANTS_VERSION"; then
  cargo install cargo-mutants --locked --version "$CARGO_MUTANTS_VERSION"
fi

# The copies cargo-mutants builds in lack the header cache: name the headers.
HSA_INCLUDE_DIR=${HSA_INCLUDE_DIR:-$(cmake -P cmake/print_hsa_include.cmake)}
export HSA_INCLUDE_DIR

# cargo mutants exits non-zero when a mutant survives; report the counts
# anyway (under set -e the script would stop here).
status=0
cargo mutants \
  --file 'src/memory_tracker/**' \
  --file 'src/memory_snapshot/**' \
  --profile mutants --jobs 1 \
  --output target/mutants \
  "$@" || status=$?
out=target/mutants/mutants.out
echo
echo "caught $(wc -l <"$out/caught.txt"), missed $(wc -l <"$out/missed.txt")," \
  "timeout $(wc -l <"$out/timeout.txt"), unviable $(wc -l <"$out/unviable.txt")"
echo "survivors: $out/missed.txt"
exit $status
