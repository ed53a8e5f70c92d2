// Kernels shared by the gpu tests, built by nvcc and called from g++-compiled test cases through
// plain launch functions. Every launch is asynchronous on the given stream and returns the launch
// error (cudaGetLastError); the caller synchronizes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define CUVMM_TEST_HOST_DEVICE __host__ __device__
#else
#define CUVMM_TEST_HOST_DEVICE
#endif

namespace cuvmm::test {

/// The pattern's value at `index` for `seed`: a splitmix64 mix, so that neighbouring elements and
/// seeds all differ. Host and device compute the same values.
CUVMM_TEST_HOST_DEVICE constexpr std::uint32_t pattern_value(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

/// data[i] = pattern_value(seed, i) for every i < count.
cudaError_t launch_write_pattern(std::uint32_t* data, std::size_t count, std::uint64_t seed, cudaStream_t stream);

/// Adds the number of elements that differ from the pattern to *mismatches and lowers
/// *first_mismatch to the smallest such index (both device memory, set up by the caller).
cudaError_t launch_count_mismatches(const std::uint32_t* data, std::size_t count, std::uint64_t seed,
                                    unsigned long long* mismatches, unsigned long long* first_mismatch,
                                    cudaStream_t stream);

/// data[i] = value for every i < count (the poison before a check, or the faulting write).
cudaError_t launch_fill(std::uint32_t* data, std::size_t count, std::uint32_t value, cudaStream_t stream);

}  // namespace cuvmm::test
