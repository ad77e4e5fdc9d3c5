# shellcheck shell=bash
# bench-build.sh — sourced by tools/gpu-bench.sh and tools/sm90-ab.sh: builds the library and fp8moe-bench in
# $BUILD unless they are already there (tools/gpu-check.sh's build), then exports what the bench reads.
#   bench_build LOG WHO   the build log is $OUT/LOG-build.log, WHO names the script in the failure line;
#                         exits 1 on failure.
bench_build() {
  if [ ! -x "$BUILD/bench/fp8moe-bench" ] || [ ! -f "$BUILD/src/libfp8moe.so" ]; then
    if ! { cmake -S "$ROOT" -B "$BUILD" -DFP8MOE_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
           cmake --build "$BUILD" -j"$(nproc)" --target fp8moe fp8moe-bench; } > "$OUT/$1-build.log" 2>&1; then
      grep -E "error|Error" "$OUT/$1-build.log" | head -20
      echo "$2: BUILD FAILED (see $1-build.log)"
      exit 1
    fi
  fi
  FP8MOE_COMMIT=${FP8MOE_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)}
  export FP8MOE_COMMIT
  export FP8MOE_LIBRARY="$BUILD/src/libfp8moe.so"
}
