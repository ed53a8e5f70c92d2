"""Builds cuvmm_torch._C against the installed torch and an installed cuvmm (found by pkg-config).

The extension links libcuvmm from the prefix that pkg-config names (set PKG_CONFIG_PATH to
<prefix>/lib/<multiarch>/pkgconfig for a non-system prefix) and the package carries a copy of that
library next to the extension (RUNPATH $ORIGIN), so the installed package works wherever it is
put, without LD_LIBRARY_PATH and whether or not the prefix is still there. Build with the torch
you run with: `pip install --no-build-isolation ./python` (see README.md).
"""
import os
import shlex
import shutil
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension


def pkg_config(*args: str) -> list[str]:
    # PKG_CONFIG may name another pkg-config or add options, as for autotools and Meson, e.g.
    # PKG_CONFIG="pkg-config --define-variable=prefix=/moved/prefix" for a prefix that was moved.
    command = shlex.split(os.environ.get("PKG_CONFIG", "pkg-config"))
    try:
        out = subprocess.run([*command, *args, "cuvmm"], check=True, capture_output=True, text=True).stdout
    except FileNotFoundError as e:
        raise SystemExit("cuvmm_torch: pkg-config is needed to find cuvmm (install pkg-config)") from e
    except subprocess.CalledProcessError as e:
        raise SystemExit("cuvmm_torch: pkg-config cannot find cuvmm: install cuvmm (meson install) and set "
                         "PKG_CONFIG_PATH to its <prefix>/<libdir>/pkgconfig\n" + e.stderr) from e
    return shlex.split(out)


def soname(library: str) -> str:
    """The DT_SONAME of a shared library (what the extension's DT_NEEDED names), or its file name."""
    out = subprocess.run(["readelf", "-d", library], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "(SONAME)" in line:
            return line.split("[", 1)[1].split("]", 1)[0]
    return os.path.basename(library)


cflags = pkg_config("--cflags")
libs = pkg_config("--libs")
libdir = pkg_config("--variable=libdir")[0]
libcuvmm = os.path.join(libdir, "libcuvmm.so")
if not os.path.exists(libcuvmm):
    raise SystemExit(f"cuvmm_torch: {libcuvmm} (from pkg-config's libdir) does not exist")


class BuildWithLibcuvmm(BuildExtension):
    """Builds the extension, then puts the libcuvmm it linked next to it (found through $ORIGIN)."""

    def build_extension(self, ext):
        super().build_extension(ext)
        target = os.path.join(os.path.dirname(self.get_ext_fullpath(ext.name)), soname(libcuvmm))
        shutil.copyfile(os.path.realpath(libcuvmm), target)


setup(
    ext_modules=[
        CppExtension(
            name="cuvmm_torch._C",
            sources=["csrc/allocator.cpp"],
            include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
            library_dirs=[f[2:] for f in libs if f.startswith("-L")],
            libraries=[f[2:] for f in libs if f.startswith("-l")],
            # cuvmm's headers are C++20 (the last -std wins over torch's default).
            extra_compile_args=["-std=c++20", "-fvisibility=hidden"] +
                               [f for f in cflags if not f.startswith("-I")],
            extra_link_args=["-Wl,-rpath,$ORIGIN", "-Wl,--enable-new-dtags"],
        )
    ],
    cmdclass={"build_ext": BuildWithLibcuvmm},
)
