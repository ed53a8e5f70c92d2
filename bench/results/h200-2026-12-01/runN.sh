#!/usr/bin/env bash
# Device run N (session 8): why cuvmm-plan's full profile saw slow growth steps. Growth children
# run alone, right after a child that held 120 GiB, and after a pause.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
g() { echo "-- $1 ($2)"; timeout 60 $P --backend cuda --growth-case $1; }
{
g growable:268435456:4096 "first child"
g growable:268435456:4096 "again"
g growable:8589934592:1073741824 "8 GiB in 1 GiB"
g preallocated:128849018880:67108864 "holds 120 GiB"
g growable:268435456:4096 "right after the 120 GiB child"
g growable:8589934592:1073741824 "8 GiB in 1 GiB, after"
g preallocated:128849018880:67108864 "holds 120 GiB"
sleep 5
g growable:268435456:4096 "5 s after the 120 GiB child"
g growable:8589934592:1073741824 "8 GiB in 1 GiB, 5 s after"
g growable:128849018880:67108864 "120 GiB in 64 MiB"
g growable:268435456:4096 "right after the growable 120 GiB child"
sleep 5
g growable:268435456:4096 "5 s after"
} > $out/children.txt 2>&1
cat $out/children.txt
