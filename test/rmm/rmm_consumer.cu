// RMM allocating from a cuvmm Arena: RMM 26 takes any cuda::mr resource, and cuvmm::ArenaResource
// is one (cuvmm/arena_resource.hpp). Built against the librmm-cu13 wheel's headers (which bring
// their own CCCL) and its librmm.so by scripts/rmm-consumer.sh; CI compiles and links it, the H200
// runs it. Checks, with the Arena's counters as the witness:
//   1. rmm::device_uvector<int> given the resource: its storage is an Arena allocation; a kernel
//      writes it, the values read back are the ones written;
//   2. rmm::device_buffer given the resource, then resized: the Arena sees the old and new sizes;
//   3. the Arena as RMM's current device resource: a device_uvector made without a resource comes
//      from it too;
//   4. when everything is gone, the Arena has no live allocation left;
//   5. cuvmm::RmmArenaResource (cuvmm/rmm_arena_resource.hpp): a device_uvector through it holds
//      a kernel's writes; a request the Arena cannot back throws rmm::out_of_memory (what RAPIDS
//      code catches to spill or retry), directly and through rmm::device_buffer, while
//      ArenaResource throws cuvmm::OutOfMemory, which RMM code does not catch as rmm::out_of_memory;
//   6. the resource contract (resource_contract.hpp: basic, allocation, out of memory,
//      multi-threaded) on device memory, on eight streams of its own.
// Exit status: 0 all passed, 1 a check failed, 77 no CUDA device (skipped: prints why).
#include <cuvmm/arena.hpp>
#include <cuvmm/arena_resource.hpp>
#include <cuvmm/rmm_arena_resource.hpp>

#include <rmm/cuda_stream.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/device_uvector.hpp>
#include <rmm/error.hpp>
#include <rmm/mr/per_device_resource.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "resource_contract.hpp"

// RMM 26 brings CCCL 3.1 or newer: the adapter must have picked the newer names.
static_assert(CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES == 1, "RMM 26 is built on CCCL 3.1 or newer");

namespace {

using contract::report;  // one tally for these checks and the contract's

/// Device memory: set with cudaMemsetAsync on the stream, read back (its ends) with copies after it.
class DeviceMemory final : public contract::ContractMemory {
 public:
  DeviceMemory() {
    for (cudaStream_t& s : streams_) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  }
  ~DeviceMemory() override {
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
  }
  void fill(void* p, std::size_t bytes, unsigned char value, cuda::stream_ref stream) override {
    if (cudaMemsetAsync(p, value, bytes, stream.get()) != cudaSuccess) ++errors;
  }
  bool holds(const void* p, std::size_t bytes, unsigned char value, cuda::stream_ref stream) override {
    std::size_t const n = bytes < 64 ? bytes : 64;
    unsigned char head[64];
    unsigned char tail[64];
    auto const* const b = static_cast<const unsigned char*>(p);
    if (cudaMemcpyAsync(head, b, n, cudaMemcpyDeviceToHost, stream.get()) != cudaSuccess ||
        cudaMemcpyAsync(tail, b + bytes - n, n, cudaMemcpyDeviceToHost, stream.get()) != cudaSuccess ||
        cudaStreamSynchronize(stream.get()) != cudaSuccess) {
      ++errors;
      return false;
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (head[i] != value || tail[i] != value) return false;
    }
    return true;
  }
  cuda::stream_ref stream(int i) override { return cuda::stream_ref{streams_[static_cast<std::size_t>(i)]}; }
  std::atomic<int> errors{0};

 private:
  cudaStream_t streams_[8] = {};
};

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
      report(arena.stats().allocations.current == 1, "device_uvector: one live Arena allocation");
      report(arena.stats().bytes_requested.current == n * sizeof(int), "device_uvector: the Arena holds its 128 KiB");
      cudaMemsetAsync(squares.data(), 0xFF, n * sizeof(int), stream.value());  // poison
      fill_squares<<<(n + 255) / 256, 256, 0, stream.value()>>>(squares.data(), n);
      std::vector<int> host(n);
      cudaMemcpyAsync(host.data(), squares.data(), n * sizeof(int), cudaMemcpyDeviceToHost, stream.value());
      stream.synchronize();
      bool all = true;
      for (int i = 0; i < n; ++i) all = all && host[i] == i * i;
      report(all, "device_uvector: a kernel's writes read back (i * i for 2^15 values)");
      report(squares.element(12345, s) == 12345 * 12345, "device_uvector::element reads 152399025");

      rmm::device_buffer buffer(1000, s, resource);
      report(arena.stats().allocations.current == 2, "device_buffer: a second live Arena allocation");
      report(arena.stats().bytes_requested.current == n * sizeof(int) + 1000, "device_buffer: 1000 more bytes");
      buffer.resize(3 * 1024 * 1024, s);
      report(buffer.size() == 3 * 1024 * 1024, "device_buffer::resize to 3 MiB");
      report(arena.stats().bytes_requested.current == n * sizeof(int) + 3 * 1024 * 1024,
             "device_buffer::resize: the Arena holds the new size, the old one was freed");
    }
    report(arena.stats().allocations.current == 0, "destroyed containers freed their Arena memory");

    // The Arena as the current device resource (RMM keeps a copy of the view until reset).
    (void)rmm::mr::set_current_device_resource(resource);
    {
      rmm::device_uvector<float> implicit(1000, s);
      report(arena.stats().allocations.current == 1, "current device resource: a device_uvector without a resource");
    }
    rmm::mr::reset_current_device_resource();
    stream.synchronize();
    arena.release_stream(stream.value());  // before the stream is destroyed (Arena's stream contract)
  }
  report(arena.stats().allocations.current == 0, "no live Arena allocation at the end");

  // 5. RmmArenaResource over an Arena that may hold 64 MiB.
  {
    cuvmm::ArenaOptions small_options;
    small_options.byte_limit = 64 << 20;
    cuvmm::Arena small(small_options);
    cuvmm::RmmArenaResource rmm_resource(small);
    rmm::cuda_stream stream;
    cuda::stream_ref const s = stream;
    {
      int const n = 1 << 15;
      rmm::device_uvector<int> squares(n, s, rmm_resource);
      cudaMemsetAsync(squares.data(), 0xFF, n * sizeof(int), stream.value());  // poison
      fill_squares<<<(n + 255) / 256, 256, 0, stream.value()>>>(squares.data(), n);
      report(squares.element(321, s) == 321 * 321, "RmmArenaResource: a device_uvector holds a kernel's writes (103041)");
      report(small.stats().allocations.current == 1, "RmmArenaResource: its storage is an Arena allocation");
    }
    std::size_t const too_much = std::size_t{128} << 20;
    bool rmm_oom = false;
    bool names_arena = false;
    try {
      (void)rmm_resource.allocate(s, too_much, 256);
    } catch (const rmm::out_of_memory& e) {
      rmm_oom = true;
      names_arena = std::strstr(e.what(), "Arena::allocate") != nullptr;
    } catch (...) {
    }
    report(rmm_oom, "RmmArenaResource: 128 MiB beyond a 64 MiB byte_limit throws rmm::out_of_memory");
    report(names_arena, "RmmArenaResource: its message is the Arena's (names Arena::allocate)");
    bool sync_oom = false;
    try {
      (void)rmm_resource.allocate_sync(too_much, 256);
    } catch (const rmm::out_of_memory&) {
      sync_oom = true;
    } catch (...) {
    }
    report(sync_oom, "RmmArenaResource: allocate_sync throws rmm::out_of_memory too");
    bool buffer_oom = false;
    try {
      rmm::device_buffer buffer(too_much, s, rmm_resource);
    } catch (const rmm::bad_alloc&) {  // out_of_memory's base, as RAPIDS code catches it
      buffer_oom = true;
    } catch (...) {
    }
    report(buffer_oom, "RmmArenaResource: an rmm::device_buffer too large throws rmm::bad_alloc (out_of_memory)");
    // Without it: ArenaResource throws cuvmm::OutOfMemory, which is no rmm::out_of_memory.
    cuvmm::ArenaResource plain(small);
    bool plain_is_rmm = false;
    bool plain_is_cuvmm = false;
    try {
      (void)plain.allocate(s, too_much, 256);
    } catch (const rmm::out_of_memory&) {
      plain_is_rmm = true;
    } catch (const cuvmm::OutOfMemory&) {
      plain_is_cuvmm = true;
    }
    report(!plain_is_rmm && plain_is_cuvmm, "ArenaResource alone throws cuvmm::OutOfMemory, not rmm::out_of_memory");
    report(small.stats().allocations.current == 0 && small.stats().bytes_physical.current <= std::size_t{64} << 20,
           "RmmArenaResource: the failed requests left nothing allocated, within byte_limit");
    stream.synchronize();
    small.release_stream(stream.value());
  }
  {
    std::printf("the resource contract, device memory:\n");
    DeviceMemory memory;  // made before the arenas: they wait for its streams when they go
    cuvmm::Arena main_arena;
    cuvmm::Arena other_arena;
    cuvmm::ArenaOptions limited_options;
    limited_options.byte_limit = std::size_t{256} << 20;
    cuvmm::Arena limited(limited_options);
    contract::check_resource_contract(main_arena, other_arena, limited, std::size_t{256} << 20, memory);
    report(memory.errors.load() == 0, "contract: every CUDA call of the checks succeeded");
    cudaDeviceSynchronize();
  }
  std::printf("rmm_consumer: %d failed; Arena peak %zu bytes requested\n", contract::failures,
              arena.stats().bytes_requested.peak);
  return contract::failures == 0 ? 0 : 1;
}
