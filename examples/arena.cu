// The README's Arena example: allocate and free on a stream, Thrust containers and algorithms, and
// the cuda::mr resource. Needs a GPU.
// [readme]
#include <cuvmm/arena.hpp>
#include <cuvmm/thrust_allocator.hpp>   // Thrust adapters (nvcc)
#include <cuvmm/arena_resource.hpp>     // cuda::mr adapter
// [readme]

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

#include <cstddef>

#include "example_support.hpp"

int main() {
  if (!example::has_devices(1)) return example::skipped;
  cudaStream_t const stream = example::new_stream();
  std::size_t const bytes = 64 << 20;
  std::size_t const n = 1 << 20;

  // [readme]
  cuvmm::Arena arena;                                  // device 0; reserves 8x its memory in addresses
  void* p = arena.allocate(bytes, stream);             // usable by work ordered on `stream`
  arena.deallocate(p, bytes, stream);                  // reusable on `stream` at once
  arena.trim();                                        // unused pages back to the driver

  cuvmm::ThrustArenaResource resource(arena, stream);
  cuvmm::ThrustAllocator<int> alloc(resource);
  thrust::device_vector<int, cuvmm::ThrustAllocator<int>> v(n, alloc);
  thrust::sort(thrust::cuda::par(alloc).on(stream), v.begin(), v.end());  // temporary storage too
  cuvmm::ArenaResource mr(arena);                      // a cuda::mr stream-ordered resource, device-accessible
  cuvmm::cccl::stream_resource_ref<cuda::mr::device_accessible> ref(mr);  // CCCL 3.0 and 3.1+ alike
  // [readme]

  thrust::sequence(thrust::cuda::par.on(stream), v.rbegin(), v.rend());
  thrust::sort(thrust::cuda::par(alloc).on(stream), v.begin(), v.end());
  example::check(v.front() == 0 && v.back() == static_cast<int>(n) - 1, "sorting in arena memory");
#if CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES
  void* const q = ref.allocate(cuda::stream_ref(stream), bytes, 256);
  ref.deallocate(cuda::stream_ref(stream), q, bytes, 256);
#else
  void* const q = ref.allocate_async(bytes, 256, cuda::stream_ref(stream));
  ref.deallocate_async(q, bytes, 256, cuda::stream_ref(stream));
#endif
  example::check(arena.stats().allocations.current == 1, "the vector is the one live allocation");
  return 0;
}
