#!/usr/bin/env bash
# On the GPU machine: cuvmm as users take it from an installed prefix, built with that machine's
# own compilers. PREFIX is an install tree (`meson install --destdir` of a build folder, moved
# anywhere: its pkg-config and CMake files are relocatable by their location).
#   bash scripts/h200-installed.sh PREFIX
#  1. the CMake consumer project (test/consumer: find_package(cuvmm CONFIG), version refusals) built
#     with cmake and the machine's g++, and its programs run (host backend);
#  2. the README's GPU examples (examples/growable_buffer.cu, examples/arena.cu, examples/ring_buffer.cu)
#     compiled by the machine's nvcc against PREFIX's headers and libcuvmm, and run on the GPU.
# Logs to $OUT/installed.log; exits non-zero if anything failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=$(cd "${1:?install prefix}" && pwd)
out=${OUT:-/tmp/cuvmm-out}
mkdir -p "$out"
work=$(mktemp -d)
libdir=$(dirname "$(find "$prefix" -name 'libcuvmm.so' -print -quit)")
version=$(sed -n 's/^Version: //p' "$libdir/pkgconfig/cuvmm.pc")
status=0
exec > >(tee "$out/installed.log") 2>&1
echo "== $(g++ --version | head -1); $(cmake --version | head -1); $(nvcc --version | tail -1); cuvmm $version at $prefix"
echo "== CMake consumer"
if cmake -S "$root/test/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCUVMM_EXPECTED_VERSION="$version" >"$work/cmake.log" 2>&1 &&
   cmake --build "$work/cmake" -j 8 >>"$work/cmake.log" 2>&1 &&
   (cd "$work/cmake" && ctest --output-on-failure); then
  echo "CMake consumer: ok"
else
  status=1; tail -30 "$work/cmake.log"; echo "CMake consumer: FAILED"
fi
for example in growable_buffer arena ring_buffer; do
  echo "== examples/$example.cu with nvcc against the installed package"
  if nvcc -std=c++20 --extended-lambda -gencode=arch=compute_90,code=sm_90 -I"$prefix/include" -I"$root/examples" \
       "$root/examples/$example.cu" -o "$work/$example" -L"$libdir" -lcuvmm -Xlinker -rpath="$libdir" >"$work/$example.log" 2>&1 &&
     "$work/$example"; then
    echo "$example: ok (exit 0)"
  else
    status=1; tail -20 "$work/$example.log"; echo "$example: FAILED"
  fi
done
exit $status
