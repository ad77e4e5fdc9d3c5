#!/usr/bin/env bash
# check_deb.sh BUILD_DIR SOURCE_DIR WORK_DIR CC CMAKE CPACK VERSION SOVERSION EXPECT_INFO_TOOL
# Builds the .deb packages with cpack, checks their file lists and control data, installs both into a
# temporary root (dpkg -x), builds a host against that root with pkg-config and with find_package(fp8moe),
# and runs one CPU MoE layer through the library dlopened by SONAME from the root.
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 cmake=$5 cpack=$6 version=$7 soversion=$8 expect_info=$9
# shellcheck source=tests/packaging/common.sh
source "$src/tests/packaging/common.sh"
require_tools dpkg-deb dpkg-shlibdeps file readelf pkg-config

rm -rf "$work"
mkdir -p "$work"
run_logged "$work/cpack.log" "$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work/packages"

runtime_name="libfp8moe$soversion"
runtime_deb=$(find_one "$work/packages" "${runtime_name}_*.deb" 1)
dev_deb=$(find_one "$work/packages" "libfp8moe-dev_*.deb" 1)
for deb in "$runtime_deb" "$dev_deb"; do
  echo "== $(basename "$deb") ($(stat -c %s "$deb") bytes)"
  dpkg-deb -f "$deb" Package Version Architecture Depends Suggests Section
done

# ---- control data ----
runtime_version=$(dpkg-deb -f "$runtime_deb" Version)
[[ "$(dpkg-deb -f "$runtime_deb" Package)" == "$runtime_name" ]] || fail "runtime package name"
[[ "$runtime_version" == "$version" || "$runtime_version" == "$version"-* ]] ||
  fail "runtime version $runtime_version does not come from the project version $version"
runtime_depends=$(dpkg-deb -f "$runtime_deb" Depends | tr ',' '\n' | sed 's/^ *//')
expect_line "$runtime_depends" '^libc6( |$)' "$runtime_name Depends"
reject_line "$runtime_depends" 'cuda|nvidia|cublas' "$runtime_name Depends (CUDA is optional)"
expect_line "$(dpkg-deb -f "$runtime_deb" Suggests)" 'cuda' "$runtime_name Suggests"
[[ "$(dpkg-deb -f "$dev_deb" Package)" == "libfp8moe-dev" ]] || fail "dev package name"
[[ "$(dpkg-deb -f "$dev_deb" Version)" == "$runtime_version" ]] || fail "dev and runtime versions differ"
[[ "$(dpkg-deb -f "$dev_deb" Depends)" == "$runtime_name (= $runtime_version)" ]] ||
  fail "dev Depends '$(dpkg-deb -f "$dev_deb" Depends)', want '$runtime_name (= $runtime_version)'"
control_files=$(dpkg-deb --ctrl-tarfile "$runtime_deb" | tar -tf -)
expect_line "$control_files" 'shlibs$' "runtime control files (shlibs for packages linking it)"

# ---- file lists ----
runtime_files=$(dpkg-deb -c "$runtime_deb")
dev_files=$(dpkg-deb -c "$dev_deb")
echo "$runtime_files"
echo "$dev_files"
expect_line "$runtime_files" "/lib/(.*/)?libfp8moe\.so\.$soversion -> libfp8moe\.so\.$version$" "runtime: SONAME link"
expect_line "$runtime_files" "^-.* \./usr/lib/(.*/)?libfp8moe\.so\.$version$" "runtime: library"
expect_line "$runtime_files" '/share/doc/.*/LICENSE$' "runtime: license"
expect_line "$runtime_files" '/share/doc/.*/CHANGELOG\.md$' "runtime: changelog"
[[ "$expect_info" == 1 ]] && expect_line "$runtime_files" '^-.* \./usr/bin/fp8moe-info$' "runtime: fp8moe-info"
reject_line "$runtime_files" '/include/|libfp8moe\.so -> |\.pc$|\.cmake$' "runtime: development files"
expect_line "$dev_files" '^-.* \./usr/include/fp8moe/fp8moe\.h$' "dev: header"
expect_line "$dev_files" "/lib/(.*/)?libfp8moe\.so -> libfp8moe\.so\.$soversion$" "dev: namelink"
expect_line "$dev_files" '/lib/(.*/)?pkgconfig/fp8moe\.pc$' "dev: pkg-config file"
expect_line "$dev_files" '/lib/(.*/)?cmake/fp8moe/fp8moeConfig\.cmake$' "dev: CMake package"
expect_line "$dev_files" '/lib/(.*/)?cmake/fp8moe/fp8moeConfigVersion\.cmake$' "dev: CMake version file"
expect_line "$dev_files" '/share/fp8moe/plugin\.def$' "dev: plugin.def"
reject_line "$dev_files" '\./[^ ]*libfp8moe\.so\.[0-9][^ ]*( -> .*)?$|/bin/' "dev: runtime files"

# ---- install into a temporary root ----
root="$work/root"
mkdir -p "$root"
dpkg -x "$runtime_deb" "$root"
dpkg -x "$dev_deb" "$root"
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
