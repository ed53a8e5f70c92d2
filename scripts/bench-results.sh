#!/usr/bin/env bash
# Runs the benchmarks behind a results folder (bench/results/<gpu>/) on this machine's GPU and
# writes their files, under the names scripts/results.py reads, to OUT_DIR:
#   bash scripts/bench-results.sh OUT_DIR [MESON_OPTION...]
# Then copy OUT_DIR's files (not its work/ folder) to bench/results/<a name for the GPU>/ and run
# `python3 scripts/results.py`, which writes that folder's README and the tables built from it.
#
# The steps, in this order (BENCH_STEPS picks some, e.g. BENCH_STEPS="arena traces"):
#   plan         cuvmm-plan --profile full: plan.json, its CSV files and plots
#   arena        bench_arena's cached pair and threads on their own streams: bench_arena.json
#   traces       bench_arena's trace replays, each allocator in its own process, 3 repetitions:
#                cuvmm-plan's full trace (bench_arena_trace.json) and the three random traces of
#                `torch_allocators.py traces`, written for this GPU's free memory
#                (bench_arena_random_N.json)
#   torch        torch_allocators.py random --repeats 3 (torch_allocators.json) and decoder
#                --repeats 3 (torch_allocators_decoder.json; the allocators take turns)
#   decode       torch_decode.py, 5 processes (torch_decode.json)
#   growth       bench_growth, each strategy and growth in 3 fresh processes of one iteration, the
#                median kept (bench_growth.json); torch_growth.py --repeats 3 (torch_growth.json)
#   compression  bench_compression (compression.json)
# and nvidia-smi.csv, the GPU. The build is build-bench/ (`meson setup` with the benchmarks and the
# MESON_OPTIONs: RMM's rows need -Drmm_root=DIR, see meson.options); it needs the CUDA toolkit,
# Meson >= 1.7, ninja and Google Benchmark (Debian/Ubuntu: libbenchmark-dev). The torch, decode and growth
# steps need python3 (or $PYTHON) with PyTorch for CUDA, and transformers for the decoder;
# cuvmm_torch is built into OUT_DIR/work by test/torch/gpu-check.sh unless it imports already.
# Logs go to OUT_DIR/work/*.log. BENCH_DRY_RUN=1 prints the commands instead of running them.
# BENCH_RESUME=1 continues a run that was cut short into the same OUT_DIR: a benchmark whose file is
# there whole (JSON that parses: a process's part under work/, or a step's file) is not run again,
# and the random traces and nvidia-smi.csv already written are kept, so the parts still agree.
# Exits 77 without a GPU, 1 if a step failed (the steps after it still run), else 0.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
if [ $# -lt 1 ]; then
  sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"
  exit 2
fi
out=$1
shift
meson_options=("$@")
dry=${BENCH_DRY_RUN:-0}
python=${PYTHON:-python3}
resume=${BENCH_RESUME:-0}
steps=" ${BENCH_STEPS:-plan arena traces torch decode growth compression} "
wants() { [[ $steps == *" $1 "* ]]; }
# resumed FILE: under BENCH_RESUME=1, whether an earlier run wrote FILE (it is then kept);
# kept FILE: the same for a benchmark's JSON, which must also be whole (its benchmark is then not run again).
resumed() { [[ $resume == 1 && -s $1 ]]; }
kept() { resumed "$1" && "$python" -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
build=build-bench
failed=0

if [[ $dry != 1 ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench-results: nvidia-smi finds no GPU here: nothing to measure" >&2
  exit 77
fi
mkdir -p "$out/work"
out=$(cd "$out" && pwd)
work=$out/work

# run LOG COMMAND...: runs COMMAND, its output appended to work/LOG; a failure is reported and
# counted. Under BENCH_DRY_RUN=1 prints the command instead.
run() {
  local log=$1
  shift
  if [[ $dry == 1 ]]; then
    echo "$*"
    return 0
  fi
  echo "==> $*" >>"$work/$log"
  "$@" >>"$work/$log" 2>&1 && return 0
  echo "bench-results: FAILED (see work/$log): $*" >&2
  failed=1
  return 1
}

resumed "$out/nvidia-smi.csv" ||
  run build.log nvidia-smi --query-gpu=name,memory.total,memory.free,driver_version --format=csv "--filename=$out/nvidia-smi.csv"
reconfigure=()
[ -f "$build/build.ninja" ] && reconfigure=(--reconfigure)
run build.log meson setup "${reconfigure[@]}" "$build" -Dbenchmarks=enabled -Dtests=disabled "${meson_options[@]}"
run build.log meson compile -C "$build" || exit 1
bench=$build/bench

if wants plan && ! kept "$out/plan.json"; then
  run plan.log "$build/tools/cuvmm-plan/cuvmm-plan" --profile full --out "$out"
fi

if wants arena && ! kept "$out/bench_arena.json"; then
  run arena.log "$bench/bench_arena" '--benchmark_filter=^(pair|threads)/(arena|arena_host|cudaMallocAsync)/' \
    --benchmark_out_format=json "--benchmark_out=$out/bench_arena.json"
fi

# merge OUT_JSON [--median] PART...: bench/merge_runs.py over the parts that were written.
merge() {
  local to=$1
  shift
  if [[ $dry == 1 ]]; then
    echo "$python bench/merge_runs.py $* > $to"
    return 0
  fi
  if [[ " $* " != *".json "* ]]; then
    echo "bench-results: no run wrote its part of $(basename "$to")" >&2
    failed=1
    return 1
  fi
  "$python" bench/merge_runs.py "$@" >"$to"
}

# replay NAME [TRACE_CSV]: every allocator's replays of one trace, each in its own process, merged
# into NAME.json.
replay() {
  local name=$1 trace=${2:-} i=0 parts=() filter
  for filter in '^trace/arena/page_MiB:2/' '^trace/arena_max_idle/' '^trace/arena_whole_chunks/' \
    '^trace/cudaMallocAsync/' '^trace/rmm_pool/' '^trace/rmm_arena/'; do
    i=$((i + 1))
    kept "$work/$name.$i.json" && parts+=("$work/$name.$i.json") && continue
    run traces.log env ${trace:+"CUVMM_TRACE_FILE=$trace"} "$bench/bench_arena" "--benchmark_filter=$filter" \
      --benchmark_repetitions=3 --benchmark_out_format=json "--benchmark_out=$work/$name.$i.json"
    [[ $dry == 1 || -s $work/$name.$i.json ]] && parts+=("$work/$name.$i.json")
  done
  merge "$out/$name.json" "${parts[@]}"
}
if wants traces; then
  replay bench_arena_trace
  free_mib=${BENCH_FREE_MIB:-$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null)}
  free_mib=${free_mib:-0}
  resumed "$work/traces/random_3.csv" ||
    run traces.log "$python" bench/torch_allocators.py traces --out "$work/traces" --free-bytes $((free_mib * 1024 * 1024))
  for seed in 1 2 3; do
    replay "bench_arena_random_$seed" "$work/traces/random_$seed.csv"
  done
fi

if wants torch || wants decode || wants growth; then
  built=$work/torch/site  # cuvmm_torch as this script builds it (BENCH_RESUME=1: as an earlier run built it)
  if [[ $resume == 1 && -d $built ]]; then
    export PYTHONPATH=$built${PYTHONPATH:+:$PYTHONPATH}
  elif [[ $dry == 1 ]] || ! "$python" -c 'import cuvmm_torch' 2>/dev/null; then
    run torch-build.log env MODES= CPU_TESTS=0 "PYTHON=$python" bash test/torch/gpu-check.sh "$work/torch"
    export PYTHONPATH=$built${PYTHONPATH:+:$PYTHONPATH}
  fi
fi
if wants torch; then
  kept "$out/torch_allocators.json" ||
    run torch.log "$python" bench/torch_allocators.py random --repeats 3 --json "$out/torch_allocators.json"
  kept "$out/torch_allocators_decoder.json" ||
    run torch.log "$python" bench/torch_allocators.py decoder --repeats 3 --json "$out/torch_allocators_decoder.json"
fi
if wants decode && ! kept "$out/torch_decode.json"; then
  run decode.log "$python" bench/torch_decode.py --out "$out" --batch 4 --new-tokens 384 --repeats 3 --processes 5
fi

if wants growth; then
  parts=()
  for growth in 256MiB/4KiB 1GiB/1MiB 4GiB/64MiB 64GiB/64MiB 120GiB/64MiB; do
    for strategy in growable growable_no_map_ahead preallocated cudaMalloc_copy_grow_2x; do
      for process in 1 2 3; do
        part=$work/growth.${strategy}.${growth//\//_}.$process.json
        kept "$part" && parts+=("$part") && continue
        # A process that failed (its JSON may be cut short) is reported and left out of the merge.
        run growth.log env CUVMM_BENCH_ITERATIONS=1 "$bench/bench_growth" "--benchmark_filter=^grow/$strategy/$growth/" \
          --benchmark_out_format=json "--benchmark_out=$part" && parts+=("$part")
      done
    done
  done
  merge "$out/bench_growth.json" --median "${parts[@]}"
  kept "$out/torch_growth.json" || run growth.log "$python" bench/torch_growth.py --out "$out" --repeats 3
fi

if wants compression && ! kept "$out/compression.json"; then
  run compression.log "$bench/bench_compression" --benchmark_out_format=json "--benchmark_out=$out/compression.json"
fi

[[ $dry == 1 ]] || echo "bench-results: wrote $out ($( ((failed)) && echo 'a step failed: see work/*.log' || echo 'every step ran'))"
exit $failed
