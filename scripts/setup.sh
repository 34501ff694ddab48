#!/usr/bin/env bash
# Quick start, step 1: install dependencies, build milc in ./build, and run the
# main job (one 4-layer GPT-2 chunk compiled in mode 2 into the default cache).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/cli/milc build --layers 4 --mode 2
