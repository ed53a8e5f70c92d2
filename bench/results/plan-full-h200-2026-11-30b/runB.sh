#!/usr/bin/env bash
# Device run B: cuvmm-plan full profile (growth to 1..120 GiB, 3 fresh runs each, trace replay, torch).
set -uo pipefail
out=$OUT; B=/work/main/build
repo_abs=/work/main
if [ "$(pwd -P)" != "$repo_abs" ]; then mkdir -p /work && ln -sfn "$(pwd -P)" "$repo_abs"; fi
[ -d "$B" ] || tar -xJf .device/build.tar.xz -C "$repo_abs"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > $out/gpu.txt 2>&1
start=$SECONDS
LD_LIBRARY_PATH=$B/src timeout 540 $B/tools/cuvmm-plan/cuvmm-plan --profile full --out /tmp/plan-full > $out/stdout.txt 2>&1
echo "exit $? after $((SECONDS-start)) s" >> $out/stdout.txt
cp /tmp/plan-full/stdout.txt /tmp/plan-full/run-stdout.txt 2>/dev/null
cp $out/stdout.txt /tmp/plan-full/stdout.txt
tar -C /tmp -czf $out/plan-full.tar.gz plan-full
tail -60 $out/stdout.txt
