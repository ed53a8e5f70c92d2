#!/usr/bin/env bash
# One device-machine session: everything that needs the GPU, in one command, logs under $OUT.
#   bash scripts/h200-run.sh BUILD_DIR [bench]
# Runs cuvmm-info, the unit and gpu suites (test binaries directly: the build folder was made by
# another Meson version), the gpu suite under compute-sanitizer memcheck, and with `bench` the
# growth benchmarks (in one process, and each run in a fresh process), the driver-call costs and
# the compression benchmark. Keeps at most 8 files in
# $OUT (the device tool's limit): cuvmm-info.txt, tests.log, summary.txt, sanitizer.log, bench.log,
# growth.json (fresh processes), driver-calls.txt, results.tar.gz (Catch2 reports, the rest).
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
"$build/tools/cuvmm-info" --json >"$results/cuvmm-info.json" 2>&1

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
  # In one process: 5 iterations each; later iterations carry part of the previous teardown
  # (the driver completes large frees lazily, at later allocations).
  echo "== growth benchmark, in one process (5 iterations each)" | tee -a "$out/summary.txt"
  "$build/bench/bench_growth" --benchmark_out="$results/growth-in-process.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true >"$out/bench.log" 2>&1 || status=1
  python3 bench/ratios.py "$results/growth-in-process.json" 2>&1 | tee -a "$out/summary.txt"
  # Fresh processes: every timed growth is the first in its process; 3 runs of each, medians.
  echo "== growth benchmark, each run in a fresh process (3 runs each)" | tee -a "$out/summary.txt"
  fresh=$(mktemp -d)
  for run in 1 2 3; do
    for case in growable/16 copy_and_grow/16 thrust_vector/16 preallocated/16 \
                growable/64 copy_and_grow/64 thrust_vector/64 preallocated/64 growable/120 preallocated/120; do
      CUDA_MODULE_LOADING=EAGER CUVMM_BENCH_ITERATIONS=1 "$build/bench/bench_growth" \
        --benchmark_filter="^grow/$case/" --benchmark_out_format=json \
        --benchmark_out="$fresh/grow-${case/\//-}-$run.json" >>"$out/bench.log" 2>&1 || status=1
    done
  done
  for strategy in growable copy_and_grow thrust_vector preallocated; do
    "$build/bench/bench_growth" --benchmark_filter="^reach/$strategy/" --benchmark_out_format=json \
      --benchmark_out="$fresh/reach-$strategy.json" >>"$out/bench.log" 2>&1 || status=1
  done
  python3 bench/merge_runs.py "$fresh"/*.json >"$out/growth.json"
  python3 bench/ratios.py "$out/growth.json" 2>&1 | tee -a "$out/summary.txt"
  "$build/bench/bench_driver_calls" --benchmark_counters_tabular=true >"$out/driver-calls.txt" 2>&1 || status=1
  grep -E "^(chunk|access|growth)" "$out/driver-calls.txt" | tail -12
  # Compressible vs ordinary memory, side by side (JSON in results.tar.gz, ratios in summary.txt).
  echo "== compression benchmark (GB/s, compressible / ordinary)" | tee -a "$out/summary.txt"
  "$build/bench/bench_compression" --benchmark_out="$results/compression.json" --benchmark_out_format=json \
    --benchmark_counters_tabular=true >>"$out/bench.log" 2>&1 || status=1
  python3 bench/compression_ratios.py "$results/compression.json" 2>&1 | tee -a "$out/summary.txt"
fi

tar -C "$results" -czf "$out/results.tar.gz" .
exit $status
