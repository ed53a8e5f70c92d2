#!/usr/bin/env bash
# Builds the cuvmm_torch package against PYTHON's torch and the cuvmm installed in PREFIX (found by
# pkg-config) into OUT/site/cuvmm_torch, as `pip install --target` lays it out.
# Usage: test/torch/build_package.sh PREFIX OUT [PYTHON]     (PYTHON: default python3)
# The way a user builds it: pip (setup.py through torch.utils.cpp_extension), from a copy of python/
# (so nothing is written into the source tree and the package needs nothing outside python/).
# Where pip, setuptools, wheel or pkg-config is missing (the H200 has no downloads and perhaps no
# pip), or with CUVMM_TORCH_BUILD=direct: the same extension compiled with g++ directly, with the
# flags setup.py gives (C++20, torch's headers and libraries, the prefix's include/ and libcuvmm,
# libcuvmm copied beside the extension, RUNPATH $ORIGIN).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
prefix=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
python=${3:-python3}

pc=$(find "$prefix" -name cuvmm.pc -print -quit)
libdir=$(dirname "$(dirname "$pc")")
export PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG="pkg-config --define-variable=prefix=$prefix"
rm -rf "$out/site" "$out/src"

method=${CUVMM_TORCH_BUILD:-pip}
if [[ $method == pip ]] && ! { "$python" -c 'import setuptools, wheel' && "$python" -m pip --version &&
                               command -v pkg-config; } &>/dev/null; then
  echo "build_package.sh: no pip, setuptools, wheel or pkg-config for $python: compiling directly"
  method=direct
fi

if [[ $method == pip ]]; then
  cp -r "$root/python" "$out/src"
  rm -rf "$out/src/build" "$out/src/"*.egg-info
  MAX_JOBS=${MAX_JOBS:-2} "$python" -m pip install --quiet --no-build-isolation --no-deps --target "$out/site" "$out/src"
  rm -rf "$out/src"
else
  package=$out/site/cuvmm_torch
  mkdir -p "$package"
  cp "$root/python/cuvmm_torch/"*.py "$package/"
  read -r torch_dir python_include suffix cxx11_abi < <("$python" -c '
import os, sysconfig, torch
print(os.path.dirname(torch.__file__), sysconfig.get_paths()["include"], sysconfig.get_config_var("EXT_SUFFIX"),
      int(torch.compiled_with_cxx11_abi()))')
  # The installed prefix's layout (what cuvmm.pc says), without needing pkg-config.
  g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -Wall -Wextra \
    -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" \
    -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" -isystem "$python_include" \
    -I"$prefix/include" "$root/python/csrc/allocator.cpp" -o "$package/_C$suffix" \
    -L"$libdir" -lcuvmm -L"$torch_dir/lib" -lc10 -ltorch -ltorch_cpu -ltorch_python \
    -Wl,-rpath,'$ORIGIN' -Wl,--enable-new-dtags
  soname=$(readelf -d "$libdir/libcuvmm.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  cp "$(readlink -f "$libdir/libcuvmm.so")" "$package/${soname:-libcuvmm.so}"
fi
echo "built ($method): $out/site/cuvmm_torch against torch $("$python" -c 'import torch; print(torch.__version__)')"
