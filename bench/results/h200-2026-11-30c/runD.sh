#!/usr/bin/env bash
# Device run D (session 6): 3fe5107 (hide size memory / 256, tails on by default, plan_device alone):
# gpu suite + memcheck, PyTorch checks, the quick growth cases and 64 GiB in fresh processes,
# cuvmm-plan quick with the plug-in replay.
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS; mkdir -p /tmp/more
step() { echo "== $1 ($((SECONDS-t0)) s)" | tee -a $out/summary.txt; }
step "meson test + memcheck"
timeout 200 bash scripts/h200-meson.sh .device $B tests memcheck > /tmp/more/suite.txt 2>&1
echo "suite rc=$?" >> $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" /tmp/more/suite.txt >> $out/summary.txt
export LD_LIBRARY_PATH=$B/src:$PWD/.device
step "PyTorch checks"
timeout 200 bash test/torch/h200.sh build-torch-h200 > $out/torch.txt 2>&1; echo "torch rc=$?" >> $out/summary.txt
tail -4 $out/torch.txt >> $out/summary.txt
step "growth, fresh process per run"
P=$B/tools/cuvmm-plan/cuvmm-plan
for r in 1 2 3; do
  for c in $((256<<20)):4096 $((1<<30)):$((1<<20)) $((4<<30)):$((64<<20)); do
    for s in preallocated cudaMalloc_copy_grow_2x growable; do
      timeout 30 $P --backend cuda --growth-case $s:$c 2>&1 | sed "s/^/r$r /"
    done
  done
  for s in preallocated growable; do timeout 60 $P --backend cuda --growth-case $s:$((64<<30)):$((64<<20)) 2>&1 | sed "s/^/r$r /"; done
done > $out/growth.txt
step "cuvmm-plan quick with the plug-in replay"
timeout 170 $P --profile quick --no-plots --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-quick > /tmp/plan-quick.log 2>&1
echo "plan rc=$?" >> $out/summary.txt; mkdir -p /tmp/plan-quick; mv /tmp/plan-quick.log /tmp/plan-quick/stdout.txt
cp -r /tmp/plan-quick /tmp/more/; tar -C /tmp -czf $out/more.tar.gz more
step "done"
cat $out/summary.txt; grep -E "^  (check|ok|FAIL|fail)|Error|Traceback" $out/torch.txt | head -20; awk '{print $1,$3,$4,$5,$9,$11,$14}' $out/growth.txt; grep -B2 -A14 "Recommendation" /tmp/plan-quick/stdout.txt | head -60
