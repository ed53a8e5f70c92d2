"""Builds the cuvmm_torch package (the _allocator and _C extensions) against this interpreter's torch
and the libcuvmm of a Meson build folder, into OUT/site/cuvmm_torch, with torch.utils.cpp_extension
(ninja): the way to build it where meson-python is not installed.

    python test/torch/build_allocator.py BUILD_DIR OUT       (BUILD_DIR holds src/libcuvmm.so)

The package carries libcuvmm (found through RUNPATH $ORIGIN). _allocator needs torch's CUDA headers
and the CUDA toolkit's (CUDA_HOME, default /usr/local/cuda); without a CUDA build of torch only _C
is built.
"""
import ctypes
import glob
import os
import shutil
import subprocess
import sys

from torch.utils import cpp_extension
import torch

# No .cu sources: the list only keeps cpp_extension from asking a GPU (there may be none here).
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
build = os.path.abspath(sys.argv[1])
out = os.path.abspath(sys.argv[2])
libdir = os.path.join(build, "src")
package = os.path.join(out, "site", "cuvmm_torch")
shutil.rmtree(package, ignore_errors=True)
os.makedirs(package)
for source in glob.glob(os.path.join(root, "python", "cuvmm_torch", "*.py")):
    shutil.copy(source, package)

libcuvmm = os.path.realpath(os.path.join(libdir, "libcuvmm.so"))
soname = subprocess.run(["readelf", "-d", libcuvmm], check=True, capture_output=True, text=True).stdout
soname = soname.split("(SONAME)")[1].split("[", 1)[1].split("]", 1)[0]
shutil.copyfile(libcuvmm, os.path.join(package, soname))
# cpp_extension.load loads what it built: libcuvmm must be loaded by then.
ctypes.CDLL(os.path.join(package, soname), mode=ctypes.RTLD_GLOBAL)

common = dict(
    extra_cflags=["-std=c++20", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra"],
    extra_include_paths=[os.path.join(root, "include")],
    extra_ldflags=[f"-L{libdir}", "-lcuvmm", "-Wl,-rpath,'$$ORIGIN'", "-Wl,--enable-new-dtags"],
    verbose=os.environ.get("VERBOSE") == "1",
)
modules = [("_C", sorted(glob.glob(os.path.join(root, "python", "csrc", "*.cpp"))), False)]
if torch.version.cuda is not None:
    modules.append(("_allocator", sorted(glob.glob(os.path.join(root, "python", "csrc", "allocator", "*.cpp"))), True))
# What python/meson.build writes from the same template: __init__.py refuses another torch.
with open(os.path.join(root, "python", "tools", "build_info.py.in")) as f:
    build_info = f.read()
for key, value in {"TORCH_VERSION": torch.__version__,
                   "TORCH_CUDA": "None" if torch.version.cuda is None else f'"{torch.version.cuda}"',
                   "GPU_ARCHITECTURES": os.environ["TORCH_CUDA_ARCH_LIST"].replace(".", "").replace(";", ","),
                   "HAS_ALLOCATOR": str(len(modules) > 1)}.items():
    build_info = build_info.replace(f"@{key}@", value)
with open(os.path.join(package, "_build_info.py"), "w") as f:
    f.write(build_info)
for name, sources, with_cuda in modules:
    directory = os.path.join(out, "obj", name)
    os.makedirs(directory, exist_ok=True)
    path = cpp_extension.load(name=name, sources=sources, build_directory=directory, with_cuda=with_cuda,
                              is_python_module=False, **common)
    shutil.copy(path, package)
    print(f"built {name}: {os.path.join(package, os.path.basename(path))}")
