#!/usr/bin/env bash
# cuvmm's test command (the README's second quick-start command; .ci/run calls it too).
#
# Installs what is missing (Debian 12), then:
#   1. builds with tests and runs the `unit`, `gpu`, `ipc`, `tools` and `examples` suites (gpu cases SKIP visibly
#      without a GPU; ipc runs two-process sharing on the host backend and two MPI ranks under mpirun;
#      tools tests cuvmm-plan, also as a child process on its host-backend profile), then opens
#      cuvmm-plan's HTML report in headless Chromium (scripts/check-report.sh); runs the unit, ipc
#      and tools suites again under nice beside a CPU-bound process (a busy machine);
#   2. builds again with AddressSanitizer + UndefinedBehaviorSanitizer and runs the `unit`, `ipc` and
#      `tools` suites (without MPI: Open MPI's own allocations would read as leaks); then with
#      ThreadSanitizer, the same suites (host code only: no gpu suite, no MPI);
#   3. installs the library (every GPU architecture) into a scratch prefix and checks it as users meet
#      it: the header list, the architectures in libcuvmm.so, consumers through pkg-config, CMake,
#      a Meson subproject and clang++-14, the cuda::mr adapter with two CCCL versions, and RMM;
#   4. fuzzes the Arena, the IPC message decoder and the trace reader for 45 s each with libFuzzer
#      (scripts/fuzz.sh; clang 14, host backend); builds the API reference (Doxygen, warnings fail);
#      checks that the results pages are those scripts/results.py generates from bench/results;
#   5. prints the Catch2 test-case counts of every program and a closing
#      "tests: N passed, N failed, N skipped" line.
# Exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

bash scripts/setup-debian.sh || exit 1

failed=()
step() {  # step NAME COMMAND...: runs a step, remembers failures, keeps going
  local name=$1
  shift
  echo "==> $name"
  if ! "$@"; then
    failed+=("$name")
    echo "==> $name FAILED"
  fi
}

configure() {  # configure BUILD_DIR [MESON_OPTIONS...]: sets up once, reconfigures otherwise
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
}

run_suites() {  # run_suites BUILD_DIR SUITE...: fresh reports, then meson test
  local dir=$1
  shift
  rm -rf "$dir/test-results"
  local suites=()
  for s in "$@"; do suites+=(--suite "$s"); done
  meson test -C "$dir" "${suites[@]}" --print-errorlogs
}

# 1. The plain build: unit, gpu, ipc and tools suites.
# Device code for sm_90 only in the test builds (the install build in step 3 makes every architecture).
# NCCL is required here: libcuvmm_nccl builds against the CUDA toolkit's NCCL (or -Dnccl_root).
step "configure build" configure build -Dtests=enabled -Dmpi=enabled -Dnccl=enabled -Dgpu_architectures=90
step "compile build" meson compile -C build
step "test build (unit, gpu, ipc, tools, examples)" run_suites build unit gpu ipc tools examples
# cuvmm-plan's HTML report as a reader meets it: the host-backend report opened in headless Chromium
# (Debian's package, installed if missing), no console messages, every section, a screenshot
# (build/report-check/report.png).
step "cuvmm-plan's HTML report in headless Chromium" bash scripts/check-report.sh build

# The host suites once more on a busy machine: under nice, beside a CPU-bound process, so that a
# test assuming how fast the machine is fails here and not on a user's loaded machine. The plain
# build is reused (no compile); its reports are overwritten by this run's, which has the same cases.
busy_suites() {
  (while :; do :; done) &
  local burner=$!
  nice -n 10 meson test -C build --suite unit --suite ipc --suite tools --print-errorlogs \
    --timeout-multiplier 3 --logbase testlog-busy
  local status=$?
  kill "$burner"
  wait "$burner" 2>/dev/null
  return $status
}
step "test build on a busy machine (unit, ipc, tools under nice, a CPU-bound process beside)" busy_suites

# Nothing may link libcuda: the driver layer resolves it at run time (the CUDA stubs on this
# machine's LIBRARY_PATH would let a stray -lcuda link silently).
no_libcuda() {
  local linked
  linked=$(ldd build/src/libcuvmm.so build/tools/cuvmm-info build/tools/cuvmm-plan/cuvmm-plan build/test/gpu/gpu_* build/test/ipc/ipc_gpu_* 2>/dev/null | grep -c 'libcuda\.so') || true
  echo "binaries that need libcuda.so: $linked"
  [ "$linked" -eq 0 ]
}
step "no libcuda dependency" no_libcuda
# The installed ABI must not depend on the user's compiler: a clang++-14 program against the g++ library.
step "clang++-14 program against the g++-built libcuvmm.so (ABI)" bash scripts/abi-check.sh build

# 2. Sanitizers on the unit suite (host code only; the gpu suite needs the real device).
step "configure build-asan" configure build-asan -Dtests=enabled -Dgpu_tests=disabled -Dmpi=disabled \
  -Db_sanitize=address,undefined -Db_lundef=false -Dgpu_architectures=90
step "compile build-asan" meson compile -C build-asan
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
step "test build-asan (unit, ipc, tools, ASan+UBSan)" run_suites build-asan unit ipc tools

# ThreadSanitizer on the same suites. Host code only: the CUDA driver and runtime are not
# instrumented (their threads would be invisible to TSan), so the gpu suite and cuvmm-plan's CUDA
# baselines are not built, and MPI stays off. No suppressions are needed (none is used). Child
# processes (fork without exec in run_in_child, posix_spawn elsewhere) run under TSan too; a child
# that must die of SIGSEGV resets the handler first, as under ASan. halt_on_error: the first report
# fails the program (TSan's exit code 66 would too, at exit).
tsan_suites() {
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_suites build-tsan unit ipc tools
}
step "configure build-tsan" configure build-tsan -Dtests=enabled -Dgpu_tests=disabled -Dmpi=disabled \
  -Dbenchmarks=disabled -Db_sanitize=thread -Db_lundef=false -Dgpu_architectures=90
step "compile build-tsan" meson compile -C build-tsan
step "test build-tsan (unit, ipc, tools, TSan)" tsan_suites

# 3. The installed package as its users meet it (scripts/package-checks.sh says what each step does).
# The install build is the only one with every GPU architecture; the RMM and CCCL-wheel checks use
# Python wheels installed into build-consumer/wheels (never used by the library's own build).
package() { bash scripts/package-checks.sh "$@"; }
step "install (every GPU architecture)" package install
step "header list (installed = listed)" package headers
step "GPU architectures in libcuvmm.so (cuobjdump)" package archs
step "consumer via pkg-config" package pkgconfig
step "consumer via CMake (find_package(cuvmm CONFIG))" package cmake
step "consumer via subproject" package subproject
step "consumer with clang++-14 against the g++-built library" package clang
step "cuda::mr adapter with the toolkit's CCCL and the newest CCCL wheel" package cccl
step "RMM 26 consumer and cuvmm-plan with RMM (librmm-cu13 wheel): compile, link, run (SKIPPED without a GPU)" package rmm
# PyTorch: the plain plug-in's RUNPATH; the cuvmm_torch wheel built as users build it (pip, meson-python,
# against torch 2.11 in a fresh venv under build-torch/), installed into another fresh venv and with
# --target and --prefix, its package and host-backend checks there (test/torch/run_cpu_tests.sh).
step "PyTorch package (no GPU)" bash test/torch/run_cpu_tests.sh build
# The runner of PyTorch's own allocator tests (test/torch/pytorch-suite.sh) on stand-ins: selection,
# both modes, a crash and a hang costing only their own test, the comparison.
step "PyTorch test-suite runner (stand-ins, no GPU)" python3 test/torch/pytorch_suite_selftest.py

# 4. libFuzzer (clang, ASan+UBSan) over every test/fuzz/fuzz_*.cpp target: the Arena's operation
# sequences, the IPC decoder and importer, the trace reader; each checks its own invariants.
step "fuzz every target for 45 s (libFuzzer, host backend)" bash scripts/fuzz.sh 45
# The API reference from the public headers; a Doxygen warning fails the step.
step "API reference (Doxygen)" bash scripts/docs.sh
# The results pages (bench/results/<gpu>/README.md, docs/performance.md, the README's table) are
# generated from the JSON beside them: a stale one fails.
step "results pages generated from bench/results (scripts/results.py --check)" python3 scripts/results.py --check

# 5. What ran: Catch2 test cases per program, skips with their reasons.
echo
echo "==> Catch2 test cases (build: unit + gpu + ipc + tools; build-asan: unit + ipc + tools under ASan+UBSan;"
echo "    build-tsan: unit + ipc + tools under TSan)"
step "test summary" python3 scripts/test-summary.py build/test-results build-asan/test-results build-tsan/test-results

if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED steps: ${failed[*]}"
  exit 1
fi
echo "all steps passed"
