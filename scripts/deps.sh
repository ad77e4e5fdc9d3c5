#!/usr/bin/env bash
# Installs what fp8moe's build, tests and packaging need, from Debian's packages, when missing.
# The CUDA toolkit is optional: without nvcc the library builds with the CPU backend only.
set -euo pipefail

# lintian, rpmlint: the packaging tests lint the .deb/.rpm; devscripts: hardening-check, a second opinion in the
# hardening test.
packages=(build-essential cmake pkg-config python3 file binutils
          dpkg-dev rpm rpm2cpio cpio abigail-tools lintian rpmlint devscripts)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
