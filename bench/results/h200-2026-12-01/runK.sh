#!/usr/bin/env bash
# Device run K (session 8): new runs spaced apart in the Arena's address space (room to grow in
# place). Gpu suite + memcheck (plain meson test), bench_arena trace replays against
# cudaMallocAsync (quick x3, full x2) and pairs, and the probe of where replay time goes.
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
(cd .probe && export LD_LIBRARY_PATH=$PWD && for r in 1 2; do ./arena_probe 2000 8; done; ./arena_probe 10000 40) > $out/probe.txt 2>&1
step "done"
cat $out/summary.txt; cat $out/bench.txt $out/probe.txt
