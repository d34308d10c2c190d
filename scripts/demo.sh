#!/usr/bin/env bash
# Builds the library and the demo (an HSA tool replaying a mutating kernel on
# the software HSA runtime) and runs it. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target replay_demo
./build/replay_demo
