#!/usr/bin/env bash
# All the tests: the default build (CUDA backend compiled in when nvcc exists; `gpu` tests skip without a GPU)
# and an ASan + UBSan build of the host code and tests (CPU backend).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"

bash scripts/deps.sh

echo "== default build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"

echo "== ASan + UBSan build (host code and tests) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFP8MOE_SANITIZE=ON -DFP8MOE_CUDA=OFF
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "packaging|gpu"
bash scripts/test-reliability.sh
