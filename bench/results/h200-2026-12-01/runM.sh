#!/usr/bin/env bash
# Device run M (session 8): cuvmm-plan --profile full with the plug-in replay, on the build with
# new runs spaced apart (the targets are stated on this profile).
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
tar -xJf .device/build.tar.xz -C /work/main 2>/dev/null || true
timeout 560 $B/tools/cuvmm-plan/cuvmm-plan --profile full --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-full > $out/stdout.txt 2>&1
echo "plan rc=$?" | tee $out/rc.txt
cp $out/stdout.txt /tmp/plan-full/run-stdout.txt
tar -C /tmp -czf $out/plan-full.tar.gz plan-full
sed -n '/^Recommendation/,$p' $out/stdout.txt
