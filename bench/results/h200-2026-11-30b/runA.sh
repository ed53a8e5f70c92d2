#!/usr/bin/env bash
# Final device run A (session 5): gpu suite + memcheck, Arena pair new vs b2766f0, trace replays
# (default, shared tails, cudaMallocAsync) on the quick and the full trace, PyTorch checks, cuvmm-plan quick.
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS
step() { echo "== $1 ($((SECONDS-t0)) s)" | tee -a $out/summary.txt; }
step "meson test + memcheck"
timeout 200 bash scripts/h200-meson.sh .device $B tests memcheck > $out/suite.txt 2>&1
echo "suite rc=$?" >> $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $out/suite.txt >> $out/summary.txt
step "bench_arena pair, new and old interleaved"
mkdir -p /tmp/old && tar -xJf .device-old/stage.tar.xz -C /tmp/old; O=/tmp/old
for i in 1 2; do
  LD_LIBRARY_PATH=$B/src:$PWD/.device timeout 40 $B/bench/bench_arena --benchmark_filter='^pair/arena/' --benchmark_min_time=0.2 2>&1 | grep -E "median" | sed "s/^/new$i /"
  LD_LIBRARY_PATH=$O:$O/src timeout 40 $O/bench/bench_arena --benchmark_filter='^pair/arena/' --benchmark_min_time=0.2 2>&1 | grep -E "median" | sed "s/^/old$i /"
done > $out/bench.txt
step "trace replays"
for i in 1 2; do
  echo "-- quick trace (2000 allocations, 8 GiB live), round $i"
  CUVMM_TRACE_ALLOCATIONS=2000 CUVMM_TRACE_LIVE_GIB=8 LD_LIBRARY_PATH=$B/src:$PWD/.device timeout 60 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|arena_shared_tails|cudaMallocAsync)' 2>&1 | grep -E "^trace"
done >> $out/bench.txt
echo "-- full trace (10000 allocations, 40 GiB live)" >> $out/bench.txt
LD_LIBRARY_PATH=$B/src:$PWD/.device timeout 90 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|arena_shared_tails|cudaMallocAsync)' 2>&1 | grep -E "^trace" >> $out/bench.txt
step "PyTorch checks"
timeout 200 bash test/torch/h200.sh build-torch-h200 > $out/torch.txt 2>&1; echo "torch rc=$?" >> $out/summary.txt
tail -4 $out/torch.txt >> $out/summary.txt
step "cuvmm-plan quick"
LD_LIBRARY_PATH=$B/src timeout 150 $B/tools/cuvmm-plan/cuvmm-plan --profile quick --no-plots --out /tmp/plan-quick > /tmp/plan-quick.log 2>&1
echo "plan rc=$?" >> $out/summary.txt; mkdir -p /tmp/plan-quick; mv /tmp/plan-quick.log /tmp/plan-quick/stdout.txt
tar -C /tmp -czf $out/plan-quick.tar.gz plan-quick
if [ -x $B/bench/bench_growth_overlap ]; then
  step "growth overlap experiment"
  LD_LIBRARY_PATH=$B/src timeout 70 $B/bench/bench_growth_overlap > $out/overlap.txt 2>&1; echo "overlap rc=$?" >> $out/summary.txt
fi
step "done"
cat $out/summary.txt; cat $out/bench.txt; grep -A30 "^Recommendation" /tmp/plan-quick/stdout.txt
