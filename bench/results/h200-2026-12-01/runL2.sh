#!/usr/bin/env bash
# Device run L2 (session 8): gpu suite + memcheck and bench_arena trace replays again (run L1's
# build folder held a libcuvmm.so with uncommitted debug counters; its probe and installed-package
# checks used the committed library), PyTorch checks, the full trace through PyTorch and the
# plug-in, cuvmm-plan quick with the plug-in replay.
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS
step() { echo "== $1 ($((SECONDS-t0)) s)" | tee -a $out/summary.txt; }
step "meson test + memcheck"
timeout 200 bash scripts/h200-meson.sh .device $B tests memcheck > $out/suite.txt 2>&1
echo "suite rc=$?" >> $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $out/suite.txt >> $out/summary.txt
export LD_LIBRARY_PATH=$B/src:$PWD/.device
step "bench_arena trace replays"
for i in 1 2 3; do
  echo "-- quick trace (2000 allocations, 8 GiB live), round $i"
  CUVMM_TRACE_ALLOCATIONS=2000 CUVMM_TRACE_LIVE_GIB=8 timeout 60 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|cudaMallocAsync)' 2>&1 | grep -E "^trace"
done >> $out/bench.txt
for i in 1 2; do
  echo "-- full trace (10000 allocations, 40 GiB live), round $i"
  CUVMM_TRACE_CSV=/tmp/full-trace.csv timeout 120 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|cudaMallocAsync)' 2>&1 | grep -E "^trace"
done >> $out/bench.txt
step "PyTorch checks"
timeout 200 bash test/torch/h200.sh build-torch-h200 > $out/torch.txt 2>&1; echo "torch rc=$?" >> $out/summary.txt
tail -4 $out/torch.txt >> $out/summary.txt
step "full trace through PyTorch and the plug-in"
timeout 150 python3 tools/cuvmm-plan/torch_trace.py /tmp/full-trace.csv --plan 100 --plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so 2>&1 | grep -E "^replay|Error|rror" > $out/torch-full-trace.txt
echo "torch full rc=$?" >> $out/summary.txt
step "cuvmm-plan quick with the plug-in replay"
P=$B/tools/cuvmm-plan/cuvmm-plan
timeout 200 $P --profile quick --no-plots --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-quick > /tmp/plan-quick.log 2>&1
echo "plan rc=$?" >> $out/summary.txt; cp /tmp/plan-quick.log $out/plan-quick-stdout.txt; cp /tmp/plan-quick/plan.json $out/plan-quick.json
step "done"
cat $out/summary.txt; cat $out/bench.txt $out/torch-full-trace.txt; grep -A12 "trace on\|growth" $out/plan-quick-stdout.txt | head -60
