#!/usr/bin/env bash
# cuvmm_torch's allocator on a GPU machine: builds the package against this machine's torch, then
# runs test/torch/test_allocator_gpu.py and test_growable_gpu.py twice, with cuvmm as PyTorch's allocator and with
# PyTorch's own (the control), and the CPU checks; junit XML and logs go to OUT_DIR.
#
#   bash test/torch/gpu-check.sh OUT_DIR      (PYTHON=python3 by default)
#
# The build is the one users get: meson-python (`pip install --no-build-isolation ./python`) into
# OUT_DIR/site. Where this Python lacks meson-python, pip installs it, with meson and ninja, into
# OUT_DIR/build-tools for the build alone (nothing is installed into the Python itself).
# CUVMM_TORCH_SITE=DIR uses a package an earlier run built into DIR instead. MODES (default
# "cuvmm torch"; empty: build only) picks the runs, PYTEST_ARGS adds pytest options (e.g. "-k graph");
# CPU_TESTS=0 skips cpu_tests.py. Exit status: 0 when PyTorch sees a GPU and every test passed in
# both modes.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ $# -ne 1 ]]; then
  sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
  exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
python=${PYTHON:-python3}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
site=$out/site
build_env=()
log() { echo "gpu-check: $*" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"
log "$("$python" --version 2>&1), torch $("$python" -c 'import torch; print(torch.__version__)'), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

if [[ -n ${CUVMM_TORCH_SITE:-} ]]; then  # a package built by an earlier run: no build
  site=$(cd "$CUVMM_TORCH_SITE" && pwd)
  log "using the package in $site"
else
  if ! "$python" -c 'import mesonpy' 2>/dev/null; then
    log "$python has no meson-python: installing it (with meson and ninja) into $out/build-tools for this build"
    rm -rf "$out/build-tools"
    "$python" -m pip install --target "$out/build-tools" meson-python meson ninja > "$out/build-tools.log" 2>&1 ||
      { log "installing meson-python failed (build-tools.log): install it (pip install meson-python meson ninja) and run again"; exit 1; }
    build_env=(env "PYTHONPATH=$out/build-tools${PYTHONPATH:+:$PYTHONPATH}" "PATH=$out/build-tools/bin:$PATH")
  fi
  # Device code for this machine's GPU only, when PyTorch sees one (all of cuvmm's list otherwise).
  arch=$("$python" -c 'import torch; print("%d%d" % torch.cuda.get_device_capability())' 2>/dev/null)
  rm -rf "$site"
  "${build_env[@]}" "$python" -m pip install --no-build-isolation --no-deps --target "$site" \
    ${arch:+"-Csetup-args=-Dgpu_architectures=$arch"} "$root/python" > "$out/build-pip.log" 2>&1 ||
    { log "building the package failed (build-pip.log)"; tail -40 "$out/build-pip.log"; exit 1; }
  log "built (meson-python) into $site"
fi

status=0
if ! "$python" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())'; then
  log "PyTorch sees no CUDA device: the GPU tests skip, and this check fails"
  status=1
fi
cd "$out"  # not the source tree: the built package is the one imported
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
"$python" -m cuvmm_torch > "$out/status.json" 2>&1 || { log "python -m cuvmm_torch failed"; status=1; }
for mode in ${MODES-cuvmm torch}; do
  # shellcheck disable=SC2086  # PYTEST_ARGS is a list of options
  CUVMM_TORCH_TEST_MODE=$mode "$python" -m pytest -v -p no:cacheprovider ${PYTEST_ARGS:-} "$root/test/torch/test_allocator_gpu.py" \
    "$root/test/torch/test_growable_gpu.py" \
    --junitxml="$out/junit-$mode.xml" > "$out/pytest-$mode.log" 2>&1
  rc=$?
  log "mode $mode: pytest exit $rc: $(tail -1 "$out/pytest-$mode.log")"
  [[ $rc == 0 ]] || status=1
done
if [[ ${CPU_TESTS:-1} != 0 ]]; then
  "$python" "$root/test/torch/cpu_tests.py" -v > "$out/cpu-tests.log" 2>&1
  rc=$?
  log "cpu_tests.py: exit $rc: $(tail -1 "$out/cpu-tests.log")"
  [[ $rc == 0 ]] || status=1
fi
exit $status
