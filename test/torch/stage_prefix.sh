#!/usr/bin/env bash
# Installs a configured Meson build folder's cuvmm into OUT/prefix (meson install --destdir, then
# the prefix moved there): libcuvmm, its headers and cuvmm.pc, and the plain plug-in
# libcuvmm_torch.so beside libcuvmm.so.
# Usage: test/torch/stage_prefix.sh BUILD OUT [--strip]
#   --strip: drop debug sections from the staged libraries (smaller, to carry to another machine).
set -euo pipefail
build=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
strip_debug=${3:-}

meson compile -C "$build" cuvmm_torch >/dev/null  # and libcuvmm, which it links
rm -rf "$out/staged" "$out/prefix"
meson install -C "$build" --destdir "$out/staged" --quiet >/dev/null
pc=$(find "$out/staged" -name cuvmm.pc -print -quit)
configured_prefix=$(sed -n 's/^prefix=//p' "$pc")
mv "$out/staged$configured_prefix" "$out/prefix"
rm -rf "$out/staged"
if [[ $strip_debug == --strip ]]; then
  find "$out/prefix" -name '*.so*' -type f -exec strip --strip-debug {} +
fi
echo "staged: $out/prefix ($(du -sh "$out/prefix" | cut -f1))"
