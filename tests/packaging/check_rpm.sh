#!/usr/bin/env bash
# check_rpm.sh BUILD_DIR SOURCE_DIR WORK_DIR CC CPACK VERSION SOVERSION EXPECT_INFO_TOOL
# Builds the .rpm packages with cpack (libfp8moe<major>, fp8moe-tools, fp8moe-devel), checks their exact file
# lists (the library in /usr/lib64 on 64-bit; the runtime package holds only the versioned library and its doc
# directory), Requires/Provides/Suggests and ldconfig scriptlets, runs rpmlint, extracts all (rpm2cpio | cpio)
# into a temporary root, builds a host against it with pkg-config and runs one CPU MoE layer through the
# library dlopened by SONAME from that root.
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 cpack=$5 version=$6 soversion=$7 expect_info=$8
# shellcheck source=tests/packaging/common.sh
source "$src/tests/packaging/common.sh"
require_tools rpmbuild rpm rpm2cpio cpio readelf pkg-config rpmlint

rm -rf "$work"
mkdir -p "$work"
run_logged "$work/cpack.log" "$cpack" -G RPM --config "$build/CPackConfig.cmake" -B "$work/packages"

libdir=/usr/lib
[[ "$(getconf LONG_BIT)" == 64 ]] && libdir=/usr/lib64
runtime_name="libfp8moe$soversion"
runtime_rpm=$(find_one "$work/packages" "$runtime_name-$version-*.rpm" 1)
dev_rpm=$(find_one "$work/packages" "fp8moe-devel-$version-*.rpm" 1)
rpms=("$runtime_rpm" "$dev_rpm")
if [[ "$expect_info" == 1 ]]; then
  tools_rpm=$(find_one "$work/packages" "fp8moe-tools-$version-*.rpm" 1)
  rpms+=("$tools_rpm")
fi
q() { rpm -qp --nosignature "$@" 2>/dev/null; }
for pkg in "${rpms[@]}"; do
  echo "== $(basename "$pkg") ($(stat -c %s "$pkg") bytes)"
  echo "-- Requires:"; q -R "$pkg"
  echo "-- Suggests:"; q --suggests "$pkg"
done

# ---- metadata ----
[[ "$(q --qf '%{NAME}' "$runtime_rpm")" == "$runtime_name" ]] || fail "runtime package name"
[[ "$(q --qf '%{NAME}' "$dev_rpm")" == fp8moe-devel ]] || fail "devel package name"
runtime_evr=$(q --qf '%{VERSION}-%{RELEASE}' "$runtime_rpm")
[[ "$runtime_evr" == "$version"-* ]] || fail "runtime version $runtime_evr does not come from $version"
runtime_requires=$(q -R "$runtime_rpm")
expect_line "$runtime_requires" '^libc\.so\.6' "$runtime_name Requires"
reject_line "$runtime_requires" 'cuda|nvidia|cublas' "$runtime_name Requires (CUDA is optional)"
expect_line "$(q --suggests "$runtime_rpm")" 'cuda' "$runtime_name Suggests (weak dependency)"
expect_line "$(q --provides "$runtime_rpm")" "^libfp8moe\.so\.$soversion\(\)" "$runtime_name Provides its SONAME"
expect_line "$(q -R "$dev_rpm")" "^$runtime_name = $runtime_evr$" "fp8moe-devel Requires the exact runtime"
scripts=$(q --scripts "$runtime_rpm")
expect_line "$scripts" '^postinstall scriptlet' "$runtime_name %post"
expect_line "$scripts" '^postuninstall scriptlet' "$runtime_name %postun"
[[ $(grep -c '^/sbin/ldconfig$' <<<"$scripts") == 2 ]] || { echo "$scripts"; fail "$runtime_name: ldconfig in %post and %postun"; }
expect_line "$(q --changelog "$runtime_rpm")" "- $version-" "$runtime_name %changelog"
[[ -n "$(q --qf '%{URL}' "$runtime_rpm")" && "$(q --qf '%{PACKAGER}' "$runtime_rpm")" != "(none)" ]] ||
  fail "$runtime_name: URL and Packager"
[[ "$(q --qf '%{GROUP}' "$dev_rpm")" == Development/* ]] || fail "fp8moe-devel: Group $(q --qf '%{GROUP}' "$dev_rpm")"
if [[ "$expect_info" == 1 ]]; then
  expect_line "$(q -R "$tools_rpm")" "^$runtime_name >= $version$" "fp8moe-tools Requires the library it dlopens"
fi

# ---- file lists: exactly these files (directories excluded) ----
files_of() { q --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$1" | sed -n 's/^[^d][^ ]* //p'; }
runtime_files=$(files_of "$runtime_rpm")
dev_files=$(files_of "$dev_rpm")
echo "$runtime_files"
echo "$dev_files"
only_files "$runtime_files" "$runtime_name" \
  "^$libdir/libfp8moe\.so\.$soversion$" "^$libdir/libfp8moe\.so\.$version$" \
  "^/usr/share/doc/$runtime_name/(LICENSE|CHANGELOG\.md)$"
only_files "$dev_files" "fp8moe-devel" \
  '^/usr/include/fp8moe/fp8moe\.h$' "^$libdir/libfp8moe\.so$" "^$libdir/pkgconfig/fp8moe\.pc$" \
  "^$libdir/cmake/fp8moe/fp8moeConfig(Version)?\.cmake$" '^/usr/share/fp8moe/plugin\.def$' \
  '^/usr/share/doc/fp8moe-devel/LICENSE$'
while read -r path; do
  [[ "$path" == *"libfp8moe.so.$soversion"* || "$path" == *"/doc/$runtime_name/"* ]] ||
    fail "$runtime_name ships $path, which a libfp8moe of another ABI major would also ship"
done <<<"$runtime_files"
if [[ "$expect_info" == 1 ]]; then
  tools_files=$(files_of "$tools_rpm")
  echo "$tools_files"
  only_files "$tools_files" "fp8moe-tools" '^/usr/bin/fp8moe-info$' '^/usr/share/man/man1/fp8moe-info\.1\.gz$' \
    '^/usr/share/doc/fp8moe-tools/LICENSE$'
fi
# The packages own only their own directories; /usr/lib64, pkgconfig/, cmake/, … belong to the distribution.
directories=$(q --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "${rpms[@]}" | sed -n 's/^d[^ ]* //p')
echo "directories owned: $(tr "\n" " " <<<"$directories")"
while read -r dir; do
  [[ -z "$dir" || "$dir" == */fp8moe || "$dir" == /usr/share/doc/* ]] || fail "the packages claim the system directory $dir"
done <<<"$directories"

# ---- rpmlint (the project's settings: packaging/rpm/rpmlint.toml): errors and warnings only from the list in
# docs/PACKAGING.md ----
rpmlint_out=$(rpmlint -c "$src/packaging/rpm/rpmlint.toml" "${rpms[@]}" 2>&1 || true)
lint_verdict rpmlint "$rpmlint_out" no-signature requires-on-release one-line-command-in-%post \
  one-line-command-in-%postun no-major-in-name no-manual-page-for-binary

# ---- extract into a temporary root ----
root="$work/root"
mkdir -p "$root"
for pkg in "${rpms[@]}"; do
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
