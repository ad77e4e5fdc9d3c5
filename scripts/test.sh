#!/usr/bin/env bash
# All the tests: the default build (CUDA backend compiled in when nvcc exists; `gpu` tests skip without a GPU),
# an ASan + UBSan build of the host code and tests (CPU backend), the fuzz replay + bounded fuzzing + TSan
# (scripts/test-reliability.sh), then the Python package (python/tests).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"

bash scripts/deps.sh

# The build scripts/setup-and-run.sh made (same directory and type): only the tests are left to build.
# shellcheck source=scripts/build-config.sh
source scripts/build-config.sh
echo "== default build ($FP8MOE_BUILD_DIR, $FP8MOE_BUILD_TYPE) =="
fp8moe_configure_default_build
cmake --build "$FP8MOE_BUILD_DIR" -j"$jobs"
ctest --test-dir "$FP8MOE_BUILD_DIR" --output-on-failure -j"$jobs"

echo "== ASan + UBSan build (host code and tests) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFP8MOE_SANITIZE=ON -DFP8MOE_CUDA=OFF
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE "packaging|gpu"
bash scripts/test-reliability.sh

echo "== Python package (scripts/test-python.sh) =="
bash scripts/test-python.sh
