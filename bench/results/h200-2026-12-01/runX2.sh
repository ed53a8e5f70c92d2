#!/usr/bin/env bash
# Device run X2 (session 9): cuvmm-plan --profile full with the plug-in replay, its growth children
# now run before the parent has initialized the driver at all (it asks a child for the driver's
# status). The parent's open /dev/nvidia* descriptors are listed during the growth phase (none).
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
tar -xJf .device/build.tar.xz -C /work/main 2>/dev/null || true
timeout 570 $B/tools/cuvmm-plan/cuvmm-plan --profile full --torch-plugin $PWD/build-torch-h200/prefix/lib/x86_64-linux-gnu/libcuvmm_torch.so --out /tmp/plan-full > $out/stdout.txt 2>&1 &
plan=$!
{
echo "parent pid $plan"
for i in $(seq 1 12); do
  sleep 5
  echo "t=$((i*5))s: $(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | tr '\n' ';')"
  echo "   processes: $(ps -eo pid,ppid,comm | grep -E 'cuvmm-plan|exe$' | tr -s ' ' | tr '\n' ';')"
  parent=$(pgrep -P $plan -x cuvmm-plan)
  echo "   parent $parent's nvidia descriptors: $(ls -l /proc/$parent/fd 2>/dev/null | grep -c nvidia)"
done
} > $out/contexts.txt 2>&1
wait $plan; echo "plan rc=$?" | tee $out/rc.txt
cp $out/stdout.txt /tmp/plan-full/run-stdout.txt
tar -C /tmp -czf $out/plan-full.tar.gz plan-full
cat $out/contexts.txt
sed -n '/^Recommendation/,$p' $out/stdout.txt
