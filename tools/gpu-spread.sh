#!/usr/bin/env bash
# gpu-spread.sh — the run-to-run spread probe of docs/PERFORMANCE.md: why two bench passes disagree.
# Logs the GPU's SM clock, power and clock-event reasons every 20 ms (nvidia-smi) while it
#   1. replays one heavy point 300 times with no time-based warm-up (the series shows any clock step),
#   2. times the heavy memory-bound points twice, SPREAD_GAP_S apart, with the default warm-up, and compares.
# Reports in $OUT: series.json, pass1.json, pass2.json, smi.csv, spread.log. Builds like gpu-bench.sh.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
BUILD=${GPU_CHECK_BUILD:-/tmp/fp8moe-gpu-build}
mkdir -p "$OUT"
if [ ! -x "$BUILD/bench/fp8moe-bench" ]; then
  { cmake -S "$ROOT" -B "$BUILD" -DFP8MOE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build "$BUILD" -j"$(nproc)" --target fp8moe fp8moe-bench; } > "$OUT/spread-build.log" 2>&1 ||
    { echo "gpu-spread: BUILD FAILED"; exit 1; }
fi
export FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so"
BENCH="$BUILD/bench/fp8moe-bench"
fields=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$fields --format=csv,noheader -lms 20 > "$OUT/smi.csv" 2>&1 &
smi=$!
POINTS=${SPREAD_POINTS:---shape deepseek-v3,kimi-k2 --tokens 512,2048}
{
  echo "== series: deepseek-v3 block uniform T=2048, 300 replays, no time-based warm-up"
  "$BENCH" --shape deepseek-v3 --format block --routing uniform --tokens 2048 --replays 300 --warmup-ms 0 \
    --no-rooflines --check-tokens 4 --json "$OUT/series.json" | tail -3
  # shellcheck disable=SC2086
  "$BENCH" $POINTS --no-rooflines --json "$OUT/pass1.json" | tail -3
  sleep "${SPREAD_GAP_S:-60}"
  # shellcheck disable=SC2086
  "$BENCH" $POINTS --no-rooflines --json "$OUT/pass2.json" | tail -3
  python3 "$ROOT/bench/bench_report.py" compare "$OUT/pass1.json" "$OUT/pass2.json"
} > "$OUT/spread.log" 2>&1
kill $smi 2> /dev/null
python3 - "$OUT" <<'PY' >> "$OUT/spread.log" 2>&1
import json, sys, statistics
out = sys.argv[1]
s = json.load(open(out + "/series.json"))["points"][0]["replay_us"]
print("series, means of 20-replay windows (us):", " ".join("%.0f" % statistics.mean(s[i:i + 20]) for i in range(0, len(s), 20)))
rows = [l.split(", ") for l in open(out + "/smi.csv") if l.count(",") >= 5]
clk = [r[1] for r in rows]
print("smi samples:", len(rows), "; SM clock histogram:", {c: clk.count(c) for c in sorted(set(clk))})
print("clock-event reasons:", {r: [x[5].strip() for x in rows].count(r) for r in sorted(set(x[5].strip() for x in rows))})
pw = [float(r[3].split()[0]) for r in rows if r[3].split()[0].replace(".", "").isdigit()]
if pw: print("power W: max %.0f, median %.0f" % (max(pw), statistics.median(pw)))
PY
cat "$OUT/spread.log"
