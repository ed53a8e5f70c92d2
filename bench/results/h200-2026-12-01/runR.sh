#!/usr/bin/env bash
# Device run R (session 8): a growth of large chunks right after a process that held 120 GiB, and
# after pauses of 2 and 5 s (each child itself pauses 0.5 s before measuring).
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
g() { echo "-- $1 ($2)"; timeout 60 $P --backend cuda --growth-case $1; }
{
for pause in 0 0 2 5; do
  g preallocated:128849018880:67108864 "holds 120 GiB"
  sleep $pause
  g growable:8589934592:1073741824 "$pause s after it exited"
done
} > $out/children.txt 2>&1
cat $out/children.txt
