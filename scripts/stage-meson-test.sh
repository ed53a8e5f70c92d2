#!/usr/bin/env bash
# Packs a Meson build folder so that plain `meson test` runs on a GPU machine that has no Catch2, no
# Google Benchmark and another Meson version (the H200: see docs/H200.md):
#   STAGE/build.tar.xz  the build folder without its object files (executables, libraries, Meson's
#                       test set-up), to be unpacked at the same absolute path (Meson's test list
#                       names executables by absolute path);
#   STAGE/meson.tar.xz  this machine's Meson (the version that made the build folder), run there as
#                       `python3 -m mesonbuild.mesonmain test ...`.
# Usage: bash scripts/stage-meson-test.sh BUILD_DIR STAGE_DIR
# There (from the repository root, the build folder at the same absolute path as here):
#   tar -xJf STAGE/build.tar.xz -C "$(dirname BUILD_DIR)"; tar -xJf STAGE/meson.tar.xz -C /tmp
#   LD_LIBRARY_PATH=STAGE PYTHONPATH=/tmp python3 -m mesonbuild.mesonmain test -C BUILD_DIR --no-rebuild
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
stage=${2:?stage dir}
mkdir -p "$stage"
stage=$(cd "$stage" && pwd)
rm -f "$stage/build.tar.xz" "$stage/meson.tar.xz"
# A copy without objects, test results of an earlier local run (they would be mistaken for the
# device's) or debug sections (the device tool carries at most 64 MiB), at the same folder name.
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
(cd "$(dirname "$build")" && tar --exclude='*.p' --exclude='*.o' --exclude='test-results' --exclude='meson-logs' \
  -cf - "$(basename "$build")") | tar -C "$copy" -xf -
find "$copy" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true
tar -C "$copy" -cJf "$stage/build.tar.xz" "$(basename "$build")"
# The interpreter Meson itself runs under (its script's #! line) is the one that finds its module.
meson_python=$(head -n 1 "$(command -v meson)" | sed 's/^#! *//; s/ .*//')
meson_module=$("$meson_python" -c 'import mesonbuild, os; print(os.path.dirname(mesonbuild.__file__))')
tar -C "$(dirname "$meson_module")" --exclude='__pycache__' -cJf "$stage/meson.tar.xz" mesonbuild
cp -P /usr/lib/x86_64-linux-gnu/libbenchmark.so.1* "$stage/"
du -sh "$stage"/*.tar.xz
