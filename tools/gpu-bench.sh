#!/usr/bin/env bash
# gpu-bench.sh — runs fp8moe-bench (docs/PERFORMANCE.md) on a GPU machine and leaves its report in $OUT:
# bench.md (the tables), bench.json (every raw number), bench.png (fraction of roofline vs T, when
# matplotlib is there) and bench.log. Builds the bench first unless GPU_CHECK_BUILD already holds one.
#   BENCH_ARGS="--shape deepseek-v3 ..."  extra arguments (default: every shape, format, T and routing)
#   BENCH_BUDGET_S=420                    start no new point after this many seconds
#   FP8MOE_COMMIT=<id>                    recorded in the report (default: git rev-parse, when available)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
BUILD=${GPU_CHECK_BUILD:-/tmp/fp8moe-gpu-build}
mkdir -p "$OUT"
# shellcheck source=tools/bench-build.sh
. "$ROOT/tools/bench-build.sh"
bench_build bench gpu-bench
# shellcheck disable=SC2086
"$BUILD/bench/fp8moe-bench" --budget-s "${BENCH_BUDGET_S:-420}" --json "$OUT/bench.json" --md "$OUT/bench.md" \
  ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
rc=$?
python3 "$ROOT/bench/bench_report.py" validate "$OUT/bench.json" 2>&1 | tail -1
python3 "$ROOT/bench/bench_report.py" plot "$OUT/bench.json" "$OUT/bench.png" > /dev/null 2>&1 ||
  echo "gpu-bench: no chart (matplotlib missing?); bench_report.py plot draws it on any machine"
grep -E "^(fp8moe-bench|rooflines|  .*(CHECK|ERROR))" "$OUT/bench.log" | tail -20
echo "gpu-bench: rc $rc (0 ok, 1 a point disagreed with the CPU backend, 3 setup error, 77 no GPU)"
exit $rc
