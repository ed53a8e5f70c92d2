#!/usr/bin/env bash
# The installed plain plug-in (libcuvmm_torch.so) loads from any prefix: its RUNPATH is $ORIGIN and
# libcuvmm.so is installed beside it. Installs BUILD (a configured Meson build folder, default
# build) into a scratch prefix, moves that prefix elsewhere, and loads the plug-in there with no
# LD_LIBRARY_PATH. The control case: the plug-in copied away from libcuvmm.so must fail to load
# (so the check cannot pass by finding libcuvmm.so somewhere else). Then the installed plug-in's
# malloc must throw, never return null, for requests it cannot serve (plugin_throws.cpp).
set -euo pipefail
build=${1:-build}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

meson install -C "$build" --destdir "$scratch/staged" --quiet >/dev/null
plugin=$(find "$scratch/staged" -name libcuvmm_torch.so -print -quit)
[[ -n $plugin ]] || { echo "FAIL: meson install put no libcuvmm_torch.so under $scratch/staged"; exit 1; }
libdir_rel=${plugin#"$scratch/staged/"}
libdir_rel=$(dirname "$libdir_rel")
mv "$scratch/staged" "$scratch/moved prefix"   # another place, with a space in it
plugin="$scratch/moved prefix/$libdir_rel/libcuvmm_torch.so"

runpath=$(readelf -d "$plugin" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[[ $runpath == '$ORIGIN' ]] || { echo "FAIL: RUNPATH of the installed plug-in is '$runpath', not \$ORIGIN"; exit 1; }
echo "ok: installed libcuvmm_torch.so has RUNPATH \$ORIGIN"

load='import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
for name in ("cuvmm_torch_malloc", "cuvmm_torch_free", "cuvmm_torch_trim", "cuvmm_torch_peaks"):
    getattr(lib, name)
print("loaded with its four entry points")'
env -u LD_LIBRARY_PATH python3 -c "$load" "$plugin"
echo "ok: the plug-in loads from a moved prefix without LD_LIBRARY_PATH"

mkdir "$scratch/alone"
cp "$plugin" "$scratch/alone/"
if out=$(env -u LD_LIBRARY_PATH python3 -c "$load" "$scratch/alone/libcuvmm_torch.so" 2>&1); then
  echo "FAIL: the plug-in loaded without libcuvmm.so beside it; the check above proves nothing"; exit 1
fi
grep -q 'libcuvmm.so' <<<"$out" || { echo "FAIL: unexpected load error: $out"; exit 1; }
echo "ok: control: without libcuvmm.so beside it, loading fails naming libcuvmm.so"

# The installed plug-in throws (never returns null) for requests it cannot serve.
g++ -std=c++20 -Wall -Wextra -O1 "$(dirname "${BASH_SOURCE[0]}")/plugin_throws.cpp" -o "$scratch/plugin_throws" -ldl
env -u LD_LIBRARY_PATH "$scratch/plugin_throws" "$plugin"
