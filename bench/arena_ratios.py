"""Prints the Arena benchmark's figures and ratios from one bench_arena JSON file.

    python3 bench/arena_ratios.py arena.json
"""
import json
import statistics
import sys
from collections import defaultdict


def main() -> int:
    data = json.load(open(sys.argv[1]))
    runs = defaultdict(list)   # run name -> per-repetition entries
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate":
            continue
        # "pair/arena/65536/repeats:5" -> "pair/arena/65536"
        name = "/".join(part for part in b["run_name"].split("/") if not part.startswith(("repeats:", "iterations:")))
        runs[name].append(b)

    def median_us(name: str) -> float:
        entries = runs[name]
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[entries[0]["time_unit"]]
        return statistics.median(e["real_time"] * scale for e in entries)

    print("alloc+free pair, cached size, one stream (median of repetitions)")
    for size in ("65536", "1048576"):
        arena = median_us(f"pair/arena/{size}")
        pool = median_us(f"pair/cudaMallocAsync/{size}")
        plain = median_us(f"pair/cudaMalloc/{size}")
        print(f"  {int(size) // 1024:5d} KiB  arena {arena:8.3f} us  cudaMallocAsync {pool:8.3f} us  "
              f"cudaMalloc {plain:9.3f} us  arena/cudaMallocAsync {arena / pool:.3f}")
    print("random mixed-size trace (1 B .. 1 GiB), cuvmm-plan's replay")
    trace_names = sorted((n for n in runs if n.startswith("trace/arena")), key=lambda n: int(n.split(":")[-1]))
    for name in trace_names + ["trace/cudaMallocAsync"]:
        for e in runs.get(name, []):
            print(f"  {name[len('trace/'):]:20s} utilization {e['utilization']:.3f}  "
                  f"(peak live {e['peak_live_GiB']:.2f} GiB, peak held {e['peak_held_GiB']:.2f} GiB)  "
                  f"mean utilization {e['mean_utilization']:.3f}  failed {e['failed_allocations']:.0f}  "
                  f"replay {e['replay_s']:.3f} s")
    if "sort/cub_double_buffer_preallocated" not in runs:  # a run filtered to the other benchmarks
        return 0
    print("sorting 2^28 uint32 keys in place (median of repetitions)")
    cub_sort = median_us("sort/cub_double_buffer_preallocated")
    sort_names = sorted((n for n in runs if n.startswith("sort/thrust_arena")), key=lambda n: int(n.split(":")[-1]))
    for name in sort_names + ["sort/thrust_default/0", "sort/cub_double_buffer_preallocated", "sort/cub_preallocated"]:
        t = median_us(name)
        print(f"  {name[len('sort/'):]:34s} {t / 1e3:7.3f} ms  /cub_double_buffer_preallocated {t / cub_sort:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
