#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build the library, fp8moe-info and the example host
# (build output goes to a log, shown only when something fails), then print what the plugin offers here (each
# backend, and why one is unavailable) and run one DeepSeek-V3-shaped MoE layer on the backend AUTO picks.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/build-config.sh
source scripts/build-config.sh

jobs="$(nproc)"
mkdir -p "$FP8MOE_BUILD_DIR"
log="$FP8MOE_BUILD_DIR/setup.log"
: > "$log"

# step TITLE CMD...: runs CMD with its output appended to the log; on failure shows the log's tail and stops.
step() {
  local title=$1
  shift
  printf '%-8s ' "$title"
  local start=$SECONDS
  if "$@" >> "$log" 2>&1; then
    echo "ok ($((SECONDS - start)) s)"
  else
    echo "FAILED: $*"
    echo "---- last 60 lines of $log ----"
    tail -n 60 "$log"
    echo "---- the whole output is in $log ----"
    exit 1
  fi
}

echo "== fp8moe: setup and first run (build output: $log) =="
step deps bash scripts/deps.sh
step cmake fp8moe_configure_default_build
step build cmake --build "$FP8MOE_BUILD_DIR" -j"$jobs" --target fp8moe fp8moe-info fp8moe_example_deepseek
sed -n 's/^-- \(fp8moe .*\)$/         \1/p' "$log" | head -n 2

echo
echo "== what this machine offers: $FP8MOE_BUILD_DIR/tools/fp8moe-info --summary =="
"./$FP8MOE_BUILD_DIR/tools/fp8moe-info" --summary

echo
echo "== one DeepSeek-V3-shaped layer: $FP8MOE_BUILD_DIR/examples/fp8moe_example_deepseek =="
"./$FP8MOE_BUILD_DIR/examples/fp8moe_example_deepseek" --backend auto

b=$FP8MOE_BUILD_DIR
cat <<NEXT

== next ==
bash scripts/test.sh          all tests (adds only the tests to this build)
bash scripts/package.sh       .deb and .rpm packages (docs/PACKAGING.md)
$b/tools/fp8moe-info       the whole capability table (--json for programs)
$b/examples/fp8moe_example_deepseek --backend cpu|cuda
                              one layer on the backend you name
bash tools/gpu-check.sh       on an H100/H200: GPU tests, sanitizers, fp8moe-bench
docs/SPEC.md, docs/ABI.md    what a layer computes; how a host loads it
NEXT
