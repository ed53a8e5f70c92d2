"""A stand-in for cuvmm_torch in pytorch_suite_selftest.py: enabled when CUVMM_TORCH_ENABLE is set,
as the real package is, without torch or a GPU."""
import os

_enabled = os.environ.get("CUVMM_TORCH_ENABLE", "") not in ("", "0")


def is_enabled():
    return _enabled
