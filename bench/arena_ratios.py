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
        runs[b["run_name"]].append(b)

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
    print("random mixed-size trace (1 B .. 1 GiB), one stream")
    for name in ("trace/arena", "trace/cudaMallocAsync"):
        for e in runs.get(name, []):
            print(f"  {name.split('/')[1]:16s} utilization {e['utilization']:.3f}  "
                  f"(peak live {e['peak_live_GiB']:.2f} GiB, peak held {e['peak_held_GiB']:.2f} GiB)  "
                  f"largest after {e['largest_after']:.3f} ({e['largest_after_GiB']:.2f} GiB)  "
                  f"replay {e['real_time']:.0f} {e['time_unit']}")
    arena_sort = median_us("sort/thrust_arena")
    cub_sort = median_us("sort/cub_preallocated")
    print(f"thrust::sort 2^28 uint32 with ThrustAllocator {arena_sort / 1e3:.2f} ms, "
          f"CUB with preallocated temporary storage {cub_sort / 1e3:.2f} ms: ratio {arena_sort / cub_sort:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
