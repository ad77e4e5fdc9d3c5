#!/usr/bin/env bash
# check_hardening.sh check ELF...        checks the hardening of built ELF files (libraries and executables)
# check_hardening.sh selftest CC WORK    proves the check can fail: a library built without the flags must be
#                                        refused on every property, one built with them must pass
#
# What is checked (readelf, binutils), the properties cmake/hardening.cmake asks for:
#   relro      a GNU_RELRO segment                                 (-z relro)
#   bindnow    BIND_NOW in DT_FLAGS or NOW in DT_FLAGS_1           (-z now; with relro: full RELRO)
#   noexecstack  a PT_GNU_STACK segment without the E flag         (-z noexecstack)
#   stackprot  imports __stack_chk_fail                            (-fstack-protector-strong)
#   fortify    imports at least one glibc __*_chk function         (-D_FORTIFY_SOURCE=2 with -O1+)
#   cet        x86-64, libraries: every exported function starts with endbr64 (-fcf-protection=full). The GNU
#              property note (IBT, SHSTK) is only reported: the linker drops it when any linked object lacks it
#              (Debian's crt files, the static CUDA runtime), although our own code has the landing pads
#   pie        executables only: ET_DYN with DF_1_PIE
# When devscripts' hardening-check is installed, its verdict is printed as a second opinion and must agree.
set -euo pipefail

fail_count=0
report() { # report NAME OK DETAIL
  if [[ "$2" == 1 ]]; then
    printf '  %-12s yes  %s\n' "$1" "$3"
  else
    printf '  %-12s NO   %s\n' "$1" "$3"
    fail_count=$((fail_count + 1))
  fi
}

check_one() {
  local elf=$1
  local header program dynamic dynsyms notes
  header=$(readelf -hW "$elf")
  program=$(readelf -lW "$elf")
  dynamic=$(readelf -dW "$elf")
  dynsyms=$(readelf --dyn-syms -W "$elf")
  notes=$(readelf -nW "$elf" 2>/dev/null || true)
  local is_exe=0
  grep -q '(FLAGS_1).*PIE' <<<"$dynamic" && is_exe=1
  grep -Eq 'Type:[[:space:]]+EXEC' <<<"$header" && is_exe=1
  echo "$elf ($([[ $is_exe == 1 ]] && echo executable || echo shared library))"

  local ok
  ok=0; grep -q 'GNU_RELRO' <<<"$program" && ok=1
  report relro $ok "GNU_RELRO segment"
  ok=0; grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' <<<"$dynamic" && ok=1
  report bindnow $ok "$(grep -E '\((FLAGS|FLAGS_1)\)' <<<"$dynamic" | awk '{$1=""; print}' | tr '\n' ';')"
  local stack
  stack=$(grep 'GNU_STACK' <<<"$program" | awk '{print $(NF-1)}' || true)
  ok=0; [[ -n "$stack" && "$stack" != *E* ]] && ok=1
  report noexecstack $ok "GNU_STACK flags '${stack:-missing}'"
  ok=0; grep -q ' UND __stack_chk_fail' <<<"$dynsyms" && ok=1
  report stackprot $ok "__stack_chk_fail imported"
  local chk
  chk=$(awk '$7 == "UND" {sub(/@.*/, "", $8); if ($8 ~ /^__[a-z0-9_]+_chk$/) print $8}' <<<"$dynsyms" |
        sort -u | tr '\n' ' ')
  ok=0; [[ -n "$chk" ]] && ok=1
  report fortify $ok "${chk:-no __*_chk imports}"
  if grep -Eq 'Machine:[[:space:]]+Advanced Micro Devices X86-64' <<<"$header"; then
    # Every exported function must start with an endbr64 landing pad.
    local property entries=0 pads=0 value
    property=$(grep -o 'x86 feature: .*' <<<"$notes" | head -n 1 || true)
    while read -r value; do
      entries=$((entries + 1))
      objdump -d --no-show-raw-insn --start-address=0x"$value" --stop-address=$((0x$value + 4)) "$elf" |
        grep -q 'endbr64' && pads=$((pads + 1))
    done < <(awk '$4 == "FUNC" && $7 != "UND" && $2 != "0000000000000000" {print $2}' <<<"$dynsyms")
    if ((entries)); then
      ok=0; ((pads == entries)) && ok=1
      report cet $ok "$pads of $entries exported functions start with endbr64; property note: ${property:-none}"
    else
      printf '  %-12s n/a  no exported functions; property note: %s\n' cet "${property:-none}"
    fi
  fi
  if [[ $is_exe == 1 ]]; then
    ok=0; grep -Eq 'Type:[[:space:]]+DYN' <<<"$header" && ok=1
    report pie $ok "$(grep -E 'Type:' <<<"$header" | sed 's/^ *//')"
  fi

  if command -v hardening-check >/dev/null 2>&1; then
    # Its CET test reads the property note, which the static CUDA runtime's objects remove (checked above).
    local hc rc=0
    hc=$(hardening-check --nocfprotection "$elf" 2>&1) || rc=$?
    sed 's/^/  hardening-check: /' <<<"$hc" | tail -n +2
    if [[ $rc != 0 ]]; then
      echo "  hardening-check: exit $rc"
      fail_count=$((fail_count + 1))
    fi
  fi
}

mode=${1:-}
case "$mode" in
  check)
    shift
    (($#)) || { echo "usage: $0 check ELF..." >&2; exit 2; }
    for elf in "$@"; do
      check_one "$elf"
    done
    if ((fail_count)); then
      echo "FAIL: $fail_count hardening properties missing" >&2
      exit 1
    fi
    echo "hardening: all properties present"
    ;;
  selftest)
    cc=$2 work=$3
    rm -rf "$work"
    mkdir -p "$work"
    # A function that copies into a stack array of unknown length: what the stack protector and FORTIFY guard.
    cat > "$work/victim.c" <<'EOF'
#include <stdio.h>
#include <string.h>
int victim(const char* s, char* out, size_t n);
int victim(const char* s, char* out, size_t n) {
  char buf[64];
  snprintf(buf, sizeof buf, "%s!", s);
  memcpy(out, buf, n);
  return (int)strlen(buf);
}
EOF
    "$cc" -O2 -fPIC -shared -fno-stack-protector -fcf-protection=none -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=0 \
      -Wl,-z,norelro -Wl,-z,lazy -Wl,-z,execstack "$work/victim.c" -o "$work/libweak.so"
    "$cc" -O2 -fPIC -shared -fstack-protector-strong -fcf-protection=full -U_FORTIFY_SOURCE -D_FORTIFY_SOURCE=2 \
      -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack "$work/victim.c" -o "$work/libstrong.so"
    rc=0
    out=$(bash "$0" check "$work/libweak.so" 2>&1) || rc=$?
    echo "$out"
    [[ $rc == 1 ]] || { echo "FAIL: the check passed a library built without hardening (exit $rc)" >&2; exit 1; }
    for property in relro bindnow noexecstack stackprot fortify; do
      grep -Eq "^  $property +NO " <<<"$out" ||
        { echo "FAIL: the unhardened library was not refused on $property" >&2; exit 1; }
    done
    if [[ "$(uname -m)" == x86_64 ]]; then
      grep -Eq '^  cet +NO ' <<<"$out" || { echo "FAIL: the unhardened library was not refused on cet" >&2; exit 1; }
    fi
    bash "$0" check "$work/libstrong.so" ||
      { echo "FAIL: the check refused a library built with every flag" >&2; exit 1; }
    echo "hardening selftest: the unhardened library is refused on every property, the hardened one passes"
    ;;
  *)
    echo "usage: $0 check ELF... | selftest CC WORK_DIR" >&2
    exit 2
    ;;
esac
