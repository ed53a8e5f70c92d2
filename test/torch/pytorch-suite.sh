#!/usr/bin/env bash
# PyTorch's own CUDA allocator tests (test/test_cuda.py of PyTorch's repository, at or near the
# installed torch's version; not part of this repository) run twice on a GPU machine: on PyTorch's
# allocator and with cuvmm_torch as PyTorch's allocator. Every test runs in a child process that a
# crash or a hang costs alone; OUT_DIR gets torch.json, cuvmm.json, their junit XML, logs/ and the
# comparison (comparison.md, comparison.json). test/torch/pytorch_suite.py says how.
#
#   bash test/torch/pytorch-suite.sh PATH_TO_test_cuda.py OUT_DIR [OPTIONS of pytorch_suite.py]
#
# PYTHON (default python3) must import torch and, for the cuvmm mode, cuvmm_torch (an installed
# package, or its folder on PYTHONPATH). Wheels beside the test file (e.g. expecttest, which PyTorch's
# test helpers import) are put on the tests' PYTHONPATH. PYTORCH_SUITE_MODES=torch (or cuvmm) runs
# one mode only. Exit status: 0 when every test that passed on PyTorch's allocator passed with cuvmm
# and nothing crashed; 2 when the run could not start.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}
if [[ $# -lt 2 ]]; then
  sed -n '2,14p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
test_file=$1
out=$2
shift 2
mkdir -p "$out" || exit 2
# cuvmm_torch must load in the cuvmm mode: say so before spending the GPU's time.
if [[ ,${PYTORCH_SUITE_MODES:-torch,cuvmm}, == *,cuvmm,* ]] &&
   ! "$python" -c 'import cuvmm_torch' > "$out/cuvmm_torch-import.log" 2>&1; then
  echo "pytorch-suite: $python cannot import cuvmm_torch (see $out/cuvmm_torch-import.log)" >&2
  exit 2
fi
exec "$python" "$here/pytorch_suite.py" "$test_file" "$out" --modes "${PYTORCH_SUITE_MODES:-torch,cuvmm}" "$@"
