#!/usr/bin/env bash
# Checks that the installed headers and the g++-built libcuvmm.so have one ABI whatever compiler the
# user has: builds test/unit/abi_clang_consumer.cpp with clang++-14 (libstdc++ 12: no
# std::source_location) against the headers and BUILD_DIR/src/libcuvmm.so, and runs it.
#   bash scripts/abi-check.sh [BUILD_DIR]   (default: build; the Meson build made with g++)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
clang=${CLANGXX:-clang++-14}
cuda=${CUDA_HOME:-/usr/local/cuda}  # the container headers include Thrust (CCCL) headers
library=$build/src/libcuvmm.so
if [ ! -f "$library" ]; then
  echo "abi-check: $library is missing: build the library first (ninja -C $build src/libcuvmm.so)" >&2
  exit 1
fi
out=$build/abi-check
mkdir -p "$out"
echo "abi-check: building the consumer with $($clang --version | head -1) against $library"
"$clang" -std=c++20 -Wall -Wextra -Werror -I "$root/include" -I "$build/include" \
  -I "$cuda/include" -I "$cuda/include/cccl" \
  "$root/test/unit/abi_clang_consumer.cpp" -L "$build/src" -lcuvmm -Wl,-rpath,"$build/src" -o "$out/abi_clang_consumer"
"$out/abi_clang_consumer"
