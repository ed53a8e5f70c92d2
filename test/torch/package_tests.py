"""The installed cuvmm_torch package as pip lays it out, on any machine (no GPU needed): what it holds,
how its extensions find the libcuvmm it carries, and its refusal to load under a torch other than the
one it was built against.

    python3 test/torch/package_tests.py -v     (outside the source tree, the installed package importable)

What the package must hold is read from the source tree beside this file: the modules of
python/cuvmm_torch/, _build_info.py, _C, libcuvmm.so.<major>.<minor> (the project's version), and
_allocator where python/csrc/allocator/ has sources and the installed torch has CUDA.
"""
import glob
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

import cuvmm_torch
from cuvmm_torch import _build_info

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.dirname(os.path.abspath(cuvmm_torch.__file__))
EXTENSION_SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def project_soname() -> str:
    with open(os.path.join(ROOT, "meson.build")) as f:
        major, minor = re.search(r"version: '(\d+)\.(\d+)\.", f.read()).groups()
    return f"libcuvmm.so.{major}.{minor}"


LIBCUVMM = project_soname()
HAS_ALLOCATOR = torch.version.cuda is not None and bool(glob.glob(os.path.join(ROOT, "python/csrc/allocator/*.cpp")))
EXTENSIONS = ["_C"] + (["_allocator"] if HAS_ALLOCATOR else [])
# What an extension may need besides the package's own libcuvmm: torch's libraries (loaded by
# `import torch`), the CUDA runtime torch loaded, and the C and C++ runtimes.
TORCH_OR_SYSTEM = re.compile(r"^(libc10(_cuda)?|libtorch(_cpu|_cuda|_python)?)\.so$|^libcudart\.so\.\d+$|"
                             r"^(libstdc\+\+\.so\.6|libgcc_s\.so\.1|libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2)$")


def dynamic_section(path: str) -> dict:
    """NEEDED (a list), SONAME, RUNPATH and RPATH (None when absent) of an ELF file, from readelf -d."""
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    entries = re.findall(r"\((NEEDED|SONAME|RUNPATH|RPATH)\)\s+[^\[]*\[(.*)\]", out)
    section = {"NEEDED": [value for tag, value in entries if tag == "NEEDED"]}
    for tag in ("SONAME", "RUNPATH", "RPATH"):
        section[tag] = next((value for t, value in entries if t == tag), None)
    return section


def python_in(directory: str, code: str) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter that imports cuvmm_torch from `directory`, without LD_LIBRARY_PATH."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = directory
    return subprocess.run([sys.executable, "-c", code], cwd=directory, env=env, capture_output=True, text=True)


def copy_of_package(scratch: str) -> str:
    """A copy of the installed package under scratch/site (so a test can change it); returns site."""
    site = os.path.join(scratch, "site")
    shutil.copytree(PACKAGE, os.path.join(site, "cuvmm_torch"), ignore=shutil.ignore_patterns("__pycache__"))
    return site


class ContentsTest(unittest.TestCase):
    def test_the_package_holds_its_modules_extensions_and_libcuvmm_and_nothing_else(self):
        modules = {os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "python/cuvmm_torch/*.py"))}
        expected = modules | {"_build_info.py", LIBCUVMM} | {name + EXTENSION_SUFFIX for name in EXTENSIONS}
        installed = {name for name in os.listdir(PACKAGE) if name != "__pycache__"}
        self.assertEqual(installed, expected)

    def test_build_info_names_the_torch_it_runs_with(self):
        self.assertEqual(_build_info.TORCH_VERSION, str(torch.__version__))
        self.assertEqual(_build_info.TORCH_CUDA, torch.version.cuda)
        self.assertEqual(_build_info.HAS_ALLOCATOR_EXTENSION, HAS_ALLOCATOR)
        architectures = [int(a) for a in _build_info.GPU_ARCHITECTURES.split(",")]
        self.assertEqual(architectures, sorted(set(architectures)))
        self.assertGreaterEqual(architectures[0], 75)  # CUDA 13's oldest


class LinkageTest(unittest.TestCase):
    def test_each_extension_finds_libraries_through_origin_only(self):
        for name in EXTENSIONS:
            with self.subTest(extension=name):
                section = dynamic_section(os.path.join(PACKAGE, name + EXTENSION_SUFFIX))
                self.assertEqual(section["RUNPATH"], "$ORIGIN")
                self.assertIsNone(section["RPATH"])

    def test_each_extension_needs_only_the_package_torch_and_the_system(self):
        for name in EXTENSIONS:
            with self.subTest(extension=name):
                needed = dynamic_section(os.path.join(PACKAGE, name + EXTENSION_SUFFIX))["NEEDED"]
                others = [lib for lib in needed if lib != LIBCUVMM and not TORCH_OR_SYSTEM.match(lib)]
                self.assertEqual(others, [], needed)

    def test_every_shared_object_uses_the_shared_libstdcxx_not_a_copy_of_its_own(self):
        # A private static libstdc++ breaks the streams of torch's error messages (see
        # shared_libstdcxx_link_args in meson.build).
        for name in [n + EXTENSION_SUFFIX for n in EXTENSIONS] + [LIBCUVMM]:
            with self.subTest(shared_object=name):
                self.assertIn("libstdc++.so.6", dynamic_section(os.path.join(PACKAGE, name))["NEEDED"])

    def test_c_needs_the_libcuvmm_the_package_carries(self):
        self.assertIn(LIBCUVMM, dynamic_section(os.path.join(PACKAGE, "_C" + EXTENSION_SUFFIX))["NEEDED"])

    def test_libcuvmm_is_named_by_its_soname_and_needs_neither_a_runpath_nor_the_cuda_libraries(self):
        section = dynamic_section(os.path.join(PACKAGE, LIBCUVMM))
        self.assertEqual(section["SONAME"], LIBCUVMM)
        self.assertIsNone(section["RUNPATH"])
        self.assertIsNone(section["RPATH"])
        # The CUDA runtime is linked statically and the driver resolved at run time.
        self.assertEqual([lib for lib in section["NEEDED"] if "cuda" in lib], [])

    def test_the_extensions_load_the_libcuvmm_beside_them(self):
        with tempfile.TemporaryDirectory() as scratch:
            site = copy_of_package(scratch)
            imports = "".join(f"import cuvmm_torch.{name}\n" for name in EXTENSIONS)
            run = python_in(site, "import cuvmm_torch\n" + imports +
                            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libcuvmm' in l}))")
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertEqual(run.stdout.strip(), repr([os.path.join(site, "cuvmm_torch", LIBCUVMM)]))

    def test_control_without_libcuvmm_beside_it_the_import_fails_naming_it(self):
        # Shows the test above cannot pass by finding libcuvmm somewhere else.
        with tempfile.TemporaryDirectory() as scratch:
            site = copy_of_package(scratch)
            os.remove(os.path.join(site, "cuvmm_torch", LIBCUVMM))
            run = python_in(site, "import cuvmm_torch")
            self.assertNotEqual(run.returncode, 0)
            self.assertIn(f"ImportError: {LIBCUVMM}: cannot open shared object file", run.stderr)


class TorchVersionCheckTest(unittest.TestCase):
    def import_with_build_info(self, **values) -> subprocess.CompletedProcess:
        """Imports a copy of the package whose _build_info.py has `values` in place of its own."""
        with tempfile.TemporaryDirectory() as scratch:
            site = copy_of_package(scratch)
            path = os.path.join(site, "cuvmm_torch", "_build_info.py")
            with open(path) as f:
                text = f.read()
            for key, value in values.items():
                text, count = re.subn(rf"^{key} = .*$", f"{key} = {value!r}", text, flags=re.MULTILINE)
                self.assertEqual(count, 1, key)
            with open(path, "w") as f:
                f.write(text)
            return python_in(site, "import sys\ntry:\n    import cuvmm_torch\nfinally:\n"
                                   "    print('_C loaded:', 'cuvmm_torch._C' in sys.modules)")

    def test_control_the_unchanged_copy_imports(self):
        run = self.import_with_build_info()
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout.strip(), "_C loaded: True")

    def test_another_torch_version_is_refused_before_any_extension_is_loaded(self):
        run = self.import_with_build_info(TORCH_VERSION="2.10.0+cu130")
        self.assertNotEqual(run.returncode, 0)
        self.assertEqual(run.stdout.strip(), "_C loaded: False")
        self.assertIn(f"ImportError: cuvmm_torch was built against torch 2.10.0+cu130 (CUDA {torch.version.cuda}) "
                      f"but this Python has torch {torch.__version__} (CUDA {torch.version.cuda}); rebuild it "
                      "against this torch: pip install --no-build-isolation ./python", run.stderr)

    def test_the_same_version_built_for_another_cuda_is_refused(self):
        run = self.import_with_build_info(TORCH_CUDA=None if torch.version.cuda else "13.0")
        self.assertNotEqual(run.returncode, 0)
        self.assertEqual(run.stdout.strip(), "_C loaded: False")
        self.assertIn(f"but this Python has torch {torch.__version__} (CUDA {torch.version.cuda})", run.stderr)


if __name__ == "__main__":
    unittest.main()
