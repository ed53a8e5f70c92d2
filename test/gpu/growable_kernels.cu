#include "growable_kernels.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <thrust/execution_policy.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/sort.h>
#include <thrust/transform.h>

namespace cuvmm::test {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

__host__ __device__ std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

__host__ __device__ std::uint64_t value_at(std::uint64_t i, std::uint64_t seed) { return mix(i * 0x9E3779B97F4A7C15ull + seed); }

__global__ void fill_kernel(std::uint64_t* data, std::size_t count, std::uint64_t first, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x)
    data[i] = value_at(first + i, seed);
}

__global__ void mismatch_kernel(const std::uint64_t* data, std::size_t count, std::uint64_t first, std::uint64_t seed,
                                unsigned long long* mismatches) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < count; i += std::size_t{gridDim.x} * blockDim.x)
    local += data[i] != value_at(first + i, seed);
  if (local != 0) atomicAdd(mismatches, local);
}

__global__ void increment_kernel(std::uint32_t* data, std::size_t count, int rounds) {
  // One block walks the prefix `rounds` times; volatile keeps every round a real read and write.
  volatile std::uint32_t* v = data;
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = threadIdx.x; i < count; i += blockDim.x) v[i] = v[i] + 1;
    __syncthreads();
  }
}

struct Affine {
  __host__ __device__ std::uint32_t operator()(std::uint32_t x) const { return 3 * x + 1; }
};
struct Doubled {
  __host__ __device__ std::uint32_t operator()(std::uint32_t x) const { return 2 * x; }
};
struct RandomKey {
  std::uint64_t seed;
  __host__ __device__ std::uint32_t operator()(std::uint64_t i) const { return static_cast<std::uint32_t>(value_at(i, seed)); }
};

constexpr unsigned threads = 256;
unsigned blocks_for(std::size_t n) { return static_cast<unsigned>(std::min<std::size_t>((n + threads - 1) / threads, 4096)); }

}  // namespace

std::uint64_t pattern_value(std::uint64_t i, std::uint64_t seed) { return value_at(i, seed); }

void fill_pattern(std::uint64_t* data, std::size_t count, std::uint64_t first, std::uint64_t seed, cudaStream_t stream) {
  if (count == 0) return;
  fill_kernel<<<blocks_for(count), threads, 0, stream>>>(data, count, first, seed);
  check(cudaGetLastError(), "fill_kernel");
}

std::size_t count_pattern_mismatches(const std::uint64_t* data, std::size_t count, std::uint64_t first,
                                     std::uint64_t seed, cudaStream_t stream) {
  // Allocated once and kept, so checks still work when a test has filled the device.
  static unsigned long long* const counter = [] {
    unsigned long long* p = nullptr;
    check(cudaMalloc(&p, sizeof *p), "cudaMalloc");
    return p;
  }();
  check(cudaMemsetAsync(counter, 0, sizeof *counter, stream), "cudaMemsetAsync");
  if (count != 0) mismatch_kernel<<<blocks_for(count), threads, 0, stream>>>(data, count, first, seed, counter);
  check(cudaGetLastError(), "mismatch_kernel");
  unsigned long long result = 0;
  check(cudaMemcpyAsync(&result, counter, sizeof result, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return static_cast<std::size_t>(result);
}

void increment_rounds(std::uint32_t* data, std::size_t count, int rounds, cudaStream_t stream) {
  increment_kernel<<<1, 1024, 0, stream>>>(data, count, rounds);
  check(cudaGetLastError(), "increment_kernel");
}

void thrust_sort(GrowableBuffer<std::uint32_t>& keys, cudaStream_t stream) {
  thrust::sort(thrust::cuda::par.on(stream), keys.begin(), keys.end());
}

std::uint64_t thrust_sum(const GrowableBuffer<std::uint32_t>& values, cudaStream_t stream) {
  return thrust::reduce(thrust::cuda::par.on(stream), values.begin(), values.end(), std::uint64_t{0});
}

void thrust_affine(const GrowableBuffer<std::uint32_t>& in, GrowableBuffer<std::uint32_t>& out, cudaStream_t stream) {
  out.resize(in.size());
  thrust::transform(thrust::cuda::par.on(stream), in.begin(), in.end(), out.begin(), Affine{});
}

void append_doubled(const GrowableBuffer<std::uint32_t>& in, GrowableBuffer<std::uint32_t>& out, cudaStream_t stream) {
  out.append(thrust::make_transform_iterator(in.begin(), Doubled{}), thrust::make_transform_iterator(in.end(), Doubled{}),
             stream);
}

void thrust_reverse_copy(const GrowableBuffer<std::uint32_t>& in, GrowableBuffer<std::uint32_t>& out,
                         cudaStream_t stream) {
  out.resize(in.size());
  thrust::copy(thrust::cuda::par.on(stream), in.crbegin(), in.crend(), out.begin());
}

void fill_random_keys(GrowableBuffer<std::uint32_t>& keys, std::uint64_t seed, cudaStream_t stream) {
  thrust::transform(thrust::cuda::par.on(stream), thrust::counting_iterator<std::uint64_t>(0),
                    thrust::counting_iterator<std::uint64_t>(keys.size()), keys.begin(), RandomKey{seed});
}

}  // namespace cuvmm::test
