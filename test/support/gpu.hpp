// GPU test guard: a gpu-suite test case calls require_gpu() first; without a driver or device it
// SKIPs visibly, naming why, instead of passing.
#pragma once

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/device_caps.hpp>

namespace cuvmm::test {

/// Skips the running test case unless at least `devices` CUDA devices are present.
inline void require_gpu(int devices = 1) {
  DriverStatus const status = driver_status();
  if (!status.available) SKIP("no CUDA driver: " << status.reason);
  if (status.device_count < devices)
    SKIP("needs " << devices << " CUDA device(s), found " << status.device_count);
}

}  // namespace cuvmm::test
