"""bench/torch_allocators.py's parts that need no GPU and no torch: the random traces and the conversion of
a recorded PyTorch memory snapshot into cuvmm's trace CSV, its modes as the results pages name them, its child
processes' options, and the decoder's per-step driver work and warm passes with stand-ins for cuvmm_torch and
torch's profiler."""
import importlib.util
import pathlib
import sys
import tempfile
import types
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("torch_allocators", ROOT / "bench" / "torch_allocators.py")
ta = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ta)
results_spec = importlib.util.spec_from_file_location("results", ROOT / "scripts" / "results.py")
results = importlib.util.module_from_spec(results_spec)
results_spec.loader.exec_module(results)


def event(action, addr, size):
    return {"action": action, "addr": addr, "size": size, "stream": 0}


class SnapshotTrace(unittest.TestCase):
    def test_allocations_and_completed_frees_become_trace_operations_in_order(self):
        snapshot = {"device_traces": [[], [
            event("segment_alloc", 0x1000, 2 << 20),
            event("alloc", 0x1000, 1024),
            event("alloc", 0x1400, 2048),
            event("free_requested", 0x1000, 1024),  # waits for a stream: freed at free_completed
            event("free_completed", 0x1000, 1024),
            event("free_completed", 0x9000, 512),   # allocated before the recording began
            event("alloc", 0x1000, 4096),            # the same address again: a new allocation
            event("free_completed", 0x1400, 2048),
        ]]}
        self.assertEqual(ta.snapshot_trace(snapshot, 1),
                         [("a", 0, 1024), ("a", 1, 2048), ("f", 0, 1024), ("a", 2, 4096), ("f", 1, 2048)])
        self.assertEqual(ta.snapshot_trace(snapshot, 0), [])

    def test_the_csv_has_cuvmms_header_and_one_line_per_operation(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "decoder.csv"
            ta.write_trace(str(path), [("a", 0, 1024), ("a", 1, 2048), ("f", 0, 1024)])
            self.assertEqual(path.read_text(), "op,id,bytes\na,0,1024\na,1,2048\nf,0,1024\n")

    def test_the_decoders_child_gets_the_trace_file_and_a_random_workloads_does_not(self):
        parent = ta.make_parser().parse_args(["decoder", "--trace-out", "/tmp/d.csv"])
        decoder = ta.make_parser().parse_args(ta.child_command("decoder", "default", parent)[2:])
        random = ta.make_parser().parse_args(ta.child_command("random:1", "default", parent)[2:])
        self.assertEqual((decoder.child, decoder.trace_out, random.trace_out), (True, "/tmp/d.csv", None))

    def test_only_the_decoders_child_makes_the_warm_passes(self):
        parent = ta.make_parser().parse_args(["all", "--warm-passes"])
        decoder = ta.make_parser().parse_args(ta.child_command("decoder", "default", parent)[2:])
        random = ta.make_parser().parse_args(ta.child_command("random:1", "default", parent)[2:])
        self.assertEqual((decoder.warm_passes, random.warm_passes), (True, False))
        plain = ta.make_parser().parse_args(["decoder"])
        self.assertFalse(ta.make_parser().parse_args(ta.child_command("decoder", "default", plain)[2:]).warm_passes)


class RandomTraces(unittest.TestCase):
    def test_every_allocation_is_freed_at_most_once_and_after_it_was_made(self):
        with tempfile.TemporaryDirectory() as tmp:
            path, = ta.write_traces(tmp, [2], 2000, 1 << 30)
            lines = pathlib.Path(path).read_text().splitlines()
        self.assertEqual(lines[0], "op,id,bytes")
        live, frees = {}, 0
        for line in lines[1:]:
            op, block, size = line.split(",")
            if op == "a":
                self.assertNotIn(block, live)
                live[block] = size
            else:
                self.assertEqual(live.pop(block), size)
                frees += 1
        self.assertEqual(len(live) + frees, 2000)
        self.assertGreater(frees, 0)


class Modes(unittest.TestCase):
    def test_every_mode_has_a_name_on_the_results_pages_and_only_cuvmms_set_arena_options(self):
        self.assertEqual(set(ta.MODES), set(results.TORCH_MODE_NAMES))
        for mode, env in ta.MODES.items():
            self.assertEqual("CUVMM_BENCH_ENABLE" in env, mode.startswith("cuvmm"), mode)
            self.assertTrue(mode.startswith("cuvmm") or "CUVMM_ARENA_CONF" not in env, mode)
        self.assertEqual(ta.MODES["cuvmm_frugal"]["CUVMM_ARENA_CONF"], "max_idle_percent:5,share_large_page_tails:false")


class StepDriverWork(unittest.TestCase):
    """What the decoder records per step of the Arena's driver calls (a stand-in cuvmm_torch gives the stats)."""

    def setUp(self):
        stats = {k: 0.25 * (i + 1) for i, k in enumerate(ta.DRIVER_SECONDS)}
        stats.update(pages_moved=7, chunks_created=11, host_waits=2, maps=99)
        sys.modules["cuvmm_torch"] = types.SimpleNamespace(stats=lambda: stats)

    def tearDown(self):
        del sys.modules["cuvmm_torch"]

    def test_the_arena_reports_its_driver_seconds_summed_and_its_page_counts(self):
        self.assertEqual(ta.step_driver_work("cuvmm_idle_5"),
                         {"driver_seconds": 0.25 + 0.5 + 0.75 + 1.0 + 1.25, "pages_moved": 7, "chunks_created": 11,
                          "host_waits": 2})

    def test_pytorchs_allocators_report_nothing(self):
        self.assertEqual(ta.step_driver_work("expandable"), {})
        self.assertEqual(ta.step_driver_work("default"), {})


def profiler_event(device_type: str, microseconds: int):
    return types.SimpleNamespace(device_type=device_type,
                                 time_range=types.SimpleNamespace(elapsed_us=lambda: microseconds))


class WarmPasses(unittest.TestCase):
    """The decoder's passes over shapes the allocator has served, with stand-ins for torch's profiler and
    cuvmm_torch: each step timed with its driver work, then each step's device busy time."""

    def setUp(self):
        self.calls = []
        self.stats = {k: 0.0 for k in ta.DRIVER_SECONDS}
        self.stats.update(pages_moved=0, chunks_created=0, host_waits=0)
        stats = self.stats
        events = [[profiler_event("CUDA", 1500), profiler_event("CPU", 9000), profiler_event("CUDA", 500)],
                  [profiler_event("CUDA", 250_000)]]

        class Profile:
            def __init__(self, activities):
                assert activities == ["cuda activity"]

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def events(self):
                return events.pop(0)

        torch = types.ModuleType("torch")
        autograd = types.ModuleType("torch.autograd")
        autograd.DeviceType = types.SimpleNamespace(CUDA="CUDA")
        profiler = types.ModuleType("torch.profiler")
        profiler.ProfilerActivity = types.SimpleNamespace(CUDA="cuda activity")
        profiler.profile = Profile
        self.saved = {name: sys.modules.get(name) for name in ("torch", "torch.autograd", "torch.profiler", "cuvmm_torch")}
        sys.modules.update({"torch": torch, "torch.autograd": autograd, "torch.profiler": profiler,
                            "cuvmm_torch": types.SimpleNamespace(stats=lambda: dict(stats))})

    def tearDown(self):
        for name, module in self.saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module

    def train_step(self, step, batch, seq):
        self.calls.append((step, batch, seq))
        if step == 1 and len(self.calls) == 2:  # the warm pass's second step moves pages
            self.stats["map_seconds"] += 0.5
            self.stats["pages_moved"] += 3
        return 1.0

    def test_each_step_runs_twice_in_order_and_reports_its_own_driver_work_and_device_time(self):
        passes = ta.warm_passes("cuvmm", self.train_step, [(2, 128), (4, 256)])
        self.assertEqual(self.calls, [(0, 2, 128), (1, 4, 256), (0, 2, 128), (1, 4, 256)])
        warm = passes["warm_steps"]
        self.assertEqual([(w["batch"], w["sequence"], w["driver_seconds"], w["pages_moved"]) for w in warm],
                         [(2, 128, 0.0, 0), (4, 256, 0.5, 3)])
        self.assertTrue(all(w["seconds"] >= 0 for w in warm))
        self.assertEqual(passes["profiled_steps"], [{"batch": 2, "sequence": 128, "device_seconds": 0.002},
                                                    {"batch": 4, "sequence": 256, "device_seconds": 0.25}])

    def test_pytorchs_allocators_record_no_driver_work(self):
        passes = ta.warm_passes("expandable", self.train_step, [(2, 128)])
        self.assertEqual(set(passes["warm_steps"][0]), {"batch", "sequence", "seconds"})


if __name__ == "__main__":
    unittest.main()
