// A Thrust program whose vectors and algorithm scratch memory come from a cuvmm Arena through
// cuvmm::ThrustAllocator. Built two ways from this one file:
//   - with a C++ compiler and THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP (thrust_arena_host):
//     Thrust's "device" is the host, the Arena runs on the HostBackend, and the program runs in CI;
//   - with nvcc as thrust_arena.cu (thrust_arena_device): CUDA device code, compiled and linked
//     only (it needs a GPU to run: the Arena then uses the CUDA backend).
#include <cuvmm/arena.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/thrust_allocator.hpp>

#include <cstdio>

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/sort.h>

namespace {

int run(cuvmm::Arena& arena) {
  cuvmm::ThrustArenaResource resource(arena);
  cuvmm::ThrustAllocator<long> alloc(resource);
  long const n = 100000;
  {
    thrust::device_vector<long, cuvmm::ThrustAllocator<long>> v(n, alloc);
    std::size_t const live = arena.stats().bytes_requested.current;
    if (live < n * sizeof(long)) {
      std::printf("thrust_arena: the vector's %zu bytes are not from the arena (%zu bytes requested)\n",
                  n * sizeof(long), live);
      return 1;
    }
    thrust::sequence(v.begin(), v.end(), n - 1, -1L);  // n-1, n-2, ..., 0
    thrust::sort(v.begin(), v.end());
    long const first = v[0];
    long const last = v[n - 1];
    long const sum = thrust::reduce(v.begin(), v.end(), 0L);
    if (first != 0 || last != n - 1 || sum != n * (n - 1) / 2) {
      std::printf("thrust_arena: sorted first %ld last %ld sum %ld, expected 0 %ld %ld\n", first, last, sum, n - 1,
                  n * (n - 1) / 2);
      return 1;
    }
  }
  if (arena.stats().bytes_requested.current != 0) {
    std::printf("thrust_arena: %zu bytes still in use after the vector died\n", arena.stats().bytes_requested.current);
    return 1;
  }
  std::printf("thrust_arena: sorted %ld values in arena memory (peak %zu bytes requested)\n", n,
              arena.stats().bytes_requested.peak);
  return 0;
}

}  // namespace

int main() {
#if defined(__CUDACC__)
  cuvmm::Arena arena;  // the CUDA backend of device 0
  return run(arena);
#else
  constexpr std::size_t page = 64 * cuvmm::KiB;
  cuvmm::HostBackend host({.granularity = page});
  cuvmm::ArenaOptions options;
  options.address_space_bytes = 256 * page;
  options.large_page_bytes = 0;
  cuvmm::Arena arena(host, options);
  return run(arena);
#endif
}
