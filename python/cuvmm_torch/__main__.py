"""`python -m cuvmm_torch`: prints cuvmm_torch's status (versions, whether its allocator is built,
the arena options). `python -m cuvmm_torch SCRIPT ARGS...` runs SCRIPT as `python SCRIPT ARGS...`
would, with cuvmm as PyTorch's CUDA allocator (enabled before the script runs)."""
import json
import runpy
import sys

import cuvmm_torch


def main() -> int:
    if len(sys.argv) < 2:
        print(json.dumps(cuvmm_torch.status(), indent=2, sort_keys=True))
        return 0
    cuvmm_torch.enable()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
