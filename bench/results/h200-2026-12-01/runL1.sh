#!/usr/bin/env bash
# Device run L1 (session 8, after spacing new runs apart): gpu suite + memcheck (plain meson test),
# bench_arena pairs and trace replays against cudaMallocAsync (quick x3, full x2), the probe of where
# replay time goes (quick x2, full with 32, 64 and 128 MiB large pages), and the installed package.
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS
step() { echo "== $1 ($((SECONDS-t0)) s)" | tee -a $out/summary.txt; }
step "meson test + memcheck"
timeout 200 bash scripts/h200-meson.sh .device $B tests memcheck > $out/suite.txt 2>&1
echo "suite rc=$?" >> $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $out/suite.txt >> $out/summary.txt
export LD_LIBRARY_PATH=$B/src:$PWD/.device
step "bench_arena pairs and trace replays"
timeout 60 $B/bench/bench_arena --benchmark_filter='^pair/(arena|cudaMallocAsync)/' --benchmark_min_time=0.2 2>&1 | grep -E "median" > $out/bench.txt
for i in 1 2 3; do
  echo "-- quick trace (2000 allocations, 8 GiB live), round $i"
  CUVMM_TRACE_ALLOCATIONS=2000 CUVMM_TRACE_LIVE_GIB=8 timeout 60 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|arena_small_tails|cudaMallocAsync)' 2>&1 | grep -E "^trace"
done >> $out/bench.txt
for i in 1 2; do
  echo "-- full trace (10000 allocations, 40 GiB live), round $i"
  CUVMM_TRACE_CSV=/tmp/full-trace.csv timeout 120 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|arena_small_tails|cudaMallocAsync)' 2>&1 | grep -E "^trace"
done >> $out/bench.txt
step "probe: driver time by call"
(cd .probe && export LD_LIBRARY_PATH=$PWD && for r in 1 2; do ./arena_probe 2000 8; done; for large in 32 64 128; do echo "-- full trace, large pages $large MiB"; ./arena_probe 10000 40 $large; done) > $out/probe.txt 2>&1
step "installed package"
timeout 200 bash scripts/h200-installed.sh build-torch-h200/prefix > /dev/null 2>&1; echo "installed rc=$?" >> $out/summary.txt
grep -E "ok$|FAILED|passed|failed" $out/installed.log | tail -12 >> $out/summary.txt
step "done"
cat $out/summary.txt; cat $out/bench.txt $out/probe.txt
