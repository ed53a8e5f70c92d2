#!/usr/bin/env bash
# On the GPU machine: cuvmm's tests the way users run them, plain `meson test` (no
# CUDA_MODULE_LOADING=EAGER or other help), from a build folder staged here by
# scripts/stage-meson-test.sh, plus the same programs under compute-sanitizer memcheck.
#   bash scripts/h200-meson.sh STAGE BUILD_ABS [tests] [memcheck]
# STAGE holds build.tar.xz and meson.tar.xz; BUILD_ABS is the build folder's absolute path on the
# machine that made it (Meson's test list names programs by absolute path): the repository root is
# linked there. Logs go to $OUT (meson-test.log, testlog.txt, memcheck.log).
set -uo pipefail
stage=$(cd "${1:?stage}" && pwd)
build_abs=${2:?absolute build path}
shift 2
modes=" $* "
out=${OUT:-/tmp/cuvmm-out}
mkdir -p "$out"
repo_abs=$(dirname "$build_abs")
if [ "$(pwd -P)" != "$repo_abs" ]; then
  mkdir -p "$(dirname "$repo_abs")" && ln -sfn "$(pwd -P)" "$repo_abs"
fi
[ -d "$build_abs" ] || tar -xJf "$stage/build.tar.xz" -C "$repo_abs"
mkdir -p "$build_abs/meson-logs"
[ -d /tmp/mesonbuild ] || tar -xJf "$stage/meson.tar.xz" -C /tmp
export LD_LIBRARY_PATH=$stage${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
meson_cmd() { PYTHONPATH=/tmp python3 -m mesonbuild.mesonmain "$@"; }
unset CUDA_MODULE_LOADING
status=0
if [[ $modes == *" tests "* ]]; then
  # Every test that needs this machine: not the MPI one (its program links the build machine's
  # Open MPI, which is not here), not the host-only checks that run Python or cuvmm-plan's host
  # profile (readme_examples, the tools suite but plan_device: CI runs them). Meson selects by
  # name, and a name may be in several suites: each name once.
  mapfile -t tests < <(meson_cmd test -C "$build_abs" --no-rebuild --list 2>/dev/null |
    grep -v -e ' / mpi$' -e ' / readme_examples$' -e ':tools / ' | sed 's/.* \/ //' | sort -u)
  tests+=(plan_device)
  echo "== meson test: ${#tests[@]} tests" | tee "$out/meson-test.log"
  meson_cmd test -C "$build_abs" --no-rebuild --print-errorlogs "${tests[@]}" >>"$out/meson-test.log" 2>&1 || status=1
  tail -12 "$out/meson-test.log"
  cp "$build_abs/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
  # Catch2's own per-case totals of every program.
  grep -hE "^(All tests passed|test cases:)" "$out/testlog.txt" | sort | uniq -c | sort -rn | head -20
fi
if [[ $modes == *" memcheck "* ]]; then
  echo "== compute-sanitizer memcheck (filter ~[faults]~[oom]: deliberate faults, and memcheck's own memory)" | tee "$out/memcheck.log"
  # ERROR SUMMARY also counts CUDA API calls that returned an error: the error-path tests provoke
  # those on purpose (a partial cuMemMap, an out-of-memory cuMemCreate, ...). Each program's line
  # below gives both, and the memory-access errors alone ("Invalid", "illegal", "Warp").
  for exe in "$build_abs"/test/gpu/gpu_* "$build_abs"/test/ipc/ipc_gpu_sharing "$build_abs"/test/tools/tools_plan_device; do
    [ -x "$exe" ] && [ -f "$exe" ] || continue
    echo "-- $(basename "$exe")" >>"$out/memcheck.log"
    CUVMM_TEST_UNDER_SANITIZER=1 timeout "${MEMCHECK_TIMEOUT:-90}" compute-sanitizer --tool memcheck --print-limit 20 "$exe" "~[faults]~[oom]" >>"$out/memcheck.log" 2>&1
    log=$(sed -n "/^-- $(basename "$exe")\$/,\$p" "$out/memcheck.log")
    api=$(grep -cE 'Program hit (CUDA_ERROR|cuda)' <<<"$log")
    access=$(grep -cE '^========= (Invalid|.*[Ii]llegal|Warp|Uninitialized|Misaligned|Out-of-range)' <<<"$log")
    cases=$(grep -E '^(All tests passed|test cases:)' <<<"$log" | tail -1)
    echo "$(basename "$exe"): $cases | $(grep 'ERROR SUMMARY' <<<"$log" | tail -1 | sed 's/=* *//') ($api API errors provoked by tests, $access memory-access errors)"
    # compute-sanitizer exits non-zero on the provoked API errors too: fail on what matters only, a
    # failed or missing test run, or a memory-access error.
    if [ "$access" -ne 0 ] || [ -z "$cases" ] || grep -q ' failed' <<<"$cases"; then status=1; fi
  done
fi
exit $status
