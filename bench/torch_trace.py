"""Replay an allocation trace (bench/trace.hpp's CSV) through PyTorch's caching allocator.

    CUVMM_TRACE_CSV=trace.csv bench_arena --benchmark_filter=trace/arena   # writes the trace
    python3 bench/torch_trace.py trace.csv            # default and expandable segments, one process each

Prints one JSON line per configuration: utilization = peak bytes live / peak bytes reserved by
PyTorch, and largest_after = the largest single allocation (64 MiB steps) that succeeds after the
trace, with the trace's last live set still held, over the memory not in live allocations.
"""
import csv
import json
import os
import subprocess
import sys


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


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[2] == "--one":
        print(json.dumps(replay(sys.argv[1])))
        return 0
    for conf in ("", "expandable_segments:True"):
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        subprocess.run([sys.executable, __file__, sys.argv[1], "--one"], env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
