#!/usr/bin/env python3
"""Merges Google Benchmark JSON files (one per fresh-process run) into one: the context of the
first, the benchmarks of all."""
import json
import sys

merged = None
for path in sys.argv[1:]:
    data = json.load(open(path))
    if merged is None:
        merged = data
    else:
        merged["benchmarks"].extend(data["benchmarks"])
json.dump(merged or {"benchmarks": []}, sys.stdout, indent=1)
