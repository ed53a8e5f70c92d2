"""Replay an allocation trace (tools/cuvmm-plan/trace.hpp's CSV) through PyTorch's caching allocator.

    cuvmm-plan --out DIR                                         # writes the trace, DIR/trace.csv
    python3 tools/cuvmm-plan/torch_trace.py trace.csv            # default and expandable segments, one process each
    python3 tools/cuvmm-plan/torch_trace.py trace.csv --plan N   # the same, as cuvmm-plan's replay lines
    python3 tools/cuvmm-plan/torch_trace.py --check              # exit 0 when PyTorch with CUDA is here, else 3

Without --plan it prints one JSON line per configuration: utilization = peak bytes live / peak
bytes reserved by PyTorch, and largest_after = the largest single allocation (64 MiB steps) that
succeeds after the trace, with the trace's last live set still held, over the memory not in live
allocations.

With --plan N it prints, per configuration, the lines cuvmm-plan reads (measure.hpp,
decode_replays): `replay NAME OPS FAILED SECONDS PEAK_REQUESTED PEAK_HELD MEAN_UTILIZATION`, then
about N `point OP_INDEX REQUESTED HELD` lines, held being PyTorch's reserved memory. They are
sampled as cuvmm-plan samples its own allocators (every len(ops) // N operations, and the last);
an allocation PyTorch cannot make is counted as failed and its free skipped; 0-byte allocations are
skipped; SECONDS covers the allocation and free calls only.
"""
import csv
import json
import os
import subprocess
import sys
import time


def replay(path: str) -> dict:
    import torch

    ops = list(csv.DictReader(open(path)))
    live, live_bytes, peak_live = {}, 0, 0
    torch.cuda.init()
    for op in ops:
        key, size = int(op["id"]), int(op["bytes"])
        if op["op"] == "a":
            live[key] = torch.empty(size, dtype=torch.uint8, device="cuda")
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
        else:
            del live[key]
            live_bytes -= size
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    not_live = free + torch.cuda.memory_reserved() - live_bytes
    step = 64 * 2**20
    lo, hi = 0, not_live // step + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            block = torch.empty(mid * step, dtype=torch.uint8, device="cuda")
            del block
            lo = mid
        except torch.cuda.OutOfMemoryError:
            hi = mid
    return {
        "allocator": os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "default",
        "peak_live_GiB": peak_live / 2**30,
        "peak_reserved_GiB": torch.cuda.max_memory_reserved() / 2**30,
        "utilization": peak_live / torch.cuda.max_memory_reserved(),
        "largest_after_GiB": lo * step / 2**30,
        "largest_after": lo * step / not_live,
    }


def replay_for_plan(path: str, name: str, max_points: int) -> str:
    """The trace replayed as cuvmm-plan's replay_trace does, as its replay and point lines."""
    import torch

    ops = list(csv.DictReader(open(path)))
    torch.cuda.init()
    torch.cuda.reset_peak_memory_stats()
    stride = max(1, len(ops) // max(1, max_points))
    live, requested, peak_requested, failed, seconds = {}, 0, 0, 0, 0.0
    points, utilization = [], []
    for i, op in enumerate(ops):
        key, size = int(op["id"]), int(op["bytes"])
        if op["op"] == "a":
            if size != 0:
                start = time.perf_counter()
                try:
                    live[key] = torch.empty(size, dtype=torch.uint8, device="cuda")
                    requested += size
                except torch.cuda.OutOfMemoryError:
                    failed += 1
                seconds += time.perf_counter() - start
        elif key in live:
            start = time.perf_counter()
            del live[key]
            seconds += time.perf_counter() - start
            requested -= size
        peak_requested = max(peak_requested, requested)
        if i % stride == 0 or i + 1 == len(ops):
            held = torch.cuda.memory_reserved()
            points.append(f"point {i} {requested} {held}")
            if held:
                utilization.append(requested / held)
    live.clear()
    torch.cuda.synchronize()
    mean = sum(utilization) / len(utilization) if utilization else 0.0
    peak_held = torch.cuda.max_memory_reserved()
    head = f"replay {name} {len(ops)} {failed} {seconds:.9g} {peak_requested} {peak_held} {mean:.9g}"
    return "\n".join([head] + points)


def check() -> int:
    try:
        import torch
    except ImportError:
        return 3
    return 0 if torch.cuda.is_available() else 3


def main() -> int:
    args = sys.argv[1:]
    if args == ["--check"]:
        return check()
    if len(args) == 4 and args[1] == "--one-plan":
        print(replay_for_plan(args[0], args[2], int(args[3])))
        return 0
    if len(args) == 2 and args[1] == "--one":
        print(json.dumps(replay(args[0])))
        return 0
    plan = len(args) == 3 and args[1] == "--plan"
    if not (len(args) == 1 or plan):
        print(__doc__, file=sys.stderr)
        return 2
    for conf, name in (("", "pytorch"), ("expandable_segments:True", "pytorch_expandable_segments")):
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        one = ["--one-plan", name, args[2]] if plan else ["--one"]
        subprocess.run([sys.executable, __file__, args[0]] + one, env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
