// Compressible memory on the GPU: a device that supports generic compression (the H200 does)
// grants it to every chunk of a buffer that asks, stats report it, and data round-trips: zeros
// (which compress) and random words (which do not). On a device without it, preferred falls back
// and required throws cuvmm::Unsupported, leaving nothing behind.
#include <algorithm>
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

namespace {

GrowableOptions compressible(Compression compression) {
  GrowableOptions options;
  options.max_capacity_bytes = 8 * GiB;
  options.compression = compression;
  return options;
}

}  // namespace

TEST_CASE("a buffer that requires compression gets it on every chunk, and zeros and random data round-trip",
          "[gpu][compression]") {
  test::require_gpu();
  test::init_runtime();
  if (!device_caps(0).generic_compression) SKIP("device 0 does not support generic compression");
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    test::Stream const stream;
    GrowableBuffer<std::uint32_t> buffer(cuda, compressible(Compression::required), stream.get());
    std::size_t const n = 300 * MiB / sizeof(std::uint32_t);
    buffer.resize(n, test::poison);
    buffer.resize(0);
    buffer.resize(n, 0u);  // zeros: the data compression is made for
    std::vector<std::uint32_t> host(n, test::poison);
    CUVMM_CUDA_REQUIRE(cudaMemcpyAsync(host.data(), buffer.data(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost,
                                       stream.get()));
    stream.synchronize();
    CHECK(static_cast<std::size_t>(std::count(host.begin(), host.end(), 0u)) == n);

    std::uint64_t const seed = test::test_seed(11);
    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(buffer.data(), n, seed, stream.get()));
    CHECK(test::check_pattern(buffer.data(), n, seed, stream.get()).mismatches == 0);
    CHECK(test::host_mismatches(buffer.data(), n, seed) == 0);

    GrowableStats const stats = buffer.stats();
    CHECK(stats.compression == Compression::required);
    CHECK(stats.compressed_bytes == stats.capacity_bytes);
    CHECK(stats.compression_fallback_bytes == 0);
    for (const PhysicalChunk& chunk : buffer.storage().chunks()) CHECK(chunk.compression_granted());
  }
  leaks.verify();
}

TEST_CASE("preferred compression reports what the device granted", "[gpu][compression]") {
  test::require_gpu();
  test::init_runtime();
  bool const supported = device_caps(0).generic_compression;
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    GrowableBuffer<std::uint32_t> buffer(cuda, compressible(Compression::preferred));
    buffer.resize(64 * MiB / sizeof(std::uint32_t), 1u);
    GrowableStats const stats = buffer.stats();
    CAPTURE(supported);
    CHECK(stats.compressed_bytes == (supported ? stats.capacity_bytes : 0));
    CHECK(stats.compression_fallback_bytes == (supported ? 0 : stats.capacity_bytes));
  }
  leaks.verify();
}

TEST_CASE("required compression on a device without it throws Unsupported and leaves nothing behind",
          "[gpu][compression]") {
  test::require_gpu();
  test::init_runtime();
  if (device_caps(0).generic_compression) SKIP("device 0 supports generic compression: nothing to refuse");
  CudaBackend& cuda = cuda_backend(0);
  test::LeakCheck const leaks(cuda);
  {
    GrowableBuffer<std::uint32_t> buffer(cuda, compressible(Compression::required));
    CHECK_THROWS_AS(buffer.resize(1024), Unsupported);
    CHECK(buffer.capacity() == 0);
  }
  leaks.verify();
}
