// Device work of the aliasing gpu tests (built by nvcc): reading a ring's elements through its
// first copy, the one-kernel exchange through two aliases with cuda::ptx::fence_proxy_alias(),
// and Thrust on a ring window that crosses the wrap point.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include <cuvmm/ring_buffer.hpp>

namespace cuvmm::test {

/// Threads per block of the fenced exchange; its `count` is a multiple of this.
inline constexpr unsigned exchange_block = 256;

/// In a kernel on `stream`: how many i < count have ring[first + i] != pattern_value(seed, i),
/// each element read at its index modulo the capacity (so through the first copy only). Waits.
std::size_t count_ring_mismatches(RingView<std::uint32_t> ring, std::size_t first, std::size_t count,
                                  std::uint64_t seed, cudaStream_t stream);

/// One kernel on `stream`: thread t of block b writes pattern_value(seed, i) (i = b * exchange_block
/// + t) through write_alias[i], executes cuda::ptx::fence_proxy_alias(), waits at __syncthreads(),
/// then reads the element its neighbour wrote, read_alias[b * exchange_block + (t + 1) %
/// exchange_block], into a poisoned output. write_alias and read_alias are two addresses of the
/// same memory. Waits, and returns how many outputs differ from the neighbour's pattern value.
std::size_t fenced_exchange_mismatches(std::uint32_t* write_alias, const std::uint32_t* read_alias, std::size_t count,
                                       std::uint64_t seed, cudaStream_t stream);

/// thrust::sort over the window's thrust::device_ptr iterators, on `stream`; waits.
void thrust_sort_window(const RingBuffer<std::uint32_t>::Window& window, cudaStream_t stream);

}  // namespace cuvmm::test
