#!/usr/bin/env bash
# Device run S (session 8): a growth of large chunks right after a process that grew to 120 GiB in
# 61440 chunks of 2 MiB (growable_fixed_chunks), and 5 s later.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
g() { echo "-- $1 ($2) $(date +%s.%N)"; timeout 100 $P --backend cuda --growth-case $1; }
{
g growable_fixed_chunks:128849018880:67108864 "61440 chunks of 2 MiB"
g growable:8589934592:1073741824 "right after it exited"
g growable:8589934592:1073741824 "again"
sleep 5
g growable:8589934592:1073741824 "5 s later"
echo "end $(date +%s.%N)"
} > $out/children.txt 2>&1
cat $out/children.txt
