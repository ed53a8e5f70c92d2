#!/usr/bin/env bash
# Device run U (session 8): a growth of large chunks right after children that ran the device out
# of memory (copy-and-grow to 120 GiB), as in cuvmm-plan's full profile.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
g() { echo "-- $1 ($2)"; timeout 100 $P --backend cuda --growth-case $1; }
{
g cudaMalloc_copy_grow_2x:128849018880:67108864 "runs out of memory"
g growable:8589934592:1073741824 "right after it"
g cudaMallocAsync_copy_grow_2x:128849018880:67108864 "runs out of memory"
g growable:8589934592:1073741824 "right after it"
g thrust_device_vector:128849018880:67108864 "runs out of memory"
g preallocated:128849018880:67108864 "holds 120 GiB"
g growable:8589934592:1073741824 "right after thrust and preallocated, as in the profile"
} > $out/children.txt 2>&1
cat $out/children.txt
