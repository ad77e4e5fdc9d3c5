#!/usr/bin/env bash
# gpu-check.sh — the one script run on a GPU machine: configure and build with the CUDA backend, run the
# `gpu` CTest label, compute-sanitizer memcheck, racecheck and synccheck on the reduced suite
# (test_gpu_sweep --quick), then fp8moe-bench (tools/gpu-bench.sh) within a time budget, so every GPU run
# leaves a comparable table. Logs go to $OUT (default ./gpu-check-out); the last lines are the summary.
#   GPU_CHECK_SANITIZE=0  skip the sanitizer runs      GPU_CHECK_BUILD=dir  build directory
#   GPU_CHECK_PROFILE=0   skip the ncu pass            GPU_CHECK_BENCH=0    skip the benchmark
#   GPU_CHECK_PYTHON=0    skip the Python package's tests
#   GPU_CHECK_BENCH_TWICE=1  a first benchmark pass before the tests, compared with the last one
#   GPU_CHECK_STAGES=1    per-stage breakdown pass     BENCH_BUDGET_S / BENCH_ARGS  passed to tools/gpu-bench.sh
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
BUILD=${GPU_CHECK_BUILD:-/tmp/fp8moe-gpu-build}
mkdir -p "$OUT"
start=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; nvcc --version | tail -1; } \
  > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

if ! { cmake -S "$ROOT" -B "$BUILD" -DFP8MOE_CUDA=ON -DFP8MOE_CUDA_VERBOSE_PTXAS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$BUILD" -j"$(nproc)"; } > "$OUT/build.log" 2>&1; then
  grep -E "error|Error" "$OUT/build.log" | head -30
  echo "gpu-check: BUILD FAILED (see build.log)"
  exit 1
fi
echo "build: ok ($(( $(date +%s) - start )) s); NEEDED of the library:"
readelf -d "$BUILD/src/libfp8moe.so" | grep NEEDED

# A first benchmark pass before the tests, so the one at the end is a second run some minutes later: the
# two must agree within 3 % on memory-bound points (docs/PERFORMANCE.md).
if [ "${GPU_CHECK_BENCH:-1}" = 1 ] && [ "${GPU_CHECK_BENCH_TWICE:-0}" = 1 ]; then
  GPU_CHECK_BUILD="$BUILD" OUT="$OUT/first" bash "$ROOT/tools/gpu-bench.sh" > /dev/null 2>&1
  echo "first benchmark pass: rc $? ($(( $(date +%s) - start )) s)"
fi

(cd "$BUILD" && ctest -L gpu --output-on-failure -V) > "$OUT/ctest.log" 2>&1
ctest_rc=$?
log() { sed -E 's/^[0-9]+: //' "$OUT/ctest.log"; }
echo "sweep cases compared: $(log | grep -cE '^(table|ties|nonfinite) ')"
log | grep -E "^(decode|oob-ids|T=0|shards|graph|streams|model) |max rel_err|CHECK|differs|never written|passed|failed|Skipped|Test +#" | tail -60
echo "ctest -L gpu: rc $ctest_rc ($(( $(date +%s) - start )) s)"

# The Python package's tests (python/tests; its `gpu` tests: torch reference, graph capture, torch.compile,
# streams) against the same build, with the image's python3 (torch, numpy, ml_dtypes, pytest).
py_rc=0
if [ "${GPU_CHECK_PYTHON:-1}" = 1 ] && [ -d "$ROOT/python/tests" ]; then
  PYTHONPATH="$ROOT/python" FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so" timeout 600 python3 -m pytest -c "$ROOT/python/pytest.ini" \
    --rootdir "$ROOT/python" -p no:cacheprovider -ra "$ROOT/python/tests" > "$OUT/pytest.log" 2>&1
  py_rc=$?
  echo "python tests: rc $py_rc; $(tail -1 "$OUT/pytest.log")"
fi

san_rc=0
if [ "${GPU_CHECK_SANITIZE:-1}" = 1 ] && ! command -v compute-sanitizer > /dev/null; then
  echo "compute-sanitizer: not installed"
  san_rc=1
elif [ "${GPU_CHECK_SANITIZE:-1}" = 1 ]; then
  export FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so"
  for tool in memcheck racecheck synccheck; do
    timeout "${GPU_CHECK_SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$BUILD/tests/test_gpu_sweep" --quick > "$OUT/$tool.log" 2>&1
    rc=$?
    san_rc=$(( san_rc | rc ))
    echo "compute-sanitizer $tool: rc $rc; $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY" "$OUT/$tool.log" | tail -1)"
  done
fi
# Per-kernel device time of a few shapes (one metric pass per kernel; clocks left alone).
if [ "${GPU_CHECK_PROFILE:-1}" = 1 ] && command -v ncu > /dev/null; then
  export FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so"
  for shape in "deepseek-v3 1" "qwen3-30b-a3b 64" "mixtral-8x7b 1"; do
    ncu --clock-control none --print-kernel-base function --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      "$BUILD/tests/test_gpu_models" $shape > "$OUT/ncu-part.log" 2>&1
    echo "ncu $shape (last 9 kernels = the timed run; device time, DRAM throughput % of peak):"
    awk '/Context [0-9]+, Stream/ {name=$1} /dram__throughput/ {d=$NF} /gpu__time_duration.sum/ {print "   ", name, $NF, $(NF-1), "dram", d "%"}' \
      "$OUT/ncu-part.log" | tail -9
    cat "$OUT/ncu-part.log" >> "$OUT/ncu.log"
    rm -f "$OUT/ncu-part.log"
  done
fi
bench_rc=0
if [ "${GPU_CHECK_BENCH:-1}" = 1 ]; then
  GPU_CHECK_BUILD="$BUILD" OUT="$OUT" bash "$ROOT/tools/gpu-bench.sh"
  bench_rc=$?
  [ -f "$OUT/first/bench.json" ] && python3 "$ROOT/bench/bench_report.py" compare "$OUT/first/bench.json" "$OUT/bench.json"
  # Per-stage breakdown of the decode and mid-size points (prefix graphs; docs/PERFORMANCE.md).
  if [ "${GPU_CHECK_STAGES:-0}" = 1 ]; then
    FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so" "$BUILD/bench/fp8moe-bench" --tokens 1,8,128,2048 --routing uniform \
      --shape deepseek-v3,qwen3-30b-a3b,mixtral-8x7b --check-tokens 4 \
      --replays 30 --stages --md "$OUT/stages.md" --json "$OUT/stages.json" > "$OUT/stages.log" 2>&1
    echo "stage breakdown: rc $? (stages.md)"
  fi
fi
echo "gpu-check: done in $(( $(date +%s) - start )) s; ctest rc $ctest_rc, python rc $py_rc, sanitizers rc $san_rc, bench rc $bench_rc"
[ $ctest_rc -eq 0 ] && [ $py_rc -eq 0 ] && [ $san_rc -eq 0 ] && [ $bench_rc -eq 0 ]
