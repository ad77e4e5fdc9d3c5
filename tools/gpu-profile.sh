#!/usr/bin/env bash
# gpu-profile.sh — Nsight Compute on the kernels that bound a layer, one profiled launch each, so a kernel
# change starts from measured limiters (throughput vs peak, stall reasons, occupancy) instead of guesses.
# Runs test_gpu_models (one model, one T), or fp8moe-bench where a case names a format (any T), under ncu with the
# caches flushed and the clocks left alone; writes $OUT/profile/ncu-<model>-<T>-<kernel>[-<format>].txt and prints the
# headline metrics of each.
#   PROFILE_CASES="model T kernel-regex [format]; ..."   (default: the decode GEMM1 and the wgmma GEMMs at
#                                                 deepseek-v3, the wgmma GEMM1 at mixtral-8x7b)
#   PROFILE_SOURCE=1      also the per-instruction stall samples (SourceCounters): the report
#                         ncu-<...>.ncu-rep, its SASS source page ncu-<...>-src.csv.xz, and the summary of
#                         tools/ncu_source_stalls.py in the .txt (docs/GPU.md "Next" 8 and 9 read them)
#   GPU_CHECK_BUILD=dir   a build with -DFP8MOE_CUDA=ON (tools/gpu-check.sh makes one)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out}/profile
BUILD=${GPU_CHECK_BUILD:-/tmp/fp8moe-gpu-build}
CASES=${PROFILE_CASES:-"deepseek-v3 1 gemm1_decode; deepseek-v3 1 gemm2_decode; deepseek-v3 2048 gemm1_wgmma; deepseek-v3 2048 gemm2_wgmma; mixtral-8x7b 2048 gemm1_wgmma; deepseek-v3 1 prologue"}
mkdir -p "$OUT"
command -v ncu > /dev/null || { echo "gpu-profile: ncu not installed"; exit 1; }
export FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so"
rc=0
IFS=';' read -ra list <<< "$CASES"
for c in "${list[@]}"; do
  read -r model T kernel format <<< "$c"
  [ -n "${kernel:-}" ] || continue
  base="$OUT/ncu-$model-$T-$kernel${format:+-$format}" # two formats of one kernel: two reports
  f="$base.txt"
  host=("$BUILD/tests/test_gpu_models" "$model" "$T")
  [ -z "${format:-}" ] || host=("$BUILD/bench/fp8moe-bench" --shape "$model" --format "$format" --tokens "$T"
    --routing uniform --replays 5 --warmup 0 --warmup-ms 0 --check-tokens 0 --no-rooflines)
  source_args=()
  [ "${PROFILE_SOURCE:-0}" != 1 ] || source_args=(--section SourceCounters --import-source no -f -o "$base")
  timeout 180 ncu --clock-control none --cache-control all -k "regex:$kernel" -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
    "${source_args[@]}" "${host[@]}" > "$f" 2>&1
  r=$?
  [ "$r" = 0 ] || rc=1
  if [ "${PROFILE_SOURCE:-0}" = 1 ] && [ -f "$base.ncu-rep" ]; then # -o writes the report, not the page
    ncu -i "$base.ncu-rep" --page details >> "$f" 2>&1
    ncu -i "$base.ncu-rep" --page source --csv --print-source sass 2> /dev/null | xz > "$base-src.csv.xz"
    python3 "$ROOT/tools/ncu_source_stalls.py" "$base-src.csv.xz" --top 15 >> "$f" 2>&1
  fi
  echo "== $model T=$T $kernel (ncu rc $r)"
  grep -E "^ +(Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Registers Per Thread|Achieved Occupancy|Theoretical Occupancy|Issued Warp Per Scheduler|No Eligible|Warp Cycles Per Issued Instruction|L2 Hit Rate|Mem Busy|Max Bandwidth|Executed Ipc Active) " "$f" | sed 's/^ \+/   /'
  grep -E "Stall|stall" "$f" | grep -E "OPT|cycles" | head -4 | cut -c1-220
done
exit $rc
