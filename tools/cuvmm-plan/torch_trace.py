"""Replay an allocation trace (tools/cuvmm-plan/trace.hpp's CSV) through PyTorch's caching allocator
and, with --plugin, through PyTorch with cuvmm's plug-in (libcuvmm_torch.so, cuvmm's Arena).

    cuvmm-plan --out DIR                                         # writes the trace, DIR/trace.csv
    python3 tools/cuvmm-plan/torch_trace.py trace.csv            # default and expandable segments, one process each
    python3 tools/cuvmm-plan/torch_trace.py trace.csv --plan N   # the same, as cuvmm-plan's replay lines
    python3 tools/cuvmm-plan/torch_trace.py trace.csv [--plan N] --plugin build/src/libcuvmm_torch.so
                                                                 # and a third: pytorch_cuvmm_plugin
    python3 tools/cuvmm-plan/torch_trace.py trace.csv [--plan N] --plugin PATH --plugin-conf large_page_bytes:128MiB
                                                                 # and a fourth: pytorch_cuvmm_plugin:large_page_bytes:128MiB
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

With --plugin PATH a third configuration, pytorch_cuvmm_plugin, replays the same trace in a process
of its own through torch.cuda.memory.CUDAPluggableAllocator(PATH, "cuvmm_torch_malloc",
"cuvmm_torch_free"), made the current allocator before any CUDA allocation. PyTorch's
memory_reserved() is 0 for a pluggable allocator, so there "held" (reserved) is the device memory in
use (torch.cuda.mem_get_info: total - free) less what was in use before the replay began, as
cuvmm-plan's cudaMalloc replay measures it; its peak is sampled after every allocation (untimed).
The plug-in reports an allocation it cannot make as RuntimeError, counted as failed. Its arena's
options are what CUVMM_ARENA_CONF sets (cuvmm::parse_arena_options); when that is set, the
configuration is named pytorch_cuvmm_plugin:CONF. Each --plugin-conf CONF (a CUVMM_ARENA_CONF text
without spaces; the option may be repeated) adds one more plug-in replay, pytorch_cuvmm_plugin:CONF,
with CUVMM_ARENA_CONF=CONF in its process only.

A configuration whose process fails is named on stderr; the others still run and print their
lines, and the exit status is then 1.
"""
import csv
import json
import os
import subprocess
import sys
import time


class Held:
    """What the allocator holds on the device: PyTorch's reserved memory, or with the plug-in (whose
    memory_reserved() is 0) the device memory in use less what was in use when it began."""

    def __init__(self, plugin):
        import torch

        self.torch, self.plugin, self.peak = torch, plugin, 0
        if plugin:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(plugin, "cuvmm_torch_malloc", "cuvmm_torch_free")
            torch.cuda.memory.change_current_allocator(allocator)
        torch.cuda.init()
        if not plugin:
            torch.cuda.reset_peak_memory_stats()
        self.baseline = self.in_use() if plugin else 0
        # The plug-in raises RuntimeError for an allocation it cannot make.
        self.out_of_memory = RuntimeError if plugin else torch.cuda.OutOfMemoryError

    def in_use(self) -> int:
        free, total = self.torch.cuda.mem_get_info()
        return total - free

    def now(self) -> int:
        if not self.plugin:
            return self.torch.cuda.memory_reserved()
        held = max(0, self.in_use() - self.baseline)
        self.peak = max(self.peak, held)
        return held

    def peak_held(self) -> int:
        return self.peak if self.plugin else self.torch.cuda.max_memory_reserved()


def replay(path: str, plugin=None) -> dict:
    import torch

    ops = list(csv.DictReader(open(path)))
    live, live_bytes, peak_live = {}, 0, 0
    held = Held(plugin)
    for op in ops:
        key, size = int(op["id"]), int(op["bytes"])
        if op["op"] == "a":
            live[key] = torch.empty(size, dtype=torch.uint8, device="cuda")
            live_bytes += size
            peak_live = max(peak_live, live_bytes)
            if plugin:
                held.now()
        else:
            del live[key]
            live_bytes -= size
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    not_live = free + held.now() - live_bytes
    peak_held = held.peak_held()
    step = 64 * 2**20
    lo, hi = 0, not_live // step + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            block = torch.empty(mid * step, dtype=torch.uint8, device="cuda")
            del block
            lo = mid
        except held.out_of_memory:
            hi = mid
    arena_conf = os.environ.get("CUVMM_ARENA_CONF")
    return {
        "allocator": ("cuvmm_plugin" + (":" + arena_conf if arena_conf else "")) if plugin
        else os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or "default",
        "peak_live_GiB": peak_live / 2**30,
        "peak_reserved_GiB": peak_held / 2**30,
        "utilization": peak_live / peak_held if peak_held else 0.0,
        "largest_after_GiB": lo * step / 2**30,
        "largest_after": lo * step / not_live,
    }


def replay_for_plan(path: str, name: str, max_points: int, plugin=None) -> str:
    """The trace replayed as cuvmm-plan's replay_trace does, as its replay and point lines."""
    import torch

    ops = list(csv.DictReader(open(path)))
    held_now = Held(plugin)
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
                except held_now.out_of_memory:
                    failed += 1
                seconds += time.perf_counter() - start
                if plugin:
                    held_now.now()
        elif key in live:
            start = time.perf_counter()
            del live[key]
            seconds += time.perf_counter() - start
            requested -= size
        peak_requested = max(peak_requested, requested)
        if i % stride == 0 or i + 1 == len(ops):
            held = held_now.now()
            points.append(f"point {i} {requested} {held}")
            if held:
                utilization.append(requested / held)
    live.clear()
    torch.cuda.synchronize()
    mean = sum(utilization) / len(utilization) if utilization else 0.0
    peak_held = held_now.peak_held()
    head = f"replay {name} {len(ops)} {failed} {seconds:.9g} {peak_requested} {peak_held} {mean:.9g}"
    return "\n".join([head] + points)


def check() -> int:
    try:
        import torch
    except ImportError:
        return 3
    return 0 if torch.cuda.is_available() else 3


def take_plugin(args: list):
    """Removes `--plugin PATH` from `args`; returns PATH (None without it, "" when PATH is missing)."""
    if "--plugin" not in args:
        return None
    at = args.index("--plugin")
    if at + 1 >= len(args):
        del args[at:]
        return ""
    plugin = args[at + 1]
    del args[at:at + 2]
    return plugin


def take_plugin_confs(args: list) -> list:
    """Removes every `--plugin-conf CONF` from `args`; returns the CONFs (None for one missing)."""
    confs = []
    while "--plugin-conf" in args:
        at = args.index("--plugin-conf")
        confs.append(args[at + 1] if at + 1 < len(args) else None)
        del args[at:at + 2]
    return confs


def main() -> int:
    args = sys.argv[1:]
    if args == ["--check"]:
        return check()
    plugin = take_plugin(args)
    plugin_confs = take_plugin_confs(args)
    if plugin == "" or (plugin is not None and not os.path.isfile(plugin)):
        print(f"torch_trace.py: --plugin wants the path of libcuvmm_torch.so, not '{plugin}'", file=sys.stderr)
        return 2
    for conf in plugin_confs:
        if plugin is None:
            print("torch_trace.py: --plugin-conf needs --plugin", file=sys.stderr)
            return 2
        if not conf or any(c.isspace() for c in conf):
            print(f"torch_trace.py: --plugin-conf wants a CUVMM_ARENA_CONF text without spaces, not '{conf or ''}'",
                  file=sys.stderr)
            return 2
    if len(args) == 4 and args[1] == "--one-plan":
        print(replay_for_plan(args[0], args[2], int(args[3]), plugin))
        return 0
    if len(args) == 2 and args[1] == "--one":
        print(json.dumps(replay(args[0], plugin)))
        return 0
    plan = len(args) == 3 and args[1] == "--plan"
    if not (len(args) == 1 or plan):
        print(__doc__, file=sys.stderr)
        return 2
    # (PYTORCH_CUDA_ALLOC_CONF, name, plug-in, CUVMM_ARENA_CONF) of each replay's process
    configurations = [("", "pytorch", None, ""), ("expandable_segments:True", "pytorch_expandable_segments", None, "")]
    if plugin is not None:
        for arena_conf in [os.environ.get("CUVMM_ARENA_CONF", "")] + plugin_confs:
            name = "pytorch_cuvmm_plugin" + (":" + arena_conf if arena_conf else "")
            configurations.append(("", name, os.path.abspath(plugin), arena_conf))
    failed = 0
    for conf, name, one_plugin, arena_conf in configurations:
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        env.pop("CUVMM_ARENA_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        if arena_conf:
            env["CUVMM_ARENA_CONF"] = arena_conf
        one = ["--one-plan", name, args[2]] if plan else ["--one"]
        if one_plugin:
            one += ["--plugin", one_plugin]
        sys.stdout.flush()
        status = subprocess.run([sys.executable, __file__, args[0]] + one, env=env).returncode
        if status != 0:  # the others still run and print
            print(f"torch_trace.py: the {name} replay failed with exit status {status}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
