#!/usr/bin/env python3
"""scripts/bench-results.sh without a GPU: what it would run (BENCH_DRY_RUN=1), checked against what
scripts/results.py reads and the protocol the results folders describe, and its refusal where
nvidia-smi finds no GPU."""
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "bench-results.sh"
FREE_MIB = 81079


def dry_run(out: str, steps: str | None = None, *meson_options: str, resume: bool = False) -> list[str]:
    env = dict(os.environ, BENCH_DRY_RUN="1", BENCH_FREE_MIB=str(FREE_MIB), PYTHON="python3",
               BENCH_RESUME="1" if resume else "0")
    if steps is not None:
        env["BENCH_STEPS"] = steps
    done = subprocess.run(["bash", str(SCRIPT), out, *meson_options], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


class DryRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = str(pathlib.Path(self.tmp.name) / "out")
        self.lines = dry_run(self.out, None, "-Drmm_root=/wheels")
        self.work = self.out + "/work"

    def tearDown(self):
        self.tmp.cleanup()

    def commands(self, pattern: str) -> list[str]:
        return [line for line in self.lines if re.search(pattern, line)]

    def test_every_file_results_py_reads_is_written(self):
        written = {m for line in self.lines for m in re.findall(r"(?:--benchmark_out=|--json |--filename=|> )(\S+)", line)}
        names = {pathlib.Path(p).name for p in written if pathlib.Path(p).parent == pathlib.Path(self.out)}
        expected = {"nvidia-smi.csv", "bench_arena.json", "bench_arena_trace.json", "bench_arena_random_1.json",
                    "bench_arena_random_2.json", "bench_arena_random_3.json", "bench_growth.json", "compression.json",
                    "torch_allocators.json", "torch_allocators_decoder.json"}
        self.assertEqual(names, expected)
        results_py = (ROOT / "scripts" / "results.py").read_text()
        for name in expected - {"bench_arena_random_1.json", "bench_arena_random_2.json", "bench_arena_random_3.json"}:
            self.assertIn(f'"{name}"', results_py)
        self.assertIn('"bench_arena_random_*.json"', results_py)
        # The programs that write their own names into a folder get OUT_DIR itself.
        for program in ("cuvmm-plan --profile full", "bench/torch_decode.py", "bench/torch_growth.py"):
            line, = self.commands(re.escape(program))
            self.assertIn(f"--out {self.out} ", line + " ")

    def test_the_build_takes_the_meson_options(self):
        self.assertEqual(self.lines[1], "meson setup build-bench -Dbenchmarks=enabled -Dtests=disabled -Drmm_root=/wheels")
        self.assertEqual(self.lines[2], "meson compile -C build-bench")

    def test_each_allocator_replays_each_trace_in_a_process_of_its_own(self):
        filters = ["^trace/arena/page_MiB:2/", "^trace/arena_max_idle/", "^trace/arena_whole_chunks/",
                   "^trace/cudaMallocAsync/", "^trace/rmm_pool/", "^trace/rmm_arena/"]
        traces, = self.commands(r"torch_allocators\.py traces")
        self.assertEqual(traces, f"python3 bench/torch_allocators.py traces --out {self.work}/traces "
                                 f"--free-bytes {FREE_MIB * 1024 * 1024}")
        for name, trace in [("bench_arena_trace", None)] + [(f"bench_arena_random_{s}", f"{self.work}/traces/random_{s}.csv")
                                                           for s in (1, 2, 3)]:
            runs = self.commands(rf"--benchmark_out={re.escape(self.work)}/{name}\.\d\.json")
            self.assertEqual(len(runs), len(filters), name)
            for run, f in zip(runs, filters):
                self.assertIn(f"--benchmark_filter={f} --benchmark_repetitions=3", run)
                self.assertEqual("CUVMM_TRACE_FILE=" in run, trace is not None)
                if trace:
                    self.assertIn(f"CUVMM_TRACE_FILE={trace} ", run)
            merge, = self.commands(rf"merge_runs\.py .*> {re.escape(self.out)}/{name}\.json$")
            self.assertNotIn("--median", merge)
            self.assertEqual(merge.split()[2:-2], [f"{self.work}/{name}.{i}.json" for i in range(1, len(filters) + 1)])

    def test_each_growth_runs_in_three_fresh_processes_of_one_iteration_and_the_median_is_kept(self):
        runs = self.commands(r"bench_growth ")
        self.assertEqual(len(runs), 5 * 4 * 3)
        self.assertTrue(all(r.startswith("env CUVMM_BENCH_ITERATIONS=1 build-bench/bench/bench_growth ") for r in runs))
        filters = [re.search(r"--benchmark_filter=(\S+)", r).group(1) for r in runs]
        self.assertEqual({f: filters.count(f) for f in filters},
                         {f"^grow/{s}/{g}/": 3 for g in ("256MiB/4KiB", "1GiB/1MiB", "4GiB/64MiB", "64GiB/64MiB", "120GiB/64MiB")
                          for s in ("growable", "growable_no_map_ahead", "preallocated", "cudaMalloc_copy_grow_2x")})
        merge, = self.commands(r"merge_runs\.py --median")
        parts = merge.split()[3:-2]
        self.assertEqual(parts, [re.search(r"--benchmark_out=(\S+)", r).group(1) for r in runs])
        self.assertEqual(len(set(parts)), 60)

    def test_the_torch_steps_build_cuvmm_torch_first(self):
        torch_lines = self.commands(r"torch_allocators\.py (random|decoder)|torch_decode\.py|torch_growth\.py|gpu-check\.sh")
        self.assertEqual(torch_lines[0], f"env MODES= CPU_TESTS=0 PYTHON=python3 bash test/torch/gpu-check.sh "
                                         f"{self.work}/torch")
        self.assertIn(f"python3 bench/torch_allocators.py random --repeats 3 --json {self.out}/torch_allocators.json",
                      torch_lines)
        self.assertIn(f"python3 bench/torch_allocators.py decoder --repeats 3 --json {self.out}/torch_allocators_decoder.json",
                      torch_lines)
        self.assertIn(f"python3 bench/torch_decode.py --out {self.out} --batch 4 --new-tokens 384 --repeats 3 --processes 5",
                      torch_lines)


class Steps(unittest.TestCase):
    def test_bench_steps_picks_the_steps(self):
        with tempfile.TemporaryDirectory() as tmp:
            lines = dry_run(tmp, "decode")
        self.assertEqual([line.split()[0] for line in lines], ["nvidia-smi", "meson", "meson", "env", "python3"])
        self.assertIn("bench/torch_decode.py", lines[-1])

    def test_without_a_gpu_it_measures_nothing_and_says_so(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = pathlib.Path(tmp) / "bin"
            fake.mkdir()
            smi = fake / "nvidia-smi"
            smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
            smi.chmod(0o755)
            env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
            env.pop("BENCH_DRY_RUN", None)
            done = subprocess.run(["bash", str(SCRIPT), f"{tmp}/out"], env=env, capture_output=True, text=True)
            self.assertEqual(done.returncode, 77)
            self.assertIn("nvidia-smi finds no GPU here", done.stderr)
            self.assertFalse((pathlib.Path(tmp) / "out").exists())


class Resume(unittest.TestCase):
    """BENCH_RESUME=1 over an OUT_DIR that a run cut short left: what it wrote whole is kept, the rest runs."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = pathlib.Path(self.tmp.name) / "out"
        self.work = self.out / "work"
        (self.work / "traces").mkdir(parents=True)
        (self.work / "torch" / "site").mkdir(parents=True)
        whole = '{"benchmarks": []}'
        (self.work / "growth.growable.1GiB_1MiB.1.json").write_text(whole)
        (self.work / "growth.growable.1GiB_1MiB.2.json").write_text('{"benchmarks": [{"name": ')  # cut short
        (self.work / "bench_arena_trace.1.json").write_text(whole)
        (self.work / "traces" / "random_3.csv").write_text("op,id,bytes\n")
        (self.out / "torch_decode.json").write_text(whole)
        (self.out / "nvidia-smi.csv").write_text("name\nNVIDIA Test GPU\n")

    def tearDown(self):
        self.tmp.cleanup()

    def test_what_was_written_whole_is_kept_and_the_rest_runs(self):
        lines = dry_run(str(self.out), None, resume=True)
        joined = "\n".join(lines)
        growth = [line for line in lines if " build-bench/bench/bench_growth " in " " + line]
        self.assertEqual(len(growth), 5 * 4 * 3 - 1)
        self.assertNotIn(f"--benchmark_out={self.work}/growth.growable.1GiB_1MiB.1.json", joined)
        self.assertIn(f"--benchmark_out={self.work}/growth.growable.1GiB_1MiB.2.json", joined)
        merge, = [line for line in lines if "merge_runs.py --median" in line]
        self.assertEqual(len(merge.split()[3:-2]), 60)  # the kept part is merged with the others
        self.assertEqual(len([line for line in lines if f"--benchmark_out={self.work}/bench_arena_trace." in line]), 5)
        trace_merge, = [line for line in lines if re.search(r"merge_runs\.py .*bench_arena_trace\.json$", line)]
        self.assertIn(f"{self.work}/bench_arena_trace.1.json", trace_merge)
        for gone in ("nvidia-smi", "torch_allocators.py traces", "gpu-check.sh", "torch_decode.py"):
            self.assertNotIn(gone, joined)
        self.assertIn("torch_allocators.py random", joined)

    def test_without_it_everything_runs_again(self):
        lines = dry_run(str(self.out), None)
        joined = "\n".join(lines)
        self.assertEqual(len([line for line in lines if " build-bench/bench/bench_growth " in " " + line]), 60)
        for again in ("nvidia-smi", "torch_allocators.py traces", "gpu-check.sh", "torch_decode.py"):
            self.assertIn(again, joined)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
