#!/usr/bin/env bash
# One device-machine session: everything that needs the GPU, in one command, logs under $OUT.
#   bash scripts/h200-run.sh BUILD_DIR [bench]
# Runs cuvmm-info, the unit and gpu suites (test binaries directly: the build folder was made by
# another Meson version), the gpu suite under compute-sanitizer memcheck, and with `bench` the
# growth benchmark. Keeps at most 8 files in $OUT (the device tool's limit).
set -uo pipefail
build=${1:?usage: h200-run.sh BUILD_DIR [bench]}
mode=${2:-}
out=${OUT:-/tmp/cuvmm-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$build:${LD_LIBRARY_PATH:-}
export CUVMM_INFO=$build/tools/cuvmm-info
results=$(mktemp -d)
status=0

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv
  "$build/tools/cuvmm-info"
} 2>&1 | tee "$out/cuvmm-info.txt"
"$build/tools/cuvmm-info" --json >"$out/cuvmm-info.json" 2>&1

echo "== test suites" | tee "$out/tests.log"
for exe in "$build"/test/unit/unit_* "$build"/test/gpu/gpu_*; do
  [ -x "$exe" ] && [ -f "$exe" ] || continue
  echo "-- $(basename "$exe")" | tee -a "$out/tests.log"
  CUVMM_TEST_RESULTS_DIR=$results/plain timeout 600 "$exe" >>"$out/tests.log" 2>&1
  rc=$?
  echo "   exit $rc" | tee -a "$out/tests.log"
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
done
python3 scripts/test-summary.py "$results/plain" 2>&1 | tee "$out/summary.txt"

echo "== compute-sanitizer memcheck (gpu suite; cases that fault on purpose or fill the device excluded)" | tee "$out/sanitizer.log"
for exe in "$build"/test/gpu/gpu_*; do
  [ -x "$exe" ] && [ -f "$exe" ] || continue
  echo "-- $(basename "$exe")" | tee -a "$out/sanitizer.log"
  CUVMM_TEST_RESULTS_DIR=$results/memcheck timeout 600 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 99 \
    "$exe" "~[faults]~[oom]" --allow-running-no-tests >>"$out/sanitizer.log" 2>&1
  rc=$?
  echo "   exit $rc" | tee -a "$out/sanitizer.log"
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
done
grep -E "ERROR SUMMARY|exit" "$out/sanitizer.log" | tail -20
python3 scripts/test-summary.py "$results/memcheck" 2>&1 | tail -3 | tee -a "$out/summary.txt"

if [ "$mode" = bench ]; then
  echo "== growth benchmark" | tee -a "$out/summary.txt"
  "$build/bench/bench_growth" --benchmark_out="$out/growth.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true 2>&1 | tee "$out/bench.log" | tail -30
  python3 bench/ratios.py "$out/growth.json" 2>&1 | tee -a "$out/summary.txt"
  "$build/bench/bench_driver_calls" --benchmark_counters_tabular=true 2>&1 | tee -a "$out/bench.log" | tail -12
fi

tar -C "$results" -czf "$out/results.tar.gz" .
exit $status
