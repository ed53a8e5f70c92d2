// Device work of the aliasing gpu tests (see aliasing_kernels.hpp).
#include "aliasing_kernels.hpp"

#include <cuda/ptx>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>

#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "kernels.hpp"

namespace cuvmm::test {
namespace {

__global__ void count_ring_mismatches_kernel(RingView<std::uint32_t> ring, std::size_t first, std::size_t count,
                                             std::uint64_t seed, unsigned long long* mismatches) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    local += ring[first + i] != pattern_value(seed, i) ? 1 : 0;
  if (local != 0) atomicAdd(mismatches, local);
}

__global__ void fenced_exchange_kernel(std::uint32_t* write_alias, const std::uint32_t* read_alias,
                                       std::uint32_t* out, std::uint64_t seed) {
  std::size_t const base = static_cast<std::size_t>(blockIdx.x) * exchange_block;
  std::size_t const mine = base + threadIdx.x;
  write_alias[mine] = pattern_value(seed, mine);
  cuda::ptx::fence_proxy_alias();  // orders the write above with reads through other aliases
  __syncthreads();
  out[mine] = read_alias[base + (threadIdx.x + 1) % exchange_block];
}

unsigned blocks_for(std::size_t count) {
  std::size_t const blocks = (count + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? (blocks == 0 ? 1 : blocks) : 4096);
}

}  // namespace

std::size_t count_ring_mismatches(RingView<std::uint32_t> ring, std::size_t first, std::size_t count,
                                  std::uint64_t seed, cudaStream_t stream) {
  unsigned long long* counter = nullptr;
  REQUIRE(cudaMalloc(&counter, sizeof *counter) == cudaSuccess);
  REQUIRE(cudaMemsetAsync(counter, 0, sizeof *counter, stream) == cudaSuccess);
  count_ring_mismatches_kernel<<<blocks_for(count), 256, 0, stream>>>(ring, first, count, seed, counter);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  unsigned long long found = ~0ull;
  REQUIRE(cudaMemcpyAsync(&found, counter, sizeof found, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaFree(counter) == cudaSuccess);
  return static_cast<std::size_t>(found);
}

std::size_t fenced_exchange_mismatches(std::uint32_t* write_alias, const std::uint32_t* read_alias, std::size_t count,
                                       std::uint64_t seed, cudaStream_t stream) {
  REQUIRE(count != 0);
  REQUIRE(count % exchange_block == 0);
  std::uint32_t* out = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&out), count * sizeof(std::uint32_t)) == cudaSuccess);
  REQUIRE(launch_fill(out, count, 0xA5C3E10Fu, stream) == cudaSuccess);  // poison: never only zeros
  fenced_exchange_kernel<<<static_cast<unsigned>(count / exchange_block), exchange_block, 0, stream>>>(
      write_alias, read_alias, out, seed);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  std::vector<std::uint32_t> host(count);
  REQUIRE(cudaMemcpyAsync(host.data(), out, count * sizeof(std::uint32_t), cudaMemcpyDeviceToHost, stream) ==
          cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(cudaFree(out) == cudaSuccess);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t const base = i / exchange_block * exchange_block;
    wrong += host[i] != pattern_value(seed, base + (i - base + 1) % exchange_block) ? 1 : 0;
  }
  return wrong;
}

void thrust_sort_window(const RingBuffer<std::uint32_t>::Window& window, cudaStream_t stream) {
  thrust::sort(thrust::cuda::par.on(stream), window.begin(), window.end());
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
}

}  // namespace cuvmm::test
