// Device work for the gpu arena tests, built by nvcc (Thrust, libcu++ and kernels) and called from
// the g++-compiled test cases.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include <cuvmm/arena.hpp>

namespace cuvmm::test {

/// What the Thrust algorithms computed on one set of random keys.
struct ThrustResults {
  bool sorted = false;                   ///< thrust::is_sorted after thrust::sort
  std::uint64_t sorted_checksum = 0;     ///< sum of key * (position + 1) after sorting
  std::uint64_t sum = 0;                 ///< thrust::reduce of the keys (as 64-bit)
  std::uint64_t transformed_sum = 0;     ///< reduce of transform(key -> key ^ 0x5bd1e995)
  bool copy_equal = false;               ///< thrust::copy into a second vector equals the source
  friend bool operator==(const ThrustResults&, const ThrustResults&) = default;
};

/// Sort, reduce, transform and copy `count` random keys of `seed` on `stream`; with `arena`, every
/// vector is a device_vector<T, ThrustAllocator<T>> and temporary storage comes from the arena
/// through thrust::cuda::par(alloc).on(stream); without, Thrust's defaults are used.
ThrustResults run_thrust_algorithms(Arena* arena, std::size_t count, std::uint64_t seed, cudaStream_t stream);

/// Allocates, fills and frees through cuda::mr::async_resource_ref<device_accessible> over an
/// ArenaResource; returns the bytes that read back wrong.
std::size_t cuda_mr_round_trip(Arena& arena, std::size_t bytes, cudaStream_t stream);

/// Spins about `nanoseconds` on the device, then writes `value` over `count` words (on `stream`).
cudaError_t launch_spin_then_fill(std::uint32_t* data, std::size_t count, std::uint32_t value,
                                  std::uint64_t nanoseconds, cudaStream_t stream);

}  // namespace cuvmm::test
