// RMM allocating from a cuvmm Arena: RMM 26 takes any cuda::mr resource, and cuvmm::ArenaResource
// is one (cuvmm/arena_resource.hpp). Built against the librmm-cu13 wheel's headers (which bring
// their own CCCL) and its librmm.so by scripts/rmm-consumer.sh; CI compiles and links it, the H200
// runs it. Checks, with the Arena's counters as the witness:
//   1. rmm::device_uvector<int> given the resource: its storage is an Arena allocation; a kernel
//      writes it, the values read back are the ones written;
//   2. rmm::device_buffer given the resource, then resized: the Arena sees the old and new sizes;
//   3. the Arena as RMM's current device resource: a device_uvector made without a resource comes
//      from it too;
//   4. when everything is gone, the Arena has no live allocation left.
// Exit status: 0 all passed, 1 a check failed, 77 no CUDA device (skipped: prints why).
#include <cuvmm/arena.hpp>
#include <cuvmm/arena_resource.hpp>

#include <rmm/cuda_stream.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/device_uvector.hpp>
#include <rmm/mr/per_device_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <vector>

// RMM 26 brings CCCL 3.1 or newer: the adapter must have picked the newer names.
static_assert(CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES == 1, "RMM 26 is built on CCCL 3.1 or newer");

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "  ok  " : "  FAIL", what);
  if (!ok) ++failures;
}

__global__ void fill_squares(int* out, int n) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * i;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("rmm_consumer: SKIPPED: no CUDA device\n");
    return 77;
  }
  cuvmm::Arena arena;  // device 0, CUDA backend
  cuvmm::ArenaResource resource(arena);
  {
    rmm::cuda_stream stream;
    cuda::stream_ref const s = stream;
    {
      int const n = 1 << 15;  // i * i fits an int
      rmm::device_uvector<int> squares(n, s, resource);
      check(arena.stats().allocations.current == 1, "device_uvector: one live Arena allocation");
      check(arena.stats().bytes_requested.current == n * sizeof(int), "device_uvector: the Arena holds its 128 KiB");
      cudaMemsetAsync(squares.data(), 0xFF, n * sizeof(int), stream.value());  // poison
      fill_squares<<<(n + 255) / 256, 256, 0, stream.value()>>>(squares.data(), n);
      std::vector<int> host(n);
      cudaMemcpyAsync(host.data(), squares.data(), n * sizeof(int), cudaMemcpyDeviceToHost, stream.value());
      stream.synchronize();
      bool all = true;
      for (int i = 0; i < n; ++i) all = all && host[i] == i * i;
      check(all, "device_uvector: a kernel's writes read back (i * i for 2^15 values)");
      check(squares.element(12345, s) == 12345 * 12345, "device_uvector::element reads 152399025");

      rmm::device_buffer buffer(1000, s, resource);
      check(arena.stats().allocations.current == 2, "device_buffer: a second live Arena allocation");
      check(arena.stats().bytes_requested.current == n * sizeof(int) + 1000, "device_buffer: 1000 more bytes");
      buffer.resize(3 * 1024 * 1024, s);
      check(buffer.size() == 3 * 1024 * 1024, "device_buffer::resize to 3 MiB");
      check(arena.stats().bytes_requested.current == n * sizeof(int) + 3 * 1024 * 1024,
            "device_buffer::resize: the Arena holds the new size, the old one was freed");
    }
    check(arena.stats().allocations.current == 0, "destroyed containers freed their Arena memory");

    // The Arena as the current device resource (RMM keeps a copy of the view until reset).
    (void)rmm::mr::set_current_device_resource(resource);
    {
      rmm::device_uvector<float> implicit(1000, s);
      check(arena.stats().allocations.current == 1, "current device resource: a device_uvector without a resource");
    }
    rmm::mr::reset_current_device_resource();
    stream.synchronize();
    arena.release_stream(stream.value());  // before the stream is destroyed (Arena's stream contract)
  }
  check(arena.stats().allocations.current == 0, "no live Arena allocation at the end");
  std::printf("rmm_consumer: %d failed; Arena peak %zu bytes requested\n", failures,
              arena.stats().bytes_requested.peak);
  return failures == 0 ? 0 : 1;
}
