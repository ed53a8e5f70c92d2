"""What python/meson.build needs to know about the installed torch, as `key=value` lines.

Run by the interpreter that builds the package (the one pip runs), so the extensions are built
against the very torch they will be imported with:

    version=2.11.0+cu130          torch.__version__ (recorded in _build_info.py, checked at import)
    cuda=13.0                     torch.version.cuda; empty for a torch built without CUDA
    include_dirs=DIR;DIR          torch's C++ headers (what torch.utils.cpp_extension compiles with)
    library_dir=DIR               libc10, libtorch, libtorch_cpu, libtorch_python (and the CUDA ones)
    cxx11_abi=1                   the _GLIBCXX_USE_CXX11_ABI value torch's C++ libraries were built with
    cuda_architectures=75,80,...  the SM versions torch's CUDA kernels were built for; empty without CUDA

Exits non-zero, saying why, when torch cannot be imported.
"""
import os
import re
import sys

try:
    import torch
except ImportError as e:
    sys.exit(f"cuvmm_torch: torch cannot be imported by {sys.executable} ({e}). Install torch first, then "
             "build with `pip install --no-build-isolation ./python` so that the build uses that torch.")


def cuda_architectures() -> list[int]:
    """The SM versions in torch's arch flags ("sm_75 sm_80 ... compute_120"), without suffixes (90a: 90)."""
    if torch.version.cuda is None:
        return []
    # torch.cuda.get_arch_list() returns [] on a machine without a GPU; the flags are those of the build.
    flags = torch._C._cuda_getArchFlags() or ""
    return sorted({int(m) for m in re.findall(r"(?:sm|compute)_(\d+)", flags)})


torch_dir = os.path.dirname(torch.__file__)
include = os.path.join(torch_dir, "include")
values = {
    "version": str(torch.__version__),
    "cuda": torch.version.cuda or "",
    "include_dirs": ";".join([include, os.path.join(include, "torch", "csrc", "api", "include")]),
    "library_dir": os.path.join(torch_dir, "lib"),
    "cxx11_abi": str(int(torch._C._GLIBCXX_USE_CXX11_ABI)),
    "cuda_architectures": ",".join(str(a) for a in cuda_architectures()),
}
for key, value in values.items():
    print(f"{key}={value}")
