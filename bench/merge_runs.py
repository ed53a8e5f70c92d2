#!/usr/bin/env python3
"""Merges Google Benchmark JSON files (one per fresh-process run) into one: the context of the
first, the benchmarks of all. With --median, a benchmark run in several processes is kept once:
the run whose real_time is the median (the lower middle one for an even count).

    python3 bench/merge_runs.py [--median] RUN.json... > MERGED.json
"""
import json
import sys


def merge(paths: list[str], median: bool) -> dict:
    merged = None
    for path in paths:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if merged is None:
            merged = data
        else:
            merged["benchmarks"].extend(data["benchmarks"])
    merged = merged or {"benchmarks": []}
    if median:
        by_name: dict[str, list] = {}
        for b in merged["benchmarks"]:
            by_name.setdefault(b["name"], []).append(b)
        kept = []
        for runs in by_name.values():
            ok = sorted((b for b in runs if not b.get("error_occurred")), key=lambda b: b["real_time"])
            chosen = ok[(len(ok) - 1) // 2] if ok else runs[0]
            chosen["processes"] = len(runs)
            kept.append(chosen)
        merged["benchmarks"] = kept
    return merged


if __name__ == "__main__":
    args = sys.argv[1:]
    median = "--median" in args
    json.dump(merge([a for a in args if a != "--median"], median), sys.stdout, indent=1)
