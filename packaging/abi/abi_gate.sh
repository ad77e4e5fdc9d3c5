#!/usr/bin/env bash
# abi_gate.sh — the ABI stability gate of fp8moe (policy: docs/ABI.md).
#
#   abi_gate.sh check          BASELINE_DIR HEADERS_DIR LIBRARY   → 0 compatible, 1 incompatible, 2 error,
#                                                                   77 libabigail missing
#   abi_gate.sh write-baseline BASELINE_DIR HEADERS_DIR LIBRARY   → (re)writes the baseline (major bumps only)
#
# BASELINE_DIR holds <SONAME>.abi (abidw of ABI x.0: exported interfaces and public types; opaque types
# dropped) and fp8moe-constants.txt (every numeric #define of the public header). LIBRARY must carry DWARF
# (RelWithDebInfo or Debug): abidiff sees the types only through it. The header checked for constants is
# HEADERS_DIR/fp8moe.h.
#
# Why three checks:
#  1. abidiff --leaf-changes-only with abi-suppressions.ini: struct_size structs may grow at their end, nothing
#     else may change. Leaf mode matters: in the default mode a suppression on a container type (fp8moe_api)
#     also hides the changes of every struct reached through it.
#  2. The same diff without suppressions, scanned for member changes: libabigail's "inserted at end" rule also
#     matches a struct whose last member only changed type (no insertion at all), which is a break.
#  3. The constants: status codes, enum-like values and flags are #defines, invisible in DWARF.
set -u

mode=${1:-}
baseline_dir=${2:-}
headers_dir=${3:-}
library=${4:-}
if [[ -z "$mode" || -z "$baseline_dir" || -z "$headers_dir" || -z "$library" ]]; then
  echo "usage: $0 check|write-baseline BASELINE_DIR HEADERS_DIR LIBRARY" >&2
  exit 2
fi
script_dir=$(cd "$(dirname "$0")" && pwd)
suppressions="$script_dir/abi-suppressions.ini"
private_types="$script_dir/abi-private.ini"
header="$headers_dir/fp8moe.h"
constants_file="$baseline_dir/fp8moe-constants.txt"

for tool in abidw abidiff readelf; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "SKIP: $tool not found (apt-get install abigail-tools binutils)" >&2
    exit 77
  fi
done
if [[ ! -f "$library" || ! -f "$header" ]]; then
  echo "error: missing $library or $header" >&2
  exit 2
fi
if ! readelf -S "$library" | grep -q '\.debug_info'; then
  # A Release build carries no types to compare: skip (CTest SKIP_RETURN_CODE) rather than pass.
  echo "skipped: $library has no DWARF; the ABI gate needs a RelWithDebInfo or Debug build" >&2
  exit 77
fi
soname=$(readelf -d "$library" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
if [[ -z "$soname" ]]; then
  echo "error: $library has no SONAME" >&2
  exit 2
fi
baseline="$baseline_dir/$soname.abi"

# Prints "NAME VALUE" for every numeric #define FP8MOE_* of a header (the value as written, comment removed).
header_constants() {
  sed -nE 's@^#define (FP8MOE_[A-Z0-9_]+)[[:space:]]+(\(?[0-9]([^/]*[^ /])?)[[:space:]]*(/\*.*)?$@\1 \2@p' "$1"
}

if [[ "$mode" == write-baseline ]]; then
  mkdir -p "$baseline_dir"
  abidw --exported-interfaces-only --suppressions "$private_types" --headers-dir "$headers_dir" \
        --drop-private-types --no-corpus-path --no-comp-dir-path --short-locs --type-id-style hash \
        --out-file "$baseline" "$library" || exit 2
  header_constants "$header" > "$constants_file"
  echo "wrote $baseline and $constants_file"
  mode=check
fi
if [[ "$mode" != check ]]; then
  echo "unknown mode $mode" >&2
  exit 2
fi
if [[ ! -f "$baseline" || ! -f "$constants_file" ]]; then
  echo "error: no baseline $baseline or $constants_file (SONAME $soname is a new major?)" >&2
  exit 2
fi
# A baseline without these types would make the gate pass vacuously.
for type in fp8moe_api fp8moe_negotiation fp8moe_moe_args fp8moe_tensor; do
  if ! grep -q "class-decl name='$type'" "$baseline"; then
    echo "error: baseline $baseline lacks struct $type" >&2
    exit 2
  fi
done

failed=0

# 1. abidiff against the baseline, growth of struct_size structs allowed.
common=(--leaf-changes-only --exported-interfaces-only --suppressions "$private_types"
        --headers-dir2 "$headers_dir" --drop-private-types)
report=$(abidiff "${common[@]}" --suppressions "$suppressions" "$baseline" "$library" 2>&1)
rc=$?
echo "abidiff (struct_size growth allowed): exit $rc"
if (( rc & 3 )); then
  echo "$report"
  echo "error: abidiff could not compare" >&2
  exit 2
fi
if (( rc != 0 )); then
  echo "$report"
  echo "ABI INCOMPATIBLE: changes beyond appending to struct_size structs / the function table" >&2
  failed=1
fi

# 2. No existing member may change, even in a struct that is allowed to grow.
raw=$(abidiff "${common[@]}" "$baseline" "$library" 2>&1)
raw_rc=$?
echo "abidiff (all changes): exit $raw_rc"
if (( raw_rc & 3 )); then
  echo "$raw"
  echo "error: abidiff could not compare" >&2
  exit 2
fi
if grep -Eq 'data member (change|deletion)|offset changed|member changes' <<<"$raw"; then
  echo "$raw"
  echo "ABI INCOMPATIBLE: an existing struct member changed type, offset or was removed" >&2
  failed=1
fi

# 3. Every pinned constant keeps its value; the version numbers of a minor release may move, new constants
#    may appear, and experimental values (1000+) may change.
constant_errors=$(header_constants "$header" | awk '
  NR == FNR { base[$1] = substr($0, length($1) + 2); next }
  { now[$1] = substr($0, length($1) + 2) }
  END {
    for (name in base) {
      if (name ~ /^FP8MOE_VERSION_(MAJOR|MINOR|PATCH)$/ || name == "FP8MOE_ABI_VERSION_MINOR") continue
      # Enum-like values 1000+ are experimental (docs/ABI.md): they may change or go between minors.
      if (name ~ /^FP8MOE_(ROUTING|QUANT|ACTIVATION|GATE_UP|BACKEND|ARG)_/ && base[name] ~ /^[0-9]+$/ &&
          base[name] + 0 >= 1000) continue
      if (!(name in now)) print name " was removed (was " base[name] ")"
      else if (now[name] != base[name]) print name " changed from " base[name] " to " now[name]
    }
  }' "$constants_file" -)
if [[ -n "$constant_errors" ]]; then
  echo "$constant_errors"
  echo "ABI INCOMPATIBLE: pinned constants of $header changed" >&2
  failed=1
fi

if (( failed )); then
  exit 1
fi
echo "ABI compatible with $baseline"
exit 0
