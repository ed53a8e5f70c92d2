#!/usr/bin/env bash
# Device run E (session 6): the fixed gpu_growable_buffer case, then cuvmm-plan --profile full with
# the plug-in replay (growth 3 fresh runs per case, trace replay, torch).
set -uo pipefail
out=$OUT; B=/work/main/build
repo_abs=/work/main
if [ "$(pwd -P)" != "$repo_abs" ]; then mkdir -p /work && ln -sfn "$(pwd -P)" "$repo_abs"; fi
[ -d "$B" ] || tar -xJf .device/build.tar.xz -C "$repo_abs"
export LD_LIBRARY_PATH=$B/src:$PWD/.device
timeout 60 $B/test/gpu/gpu_growable_buffer > $out/gpu_growable_buffer.txt 2>&1; echo "gpu_growable_buffer rc=$?" | tee -a $out/gpu_growable_buffer.txt
tail -3 $out/gpu_growable_buffer.txt
start=$SECONDS
timeout 500 $B/tools/cuvmm-plan/cuvmm-plan --profile full --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-full > $out/stdout.txt 2>&1
echo "exit $? after $((SECONDS-start)) s" >> $out/stdout.txt
cp $out/stdout.txt /tmp/plan-full/run-stdout.txt
tar -C /tmp -czf $out/plan-full.tar.gz plan-full
tail -45 $out/stdout.txt
