// Arena on the H200: the allocator battery (test/battery) on device memory, stream ordering
// against a kernel still running on the freeing stream, Thrust algorithms with ThrustAllocator,
// and the cuda::mr resource.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/error.hpp>

#include "arena_battery.hpp"
#include "arena_ops.hpp"
#include "gpu.hpp"
#include "gpu_support.hpp"
#include "kernels.hpp"

using namespace cuvmm;
using namespace cuvmm::test;

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

class DeviceBatteryMemory final : public BatteryMemory {
 public:
  DeviceBatteryMemory() { init_runtime(); }
  Backend& backend() override { return cuda_backend(0); }
  ArenaOptions options() override { return {}; }
  cuvmm::Stream new_stream() override { return streams_.emplace_back(std::make_unique<test::Stream>())->get(); }
  // Thread-safe, as the battery needs: no Catch2 assertions, no shared device counters.
  void write_pattern(void* p, std::size_t bytes, std::uint64_t seed, cuvmm::Stream stream) override {
    check(launch_write_pattern(static_cast<std::uint32_t*>(p), bytes / 4, seed, stream), "write pattern");
  }
  std::size_t mismatches(const void* p, std::size_t bytes, std::uint64_t seed, cuvmm::Stream stream) override {
    std::vector<std::uint32_t> words(bytes / 4, poison);
    check(cudaMemcpyAsync(words.data(), p, words.size() * 4, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < words.size(); ++i) wrong += words[i] != pattern_value(seed, i);
    return wrong;
  }
  std::size_t free_bytes() override { return cuda_backend(0).memory_info(0).free; }
  void synchronize(cuvmm::Stream stream) override { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }

 private:
  std::vector<std::unique_ptr<test::Stream>> streams_;
};

}  // namespace

std::unique_ptr<BatteryMemory> test::make_battery_memory() {
  require_gpu();
  return std::make_unique<DeviceBatteryMemory>();
}

TEST_CASE("memory freed behind a running kernel reaches another stream only after that kernel", "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream one, two;  // made before the arenas: each waits for them when it goes
  std::size_t const page = Arena{}.page_bytes();
  constexpr std::size_t bytes = 1 * MiB;
  for (bool small : {false, true}) {
    // One page in all: stream two, which cannot have a page of its own, takes p (parked in stream
    // one's front) once the device gives no page.
    Arena arena({.byte_limit = page});
    std::size_t const size = small ? 4096 : bytes;
    auto* p = static_cast<std::uint32_t*>(arena.allocate(size, one.get()));
    // Stream one is still busy with p for ~50 ms when it frees it (as cudaFreeAsync allows).
    CUVMM_CUDA_REQUIRE(launch_spin_then_fill(p, size / 4, poison, 50'000'000, one.get()));
    arena.deallocate(p, size, one.get());
    auto* q = static_cast<std::uint32_t*>(arena.allocate(size, two.get()));
    REQUIRE(q == p);
    std::uint64_t const seed = test_seed(small ? 2 : 1);
    CUVMM_CUDA_REQUIRE(launch_write_pattern(q, size / 4, seed, two.get()));
    one.synchronize();
    two.synchronize();
    // Unordered, stream two's pattern would have been overwritten by stream one's late poison.
    CHECK(check_pattern(q, size / 4, seed, two.get()).mismatches == 0);
    arena.deallocate(q, size, two.get());
  }
}

TEST_CASE("memory freed on a stream that then captures a CUDA graph goes to no other stream during the capture",
          "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream capturing, other, later[2];  // made before the arenas: each waits for them when it goes
  std::size_t const page = Arena{}.page_bytes();
  for (bool small : {false, true}) {
    // Two pages in all: `other` gets the second during the capture; after it, the third stream,
    // which cannot have a page of its own, takes what the other two streams' fronts park.
    Arena arena({.byte_limit = 2 * page});
    std::size_t const size = small ? 4096 : 1 * MiB;
    cuvmm::Stream const third = later[small ? 1 : 0].get();  // a stream with nothing cached
    auto* p = static_cast<std::uint32_t*>(arena.allocate(size, capturing.get()));
    CUVMM_CUDA_REQUIRE(launch_spin_then_fill(p, size / 4, poison, 10'000'000, capturing.get()));
    arena.deallocate(p, size, capturing.get());
    std::size_t const reuses = arena.stats().cross_stream_reuses;
    CUVMM_CUDA_REQUIRE(cudaStreamBeginCapture(capturing.get(), cudaStreamCaptureModeRelaxed));
    // Handing p over would record an event into the capture and make `other` wait for it, so
    // `other` would join the capture (and the capture end unjoined).
    void* const q = arena.allocate(size, other.get());
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
    CUVMM_CUDA_REQUIRE(cudaStreamIsCapturing(other.get(), &status));
    CHECK(status == cudaStreamCaptureStatusNone);
    CHECK(q != p);
    CHECK(arena.stats().cross_stream_reuses == reuses);
    cudaGraph_t graph = nullptr;
    CUVMM_CUDA_REQUIRE(cudaStreamEndCapture(capturing.get(), &graph));
    REQUIRE(graph != nullptr);
    CUVMM_CUDA_REQUIRE(cudaGraphDestroy(graph));
    arena.deallocate(q, size, other.get());
    // The capture over, what `capturing` freed goes to another stream again, after an event wait.
    void* const r = arena.allocate(size, third);
    void* const s = arena.allocate(size, third);
    CHECK((r == p || s == p));
    CHECK(arena.stats().cross_stream_reuses > reuses);
    arena.deallocate(r, size, third);
    arena.deallocate(s, size, third);
    CUVMM_CUDA_REQUIRE(cudaDeviceSynchronize());
  }
}

namespace {

/// Replays `graph`, captured to write the pattern of `seed` into `p`, on `stream` after poisoning
/// `p`, and returns the words that differ from the pattern.
std::size_t replayed_pattern_mismatches(std::uint32_t* p, std::size_t words, std::uint64_t seed, cudaStream_t stream,
                                        cudaGraph_t graph) {
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(launch_fill(p, words, poison, stream), "launch_fill");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  return check_pattern(p, words, seed, stream).mismatches;
}

/// Three pages side by side on `stream`, the middle one freed while a kernel still fills it (for
/// ~50 ms): boxed in by the two live ones, its cached run cannot grow in place.
struct BoxedBusyPage {
  void* left = nullptr;
  std::uint32_t* busy = nullptr;
  void* right = nullptr;
};

BoxedBusyPage free_boxed_busy_page(Arena& arena, cudaStream_t stream) {
  std::size_t const page = arena.page_bytes();
  BoxedBusyPage b{arena.allocate(page, stream), static_cast<std::uint32_t*>(arena.allocate(page, stream)),
                  arena.allocate(page, stream)};
  REQUIRE(static_cast<char*>(static_cast<void*>(b.busy)) == static_cast<char*>(b.left) + page);
  REQUIRE(static_cast<char*>(b.right) == static_cast<char*>(static_cast<void*>(b.busy)) + page);
  CUVMM_CUDA_REQUIRE(launch_spin_then_fill(b.busy, page / 4, poison, 50'000'000, stream));
  arena.deallocate(b.busy, page, stream);
  return b;
}

/// A cached span of two large pages on `stream`, freed while a kernel still fills it.
std::uint32_t* free_busy_large_span(Arena& arena, cudaStream_t stream) {
  std::size_t const large = arena.large_page_bytes();
  auto* span = static_cast<std::uint32_t*>(arena.allocate(2 * large, stream));
  CUVMM_CUDA_REQUIRE(launch_spin_then_fill(span, 2 * large / 4, poison, 50'000'000, stream));
  arena.deallocate(span, 2 * large, stream);
  return span;
}

}  // namespace

TEST_CASE("a stream capturing a CUDA graph takes memory another stream freed after a host wait for that stream",
          "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream one, two;  // made before the arenas: each waits for them when it goes
  std::size_t const page = Arena{}.page_bytes();
  for (bool small : {false, true}) {
    // One page in all: stream two, capturing, can only take p, which stream one freed behind a
    // running kernel. Waiting for stream one's event on the device would join a foreign event to
    // the capture, which CUDA refuses; the arena waits on the host instead.
    Arena arena({.byte_limit = page});
    std::size_t const size = small ? 4096 : 1 * MiB;
    auto* p = static_cast<std::uint32_t*>(arena.allocate(size, one.get()));
    CUVMM_CUDA_REQUIRE(launch_spin_then_fill(p, size / 4, poison, 50'000'000, one.get()));
    arena.deallocate(p, size, one.get());
    ArenaStats const before = arena.stats();
    // Global mode, as PyTorch captures: no thread may query or wait for an event unless it relaxes
    // its own mode for the call, as the arena does.
    CUVMM_CUDA_REQUIRE(cudaStreamBeginCapture(two.get(), cudaStreamCaptureModeGlobal));
    auto* q = static_cast<std::uint32_t*>(arena.allocate(size, two.get()));
    std::uint64_t const seed = test_seed(small ? 6 : 5);
    CUVMM_CUDA_REQUIRE(launch_write_pattern(q, size / 4, seed, two.get()));
    cudaGraph_t graph = nullptr;
    CUVMM_CUDA_REQUIRE(cudaStreamEndCapture(two.get(), &graph));
    REQUIRE(graph != nullptr);
    CHECK(q == p);
    CHECK(arena.stats().host_waits == before.host_waits + 1);
    CHECK(arena.stats().cross_stream_reuses == before.cross_stream_reuses + 1);
    CHECK(replayed_pattern_mismatches(q, size / 4, seed, two.get(), graph) == 0);
    CUVMM_CUDA_REQUIRE(cudaGraphDestroy(graph));
    arena.deallocate(q, size, two.get());
  }
}

TEST_CASE("a stream capturing a CUDA graph takes a page another stream moved away from, with no device-side wait",
          "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream one, two;
  std::size_t const page = Arena{}.page_bytes();
  // Three pages in all, runs of pages cached, not parked in fronts. Stream one's freed page is
  // boxed in by live pages; a request for two moves it (behind a fence for the kernel still
  // running on it) and then fails, the device full: the page stays pooled behind that fence.
  Arena arena({.byte_limit = 3 * page, .stream_cache_run_bytes = 0});
  BoxedBusyPage const boxed = free_boxed_busy_page(arena, one.get());
  CHECK_THROWS_AS(arena.allocate(2 * page, one.get()), OutOfMemory);
  ArenaStats const before = arena.stats();
  REQUIRE(before.bytes_pooled == page);
  REQUIRE(before.bytes_stale == page);
  // Stream two, capturing as PyTorch does, takes the pooled page: its fence is passed on the host
  // (a query: the failed request waited for stream one), not waited for inside the capture.
  CUVMM_CUDA_REQUIRE(cudaStreamBeginCapture(two.get(), cudaStreamCaptureModeGlobal));
  auto* q = static_cast<std::uint32_t*>(arena.allocate(page, two.get()));
  std::uint64_t const seed = test_seed(7);
  CUVMM_CUDA_REQUIRE(launch_write_pattern(q, page / 4, seed, two.get()));
  cudaGraph_t graph = nullptr;
  CUVMM_CUDA_REQUIRE(cudaStreamEndCapture(two.get(), &graph));
  REQUIRE(graph != nullptr);
  CHECK(arena.stats().bytes_pooled == 0);
  CHECK(arena.stats().host_waits == before.host_waits);
  CHECK(replayed_pattern_mismatches(q, page / 4, seed, two.get(), graph) == 0);
  CUVMM_CUDA_REQUIRE(cudaGraphDestroy(graph));
  arena.deallocate(q, page, two.get());
  arena.deallocate(boxed.left, page, one.get());
  arena.deallocate(boxed.right, page, one.get());
}

TEST_CASE("pages a running kernel still uses are unmapped for stitching only after that kernel", "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream stream;
  Arena arena;
  std::size_t const page = arena.page_bytes();
  BoxedBusyPage const boxed = free_boxed_busy_page(arena, stream.get());
  // Two pages: no cached extent is large enough and the freed page is boxed in, so it moves and is
  // stitched in elsewhere, with no host wait: its old address stays mapped behind a fence for the
  // kernel. Unmapped under the running kernel, it would fault (CUDA_ERROR_ILLEGAL_ADDRESS).
  ArenaStats const ahead = arena.stats();
  auto* joined = static_cast<std::uint32_t*>(arena.allocate(2 * page, stream.get()));
  CHECK(arena.stats().reclaims == ahead.reclaims + 1);
  CHECK(arena.stats().host_waits == ahead.host_waits);
  CHECK(arena.stats().bytes_stale == ahead.bytes_stale + page);
  std::uint64_t const seed = test_seed(4);
  CUVMM_CUDA_REQUIRE(launch_write_pattern(joined, 2 * page / 4, seed, stream.get()));
  CUVMM_CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(check_pattern(joined, 2 * page / 4, seed, stream.get()).mismatches == 0);
  arena.deallocate(joined, 2 * page, stream.get());
  arena.deallocate(boxed.left, page, stream.get());
  arena.deallocate(boxed.right, page, stream.get());
}

TEST_CASE("a request that would swap a large page a running kernel still uses for small ones moves pages instead of "
          "waiting",
          "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream stream;
  Arena arena;
  std::size_t const large = arena.large_page_bytes();
  auto* span = free_busy_large_span(arena, stream.get());
  // A request ending a quarter into the second large page: the span's front would serve it, its
  // second large page swapped for small pages at the same addresses, which unmaps that page under
  // the kernel (a host wait first). Instead its first large page moves to new addresses, small
  // pages are created behind it, and the span's old addresses stay mapped behind a fence.
  ArenaStats const before = arena.stats();
  std::size_t const bytes = large + large / 4;
  auto* moved = static_cast<std::uint32_t*>(arena.allocate(bytes, stream.get()));
  ArenaStats const after = arena.stats();
  CHECK(after.host_waits == before.host_waits);
  CHECK(moved != span);
  CHECK(after.pages_moved == before.pages_moved + 1);
  CHECK(after.bytes_stale == 2 * large);
  CHECK(after.bytes_pooled == large);  // the second large page: released only once its fence is done
  std::uint64_t const seed = test_seed(8);
  CUVMM_CUDA_REQUIRE(launch_write_pattern(moved, bytes / 4, seed, stream.get()));
  CUVMM_CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(check_pattern(moved, bytes / 4, seed, stream.get()).mismatches == 0);
  arena.deallocate(moved, bytes, stream.get());
  // The kernel done, the same request takes the span's front as it lies (no move, no wait).
  CHECK(arena.trim() > 0);
  void* const again = arena.allocate(2 * large, stream.get());
  arena.deallocate(again, 2 * large, stream.get());
  ArenaStats const ahead = arena.stats();
  void* const split = arena.allocate(bytes, stream.get());
  CHECK(split == again);
  CHECK(arena.stats().pages_moved == ahead.pages_moved);
  CHECK(arena.stats().host_waits == ahead.host_waits);
  arena.deallocate(split, bytes, stream.get());
}

TEST_CASE("with wait_before_create, a request past the idle share waits for the work on pooled pages of the other "
          "size and releases them instead of creating pages beside them",
          "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream stream;
  Arena arena({.wait_before_create = true});
  std::size_t const large = arena.large_page_bytes();
  auto* span = free_busy_large_span(arena, stream.get());
  // As in the case above, the span's first large page moves to new addresses and small pages are
  // created behind it. Its second large page, pooled behind the kernel's fence, is released first,
  // after a host wait for the kernel, where without the option it stays pooled (72 MiB held).
  ArenaStats const before = arena.stats();
  REQUIRE(before.bytes_physical.current == 2 * large);
  std::size_t const bytes = large + large / 4;
  auto* moved = static_cast<std::uint32_t*>(arena.allocate(bytes, stream.get()));
  ArenaStats const after = arena.stats();
  CHECK(moved != span);
  CHECK(after.host_waits == before.host_waits + 1);
  CHECK(after.pages_moved == before.pages_moved + 1);
  CHECK(after.bytes_pooled == 0);
  CHECK(after.bytes_stale == large);  // the moved page's old mapping; the released page's went with it
  CHECK(after.bytes_physical.current == bytes);  // one large page and four small ones
  std::uint64_t const seed = test_seed(9);
  CUVMM_CUDA_REQUIRE(launch_write_pattern(moved, bytes / 4, seed, stream.get()));
  CUVMM_CUDA_REQUIRE(cudaStreamSynchronize(stream.get()));
  CHECK(check_pattern(moved, bytes / 4, seed, stream.get()).mismatches == 0);
  arena.deallocate(moved, bytes, stream.get());
}

TEST_CASE("Thrust sort, reduce, transform and copy give the same results with ThrustAllocator", "[arena][gpu][thrust]") {
  require_gpu();
  init_runtime();
  test::Stream stream;
  Arena arena;
  std::uint64_t const seed = test_seed(3);
  for (std::size_t count : {std::size_t{1000}, std::size_t{1} << 24}) {
    ThrustResults const with_defaults = run_thrust_algorithms(nullptr, count, seed, stream.get());
    std::size_t const allocations_before = arena.stats().allocations.total;
    ThrustResults const with_arena = run_thrust_algorithms(&arena, count, seed, stream.get());
    CHECK(with_arena.sorted);
    CHECK(with_arena.copy_equal);
    CHECK(with_arena == with_defaults);
    // The host computes the sum itself: the results are right, not only equal.
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < count; ++i) sum += pattern_value(seed, i);
    CHECK(with_arena.sum == sum);
    // Three vectors plus sort's and the reductions' temporary storage came from the arena.
    CHECK(arena.stats().allocations.total >= allocations_before + 4);
    CHECK(arena.stats().allocations.current == 0);
  }
}

TEST_CASE("the Arena serves cuda::mr through ArenaResource", "[arena][gpu]") {
  require_gpu();
  init_runtime();
  test::Stream stream;
  Arena arena;
  CHECK(cuda_mr_round_trip(arena, 3 * MiB + 5, stream.get()) == 0);
  CHECK(cuda_mr_round_trip(arena, 777, stream.get()) == 0);
  CHECK(arena.stats().allocations.total == 2);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("on the device, options that overflow are refused by name and a request past the device is OutOfMemory",
          "[arena][gpu][limit]") {
  require_gpu();
  init_runtime();
  CudaBackend& cuda = cuda_backend(0);
  LiveCounts const held_before = cuda.live_counts();
  auto const refusal = [&](ArenaOptions options) {
    try {
      Arena arena(cuda, std::move(options));
    } catch (const cuvmm::Error& e) {
      CHECK(e.is(ErrorCode::invalid_argument));
      return e.context();
    }
    FAIL("the options were taken");
    return std::string();
  };
  ArenaOptions huge;
  huge.address_space_bytes = SIZE_MAX;
  CHECK(refusal(huge).find("ArenaOptions::address_space_bytes 18446744073709551615 does not fit") == 0);
  CHECK(refusal(parse_arena_options("address_space_bytes:18446744073709551615"))
            .find("ArenaOptions::address_space_bytes") == 0);
  std::size_t const granularity = cuda.granularity(ChunkProperties{.device = 0});
  ArenaOptions half_page;
  half_page.large_page_bytes = granularity / 2;  // below the page: not a multiple of it
  CHECK(refusal(half_page).find("ArenaOptions::large_page_bytes") == 0);
  CHECK(cuda.live_counts() == held_before);  // refused before anything was taken

  // Twice the device's memory: OutOfMemory, every page made for it given back, the arena usable.
  Arena arena(cuda);
  std::size_t const total = cuda.memory_info(0).total;
  std::size_t const too_much = round_up(2 * total, arena.page_bytes());
  CHECK_THROWS_AS(arena.allocate(too_much), cuvmm::OutOfMemory);
  CHECK(arena.stats().bytes_physical.current == 0);
  CHECK(cuda.live_counts().chunks == held_before.chunks);
  void* p = arena.allocate(1 << 20);
  CHECK(p != nullptr);
  arena.deallocate(p, 1 << 20);
}
