"""A stand-in for cuvmm_torch in pytorch_suite_selftest.py: enabled when CUVMM_TORCH_ENABLE is set,
as the real package is, without torch or a GPU; PYTORCH_SUITE_FAKE_BROKEN=1 makes it a package that
cannot be enabled."""
import os

_enabled = (os.environ.get("CUVMM_TORCH_ENABLE", "") not in ("", "0")
            and os.environ.get("PYTORCH_SUITE_FAKE_BROKEN", "") != "1")


def is_enabled():
    return _enabled


def status():
    return {"enabled": _enabled, "stand_in": True}
