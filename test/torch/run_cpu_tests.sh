#!/usr/bin/env bash
# The PyTorch integration's checks that need no GPU (a step of scripts/test.sh):
#   1. the installed plain plug-in loads from any prefix and throws instead of returning null
#      (check_plugin_runpath.sh, on BUILD);
#   2. the cuvmm_torch wheel builds as the install documentation says, `pip wheel --no-build-isolation
#      ./python`, in a fresh virtual environment holding torch 2.11 (its CUDA build: the _allocator
#      extension links torch's CUDA libraries; it installs on a machine without a GPU), meson-python,
#      meson and ninja: libcuvmm and the extensions built together against that torch;
#   3. the wheel installed into another fresh virtual environment that holds only torch (installed as
#      the wheel's dependency) and no build tool; cpu_tests.py and package_tests.py run there, outside
#      the source tree;
#   4. the same wheel installed with `pip install --target` (the folder then moved elsewhere, to a path
#      with a space) and with `pip install --prefix`: package_tests.py against each.
# Usage: test/torch/run_cpu_tests.sh [BUILD]   (a configured Meson build folder; default build)
# Works in build-torch/ at the repository root, made afresh each run but for build-torch/wheels, where
# torch and the build tools are downloaded once (pip's configured index) and installed from after
# (without byte-compiling torch's modules: most of an install's time on a small machine).
# PYTHON: the interpreter the environments are made from (default python3; it needs venv and
# Python's headers).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
python=${PYTHON:-python3}
work=$root/build-torch
tests=$root/test/torch
start=$SECONDS
elapsed() { echo "($((SECONDS - start)) s)"; }

echo "== the plain plug-in from an installed prefix"
bash "$tests/check_plugin_runpath.sh" "$build"

rm -rf "$work/build-env" "$work/run-env" "$work/dist" "$work/target" "$work/moved target" "$work/prefix"
mkdir -p "$work/wheels"
requirements=("torch==2.11.*" "meson-python>=0.18" "meson>=1.7" ninja)

echo "== build environment: ${requirements[*]} $(elapsed)"
"$python" -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip download --quiet --disable-pip-version-check --dest "$work/wheels" "${requirements[@]}"
"$work/build-env/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-index \
  --find-links "$work/wheels" "${requirements[@]}"

echo "== the wheel: pip wheel --no-build-isolation ./python $(elapsed)"
# As an activated environment: its meson and ninja first on PATH.
PATH="$work/build-env/bin:$PATH" "$work/build-env/bin/python" -m pip wheel --quiet --disable-pip-version-check \
  --no-build-isolation --no-deps --wheel-dir "$work/dist" "$root/python"
wheel=$(echo "$work/dist"/cuvmm_torch-*.whl)
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"

echo "== installed into a fresh environment (torch comes as its dependency) $(elapsed)"
"$python" -m venv "$work/run-env"
"$work/run-env/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-index \
  --find-links "$work/wheels" "$wheel"
# Outside the source tree, so the installed package is the one imported.
(cd "$work" && env -u LD_LIBRARY_PATH "$work/run-env/bin/python" "$tests/cpu_tests.py" -v)
(cd "$work" && env -u LD_LIBRARY_PATH "$work/run-env/bin/python" "$tests/package_tests.py" -v)

echo "== pip install --target, then the folder moved $(elapsed)"
"$work/build-env/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-index --no-deps \
  --target "$work/target" "$wheel"
mv "$work/target" "$work/moved target"
(cd "$work" && env -u LD_LIBRARY_PATH PYTHONPATH="$work/moved target" "$work/build-env/bin/python" "$tests/package_tests.py")

echo "== pip install --prefix $(elapsed)"
"$work/build-env/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-index --no-deps \
  --prefix "$work/prefix" "$wheel"
site=$(dirname "$(find "$work/prefix" -name __init__.py -path '*/cuvmm_torch/*' -print -quit)")
site=$(dirname "$site")
(cd "$work" && env -u LD_LIBRARY_PATH PYTHONPATH="$site" "$work/build-env/bin/python" "$tests/package_tests.py")
echo "== PyTorch package checks passed $(elapsed)"
