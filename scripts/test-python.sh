#!/usr/bin/env bash
# The Python package's tests on the CPU: build libfp8moe.so.1 (CPU backend) and fp8moe-info, build the wheel
# (python/, scikit-build-core, the project's CMake; CPU backend so that CI stays fast), install it into a
# virtual environment with numpy, ml_dtypes, pytest and torch from PyPI, run the README's Python example, then
# pytest python/tests against the installed wheel (GPU tests skip without a GPU).
#
#   FP8MOE_PYTHON_TORCH=0 bash scripts/test-python.sh   # skip installing torch (its tests then skip)
#   FP8MOE_PYTHON_TORCH=1 bash scripts/test-python.sh   # torch is required: fail when it cannot be installed
#
# By default (auto) torch is installed when the disk has room for it: PyPI's Linux torch brings its CUDA
# libraries, ~5.5 GiB installed plus ~3.5 GiB of downloads while pip works. With less free space than
# torch_min_free_gib, or when its install fails, the script says so, removes what was half installed and goes
# on without torch (the torch tests then skip and pytest's -ra summary lists them); a CI run once failed
# with ENOSPC in the middle of that install. pip keeps no wheel cache here (PIP_NO_CACHE_DIR), which would
# otherwise hold a second copy of those downloads.
#
# Work files go to build-python/ (ignored). Exits non-zero when anything fails or when pytest ran no test.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="$root/build-python"
jobs="$(nproc)"
mkdir -p "$work"

echo "== library (CPU backend) =="
cmake -S . -B "$work/lib" -DCMAKE_BUILD_TYPE=Release -DFP8MOE_CUDA=OFF -DBUILD_TESTING=OFF >"$work/cmake.log"
cmake --build "$work/lib" -j"$jobs" --target fp8moe fp8moe-info >>"$work/cmake.log"
library="$work/lib/src/libfp8moe.so.1"
test -f "$library"

echo "== virtual environment =="
venv="$work/venv"
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>"$work/venv.log"; then
    # Debian's python3 ships venv/ensurepip separately.
    rm -rf "$venv"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends python3-venv
    python3 -m venv "$venv"
  fi
fi
py="$venv/bin/python"
export PIP_NO_CACHE_DIR=1
"$py" -m pip install -q --disable-pip-version-check numpy ml_dtypes pytest

torch_mode="${FP8MOE_PYTHON_TORCH:-auto}"
torch_min_free_gib="${FP8MOE_TORCH_MIN_FREE_GIB:-10}"
free_gib() { df -Pk "$work" | awk 'NR == 2 { printf "%d", $4 / 1048576 }'; }
# pip leaves a half-installed torch (and its nvidia-* libraries) behind when it fails part way.
remove_partial_torch() {
  "$py" -m pip list --format=freeze 2>/dev/null | sed -n 's/^\(torch\|triton\|nvidia-[^=]*\)==.*/\1/p' |
    xargs -r "$py" -m pip uninstall -q -y >/dev/null 2>&1 || true
}
case "$torch_mode" in
  0) echo "torch: not installed (FP8MOE_PYTHON_TORCH=0); its tests skip" ;;
  1|auto)
    if "$py" -c 'import torch' 2>/dev/null; then
      echo "torch $("$py" -c 'import torch; print(torch.__version__)') already installed"
    elif [ "$torch_mode" = auto ] && [ "$(free_gib)" -lt "$torch_min_free_gib" ]; then
      echo "torch: NOT installed, only $(free_gib) GiB free on $work (needs ~$torch_min_free_gib GiB);" \
        "its tests skip (FP8MOE_PYTHON_TORCH=1 makes this an error)"
    else
      start=$(date +%s)
      if "$py" -m pip install -q --disable-pip-version-check torch; then
        echo "torch $("$py" -c 'import torch; print(torch.__version__)') ready ($(( $(date +%s) - start )) s)"
      elif [ "$torch_mode" = auto ]; then
        remove_partial_torch
        echo "torch: NOT installed, pip failed ($(free_gib) GiB free now); its tests skip" \
          "(FP8MOE_PYTHON_TORCH=1 makes this an error)"
      else
        echo "test-python: torch could not be installed and FP8MOE_PYTHON_TORCH=1" >&2
        exit 1
      fi
    fi ;;
  *) echo "test-python: FP8MOE_PYTHON_TORCH must be 0, 1 or auto (got '$torch_mode')" >&2; exit 2 ;;
esac

echo "== wheel =="
rm -rf "$work/dist"
FP8MOE_CUDA=OFF "$py" -m pip wheel -q --disable-pip-version-check --no-deps ./python -w "$work/dist"
wheel="$(ls "$work"/dist/fp8moe-*.whl)"
"$py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
echo "installed $(basename "$wheel")"

# Outside the checkout, so that `import fp8moe` is the installed wheel and its bundled library.
cd "$work"
env -u FP8MOE_LIBRARY "$py" -c '
import fp8moe
lib = fp8moe.library()
print(lib)
assert lib.found_by == "bundled in the wheel", lib'

echo "== README's Python example (installed wheel) =="
"$py" - "$root/README.md" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## Using it from Python", 1)[1]
code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
exec(compile(code, "README.md (Python example)", "exec"), {})
PY

echo "== pytest python/tests =="
set +e
env -u FP8MOE_LIBRARY FP8MOE_INFO="$work/lib/tools/fp8moe-info" "$venv/bin/pytest" -c "$root/python/pytest.ini" \
  --rootdir "$root/python" -p no:cacheprovider -ra "$root/python/tests" 2>&1 | tee "$work/pytest.log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -eq 5 ]; then
  echo "test-python: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
