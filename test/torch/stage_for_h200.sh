#!/usr/bin/env bash
# Prepares what the H200 run needs, in OUT (carry OUT; a few MiB):
#   OUT/prefix/                       cuvmm installed, debug sections stripped, with the plain plug-in
#   OUT/prebuilt-cpXY/site/cuvmm_torch  the package built here against each PYTHON's torch (2.11 cu130,
#                                     as there), used there only if building against its own torch fails
# Usage: test/torch/stage_for_h200.sh BUILD OUT [PYTHON...]
# On the H200: bash test/torch/h200.sh OUT   (see there)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$1
out=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
rm -rf "$out"/prebuilt-*
bash "$root/test/torch/stage_prefix.sh" "$build" "$out" --strip
for python in "$@"; do
  tag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  bash "$root/test/torch/build_package.sh" "$out/prefix" "$out/prebuilt-$tag" "$python"
  find "$out/prebuilt-$tag/site" -name '*.so*' -type f -exec strip --strip-debug {} +
  rm -rf "$out/prebuilt-$tag/site/"*.dist-info "$out/prebuilt-$tag/site/cuvmm_torch/__pycache__"
done
echo "carry: $out ($(du -sh "$out" | cut -f1))"
