#!/usr/bin/env bash
# Device run Q (session 8): growth children with another process holding an idle CUDA context.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
g() { echo "-- $1 ($2)"; timeout 60 $P --backend cuda --growth-case $1; }
{
g growable:8589934592:1073741824 "alone"
g preallocated:8589934592:1073741824 "alone"
python3 -c "import torch, time; x = torch.empty(1, device='cuda'); torch.cuda.synchronize(); print('idle context up', flush=True); time.sleep(25)" &
holder=$!
sleep 8
g growable:8589934592:1073741824 "another process holds an idle context"
g growable:8589934592:1073741824 "another process holds an idle context, again"
g growable:268435456:4096 "another process holds an idle context"
g preallocated:8589934592:1073741824 "another process holds an idle context"
kill $holder; wait $holder 2>/dev/null
sleep 1
g growable:8589934592:1073741824 "alone again"
} > $out/children.txt 2>&1
cat $out/children.txt
