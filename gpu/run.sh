#!/usr/bin/env bash
# gpu/run.sh: builds and runs the GPU validation harness on a machine with an
# NVIDIA GPU, nvcc and g++ (no Rust: the library comes prebuilt in the carry
# folder). Run from the repository root:
#
#   bash gpu/run.sh                       # CARRY=gpu/.carry, OUT=$OUT or gpu/out
#
# The carry folder (made on a Rust machine, see gpu/prepare_carry.sh) holds
#   lib/libkernel_replay.so     the unchanged library (cargo build --release)
#   include/hsa/*.h             the HSA headers it was built against
#
# Steps: print the machine (nvidia-smi, nvcc, g++); compile gpu/kernels.cu
# (the application's kernels) and kernels/replay_kernels.cu (the library's
# own) to cubins with nvcc; compile the test runtime's CUDA backend
# (testing/hsa-runtime: common/ and cuda/), its conformance suite, the test
# and the bench with g++; run the self-check (the conformance suite on this
# GPU, the test's --before-init check, both programs without a driver), the
# tests once per strategy, then the bench; print the bench's Markdown table
# last. Raw output goes to $OUT
# (or gpu/out): environment.txt, build.log, selfcheck.log,
# test-<strategy>.log, bench.log, bench.csv, bench_table.md, summary.txt.
#
# The library's kernels: KERNEL_REPLAY_CODE_OBJECT is exported as the
# replay_kernels cubin, so the library loads it (for any ISA) through
# HSA-on-CUDA's code-object and queue entries, as it loads its embedded AMD
# code objects on ROCm. The tests run once under each KERNEL_REPLAY_STRATEGY
# in STRATEGIES, with KERNEL_REPLAY_VERIFY=$TEST_VERIFY (every restore
# compared byte for byte by the library too).
#
# Variables: CARRY, OUT, BUILD_DIR (default gpu/.build), NVCC, CXX, ARCH
# (sm_XY; default from nvidia-smi, else sm_90), WERROR=1 (add -Werror),
# SKIP_TESTS=1, SKIP_BENCH=1, BENCH_ARGS (extra bench arguments, e.g.
# --quick, --part kernels), CUPTI_CHECKPOINT_LIB (CUPTI's libcheckpoint.so;
# default: searched in the CUDA install), TEST_ARGS (e.g. "--only f:"), STRATEGIES (default
# "copies scatter dirty auto"), TEST_VERIFY (default 1), TEST_TIMEOUT (200 s
# per strategy), BENCH_TIMEOUT (420 s), NO_REPLAY_KERNELS=1 (do not export
# KERNEL_REPLAY_CODE_OBJECT: the library falls back to its copies).
#
# Exit status: 0 all passed; 1 a test failed; 2 the build failed; 3 the bench
# failed (tests passed); 4 the carry folder or a tool is missing.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 4
REPO=$(pwd)
CARRY=${CARRY:-${1:-gpu/.carry}}
OUT=${OUT:-gpu/out}
BUILD_DIR=${BUILD_DIR:-gpu/.build}
CXX=${CXX:-g++}
TEST_TIMEOUT=${TEST_TIMEOUT:-200}
STRATEGIES=${STRATEGIES:-copies scatter dirty auto}
TEST_VERIFY=${TEST_VERIFY:-1}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-420}
STARTED=$(date +%s)

mkdir -p "$OUT" "$BUILD_DIR" || exit 4
CARRY=$(cd "$CARRY" 2>/dev/null && pwd) || { echo "!! run.sh: carry folder '${CARRY}' not found (see gpu/README.md)"; exit 4; }
OUT=$(cd "$OUT" && pwd)
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)

banner() { printf '\n==== %s\n' "$*"; }
die() {
  local code=$1; shift
  printf '\n!!!! run.sh FAILED: %s\n' "$*" | tee -a "$OUT/summary.txt"
  exit "$code"
}

# ---- inputs ---------------------------------------------------------------------

[ -f "$CARRY/lib/libkernel_replay.so" ] || die 4 "$CARRY/lib/libkernel_replay.so is missing"
[ -f "$CARRY/include/hsa/hsa_api_trace.h" ] || die 4 "$CARRY/include/hsa/hsa_api_trace.h is missing"
[ -f include/kernel_replay.h ] || die 4 "include/kernel_replay.h is missing (run from the repository)"
if [ -z "${NVCC:-}" ]; then
  NVCC=$(command -v nvcc || true)
  [ -n "$NVCC" ] || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc; }
fi
[ -n "${NVCC:-}" ] && [ -x "$NVCC" ] || die 4 "nvcc not found (set NVCC)"
command -v "$CXX" >/dev/null || die 4 "$CXX not found (set CXX)"

# ---- the machine ----------------------------------------------------------------

banner "machine"
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname) $(uname -srm)"
  grep -m1 'model name' /proc/cpuinfo 2>/dev/null
  grep -E 'MemTotal|MemAvailable' /proc/meminfo 2>/dev/null
  echo "--- nvidia-smi"
  nvidia-smi 2>&1 || echo "(nvidia-smi failed)"
  echo "--- nvidia-smi topo"
  nvidia-smi topo -m 2>&1 | head -20 || true
  echo "--- /proc/driver/nvidia/version"
  cat /proc/driver/nvidia/version 2>&1 || true
  echo "--- $NVCC --version"
  "$NVCC" --version 2>&1
  echo "--- $CXX --version"
  "$CXX" --version 2>&1 | head -1
  echo "--- repository"
  git -C "$REPO" log -1 --format='%H %s' 2>/dev/null || echo "(not a git checkout)"
  echo "--- carry"
  ls -l "$CARRY/lib/libkernel_replay.so"
  ls "$CARRY/include/hsa" | tr '\n' ' '; echo
} 2>&1 | tee "$OUT/environment.txt"

if [ -z "${ARCH:-}" ]; then
  CC_CAP=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  if [[ "${CC_CAP}" =~ ^[0-9]+$ ]]; then ARCH="sm_${CC_CAP}"; else ARCH=sm_90; fi
fi
TOOLKIT=$("$NVCC" --version 2>/dev/null | grep -E 'release' | sed 's/^.*release/release/' | head -1)
echo "target architecture: $ARCH; toolkit: ${TOOLKIT:-unknown}"

# ---- build ----------------------------------------------------------------------------

banner "build (log: $OUT/build.log)"
: > "$OUT/build.log"
CUBIN="$BUILD_DIR/kernels.cubin"
rm -f "$CUBIN"
# Lazy module loading (the CUDA 12.2+ default) would load the module on the
# first launch, inside a test; eager loading makes cuModuleLoad do it all.
export CUDA_MODULE_LOADING=EAGER

NVCC_CMD=("$NVCC" -cubin "-arch=$ARCH" -O3 -I gpu -o "$CUBIN" gpu/kernels.cu)
echo "+ ${NVCC_CMD[*]}" | tee -a "$OUT/build.log"
if ! "${NVCC_CMD[@]}" >>"$OUT/build.log" 2>&1; then
  cat "$OUT/build.log"
  echo "!! cubin build failed; trying a fatbin with PTX" | tee -a "$OUT/build.log"
  CC_NUM=${ARCH#sm_}
  # No -O3 here (a host-compiler option): one thing fewer that could be refused.
  NVCC_CMD=("$NVCC" -fatbin "-gencode=arch=compute_${CC_NUM},code=[sm_${CC_NUM},compute_${CC_NUM}]"
            -I gpu -o "$CUBIN" gpu/kernels.cu)
  echo "+ ${NVCC_CMD[*]}" | tee -a "$OUT/build.log"
  "${NVCC_CMD[@]}" >>"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; die 2 "nvcc could not compile gpu/kernels.cu"; }
fi
ls -l "$CUBIN" | tee -a "$OUT/build.log"

# The library's own kernels (scatter copy, block hashing, compare-and-copy),
# the same source as the AMD code objects the library embeds.
REPLAY_CUBIN="$BUILD_DIR/replay_kernels.cubin"
rm -f "$REPLAY_CUBIN"
NVCC_CMD=("$NVCC" -cubin "-arch=$ARCH" -O3 -I kernels -o "$REPLAY_CUBIN" kernels/replay_kernels.cu)
echo "+ ${NVCC_CMD[*]}" | tee -a "$OUT/build.log"
if ! "${NVCC_CMD[@]}" >>"$OUT/build.log" 2>&1; then
  cat "$OUT/build.log"
  echo "!! replay_kernels cubin build failed; trying a fatbin with PTX" | tee -a "$OUT/build.log"
  CC_NUM=${ARCH#sm_}
  NVCC_CMD=("$NVCC" -fatbin "-gencode=arch=compute_${CC_NUM},code=[sm_${CC_NUM},compute_${CC_NUM}]"
            -I kernels -o "$REPLAY_CUBIN" kernels/replay_kernels.cu)
  echo "+ ${NVCC_CMD[*]}" | tee -a "$OUT/build.log"
  "${NVCC_CMD[@]}" >>"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; die 2 "nvcc could not compile kernels/replay_kernels.cu"; }
fi
ls -l "$REPLAY_CUBIN" | tee -a "$OUT/build.log"
# Registers, shared and local memory of each kernel, for the record.
"$NVCC" -cubin "-arch=$ARCH" -O3 -I kernels -Xptxas -v -o /dev/null kernels/replay_kernels.cu \
  >>"$OUT/build.log" 2>&1 || true
if [ "${NO_REPLAY_KERNELS:-0}" != 1 ]; then
  export KERNEL_REPLAY_CODE_OBJECT="$REPLAY_CUBIN"
  echo "KERNEL_REPLAY_CODE_OBJECT=$KERNEL_REPLAY_CODE_OBJECT"
else
  unset KERNEL_REPLAY_CODE_OBJECT
  echo "NO_REPLAY_KERNELS=1: the library's kernels are not loaded"
fi

R=testing/hsa-runtime
CXXFLAGS=(-std=c++17 -O2 -g -Wall -Wextra -Wpedantic -DAMD_INTERNAL_BUILD
          -isystem "$CARRY/include/hsa" -isystem "$CARRY/include"
          -I include -I gpu -I testing -I $R/include -I $R/common -I hsa-sys -I kernels)
[ "${WERROR:-0}" = 1 ] && CXXFLAGS+=(-Werror)
# The programs load the library by its SONAME (libkernel_replay.so.<major>,
# build.rs), not by cargo's file name: a link of that name to the carried
# file, in the build directory, comes first in their rpath.
KR_SONAME=$(objdump -p "$CARRY/lib/libkernel_replay.so" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
mkdir -p "$BUILD_DIR/lib"
[ -n "$KR_SONAME" ] && ln -sfn "$CARRY/lib/libkernel_replay.so" "$BUILD_DIR/lib/$KR_SONAME"
LDFLAGS=(-L "$CARRY/lib" -lkernel_replay "-Wl,-rpath,$BUILD_DIR/lib:$CARRY/lib" -ldl -pthread)

# Every translation unit compiled once, in parallel; each failure is printed.
# The runtime: the test runtime's front end (every file of common/, as
# testing/hsa-runtime/CMakeLists.txt builds hsa_rt_cuda) and its CUDA backend.
RUNTIME=($R/common/*.cpp $R/cuda/backend.cpp)
CONFORMANCE=($R/conformance/*.cpp)
SOURCES=("${RUNTIME[@]}" "${CONFORMANCE[@]}" gpu/harness.cpp gpu/kernel_replay_gpu_test.cpp
         gpu/kernel_replay_gpu_bench.cpp)
object() { local name=${1//\//_}; echo "$BUILD_DIR/${name%.cpp}.o"; }
declare -A JOBS=()
for src in "${SOURCES[@]}"; do
  obj=$(object "$src")
  echo "+ $CXX ${CXXFLAGS[*]} -c $src -o $obj" >>"$OUT/build.log"
  "$CXX" "${CXXFLAGS[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
  JOBS[$!]="$src"
done
BUILD_FAILED=0
for pid in "${!JOBS[@]}"; do
  src=${JOBS[$pid]}
  if ! wait "$pid"; then
    echo "!! compiling $src failed:" | tee -a "$OUT/build.log"
    BUILD_FAILED=1
  fi
  cat "$(object "$src").log" | tee -a "$OUT/build.log"
done
[ "$BUILD_FAILED" = 0 ] || die 2 "g++ could not compile the harness (see above)"

RUNTIME_OBJS=()
for src in "${RUNTIME[@]}"; do RUNTIME_OBJS+=("$(object "$src")"); done
link() {
  local program=$1; shift
  echo "+ $CXX -o $BUILD_DIR/$program $* ${RUNTIME_OBJS[*]} ${LDFLAGS[*]}" | tee -a "$OUT/build.log"
  "$CXX" -o "$BUILD_DIR/$program" "$@" "${RUNTIME_OBJS[@]}" "${LDFLAGS[@]}" >>"$OUT/build.log" 2>&1 \
    || { cat "$OUT/build.log"; die 2 "linking $program failed"; }
}
link kernel_replay_gpu_test "$(object gpu/kernel_replay_gpu_test.cpp)" "$(object gpu/harness.cpp)"
link kernel_replay_gpu_bench "$(object gpu/kernel_replay_gpu_bench.cpp)" "$(object gpu/harness.cpp)"
CONFORMANCE_OBJS=()
for src in "${CONFORMANCE[@]}"; do CONFORMANCE_OBJS+=("$(object "$src")"); done
link conformance_cuda "${CONFORMANCE_OBJS[@]}"
# The library must load here (glibc version, SONAME, rpath): say so now, not
# as a cryptic loader error in the middle of the tests.
if ldd "$BUILD_DIR/kernel_replay_gpu_test" 2>&1 | grep -E 'not found|version .* not found'; then
  ldd "$BUILD_DIR/kernel_replay_gpu_test"
  die 2 "libkernel_replay.so (or one of its dependencies) does not load on this machine"
fi
echo "built in $(( $(date +%s) - STARTED )) s"

# ---- run ---------------------------------------------------------------------------------

banner "self-check: the runtime's conformance suite on this GPU, the no-GPU checks (log: $OUT/selfcheck.log)"
{
  "$BUILD_DIR/conformance_cuda"
  rc=$?
  "$BUILD_DIR/kernel_replay_gpu_test" --before-init || rc=1
  for program in kernel_replay_gpu_test kernel_replay_gpu_bench; do
    HSA_RT_LIBCUDA=/nonexistent/libcuda.so.1 "$BUILD_DIR/$program" >"$BUILD_DIR/$program.nodriver.log" 2>&1
    code=$?
    if [ "$code" = 77 ] && grep -q "no CUDA driver" "$BUILD_DIR/$program.nodriver.log"; then
      echo "$program without a driver: exit 77, \"no CUDA driver\" (ok)"
    else
      echo "!! $program without a driver: exit $code, not 77 saying \"no CUDA driver\""; rc=1
    fi
  done
  exit $rc
} 2>&1 | tee "$OUT/selfcheck.log"
SELFCHECK_RC=${PIPESTATUS[0]}
[ "$SELFCHECK_RC" = 0 ] || echo "!! self-check failed (exit $SELFCHECK_RC); running the tests anyway"

# Once per strategy: every test (a..n, under every storage policy) must pass
# under each, every pass byte-identical to pass 0.
TEST_RC=skipped
TEST_RESULTS=""
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  TEST_RC=0
  for strategy in $STRATEGIES; do
    banner "tests, KERNEL_REPLAY_STRATEGY=$strategy KERNEL_REPLAY_VERIFY=$TEST_VERIFY (log: $OUT/test-$strategy.log)"
    started=$(date +%s)
    # shellcheck disable=SC2086
    KERNEL_REPLAY_STRATEGY=$strategy KERNEL_REPLAY_VERIFY=$TEST_VERIFY \
      timeout --kill-after=10 "$TEST_TIMEOUT" "$BUILD_DIR/kernel_replay_gpu_test" --cubin "$CUBIN" ${TEST_ARGS:-} \
      2>&1 | tee "$OUT/test-$strategy.log"
    rc=${PIPESTATUS[0]}
    [ "$rc" = 124 ] && echo "!! the tests ($strategy) timed out after ${TEST_TIMEOUT} s"
    [ "$rc" = 0 ] || { echo "!! tests failed under $strategy (exit $rc)"; TEST_RC=$rc; }
    TEST_RESULTS="$TEST_RESULTS $strategy=exit$rc($(( $(date +%s) - started ))s)"
  done
  [ "$TEST_RC" = 0 ] || echo "!! some tests failed; running the bench anyway"
fi

BENCH_RC=skipped
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  banner "bench (log: $OUT/bench.log)"
  # CUPTI's checkpoint library (libcheckpoint.so), for the bench's side-by-side
  # rows: CUPTI_CHECKPOINT_LIB if set, else looked for in the CUDA install;
  # its directory goes on LD_LIBRARY_PATH (it needs libcupti from there).
  # Not found: the bench says so and skips those rows.
  if [ -z "${CUPTI_CHECKPOINT_LIB:-}" ]; then
    NVCC_ROOT=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
    CUPTI_CHECKPOINT_LIB=$(find "$NVCC_ROOT" /usr/local/cuda /usr/local/cuda-* /usr/lib/x86_64-linux-gnu \
        -maxdepth 6 -name 'libcheckpoint.so*' 2>/dev/null | sort | head -1)
    # Else the CUPTI of the Python environment (nvidia-cuda-cupti's wheel).
    [ -n "$CUPTI_CHECKPOINT_LIB" ] || CUPTI_CHECKPOINT_LIB=$(find /opt /usr/local/lib -maxdepth 8 \
        -name 'libcheckpoint.so*' 2>/dev/null | sort | head -1)
  fi
  if [ -n "${CUPTI_CHECKPOINT_LIB:-}" ]; then
    export CUPTI_CHECKPOINT_LIB
    export LD_LIBRARY_PATH="$(dirname "$CUPTI_CHECKPOINT_LIB")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "CUPTI checkpoint library: $CUPTI_CHECKPOINT_LIB" | tee -a "$OUT/environment.txt"
  else
    echo "CUPTI checkpoint library: not found (its bench rows are skipped)" | tee -a "$OUT/environment.txt"
  fi
  # shellcheck disable=SC2086
  timeout --kill-after=10 "$BENCH_TIMEOUT" "$BUILD_DIR/kernel_replay_gpu_bench" \
    --csv "$OUT/bench.csv" --table "$OUT/bench_table.md" --toolkit "nvcc ${TOOLKIT:-unknown}" \
    --cubin "$CUBIN" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
  BENCH_RC=${PIPESTATUS[0]}
  [ "$BENCH_RC" = 124 ] && echo "!! the bench timed out after ${BENCH_TIMEOUT} s"
fi

# ---- summary, the table last -----------------------------------------------------------

{
  echo "run.sh finished in $(( $(date +%s) - STARTED )) s"
  echo "self-check: exit $SELFCHECK_RC"
  echo "tests: exit $TEST_RC${TEST_RESULTS:+ (per strategy:$TEST_RESULTS)}"
  echo "library kernels: ${KERNEL_REPLAY_CODE_OBJECT:-not loaded}"
  echo "bench: exit $BENCH_RC"
  echo "raw output: $OUT"
} | tee "$OUT/summary.txt"
if [ -f "$OUT/bench_table.md" ] && [ "$BENCH_RC" != skipped ]; then
  banner "bench table ($OUT/bench_table.md)"
  cat "$OUT/bench_table.md"
fi

if [ "$TEST_RC" != 0 ] && [ "$TEST_RC" != skipped ]; then exit 1; fi
if [ "$SELFCHECK_RC" != 0 ]; then exit 1; fi
if [ "$BENCH_RC" != 0 ] && [ "$BENCH_RC" != skipped ]; then exit 3; fi
exit 0
