"""scripts/results.py on synthetic result folders: what a folder's README and tables say is what its files hold.

Run by meson as the test `results_script` (suite tools); `python3 test/tools/test_results.py` alone works too.
"""
import importlib.util
import json
import pathlib
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("results", ROOT / "scripts" / "results.py")
results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(results)

GIB = 1 << 30
SMI = "name, memory.total [MiB], memory.free [MiB], driver_version\nNVIDIA Test GPU, 81559 MiB, 81079 MiB, 580.1\n"


def trace_run(name: str, seconds: float, utilization: float, failed: int = 0) -> dict:
    return {"name": f"trace/{name}/iterations:1/repeats:3", "run_type": "iteration", "replay_s": seconds,
            "utilization": utilization, "failed_allocations": failed}


def trace_file(runs: dict[str, list[float]], failed: dict[str, int] | None = None) -> dict:
    """bench_arena's JSON for `runs` (name: the replay seconds of each repetition), with the aggregates that
    Google Benchmark adds, which results.py must leave out."""
    failed = failed or {}
    benchmarks = []
    for name, times in runs.items():
        benchmarks += [trace_run(name, t, 0.5 + i / 10, failed.get(name, 0)) for i, t in enumerate(times)]
        benchmarks.append({"name": f"trace/{name}/iterations:1/repeats:3_median", "run_type": "aggregate",
                           "aggregate_name": "median", "replay_s": 99.0, "utilization": 0.0})
    return {"context": {}, "benchmarks": benchmarks}


class BenchmarksOnlyFolder(unittest.TestCase):
    """A folder with no cuvmm-plan run: nvidia-smi.csv, C++ trace replays, the decoder."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = pathlib.Path(self.tmp.name) / "testgpu"
        self.path.mkdir()
        (self.path / "nvidia-smi.csv").write_text(SMI)
        (self.path / "bench_arena_random_1.json").write_text(json.dumps(trace_file(
            {"rmm_pool": [0.03, 0.2, 0.18], "rmm_arena": [0.02, 0.02, 0.02], "arena/page_MiB:2": [0.3, 0.2, 0.4],
             "arena_max_idle/percent:5": [0.6, 0.5, 0.45], "cudaMallocAsync": [0.41, 0.4, 0.39]},
            failed={"rmm_arena": 9})))
        (self.path / "torch_allocators_decoder.json").write_text(json.dumps({
            "results": [{"workload": "decoder", "mode": "default", "steps": 35}],
            "summary": [{"workload": "decoder", "mode": "default", "repeats": 1, "seconds": 6.5, "time_vs_default": 1.0,
                         "peak_reserved": 70 * GIB, "largest_after": 75 * GIB, "segments_allocated": 555},
                        {"workload": "decoder", "mode": "cuvmm", "repeats": 1, "seconds": 6.7, "time_vs_default": 1.03,
                         "peak_reserved": 67 * GIB, "largest_after": 76 * GIB, "driver_seconds": 1.5,
                         "chunks_created": 100, "pages_moved": 20}],
            "decoder_losses_identical": True}))
        self.folder = results.Folder(self.path)

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_gpu_is_named_by_nvidia_smi(self):
        self.assertIsNone(self.folder.plan)
        self.assertEqual(self.folder.device, "NVIDIA Test GPU")
        self.assertEqual(self.folder.smi["memory.total"], "81559 MiB")

    def test_a_trace_replay_is_the_median_of_its_repetitions_over_the_peers_medians(self):
        rows = {row[1]: row for row in results.arena_trace_rows(self.folder)}
        self.assertEqual(rows["`cuvmm::Arena` (its defaults)"],
                         ["`random:1`", "`cuvmm::Arena` (its defaults)", "0.300 (0.200-0.400)", "0.75", "1.67", "0.500"])
        # The utilization is the median run's: 0.5 s was the second repetition, of utilization 0.6.
        self.assertEqual(rows["`cuvmm::Arena`, max_idle_percent 5"][2:], ["0.500 (0.450-0.600)", "1.25", "2.78", "0.600"])
        self.assertEqual(rows["RMM's `pool_memory_resource` (grown from empty)"][2:4], ["0.180 (0.030-0.200)", "0.45"])

    def test_a_replay_with_failed_allocations_says_so_and_is_no_peer(self):
        rows = {row[1]: row for row in results.arena_trace_rows(self.folder)}
        self.assertEqual(rows["RMM's `arena_memory_resource` (its default size)"][2:], ["9 allocations failed", "-", "-", "-"])

    def test_the_readme_has_the_benchmarks_and_no_plan_section(self):
        readme = results.folder_readme(self.folder)
        self.assertIn("# Results on the NVIDIA Test GPU", readme)
        self.assertIn("81559 MiB, driver 580.1", readme)
        self.assertIn("| `bench_arena_random_N.json` |", readme)
        self.assertNotIn("| `bench_arena_trace.json` |", readme)
        self.assertIn("the median of 3 runs", readme)
        self.assertIn("trained for 35 timed steps", readme)
        self.assertIn("| cuvmm_torch (the Arena) | 6.70 | 1.03 | 67.0 GiB | 76.0 GiB | 1500 ms: 100 pages created, 20 moved |",
                      readme)
        self.assertIn("| PyTorch's caching allocator | 6.50 | 1.00 | 70.0 GiB | 75.0 GiB | 555 segments |", readme)
        for plan_section in ("## Growth", "## Allocation trace", "## Driver calls", "plan.json"):
            self.assertNotIn(plan_section, readme)

    def test_the_headline_leaves_out_a_folder_without_a_plan(self):
        self.assertEqual(results.headline([self.folder]), [])

    def test_cuvmm_plans_full_trace_comes_from_bench_arena_trace_json(self):
        (self.path / "bench_arena_trace.json").write_text(json.dumps(trace_file({"cudaMallocAsync": [0.2]})))
        folder = results.Folder(self.path)
        self.assertEqual(list(folder.bench_arena_traces), ["full", "random_1"])
        self.assertIn("| `bench_arena_trace.json` |", results.folder_readme(folder))


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
