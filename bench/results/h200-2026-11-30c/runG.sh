#!/usr/bin/env bash
# Device run G (session 6, after the review commits 7b4c22f): gpu suite + memcheck, one experiment
# growth case on the GPU, the installed package (CMake consumer, README GPU examples).
set -uo pipefail
timeout 300 bash scripts/h200-meson.sh .device /work/main/build tests memcheck > $OUT/suite.txt 2>&1
echo "suite rc=$?" | tee -a $OUT/suite.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $OUT/suite.txt
B=/work/main/build
LD_LIBRARY_PATH=$B/src timeout 30 $B/tools/cuvmm-plan/cuvmm-plan --backend cuda --growth-case growable_hide_MiB_556:$((4<<30)):$((64<<20)) 2>&1 | tee $OUT/hide-case.txt
LD_LIBRARY_PATH=$B/src timeout 30 $B/tools/cuvmm-plan/cuvmm-plan --backend cuda --growth-case growable_hide_MiB_-1:1:1 2>&1 | tee -a $OUT/hide-case.txt
timeout 200 bash scripts/h200-installed.sh build-torch-h200/prefix > $OUT/installed.log 2>&1; echo "installed rc=$?" | tee -a $OUT/installed.log
tail -12 $OUT/installed.log
