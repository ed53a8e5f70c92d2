#!/usr/bin/env bash
# Device run 1 (session 5): whole gpu suite + memcheck on HEAD, Arena pair new vs b2766f0 interleaved,
# growth cases in fresh processes (growable / preallocated / copy-and-grow 2x, 3 rounds interleaved).
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS
timeout 330 bash scripts/h200-meson.sh .device $B tests memcheck > $out/suite.txt 2>&1
echo "suite rc=$? $((SECONDS-t0)) s" | tee $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access" $out/suite.txt >> $out/summary.txt
mkdir -p /tmp/old && tar -xJf .device-old/stage.tar.xz -C /tmp/old
O=/tmp/old
for i in 1 2 3; do
  LD_LIBRARY_PATH=$B/src:$PWD/.device timeout 40 $B/bench/bench_arena --benchmark_filter='^pair/arena/' --benchmark_min_time=0.2 2>&1 | grep -E "^pair" | sed "s/^/new$i /"
  LD_LIBRARY_PATH=$O:$O/src timeout 40 $O/bench/bench_arena --benchmark_filter='^pair/arena/' --benchmark_min_time=0.2 2>&1 | grep -E "^pair" | sed "s/^/old$i /"
done > $out/pair.txt
echo "pair done $((SECONDS-t0)) s" >> $out/summary.txt
for i in 1 2 3; do
  for c in 268435456:4096 1073741824:1048576 4294967296:67108864; do
    for s in growable preallocated cudaMalloc_copy_grow_2x; do
      LD_LIBRARY_PATH=$B/src timeout 60 $B/tools/cuvmm-plan/cuvmm-plan --backend cuda --growth-case $s:$c 2>&1 | grep growth-row
    done
  done
done > $out/growth.txt
echo "growth done $((SECONDS-t0)) s" >> $out/summary.txt
cat $out/summary.txt; cat $out/pair.txt; cat $out/growth.txt
