#!/usr/bin/env bash
# abi_selftest.sh SOURCE_DIR WORK_DIR CC VERSION_SCRIPT
# Proves that the ABI gate (packaging/abi/abi_gate.sh against the committed baseline) can fail: builds
# abi_fake_plugin.c against edited copies of abi/fp8moe.h and checks the gate's verdict on each.
#   control          unedited header                                   → must pass (0)
#   broken_insert    a field inserted mid-struct (fp8moe_context_args)  → must fail (1)
#   broken_widen     the last field of a struct_size struct widened     → must fail (1)
#   broken_frozen    a field appended to a frozen array-element struct  → must fail (1)
#   broken_constant  a pinned enum-like value changed (ROUTING_LLAMA4)  → must fail (1)
#   extended         fields appended to fp8moe_moe_args and fp8moe_context_info, an entry appended to
#                    fp8moe_api, a new routing constant, ABI minor 1     → must pass (0)
# The edited headers disable the layout _Static_asserts (the first gate, which the developer would have
# edited along with the struct) so that abidiff is the gate under test.
set -euo pipefail
src=$1 work=$2 cc=$3 version_script=$4
# shellcheck source=tests/packaging/common.sh
source "$src/tests/packaging/common.sh"
require_tools abidw abidiff readelf

gate="$src/packaging/abi/abi_gate.sh"
baseline="$src/packaging/abi"
header="$src/abi/fp8moe.h"
rm -rf "$work"
mkdir -p "$work"

# variant NAME EXPECTED_EXIT MARKER_COUNT SED_EDITS...
# MARKER_COUNT is how many lines of the edited header mention "SELFTEST"; a mismatch means an edit no longer
# applies to the current header, which must fail the test rather than test nothing.
results=()
variant() {
  local name=$1 expected=$2 markers=$3
  shift 3
  local dir="$work/$name"
  mkdir -p "$dir"
  sed -e 's/^#if UINTPTR_MAX == 0xffffffffffffffffu$/#if 0 \/\* layout asserts off for the ABI self-test \*\//' \
      "$@" "$header" > "$dir/fp8moe.h"
  local found
  found=$(grep -c SELFTEST "$dir/fp8moe.h" || true)
  [[ "$found" == "$markers" ]] || fail "$name: $found of $markers edits applied to $header"
  "$cc" -std=c11 -g -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra -Werror -I"$dir" \
    "$src/tests/packaging/abi_fake_plugin.c" -o "$dir/libfp8moe.so.1" \
    -Wl,-soname,libfp8moe.so.1 -Wl,--version-script="$version_script" || fail "$name: compile"
  local rc=0
  "$gate" check "$baseline" "$dir" "$dir/libfp8moe.so.1" > "$dir/gate.log" 2>&1 || rc=$?
  echo "== $name: abi_gate exit $rc (want $expected)"
  if [[ "$rc" != "$expected" ]]; then
    cat "$dir/gate.log"
    results+=("$name: exit $rc, want $expected")
  else
    grep -E 'abidiff|INCOMPATIBLE|changed|insertion' "$dir/gate.log" | sed -n '1,8s/^/   /p' || true
  fi
}

variant control 0 0
variant broken_insert 1 1 \
  -e '/^  int32_t backend;           \/\* FP8MOE_BACKEND_\*; default AUTO \*\//i\  int32_t inserted; /* SELFTEST */'
variant broken_widen 1 1 \
  -e 's|^  uint32_t flags;            /\* reserved, must be 0; default 0 \*/|  uint64_t flags; /* SELFTEST */|'
variant broken_frozen 1 1 \
  -e '/^  const char\* summary; \/\* one line: selection → weight \*\//a\  const char* appended; /* SELFTEST */'
variant broken_constant 1 1 \
  -e 's|^#define FP8MOE_ROUTING_LLAMA4 3 .*|#define FP8MOE_ROUTING_LLAMA4 30 /* SELFTEST */|'
variant extended 0 5 \
  -e '/^  void\* stream;  /a\  int32_t appended_field; /* SELFTEST */' \
  -e '/^  char device_name\[FP8MOE_NAME_CAPACITY\]; \/\* e\.g\./a\  int32_t appended_info; /* SELFTEST */' \
  -e '/^  int32_t (\*last_error)(/a\  int32_t (*appended_entry)(fp8moe_context* context); /* SELFTEST */' \
  -e '/^#define FP8MOE_ROUTING_PRECOMPUTED 9 /a\#define FP8MOE_ROUTING_APPENDED 10 /* SELFTEST */' \
  -e 's|^#define FP8MOE_ABI_VERSION_MINOR 0$|#define FP8MOE_ABI_VERSION_MINOR 1 /* SELFTEST */|'
# The extended variant must pass because its changes are allowed, not because abidiff saw none.
grep -q 'abidiff (all changes): exit 4' "$work/extended/gate.log" ||
  results+=("extended: abidiff did not see the appended members")

if ((${#results[@]})); then
  printf '%s\n' "${results[@]}" >&2
  fail "the ABI gate's verdicts are wrong"
fi
echo "abi_gate_selftest: all verdicts as expected"
