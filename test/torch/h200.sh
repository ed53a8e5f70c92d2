#!/usr/bin/env bash
# The PyTorch checks on the GPU machine, from what stage_for_h200.sh put in STAGE (carried there):
# builds the cuvmm_torch package against this machine's torch (pip if it has pip, setuptools and
# pkg-config, else g++ directly; it needs Python's headers), falls back on the package prebuilt for
# this Python if that build fails, then runs test/torch/gpu_checks.py [CHECKS...].
# Usage: bash test/torch/h200.sh STAGE [CHECKS...]     (PYTHON=python3 by default)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
stage=$(cd "$1" && pwd)
shift
python=${PYTHON:-python3}
echo "$("$python" --version), torch $("$python" -c 'import torch; print(torch.__version__)'), $(g++ --version | head -1)"

if MAX_JOBS=8 bash "$root/test/torch/build_package.sh" "$stage/prefix" "$stage/here" "$python"; then
  site=$stage/here/site
  echo "using the package built here"
else
  tag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  site=$stage/prebuilt-$tag/site
  [[ -d $site ]] || { echo "building failed and there is no prebuilt package for $tag"; exit 1; }
  echo "building here failed: using the package prebuilt for $tag"
fi
plugin=$(find "$stage/prefix" -name libcuvmm_torch.so -print -quit)
PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} "$python" "$root/test/torch/gpu_checks.py" --plugin "$plugin" "$@"
