// Kernels shared by the gpu tests (see kernels.hpp). Grid-stride loops over 32-bit elements.
#include "kernels.hpp"

namespace cuvmm::test {
namespace {

constexpr unsigned threads_per_block = 256;

unsigned blocks_for(std::size_t count) {
  std::size_t const blocks = (count + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);
}

__global__ void write_pattern(std::uint32_t* data, std::size_t count, std::uint64_t seed) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    data[i] = pattern_value(seed, i);
}

__global__ void count_mismatches(const std::uint32_t* data, std::size_t count, std::uint64_t seed,
                                 unsigned long long* mismatches, unsigned long long* first_mismatch) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if (data[i] != pattern_value(seed, i)) {
      ++local;
      atomicMin(first_mismatch, static_cast<unsigned long long>(i));
    }
  }
  if (local != 0) atomicAdd(mismatches, local);
}

__global__ void fill(std::uint32_t* data, std::size_t count, std::uint32_t value) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    data[i] = value;
}

}  // namespace

cudaError_t launch_write_pattern(std::uint32_t* data, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  write_pattern<<<blocks_for(count), threads_per_block, 0, stream>>>(data, count, seed);
  return cudaGetLastError();
}

cudaError_t launch_count_mismatches(const std::uint32_t* data, std::size_t count, std::uint64_t seed,
                                    unsigned long long* mismatches, unsigned long long* first_mismatch,
                                    cudaStream_t stream) {
  count_mismatches<<<blocks_for(count), threads_per_block, 0, stream>>>(data, count, seed, mismatches,
                                                                        first_mismatch);
  return cudaGetLastError();
}

cudaError_t launch_fill(std::uint32_t* data, std::size_t count, std::uint32_t value, cudaStream_t stream) {
  fill<<<blocks_for(count), threads_per_block, 0, stream>>>(data, count, value);
  return cudaGetLastError();
}

}  // namespace cuvmm::test
