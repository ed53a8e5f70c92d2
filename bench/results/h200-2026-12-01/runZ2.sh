#!/usr/bin/env bash
# Device run Z2 (session 9): after parse_arena_options became one table and cuvmm-plan replays the
# plug-in also with large_page_bytes:128MiB: the whole GPU suite + memcheck, the PyTorch checks,
# and cuvmm-plan's quick profile with the plug-in replays.
set -uo pipefail
out=$OUT; B=/work/main/build; t0=$SECONDS
step() { echo "== $1 ($((SECONDS-t0)) s)" | tee -a $out/summary.txt; }
step "meson test + memcheck"
timeout 200 bash scripts/h200-meson.sh .device $B tests memcheck > $out/suite.txt 2>&1
echo "suite rc=$?" >> $out/summary.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $out/suite.txt >> $out/summary.txt
export LD_LIBRARY_PATH=$B/src:$PWD/.device
step "PyTorch checks"
timeout 200 bash test/torch/h200.sh build-torch-h200 > $out/torch.txt 2>&1; echo "torch rc=$?" >> $out/summary.txt
grep -E "FAILED|passed" $out/torch.txt >> $out/summary.txt
step "cuvmm-plan quick with the plug-in replays"
timeout 150 $B/tools/cuvmm-plan/cuvmm-plan --profile quick --no-plots --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-quick > $out/plan-quick-stdout.txt 2>&1
echo "plan rc=$?" >> $out/summary.txt; cp /tmp/plan-quick/plan.json $out/plan-quick.json
step "done"
cat $out/summary.txt; sed -n '/^Recommendation/,$p' $out/plan-quick-stdout.txt
