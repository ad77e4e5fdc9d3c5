#!/usr/bin/env bash
# Builds the .deb and .rpm packages from one build, each with its distribution's layout (packaging/CMakeLists.txt
# has the table; docs/PACKAGING.md the details), then runs lintian and rpmlint on them.
#   bash scripts/package.sh [OUT_DIR]      (default: build/packages)
# Uses the default build (scripts/build-config.sh), so after scripts/setup-and-run.sh only packaging is left.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/build-config.sh
source scripts/build-config.sh
out=${1:-$FP8MOE_BUILD_DIR/packages}

bash scripts/deps.sh
rm -rf "$out"
mkdir -p "$(dirname "$out")"
{ fp8moe_configure_default_build && cmake --build "$FP8MOE_BUILD_DIR" -j"$(nproc)" --target fp8moe fp8moe-info; } \
  > "$out.build.log" 2>&1 || { tail -n 60 "$out.build.log"; echo "build failed (log: $out.build.log)" >&2; exit 1; }
cpack --config "$FP8MOE_BUILD_DIR/CPackConfig.cmake" -G "DEB;RPM" -B "$out" > "$out.log" 2>&1 ||
  { cat "$out.log"; echo "cpack failed (log: $out.log)" >&2; exit 1; }
rm -rf "$out/_CPack_Packages"

echo "== packages in $out"
for deb in "$out"/*.deb; do
  echo "$(basename "$deb")"
  dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {print "    " substr($6, 2) ($7 ? " " $7 " " $8 : "")}'
done
for rpm in "$out"/*.rpm; do
  echo "$(basename "$rpm")"
  rpm -qp --nosignature --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpm" 2>/dev/null | sed -n 's/^[^d][^ ]* /    /p'
done

if command -v lintian > /dev/null; then
  echo "== lintian"
  lintian --pedantic "$out"/*.deb 2>&1 | grep -v 'running with root privileges' || echo "(no findings)"
fi
if command -v rpmlint > /dev/null; then
  echo "== rpmlint"
  rpmlint -c packaging/rpm/rpmlint.toml "$out"/*.rpm 2>&1 | grep -E '^[^ ]+: [EW]: |packages and' || true
fi
echo "docs/PACKAGING.md explains each remaining lintian/rpmlint warning."
