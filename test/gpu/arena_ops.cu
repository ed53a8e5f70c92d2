#include "arena_ops.hpp"
#include "kernels.hpp"

#include <thrust/copy.h>
#include <thrust/device_vector.h>
#include <thrust/equal.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/random.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <vector>

#include <cuvmm/arena_resource.hpp>
#include <cuvmm/thrust_allocator.hpp>

namespace cuvmm::test {
namespace {

struct RandomKey {
  std::uint64_t seed;
  __host__ __device__ std::uint32_t operator()(std::uint64_t i) const { return pattern_value(seed, i); }
};
struct Scramble {
  __host__ __device__ std::uint32_t operator()(std::uint32_t k) const { return k ^ 0x5bd1e995u; }
};
struct Widen {
  __host__ __device__ std::uint64_t operator()(std::uint32_t k) const { return k; }
};
struct Weighted {
  __host__ __device__ std::uint64_t operator()(thrust::tuple<std::uint32_t, std::uint64_t> t) const {
    return static_cast<std::uint64_t>(thrust::get<0>(t)) * (thrust::get<1>(t) + 1);
  }
};

template <class Vector, class Policy>
ThrustResults run(Vector& keys, Vector& copy, Vector& scrambled, std::size_t count, std::uint64_t seed, Policy policy) {
  ThrustResults r;
  thrust::transform(policy, thrust::counting_iterator<std::uint64_t>(0), thrust::counting_iterator<std::uint64_t>(count),
                    keys.begin(), RandomKey{seed});
  r.sum = thrust::transform_reduce(policy, keys.begin(), keys.end(), Widen{}, std::uint64_t{0}, thrust::plus<std::uint64_t>());
  thrust::transform(policy, keys.begin(), keys.end(), scrambled.begin(), Scramble{});
  r.transformed_sum =
      thrust::transform_reduce(policy, scrambled.begin(), scrambled.end(), Widen{}, std::uint64_t{0}, thrust::plus<std::uint64_t>());
  thrust::copy(policy, keys.begin(), keys.end(), copy.begin());
  r.copy_equal = thrust::equal(policy, keys.begin(), keys.end(), copy.begin());
  thrust::sort(policy, keys.begin(), keys.end());
  r.sorted = thrust::is_sorted(policy, keys.begin(), keys.end());
  auto const zipped = thrust::make_zip_iterator(thrust::make_tuple(keys.begin(), thrust::counting_iterator<std::uint64_t>(0)));
  r.sorted_checksum = thrust::transform_reduce(policy, zipped, zipped + static_cast<std::ptrdiff_t>(count), Weighted{},
                                               std::uint64_t{0}, thrust::plus<std::uint64_t>());
  return r;
}

}  // namespace

ThrustResults run_thrust_algorithms(Arena* arena, std::size_t count, std::uint64_t seed, cudaStream_t stream) {
  if (arena == nullptr) {
    thrust::device_vector<std::uint32_t> keys(count), copy(count), scrambled(count);
    return run(keys, copy, scrambled, count, seed, thrust::cuda::par.on(stream));
  }
  ThrustArenaResource resource(*arena, stream);
  ThrustAllocator<std::uint32_t> alloc(resource);
  using Vector = thrust::device_vector<std::uint32_t, ThrustAllocator<std::uint32_t>>;
  Vector keys(count, alloc), copy(count, alloc), scrambled(count, alloc);
  return run(keys, copy, scrambled, count, seed, thrust::cuda::par(alloc).on(stream));
}

std::size_t cuda_mr_round_trip(Arena& arena, std::size_t bytes, cudaStream_t stream) {
  ArenaResource resource(arena);
  cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref(resource);
  void* p = ref.allocate_async(bytes, 256, cuda::stream_ref(stream));
  cudaMemsetAsync(p, 0xC3, bytes, stream);
  std::vector<unsigned char> host(bytes, 0);
  cudaMemcpyAsync(host.data(), p, bytes, cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  ref.deallocate_async(p, bytes, 256, cuda::stream_ref(stream));
  std::size_t wrong = 0;
  for (unsigned char b : host) wrong += b != 0xC3;
  return wrong;
}

namespace {
__global__ void spin_then_fill(std::uint32_t* data, std::size_t count, std::uint32_t value, std::uint64_t nanoseconds) {
  if (threadIdx.x == 0) {
    std::uint64_t start = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
      std::uint64_t now = 0;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      if (now - start >= nanoseconds) break;
    }
  }
  __syncthreads();
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x) {
    data[i] = value;
  }
}
}  // namespace

cudaError_t launch_spin_then_fill(std::uint32_t* data, std::size_t count, std::uint32_t value, std::uint64_t nanoseconds,
                                  cudaStream_t stream) {
  spin_then_fill<<<1, 256, 0, stream>>>(data, count, value, nanoseconds);
  return cudaGetLastError();
}

}  // namespace cuvmm::test
