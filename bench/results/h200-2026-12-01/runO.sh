#!/usr/bin/env bash
# Device run O (session 8): does cuvmm-plan's full profile slow the growth children down with one
# run per case too? Then the same children standalone.
set -uo pipefail
out=$OUT; B=/work/main/build
export LD_LIBRARY_PATH=$B/src:$PWD/.device
[ -d $B ] || tar -xJf .device/build.tar.xz -C /work/main
P=$B/tools/cuvmm-plan/cuvmm-plan
timeout 400 $P --profile full --runs 1 --no-torch --no-plots --out /tmp/plan-full1 > $out/stdout.txt 2>&1; echo "plan rc=$?"
cp /tmp/plan-full1/plan.json $out/plan-full-runs1.json
g() { echo "-- $1 ($2)"; timeout 60 $P --backend cuda --growth-case $1; }
{
g growable:268435456:4096 "standalone, after the profile"
g growable:8589934592:1073741824 "standalone, after the profile"
} > $out/children.txt 2>&1
cat $out/children.txt
grep -E "growth-row|256 MiB   4 KiB|8 GiB     1 GiB" $out/stdout.txt | tail -5
