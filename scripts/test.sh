#!/usr/bin/env bash
# Runs every test. Installs what is missing first (scripts/setup.sh).
#
# Against the default HSA headers (the newest ROCm generation Debian carries,
# unless an installed ROCm or HSA_INCLUDE_DIR says otherwise), the full
# suite: formatting, lints (clippy with undocumented unsafe blocks and
# incompatible-MSRV use denied, Cargo.toml [lints]), cargo doc with warnings
# denied, the Rust unit, integration and doc tests (with the header-drift
# check), the unit tests under valgrind, the integration tests under every
# storage policy, under each forced device-kernel strategy and with blocking
# copies, the AMD code objects' metadata check (in cargo test),
# the loom model checks, the fuzzing job (FUZZ_SECONDS, default 120, and
# FUZZ_THREAD_SECONDS, default 60), the C/C++ tests, valgrind memcheck, the
# install/package test, the exported-symbol check, the test runtime's
# conformance suite on both backends (CUDA: on the stand-in driver) and the
# GPU harness's no-GPU checks under ctest, and the C/C++ tests under
# ASan+UBSan.
#
# Then, against every other ROCm generation it can obtain (5.2: bookworm,
# 6.1: trixie, 6.4: sid, 7.2: experimental; scripts/hsa_headers.sh), the
# library is built again and the Rust and C/C++ tests run against it: the
# test runtime's backends fill their tables as that generation of ROCr does.
# GENERATIONS="bookworm trixie" limits the list; GENERATIONS="" skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

export CARGO_TERM_COLOR=never
# Each step prints the minutes and seconds since the start: the whole
# command is kept under 30 minutes on a 2-core machine.
started=$SECONDS
step() { printf '\n== [%02d:%02d] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

# The default headers, as the build's one finder chooses them.
HSA_INCLUDE_DIR=${HSA_INCLUDE_DIR:-$(cmake -P cmake/print_hsa_include.cmake)}
export HSA_INCLUDE_DIR
step "default HSA headers: $HSA_INCLUDE_DIR"

step "cargo fmt --check"
cargo fmt --all -- --check
(cd fuzz && cargo fmt -- --check)
step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
step "cargo doc, warnings denied (the doc tests run with cargo test below)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p kernel-replay -p kernel-replay-hsa-sys
step "cargo test (unit, integration, doc tests, header drift)"
cargo test --workspace

# No miri on these machines (one toolchain, no network for another): the
# library's pure-Rust unit tests (registries, inventory, layout, budgets,
# logging) run under valgrind's memcheck instead.
step "the library's unit tests under valgrind"
unit_tests=$(cargo test --lib -p kernel-replay --no-run 2>&1 |
  sed -n 's/.*Executable unittests src\/lib.rs (\(.*\))/\1/p')
valgrind -q --error-exitcode=1 --leak-check=no "$unit_tests" --test-threads=1

# The integration tests hold for every storage policy and copy engine: run
# them again under each forced policy, and with blocking copies.
for policy in baseline device pinned pageable; do
  step "integration tests under KERNEL_REPLAY_STORAGE=$policy"
  KERNEL_REPLAY_STORAGE=$policy cargo test -p kernel-replay --tests -q
done
# And under each forced device-kernel strategy: the test runtime's host
# backend runs the kernels' own source on the CPU, so every test's byte
# checks hold for the scatter and dirty-block paths too.
for strategy in scatter dirty; do
  step "integration tests under KERNEL_REPLAY_STRATEGY=$strategy"
  KERNEL_REPLAY_STRATEGY=$strategy cargo test -p kernel-replay --tests -q
done
step "integration tests with blocking copies (KERNEL_REPLAY_COPY=blocking)"
KERNEL_REPLAY_COPY=blocking cargo test -p kernel-replay --tests -q

step "loom model checks of the tracker's retire-before-free protocol"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom_inventory -q

step "fuzzing: the seeded runners, then cargo fuzz"
FUZZ_SECONDS=${FUZZ_SECONDS:-120} FUZZ_THREAD_SECONDS=${FUZZ_THREAD_SECONDS:-60} ./fuzz/ci.sh

step "CMake build and ctest (C/C++ tests, install, exports, valgrind memcheck)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKR_VALGRIND=ON -DHSA_INCLUDE_DIR="$HSA_INCLUDE_DIR"
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2

step "C/C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer"
# Shares the first tree's cargo build: the Rust library is the same.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKR_SANITIZE=address,undefined \
  -DKR_CARGO_TARGET_DIR="$PWD/build/cargo" -DHSA_INCLUDE_DIR="$HSA_INCLUDE_DIR"
cmake --build build-asan -j2
ctest --test-dir build-asan --output-on-failure -j2

# ---- every other ROCm generation ------------------------------------------------

ran=("$(basename "$(dirname "$HSA_INCLUDE_DIR")") (full suite): $HSA_INCLUDE_DIR")
missing=()
for generation in ${GENERATIONS-bookworm trixie sid experimental}; do
  if ! include=$(./scripts/hsa_headers.sh fetch "$generation"); then
    missing+=("$generation")
    continue
  fi
  [[ "$include" -ef "$HSA_INCLUDE_DIR" ]] && continue
  step "ROCm headers of $generation ($(cat "$(dirname "$include")/VERSION")): Rust tests"
  # One target directory for every generation: each build reruns only what
  # the headers change (the bindings, the library, the runtime, the tests).
  # Warnings are errors here too: code for one generation's entries must not
  # leave another's build with unused items. The doc examples ran above: they
  # show the API, which no generation changes (cargo doc's own build of them
  # would add minutes per generation).
  RUSTFLAGS="-D warnings" HSA_INCLUDE_DIR="$include" CARGO_TARGET_DIR=target/generations \
    cargo test --workspace --lib --bins --tests -q
  step "ROCm headers of $generation: C/C++ tests"
  cmake -S . -B "build-generations/$generation" -DCMAKE_BUILD_TYPE=Debug -DKR_CARGO_PROFILE=debug \
    -DKR_CARGO_TARGET_DIR="$PWD/target/generations" -DHSA_INCLUDE_DIR="$include" >/dev/null
  cmake --build "build-generations/$generation" -j2
  # The GPU harness is built for every generation but run on the stand-in
  # driver only with the default headers above (a debug build takes about
  # two minutes a generation); each generation's CUDA backend is exercised
  # by its conformance suite here (conformance_cuda).
  ctest --test-dir "build-generations/$generation" --output-on-failure -j2 -E '_on_fake_driver$'
  ran+=("$generation: $include")
done

step "summary"
printf 'tested against the HSA headers of:\n'
printf '  %s\n' "${ran[@]}"
if ((${#missing[@]})); then
  printf 'WARNING: could not fetch the headers of: %s (not tested)\n' "${missing[*]}"
fi
