"""PyTorch's CUDA allocators side by side on the workloads PyTorch users run: PyTorch's default caching
allocator, its expandable segments, and cuvmm's Arena through the cuvmm_torch package.

    python3 bench/torch_allocators.py random  [--seeds 1,2,3] [--ops 20000] [--repeats 3] [--json FILE]
    python3 bench/torch_allocators.py decoder [--steps 40] [--repeats 3] [--warm-passes] [--json FILE]
    python3 bench/torch_allocators.py all     [...]
    python3 bench/torch_allocators.py traces --out DIR [--seeds 1,2,3] [--ops 20000] [--free-bytes N]

`traces` writes the random workload's traces as cuvmm's trace CSV (DIR/random_SEED.csv, op,id,bytes),
so that `cuvmm-plan --trace DIR/random_1.csv` replays the same allocations through the C++ Arena beside
cudaMallocAsync, cudaMalloc and RMM. Their live bytes follow --free-bytes as the PyTorch runs follow the
free memory they find (default: device 0's free memory now; required without a GPU).

Every measurement runs in a fresh process (an allocator is chosen once per process), in the order
default, expandable segments, cuvmm (the Arena's defaults, or the options CUVMM_ARENA_CONF gives),
repeated; the summary gives medians of the repeats and each allocator's ratios to PyTorch's default.
`--modes` picks others: a subset, or cuvmm_whole_chunks (the Arena with
CUVMM_ARENA_CONF=whole_chunk_bytes:2MiB), cuvmm_idle_unbounded (CUVMM_ARENA_CONF=max_idle_percent:100),
cuvmm_idle_5 (CUVMM_ARENA_CONF=max_idle_percent:5), cuvmm_no_lending
(CUVMM_ARENA_CONF=share_large_page_tails:false), cuvmm_frugal (both), cuvmm_idle_5_wait or
cuvmm_frugal_wait (those with wait_before_create:true) too.

Workloads:
- random: a seeded trace of mixed-size tensors (log-uniform sizes from 1 B to 1 GiB, each freed after a
  random lifetime, tens of GiB live at the peak), allocated and freed through torch.empty / del. It
  reports the time of the allocation and free calls, utilization (peak bytes live / peak bytes
  reserved), and the largest single tensor that still fits after the trace, with the trace's last live
  set held, as a share of (free device memory at the start - bytes live at the end).
- decoder: a Hugging Face `transformers` Llama-style decoder (random initialization, nothing
  downloaded; 24 layers of width 1024, bf16, AdamW, eager attention, deterministic algorithms) trained
  on batches of varying shape (those whose attention would not fit the device left out: the steps
  count in the results says how many ran). It reports the time of the steps after a warm-up, the peak reserved
  memory, the largest tensor that fits after training, and the losses (which must be the same under
  every allocator). Each run's `per_step` in the JSON has every step's seconds (warm-up steps
  included, `warmup_steps` of them) and, under cuvmm_torch, the Arena's driver seconds, pages moved,
  pages created and host waits in that step: where one allocator's time goes beside another's.
  `--warm-passes` then trains the same shapes twice more, every allocation one the allocator has served:
  timed (`warm_steps`) and each step under torch.profiler (`profiled_steps`, the device's busy seconds),
  which tells an allocator's host cost from what its memory does to the kernels (the largest tensor
  after is then probed after those passes).
  `--trace-out FILE` also writes its allocations and frees (recorded with
  torch.cuda.memory._record_memory_history) as cuvmm's trace CSV, to replay the real model on the
  host: `CUVMM_PROFILE_TRACES=FILE unit_arena_trace "[.profile_csv]"` (e.g. after
  `decoder --modes default --repeats 1 --trace-out FILE`).

Reserved memory is torch.cuda.max_memory_reserved(), which cuvmm_torch reports from its Arena as
PyTorch's allocator does. cuvmm_torch must be importable (installed, or on PYTHONPATH).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

GiB = 2**30
MODES = {
    "default": {},
    "expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "cuvmm": {"CUVMM_BENCH_ENABLE": "1"},
    # The Arena with a chunk of its own for every request of 2 MiB or more (ArenaOptions::whole_chunk_bytes).
    "cuvmm_whole_chunks": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "whole_chunk_bytes:2MiB"},
    # The Arena keeping every idle page mapped until a request needs it (ArenaOptions::max_idle_percent).
    "cuvmm_idle_unbounded": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "max_idle_percent:100"},
    # The Arena keeping little idle memory: the frugal end of the frontier (docs/DESIGN.md).
    "cuvmm_idle_5": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "max_idle_percent:5"},
    # The Arena lending no large page's tail (ArenaOptions::share_large_page_tails off): no lent bytes.
    "cuvmm_no_lending": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "share_large_page_tails:false"},
    # Both: the least memory held that the options give, for more page moves.
    "cuvmm_frugal": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "max_idle_percent:5,share_large_page_tails:false"},
    # Those two, and past the idle share pooled pages of the other size released after a host wait
    # for their work rather than new pages created beside them (ArenaOptions::wait_before_create).
    "cuvmm_idle_5_wait": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "max_idle_percent:5,wait_before_create:true"},
    "cuvmm_frugal_wait": {"CUVMM_BENCH_ENABLE": "1",
                          "CUVMM_ARENA_CONF": "max_idle_percent:5,share_large_page_tails:false,wait_before_create:true"},
    # Large pages of 8 MiB rather than 32: the decoder's many tensors of 8 to 32 MiB then lend little of
    # their last page (docs/DESIGN.md), for more pages created.
    "cuvmm_large_8": {"CUVMM_BENCH_ENABLE": "1", "CUVMM_ARENA_CONF": "large_page_bytes:8MiB"},
}


def setup(mode: str):
    import torch

    if mode.startswith("cuvmm"):
        import cuvmm_torch

        cuvmm_torch.enable()
    torch.cuda.init()
    torch.cuda.synchronize()
    return torch


def largest_that_fits(torch, upper: int) -> int:
    """The largest single uint8 tensor (in 64 MiB steps) that can be allocated now."""
    step = 64 * 2**20
    lo, hi = 0, upper // step + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            block = torch.empty(mid * step, dtype=torch.uint8, device="cuda")
            del block
            lo = mid
        except torch.OutOfMemoryError:
            hi = mid
    return lo * step


def random_trace(seed: int, ops: int, live_target: int):
    """(sizes, frees): tensor i of sizes[i] bytes; after allocating tensor i, the ids in frees[i] are freed.
    Sizes are log-uniform in [1 B, 1 GiB]; lifetimes are drawn so that the bytes live hover around
    live_target."""
    import random

    rng = random.Random(seed)
    sizes = [int(2 ** rng.uniform(0, 30)) for _ in range(ops)]
    mean = sum(sizes) / len(sizes)
    mean_life = max(1, int(live_target / mean))
    frees = [[] for _ in range(ops)]
    for i in range(ops):
        end = i + 1 + int(rng.expovariate(1 / mean_life))
        if end < ops:
            frees[end].append(i)
    return sizes, frees


def write_trace(path: str, ops: list[tuple[str, int, int]]) -> None:
    """Writes ("a" or "f", id, bytes) operations as cuvmm's trace CSV (op,id,bytes), which cuvmm-plan
    --trace and unit_arena_trace "[.profile_csv]" replay."""
    with open(path, "w") as f:
        f.write("op,id,bytes\n")
        for op, block, size in ops:
            f.write(f"{op},{block},{size}\n")


def write_traces(out: str, seeds: list[int], ops: int, free_bytes: int) -> list[str]:
    """The random workload's traces as cuvmm's trace CSV, one file per seed."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for seed in seeds:
        sizes, frees = random_trace(seed, ops, live_target=int(free_bytes * 0.3))
        trace, live = [], set()
        for i, size in enumerate(sizes):
            trace.append(("a", i, size))
            live.add(i)
            for j in frees[i]:
                if j in live:
                    trace.append(("f", j, sizes[j]))
                    live.discard(j)
        paths.append(os.path.join(out, f"random_{seed}.csv"))
        write_trace(paths[-1], trace)
    return paths


def snapshot_trace(snapshot: dict, device: int) -> list[tuple[str, int, int]]:
    """The allocations and frees that torch.cuda.memory._snapshot() recorded for `device` (after
    torch.cuda.memory._record_memory_history) as trace operations, in the allocator's order: an
    allocation when it is made, a free when it completes (a block recorded on other streams is
    freed once their work is done). Frees of blocks allocated before the recording began are left
    out; a block still live at the end stays live."""
    ops, live, allocations = [], {}, 0
    for event in snapshot["device_traces"][device]:
        if event["action"] == "alloc":
            live[event["addr"]] = (allocations, event["size"])
            ops.append(("a", allocations, event["size"]))
            allocations += 1
        elif event["action"] == "free_completed" and event["addr"] in live:
            block, size = live.pop(event["addr"])
            ops.append(("f", block, size))
    return ops


def run_random(mode: str, seed: int, ops: int) -> dict:
    torch = setup(mode)
    free_start, total = torch.cuda.mem_get_info()
    sizes, frees = random_trace(seed, ops, live_target=int(free_start * 0.3))
    live, live_bytes, peak_live = {}, 0, 0
    failed = 0
    start = time.perf_counter()
    for i, size in enumerate(sizes):
        try:
            live[i] = torch.empty(size, dtype=torch.uint8, device="cuda")
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
        except torch.OutOfMemoryError:
            failed += 1
        for j in frees[i]:
            if j in live:
                del live[j]
                live_bytes -= sizes[j]
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak_reserved = torch.cuda.max_memory_reserved()
    calls = allocator_calls(torch, mode)
    possible = free_start - live_bytes
    largest = largest_that_fits(torch, possible + 4 * GiB)
    return {
        "workload": f"random:{seed}", "mode": mode, "seconds": seconds, "failed": failed,
        "peak_live": peak_live, "peak_reserved": peak_reserved,
        "utilization": peak_live / peak_reserved if peak_reserved else 0.0,
        "largest_after": largest, "largest_after_share": largest / possible, **calls,
    }


# cuvmm_torch.stats()'s seconds in driver calls, by call.
DRIVER_SECONDS = ("create_seconds", "map_seconds", "access_seconds", "unmap_seconds", "release_seconds")


def allocator_calls(torch, mode: str) -> dict:
    """What the allocator asked of the driver over the trace: for PyTorch's own allocators the segments it
    allocated (cudaMalloc calls, or mapped pages with expandable segments) and its retries after a
    failed cudaMalloc; for cuvmm_torch the Arena's driver calls, the time they took and the pages moved,
    with the options it ran under (CUVMM_ARENA_CONF)."""
    if not mode.startswith("cuvmm"):
        stats = torch.cuda.memory_stats()
        return {"segments_allocated": stats.get("segment.all.allocated", 0),
                "alloc_retries": stats.get("num_alloc_retries", 0)}
    import cuvmm_torch

    s = cuvmm_torch.stats()
    seconds = {k: s[k] for k in DRIVER_SECONDS}
    return {"arena_conf": os.environ.get("CUVMM_ARENA_CONF", ""), "at_physical_peak": s["at_physical_peak"],
            "driver_seconds": sum(seconds.values()), **seconds,
            **{k: s[k] for k in ("chunks_created", "chunks_released", "maps", "unmaps", "access_calls",
                                 "pages_moved", "reclaims", "host_waits", "host_wait_seconds")}}


def step_driver_work(mode: str) -> dict:
    """The Arena's driver calls so far (cuvmm_torch), to be taken per step; nothing for PyTorch's allocators."""
    if not mode.startswith("cuvmm"):
        return {}
    import cuvmm_torch

    s = cuvmm_torch.stats()
    return {"driver_seconds": sum(s[k] for k in DRIVER_SECONDS),
            "pages_moved": s["pages_moved"], "chunks_created": s["chunks_created"], "host_waits": s["host_waits"]}


def device_busy_seconds(events, device_type) -> float:
    """The seconds the device spent in the kernels, copies and fills among a profiler's `events` (those of
    `device_type`: torch.autograd.DeviceType.CUDA). The decoder runs on one stream, so they do not overlap."""
    return sum(e.time_range.elapsed_us() for e in events if e.device_type == device_type) / 1e6


def timed_steps(mode: str, train_step, shapes) -> tuple[list[dict], list[float]]:
    """Each of `shapes` trained once, in order: per step its seconds and, under cuvmm_torch, the Arena's driver
    work in it (read between steps, untimed); and the steps' losses. The steps run on one stream and each waits
    for its own work (loss.item()), so their seconds add up to the pass's."""
    per_step, losses = [], []
    before = step_driver_work(mode)
    for step, (batch, seq) in enumerate(shapes):
        start = time.perf_counter()
        losses.append(train_step(step, batch, seq))
        seconds = time.perf_counter() - start
        after = step_driver_work(mode)
        per_step.append({"batch": batch, "sequence": seq, "seconds": seconds, **{k: after[k] - before[k] for k in after}})
        before = after
    return per_step, losses


def warm_passes(mode: str, train_step, shapes) -> dict:
    """The training steps of `shapes` twice more, every one of them a shape the allocator has served: once timed
    as the first pass was (`warm_steps`: seconds, and the Arena's driver work, per step), once each step under
    torch.profiler (`profiled_steps`: the device's busy seconds per step; their wall seconds include the
    profiler's). Beside the first pass they tell an allocator's host cost from what its memory does to the
    kernels' speed."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    warm, _ = timed_steps(mode, train_step, shapes)
    profiled = []
    for step, (batch, seq) in enumerate(shapes):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            train_step(step, batch, seq)
        profiled.append({"batch": batch, "sequence": seq, "device_seconds": device_busy_seconds(prof.events(), DeviceType.CUDA)})
    return {"warm_steps": warm, "profiled_steps": profiled}


def run_decoder(mode: str, steps: int, trace_out: str | None = None, warm: bool = False) -> dict:
    torch = setup(mode)
    import random

    if trace_out:  # every allocation from the model's parameters on (recording slows the steps)
        torch.cuda.memory._record_memory_history(max_entries=10_000_000)

    from transformers import LlamaConfig, LlamaForCausalLM

    # Deterministic kernels (and the eager attention, whose backward is), so that the losses depend on
    # the model and the data alone: with PyTorch's defaults they differ in the fourth digit between
    # its own two allocators, as some kernels' results depend on where their memory lies.
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                         num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096,
                         attn_implementation="eager")
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(0)
    shapes = [(rng.choice([1, 2, 4, 8, 16]), rng.choice([128, 256, 512, 768, 1024, 1536, 2048]))
              for _ in range(steps)]
    # The eager attention keeps about 6 bytes per head, query and key of every layer for the backward
    # pass (the softmax's fp32 output and its bf16 copy). Shapes whose share passes 60% of the device's
    # memory are left out, so that the workload fits the GPU it runs on: an 80 GB card leaves out
    # batch 8 x 2048 (77 GB of it), a 141 GB one keeps every shape.
    attention_budget = 0.6 * torch.cuda.get_device_properties(0).total_memory
    per_query_key = 6 * config.num_hidden_layers * config.num_attention_heads
    shapes = [(b, s) for b, s in shapes if b * s <= 16384 and per_query_key * b * s * s <= attention_budget]
    def train_step(step: int, batch: int, seq: int) -> float:
        """One training step on batch `step`'s tokens; its loss. loss.item() waits for all the step's work."""
        g = torch.Generator(device="cpu").manual_seed(step)
        ids = torch.randint(0, config.vocab_size, (batch, seq), generator=g).cuda()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    warmup = 3
    torch.cuda.synchronize()
    per_step, losses = timed_steps(mode, train_step, shapes)
    torch.cuda.synchronize()
    seconds = sum(s["seconds"] for s in per_step[warmup:])
    peak_reserved = torch.cuda.max_memory_reserved()
    peak_live = torch.cuda.max_memory_allocated()
    calls = allocator_calls(torch, mode)  # before the probe below, whose allocations are not training's
    if trace_out:
        write_trace(trace_out, snapshot_trace(torch.cuda.memory._snapshot(), torch.cuda.current_device()))
        torch.cuda.memory._record_memory_history(enabled=None)
    passes = warm_passes(mode, train_step, shapes) if warm else {}
    free_now, _ = torch.cuda.mem_get_info()
    largest = largest_that_fits(torch, free_now + torch.cuda.memory_reserved())
    return {"workload": "decoder", "mode": mode, "seconds": seconds, "steps": len(shapes) - warmup,
            "peak_live": peak_live, "peak_reserved": peak_reserved, "utilization": peak_live / peak_reserved,
            "largest_after": largest, "losses": losses, "warmup_steps": warmup, "per_step": per_step, **calls, **passes}


def child(args) -> int:
    if args.workload == "decoder":
        result = run_decoder(args.mode, args.steps, args.trace_out, args.warm_passes)
    else:
        result = run_random(args.mode, int(args.workload.split(":")[1]), args.ops)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def child_command(workload: str, mode: str, args) -> list[str]:
    """The command line of the fresh process that measures `workload` under `mode`."""
    trace = ["--trace-out", args.trace_out] if args.trace_out and workload == "decoder" else []
    warm = ["--warm-passes"] if args.warm_passes and workload == "decoder" else []
    return [sys.executable, __file__, workload, "--child", "--mode", mode, "--ops", str(args.ops),
            "--steps", str(args.steps), *trace, *warm]


def one(workload: str, mode: str, args) -> dict | None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTORCH_CUDA_ALLOC_CONF", "CUVMM_BENCH_ENABLE")}
    env.update(MODES[mode])
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # cuBLAS's deterministic mode (torch.use_deterministic_algorithms)
    command = child_command(workload, mode, args)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    print(f"torch_allocators.py: {workload} under {mode} failed (exit {done.returncode}):\n{done.stderr[-3000:]}",
          file=sys.stderr)
    return None


def summarize(results: list[dict]) -> list[dict]:
    """Medians per (workload, mode), with ratios to PyTorch's default on the same workload."""
    rows = []
    keys = sorted({(r["workload"], r["mode"]) for r in results}, key=lambda k: (k[0], list(MODES).index(k[1])))
    for workload, mode in keys:
        runs = [r for r in results if r["workload"] == workload and r["mode"] == mode]
        row = {"workload": workload, "mode": mode, "repeats": len(runs)}
        for field in ("seconds", "peak_live", "peak_reserved", "utilization", "largest_after", "largest_after_share", "failed",
                      "segments_allocated", "driver_seconds", "chunks_created", "maps", "pages_moved", "host_waits",
                      "host_wait_seconds"):
            if field in runs[0]:
                row[field] = statistics.median(r[field] for r in runs)
        if "at_physical_peak" in runs[0]:  # where the Arena's bytes were at its peak, in the median run by time
            by_time = sorted(runs, key=lambda r: r["seconds"])
            row["at_physical_peak"] = by_time[(len(by_time) - 1) // 2]["at_physical_peak"]
        if "losses" in runs[0]:
            row["losses_identical_across_repeats"] = all(r["losses"] == runs[0]["losses"] for r in runs)
            row["final_loss"] = runs[0]["losses"][-1]
        rows.append(row)
    for row in rows:
        base = next((r for r in rows if r["workload"] == row["workload"] and r["mode"] == "default"), None)
        if base and base.get("seconds"):
            row["time_vs_default"] = row["seconds"] / base["seconds"]
    return rows


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", nargs="?", default="all", help="random, decoder, all, or traces")
    parser.add_argument("--out", help="traces: the folder for the CSV files")
    parser.add_argument("--free-bytes", type=int, help="traces: the device's free memory the traces are sized for")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--ops", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="default,expandable,cuvmm",
                        help=f"comma-separated, of {','.join(MODES)} (default: the first three)")
    parser.add_argument("--json", help="write every result and the summary to this file")
    parser.add_argument("--trace-out", help="decoder: write its allocations and frees as cuvmm's trace CSV to this "
                        "file (each run overwrites it; its time then includes the recording)")
    parser.add_argument("--warm-passes", action="store_true",
                        help="decoder: after training, train the same shapes twice more, timed and under torch.profiler "
                        "(warm_steps, profiled_steps); the largest tensor after is then probed after them")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    return parser


def main() -> int:
    parser = make_parser()
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.workload == "traces":
        if not args.out:
            parser.error("traces needs --out DIR")
        free_bytes = args.free_bytes
        if free_bytes is None:
            import torch

            if not torch.cuda.is_available():
                parser.error("traces without a GPU needs --free-bytes N")
            free_bytes = torch.cuda.mem_get_info()[0]
        if free_bytes <= 0:
            parser.error("--free-bytes must be positive")
        for path in write_traces(args.out, [int(s) for s in args.seeds.split(",")], args.ops, free_bytes):
            print(path)
        return 0

    workloads = []
    if args.workload in ("random", "all"):
        workloads += [f"random:{s}" for s in args.seeds.split(",")]
    if args.workload in ("decoder", "all"):
        workloads.append("decoder")
    if not workloads:
        parser.error(f"unknown workload {args.workload!r}")
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")

    results, failures = [], 0
    for workload in workloads:
        for _ in range(args.repeats):
            for mode in modes:
                result = one(workload, mode, args)
                if result is None:
                    failures += 1
                else:
                    results.append(result)
                    print(json.dumps({k: v for k, v in result.items() if k != "losses"}), flush=True)
    rows = summarize(results)
    decoder_losses = {r["mode"]: r["losses"] for r in results if r["workload"] == "decoder"}
    losses_identical = len({json.dumps(v) for v in decoder_losses.values()}) <= 1
    print(f"\n{'workload':<12} {'mode':<20} {'time/default':>12} {'seconds':>9} {'util':>6} "
          f"{'peak GiB':>9} {'largest GiB':>11} {'share':>6}")
    for r in rows:
        print(f"{r['workload']:<12} {r['mode']:<20} {r.get('time_vs_default', float('nan')):>12.3f} "
              f"{r['seconds']:>9.3f} {r.get('utilization', float('nan')):>6.3f} {r['peak_reserved'] / GiB:>9.2f} "
              f"{r['largest_after'] / GiB:>11.2f} {r.get('largest_after_share', float('nan')):>6.3f}")
    if decoder_losses:
        print(f"decoder losses identical under every allocator: {losses_identical}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "summary": rows, "decoder_losses_identical": losses_identical}, f,
                      indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
