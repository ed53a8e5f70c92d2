#!/usr/bin/env python3
"""Ratios from growth-benchmark runs (bench_growth's JSON, one file or several merged by
scripts/h200-run.sh): each strategy against the preallocated physical limit and against
copy-and-grow, at each size, from the median time of its runs; reach and peak memory."""
import json
import sys


def main() -> int:
    data = json.load(open(sys.argv[1]))
    runs = {}
    reach = {}
    for b in data["benchmarks"]:
        name = b["name"]
        if name.startswith("grow/"):
            strategy, size = name.split("/")[1], b.get("size_GiB")
            runs.setdefault((strategy, int(size)), []).append(b)
        elif name.startswith("reach/"):
            reach[name.split("/")[1]] = b
    # One entry per (strategy, size): the run with the median time (odd counts) and its counters.
    grow = {}
    for key, entries in runs.items():
        entries.sort(key=lambda e: e["real_time"])
        grow[key] = dict(entries[len(entries) // 2], runs=len(entries),
                         spread=f"{entries[0]['real_time']:.1f}-{entries[-1]['real_time']:.1f}")
    sizes = sorted({s for _, s in grow})
    print("growth time (appends + fills), ratio to preallocated and to copy_and_grow")
    for size in sizes:
        limit = grow.get(("preallocated", size))
        copy = grow.get(("copy_and_grow", size))
        for strategy in ("growable", "copy_and_grow", "thrust_vector", "preallocated"):
            b = grow.get((strategy, size))
            if b is None:
                continue
            t = b["real_time"]
            line = f"  {size:>3} GiB {strategy:<14} {t:9.2f} {b['time_unit']}"
            if b["runs"] > 1:
                line += f" (median of {b['runs']} runs, {b['spread']})"
            if limit:
                line += f"  /preallocated {t / limit['real_time']:.3f}"
            if copy:
                line += f"  /copy_and_grow {t / copy['real_time']:.3f}"
            line += f"  peak/size {b['peak_over_size']:.3f}  teardown {b['teardown_ms']:.1f} ms"
            if "growth_calls_ms" in b:
                line += f"  in growth calls {b['growth_calls_ms']:.1f} ms"
            print(line)
    print("largest size reached in 64 MiB appends, as a fraction of the memory free at the start")
    for strategy, b in reach.items():
        print(f"  {strategy:<14} {b['reached_GiB']:8.2f} GiB  {b['reached_over_free']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
