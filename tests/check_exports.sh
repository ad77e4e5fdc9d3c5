#!/bin/sh
# check_exports.sh LIBRARY DEF_FILE [SONAME] — the export set of a built plugin must equal the EXPORTS of
# DEF_FILE (parsed here, never hard-coded); with SONAME, the library's DT_SONAME must be it and it must not
# need libcuda/libcudart/libcublas* (those are found at CUDA backend init, so the library loads without
# them). Tools: $NM (default nm) and $READELF (default readelf).
# Prints one line per problem, then "N passed, M failed"; exits non-zero on any failure.
set -u
lib=$1
def=$2
soname=${3:-}
NM=${NM:-nm}
READELF=${READELF:-readelf}
passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "$*"; }

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# EXPORTS section of the .def file: names after the EXPORTS line, ';' comments and blank lines skipped,
# ordinals/attributes (@1, NONAME, DATA) dropped.
awk '
  { sub(/;.*/, "") }
  /^[ \t]*(LIBRARY|NAME|DESCRIPTION|STACKSIZE|HEAPSIZE|SECTIONS|VERSION|IMPORTS)([ \t]|$)/ { in_exports = 0; next }
  /^[ \t]*EXPORTS([ \t]|$)/ { in_exports = 1; sub(/^[ \t]*EXPORTS/, ""); if (!NF) next }
  in_exports && NF { print $1 }
' "$def" | sed 's/[=@].*//' | sort -u >"$tmp/expected"
if [ -s "$tmp/expected" ]; then pass; else fail "no EXPORTS parsed from $def"; fi

# Defined dynamic symbols. Version-node names (type A) are not code; the linker's own section markers
# appear in every shared object linked without a version script and are not ours either.
if ! "$NM" -D --defined-only "$lib" >"$tmp/nm" 2>"$tmp/nm.err"; then
  fail "$NM -D failed on $lib: $(cat "$tmp/nm.err")"
fi
awk 'NF >= 2 { name = $NF; type = $(NF - 1); sub(/@.*/, "", name);
       if (type == "A") next;
       if (name ~ /^(_init|_fini|_edata|_end|__bss_start)$/) next;
       print type, name }' "$tmp/nm" | sort -u -k2 >"$tmp/defined"
awk '$1 ~ /^[TtWi]$/ { print $2 }' "$tmp/defined" | sort -u >"$tmp/functions"
awk '$1 !~ /^[TtWi]$/ { print $2 }' "$tmp/defined" | sort -u >"$tmp/data"

for name in $(comm -13 "$tmp/expected" "$tmp/functions"); do fail "extra export: $name"; done
for name in $(comm -23 "$tmp/expected" "$tmp/functions"); do fail "missing export: $name"; done
if cmp -s "$tmp/expected" "$tmp/functions"; then pass; fi
for name in $(cat "$tmp/data"); do fail "extra export (data): $name"; done
if [ ! -s "$tmp/data" ]; then pass; fi

if [ -n "$soname" ]; then
  "$READELF" -d "$lib" >"$tmp/dyn" 2>&1 || fail "$READELF -d failed on $lib"
  got=$(sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p' "$tmp/dyn")
  if [ "$got" = "$soname" ]; then pass; else fail "SONAME is '$got', expected '$soname'"; fi
  cuda_needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\].*/\1/p' "$tmp/dyn" | grep -E '^lib(cuda|cudart|cublas[A-Za-z]*)\.so' || true)
  if [ -z "$cuda_needed" ]; then pass; else fail "NEEDED on CUDA libraries: $cuda_needed"; fi
fi

echo "check_exports $(basename "$lib"): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
