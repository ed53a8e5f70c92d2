// Multicast on real devices. On a machine without multicast support (the H200 test machine: one
// GPU, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED = 0) only the gate runs: a MulticastObject is
// refused with cuvmm::Unsupported and no cuMulticast* call is made (counted). The all-reduce and
// barrier case needs two or more devices that support multicast and skips visibly elsewhere;
// cuMulticastCreate is only ever reached after multicast_support() said yes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cstdlib>
#include <string>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuda_runtime_api.h>

#include <cuvmm/address_range.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/multicast.hpp>
#include <cuvmm/multimem.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "gpu.hpp"
#include "gpu_support.hpp"
#include "multicast/multicast_gate.hpp"

using namespace cuvmm;
using Catch::Matchers::ContainsSubstring;

namespace {

std::vector<int> all_devices() {
  std::vector<int> devices;
  for (int d = 0; d < std::max(2, device_count()); ++d) devices.push_back(d);
  return devices;
}

}  // namespace

TEST_CASE("without multicast support a MulticastObject is refused before any multicast driver call",
          "[gpu][multicast][gate]") {
  test::require_gpu();
  std::vector<int> const devices = all_devices();
  MulticastSupport const support = multicast_support(devices);
  if (support.supported) SKIP("these devices support multicast: the refusal cannot be shown here");
  INFO(support.reason);
  if (device_count() < 2) {
    CHECK(support.reason == "multicast needs at least two CUDA devices; this machine has " +
                                std::to_string(device_count()));
  } else {
    CHECK_THAT(support.reason, ContainsSubstring("does not support multicast"));
  }
  std::size_t const calls_before = detail::multicast_driver_calls();
  CHECK_THROWS_AS(MulticastObject(devices, 2 * MiB), Unsupported);
  CHECK(detail::multicast_driver_calls() == calls_before);
  CHECK(detail::multicast_driver_calls() == 0);
}

TEST_CASE("the gate reads each device's own multicast attribute", "[gpu][multicast][gate]") {
  test::require_gpu();
  bool const device0 = device_caps(0).multicast;
  // As if the machine had two devices like device 0: the answer is device 0's attribute.
  std::vector<int> const pair{0, 1};
  MulticastSupport const support =
      detail::multicast_gate(pair, 2, {}, [](int device) { return device_caps(device == 1 ? 0 : device).multicast; });
  CHECK(support.supported == device0);
  if (!device0) {
    CHECK(support.reason == "device 0 does not support multicast (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED is 0)");
  }
  CHECK(detail::multicast_driver_calls() == 0);
}

TEST_CASE("a multicast all-reduce sums every device's copy and the arrival barrier counts every device",
          "[gpu][multicast]") {
  test::require_gpu(2);
  // Creating a multicast object can put a shared host's GPUs out of service: only where the person
  // running the tests says multicast is allowed (never on the lent H200 machines).
  char const* allowed = std::getenv("CUVMM_TEST_MULTICAST");
  if (allowed == nullptr || std::string(allowed) != "1") {
    SKIP("multicast objects are created only with CUVMM_TEST_MULTICAST=1, on machines where multicast is allowed");
  }
  std::vector<int> const devices = all_devices();
  MulticastSupport const support = multicast_support(devices);
  if (!support.supported) SKIP("multicast is not available: " << support.reason);
  int const ranks = static_cast<int>(devices.size());

  std::vector<PhysicalChunk> chunks;  // declared first: bound to the object, so released after it
  std::vector<AddressRange> ranges;
  std::vector<Mapping> unicast;
  MulticastObject multicast(devices, 2 * MiB);
  std::size_t const bytes = multicast.size();
  chunks.reserve(devices.size());
  ranges.reserve(devices.size());
  unicast.reserve(devices.size());
  for (int d : devices) {
    CudaBackend& cuda = cuda_backend(d);
    chunks.emplace_back(cuda, bytes, ChunkProperties{.device = d});
    ranges.emplace_back(cuda, bytes);
    AccessGrant const own{.device = d, .access = Access::read_write};
    unicast.emplace_back(ranges.back(), 0, chunks.back(), std::span<const AccessGrant>(&own, 1));
    multicast.bind(chunks.back());
  }
  MulticastMapping const mapped = multicast.map();
  auto* const mc_values = reinterpret_cast<float*>(mapped.address());
  std::size_t const count = std::min<std::size_t>(bytes / sizeof(float) - 64, 1 << 20);
  auto* const mc_counter = reinterpret_cast<unsigned*>(mc_values + count + 32);  // past the values

  std::vector<cudaStream_t> streams(devices.size());
  for (std::size_t r = 0; r < devices.size(); ++r) {
    CUVMM_CUDA_REQUIRE(cudaSetDevice(devices[r]));
    CUVMM_CUDA_REQUIRE(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    std::vector<float> values(count + 64, 0.0f);
    for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<float>((i % 97) * (r + 1));
    CUVMM_CUDA_REQUIRE(cudaMemcpy(reinterpret_cast<void*>(unicast[r].address()), values.data(),
                                  values.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  for (std::size_t r = 0; r < devices.size(); ++r) {
    CUVMM_CUDA_REQUIRE(cudaSetDevice(devices[r]));
    launch_multimem_all_reduce_sum(mc_values, count, static_cast<int>(r), ranks, streams[r]);
  }
  for (std::size_t r = 0; r < devices.size(); ++r) CUVMM_CUDA_REQUIRE(cudaStreamSynchronize(streams[r]));
  for (std::size_t r = 0; r < devices.size(); ++r) {
    CUVMM_CUDA_REQUIRE(cudaSetDevice(devices[r]));
    launch_multimem_barrier(mc_counter, reinterpret_cast<unsigned*>(unicast[r].address()) + count + 32,
                            static_cast<unsigned>(ranks), streams[r]);
  }
  for (std::size_t r = 0; r < devices.size(); ++r) CUVMM_CUDA_REQUIRE(cudaStreamSynchronize(streams[r]));

  float const factor = static_cast<float>(ranks * (ranks + 1) / 2);
  for (std::size_t r = 0; r < devices.size(); ++r) {
    std::vector<float> values(count + 64, -1.0f);
    CUVMM_CUDA_REQUIRE(cudaMemcpy(values.data(), reinterpret_cast<const void*>(unicast[r].address()),
                                  values.size() * sizeof(float), cudaMemcpyDeviceToHost));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) wrong += values[i] != static_cast<float>(i % 97) * factor ? 1 : 0;
    CAPTURE(r);
    CHECK(wrong == 0);
    unsigned arrivals = 0;
    std::memcpy(&arrivals, &values[count + 32], sizeof arrivals);
    CHECK(arrivals == static_cast<unsigned>(ranks));
    CUVMM_CUDA_REQUIRE(cudaStreamDestroy(streams[r]));
  }
  CUVMM_CUDA_REQUIRE(cudaSetDevice(0));
}
