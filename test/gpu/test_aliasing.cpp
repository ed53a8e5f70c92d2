// Virtual aliasing on the GPU: RingBuffer's two copies and AliasView, with random data, in both
// legal orderings of a write through one alias and a read through another:
//  1. across operations: the reading kernel runs after the writing one completed (same stream,
//     or another stream waiting for an event recorded after the write);
//  2. inside one kernel: the writer executes cuda::ptx::fence_proxy_alias() and the block
//     synchronizes before a neighbour reads through the other alias.
// Plus Thrust sorting a ring window that crosses the wrap point. Every case checks for leaks on
// the backend's live objects and the device's free memory.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuda_runtime_api.h>

#include <cuvmm/alias_view.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/ring_buffer.hpp>

#include "aliasing_kernels.hpp"
#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using namespace cuvmm;
using cuvmm::test::poison;

namespace {

/// The frame of every case: skips without a GPU; otherwise runs `body(cuda, stream)` and checks
/// that everything it made was given back (the backend's live objects, free memory). The body runs
/// once before the baseline too: its kernels (this file's, Thrust's) are loaded lazily at their
/// first launch by default, and that memory would otherwise look like a leak.
template <class Body>
void gpu_case(Body&& body) {
  test::require_gpu();
  test::init_runtime();
  CudaBackend& cuda = cuda_backend(0);
  test::leak_checked(cuda, [&] {
    test::Stream const stream;
    body(cuda, stream);
  });
}

/// A ring of one granule of words with its first copy poisoned (so an unwritten element cannot pass).
RingBuffer<std::uint32_t> poisoned_ring(CudaBackend& cuda, const test::Stream& stream) {
  RingBuffer<std::uint32_t> ring(cuda, 1);
  CUVMM_CUDA_REQUIRE(test::launch_fill(ring.data(), ring.capacity(), poison, stream.get()));
  return ring;
}

/// The window the tests write: `count` words from `first`, crossing the wrap point.
constexpr std::size_t window_count = 300'000;
std::size_t window_first(std::size_t capacity) { return capacity - 100'000; }

}  // namespace

TEST_CASE("a ring window written across the wrap by one kernel is read through the first copy by the next "
          "kernel on the same stream",
          "[gpu][ring][alias]") {
  gpu_case([](CudaBackend& cuda, const test::Stream& stream) {
    RingBuffer<std::uint32_t> ring = poisoned_ring(cuda, stream);
    std::size_t const n = ring.capacity();
    REQUIRE(n == cuda.granularity({}, GranularityKind::minimum) / 4);
    REQUIRE(window_count < n);
    std::size_t const first = window_first(n);
    std::uint64_t const seed = test::test_seed(1);
    auto const window = ring.window(first, window_count);
    REQUIRE(window.data() + window_count > ring.data() + n);  // it reaches into the second copy

    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(window.data(), window_count, seed, stream.get()));
    CHECK(test::count_ring_mismatches(ring.view(), first, window_count, seed, stream.get()) == 0);
    // Elements outside the window are still poison (plus any pattern value that happens to equal it).
    std::vector<std::uint32_t> host(n);
    CUVMM_CUDA_REQUIRE(cudaMemcpy(host.data(), ring.data(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    CHECK(static_cast<std::size_t>(std::count(host.begin(), host.end(), poison)) ==
          n - window_count + test::pattern_hits(seed, window_count, poison));
    // The check can fail: one element changed through the second copy is found through the first.
    CUVMM_CUDA_REQUIRE(test::launch_fill(ring.data() + n + 5, 1, poison, stream.get()));
    CHECK(test::count_ring_mismatches(ring.view(), first, window_count, seed, stream.get()) == 1);
  });
}

TEST_CASE("a ring window written on one stream is read through the other copy on a stream that waits for an "
          "event",
          "[gpu][ring][alias]") {
  gpu_case([](CudaBackend& cuda, const test::Stream& writer) {
    test::Stream const reader;
    RingBuffer<std::uint32_t> ring = poisoned_ring(cuda, writer);
    std::size_t const n = ring.capacity();
    std::size_t const first = window_first(n);
    std::uint64_t const seed = test::test_seed(2);
    cudaEvent_t written = nullptr;
    CUVMM_CUDA_REQUIRE(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(ring.window(first, window_count).data(), window_count, seed,
                                                  writer.get()));
    CUVMM_CUDA_REQUIRE(cudaEventRecord(written, writer.get()));
    CUVMM_CUDA_REQUIRE(cudaStreamWaitEvent(reader.get(), written, 0));
    CHECK(test::count_ring_mismatches(ring.view(), first, window_count, seed, reader.get()) == 0);
    CUVMM_CUDA_REQUIRE(cudaEventDestroy(written));
  });
}

TEST_CASE("inside one kernel, a write through the ring's second copy is read through the first after "
          "fence_proxy_alias and a barrier",
          "[gpu][ring][alias][fence]") {
  gpu_case([](CudaBackend& cuda, const test::Stream& stream) {
    RingBuffer<std::uint32_t> ring = poisoned_ring(cuda, stream);
    std::size_t const n = ring.capacity();
    REQUIRE(n % test::exchange_block == 0);
    std::uint64_t const seed = test::test_seed(3);
    CHECK(test::fenced_exchange_mismatches(ring.data() + n, ring.data(), n, seed, stream.get()) == 0);
    CHECK(test::count_ring_mismatches(ring.view(), 0, n, seed, stream.get()) == 0);
  });
}

TEST_CASE("inside one kernel, a write through a buffer is read through its read-only AliasView after "
          "fence_proxy_alias and a barrier",
          "[gpu][alias][fence]") {
  gpu_case([](CudaBackend& cuda, const test::Stream& stream) {
    GrowableOptions options;
    options.max_capacity_bytes = 1 * GiB;
    GrowableBuffer<std::uint32_t> buffer(cuda, options, stream.get());
    std::size_t const n = 3 * cuda.granularity({}, GranularityKind::minimum) / 4;  // several granules
    buffer.resize(n, poison);
    AliasView const view(buffer.storage(), Access::read);
    REQUIRE(view.size() == buffer.storage().capacity());
    CHECK(view.access(0) == Access::read);
    std::uint64_t const seed = test::test_seed(4);
    auto const* const read_only = reinterpret_cast<const std::uint32_t*>(view.data());
    CHECK(test::fenced_exchange_mismatches(buffer.data(), read_only, n, seed, stream.get()) == 0);
    // A later kernel reads the whole buffer through the view (stream order).
    CHECK(test::check_pattern(read_only, n, seed, stream.get()).mismatches == 0);
  });
}

TEST_CASE("thrust sorts a ring window across the wrap point through device_ptr iterators", "[gpu][ring][thrust]") {
  gpu_case([](CudaBackend& cuda, const test::Stream& stream) {
    RingBuffer<std::uint32_t> ring = poisoned_ring(cuda, stream);
    std::size_t const n = ring.capacity();
    std::uint64_t const seed = test::test_seed(5);
    CUVMM_CUDA_REQUIRE(test::launch_write_pattern(ring.data(), n, seed, stream.get()));
    std::size_t const first = window_first(n);
    auto const window = ring.window(first, window_count);
    std::vector<std::uint32_t> expected(window_count);
    CUVMM_CUDA_REQUIRE(cudaMemcpyAsync(expected.data(), window.data(), window_count * sizeof(std::uint32_t),
                                       cudaMemcpyDeviceToHost, stream.get()));
    stream.synchronize();
    std::sort(expected.begin(), expected.end());

    test::thrust_sort_window(window, stream.get());
    // Read back through the first copy only: the tail [first, n) and the head [0, rest).
    std::size_t const tail = n - first;
    std::vector<std::uint32_t> sorted(window_count, 0);
    CUVMM_CUDA_REQUIRE(cudaMemcpy(sorted.data(), ring.data() + first, tail * sizeof(std::uint32_t),
                                  cudaMemcpyDeviceToHost));
    CUVMM_CUDA_REQUIRE(cudaMemcpy(sorted.data() + tail, ring.data(), (window_count - tail) * sizeof(std::uint32_t),
                                  cudaMemcpyDeviceToHost));
    CHECK(sorted == expected);
  });
}
