#!/usr/bin/env bash
# Runs every test: formatting, lints, the Rust unit and integration tests
# (with the header-drift check) under every storage policy, the loom model
# checks, the fuzzing job (bounded: FUZZ_SECONDS, default 120), then the
# C/C++ tests, valgrind memcheck, the install/package test, the exported-
# symbol check and the GPU harness's no-GPU checks under ctest, and the C/C++
# tests again under ASan+UBSan. Installs what is missing
# first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

export CARGO_TERM_COLOR=never
step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo test (unit, integration, header drift)"
cargo test --workspace

# The integration tests hold for every storage policy and copy engine: run
# them again under each forced policy, and with blocking copies.
for policy in baseline device pinned pageable; do
  step "integration tests under KERNEL_REPLAY_STORAGE=$policy"
  KERNEL_REPLAY_STORAGE=$policy cargo test -p kernel-replay --tests -q
done
step "integration tests with blocking copies (KERNEL_REPLAY_COPY=blocking)"
KERNEL_REPLAY_COPY=blocking cargo test -p kernel-replay --tests -q

step "loom model checks of the inventory protocol"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_inventory -q

step "fuzzing: the seeded runner, then ${FUZZ_SECONDS:-120} s of cargo fuzz over the kept corpus"
FUZZ_SECONDS=${FUZZ_SECONDS:-120} ./fuzz/ci.sh

step "CMake build and ctest (C/C++ tests, install, exports, valgrind memcheck)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKR_VALGRIND=ON
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2

step "C/C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# Shares the first tree's cargo build: the Rust library is the same.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKR_SANITIZE=address,undefined \
  -DKR_CARGO_TARGET_DIR="$PWD/build/cargo"
cmake --build build-asan -j2
ctest --test-dir build-asan --output-on-failure -j2
