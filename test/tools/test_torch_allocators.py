"""bench/torch_allocators.py's trace files, which need no GPU and no torch: the random traces and the
conversion of a recorded PyTorch memory snapshot into cuvmm's trace CSV; and its modes as the
results pages name them."""
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


if __name__ == "__main__":
    unittest.main()
