"""Makes cuvmm_torch PyTorch's CUDA allocator in every Python process that starts with this folder on
PYTHONPATH and CUVMM_TORCH_ENABLE=1 (pytorch_suite.py's "cuvmm" mode): PyTorch's test files and the
child processes they start then allocate through cuvmm from their first CUDA call. A process in
which cuvmm_torch cannot be enabled ends at once (exit status 70): a test must never pass on
PyTorch's own allocator while reported as cuvmm's."""
import os
import sys

if os.environ.get("CUVMM_TORCH_ENABLE", "") not in ("", "0"):
    try:
        import cuvmm_torch  # enables itself when CUVMM_TORCH_ENABLE is set

        if not cuvmm_torch.is_enabled():
            raise RuntimeError("cuvmm_torch was imported but is not enabled")
    except BaseException as error:  # noqa: BLE001 - any failure must end the process
        print(f"sitecustomize: cuvmm_torch could not be made PyTorch's allocator: {error!r}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(70)
