#!/usr/bin/env bash
# Reliability checks (docs/RELIABILITY.md), run by scripts/test.sh after the default and ASan + UBSan builds:
#   1. the libFuzzer targets (fuzz/, clang with ASan + UBSan): replay of the committed corpus, then a bounded
#      fuzzing run per target (FP8MOE_FUZZ_SECONDS each, 45 by default: at most 2 minutes in all);
#   2. a ThreadSanitizer build of the thread tests (test_threads, test_unload, test_hostile_tensors).
# New inputs found by the bounded runs go to build-fuzz/, never into the committed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
fuzz_seconds="${FP8MOE_FUZZ_SECONDS:-45}"

# clang and its libFuzzer runtime, from Debian, when missing (the rest comes from scripts/deps.sh)
missing=()
for p in clang libclang-rt-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "reliability deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

echo "== fuzz build (clang, libFuzzer, ASan + UBSan) =="
cmake -S fuzz -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-fuzz -j"$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for target in negotiation run; do
  bin="build-fuzz/fuzz_$target"
  echo "== fuzz_$target: replay of fuzz/corpus/$target =="
  if ! "$bin" -runs=0 "fuzz/corpus/$target" > "build-fuzz/replay_$target.log" 2>&1; then
    tail -n 60 "build-fuzz/replay_$target.log"
    echo "fuzz_$target: corpus replay FAILED"
    exit 1
  fi
  grep -E "DONE" "build-fuzz/replay_$target.log"
  echo "== fuzz_$target: ${fuzz_seconds} s of fuzzing =="
  work="build-fuzz/corpus-$target"
  mkdir -p "$work"
  log="build-fuzz/fuzz_$target.log"
  if ! "$bin" -max_total_time="$fuzz_seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
       -artifact_prefix=build-fuzz/ "$work" "fuzz/corpus/$target" > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$target: FAILED (the input is in build-fuzz/; see docs/RELIABILITY.md to reproduce)"
    exit 1
  fi
  grep -E "DONE" "$log" | tail -n 1 || true
  grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added" "$log"
done

echo "== ThreadSanitizer build (thread tests) =="
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP8MOE_CUDA=OFF -DCMAKE_C_FLAGS=-fsanitize=thread \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
cmake --build build-tsan -j"$jobs" --target test_threads test_unload test_hostile_tensors
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -R '^(test_threads|test_unload|test_hostile_tensors)$'
