#!/usr/bin/env bash
# Device run V (session 9): are growth children slow when their parent holds a CUDA context AND a
# large process exited just before them? The same sequences from a shell, from a Python parent
# without CUDA, and from a Python parent holding a CUDA context (PyTorch); then cuvmm-plan's quick
# profile with 3 runs, and its growth cases as children from the shell.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
big=preallocated:128849018880:67108864
cases="growable:8589934592:1073741824 growable:4294967296:67108864 growable:268435456:4096 growable:1073741824:1048576"
cat > /tmp/parent.py <<PY
import subprocess, sys, time
if sys.argv[1] == "context":
    import torch
    x = torch.empty(1, device="cuda"); torch.cuda.synchronize()
def g(spec, why):
    text = subprocess.run(["$P", "--backend", "cuda", "--growth-case", spec], capture_output=True, text=True).stdout
    print("--", spec, "(" + why + ")", text.strip(), flush=True)
for c in "$cases".split():
    for rep in range(2):
        g("$big", "holds 120 GiB"); g(c, "right after it")
    g(c, "after a small child")
    g("$big", "holds 120 GiB"); time.sleep(3); g(c, "3 s after it")
PY
g() { echo "-- $1 ($2) $(timeout 60 $P --backend cuda --growth-case $1)"; }
{
echo "== shell parent"
for c in $cases; do
  for rep in 1 2; do g $big "holds 120 GiB"; g $c "right after it"; done
  g $c "after a small child"
done
echo "== python parent, no CUDA"; timeout 150 python3 /tmp/parent.py none
echo "== python parent holding a CUDA context (PyTorch)"; timeout 150 python3 /tmp/parent.py context
} > $out/children.txt 2>&1
timeout 200 $P --profile quick --runs 3 --no-torch --no-plots --out /tmp/plan-quick3 > $out/plan-quick3.txt 2>&1
echo "plan rc=$?" >> $out/plan-quick3.txt
cp /tmp/plan-quick3/plan.json $out/plan-quick3.json 2>/dev/null
grep -c growth-row $out/children.txt
