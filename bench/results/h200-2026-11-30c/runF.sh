#!/usr/bin/env bash
# Device run F (session 6, final code 2c76bad): plain meson test of the GPU tests + memcheck.
set -uo pipefail
timeout 300 bash scripts/h200-meson.sh .device /work/main/build tests memcheck > $OUT/suite.txt 2>&1
echo "suite rc=$?" | tee -a $OUT/suite.txt
grep -E "^(Ok|Expected Fail|Fail|Unexpected Pass|Skipped|Timeout):|: (All tests|test cases)|memory-access|^ *[0-9]+/[0-9]+ .*(FAIL|SKIP|TIMEOUT)" $OUT/suite.txt
