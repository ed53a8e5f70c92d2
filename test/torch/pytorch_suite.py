"""PyTorch's own CUDA allocator tests, run on PyTorch's allocator and with cuvmm_torch enabled.

    python test/torch/pytorch_suite.py TEST_FILE OUT_DIR [--workers N] [--chunk N] [--timeout S]
                                       [--modes torch,cuvmm] [--selection FILE]

TEST_FILE is a test file of PyTorch's repository (test/test_cuda.py, at or near the installed torch's
version; the project does not ship it). Wheels found beside it (a pure-Python dependency such as
expecttest that the machine lacks) go on the tests' PYTHONPATH.

1. The test ids ("Class.test_name") of TEST_FILE are listed by a child process that imports it, and
   those that a line of the selection file (pytorch_suite_selection.txt) matches are kept. A line
   "serial: REGEX" marks tests that must have the GPU alone (PyTorch marks them @serialTest too:
   their marks are read as well).
2. The selected tests run in child processes, WORKERS at once, a chunk of tests per process (the
   chunks of both modes side by side), then each mode's serial tests in one process with the GPU to
   itself. Each child writes a line when a test starts and one when it ends, so a process that dies
   (a signal, an abort) or hangs past TIMEOUT seconds costs only the test it was running: that test
   runs again alone in a process of its own, whose result is the test's ("crash" or "timeout" when
   it dies again), and the tests of the chunk that had not started run on in a new process.
   Mode "torch" is PyTorch's own allocator; mode "cuvmm" sets CUVMM_TORCH_ENABLE=1 and puts
   pytorch_suite_site/ on PYTHONPATH, whose sitecustomize makes cuvmm_torch PyTorch's allocator in
   every Python process before anything else (the tests' own child processes too), or ends the
   process when it cannot.
3. OUT_DIR gets, per mode, MODE.json (each test's outcome, message and time) and MODE.junit.xml, and
   logs/ (each child's output); comparison.json and comparison.md sort the tests into: passed in
   both, passed on PyTorch's allocator only (each with cuvmm's failure), passed with cuvmm only,
   failed in both, crashed or timed out in either, skipped in both, other.

Exit status: 0 when every test that passed on PyTorch's allocator passed with cuvmm and nothing
crashed; 1 otherwise; 2 for bad arguments or when the tests could not be listed.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "pytorch_suite_site")
DEFAULT_SELECTION = os.path.join(HERE, "pytorch_suite_selection.txt")
MODES = ("torch", "cuvmm")
# Outcomes of one test; "crash" and "timeout" are given by the driver, the others by the child.
PASSED, FAILED, ERROR, SKIPPED, CRASH, TIMEOUT = "passed", "failed", "error", "skipped", "crash", "timeout"
# A test PyTorch marks as an expected failure that failed: it counts as passed, but its reason is
# compared across modes (cuvmm failing it for another reason is not a pass).
XFAIL = "expected failure"


# ---------------------------------------------------------------- the child: lists or runs tests

def _import_test_file(path: str):
    """Imports TEST_FILE as a module the way PyTorch's run_tests would see it, with the shims that
    the installed torch needs (see _shim_common_utils)."""
    import importlib.util
    sys.argv = [path]  # common_utils parses sys.argv: it must see no option of ours
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    _shim_common_utils()
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    common_utils = sys.modules.get("torch.testing._internal.common_utils")
    if common_utils is not None and hasattr(common_utils, "parse_cmd_line_args"):
        common_utils.parse_cmd_line_args()  # what run_tests does first: seeds, executor flags
    return module


def _shim_common_utils() -> None:
    """Names that PyTorch's test file imports from torch.testing._internal.common_utils but that the
    installed torch no longer (or not yet) defines, given the value they had. The test file itself is
    never changed."""
    try:
        from torch.testing._internal import common_utils
    except ImportError:  # a test file that does not use PyTorch's test helpers
        return
    if not hasattr(common_utils, "TEST_CUDAMALLOCASYNC"):
        # True when PyTorch's allocator backend is cudaMallocAsync, which no mode here selects.
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "") + "," + os.environ.get("PYTORCH_ALLOC_CONF", "")
        common_utils.TEST_CUDAMALLOCASYNC = "backend:cudaMallocAsync" in conf.replace(" ", "")


def _iter_tests(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _iter_tests(item)
        else:
            yield item


def _test_key(test) -> str:
    return f"{type(test).__name__}.{test._testMethodName}"


def _is_marked_serial(test) -> bool:
    method = getattr(type(test), test._testMethodName, None)
    marks = getattr(method, "pytestmark", [])
    return any(getattr(mark, "name", "") == "serial" for mark in marks)


def child_list(test_file: str) -> int:
    module = _import_test_file(test_file)
    tests = []
    for test in _iter_tests(unittest.TestLoader().loadTestsFromModule(module)):
        if isinstance(test, unittest.TestCase) and type(test).__module__ == module.__name__:
            tests.append({"id": _test_key(test), "serial": _is_marked_serial(test)})
        elif not isinstance(test, unittest.TestCase) or "ModuleImportFailure" in type(test).__name__:
            print(f"pytorch_suite: cannot load {test}", file=sys.stderr)
            return 2
    json.dump(tests, sys.stdout)
    return 0


class _StreamingResult(unittest.TestResult):
    """Writes one JSON line when a test starts and one when it ends, flushed at once, so that the
    driver knows which test a dying process was running."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream
        self._start = 0.0
        self._outcome = None

    def _write(self, record) -> None:
        self._stream.write(json.dumps(record) + "\n")
        self._stream.flush()

    def startTest(self, test):
        super().startTest(test)
        self._start = time.monotonic()
        self._outcome = (PASSED, "")
        self._write({"event": "start", "id": _test_key(test)})

    def _set(self, outcome, message):
        # A test can fail in the test and error in tearDown: the first failure is kept.
        if self._outcome[0] in (PASSED, SKIPPED, XFAIL) or outcome in (FAILED, ERROR) and not self._outcome[1]:
            self._outcome = (outcome, message)

    def addError(self, test, err):
        super().addError(test, err)
        self._set(ERROR, self._exc_info_to_string(err, test))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(FAILED, self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(SKIPPED, str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(XFAIL, self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(FAILED, "unexpected success")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(FAILED if failed else ERROR, f"{subtest}: " + self._exc_info_to_string(err, test))

    def stopTest(self, test):
        super().stopTest(test)
        outcome, message = self._outcome
        self._write({"event": "end", "id": _test_key(test), "outcome": outcome, "message": message,
                     "seconds": round(time.monotonic() - self._start, 3)})


def child_run(test_file: str, progress: str, ids: list[str]) -> int:
    if os.environ.get("CUVMM_TORCH_ENABLE", "") not in ("", "0"):
        import cuvmm_torch  # enabled by sitecustomize already; this only checks it
        if not cuvmm_torch.is_enabled():
            print("pytorch_suite: cuvmm_torch is not PyTorch's allocator in this process", file=sys.stderr)
            return 3
    module = _import_test_file(test_file)
    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for test_id in ids:
        suite.addTests(loader.loadTestsFromName(test_id, module))
    with open(progress, "a", encoding="utf-8") as stream:
        suite.run(_StreamingResult(stream))
    return 0


# ---------------------------------------------------------------- the driver

def read_selection(path: str):
    """(patterns, serial patterns) of the selection file: one regular expression a line, matched
    against the whole "Class.test_name"; '#' starts a comment; "serial: REGEX" marks serial tests."""
    patterns, serial = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("serial:"):
                serial.append(re.compile(line[len("serial:"):].strip()))
            else:
                patterns.append(re.compile(line))
    return patterns, serial


def mode_environment(mode: str, test_file: str) -> dict:
    env = dict(os.environ)
    extra = sorted(os.path.join(os.path.dirname(os.path.abspath(test_file)), name)
                   for name in os.listdir(os.path.dirname(os.path.abspath(test_file))) if name.endswith(".whl"))
    paths = extra + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.pop("CUVMM_TORCH_ENABLE", None)
    if mode == "cuvmm":
        paths.insert(0, SITE)
        env["CUVMM_TORCH_ENABLE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def list_tests(args) -> list[dict]:
    env = mode_environment("torch", args.test_file)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-list", args.test_file],
                          env=env, capture_output=True, text=True, timeout=600)
    with open(os.path.join(args.out, "logs", "list.log"), "w", encoding="utf-8") as log:
        log.write(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"pytorch_suite: listing the tests of {args.test_file} failed "
                         f"(exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def preflight(args) -> bool:
    """Whether a process of the cuvmm mode has cuvmm_torch as PyTorch's allocator and can allocate
    through it; its status (python -m cuvmm_torch) goes to OUT_DIR/cuvmm_torch-status.json."""
    script = ("import json, cuvmm_torch\n"
              "assert cuvmm_torch.is_enabled(), 'cuvmm_torch is not enabled'\n"
              "import torch\n"
              "if torch.cuda.is_available():\n"
              "    x = torch.full((1 << 20,), 7, dtype=torch.int32, device='cuda')\n"
              "    assert int(x.sum()) == 7 << 20, 'a tensor allocated through cuvmm reads back wrong'\n"
              "print(json.dumps(cuvmm_torch.status(), indent=1, sort_keys=True, default=str))\n")
    proc = subprocess.run([sys.executable, "-c", script], env=mode_environment("cuvmm", args.test_file),
                          capture_output=True, text=True, timeout=300)
    with open(os.path.join(args.out, "cuvmm_torch-status.json"), "w", encoding="utf-8") as f:
        f.write(proc.stdout)
    if proc.returncode != 0:
        print(f"pytorch_suite: cuvmm_torch cannot be made PyTorch's allocator (exit {proc.returncode}):\n"
              f"{proc.stderr[-4000:]}", file=sys.stderr)
        return False
    return True


class Chunk:
    """Runs some tests in one child process, watching its progress lines."""

    def __init__(self, ids, mode, args, name):
        self.ids, self.mode, self.args, self.name = ids, mode, args, name

    def run(self) -> dict:
        logs = os.path.join(self.args.out, "logs", self.mode)
        progress = os.path.join(logs, self.name + ".jsonl")
        log_path = os.path.join(logs, self.name + ".log")
        open(progress, "w").close()
        command = [sys.executable, os.path.abspath(__file__), "--child-run", self.args.test_file, progress, *self.ids]
        results, running, since = {}, None, time.monotonic()
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(command, env=mode_environment(self.mode, self.args.test_file),
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            timed_out = False
            pending = b""  # a line the child has not finished writing
            with open(progress, "rb") as stream:
                while True:
                    finished = proc.poll() is not None
                    *lines, pending = (pending + stream.read()).split(b"\n")
                    for line in lines:
                        record = json.loads(line)
                        since = time.monotonic()
                        if record["event"] == "start":
                            running = record["id"]
                        else:
                            running = None
                            results[record["id"]] = {k: record[k] for k in ("outcome", "message", "seconds")}
                    if finished:
                        break
                    limit = self.args.timeout + (self.args.import_timeout if not results and running is None else 0)
                    if time.monotonic() - since > limit:
                        timed_out = True
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        break
                    time.sleep(0.2)
        code = proc.returncode
        unfinished = [i for i in self.ids if i not in results]
        if unfinished:
            how = (f"no result after {self.args.timeout} s" if timed_out else
                   f"the process died of signal {-code}" if code < 0 else f"the process exited with {code}")
            tail = _tail(log_path)
            for test_id in unfinished:
                if test_id == running or len(self.ids) == 1:  # alone, it is the process's death
                    outcome = TIMEOUT if timed_out else CRASH
                    results[test_id] = {"outcome": outcome, "message": f"{how} in this test\n{tail}",
                                        "seconds": round(time.monotonic() - since, 3)}
                else:
                    results[test_id] = {"outcome": "not run", "message": f"{how} before it ran", "seconds": 0}
        return results


def _tail(path: str, lines: int = 30) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def run_all(modes: list[str], tests: list[dict], args) -> dict:
    """Every selected test in every mode: {mode: {test id: result}}.

    1. the parallel tests of all modes, a chunk per process, WORKERS processes at once;
    2. the serial tests, mode after mode, each mode's in one process with the GPU to itself.
    When a process dies (or hangs) in a test, that test runs again alone in a process of its own,
    whose result is the test's ("isolated"): the crash may have been an earlier test's doing. The
    tests of the chunk that had not started yet run on in a new process ("after_crash")."""
    parallel = [t["id"] for t in tests if not t["serial"]]
    serial = [t["id"] for t in tests if t["serial"]]
    results: dict = {mode: {} for mode in modes}
    counter = iter(range(1, 1 << 30))
    for mode in modes:
        os.makedirs(os.path.join(args.out, "logs", mode), exist_ok=True)

    def run_queue(jobs, workers):
        """Runs jobs (mode, test ids, why) until every test has a result; `why` is "" for a first
        run, "isolated" or "after_crash" for a run a crash made."""
        while jobs:
            chunks = [Chunk(ids, mode, args, f"chunk{next(counter):03d}") for mode, ids, _ in jobs]
            with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
                outputs = list(pool.map(Chunk.run, chunks))
            next_jobs = []
            for (mode, ids, why), chunk in zip(jobs, outputs):
                not_started = [i for i in ids if chunk[i]["outcome"] == "not run"]
                for test_id, result in chunk.items():
                    if result["outcome"] in (CRASH, TIMEOUT) and len(ids) > 1:
                        next_jobs.append((mode, [test_id], "isolated"))
                    elif result["outcome"] != "not run":
                        results[mode][test_id] = result
                        if why:
                            result[why] = True
                if not_started == ids:  # the process died before its first test: each alone
                    next_jobs += [(mode, [test_id], "isolated") for test_id in ids]
                elif not_started:
                    next_jobs.append((mode, not_started, "after_crash"))
            jobs = next_jobs

    run_queue([(mode, parallel[i:i + args.chunk], "") for mode in modes
               for i in range(0, len(parallel), args.chunk)], args.workers)
    for mode in modes:
        if serial:
            run_queue([(mode, serial, "")], 1)
    return {mode: {t["id"]: results[mode][t["id"]] for t in tests} for mode in modes}


def write_junit(path: str, mode: str, results: dict) -> None:
    counts = {k: sum(r["outcome"] == k for r in results.values()) for k in (FAILED, ERROR, SKIPPED, CRASH, TIMEOUT)}
    suite = ET.Element("testsuite", name=f"pytorch-suite-{mode}", tests=str(len(results)),
                       failures=str(counts[FAILED]), errors=str(counts[ERROR] + counts[CRASH] + counts[TIMEOUT]),
                       skipped=str(counts[SKIPPED]),
                       time=str(round(sum(r["seconds"] for r in results.values()), 3)))
    for test_id, result in results.items():
        cls, name = test_id.split(".", 1)
        case = ET.SubElement(suite, "testcase", classname=cls, name=name, time=str(result["seconds"]))
        outcome = result["outcome"]
        if outcome == SKIPPED:
            ET.SubElement(case, "skipped", message=result["message"][:500])
        elif outcome != PASSED:
            tag = "failure" if outcome == FAILED else "error"
            element = ET.SubElement(case, tag, message=f"{outcome}: {_first_line(result['message'])}"[:500])
            element.text = result["message"]
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def _first_line(message: str) -> str:
    """The line of a traceback that says what went wrong: its last non-empty line."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith(("no result after", "the process")):
        return lines[0]
    return lines[-1]


CATEGORIES = [
    ("passed_both", "passed in both"),
    ("passed_torch_only", "passed on PyTorch's allocator only"),
    ("passed_cuvmm_only", "passed with cuvmm only"),
    ("failed_both", "failed in both"),
    ("crashed", "crashed or timed out (either mode)"),
    ("skipped_both", "skipped in both"),
    ("other", "other (skipped in one mode)"),
]


def compare(torch_results: dict, cuvmm_results: dict) -> dict:
    table = {key: [] for key, _ in CATEGORIES}
    for test_id in torch_results:
        a, b = torch_results[test_id]["outcome"], cuvmm_results[test_id]["outcome"]
        bad = (FAILED, ERROR)
        a_why, b_why = (_first_line(r[test_id]["message"]) for r in (torch_results, cuvmm_results))
        if a in (CRASH, TIMEOUT) or b in (CRASH, TIMEOUT):
            key = "crashed"
        elif a == XFAIL or b == XFAIL:  # passes where it fails as PyTorch expects, for the same reason
            key = ("passed_both" if a == b and a_why == b_why else
                   "passed_torch_only" if a == XFAIL else "passed_cuvmm_only")
        elif a == PASSED and b == PASSED:
            key = "passed_both"
        elif a == PASSED and b in bad:
            key = "passed_torch_only"
        elif b == PASSED and a in bad:
            key = "passed_cuvmm_only"
        elif a in bad and b in bad:
            key = "failed_both"
        elif a == SKIPPED and b == SKIPPED:
            key = "skipped_both"
        else:
            key = "other"
        table[key].append({"id": test_id, "torch": a, "cuvmm": b, "torch_message": a_why, "cuvmm_message": b_why})
    return table


def write_markdown(path: str, table: dict, header: str) -> None:
    lines = ["# PyTorch's CUDA allocator tests: PyTorch's allocator and cuvmm_torch", "", header, "",
             "| category | tests |", "|---|---|"]
    lines += [f"| {title} | {len(table[key])} |" for key, title in CATEGORIES]
    for key, title in CATEGORIES:
        if not table[key] or key in ("passed_both", "skipped_both"):
            continue
        lines += ["", f"## {title}", "", "| test | PyTorch's allocator | cuvmm | why (first line) |", "|---|---|---|---|"]
        for row in table[key]:
            why = row["torch_message"] if key == "failed_both" or row["cuvmm"] in (PASSED, SKIPPED) else row["cuvmm_message"]
            why = why.replace("|", "\\|")[:300]
            lines.append(f"| {row['id']} | {row['torch']} | {row['cuvmm']} | {why} |")
    for key in ("passed_both", "skipped_both"):
        if table[key]:
            title = dict(CATEGORIES)[key]
            lines += ["", f"## {title}", "", ", ".join(row["id"] for row in table[key])]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test_file")
    parser.add_argument("out")
    parser.add_argument("--selection", default=DEFAULT_SELECTION)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--chunk", type=int, default=6, help="tests per child process")
    parser.add_argument("--timeout", type=float, default=90, help="seconds one test may run")
    parser.add_argument("--import-timeout", type=float, default=120,
                        help="seconds a child may take to import torch and the test file")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not os.path.isfile(args.test_file) or any(m not in MODES for m in modes) or args.workers < 1 or args.chunk < 1:
        parser.error(f"needs an existing TEST_FILE, modes among {MODES}, workers and chunk >= 1")
    args.test_file = os.path.abspath(args.test_file)
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    start = time.monotonic()

    patterns, serial_patterns = read_selection(args.selection)
    everything = list_tests(args)
    tests = [t for t in everything if any(p.fullmatch(t["id"]) for p in patterns)]
    for t in tests:
        t["serial"] = t["serial"] or any(p.fullmatch(t["id"]) for p in serial_patterns)
    print(f"pytorch_suite: {len(tests)} of the {len(everything)} tests of {os.path.basename(args.test_file)} "
          f"selected ({sum(t['serial'] for t in tests)} serial)", flush=True)
    with open(os.path.join(args.out, "selected.json"), "w", encoding="utf-8") as f:
        json.dump(tests, f, indent=1)

    if "cuvmm" in modes and not preflight(args):
        return 2
    run_start = time.monotonic()
    results = run_all(modes, tests, args)
    for mode in modes:
        with open(os.path.join(args.out, f"{mode}.json"), "w", encoding="utf-8") as f:
            json.dump(results[mode], f, indent=1)
        write_junit(os.path.join(args.out, f"{mode}.junit.xml"), mode, results[mode])
        counts = {}
        for r in results[mode].values():
            counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        print(f"pytorch_suite: {mode}: {json.dumps(counts, sort_keys=True)}", flush=True)
    print(f"pytorch_suite: the tests ran in {time.monotonic() - run_start:.0f} s", flush=True)

    if set(MODES) - set(results):
        return 0
    table = compare(results["torch"], results["cuvmm"])
    version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                             capture_output=True, text=True).stdout.strip() or "not installed"
    header = (f"{os.path.basename(args.test_file)}, {len(tests)} tests selected by "
              f"{os.path.basename(args.selection)}; torch {version}; "
              f"{time.monotonic() - start:.0f} s")
    with open(os.path.join(args.out, "comparison.json"), "w", encoding="utf-8") as f:
        json.dump({"header": header, "counts": {k: len(v) for k, v in table.items()}, "tests": table}, f, indent=1)
    write_markdown(os.path.join(args.out, "comparison.md"), table, header)
    print("pytorch_suite: " + ", ".join(f"{title}: {len(table[key])}" for key, title in CATEGORIES), flush=True)
    for row in table["passed_torch_only"] + table["crashed"]:
        print(f"  {row['id']}: torch {row['torch']}, cuvmm {row['cuvmm']}: {row['cuvmm_message'][:200]}")
    return 1 if table["passed_torch_only"] or table["crashed"] else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child-list":
        sys.exit(child_list(sys.argv[2]))
    if len(sys.argv) > 3 and sys.argv[1] == "--child-run":
        try:
            sys.exit(child_run(sys.argv[2], sys.argv[3], sys.argv[4:]))
        except Exception:
            traceback.print_exc()
            sys.exit(4)
    sys.exit(main())
