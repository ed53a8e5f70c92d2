#!/usr/bin/env bash
# Device run P (session 8): cuvmm-plan --profile full --runs 1 with the growth phase first.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
timeout 400 $P --profile full --runs 1 --no-torch --no-plots --out /tmp/plan-full1 > $out/stdout.txt 2>&1; echo "plan rc=$?"
cp /tmp/plan-full1/plan.json $out/plan-full-runs1.json
sed -n '/^GrowableBuffer.s growth time/,/^  trace/p' $out/stdout.txt
