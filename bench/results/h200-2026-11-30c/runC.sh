#!/usr/bin/env bash
# Device run C (session 6): gpu suite + memcheck (remap_behind, borrowed large pages, tails on by
# default), Arena pairs and trace replays (default = tails, small tails, cudaMallocAsync), growth by
# hide size in fresh processes, PyTorch checks, cuvmm-plan quick with the plug-in replay.
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
for i in 1 2; do
  echo "-- quick trace (2000 allocations, 8 GiB live), round $i"
  CUVMM_TRACE_ALLOCATIONS=2000 CUVMM_TRACE_LIVE_GIB=8 timeout 60 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|arena_small_tails|cudaMallocAsync)' 2>&1 | grep -E "^trace"
done >> $out/bench.txt
echo "-- full trace (10000 allocations, 40 GiB live)" >> $out/bench.txt
timeout 90 $B/bench/bench_arena --benchmark_filter='^trace/(arena/page_MiB:2/|arena_small_tails|cudaMallocAsync)' 2>&1 | grep -E "^trace" >> $out/bench.txt
step "growth by hide size (fresh process per run)"
P=$B/tools/cuvmm-plan/cuvmm-plan
for r in 1 2 3; do
  for c in $((4<<30)):$((64<<20)) $((1<<30)):$((1<<20)); do
    for s in preallocated cudaMalloc_copy_grow_2x growable growable_hide_MiB_556 growable_hide_MiB_834 growable_hide_MiB_1112; do
      timeout 30 $P --backend cuda --growth-case $s:$c 2>&1 | sed "s/^/r$r /"
    done
  done
done > $out/growth.txt
for r in 1 2; do
  for s in preallocated growable growable_hide_MiB_556; do
    timeout 60 $P --backend cuda --growth-case $s:$((64<<30)):$((64<<20)) 2>&1 | sed "s/^/r$r /"
  done
done >> $out/growth.txt
step "PyTorch checks"
timeout 200 bash test/torch/h200.sh build-torch-h200 > $out/torch.txt 2>&1; echo "torch rc=$?" >> $out/summary.txt
tail -4 $out/torch.txt >> $out/summary.txt
step "cuvmm-plan quick with the plug-in replay"
timeout 170 $P --profile quick --no-plots --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-quick > /tmp/plan-quick.log 2>&1
echo "plan rc=$?" >> $out/summary.txt; mkdir -p /tmp/plan-quick; mv /tmp/plan-quick.log /tmp/plan-quick/stdout.txt
tar -C /tmp -czf $out/plan-quick.tar.gz plan-quick
step "done"
cat $out/summary.txt; cat $out/bench.txt; awk '{print $1,$3,$4,$5,$9,$11,$14}' $out/growth.txt; grep -B2 -A12 "trace on" /tmp/plan-quick/stdout.txt | head -40
