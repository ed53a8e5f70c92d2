"""A stand-in for PyTorch's test file in pytorch_suite_selftest.py: one test of each kind of outcome
the runner must tell apart. The "cuvmm" mode is recognized by CUVMM_TORCH_ENABLE, as set there."""
import os
import signal
import time
import unittest

CUVMM = os.environ.get("CUVMM_TORCH_ENABLE", "") not in ("", "0")
if CUVMM and os.environ.get("PYTORCH_SUITE_FAKE_IMPORT_DIES", "") == "1":
    os._exit(9)  # a process that dies before its first test


class TestFakeAllocator(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(sum(range(10)), 45)

    def test_fails_everywhere(self):
        self.assertEqual(1, 2, "fails on every allocator")

    def test_fails_with_cuvmm(self):
        if CUVMM:
            raise RuntimeError("getDeviceStats is not supported")

    def test_fails_on_torch(self):
        self.assertTrue(CUVMM, "fails on PyTorch's allocator")

    def test_crashes_with_cuvmm(self):
        if CUVMM:
            os.kill(os.getpid(), signal.SIGSEGV)

    def test_hangs_with_cuvmm(self):
        if CUVMM:
            time.sleep(3600)

    def test_after_the_crash(self):
        # Runs after the crashing test in the same chunk: it must still get its own result.
        self.assertEqual(len("cuvmm"), 5)

    @unittest.expectedFailure
    def test_expected_failure(self):
        raise RuntimeError("the failure PyTorch expects")

    @unittest.expectedFailure
    def test_expected_failure_other_reason_with_cuvmm(self):
        raise RuntimeError("not supported by cuvmm" if CUVMM else "the failure PyTorch expects")

    @unittest.skip("skipped everywhere")
    def test_skipped(self):
        pass

    def test_not_selected(self):
        self.fail("the selection leaves this test out")


class TestFakeSerial(unittest.TestCase):
    def test_needs_the_gpu_alone(self):
        self.assertEqual(os.environ.get("PYTORCH_SUITE_FAKE", ""), "1")
