#!/usr/bin/env bash
# Device run Z (session 9): the whole GPU suite + memcheck, the PyTorch checks (now with
# CUVMM_ARENA_CONF), the installed package, and cuvmm-plan's full trace (runX2/plan-full/trace.csv)
# through PyTorch and the plug-in with its default options and with 64 and 128 MiB large pages.
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS
step() { echo "== $1 ($((SECONDS-t0)) s)" | tee -a $out/summary.txt; }
step "meson test + memcheck"
timeout 200 bash scripts/h200-meson.sh .device $B tests memcheck > $out/suite.txt 2>&1
echo "suite rc=$?" >> $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $out/suite.txt >> $out/summary.txt
export LD_LIBRARY_PATH=$B/src:$PWD/.device
step "PyTorch checks"
timeout 240 bash test/torch/h200.sh build-torch-h200 > $out/torch.txt 2>&1; echo "torch rc=$?" >> $out/summary.txt
grep -E "^[a-z_]+:$|FAILED|passed" $out/torch.txt >> $out/summary.txt
step "installed package"
timeout 150 bash scripts/h200-installed.sh build-torch-h200/prefix > /dev/null 2>&1; echo "installed rc=$?" >> $out/summary.txt
grep -E ": ok|FAILED|passed" $out/installed.log >> $out/summary.txt
step "cuvmm-plan's full trace through PyTorch and the plug-in"
plugin=$PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so
trace=bench/results/h200-2026-12-01/runX2/plan-full/trace.csv
for conf in "" "large_page_bytes:64MiB" "large_page_bytes:128MiB"; do
  echo "-- CUVMM_ARENA_CONF=$conf"
  CUVMM_ARENA_CONF=$conf timeout 100 python3 tools/cuvmm-plan/torch_trace.py $trace --plan 100 --plugin $plugin 2>&1 | grep -E "^replay|rror"
done > $out/torch-trace.txt
step "done"
cat $out/summary.txt $out/torch-trace.txt
