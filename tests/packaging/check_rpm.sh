#!/usr/bin/env bash
# check_rpm.sh BUILD_DIR SOURCE_DIR WORK_DIR CC CPACK VERSION SOVERSION EXPECT_INFO_TOOL
# Builds the .rpm packages with cpack, checks their file lists, Requires/Provides/Suggests, extracts both
# (rpm2cpio | cpio) into a temporary root, builds a host against it with pkg-config and runs one CPU MoE
# layer through the library dlopened by SONAME from that root.
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 cpack=$5 version=$6 soversion=$7 expect_info=$8
# shellcheck source=tests/packaging/common.sh
source "$src/tests/packaging/common.sh"
require_tools rpmbuild rpm rpm2cpio cpio readelf pkg-config

rm -rf "$work"
mkdir -p "$work"
run_logged "$work/cpack.log" "$cpack" -G RPM --config "$build/CPackConfig.cmake" -B "$work/packages"

runtime_rpm=$(find_one "$work/packages" "fp8moe-$version-*.rpm" 1)
dev_rpm=$(find_one "$work/packages" "fp8moe-devel-$version-*.rpm" 1)
q() { rpm -qp --nosignature "$@" 2>/dev/null; }
for pkg in "$runtime_rpm" "$dev_rpm"; do
  echo "== $(basename "$pkg") ($(stat -c %s "$pkg") bytes)"
  echo "-- Requires:"; q -R "$pkg"
  echo "-- Suggests:"; q --suggests "$pkg"
done

# ---- metadata ----
[[ "$(q --qf '%{NAME}' "$runtime_rpm")" == fp8moe ]] || fail "runtime package name"
[[ "$(q --qf '%{NAME}' "$dev_rpm")" == fp8moe-devel ]] || fail "devel package name"
runtime_evr=$(q --qf '%{VERSION}-%{RELEASE}' "$runtime_rpm")
[[ "$runtime_evr" == "$version"-* ]] || fail "runtime version $runtime_evr does not come from $version"
runtime_requires=$(q -R "$runtime_rpm")
expect_line "$runtime_requires" '^libc\.so\.6' "fp8moe Requires"
reject_line "$runtime_requires" 'cuda|nvidia|cublas' "fp8moe Requires (CUDA is optional)"
expect_line "$(q --suggests "$runtime_rpm")" 'cuda' "fp8moe Suggests (weak dependency)"
expect_line "$(q --provides "$runtime_rpm")" "^libfp8moe\.so\.$soversion\(\)" "fp8moe Provides its SONAME"
expect_line "$(q -R "$dev_rpm")" "^fp8moe = $runtime_evr$" "fp8moe-devel Requires the exact runtime"

# ---- file lists ----
runtime_files=$(q -l "$runtime_rpm")
dev_files=$(q -l "$dev_rpm")
echo "$runtime_files"
echo "$dev_files"
expect_line "$runtime_files" "^/usr/lib[^/]*/(.*/)?libfp8moe\.so\.$soversion$" "fp8moe: SONAME link"
expect_line "$runtime_files" "^/usr/lib[^/]*/(.*/)?libfp8moe\.so\.$version$" "fp8moe: library"
expect_line "$runtime_files" '/share/doc/.*/LICENSE$' "fp8moe: license"
expect_line "$runtime_files" '/share/doc/.*/CHANGELOG\.md$' "fp8moe: changelog"
[[ "$expect_info" == 1 ]] && expect_line "$runtime_files" '^/usr/bin/fp8moe-info$' "fp8moe: fp8moe-info"
reject_line "$runtime_files" '/include|libfp8moe\.so$|\.pc$|\.cmake$' "fp8moe: development files"
expect_line "$dev_files" '^/usr/include/fp8moe/fp8moe\.h$' "fp8moe-devel: header"
expect_line "$dev_files" '/libfp8moe\.so$' "fp8moe-devel: namelink"
expect_line "$dev_files" '/pkgconfig/fp8moe\.pc$' "fp8moe-devel: pkg-config file"
expect_line "$dev_files" '/cmake/fp8moe/fp8moeConfig\.cmake$' "fp8moe-devel: CMake package"
expect_line "$dev_files" '/cmake/fp8moe/fp8moeConfigVersion\.cmake$' "fp8moe-devel: CMake version file"
expect_line "$dev_files" '/share/fp8moe/plugin\.def$' "fp8moe-devel: plugin.def"
reject_line "$dev_files" 'libfp8moe\.so\.[0-9]|/bin/' "fp8moe-devel: runtime files"
# The packages own only their own directories; /usr/lib, pkgconfig/, cmake/, … belong to the distribution.
directories=$(q --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$runtime_rpm" "$dev_rpm" | sed -n 's/^d[^ ]* //p')
echo "directories owned: $(tr "\n" " " <<<"$directories")"
while read -r dir; do
  [[ -z "$dir" || "$dir" == */fp8moe ]] || fail "the packages claim the system directory $dir"
done <<<"$directories"

# ---- extract into a temporary root ----
root="$work/root"
mkdir -p "$root"
for pkg in "$runtime_rpm" "$dev_rpm"; do
  (cd "$root" && rpm2cpio "$pkg" | cpio -idm --quiet) || fail "extracting $pkg"
done
cmp "$root/usr/include/fp8moe/fp8moe.h" "$src/abi/fp8moe.h" || fail "installed header differs from abi/fp8moe.h"
library=$(find_one "$root" "libfp8moe.so.$version")
libdir=$(dirname "$library")
[[ -L "$libdir/libfp8moe.so.$soversion" ]] || fail "no SONAME link next to $library"
check_needed "$library"

build_pkgconfig_host "$root" "$cc" "$src" "$work/host_pkgconfig"
run_host "$work/host_pkgconfig" "$libdir" "$root"
echo "packaging_rpm: all checks passed"
