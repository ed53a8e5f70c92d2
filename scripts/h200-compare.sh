#!/usr/bin/env bash
# On the GPU machine: the same measurements from two builds, one after the other in one run, so that
# the figures are side by side (absolute times drift on shared machines; the ratios are the result).
#   bash scripts/h200-compare.sh NEW_BUILD OLD_STAGE
# NEW_BUILD: this build folder (staged by stage-meson-test.sh); OLD_STAGE: an earlier build unpacked
# from stage-device.sh's archive. Writes $OUT/bench-{new,old}.txt and $OUT/plan-{new,old}.tar.gz.
#  - the Arena's cached alloc+free pair (bench_arena pair/), both builds;
#  - the Arena's trace replay against cudaMallocAsync on the same trace (the old build's trace: seed
#    20261129, 4000 allocations, which the new bench_arena replays when told so);
#  - cuvmm-plan's quick profile (growth against preallocated and copy-and-grow, trace utilization).
set -uo pipefail
new=${1:?new build}
old=${2:?old stage}
out=${OUT:-/tmp/cuvmm-out}
bench_new() { LD_LIBRARY_PATH=$new/src:${STAGE_LIBS:-} timeout 120 "$new/bench/bench_arena" "$@"; }
bench_old() { LD_LIBRARY_PATH=$old:$old/src timeout 120 "$old/bench/bench_arena" "$@"; }
{
  echo "== pair"; bench_new --benchmark_filter='^pair/' --benchmark_min_time=0.2
  echo "== trace"; CUVMM_TRACE_SEED=20261129 CUVMM_TRACE_ALLOCATIONS=4000 bench_new --benchmark_filter='^trace/'
} >"$out/bench-new.txt" 2>&1
{
  echo "== pair"; bench_old --benchmark_filter='^pair/' --benchmark_min_time=0.2
  echo "== trace"; bench_old --benchmark_filter='^trace/arena/page_MiB:2/|^trace/cudaMallocAsync'
} >"$out/bench-old.txt" 2>&1
grep -E "_median|^trace/" "$out/bench-new.txt" | head -20
grep -E "_median|^trace/" "$out/bench-old.txt" | head -20
for which in new old; do
  dir=/tmp/plan-$which
  rm -rf "$dir"
  if [ "$which" = new ]; then
    LD_LIBRARY_PATH=$new/src timeout 200 "$new/tools/cuvmm-plan/cuvmm-plan" --profile quick --no-torch --no-plots --out "$dir" >"$dir.log" 2>&1
  else
    LD_LIBRARY_PATH=$old:$old/src CUVMM_PLAN_PLOT_SCRIPT=/nonexistent timeout 200 "$old/tools/cuvmm-plan/cuvmm-plan" --profile quick --no-torch --out "$dir" >"$dir.log" 2>&1
  fi
  echo "== cuvmm-plan quick, $which build: exit $?"
  mv "$dir.log" "$dir/run.log" 2>/dev/null
  tar -C /tmp -czf "$out/plan-$which.tar.gz" "plan-$which"
  grep -iE "growable|utilization|seconds|Measured" "$dir/run.log" | head -20
done
