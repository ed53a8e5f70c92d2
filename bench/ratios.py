#!/usr/bin/env python3
"""Ratios from growth-benchmark runs (bench_growth's JSON, one file or several merged by
bench/merge_runs.py): for each growth (size and append size), each strategy's time against the
preallocated physical limit and against cudaMalloc copy-and-grow 2x, from the median time of its
runs, with peak memory over the size and bytes copied; then the reach runs.

Also reads the files of the earlier bench_growth (before it ran cuvmm-plan's code): 64 MiB appends
only, copy-and-grow named copy_and_grow, no append_bytes, completed or copied_GiB counters."""
import json
import sys

LIMIT = "preallocated"
COPY = "cudaMalloc_copy_grow_2x"
OLD_NAMES = {"copy_and_grow": COPY}  # the earlier bench_growth's name for the same strategy
OLD_APPEND_BYTES = 64 << 20          # the earlier bench_growth's only append size


def human(nbytes):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{nbytes:g} B"


def main() -> int:
    data = json.load(open(sys.argv[1]))
    runs, reach = {}, []
    for b in data["benchmarks"]:
        if b.get("error_occurred"):
            print(f"  {b['name']}: {b.get('error_message', 'error')}")
            continue
        name = b["name"]
        if name.startswith("grow/"):
            strategy = name.split("/")[1]
            b = dict(b, completed=b.get("completed", 1))
            key = (OLD_NAMES.get(strategy, strategy), b["size_GiB"], b.get("append_bytes", OLD_APPEND_BYTES))
            runs.setdefault(key, []).append(b)
        elif name.startswith("reach/"):
            reach.append(b)
    # One entry per growth and strategy: the run with the median time (odd counts) and its counters.
    grow = {}
    for key, entries in runs.items():
        entries.sort(key=lambda e: e["real_time"])
        grow[key] = dict(entries[len(entries) // 2], runs=len(entries),
                         spread=f"{entries[0]['real_time']:.1f}-{entries[-1]['real_time']:.1f}")
    cases = sorted({(size, append) for _, size, append in grow})
    print(f"growth time (appends + fills): ratio to {LIMIT} and to {COPY}")
    for size, append in cases:
        print(f"  {size:g} GiB in {human(append)} appends")
        limit = grow.get((LIMIT, size, append))
        copy = grow.get((COPY, size, append))
        for (strategy, s, a), b in sorted(grow.items()):
            if (s, a) != (size, append):
                continue
            t = b["real_time"]
            line = f"    {strategy:<30} {t:10.2f} {b['time_unit']}"
            if b["runs"] > 1:
                line += f" (median of {b['runs']}, {b['spread']})"
            if not b["completed"]:
                line += f"  stopped at {b['reached_GiB']:.1f} GiB (out of memory)"
            else:
                if limit and limit["completed"]:
                    line += f"  /{LIMIT} {t / limit['real_time']:.3f}"
                if copy and copy["completed"]:
                    line += f"  /{COPY} {t / copy['real_time']:.3f}"
            line += f"  peak/size {b['peak_over_size']:.3f}"
            if "copied_GiB" in b:
                line += f"  copied {b['copied_GiB']:.1f} GiB"
            print(line)
    for b in reach:
        print(f"reach ({b['name'].split('/')[1]}): {b['reached_GiB']:.2f} GiB, "
              f"{b['reached_over_free']:.3f} of the memory free at the start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
