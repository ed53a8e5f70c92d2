#!/usr/bin/env bash
# The installed package, checked as its users meet it (scripts/test.sh runs each as a step):
#   install     builds the library once with every default GPU architecture and installs it into
#               build-install/prefix (the only many-architecture build; the others use 90)
#   headers     the installed headers are exactly the header list's (include/cuvmm/meson.build), and
#               every header in the source tree is on it
#   archs       libcuvmm.so holds machine code for each of gpu_architectures and PTX of the newest
#               (cuobjdump from the nvidia-cuda-cuobjdump wheel)
#   pkgconfig   test/consumer against the prefix through pkg-config: one TU per installed header,
#               the Thrust program (host backend, run; CUDA, compiled), cuda::mr, errors
#   cmake       the same programs through find_package(cuvmm CONFIG) -> cuvmm::cuvmm
#   subproject  the same programs with cuvmm as a Meson subproject
#   clang       the pkg-config consumer built with clang++-14 against the g++-built library
#   cccl        cuvmm/arena_resource.hpp with the toolkit's CCCL and the newest CCCL wheel
#               (g++ programs run on the host backend, nvcc compiles)
#   rmm         test/rmm/rmm_consumer.cu compiled and linked against the librmm-cu13 wheel into
#               build-consumer/rmm (with the libraries it loads in build-consumer/rmm/lib); run
#               there too: without a GPU it reports SKIPPED; test/rmm/rmm_arena_resource_host.cpp
#               (cuvmm::RmmArenaResource on the host backend), compiled with g++ and run; and
#               cuvmm-plan built with -Drmm_root (RMM's pool and arena as trace peers) in
#               build-consumer/rmm/plan, its test of those replays run (SKIPPED without a GPU)
# Usage: bash scripts/package-checks.sh STEP...   Each step prints a line or two; a failing step
# prints the end of its log (the whole log stays in build-consumer/logs). Exit status: non-zero if
# any step failed.
# The wheels (Python packages used only for these checks, never by the library's build) are
# installed with pip into build-consumer/wheels, at the versions pinned here.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
prefix=$repo/build-install/prefix
out=$repo/build-consumer
logs=$out/logs
wheels=$out/wheels
mkdir -p "$logs"

WHEELS=(nvidia-cuda-cccl==13.3.5.0.6 librmm-cu13==26.10.0 nvidia-cuda-cuobjdump==13.5.37)
cuda_include=$(dirname "$(dirname "$(command -v nvcc)")")/include

# quiet NAME COMMAND...: runs COMMAND with its output in build-consumer/logs/NAME.log; on failure
# shows the log's last 40 lines.
quiet() {
  local name=$1
  shift
  if "$@" >"$logs/$name.log" 2>&1; then return 0; fi
  echo "--- $name failed; the end of build-consumer/logs/$name.log:"
  tail -n 40 "$logs/$name.log"
  return 1
}

project_version() { meson introspect --projectinfo "$repo/build-install" | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])'; }
build_option() {  # build_option NAME: its value in build-install
  meson introspect --buildoptions "$repo/build-install" |
    python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]))' "$1"
}

step_install() {
  # A fresh setup each time, so that the options are this tree's defaults (ccache keeps it quick).
  rm -rf build-install
  quiet install-setup meson setup build-install -Dtests=disabled -Dtools=false -Dbenchmarks=disabled \
    -Dmpi=enabled --prefix="$prefix" --libdir=lib &&
    quiet install-compile meson compile -C build-install &&
    rm -rf "$prefix" &&
    quiet install meson install -C build-install &&
    echo "installed cuvmm $(project_version) into build-install/prefix:" \
      "$(cd "$prefix" && find lib -maxdepth 1 -name 'libcuvmm*.so.*.*.*' -printf '%f ' && find lib -name '*.pc' -printf '%f ' && find lib/cmake -name '*.cmake' -printf '%f ')"
}

step_headers() {
  local manifest=$prefix/share/cuvmm/headers.txt listed installed source missing
  [ -f "$manifest" ] || { echo "no header manifest at $manifest (run the install step)"; return 1; }
  listed=$(cut -d' ' -f1 "$manifest" | sort)
  installed=$(cd "$prefix/include" && find cuvmm -type f | sort)
  # Every header of the source tree (and the two generated ones) is installed.
  source=$( (cd include && find cuvmm -name '*.hpp' && echo cuvmm/cuvmm.hpp && echo cuvmm/version.hpp) | sort -u)
  missing=$(comm -23 <(echo "$source") <(echo "$installed"))
  local ok=0
  if [ "$listed" != "$installed" ]; then
    echo "installed headers differ from the manifest:"
    diff <(echo "$listed") <(echo "$installed") | sed 's/^/  /'
    ok=1
  fi
  if [ -n "$missing" ]; then
    echo "headers in include/cuvmm that are not installed (add them to include/cuvmm/meson.build):"
    echo "$missing" | sed 's/^/  /'
    ok=1
  fi
  [ $ok -eq 0 ] && echo "header list: $(echo "$installed" | wc -l) headers installed, as listed; none left out"
  return $ok
}

step_wheels() {
  local stamp=$wheels/.installed
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${WHEELS[*]}" ]; then return 0; fi
  rm -rf "$wheels"
  quiet wheels python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    --target "$wheels" "${WHEELS[@]}" &&
    echo "${WHEELS[*]}" >"$stamp"
}

step_archs() {
  step_wheels || return 1
  local lib=$prefix/lib/libcuvmm.so cuobjdump=$wheels/nvidia/cu13/bin/cuobjdump archs newest elfs ptxs kernels ok=0
  archs=$(build_option gpu_architectures | tr ',' ' ')
  newest=$(echo "$archs" | tr ' ' '\n' | sort -n | tail -1)
  elfs=$("$cuobjdump" --list-elf "$lib" | awk '{print $NF}') || return 1
  ptxs=$("$cuobjdump" --list-ptx "$lib" | awk '{print $NF}') || return 1
  # The library's files with device code: every cubin's name up to its first dot.
  kernels=$(echo "$elfs" | sed 's/\..*//' | grep -v '^libcuvmm$' | sort -u)
  [ -n "$kernels" ] || { echo "no device code in $lib"; return 1; }
  for k in $kernels; do
    for a in $archs; do
      echo "$elfs" | grep -qx "$k.sm_$a.cubin" || { echo "missing: $k for sm_$a"; ok=1; }
    done
    echo "$ptxs" | grep -qx "$k.sm_$newest.ptx" || { echo "missing: PTX of $k for compute_$newest"; ok=1; }
  done
  [ $ok -eq 0 ] && echo "libcuvmm.so: machine code for sm_${archs// /, sm_} and PTX for compute_$newest" \
    "in each of: $(echo $kernels)"
  return $ok
}

consumer_run_tests() {  # consumer_run_tests BUILD_DIR: meson test, one line per program
  quiet "$(basename "$1")-test" meson test -C "$1" --print-errorlogs &&
    grep -hE '^(consumer|thrust_arena|errors_across_abi|cuda_mr_arena): ' "$1"/meson-logs/testlog.txt | sed 's/^/  /'
}

step_pkgconfig() {
  rm -rf "$out/pkgconfig"
  PKG_CONFIG_PATH=$prefix/lib/pkgconfig quiet pkgconfig-setup meson setup "$out/pkgconfig" test/consumer --wrap-mode=nofallback &&
    quiet pkgconfig-compile meson compile -C "$out/pkgconfig" &&
    echo "pkg-config: $(grep -vc ' rmm$' "$prefix/share/cuvmm/headers.txt") headers compiled one TU each (the RMM one in the rmm step); thrust_arena_device compiled with nvcc" &&
    consumer_run_tests "$out/pkgconfig"
}

step_cmake() {
  rm -rf "$out/cmake"
  local expect_nccl=OFF
  if compgen -G "$prefix/lib/libcuvmm_nccl.so.*" > /dev/null; then expect_nccl=ON; fi
  quiet cmake-configure cmake -S test/consumer -B "$out/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCUVMM_EXPECTED_VERSION="$(project_version)" -DCUVMM_EXPECT_NCCL=$expect_nccl &&
    quiet cmake-build cmake --build "$out/cmake" -j 2 &&
    quiet cmake-test ctest --test-dir "$out/cmake" --output-on-failure &&
    grep -h 'cuvmm .* from ' "$logs/cmake-configure.log" | sed 's/^-- /cmake: find_package(cuvmm CONFIG): /' &&
    tail -n 3 "$logs/cmake-test.log" | grep 'tests passed' | sed 's/^/  /'
}

step_subproject() {
  local src=$out/subproject-src
  rm -rf "$src" "$out/subproject"
  mkdir -p "$src/subprojects" && cp test/consumer/* "$src/" && ln -sfn "$repo" "$src/subprojects/cuvmm" &&
    quiet subproject-setup meson setup "$out/subproject" "$src" --force-fallback-for=cuvmm -Ddevice_code=false \
      -Dcuvmm:gpu_architectures=90 -Dcuvmm:tools=false &&
    quiet subproject-compile meson compile -C "$out/subproject" &&
    echo "subproject: built cuvmm and the consumer programs" &&
    consumer_run_tests "$out/subproject"
}

step_clang() {
  rm -rf "$out/clang"
  CXX=clang++-14 PKG_CONFIG_PATH=$prefix/lib/pkgconfig quiet clang-setup \
    meson setup "$out/clang" test/consumer --wrap-mode=nofallback -Ddevice_code=false &&
    quiet clang-compile ninja -C "$out/clang" -k 0 &&  # every failure, not only the first
    echo "clang++-14 consumer against the g++-built library:" &&
    consumer_run_tests "$out/clang"
}

step_cccl() {
  step_wheels || return 1
  local wheel_cccl=$wheels/nvidia/cu13/include/cccl dir=$out/cccl ok=0
  rm -rf "$dir" && mkdir -p "$dir"
  for which in toolkit wheel; do
    local cccl=$cuda_include/cccl
    [ $which = wheel ] && cccl=$wheel_cccl
    quiet "cccl-$which-g++" g++ -std=c++20 -Wall -Wextra -Werror -I"$prefix/include" -I"$cccl" -I"$cuda_include" \
      test/consumer/cuda_mr_arena.cpp -o "$dir/cuda_mr_arena_$which" -L"$prefix/lib" -lcuvmm -Wl,-rpath,"$prefix/lib" &&
      quiet "cccl-$which-nvcc" nvcc -std=c++20 -x cu -Werror all-warnings -I"$prefix/include" -I"$cccl" \
        -gencode=arch=compute_90,code=sm_90 -c test/consumer/cuda_mr_arena.cpp -o "$dir/cuda_mr_arena_$which.o" &&
      echo "  $("$dir/cuda_mr_arena_$which") (g++ run, nvcc compiled)" || ok=1
  done
  return $ok
}

step_rmm() {
  step_wheels || return 1
  local dir=$out/rmm rc
  rm -rf "$dir" && mkdir -p "$dir/lib"
  cp -L "$prefix/lib/libcuvmm.so.$(project_version | cut -d. -f1-2)" "$wheels/librmm/lib64/librmm.so" \
    "$wheels/rapids_logger/lib64/librapids_logger.so" "$dir/lib/" &&
    quiet rmm-compile nvcc -std=c++20 -Werror all-warnings -gencode=arch=compute_90,code=sm_90 \
      -I"$prefix/include" -I"$wheels/librmm/include" -I"$wheels/librmm/include/rapids" \
      -I"$wheels/rapids_logger/include" test/rmm/rmm_consumer.cu -o "$dir/rmm_consumer" \
      -L"$prefix/lib" -L"$dir/lib" -lcuvmm -lrmm -lrapids_logger -Xlinker -rpath,'$ORIGIN/lib' || return 1
  echo "rmm: build-consumer/rmm/rmm_consumer compiled and linked against librmm-cu13 (its own CCCL)"
  # cuvmm/rmm_arena_resource.hpp on the host backend (g++, runs without a GPU).
  quiet rmm-host-compile g++ -std=c++20 -Wall -Wextra -Werror -I"$prefix/include" -I"$cuda_include" \
    -I"$wheels/librmm/include" -I"$wheels/librmm/include/rapids" -I"$wheels/rapids_logger/include" \
    test/rmm/rmm_arena_resource_host.cpp -o "$dir/rmm_arena_resource_host" \
    -L"$prefix/lib" -L"$dir/lib" -lcuvmm -lrmm -lrapids_logger -Wl,-rpath,'$ORIGIN/lib' || return 1
  "$dir/rmm_arena_resource_host" >"$logs/rmm-host-run.log" 2>&1
  rc=$?
  sed 's/^/  /' "$logs/rmm-host-run.log" | tail -n 1
  [ $rc -eq 0 ] || { tail -n 15 "$logs/rmm-host-run.log"; return 1; }
  "$dir/rmm_consumer" >"$logs/rmm-run.log" 2>&1
  rc=$?
  sed 's/^/  /' "$logs/rmm-run.log" | tail -n 15
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || return 1
  # cuvmm-plan with RMM's pool and arena resources as trace peers (-Drmm_root): built, and its
  # test of those replays run (on a GPU; SKIPPED without one).
  quiet rmm-plan-setup meson setup --wipe "$dir/plan" -Drmm_root="$wheels" -Dtests=enabled -Dgpu_tests=enabled \
    -Dbenchmarks=disabled -Dmpi=disabled -Dnccl=disabled -Dgpu_architectures=90 -Dtest_gpu_architectures=90 &&
    quiet rmm-plan-compile meson compile -C "$dir/plan" cuvmm-plan tools_plan_device || return 1
  echo "rmm: cuvmm-plan built with RMM's pool and arena resources (build-consumer/rmm/plan)"
  "$dir/plan/test/tools/tools_plan_device" "[rmm]" >"$logs/rmm-plan-run.log" 2>&1
  rc=$?
  sed 's/^/  /' "$logs/rmm-plan-run.log" | tail -n 3
  [ $rc -eq 0 ] || [ $rc -eq 77 ]
}

status=0
for s in "$@"; do
  if ! declare -F "step_$s" >/dev/null; then
    echo "unknown step: $s" >&2
    exit 2
  fi
  "step_$s" || status=1
done
exit $status
