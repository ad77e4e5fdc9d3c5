# shellcheck shell=bash
# The default build, shared by the two README commands: scripts/setup-and-run.sh builds the library, the tool and
# the example in it; scripts/test.sh configures the same directory the same way, so it only adds the tests and
# rebuilds nothing. RelWithDebInfo: optimized (-O2, hardened) and with the debug info the ABI gate reads.
FP8MOE_BUILD_DIR=build
FP8MOE_BUILD_TYPE=RelWithDebInfo

# fp8moe_configure_default_build [CMAKE ARGS...]
fp8moe_configure_default_build() {
  cmake -S . -B "$FP8MOE_BUILD_DIR" -DCMAKE_BUILD_TYPE="$FP8MOE_BUILD_TYPE" "$@"
}
