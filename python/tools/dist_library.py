"""A `meson dist` script (python/meson.build): puts the C++ library's sources into the source archive.

subprojects/cuvmm is a link to the repository root, which an archive of python/ cannot hold (and
meson-python drops a link that points outside it). This replaces the link in the archive's tree by
the files the subproject build reads, as git has them at HEAD, as `meson dist` takes the rest.
"""
import io
import os
import subprocess
import tarfile

# What the library's Meson files read when cuvmm is a subproject (tests, tools, benchmarks and the
# examples are the top project's only; examples/meson.build returns at once).
LIBRARY_PATHS = ["LICENSE", "meson.build", "meson.options", "include", "src", "cmake", "examples/meson.build"]

link = os.path.join(os.environ["MESON_DIST_ROOT"], "subprojects", "cuvmm")
repository = os.path.realpath(os.path.join(os.environ["MESON_SOURCE_ROOT"], "subprojects", "cuvmm"))
archive = subprocess.run(["git", "-C", repository, "archive", "--format=tar", "HEAD", "--", *LIBRARY_PATHS],
                         check=True, capture_output=True).stdout
if os.path.lexists(link):
    os.remove(link)
with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
    # Python's safe extraction where it has it (a tree from git archive needs nothing more).
    tar.extractall(link, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
