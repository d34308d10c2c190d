#!/usr/bin/env bash
# Installs what building and testing kernel-replay needs on Debian/Ubuntu,
# skipping anything already present, and fetches the newest HSA (ROCr)
# headers Debian carries (experimental, then sid, then trixie) into the
# project's header cache (.cache/hsa, through a private apt configuration:
# the machine's apt sources are never touched). The build uses them unless
# an installed ROCm (ROCM_PATH, /opt/rocm) or HSA_INCLUDE_DIR says otherwise.
# Safe to run repeatedly.
set -euo pipefail

packages=(
  libhsa-runtime-dev   # ROCm 5.2 HSA headers: the oldest generation the tests build against
  debian-archive-keyring  # verifies the newer suites' packages (scripts/hsa_headers.sh)
  libclang-dev         # libclang for bindgen
  clang                # clang's resource headers for bindgen
  cmake                # C/C++ tests, install and package
  g++ gcc make
  binutils             # nm, readelf, for the exported-symbol and SONAME checks
  pkgconf              # pkg-config, for the install test's pkg-config consumer
  valgrind             # memcheck run of the C/C++ tests
  clang-19             # the device kernels' AMD code objects (buildtools/kernels.rs): Debian 12's
                       # default clang (14) stops at gfx90a, clang-19 knows up to gfx1201
  lld-19               # the linker clang-19 uses for AMD code objects
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

# The newest HSA headers Debian has, unless the build is pointed elsewhere.
if [[ -z "${HSA_INCLUDE_DIR:-}" && -z "${ROCM_PATH:-}" && ! -f /opt/rocm/include/hsa/hsa_api_trace.h ]]; then
  "$(dirname "$0")/hsa_headers.sh" newest >/dev/null
fi
