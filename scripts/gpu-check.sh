#!/usr/bin/env bash
# cuvmm's check for a machine with a GPU and the CUDA toolkit (any Linux distribution: it installs
# nothing). Run it from a source checkout; it builds natively, where the tests run.
#   bash scripts/gpu-check.sh [OUT_DIR [MESON_OPTION...]]   (OUT_DIR defaults to build-gpu/check;
#                                  the options go to `meson setup`, e.g. -Dmpi=disabled)
#
#   1. `meson setup build-gpu -Dtests=enabled` (device code for this machine's GPUs, the default
#      test_gpu_architectures=native) and `meson compile`;
#   2. cuvmm-info: what the GPUs can do for virtual memory management (stops here without a GPU),
#      then `meson test`: every suite;
#   3. every GPU program (test/*/gpu_*, ipc_gpu_*, tools_plan_device) under compute-sanitizer memcheck,
#      without the cases tagged [faults] (they fault on purpose) and [oom] (they fill the device, and
#      memcheck keeps memory of its own); a memory-access error, a failed case or a program that ran
#      no case fails the step;
#   4. cuvmm-plan's quick profile (JSON, CSV, plots and report.html under OUT_DIR/plan);
#   5. the PyTorch checks (test/torch/gpu-check.sh), where python3 (or $PYTHON) has torch with CUDA.
# Logs go to OUT_DIR/*.log, one line per step to OUT_DIR/summary.txt; exits non-zero if any step failed.
# GPU_CHECK_STEPS (default "test memcheck plan torch") picks the steps after the build, e.g. to split
# the check over several shorter sessions; MEMCHECK_TIMEOUT (seconds, default 900) bounds each
# program under compute-sanitizer.
#
# Catch2 (>= 3.4) comes from the system (Debian/Ubuntu: libcatch2-dev) or, with network access,
# from subprojects/catch2.wrap. Google Benchmark is not needed (benchmarks are not built here).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${1:-build-gpu/check}
shift || true
meson_options=("$@")
mkdir -p "$out"
out=$(cd "$out" && pwd)
build="build-gpu"
python=${PYTHON:-python3}
steps=" ${GPU_CHECK_STEPS:-test memcheck plan torch} "
wants() { [[ $steps == *" $1 "* ]]; }
summary=$out/summary.txt
: >"$summary"
failed=0

note() { echo "$*" | tee -a "$summary"; }
# step NAME LOG COMMAND...: runs COMMAND with its output in OUT_DIR/LOG, records PASS or FAIL.
step() {
  local name=$1 log=$2
  shift 2
  echo "==> $name (log: $out/$log)"
  if "$@" >"$out/$log" 2>&1; then
    note "PASS  $name"
  else
    note "FAIL  $name (see $log)"
    tail -20 "$out/$log"
    failed=1
  fi
}

for tool in nvcc meson ninja; do
  if ! command -v "$tool" >/dev/null; then
    note "FAIL  $tool is not on PATH (the CUDA toolkit's bin folder, Meson >= 1.7 and ninja are needed)"
    exit 1
  fi
done

# 1. The build.
configure() {
  if [ -f "$build/build.ninja" ]; then
    meson setup --reconfigure "$build" -Dtests=enabled -Dgpu_tests=enabled -Dbenchmarks=disabled "${meson_options[@]}"
  else
    meson setup "$build" -Dtests=enabled -Dgpu_tests=enabled -Dbenchmarks=disabled "${meson_options[@]}"
  fi
}
if ! configure >"$out/configure.log" 2>&1; then
  if grep -q 'dependency catch2 found: NO' "$out/configure.log"; then
    note "FAIL  configure: Catch2 >= 3.4 was not found on this machine, and subprojects/catch2.wrap could not"
    note "      fetch it (no network?). Install Catch2 (Debian/Ubuntu: libcatch2-dev), or put the archive"
    note "      the wrap names (source_filename) into subprojects/packagecache/, then run this again."
  else
    note "FAIL  configure (see configure.log)"
  fi
  tail -20 "$out/configure.log"
  exit 1
fi
note "PASS  configure $build ($(grep -m1 'architectures (tests)' "$out/configure.log" | sed 's/^ *//'))"
step "compile $build" compile.log meson compile -C "$build"
if [ $failed -ne 0 ]; then
  echo "gpu-check: the build failed; nothing else runs"
  exit 1
fi

# 2. A GPU is what this check is for: without one, scripts/test.sh is the check to run.
step "cuvmm-info" cuvmm-info.log "$build/tools/cuvmm-info"
devices=$(sed -n 's/^devices: *\([0-9]*\)$/\1/p' "$out/cuvmm-info.log")
if [ "${devices:-0}" -eq 0 ]; then
  note "FAIL  no GPU found (see cuvmm-info.log): on a machine without one, scripts/test.sh is the check"
  exit 1
fi
note "      GPUs: $devices"

# Every suite, as a user runs it.
if wants test; then
  step "meson test (every suite)" meson-test.log meson test -C "$build" --print-errorlogs
  cp "$build/meson-logs/testlog.txt" "$out/testlog.txt" 2>/dev/null
  grep -E '^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):' "$out/meson-test.log" | sed 's/^/      /' | tee -a "$summary"
fi

# 3. compute-sanitizer memcheck on every GPU program. --report-api-errors no: the error-path tests
# provoke failing driver calls on purpose (a partial map, an out-of-memory create); those are not
# memory-access errors. CUVMM_TEST_UNDER_SANITIZER: leak checks leave out memcheck's own device memory.
memcheck_filter='~[faults]~[oom]'
memcheck() {
  local status=0 exe name rc
  for exe in "$build"/test/*/gpu_* "$build"/test/*/ipc_gpu_* "$build"/test/*/tools_plan_device; do
    if [ ! -f "$exe" ] || [ ! -x "$exe" ]; then continue; fi
    name=$(basename "$exe")
    if [ "$("$exe" "$memcheck_filter" --list-tests --verbosity quiet 2>/dev/null | grep -c .)" -eq 0 ]; then
      echo "-- $name: every case is tagged [faults] or [oom]: not run under memcheck"
      continue
    fi
    echo "-- $name"
    CUVMM_TEST_UNDER_SANITIZER=1 CUVMM_TEST_RESULTS_DIR="$out/memcheck-results" \
      timeout "${MEMCHECK_TIMEOUT:-900}" "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 99 "$exe" "$memcheck_filter"
    rc=$?
    echo "-- $name: exit $rc"
    # 0: passed; 77: every case skipped (e.g. a two-GPU case on a one-GPU machine).
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
  done
  return $status
}
# compute-sanitizer: on PATH, or where the CUDA toolkit keeps it (beside nvcc, or in its own folder).
sanitizer=$(command -v compute-sanitizer)
nvcc_dir=$(dirname "$(command -v nvcc)")
for candidate in "$nvcc_dir/compute-sanitizer" "$nvcc_dir/../compute-sanitizer/compute-sanitizer"; do
  if [ -z "$sanitizer" ] && [ -x "$candidate" ]; then sanitizer=$candidate; fi
done
if ! wants memcheck; then
  :
elif [ -n "$sanitizer" ]; then
  step "compute-sanitizer memcheck (GPU programs, ${memcheck_filter})" memcheck.log memcheck
  grep -E '^-- .*: (exit|every)' "$out/memcheck.log" | sed 's/^-- /      /' | tee -a "$summary"
else
  note "FAIL  compute-sanitizer not found (on PATH or beside nvcc; it comes with the CUDA toolkit)"
  failed=1
fi

# 4. cuvmm-plan's quick profile on this GPU.
if wants plan; then
  step "cuvmm-plan --profile quick" plan.log "$build/tools/cuvmm-plan/cuvmm-plan" --profile quick --out "$out/plan"
  note "      results: $out/plan (plan.json, CSVs, plots; report.html where written)"
fi

# 5. PyTorch, where torch with CUDA is installed.
if ! wants torch; then
  :
elif [ ! -f test/torch/gpu-check.sh ]; then
  note "SKIP  PyTorch checks: test/torch/gpu-check.sh is not in this checkout"
elif ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  note "SKIP  PyTorch checks: $python has no torch with CUDA (set PYTHON to another interpreter)"
else
  step "PyTorch checks (test/torch/gpu-check.sh)" torch.log env PYTHON="$python" bash test/torch/gpu-check.sh "$out/torch"
fi

echo
cat "$summary"
if [ $failed -ne 0 ]; then
  echo "gpu-check: FAILED (logs in $out)"
  exit 1
fi
echo "gpu-check: all steps passed (logs in $out)"
