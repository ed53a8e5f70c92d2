"""Checks pytorch_suite.py without torch or a GPU: runs it on pytorch_suite_fake/test_fake_allocator.py
(one test of each outcome) with a stand-in cuvmm_torch, and checks the selection, both modes, that a
crash or a hang costs only its own test (the chunk's other tests get their results from runs of their
own), the serial tests, the JSON and junit files and the comparison.

    python3 test/torch/pytorch_suite_selftest.py      (exit status 0: all checks passed)
"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "pytorch_suite_fake")


def main() -> int:
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, os.path.join(FAKE, "no_torch")]), PYTORCH_SUITE_FAKE="1")
        env.pop("CUVMM_TORCH_ENABLE", None)
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "pytorch_suite.py"), os.path.join(FAKE, "test_fake_allocator.py"),
             out, "--selection", os.path.join(FAKE, "selection.txt"), "--chunk", "8", "--workers", "2",
             "--timeout", "3"], env=env, capture_output=True, text=True, timeout=300)
        print(proc.stdout + proc.stderr)
        failures = []

        def check(condition, what):
            if not condition:
                failures.append(what)
                print("FAILED:", what)

        check(proc.returncode == 1, f"exit status 1 (a test passes on PyTorch's allocator only), got {proc.returncode}")
        selected = json.load(open(os.path.join(out, "selected.json")))
        check([t["id"] for t in selected] == [
            "TestFakeAllocator.test_after_the_crash", "TestFakeAllocator.test_crashes_with_cuvmm",
            "TestFakeAllocator.test_expected_failure", "TestFakeAllocator.test_expected_failure_other_reason_with_cuvmm",
            "TestFakeAllocator.test_fails_everywhere", "TestFakeAllocator.test_fails_on_torch",
            "TestFakeAllocator.test_fails_with_cuvmm", "TestFakeAllocator.test_hangs_with_cuvmm",
            "TestFakeAllocator.test_passes", "TestFakeAllocator.test_skipped",
            "TestFakeSerial.test_needs_the_gpu_alone"], f"selection: {[t['id'] for t in selected]}")
        check([t["id"] for t in selected if t["serial"]] == ["TestFakeSerial.test_needs_the_gpu_alone"], "serial mark")

        torch = json.load(open(os.path.join(out, "torch.json")))
        cuvmm = json.load(open(os.path.join(out, "cuvmm.json")))
        outcomes = lambda results: {k.split(".")[1]: v["outcome"] for k, v in results.items()}
        check(outcomes(torch) == {
            "test_after_the_crash": "passed", "test_crashes_with_cuvmm": "passed", "test_fails_everywhere": "failed",
            "test_expected_failure": "expected failure", "test_expected_failure_other_reason_with_cuvmm": "expected failure",
            "test_fails_on_torch": "failed", "test_fails_with_cuvmm": "passed", "test_hangs_with_cuvmm": "passed",
            "test_passes": "passed", "test_skipped": "skipped", "test_needs_the_gpu_alone": "passed"},
            f"torch outcomes {outcomes(torch)}")
        check(outcomes(cuvmm) == {
            "test_after_the_crash": "passed", "test_crashes_with_cuvmm": "crash", "test_fails_everywhere": "failed",
            "test_expected_failure": "expected failure", "test_expected_failure_other_reason_with_cuvmm": "expected failure",
            "test_fails_on_torch": "passed", "test_fails_with_cuvmm": "error", "test_hangs_with_cuvmm": "timeout",
            "test_passes": "passed", "test_skipped": "skipped", "test_needs_the_gpu_alone": "passed"},
            f"cuvmm outcomes {outcomes(cuvmm)}")
        # The first chunk (the first 8 tests) died in test_crashes_with_cuvmm: that test ran again
        # alone, and the chunk's tests not yet started ran on in a new process, which hung in
        # test_hangs_with_cuvmm, which ran again alone too.
        alone = sorted(k.split(".")[1] for k, v in cuvmm.items() if v.get("isolated"))
        after = sorted(k.split(".")[1] for k, v in cuvmm.items() if v.get("after_crash"))
        check(alone == ["test_crashes_with_cuvmm", "test_hangs_with_cuvmm"], f"a crash or hang is confirmed alone: {alone}")
        check(after == ["test_expected_failure", "test_expected_failure_other_reason_with_cuvmm", "test_fails_everywhere",
                        "test_fails_on_torch", "test_fails_with_cuvmm"],
              f"the tests after a crash run on in a new process: {after}")
        check(not cuvmm["TestFakeAllocator.test_after_the_crash"].get("isolated"), "tests before a crash keep their result")
        logs = sorted(os.listdir(os.path.join(out, "logs", "cuvmm")))
        check(len([n for n in logs if n.endswith(".log")]) == 6,
              f"6 processes in the cuvmm mode (2 chunks, 2 crashes confirmed, 1 chunk after them, the serial test): {logs}")
        check("signal 11" in cuvmm["TestFakeAllocator.test_crashes_with_cuvmm"]["message"], "the crash names its signal")
        check("getDeviceStats" in cuvmm["TestFakeAllocator.test_fails_with_cuvmm"]["message"], "the error's text is kept")

        comparison = json.load(open(os.path.join(out, "comparison.json")))
        ids = lambda key: sorted(row["id"].split(".")[1] for row in comparison["tests"][key])
        check(comparison["counts"] == {"passed_both": 4, "passed_torch_only": 2, "passed_cuvmm_only": 1,
                                       "failed_both": 1, "crashed": 2, "skipped_both": 1, "other": 0},
              f"counts {comparison['counts']}")
        check(ids("passed_torch_only") == ["test_expected_failure_other_reason_with_cuvmm", "test_fails_with_cuvmm"],
              f"passed on PyTorch's allocator only (an expected failure failing for another reason too): {ids('passed_torch_only')}")
        check(ids("crashed") == ["test_crashes_with_cuvmm", "test_hangs_with_cuvmm"], "crashed")
        markdown = open(os.path.join(out, "comparison.md")).read()
        check("| TestFakeAllocator.test_fails_with_cuvmm | passed | error | RuntimeError: getDeviceStats is not supported |"
              in markdown, "the markdown table gives the reason")
        suite = ET.parse(os.path.join(out, "cuvmm.junit.xml")).getroot()
        check((suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("11", "1", "3", "1"),
              f"junit counts {suite.attrib}")
        status_file = os.path.join(out, "cuvmm_torch-status.json")
        status = json.load(open(status_file)) if os.path.exists(status_file) else None
        check(status == {"enabled": True, "stand_in": True}, f"cuvmm_torch's status is kept: {status}")

    # A cuvmm_torch that cannot be enabled stops the run before any test, instead of letting the
    # tests run on PyTorch's allocator under cuvmm's name.
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, os.path.join(FAKE, "no_torch")]),
                   PYTORCH_SUITE_FAKE="1", PYTORCH_SUITE_FAKE_BROKEN="1")
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "pytorch_suite.py"), os.path.join(FAKE, "test_fake_allocator.py"),
             out, "--selection", os.path.join(FAKE, "selection.txt")], env=env, capture_output=True, text=True,
            timeout=300)
        check(proc.returncode == 2 and "cannot be made PyTorch's allocator" in proc.stderr
              and not os.path.exists(os.path.join(out, "cuvmm.json")),
              f"a cuvmm_torch that cannot be enabled stops the run (exit {proc.returncode}: {proc.stderr[-300:]})")
    # Processes that die before their first test: each test gets a process of its own, and the run ends.
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([FAKE, os.path.join(FAKE, "no_torch")]),
                   PYTORCH_SUITE_FAKE="1", PYTORCH_SUITE_FAKE_IMPORT_DIES="1")
        proc = subprocess.run(
            [sys.executable, os.path.join(HERE, "pytorch_suite.py"), os.path.join(FAKE, "test_fake_allocator.py"),
             out, "--selection", os.path.join(FAKE, "selection.txt"), "--chunk", "8", "--timeout", "3"],
            env=env, capture_output=True, text=True, timeout=120)
        cuvmm = json.load(open(os.path.join(out, "cuvmm.json"))) if proc.returncode == 1 else {}
        check(sorted({v["outcome"] for v in cuvmm.values()}) == ["crash"] and len(cuvmm) == 11
              and all("exited with 9" in v["message"] for v in cuvmm.values()),
              f"every test of a mode whose processes die at start is a crash (exit {proc.returncode})")

    print("pytorch_suite_selftest:", "all checks passed" if not failures else f"{len(failures)} checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
