// The multimem kernels (see cuvmm/multimem.hpp): inline PTX for sm_90 and newer.
//
//  - multimem.ld_reduce.relaxed.sys.global.add.f32: one load through a multicast address that
//    returns the sum of that element over every device's bound memory;
//  - multimem.st.relaxed.sys.global.f32: one store that reaches every device's copy;
//  - multimem.red.release.sys.global.add.u32: an atomic add applied to every device's copy;
//  - fence.proxy.alias: orders accesses through the multicast address against accesses through a
//    unicast address of the same memory (they are virtual aliases of it).
// Compiled into the library for the configured architectures; for one below sm_90 the kernels
// trap instead (the PTX does not exist there). Not run on hardware yet: the H200 test machine has
// no multicast support.
#include <cuvmm/multimem.hpp>

#include <cuda_runtime_api.h>

#include <cuda/atomic>

#include <algorithm>
#include <string>

#include <cuvmm/error.hpp>

#include "errors/runtime_check.hpp"

namespace cuvmm {
namespace {

constexpr unsigned threads = 256;
constexpr std::size_t max_blocks = 1024;

__device__ float multimem_load_sum(const float* address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  float sum;
  asm volatile("multimem.ld_reduce.relaxed.sys.global.add.f32 %0, [%1];" : "=f"(sum) : "l"(address) : "memory");
  return sum;
#else
  __trap();
  return 0;
#endif
}

__device__ void multimem_store(float* address, float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("multimem.st.relaxed.sys.global.f32 [%0], %1;" ::"l"(address), "f"(value) : "memory");
#else
  __trap();
#endif
}

__device__ void multimem_arrive(unsigned* address) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("multimem.red.release.sys.global.add.u32 [%0], %1;" ::"l"(address), "n"(1) : "memory");
#else
  __trap();
#endif
}

__device__ void fence_multicast_unicast() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.alias;" ::: "memory");
#else
  __trap();
#endif
}

/// Rank `rank` of `ranks` sums its slice [begin, end) of the elements across every device.
__global__ void all_reduce_sum_kernel(float* multicast, std::size_t begin, std::size_t end) {
  std::size_t const stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = begin + static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < end; i += stride)
    multimem_store(multicast + i, multimem_load_sum(multicast + i));
}

__global__ void barrier_kernel(unsigned* multicast_counter, unsigned* unicast_counter, unsigned expected) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  multimem_arrive(multicast_counter);
  fence_multicast_unicast();  // the unicast loads below must not be ordered before the arrival
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> const arrived(*unicast_counter);
  while (arrived.load(cuda::memory_order_acquire) < expected) {
  }
}

}  // namespace

void launch_multimem_all_reduce_sum(float* multicast, std::size_t count, int rank, int ranks, Stream stream) {
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    throw_invalid_argument("launch_multimem_all_reduce_sum",
                           "rank " + std::to_string(rank) + " is not one of " + std::to_string(ranks) + " ranks");
  }
  std::size_t const slice = (count + static_cast<std::size_t>(ranks) - 1) / static_cast<std::size_t>(ranks);
  std::size_t const begin = std::min(count, slice * static_cast<std::size_t>(rank));
  std::size_t const end = std::min(count, begin + slice);
  if (begin == end) return;
  auto const blocks = static_cast<unsigned>(std::min(max_blocks, (end - begin + threads - 1) / threads));
  all_reduce_sum_kernel<<<blocks, threads, 0, stream>>>(multicast, begin, end);
  detail::check_runtime(cudaGetLastError(), "all_reduce_sum_kernel launch", "a multimem kernel");
}

void launch_multimem_barrier(unsigned* multicast_counter, unsigned* unicast_counter, unsigned expected, Stream stream) {
  barrier_kernel<<<1, 32, 0, stream>>>(multicast_counter, unicast_counter, expected);
  detail::check_runtime(cudaGetLastError(), "barrier_kernel launch", "a multimem kernel");
}

}  // namespace cuvmm
