#!/usr/bin/env bash
# sm90-ab.sh — the wgmma GEMMs' main-loop and item-order A/B (docs/GPU.md "Item order", "Main-loop and
# item-order switches"): one fp8moe-bench call per FP8MOE_CUDA_GEMM_FALLBACK setting, all on one build, then one table of
# the layer, routing + permutation, GEMM1 and GEMM2 medians (µs) per point and setting. Reports in $OUT: ab-<setting>.{json,md,log}
# and ab-summary.md. Builds the library and the bench first unless GPU_CHECK_BUILD already holds them.
#   AB_SETTINGS="none u m q r o qo ro"   settings; "none" leaves the variable unset (the default variant)
#   AB_ARGS="--shape mixtral-8x7b --tokens 128,512,2048,8192 --routing uniform"   bench arguments
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-check-out/ab}
BUILD=${GPU_CHECK_BUILD:-/tmp/fp8moe-gpu-build}
SETTINGS=${AB_SETTINGS:-none u m q r o qo ro}
ARGS=${AB_ARGS:---shape mixtral-8x7b --tokens 128,512,2048,8192 --routing uniform}
mkdir -p "$OUT"
# shellcheck source=tools/bench-build.sh
. "$ROOT/tools/bench-build.sh"
bench_build ab sm90-ab
rc=0
for v in $SETTINGS; do
  case "$v" in none) unset FP8MOE_CUDA_GEMM_FALLBACK ;; *) export FP8MOE_CUDA_GEMM_FALLBACK="$v" ;; esac
  # shellcheck disable=SC2086
  "$BUILD/bench/fp8moe-bench" $ARGS --stages --json "$OUT/ab-$v.json" --md "$OUT/ab-$v.md" > "$OUT/ab-$v.log" 2>&1
  r=$?
  echo "setting $v: bench rc $r"
  [ "$r" = 0 ] || rc=1
done
unset FP8MOE_CUDA_GEMM_FALLBACK
# shellcheck disable=SC2086
python3 - "$OUT" $SETTINGS > "$OUT/ab-summary.md" <<'EOF'
import json, os, sys
out, settings = sys.argv[1], sys.argv[2:]
runs = {}
for v in settings:
    path = os.path.join(out, "ab-%s.json" % v)
    if os.path.exists(path):
        with open(path) as f:
            runs[v] = {(p["shape"], p["format"], p["routing"], p["T"]): p for p in json.load(f)["points"]}
def stage(p, prefix):
    us = [s["us"] for s in p.get("stages", []) if s["name"].startswith(prefix)]
    return "%.0f" % us[0] if us else "-"
keys = sorted({k for r in runs.values() for k in r}, key=lambda k: (k[0], k[1], k[2], k[3]))
print("layer / routing+permutation / GEMM1 / GEMM2 median µs per FP8MOE_CUDA_GEMM_FALLBACK setting (status when not ok)\n")
print("| shape | format | routing | T | " + " | ".join(settings) + " |")
print("|---|---|---|---|" + "---|" * len(settings))
for k in keys:
    cells = []
    for v in settings:
        p = runs.get(v, {}).get(k)
        if p is None:
            cells.append("-")
            continue
        rp = p.get("route_permute_us", -1)
        c = "%.1f / %s / %s / %s" % (p["median_us"], "%.1f" % rp if rp is not None and rp >= 0 else "-",
                                     stage(p, "gemm1"), stage(p, "gemm2"))
        cells.append(c if p["status"] == "ok" else c + " " + p["status"])
    print("| %s | %s | %s | %d | " % k + " | ".join(cells) + " |")
EOF
cat "$OUT/ab-summary.md"
exit $rc
