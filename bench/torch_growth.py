"""A tensor grown by appends on a GPU: cuvmm_torch.GrowableTensor against a tensor preallocated at the
final size (the physical limit: the same bytes written, nothing mapped or copied) and against
torch.cat growth (a copy of everything at each append).

    PYTHONPATH=DIR_WITH_cuvmm_torch python3 bench/torch_growth.py --out DIR [--repeats 3] [--cases ...]

Cases (name total:row): 1GiB_1MiB (1 GiB in appends of 1 MiB rows) and 16GiB_64MiB (16 GiB in 64 MiB
rows) by default; --cases takes others, e.g. 256MiB_4KiB=268435456:4096. Each (case, method,
repeat) runs in a fresh process. The time of one run is the wall time of all its appends, from the
first to a synchronize after the last, each append copying a row-sized source tensor on the current
stream; the preallocated tensor is allocated before the clock starts. Peak memory is what the method
held for the tensor at its peak: torch.cuda.max_memory_allocated() for preallocated and torch.cat
(less the source row), the mapped bytes (capacity and the step mapped ahead) for GrowableTensor,
whose memory PyTorch's allocator does not see.

Writes DIR/torch_growth.json: every run, and per case and method the medians of the repeats, the
time over preallocated's median and peak memory over the tensor's size.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MiB = 2**20
GiB = 2**30
CASES = {"1GiB_1MiB": (GiB, MiB), "16GiB_64MiB": (16 * GiB, 64 * MiB)}
METHODS = ("preallocated", "growable", "cat")


def child(method: str, total: int, row: int) -> dict:
    import torch

    dev = torch.device("cuda", 0)
    torch.cuda.init()
    source = torch.full((1, row), 7, dtype=torch.uint8, device=dev)
    rows = total // row
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = {"method": method, "total_bytes": rows * row, "row_bytes": row}
    if method == "preallocated":
        t = torch.empty((rows, row), dtype=torch.uint8, device=dev)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(rows):
            t[i:i + 1].copy_(source)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated() - base
        last = t[rows - 1]
    elif method == "growable":
        import cuvmm_torch

        t = cuvmm_torch.GrowableTensor((row,), torch.uint8, dev, max_rows=rows)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(rows):
            t.append(source)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        s = t.stats()
        peak = s["peak_capacity_bytes"] + s["bytes_prepared"] + torch.cuda.max_memory_allocated() - base
        result["growth_steps"] = s["growth_steps"]
        result["growth_seconds"] = s["growth_nanoseconds"] / 1e9
        last = t.view(rows - 1)[0]
    elif method == "cat":
        t = torch.empty((0, row), dtype=torch.uint8, device=dev)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(rows):
            t = torch.cat([t, source])
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        peak = torch.cuda.max_memory_allocated() - base
        last = t[rows - 1]
    else:
        raise ValueError(method)
    assert int(last[-1].item()) == 7  # the appends happened
    result.update(seconds=seconds, peak_bytes=peak)
    return result


def child_command(method: str, total: int, row: int) -> list[str]:
    """The command line of the fresh process that grows one tensor by `method`."""
    return [sys.executable, __file__, "--child", method, str(total), str(row)]


def one(method: str, total: int, row: int) -> dict:
    command = child_command(method, total, row)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"method": method, "error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="folder for torch_growth.json (required)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="*", help="NAME=TOTAL:ROW bytes (default: " + ", ".join(CASES) + ")")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    return parser


def main() -> int:
    parser = make_parser()
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]))))
        return 0
    if not args.out:
        parser.error("--out is required")
    cases = dict(CASES)
    if args.cases:
        cases = {}
        for text in args.cases:
            name, sizes = text.split("=")
            total, row = sizes.split(":")
            cases[name] = (int(total), int(row))
    methods = args.methods.split(",")
    import torch

    report = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "repeats": args.repeats,
              "runs": [], "summary": []}
    for name, (total, row) in cases.items():
        runs = {m: [] for m in methods}
        for repeat in range(args.repeats):  # methods interleaved: drift hits them alike
            for m in methods:
                r = one(m, total, row)
                r.update(case=name, repeat=repeat)
                report["runs"].append(r)
                runs[m].append(r)
                print(json.dumps(r), flush=True)
        ok = {m: [r for r in rs if "error" not in r] for m, rs in runs.items()}
        base = statistics.median(r["seconds"] for r in ok["preallocated"]) if ok.get("preallocated") else None
        for m, rs in ok.items():
            if not rs:
                continue
            seconds = statistics.median(r["seconds"] for r in rs)
            peak = statistics.median(r["peak_bytes"] for r in rs)
            report["summary"].append({
                "case": name, "method": m, "runs": len(rs), "median_seconds": seconds,
                "time_over_preallocated": seconds / base if base else None,
                "peak_over_size": peak / rs[0]["total_bytes"],
            })
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "torch_growth.json"), "w") as f:
        json.dump(report, f, indent=1)
    for s in report["summary"]:
        ratio = "" if s["time_over_preallocated"] is None else f"{s['time_over_preallocated']:.3f}"
        print(f"{s['case']:>14} {s['method']:>13}  {s['median_seconds']:.4f} s  time/prealloc {ratio:>6}  "
              f"peak/size {s['peak_over_size']:.3f}")
    return 0 if all("error" not in r for r in report["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
