// Device work for the GrowableBuffer gpu tests: pattern fills and checks, a kernel that keeps
// using a prefix while the host grows the buffer, and Thrust algorithms on buffers (built by nvcc,
// so the Thrust paths of growable_buffer.hpp are compiled the way users compile them).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include <cuvmm/growable_buffer.hpp>

namespace cuvmm::test {

/// The value the pattern puts at index i for a given seed (a 64-bit mix; never constant).
std::uint64_t pattern_value(std::uint64_t i, std::uint64_t seed);

/// data[i] = pattern_value(first + i, seed) for i in [0, count).
void fill_pattern(std::uint64_t* data, std::size_t count, std::uint64_t first, std::uint64_t seed, cudaStream_t stream);

/// Number of i in [0, count) with data[i] != pattern_value(first + i, seed); waits for the stream.
std::size_t count_pattern_mismatches(const std::uint64_t* data, std::size_t count, std::uint64_t first,
                                     std::uint64_t seed, cudaStream_t stream);

/// Adds 1 to each of data[0, count) `rounds` times, one round after another (a long-running kernel
/// that keeps reading and writing the prefix).
void increment_rounds(std::uint32_t* data, std::size_t count, int rounds, cudaStream_t stream);

void thrust_sort(GrowableBuffer<std::uint32_t>& keys, cudaStream_t stream);
std::uint64_t thrust_sum(const GrowableBuffer<std::uint32_t>& values, cudaStream_t stream);
/// out[i] = 3 * in[i] + 1 for every element (out is resized to in's size).
void thrust_affine(const GrowableBuffer<std::uint32_t>& in, GrowableBuffer<std::uint32_t>& out, cudaStream_t stream);
/// Appends in[i] * 2 for every element through a Thrust transform iterator (GrowableBuffer::append's
/// nvcc path).
void append_doubled(const GrowableBuffer<std::uint32_t>& in, GrowableBuffer<std::uint32_t>& out, cudaStream_t stream);
/// out = in's elements in reverse order, copied by Thrust through in.crbegin()/crend() (the
/// device container's reverse iterators dispatch to the device).
void thrust_reverse_copy(const GrowableBuffer<std::uint32_t>& in, GrowableBuffer<std::uint32_t>& out,
                         cudaStream_t stream);
/// Fills with pseudo-random keys derived from `seed`.
void fill_random_keys(GrowableBuffer<std::uint32_t>& keys, std::uint64_t seed, cudaStream_t stream);

}  // namespace cuvmm::test
