"""A batched decode loop whose per-sequence key/value caches grow: cuvmm_torch.GrowableTensor caches
against torch.cat growth and against caches preallocated at the maximum length, with and without CUDA
graphs. Plain PyTorch: per layer a fused QKV projection for the whole batch, each sequence's new key
and value appended to its own caches, torch.nn.functional.scaled_dot_product_attention over each
sequence's cache, an output projection.

    PYTHONPATH=DIR_WITH_cuvmm_torch python3 bench/torch_decode.py --out DIR [--repeats 3] [options]

Every variant (cache kind, graphs or not) runs in each of --processes fresh processes, and inside a
process the variants take turns: a warm-up run of each (as long as the timed ones: attention builds
its kernel plans per length there), then --repeats rounds of one timed run of each. The eager loop
is bound by the host's kernel launches, and its speed drifts from one process to the next, and
within a process from one second to the next, by more than the cache kinds differ (on an H100, one
kind's processes took 0.60-1.13 s for the same steps); runs that alternate inside one process meet
the same drift. Each run has fresh caches holding a prompt of --prompt tokens per sequence, then
--new-tokens decode steps; tokens/s = batch * new tokens / the time of the decode steps (CUDA graph
captures included, and also reported apart). A variant's tokens/s is the median over processes of
each process's median; its ratio to preallocated caches (same graph mode) is the median over
processes of that ratio within each process. Peak memory is what the run held
beyond what was live before its caches were made (the model and the prompt's keys and values):
PyTorch's peak (torch.cuda.max_memory_allocated(): the preallocated and torch.cat caches,
activations, graph pools) plus, for GrowableTensor caches, the bytes cuvmm mapped for them (which
PyTorch's allocator does not see). It is compared with the bytes of the keys and values held at the
end.

CUDA graphs: the attention length changes at every step, so a graph serves a bucket of --bucket
positions: the caches are viewed to the bucket's end, the new key and value written at each
sequence's position inside the graph, and attention masked past it. GrowableTensor caches grow to
the bucket's end when a bucket starts (the graphs captured before keep working: nothing moved), and a
graph is captured per bucket; preallocated caches use the same buckets and graphs. torch.cat moves
its caches at every step, so it has no graph variant.

Writes DIR/torch_decode.json: every run (per variant, and per process), per variant the medians,
tokens/s over preallocated's (same graph mode) and peak memory over the tokens held.

--device cpu runs the eager variants on the host (GrowableTensor over cuvmm's host backend) at sizes
the options make small: the tests' check that every cache kind decodes the same tokens, not a
measurement.

--profile N: after the timed runs of the first process, each eager variant decodes N more steps
(fresh caches) under torch.profiler, the cache updates and the attention marked as regions
("cache_update", "attention"), and its JSON gets the operators that took the most host and device
time, and every CUDA runtime call with its count: where a variant's time goes, without changing the
timed runs."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time

VARIANTS = [("preallocated", False), ("growable", False), ("cat", False), ("preallocated", True), ("growable", True)]
# Cache kinds whose caches are GrowableTensors (growable_premapped: every row mapped at the start, to
# tell growth's share of a difference from the rest of the cache's path).
GROWABLE_KINDS = ("growable", "growable_premapped")
KINDS = ("preallocated", "cat") + GROWABLE_KINDS


class DeviceMemory:
    """What a run asks of its device: waiting for its work and PyTorch's allocator counters. On the
    CPU (--device cpu: a small eager run of the whole loop, for the tests) there is nothing to wait
    for and the counters read 0."""

    def __init__(self, torch, dev):
        self.cuda = torch.cuda if dev.type == "cuda" else None

    def synchronize(self):
        if self.cuda:
            self.cuda.synchronize()

    def reset_peaks(self):
        if self.cuda:
            self.cuda.reset_peak_memory_stats()

    def allocated(self) -> int:
        return self.cuda.memory_allocated() if self.cuda else 0

    def reserved(self) -> int:
        return self.cuda.memory_reserved() if self.cuda else 0

    def peak_allocated(self) -> int:
        return self.cuda.max_memory_allocated() if self.cuda else 0

    def peak_reserved(self) -> int:
        return self.cuda.max_memory_reserved() if self.cuda else 0


class Model:
    """Random weights: per layer a QKV projection (D -> 3D) and an output projection (D -> D)."""

    def __init__(self, torch, layers: int, heads: int, head_dim: int, dtype, dev):
        g = torch.Generator(device=dev).manual_seed(0)
        d = heads * head_dim
        scale = d ** -0.5
        self.qkv = [torch.randn(d, 3 * d, generator=g, device=dev, dtype=dtype) * scale for _ in range(layers)]
        self.out = [torch.randn(d, d, generator=g, device=dev, dtype=dtype) * scale for _ in range(layers)]
        self.layers, self.heads, self.head_dim, self.d = layers, heads, head_dim, d


class Caches:
    """Per layer, per sequence, a key and a value cache of rows (heads, head_dim)."""

    def __init__(self, torch, kind: str, model: Model, batch: int, max_len: int, dtype, dev):
        self.torch, self.kind, self.model, self.batch, self.max_len = torch, kind, model, batch, max_len
        self.growable = kind in GROWABLE_KINDS
        row = (model.heads, model.head_dim)
        if self.growable:
            import cuvmm_torch

            # compact: small caches hold at most 1/16 of their size (and a granule) unused.
            def make():
                c = cuvmm_torch.GrowableTensor(row, dtype, dev, max_rows=max_len, growth="compact")
                if kind == "growable_premapped":  # every row mapped now: the decode steps grow nothing
                    c.reserve(max_len)
                return c
        elif kind == "preallocated":
            make = lambda: torch.empty((max_len, *row), dtype=dtype, device=dev)
        else:
            make = lambda: torch.empty((0, *row), dtype=dtype, device=dev)
        self.k = [[make() for _ in range(batch)] for _ in range(model.layers)]
        self.v = [[make() for _ in range(batch)] for _ in range(model.layers)]
        self.length = 0  # rows every cache holds (all sequences decode in step)

    def fill_prompt(self, prompt_k, prompt_v):
        """Puts the same prompt keys/values (prompt, heads, head_dim) in every cache."""
        n = prompt_k.shape[0]
        for layer in range(self.model.layers):
            for b in range(self.batch):
                for caches, rows in ((self.k, prompt_k), (self.v, prompt_v)):
                    c = caches[layer][b]
                    if self.growable:
                        c.append(rows)
                    elif self.kind == "preallocated":
                        c[:n].copy_(rows)
                    else:
                        caches[layer][b] = rows.clone()
        self.length = n

    def append(self, layer: int, b: int, k, v):
        """Eager: appends one row (1, heads, head_dim) to sequence b's caches; returns their views."""
        n = self.length
        out = []
        for caches, row in ((self.k, k), (self.v, v)):
            c = caches[layer][b]
            if self.growable:
                out.append(c.append(row))  # append returns the view of all rows
            elif self.kind == "preallocated":
                c[n:n + 1].copy_(row)
                out.append(c[:n + 1])
            else:
                caches[layer][b] = self.torch.cat([c, row])
                out.append(caches[layer][b])
        return out

    def views(self, layer: int, b: int, rows: int):
        """Graphs: the first `rows` rows of sequence b's caches (grown to them where growable)."""
        out = []
        for caches in (self.k, self.v):
            c = caches[layer][b]
            if self.growable:
                if len(c) < rows:
                    c.resize_(rows)
                out.append(c.view(0, rows))
            else:
                out.append(c[:rows])
        return out

    def held_bytes(self) -> int:
        """Bytes cuvmm maps for GrowableTensor caches (mapped and mapped ahead); 0 for the others."""
        if not self.growable:
            return 0
        total = 0
        for caches in (self.k, self.v):
            for per_layer in caches:
                for c in per_layer:
                    s = c.stats()
                    total += s["capacity_bytes"] + s["bytes_prepared"]
        return total


def attend(F, q, k, v, mask=None):
    # q (heads, 1, hd); k, v (rows, heads, hd) -> (heads, 1, hd)
    return F.scaled_dot_product_attention(q[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                                          attn_mask=mask)[0]


def eager_step(torch, F, model: Model, caches: Caches, x, region=lambda name: contextlib.nullcontext()):
    """One decode step; `region(name)` wraps the cache updates and the attention (profiling)."""
    batch = x.shape[0]
    for layer in range(model.layers):
        qkv = (x @ model.qkv[layer]).view(batch, 3, model.heads, model.head_dim)
        outs = []
        for b in range(batch):
            with region("cache_update"):
                k, v = caches.append(layer, b, qkv[b:b + 1, 1], qkv[b:b + 1, 2])
            with region("attention"):
                outs.append(attend(F, qkv[b, 0][:, None], k, v))
        attn = torch.stack(outs).view(batch, model.d)
        x = torch.tanh(x + attn @ model.out[layer])
    caches.length += 1
    return x


def graph_step(torch, F, model: Model, caches: Caches, x, position, rows: int, views):
    """One step over caches viewed to `rows` rows: the new rows written at `position` (a 1-element
    device tensor), attention masked past it. Captured in a graph, replayed for every step of a bucket."""
    batch = x.shape[0]
    mask = (torch.arange(rows, device=x.device) <= position)[None, None, :]  # (1, 1, rows)
    for layer in range(model.layers):
        qkv = (x @ model.qkv[layer]).view(batch, 3, model.heads, model.head_dim)
        outs = []
        for b in range(batch):
            k, v = views[layer][b]
            k.index_copy_(0, position, qkv[b:b + 1, 1])
            v.index_copy_(0, position, qkv[b:b + 1, 2])
            outs.append(attend(F, qkv[b, 0][:, None], k, v, mask))
        attn = torch.stack(outs).view(batch, model.d)
        x = torch.tanh(x + attn @ model.out[layer])
    return x


def run_once(torch, F, args, kind: str, graphs: bool, model: Model, dev, dtype,
             region=lambda name: contextlib.nullcontext()) -> dict:
    g = torch.Generator(device=dev).manual_seed(1)
    prompt_k = torch.randn(args.prompt, model.heads, model.head_dim, generator=g, device=dev, dtype=dtype)
    prompt_v = torch.randn(args.prompt, model.heads, model.head_dim, generator=g, device=dev, dtype=dtype)
    memory = DeviceMemory(torch, dev)
    memory.synchronize()
    base = memory.allocated()  # the model and the prompt: not the caches' memory
    base_reserved = memory.reserved()
    memory.reset_peaks()
    max_len = args.max_len
    caches = Caches(torch, kind, model, args.batch, max_len, dtype, dev)
    caches.fill_prompt(prompt_k, prompt_v)  # (the prompt stays live: it is counted in base)
    x = torch.randn(args.batch, model.d, generator=g, device=dev, dtype=dtype)
    memory.synchronize()
    capture_seconds = 0.0
    start = time.perf_counter()
    if not graphs:
        for _ in range(args.new_tokens):
            x = eager_step(torch, F, model, caches, x, region)
    else:
        static_x = x.clone()
        position = torch.zeros(1, dtype=torch.long, device=dev)
        graph, bucket_end = None, 0
        pool = torch.cuda.graph_pool_handle()
        graphs_made = []  # every bucket's graph lives to the end: the pool they share must (PyTorch asserts it)
        for step in range(args.new_tokens):
            pos = caches.length
            if pos >= bucket_end:  # a new bucket: views to its end, a graph for it
                c0 = time.perf_counter()
                bucket_end = min(max_len, (pos // args.bucket + 1) * args.bucket)
                views = [[caches.views(layer, b, bucket_end) for b in range(args.batch)]
                         for layer in range(model.layers)]
                for per_layer in views:  # rows past the tokens are masked, but 0 * NaN is NaN: no garbage
                    for k, v in per_layer:
                        k[pos:].zero_()
                        v[pos:].zero_()
                position.fill_(pos)
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):  # warm-up, as capture asks (it writes row pos: rewritten below)
                    graph_step(torch, F, model, caches, static_x.clone(), position, bucket_end, views)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    static_out = graph_step(torch, F, model, caches, static_x, position, bucket_end, views)
                graphs_made.append(graph)
                capture_seconds += time.perf_counter() - c0
            position.fill_(pos)
            static_x.copy_(x)
            graph.replay()
            x = static_out.clone()
            caches.length += 1
    memory.synchronize()
    seconds = time.perf_counter() - start
    length = caches.length
    row_bytes = model.heads * model.head_dim * torch.finfo(dtype).bits // 8
    held = caches.held_bytes()
    peak = memory.peak_allocated() - base + held
    # The caches' own bytes at their peak: cuvmm's mapping, the maximum length, or (torch.cat) PyTorch's
    # peak allocation, which holds the caches, a copy while one grows and an eager step's activations.
    cache_bytes = (held if caches.growable else
                   2 * model.layers * args.batch * max_len * row_bytes if kind == "preallocated" else
                   memory.peak_allocated() - base)
    result = {
        "kind": kind, "graphs": graphs, "seconds": seconds, "capture_seconds": capture_seconds,
        "tokens_per_second": args.batch * args.new_tokens / seconds,
        "peak_bytes": peak, "cache_bytes": cache_bytes, "growable_mapped_bytes": held,
        "torch_peak_allocated_bytes": memory.peak_allocated() - base,
        "torch_peak_reserved_bytes": memory.peak_reserved() - base_reserved,
        "tokens_held_bytes": 2 * model.layers * args.batch * length * row_bytes,
        "checksum": float(x.float().sum().item()),
    }
    del caches, prompt_k, prompt_v
    return result


def parse_variant(name: str) -> tuple[str, bool]:
    """KIND[+graphs] -> (kind, graphs)."""
    return name.removesuffix("+graphs"), name.endswith("+graphs")


def alternation(variants: list[str], repeats: int) -> list[str]:
    """The order of a process's timed runs: the variants take turns, one run of each per round, so
    that what slows a process down for a while slows every variant alike."""
    return [name for _ in range(repeats) for name in variants]


def child(args) -> dict:
    """One fresh process: every variant of --child, a warm-up run each, then their timed runs in
    alternation. A variant whose run raises runs no more; the others go on."""
    import traceback

    import torch
    import torch.nn.functional as F

    names = args.child.split(",")
    dev = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    dtype = torch.bfloat16
    if dev.type == "cuda":
        torch.cuda.init()
    model = Model(torch, args.layers, args.heads, args.head_dim, dtype, dev)
    measured = {name: {"runs": []} for name in names}

    def attempt(name: str, measure) -> None:
        try:
            measure()
        except Exception:  # the variant's error goes into the report; the process goes on
            measured[name]["error"] = traceback.format_exc()[-3000:]

    for name in names:  # warm-up: every length's attention plans
        attempt(name, lambda: run_once(torch, F, args, *parse_variant(name), model, dev, dtype))
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    for name in alternation(names, args.repeats):
        if "error" not in measured[name]:
            attempt(name, lambda: measured[name]["runs"].append(
                run_once(torch, F, args, *parse_variant(name), model, dev, dtype)))
    for name in names:  # (a capture is not profiled: the eager steps are the question)
        kind, graphs = parse_variant(name)
        if args.profile and not graphs and "error" not in measured[name]:
            attempt(name, lambda: measured[name].update(profile=profile(torch, F, args, kind, graphs, model, dev, dtype)))
    return {"variants": measured}


def profile(torch, F, args, kind: str, graphs: bool, model: Model, dev, dtype, top: int = 15) -> dict:
    """--profile N steps of a fresh run under torch.profiler: the operators with the most host and
    device time (self), and every CUDA runtime call (a synchronization among them shows here)."""
    from torch.profiler import ProfilerActivity, profile as profiler, record_function

    short = argparse.Namespace(**vars(args))
    short.new_tokens = args.profile
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profiler(activities=activities) as prof:
        run_once(torch, F, short, kind, graphs, model, dev, dtype, region=record_function)
    events = prof.key_averages()

    def device_us(e):  # (the attribute's name changed across PyTorch versions)
        return getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))

    def row(e):
        return {"name": e.key, "count": e.count, "self_cpu_us": e.self_cpu_time_total,
                "cpu_us": e.cpu_time_total, "self_device_us": device_us(e)}

    # A region appears twice among the averages, once as the host range and once as its device
    # time: one row per region, with the host's times and the device's.
    regions = {}
    for e in events:
        if e.key in ("cache_update", "attention"):
            r = row(e)
            if e.key in regions:
                r = {k: (v if k in ("name", "count") else max(v, regions[e.key][k])) for k, v in r.items()}
            regions[e.key] = r
    return {
        "steps": args.profile,
        "regions": regions,
        "host_top": [row(e) for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]],
        "device_top": [row(e) for e in sorted(events, key=device_us, reverse=True)[:top]],
        "runtime_calls": [row(e) for e in events if e.key.startswith("cuda") or e.key.startswith("cu")],
    }


def child_command(passed: list[str], variants: list[str], profile: bool = True) -> list[str]:
    """The command line of the fresh process that measures `variants` (KIND[+graphs] each), with
    the options `passed` (without --profile's steps where `profile` is false: only the first process
    profiles)."""
    return ([sys.executable, __file__, *passed] + ([] if profile else ["--profile", "0"])
            + ["--child", ",".join(variants)])


def process_medians(processes: list[list[dict]], key: str) -> list[float]:
    """Each process's median of `key` over its runs."""
    return [statistics.median(r[key] for r in runs) for runs in processes]


def summarize(kind: str, graphs: bool, processes: list[list[dict]]) -> dict:
    """A variant's row from the runs of each of its processes: tokens/s and capture time as medians
    over processes (each process's median), memory as the median of every run (it does not vary)."""
    runs = [r for p in processes for r in p]
    by_process = process_medians(processes, "tokens_per_second")
    return {
        "kind": kind, "graphs": graphs,
        "tokens_per_second": statistics.median(by_process),
        "tokens_per_second_by_process": by_process,
        "capture_seconds": statistics.median(process_medians(processes, "capture_seconds")),
        "peak_bytes": statistics.median(r["peak_bytes"] for r in runs),
        "cache_bytes": statistics.median(r["cache_bytes"] for r in runs),
        "tokens_held_bytes": runs[0]["tokens_held_bytes"],
        "checksum": runs[0]["checksum"],
    }


def paired_ratios(row: dict, base: dict) -> list[float]:
    """Per process, a variant's tokens/s over the base variant's in the same process (both ran there,
    alternating): the process's own speed cancels out."""
    return [v / b for v, b in zip(row["tokens_per_second_by_process"], base["tokens_per_second_by_process"], strict=True)]


def run_process(passed: list[str], variants: list[str], profile: bool) -> dict:
    """One fresh process measuring `variants`: per variant its runs (and profile) or its error; or
    the error the whole process ended with."""
    command = child_command(passed, variants, profile)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": done.stderr[-3000:]}
    measured = json.loads(done.stdout.strip().splitlines()[-1])  # the child's: {"variants": {name: ...}}
    measured["process_seconds"] = time.perf_counter() - started
    return measured


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for torch_decode.json")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per process")
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per variant, taking turns")
    parser.add_argument("--batch", type=int, default=8, help="sequences decoded together")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--prompt", type=int, default=1536, help="tokens per sequence before decoding")
    parser.add_argument("--new-tokens", type=int, default=512, help="decode steps")
    parser.add_argument("--max-len", type=int, default=8192, help="the preallocated caches' length")
    parser.add_argument("--bucket", type=int, default=128, help="positions one CUDA graph serves")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="then N steps of each eager variant under torch.profiler (into the JSON; 0: none)")
    parser.add_argument("--variants", default=",".join(f"{k}{'+graphs' if g else ''}" for k, g in VARIANTS),
                        help="comma-separated KIND[+graphs], KIND one of " + ", ".join(KINDS) +
                             " (growable_premapped: GrowableTensor caches with every row mapped at the start)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a small eager run of the whole loop on the host, for tests (no graphs; "
                             "PyTorch's memory counters read 0 there)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main() -> int:
    parser = make_parser()
    args = parser.parse_args()
    if args.prompt + args.new_tokens > args.max_len:
        parser.error("--prompt + --new-tokens must not exceed --max-len")
    if args.repeats < 1 or args.processes < 1:
        parser.error("--repeats and --processes must be at least 1")
    for name in args.variants.split(","):
        if name.removesuffix("+graphs") not in KINDS:
            parser.error(f"--variants: {name!r} is not KIND[+graphs] with KIND one of {', '.join(KINDS)}")
        if args.device == "cpu" and name.endswith("+graphs"):
            parser.error(f"--variants: {name!r}: CUDA graphs need --device cuda")
    if args.child:
        print(json.dumps(child(args)))
        return 0
    import torch

    config = {k: getattr(args, k) for k in ("batch", "layers", "heads", "head_dim", "prompt", "new_tokens",
                                            "max_len", "bucket", "repeats", "processes", "device")}
    config["runs_alternate"] = True  # every process runs every variant, their runs taking turns
    device = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    report = {"gpu": device, "torch": torch.__version__, "config": config,
              "variants": [], "summary": []}
    names = list(dict.fromkeys(args.variants.split(",")))  # each variant once, in the order given
    by_name = {}
    for name in names:
        kind, graphs = parse_variant(name)
        by_name[name] = {"kind": kind, "graphs": graphs, "processes": []}
    for number in range(args.processes):
        live = [name for name in names if "error" not in by_name[name]]  # a variant that failed runs no more
        if not live:
            break
        process = run_process(sys.argv[1:], live, profile=number == 0)
        for name in live:
            variant = by_name[name]
            result = process["variants"][name] if "variants" in process else process
            if "error" in result:
                variant["error"] = result["error"]
                print(f"{name}: failed\n{result['error']}", flush=True)
                continue
            variant["processes"].append(dict(result, process_seconds=process["process_seconds"]))
            taken, = process_medians([result["runs"]], "tokens_per_second")
            print(f"{name}, process {number + 1}: {taken:.1f} tokens/s (median of {len(result['runs'])} runs)", flush=True)
            if "profile" in result:
                p = result["profile"]
                regions = ", ".join(f"{k} {r['cpu_us'] / r['count']:.1f} us host per call" for k, r in p["regions"].items())
                syncs = [r for r in p["runtime_calls"] if "Synchronize" in r["name"]]
                print(f"  profile, {p['steps']} steps: {regions}; synchronizations: "
                      + (", ".join(f"{r['name']} x{r['count']}" for r in syncs) or "none"), flush=True)
    for name in names:
        variant = by_name[name]
        if "error" in variant:
            report["variants"].append({"kind": variant["kind"], "graphs": variant["graphs"], "error": variant["error"]})
            continue
        # "runs": every run of every process, as one list (the memory columns read it).
        variant["runs"] = [r for p in variant["processes"] for r in p["runs"]]
        report["variants"].append(variant)
        report["summary"].append(summarize(variant["kind"], variant["graphs"],
                                           [p["runs"] for p in variant["processes"]]))
    for s in report["summary"]:
        base = next((p for p in report["summary"] if p["kind"] == "preallocated" and p["graphs"] == s["graphs"]), None)
        ratios = paired_ratios(s, base) if base else None
        s["tokens_per_second_over_preallocated_by_process"] = ratios
        s["tokens_per_second_over_preallocated"] = statistics.median(ratios) if ratios else None
        s["peak_over_tokens_held"] = s["peak_bytes"] / s["tokens_held_bytes"]
        s["cache_over_tokens_held"] = s["cache_bytes"] / s["tokens_held_bytes"]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "torch_decode.json"), "w") as f:
        json.dump(report, f, indent=1)
    for s in report["summary"]:
        ratio = s["tokens_per_second_over_preallocated"]
        ratio = "-" if ratio is None else f"{ratio:.3f}"
        print(f"{s['kind']:>13}{' +graphs' if s['graphs'] else '        '}  {s['tokens_per_second']:10.1f} tokens/s"
              f"  x{ratio} of preallocated  caches/held {s['cache_over_tokens_held']:.3f}"
              f"  peak/held {s['peak_over_tokens_held']:.3f}"
              f"  checksum {s['checksum']:.6g}")
    return 0 if all("error" not in v for v in report["variants"]) else 1


if __name__ == "__main__":
    sys.exit(main())
