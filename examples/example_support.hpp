// examples/example_support.hpp: what the example programs share around the lines the README and docs/ quote.
//
// Each example is a whole program whose lines between "// [readme]" markers are quoted verbatim in
// README.md (scripts/check_readme_examples.py checks that). It exits 0 when everything it checked
// held, 77 (Meson's "skipped") when this machine lacks what it needs, and 1 otherwise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include <cuvmm/device_caps.hpp>

namespace example {

/// Meson's exit code for a skipped test.
inline constexpr int skipped = 77;

/// Whether this machine has at least `count` CUDA devices; says why not.
inline bool has_devices(int count) {
  cuvmm::DriverStatus const driver = cuvmm::driver_status();
  if (!driver.available) {
    std::printf("skipped: %s\n", driver.reason.c_str());
    return false;
  }
  if (driver.device_count < count) {
    std::printf("skipped: needs %d CUDA device(s), found %d\n", count, driver.device_count);
    return false;
  }
  return true;
}

/// Ends the program with a failure unless `ok`.
inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "example failed: %s\n", what);
    std::exit(1);
  }
}

/// Ends the program with a failure unless `result` is cudaSuccess.
inline void check_cuda(cudaError_t result, const char* call) {
  if (result != cudaSuccess) {
    std::fprintf(stderr, "example failed: %s: %s\n", call, cudaGetErrorString(result));
    std::exit(1);
  }
}

/// A new CUDA stream, ordered with the legacy default stream (never destroyed: the examples end
/// with the process).
inline cudaStream_t new_stream() {
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  return stream;
}

}  // namespace example
