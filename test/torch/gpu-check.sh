#!/usr/bin/env bash
# cuvmm_torch's allocator on a GPU machine: builds the package against this machine's torch, then
# runs test/torch/test_allocator_gpu.py and test_growable_gpu.py twice, with cuvmm as PyTorch's allocator and with
# PyTorch's own (the control), and the CPU checks; junit XML and logs go to OUT_DIR.
#
#   bash test/torch/gpu-check.sh BUILD_DIR OUT_DIR      (PYTHON=python3 by default)
#
# The build: meson-python (`pip install --no-build-isolation ./python`) when python/ is a
# meson-python project and this Python has mesonpy; else, or when that fails, the extensions
# compiled directly with torch.utils.cpp_extension (test/torch/build_allocator.py) against the
# libcuvmm of the Meson build folder BUILD_DIR (configured and built here if it has none).
# CUVMM_TORCH_BUILD=pip or =direct picks one; CUVMM_TORCH_SITE=DIR uses a package an earlier run
# built into DIR/site instead. MODES (default "cuvmm torch"; empty: build only) picks the runs, PYTEST_ARGS
# adds pytest options (e.g. "-k graph"); CPU_TESTS=0 skips cpu_tests.py. Exit status: 0 when PyTorch sees a GPU and every test
# passed in both modes.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
python=${PYTHON:-python3}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export MAX_JOBS=${MAX_JOBS:-8}
site=$out/site
log() { echo "gpu-check: $*" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"
log "$("$python" --version 2>&1), torch $("$python" -c 'import torch; print(torch.__version__)'), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# Device code for this machine's GPU only, when PyTorch sees one (all of cuvmm's list otherwise).
arch=$("$python" -c 'import torch; print("%d%d" % torch.cuda.get_device_capability())' 2>/dev/null)
built=
method=${CUVMM_TORCH_BUILD:-auto}
if [[ -n ${CUVMM_TORCH_SITE:-} ]]; then  # a package built by an earlier run: no build
  site=$(cd "$CUVMM_TORCH_SITE" && pwd)
  built=given
  method=given
fi
if [[ $method != direct && $method != given ]] && grep -q mesonpy "$root/python/pyproject.toml" && "$python" -c 'import mesonpy' 2>/dev/null; then
  rm -rf "$site"
  if "$python" -m pip install --no-build-isolation --no-deps --target "$site" \
       ${arch:+"-Csetup-args=-Dgpu_architectures=$arch"} "$root/python" > "$out/build-pip.log" 2>&1; then
    built=pip
  else
    log "meson-python build failed (build-pip.log); compiling directly"
  fi
fi
if [[ -z $built ]]; then
  # Not the build users get. On one GPU image (torch 2.11.0+cu130, its own compiler) this build's
  # _allocator crashed (SIGSEGV, in the stream that formats the message) on every out-of-memory
  # error, where the meson-python build of the same tree passed: prefer meson-python.
  [[ $method == direct ]] || log "meson-python is not installed here: compiling directly with torch.utils.cpp_extension," \
    "not as users build the package (pip install meson-python for that build)"
  if [[ ! -e $build/src/libcuvmm.so ]]; then
    [[ -e $build/build.ninja ]] || meson setup "$build" "$root" -Dtests=disabled -Dbenchmarks=disabled -Dmpi=disabled \
                                      -Dtools=false ${arch:+-Dgpu_architectures=$arch -Dtest_gpu_architectures=$arch} \
                                      > "$out/build-meson.log" 2>&1
    meson compile -C "$build" cuvmm >> "$out/build-meson.log" 2>&1 || { log "building libcuvmm failed (build-meson.log)"; exit 1; }
  fi
  "$python" "$root/test/torch/build_allocator.py" "$build" "$out" > "$out/build-direct.log" 2>&1 ||
    { log "building the extensions failed (build-direct.log)"; tail -40 "$out/build-direct.log"; exit 1; }
  built=direct
fi
log "built ($built) into $site"

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
