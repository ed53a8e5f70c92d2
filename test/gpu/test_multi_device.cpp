// One address range holding chunks of two or more devices, with access granted per allocation
// (no cudaDeviceEnablePeerAccess): each device writes and checks memory that lives on the others.
// Needs two or more devices; skips visibly with one (the H200 test machine has one).
#include <cstdint>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime_api.h>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/growable_buffer.hpp>

#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using namespace cuvmm;

TEST_CASE("a buffer balanced over every device is written by one device and checked by another",
          "[gpu][multi-device]") {
  test::require_gpu(2);
  test::init_runtime();
  int const devices = device_count();
  GrowableOptions options;
  for (int d = 0; d < devices; ++d) options.devices.push_back(d);
  options.placement = Placement::balanced;
  options.max_capacity_bytes = 8 * GiB;
  options.max_chunk_bytes = 64 * MiB;
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    GrowableBuffer<std::uint32_t> buffer(cuda, options);
    std::size_t const n = 768 * MiB / sizeof(std::uint32_t);
    buffer.resize(n, test::poison);
    for (int d = 0; d < devices; ++d) {
      CAPTURE(d);
      CHECK(buffer.storage().bytes_on_device(d) > 0);
    }
    std::uint64_t const seed = test::test_seed(31);
    // The last device writes everything (chunks of every device), device 0 checks it.
    CUVMM_CUDA_REQUIRE(cudaSetDevice(devices - 1));
    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(buffer.data(), n, seed, nullptr));
    CUVMM_CUDA_REQUIRE(cudaDeviceSynchronize());
    CUVMM_CUDA_REQUIRE(cudaSetDevice(0));
    CHECK(test::check_pattern(buffer.data(), n, seed, nullptr).mismatches == 0);
    CHECK(test::host_mismatches(buffer.data(), n, seed) == 0);
    // And the other way round with other data.
    std::uint64_t const other = test::test_seed(32);
    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(buffer.data(), n, other, nullptr));
    CUVMM_CUDA_REQUIRE(cudaDeviceSynchronize());
    CUVMM_CUDA_REQUIRE(cudaSetDevice(devices - 1));
    CHECK(test::host_mismatches(buffer.data(), n, other) == 0);
    CUVMM_CUDA_REQUIRE(cudaSetDevice(0));
  }
  leaks.verify();
}

TEST_CASE("a peer granted access after growth can use memory that lives on another device",
          "[gpu][multi-device][access]") {
  test::require_gpu(2);
  test::init_runtime();
  GrowableOptions options;
  options.devices = {0};
  options.max_capacity_bytes = 2 * GiB;
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    GrowableBuffer<std::uint32_t> buffer(cuda, options);
    std::size_t const n = 64 * MiB / sizeof(std::uint32_t);
    buffer.resize(n, test::poison);
    CHECK(buffer.storage().options().access == std::vector<AccessGrant>{{0, Access::read_write}});
    AccessGrant const peer[] = {{1, Access::read_write}};
    buffer.grant_access(peer);
    buffer.resize(2 * n, test::poison);  // later growth is granted to the peer too
    std::uint64_t const seed = test::test_seed(33);
    CUVMM_CUDA_REQUIRE(cudaSetDevice(1));
    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(buffer.data(), 2 * n, seed, nullptr));
    CUVMM_CUDA_REQUIRE(cudaDeviceSynchronize());
    CUVMM_CUDA_REQUIRE(cudaSetDevice(0));
    CHECK(test::check_pattern(buffer.data(), 2 * n, seed, nullptr).mismatches == 0);
    CHECK(buffer.storage().bytes_on_device(1) == 0);
  }
  leaks.verify();
}
