#!/usr/bin/env bash
# The PyTorch integration's checks that need no GPU (CI):
#   1. the installed plain plug-in loads from any prefix (check_plugin_runpath.sh);
#   2. the cuvmm_torch package builds against torch 2.11 through pip, from an installed cuvmm found
#      by pkg-config, and also by the direct compile that the H200 falls back on (build_package.sh);
#   3. each build imports, enable() without a GPU says why, and its malloc hook raises
#      torch.OutOfMemoryError over host-backend arenas; stats() and trim() are exact (cpu_tests.py).
# Usage: test/torch/run_cpu_tests.sh [BUILD]   (a configured Meson build folder; default build)
# The interpreter: $CUVMM_TORCH_PYTHON if set (it must have torch, setuptools and wheel), else a
# virtual environment build-torch-venv (in the repository root, so it outlives build folders) made once with `pip install "torch==2.11.*" setuptools wheel`
# from pip's configured index (the CPU-only wheel is enough where the index offers it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)

python=${CUVMM_TORCH_PYTHON:-}
if [[ -z $python ]]; then
  venv=$root/build-torch-venv
  if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "torch==2.11.*" setuptools wheel
  fi
  python=$venv/bin/python
fi

bash "$root/test/torch/check_plugin_runpath.sh" "$build"

out=$build/torch-package
bash "$root/test/torch/stage_prefix.sh" "$build" "$out"
for method in pip direct; do
  CUVMM_TORCH_BUILD=$method bash "$root/test/torch/build_package.sh" "$out/prefix" "$out/$method" "$python"
  # Run from outside the source tree: the installed package is the one imported.
  (cd "$out" && PYTHONPATH=$out/$method/site "$python" "$root/test/torch/cpu_tests.py" -v)
done
