#!/usr/bin/env bash
# check_deb.sh BUILD_DIR SOURCE_DIR WORK_DIR CC CMAKE CPACK VERSION SOVERSION EXPECT_INFO_TOOL
# Builds the .deb packages with cpack (libfp8moe<major>, fp8moe-tools, libfp8moe-dev), checks their control data
# and exact file lists (Debian's multiarch libdir; the runtime package holds only the versioned library and its
# doc directory, so two ABI majors install side by side), runs lintian, installs all into a temporary root
# (dpkg -x), builds a host against that root with pkg-config and with find_package(fp8moe), and runs one CPU
# MoE layer through the library dlopened by SONAME from the root.
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 cmake=$5 cpack=$6 version=$7 soversion=$8 expect_info=$9
# shellcheck source=tests/packaging/common.sh
source "$src/tests/packaging/common.sh"
require_tools dpkg-deb dpkg-shlibdeps dpkg-architecture file readelf pkg-config lintian

rm -rf "$work"
mkdir -p "$work"
run_logged "$work/cpack.log" "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/packages"

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir_re="\./usr/lib/$multiarch"
runtime_name="libfp8moe$soversion"
runtime_deb=$(find_one "$work/packages" "${runtime_name}_*.deb" 1)
dev_deb=$(find_one "$work/packages" "libfp8moe-dev_*.deb" 1)
debs=("$runtime_deb" "$dev_deb")
if [[ "$expect_info" == 1 ]]; then
  tools_deb=$(find_one "$work/packages" "fp8moe-tools_*.deb" 1)
  debs+=("$tools_deb")
fi
for deb in "${debs[@]}"; do
  echo "== $(basename "$deb") ($(stat -c %s "$deb") bytes)"
  dpkg-deb -f "$deb" Package Version Architecture Depends Suggests Section
done

# ---- control data ----
runtime_version=$(dpkg-deb -f "$runtime_deb" Version)
[[ "$(dpkg-deb -f "$runtime_deb" Package)" == "$runtime_name" ]] || fail "runtime package name"
[[ "$runtime_version" == "$version" || "$runtime_version" == "$version"-* ]] ||
  fail "runtime version $runtime_version does not come from the project version $version"
runtime_depends=$(dpkg-deb -f "$runtime_deb" Depends | tr ',' '\n' | sed 's/^ *//')
expect_line "$runtime_depends" '^libc6 \(>= [0-9.]+\)$' "$runtime_name Depends (from dpkg-shlibdeps)"
reject_line "$runtime_depends" 'cuda|nvidia|cublas' "$runtime_name Depends (CUDA is optional)"
expect_line "$(dpkg-deb -f "$runtime_deb" Suggests)" 'cuda' "$runtime_name Suggests"
[[ "$(dpkg-deb -f "$dev_deb" Package)" == "libfp8moe-dev" ]] || fail "dev package name"
[[ "$(dpkg-deb -f "$dev_deb" Version)" == "$runtime_version" ]] || fail "dev and runtime versions differ"
[[ "$(dpkg-deb -f "$dev_deb" Depends)" == "$runtime_name (= $runtime_version)" ]] ||
  fail "dev Depends '$(dpkg-deb -f "$dev_deb" Depends)', want '$runtime_name (= $runtime_version)'"
if [[ "$expect_info" == 1 ]]; then
  expect_line "$(dpkg-deb -f "$tools_deb" Depends | tr ',' '\n' | sed 's/^ *//')" \
    "^$runtime_name \(>= $version\)$" "fp8moe-tools Depends on the library it dlopens"
fi
# The ldconfig trigger, not maintainer scripts calling ldconfig; a shlibs file for packages that link it.
control_files=$(dpkg-deb --ctrl-tarfile "$runtime_deb" | tar -tf - | sed 's|^\./||' | sort | tr '\n' ' ')
[[ "$control_files" == "control md5sums shlibs triggers " ]] ||
  fail "runtime control files: '$control_files', want 'control md5sums shlibs triggers'"
[[ "$(dpkg-deb --info "$runtime_deb" triggers)" == "activate-noawait ldconfig" ]] || fail "runtime triggers"
expect_line "$(dpkg-deb --info "$runtime_deb" shlibs)" "^libfp8moe $soversion $runtime_name \(>= $version\)$" \
  "runtime shlibs"

# ---- file lists: exactly these files ----
files_of() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ {print $6 ($7 ? " " $7 " " $8 : "")}'; }
runtime_files=$(files_of "$runtime_deb")
dev_files=$(files_of "$dev_deb")
echo "$runtime_files"
echo "$dev_files"
doc_re() { echo "^\./usr/share/doc/$1/(copyright|changelog\.Debian\.gz${2:+|$2})$"; }
only_files "$runtime_files" "$runtime_name" \
  "^$libdir_re/libfp8moe\.so\.$soversion -> libfp8moe\.so\.$version$" \
  "^$libdir_re/libfp8moe\.so\.$version$" \
  "$(doc_re "$runtime_name" 'changelog\.gz')"
only_files "$dev_files" "libfp8moe-dev" \
  '^\./usr/include/fp8moe/fp8moe\.h$' \
  "^$libdir_re/libfp8moe\.so -> libfp8moe\.so\.$soversion$" \
  "^$libdir_re/pkgconfig/fp8moe\.pc$" \
  "^$libdir_re/cmake/fp8moe/fp8moeConfig(Version)?\.cmake$" \
  '^\./usr/share/fp8moe/plugin\.def$' \
  "$(doc_re libfp8moe-dev)"
# Side by side: every runtime path names the ABI major (the SONAME or the package's own doc directory).
while read -r path; do
  [[ "$path" == *"libfp8moe.so.$soversion"* || "$path" == *"/doc/$runtime_name/"* ]] ||
    fail "$runtime_name ships $path, which a libfp8moe of another ABI major would also ship"
done <<<"$runtime_files"
[[ "$(dpkg-deb -c "$runtime_deb" | awk -v f="./usr/lib/$multiarch/libfp8moe.so.$version" '$6 == f {print $1}')" == \
   "-rw-r--r--" ]] || fail "the shared library must be mode 0644 (Debian policy 8.1)"
if [[ "$expect_info" == 1 ]]; then
  tools_files=$(files_of "$tools_deb")
  echo "$tools_files"
  only_files "$tools_files" "fp8moe-tools" '^\./usr/bin/fp8moe-info$' \
    '^\./usr/share/man/man1/fp8moe-info\.1\.gz$' "$(doc_re fp8moe-tools)"
fi

# ---- lintian: errors and warnings only from the list in docs/PACKAGING.md ----
lintian_out=$(lintian --pedantic "${debs[@]}" 2>&1 | grep -v 'running with root privileges' || true)
lint_verdict lintian "$lintian_out" initial-upload-closes-no-bugs

# ---- install into a temporary root ----
root="$work/root"
mkdir -p "$root"
for deb in "${debs[@]}"; do
  dpkg -x "$deb" "$root"
done
cmp "$root/usr/include/fp8moe/fp8moe.h" "$src/abi/fp8moe.h" || fail "installed header differs from abi/fp8moe.h"
library=$(find_one "$root" "libfp8moe.so.$version")
libdir=$(dirname "$library")
check_needed "$library"

# pkg-config host
build_pkgconfig_host "$root" "$cc" "$src" "$work/host_pkgconfig"
run_host "$work/host_pkgconfig" "$libdir" "$root"

# find_package host
run_logged "$work/consumer-configure.log" "$cmake" -S "$src/tests/packaging/consumer" -B "$work/consumer" \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$root/usr" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
grep 'fp8moe ' "$work/consumer-configure.log" || true
run_logged "$work/consumer-build.log" "$cmake" --build "$work/consumer"
run_host "$work/consumer/fp8moe_consumer_host" "$libdir" "$root"

if [[ "$expect_info" == 1 ]]; then
  info=$(LD_LIBRARY_PATH="$libdir" "$root/usr/bin/fp8moe-info" 2>&1) || { echo "$info" >&2; fail "fp8moe-info"; }
  head -n 8 <<<"$info"
  expect_line "$info" "path: $(realpath "$root")/" "the packaged fp8moe-info must load the packaged library"
fi
echo "packaging_deb: all checks passed"
