// Kernels shared by the gpu tests, built by nvcc and called from g++-compiled test cases through
// plain launch functions. Every launch is asynchronous on the given stream and returns the launch
// error (cudaGetLastError); the caller synchronizes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "pattern.hpp"  // pattern_value(), CUVMM_TEST_HOST_DEVICE

namespace cuvmm::test {

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
