#!/usr/bin/env bash
# Installs what building and testing kernel-replay needs on Debian/Ubuntu,
# skipping anything already present. Safe to run repeatedly.
set -euo pipefail

packages=(
  libhsa-runtime-dev   # HSA headers (hsa.h, hsa_ext_amd.h, hsa_api_trace.h)
  libclang-dev         # libclang for bindgen
  clang                # clang's resource headers for bindgen
  cmake                # C/C++ tests, install and package
  g++ gcc make
  binutils             # nm, for the exported-symbol check
  valgrind             # memcheck run of the C/C++ tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null; then
  echo "setup: a Rust toolchain (cargo, rustc >= 1.82) is required: https://rustup.rs" >&2
  exit 1
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
