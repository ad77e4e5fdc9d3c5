# shellcheck shell=bash
# common.sh — helpers shared by the packaging tests (sourced, not run).
# Conventions: fail() ends the test with exit 1; a missing packaging tool ends it with 77 (CTest: skipped).

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# require_tools TOOL... : skip (77) when a packaging tool is missing, naming the Debian package to install.
require_tools() {
  local missing=()
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  if ((${#missing[@]})); then
    echo "SKIP: missing ${missing[*]} (bash scripts/deps.sh installs them)" >&2
    exit 77
  fi
}

# run_logged LOG CMD... : runs CMD with its output in LOG; on failure prints the log and fails.
run_logged() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "command failed: $*"
  fi
}

# expect_line TEXT REGEX WHAT : TEXT must have a line matching the extended REGEX.
expect_line() {
  grep -Eq -- "$2" <<<"$1" || { echo "$1" >&2; fail "$3: no line matches /$2/"; }
}

# reject_line TEXT REGEX WHAT : TEXT must not have a line matching the extended REGEX.
reject_line() {
  if grep -Eq -- "$2" <<<"$1"; then
    echo "$1" >&2
    fail "$3: unexpected line matching /$2/"
  fi
}

# check_needed LIBRARY : the library's load-time dependencies are glibc only; CUDA must stay optional.
check_needed() {
  local needed
  needed=$(readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  echo "NEEDED of $(basename "$1"): $(tr "\n" " " <<<"$needed")"
  reject_line "$needed" '^lib(cuda|cudart|cublas|cublasLt|nvidia|nvrtc)' "$1 DT_NEEDED (CUDA must be optional)"
  local lib
  for lib in $needed; do
    [[ "$lib" =~ ^(libc|libm|libdl|libpthread|librt)\.so\.[0-9]+$|^ld-linux ]] ||
      fail "$1 needs $lib at load time; only glibc is expected (update the package dependencies if intended)"
  done
}

# find_one DIR NAME [MAXDEPTH] : prints the single path under DIR named NAME, fails otherwise.
find_one() {
  local hits
  hits=$(find "$1" -maxdepth "${3:-64}" -name "$2")
  [[ -n "$hits" && $(wc -l <<<"$hits") -eq 1 ]] || fail "expected one $2 under $1, found: ${hits:-none}"
  echo "$hits"
}

# run_host HOST LIBDIR ROOT : runs a host built against an installed root with LD_LIBRARY_PATH=LIBDIR and
# checks that it loaded the library from ROOT and ran one layer.
run_host() {
  local out
  out=$(LD_LIBRARY_PATH="$2" "$1" 2>&1) || { echo "$out" >&2; fail "$1 failed"; }
  echo "$out"
  expect_line "$out" "^loaded $(realpath "$3")/" "$1 must load the library of the package root"
  expect_line "$out" '^ok$' "$1"
}

# build_pkgconfig_host ROOT CC SRC_DIR OUT : compiles tests/packaging/host.c with the flags the root's
# fp8moe.pc gives (pkg-config restricted to the root through PKG_CONFIG_SYSROOT_DIR/PKG_CONFIG_LIBDIR).
build_pkgconfig_host() {
  local root=$1 cc=$2 src=$3 out=$4
  local pc
  pc=$(find_one "$root" fp8moe.pc)
  local -x PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR
  PKG_CONFIG_LIBDIR=$(dirname "$pc")
  unset PKG_CONFIG_PATH
  local cflags libs soname version plugin
  cflags=$(pkg-config --cflags fp8moe) || fail "pkg-config --cflags fp8moe"
  libs=$(pkg-config --libs fp8moe) || fail "pkg-config --libs fp8moe"
  soname=$(pkg-config --variable=soname fp8moe)
  plugin=$(pkg-config --variable=plugin fp8moe)
  version=$(pkg-config --modversion fp8moe)
  echo "pkg-config: cflags '$cflags' libs '$libs' soname '$soname' version '$version' plugin '$plugin'"
  [[ -f "$plugin" && "$(basename "$plugin")" == "$soname" ]] || fail "pkg-config plugin=$plugin is not the installed $soname"
  pkg-config --exists 'fp8moe >= 1.0' || fail "pkg-config --exists 'fp8moe >= 1.0'"
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  "$cc" -std=c11 -O1 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes $cflags \
    "-DFP8MOE_SONAME=\"$soname\"" "-DFP8MOE_EXPECT_VERSION=\"$version\"" "$src/tests/packaging/host.c" \
    -o "$out" $libs -lm || fail "compiling host.c with pkg-config flags"
}

# only_files LISTING WHAT REGEX... : every file of a package listing (one path per line, directories excluded)
# must match one of the REGEXes, and each REGEX must match a file.
only_files() {
  local listing=$1 what=$2
  shift 2
  local path re matched
  while read -r path; do
    [[ -z "$path" ]] && continue
    matched=0
    for re in "$@"; do
      [[ "$path" =~ $re ]] && matched=1
    done
    ((matched)) || { echo "$listing" >&2; fail "$what: unexpected file $path"; }
  done <<<"$listing"
  for re in "$@"; do
    grep -Eq -- "$re" <<<"$listing" || { echo "$listing" >&2; fail "$what: no file matches /$re/"; }
  done
}

# lint_verdict TOOL OUTPUT ALLOWED_TAG... : prints the linter's findings with a count per severity and fails
# on any error or warning whose tag is not in the allowed list (docs/PACKAGING.md gives each one's reason).
# Lines look like "E: package: tag detail" (lintian) or "package.arch: W: tag detail" (rpmlint).
lint_verdict() {
  local tool=$1 output=$2
  shift 2
  local allowed=" $* " line severity tag bad=()
  local -A counts=([E]=0 [W]=0 [I]=0 [P]=0 [X]=0 [N]=0)
  while read -r line; do
    if [[ "$line" =~ ^([EWIPXN]):\ [^\ :]+:\ ([a-z0-9][^\ ]*) ]] || [[ "$line" =~ ^[^\ :]+:\ ([EWIPXN]):\ ([a-z0-9][^\ ]*) ]]; then
      severity=${BASH_REMATCH[1]} tag=${BASH_REMATCH[2]}
      counts[$severity]=$((counts[$severity] + 1))
      echo "  $line"
      if [[ "$severity" == E || "$severity" == W ]] && [[ "$allowed" != *" $tag "* ]]; then
        bad+=("$line")
      fi
    fi
  done <<<"$output"
  echo "$tool: ${counts[E]} errors, ${counts[W]} warnings, ${counts[I]} info, ${counts[P]} pedantic" \
       "(allowed, see docs/PACKAGING.md: ${*:-none})"
  if ((${#bad[@]})); then
    printf '%s\n' "${bad[@]}" >&2
    fail "$tool: ${#bad[@]} errors/warnings not in the documented list"
  fi
}
