// The test pattern: the value written at each index of a checked buffer, the same on the host and
// on the device (compiled by nvcc it is __host__ __device__).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CUVMM_TEST_HOST_DEVICE __host__ __device__
#else
#define CUVMM_TEST_HOST_DEVICE
#endif

namespace cuvmm::test {

/// The pattern's value at `index` for `seed`: a splitmix64 mix, so that neighbouring elements and
/// seeds all differ.
CUVMM_TEST_HOST_DEVICE constexpr std::uint32_t pattern_value(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

}  // namespace cuvmm::test
