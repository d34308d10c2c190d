#!/usr/bin/env bash
# gpu/prepare_carry.sh: on a machine with Rust and the HSA headers, fills
# gpu/.carry with what gpu/run.sh needs on the GPU machine (which has no
# Rust):
#   gpu/.carry/lib/libkernel_replay.so   cargo build --release, unchanged
#   gpu/.carry/include/hsa/*.h           the HSA headers it was built against
#   gpu/.carry/SOURCE                    the commit and working-tree state
# gpu/.carry is ignored by git; pass it to the device run as a carried path.
set -euo pipefail
cd "$(dirname "$0")/.."

# The headers the library is built against: the project's one finder
# (cmake/kernel_replay_find_hsa.cmake), as build.rs and CMake use it.
hsa_dir=${HSA_INCLUDE_DIR:-$(cmake -P cmake/print_hsa_include.cmake)}
[ -f "$hsa_dir/hsa/hsa_api_trace.h" ] || { echo "HSA headers not found (run scripts/setup.sh or set HSA_INCLUDE_DIR)"; exit 1; }

target_dir=${CARGO_TARGET_DIR:-target}
echo "+ HSA_INCLUDE_DIR=$hsa_dir cargo build --lib --release"
HSA_INCLUDE_DIR=$hsa_dir cargo build --lib --release

rm -rf gpu/.carry
mkdir -p gpu/.carry/lib gpu/.carry/include
cp "$target_dir/release/libkernel_replay.so" gpu/.carry/lib/
cp -r "$hsa_dir/hsa" gpu/.carry/include/
{
  echo "commit: $(git log -1 --format='%H %s' 2>/dev/null || echo unknown)"
  echo "built: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
  echo "hsa headers: $hsa_dir/hsa"
  echo "working tree changes:"
  git status --short 2>/dev/null | grep -v '^?? gpu/.carry' || true
} > gpu/.carry/SOURCE
# What the GPU machine's loader will ask of its glibc.
echo "glibc symbol versions needed: $(objdump -T gpu/.carry/lib/libkernel_replay.so 2>/dev/null \
  | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
du -sh gpu/.carry
cat gpu/.carry/SOURCE
