// The README's example of alias views and ring buffers: a read-only second address of a buffer,
// and a ring whose windows are contiguous across the wrap. Needs a GPU.
// [readme]
#include <cuvmm/alias_view.hpp>
#include <cuvmm/ring_buffer.hpp>
// [readme]

#include <thrust/execution_policy.h>
#include <thrust/sort.h>

#include <cuvmm/growable_buffer.hpp>

#include "example_support.hpp"

/// Writes capacity - i into element i of the ring.
__global__ void my_kernel(cuvmm::RingView<float> view) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < view.capacity;
       i += std::size_t{gridDim.x} * blockDim.x) {
    view[i] = static_cast<float>(view.capacity - i);
  }
}

int main() {
  if (!example::has_devices(1)) return example::skipped;
  cudaStream_t const stream = example::new_stream();
  cuvmm::GrowableBuffer<float> values;
  values.resize(1 << 20, 1.0f, stream);
  unsigned const grid = 1024;
  unsigned const block = 256;

  // [readme]
  cuvmm::AliasView const readonly(values.storage(), cuvmm::Access::read);  // a second, read-only address
  cuvmm::RingBuffer<float> ring(1 << 20);                 // capacity rounded to whole granules and elements
  auto window = ring.window(ring.capacity() - 10, 100);   // 10 elements before the wrap, 90 after: contiguous
  my_kernel<<<grid, block, 0, stream>>>(ring.view());     // RingView: view[i], view.window(first) on the device
  thrust::sort(thrust::cuda::par.on(stream), window.begin(), window.end());   // device_ptr iterators
  // [readme]

  example::check(readonly.size() == values.storage().capacity(), "the view covers the buffer");
  // The window held 10 .. 1 before the wrap and c .. c-89 after it (c = capacity); sorted, it runs
  // from 1 to c.
  float ends[2] = {};
  example::check_cuda(cudaMemcpyAsync(&ends[0], window.data(), sizeof(float), cudaMemcpyDeviceToHost, stream), "copy");
  example::check_cuda(cudaMemcpyAsync(&ends[1], window.data() + 99, sizeof(float), cudaMemcpyDeviceToHost, stream), "copy");
  example::check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  example::check(ends[0] == 1.0f && ends[1] == static_cast<float>(ring.capacity()), "the window is sorted across the wrap");
  return 0;
}
