// cuvmm-plan's CUDA runtime baselines and device-side measurements on a real GPU (skips visibly
// without one): copy-and-grow (cudaMalloc and cudaMallocAsync) and thrust::device_vector keep
// every byte and count their copies and peak exactly, a preallocated buffer stops at its capacity,
// fills land in the growable buffer in place, and cudaMallocAsync / cudaMalloc replay a trace
// holding at least what it asked for, as do RMM's pool and arena resources when cuvmm-plan is built
// with RMM (else making one says how to build it: that case runs everywhere). Strategies are made by
// name; without a GPU only the growable ones can be (that case runs everywhere too).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>

#include "device_runtime.hpp"
#include "gpu.hpp"
#include "measure.hpp"
#include "report.hpp"
#include "rmm_replay.hpp"

using namespace cuvmm;
using namespace cuvmm::plan;

namespace {

void check_cuda(cudaError_t status) { REQUIRE(status == cudaSuccess); }

/// Every byte of [data, data + bytes) on the device equals `value`.
bool device_bytes_equal(const void* data, std::size_t bytes, unsigned char value) {
  std::vector<unsigned char> host(bytes, static_cast<unsigned char>(~value));  // poisoned first
  check_cuda(cudaMemcpy(host.data(), data, bytes, cudaMemcpyDeviceToHost));
  for (unsigned char const b : host) {
    if (b != value) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("copy-and-grow 2x and thrust::device_vector keep every byte and count their copies and peak exactly",
          "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  for (const char* name : {copy_grow_2x_name, async_copy_grow_2x_name, thrust_vector_name}) {
    INFO(name);
    auto grow = make_growth_strategy(name, cuda_backend(0), &session, 0);
    std::byte* last = nullptr;
    for (int i = 0; i < 8; ++i) {  // 8 appends of 1 MiB, each its own value
      last = static_cast<std::byte*>(grow->append(1 * MiB));
      // On the session's stream, where the strategies order their copies (thrust waits for it).
      check_cuda(cudaMemsetAsync(last, 0x10 + i, 1 * MiB, session.stream()));
    }
    check_cuda(cudaStreamSynchronize(session.stream()));
    // Capacities 1, 2, 4, 8 MiB (thrust grows to at least twice its capacity as well): copies of
    // 1 + 2 + 4 MiB; at most 4 + 8 MiB held at once.
    CHECK(grow->bytes_copied() == 7 * MiB);
    CHECK(grow->chunks() == 4);
    CHECK(grow->peak_bytes() == 12 * MiB);
    std::byte* const first = last - 7 * MiB;
    for (int i = 0; i < 8; ++i) {
      INFO("MiB " << i);
      CHECK(device_bytes_equal(first + i * MiB, 1 * MiB, static_cast<unsigned char>(0x10 + i)));
    }
  }
}

TEST_CASE("every growth strategy is made by its name, and reaches its target in place", "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  auto const names = growth_strategy_names(true);
  CHECK(names == std::vector<std::string>{growable_policy_name, growable_fixed_name, copy_grow_2x_name,
                                          copy_grow_1_5x_name, async_copy_grow_2x_name, thrust_vector_name,
                                          preallocated_name});
  for (auto const& name : names) {
    INFO(name);
    auto strategy = make_growth_strategy(name, cuda_backend(0), &session, 24 * MiB);
    GrowthRow const row = measure_growth(name, *strategy, 24 * MiB, 3 * MiB, session.memory_ops());
    CHECK(row.status == "ok");
    CHECK(row.reached_bytes == 24 * MiB);
    CHECK(row.appends == 8);
    CHECK(row.peak_bytes >= 24 * MiB);
    auto* const end = static_cast<std::byte*>(strategy->append(0));  // where the next bytes would go
    CHECK(device_bytes_equal(end - 24 * MiB, 24 * MiB, 0x5A));       // every fill, in place
  }
}

TEST_CASE("without a GPU only the growable strategies can be made by name", "[plan]") {
  HostBackend backend;
  CHECK(growth_strategy_names(false) == std::vector<std::string>{growable_policy_name, growable_fixed_name});
  CHECK(make_growth_strategy(growable_policy_name, backend, nullptr, 0) != nullptr);
  auto fixed = make_growth_strategy(growable_fixed_name, backend, nullptr, 0);
  (void)fixed->append(5 * MiB);
  CHECK(fixed->chunks() == 3);  // one 2 MiB granule per chunk
  for (const char* name : {copy_grow_2x_name, copy_grow_1_5x_name, async_copy_grow_2x_name, thrust_vector_name,
                           preallocated_name, "no_such_strategy"}) {
    INFO(name);
    CHECK_THROWS_AS(make_growth_strategy(name, backend, nullptr, 0), std::invalid_argument);
  }
}

TEST_CASE("copy-and-grow 1.5x reaches its target with fills in place and less peak than 2x", "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  auto grow = session.copy_and_grow(1.5);
  GrowthRow const row = measure_growth(copy_grow_1_5x_name, *grow, 64 * MiB, 1 * MiB, session.memory_ops());
  CHECK(row.status == "ok");
  CHECK(row.reached_bytes == 64 * MiB);
  CHECK(row.appends == 64);
  CHECK(row.bytes_copied > 0);
  CHECK(row.peak_bytes >= 64 * MiB);
  CHECK(row.peak_bytes < 3 * 64 * MiB);
}

TEST_CASE("the untimed pass sees copy-and-grow hold both buffers, and a growable buffer hold about its size",
          "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  std::size_t const copy_peak =
      measure_peak_in_use([&] { return session.copy_and_grow(2.0); }, 64 * MiB, 1 * MiB, session.memory_ops());
  CHECK(copy_peak >= 96 * MiB);  // 32 + 64 MiB while the last copy runs
  // Without mapping ahead: a buffer grown in place holds its size and its slack only. (With it, the
  // default on a device, it holds one step more, the bound of docs/DESIGN.md invariant 6.)
  cuvmm::GrowableOptions no_step_ahead;
  no_step_ahead.map_ahead = cuvmm::MapAhead::off;
  std::size_t const growable_peak =
      measure_peak_in_use([&] { return make_growable_strategy(cuda_backend(0), no_step_ahead); }, 64 * MiB, 1 * MiB,
                          session.memory_ops());
  CHECK(growable_peak >= 64 * MiB);
  CHECK(growable_peak < 96 * MiB);
}

TEST_CASE("a preallocated buffer stops at its capacity with out_of_memory", "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  auto buffer = session.preallocated(4 * MiB);
  GrowthRow const row = measure_growth(preallocated_name, *buffer, 8 * MiB, 1 * MiB, session.memory_ops());
  CHECK(row.status == "out_of_memory");
  CHECK(row.reached_bytes == 4 * MiB);
  CHECK(row.peak_bytes == 4 * MiB);
  CHECK(row.bytes_copied == 0);
}

TEST_CASE("fills land in a growable buffer on the device, in place, and nothing leaks", "[plan][gpu]") {
  cuvmm::test::require_gpu();
  CudaBackend& backend = cuda_backend(0);
  LiveCounts const before = backend.live_counts();
  {
    DeviceRuntimeSession session;
    auto growable = make_growable_strategy(backend);
    auto* const first = static_cast<std::byte*>(growable->append(3 * MiB));
    session.memory_ops().fill(first, 3 * MiB);
    auto* const second = static_cast<std::byte*>(growable->append(5 * MiB));
    session.memory_ops().fill(second, 5 * MiB);
    session.memory_ops().finish();
    CHECK(second == first + 3 * MiB);
    CHECK(device_bytes_equal(first, 8 * MiB, 0x5A));
  }
  CHECK(backend.live_counts() == before);
}

TEST_CASE("cudaMallocAsync and cudaMalloc replay a trace holding at least what it asked for", "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  Trace trace;
  trace.ops = {{true, 0, 3 * MiB}, {true, 1, 5 * MiB}, {false, 0, 3 * MiB}, {true, 2, 1000}, {false, 1, 5 * MiB}};
  for (bool async : {true, false}) {
    INFO((async ? "cudaMallocAsync" : "cudaMalloc"));
    auto allocator = async ? session.cuda_malloc_async() : session.cuda_malloc();
    ReplayResult const r = replay_trace(async ? "cudaMallocAsync" : "cudaMalloc", *allocator, trace, 100);
    CHECK(r.ops == 5);
    CHECK(r.failed_allocations == 0);
    CHECK(r.peak_requested_bytes == 8 * MiB);
    CHECK(r.peak_held_bytes >= 8 * MiB);
    REQUIRE(r.timeline.size() == 5);
    CHECK(r.timeline[1].held_bytes >= 8 * MiB);
    CHECK_FALSE(r.arena_stats.has_value());  // the CUDA runtime's allocators are not an Arena
  }
}

TEST_CASE("an allocation the device cannot hold is a failed allocation, not an error", "[plan][gpu]") {
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total));
  std::size_t const too_much = 2 * total;
  Trace trace;
  trace.ops = {{true, 0, too_much}, {false, 0, too_much}};
  for (bool async : {true, false}) {
    auto allocator = async ? session.cuda_malloc_async() : session.cuda_malloc();
    ReplayResult const r = replay_trace("x", *allocator, trace, 10);
    CHECK(r.failed_allocations == 1);
    CHECK(r.peak_requested_bytes == 0);
  }
  for (auto allocation : {DeviceAllocation::malloc, DeviceAllocation::malloc_async}) {
    auto grow = session.copy_and_grow(2.0, allocation);
    CHECK_THROWS_AS(grow->append(too_much), std::bad_alloc);
    CHECK(grow->chunks() == 0);
  }
  auto vector = session.thrust_vector();
  CHECK_THROWS_AS(vector->append(too_much), std::bad_alloc);
  CHECK(vector->chunks() == 0);
  CHECK_THROWS_AS(session.preallocated(too_much), std::bad_alloc);
}

TEST_CASE("RMM's pool and arena replay a trace holding at least what it asked for, and fail what the device cannot hold",
          "[plan][gpu][rmm]") {
  if (!rmm_replay_built()) SKIP("cuvmm-plan was built without RMM (-Drmm_root)");
  cuvmm::test::require_gpu();
  DeviceRuntimeSession session;
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total));
  Trace trace;
  trace.ops = {{true, 0, 3 * MiB}, {true, 1, 5 * MiB}, {false, 0, 3 * MiB}, {true, 2, 1000}, {false, 1, 5 * MiB},
               {true, 3, 2 * total}, {false, 2, 1000}};
  for (RmmResource const which : rmm_resources) {
    std::string const name(rmm_replay_name(which));
    INFO(name);
    auto allocator = make_rmm_allocator(which, session.stream());
    ReplayResult const r = replay_trace(name, *allocator, trace, 100);
    CHECK(r.allocator == name);
    CHECK(r.ops == 7);
    CHECK(r.failed_allocations == 1);  // twice the device: rmm::out_of_memory, a failed allocation
    CHECK(r.peak_requested_bytes == 8 * MiB);
    CHECK(r.peak_held_bytes >= 8 * MiB);
    REQUIRE(r.timeline.size() == 7);
    CHECK(r.timeline[1].held_bytes >= 8 * MiB);
    CHECK_FALSE(r.arena_stats.has_value());
  }
}

TEST_CASE("without RMM, an RMM replay is refused with how to build it", "[plan]") {
  if (rmm_replay_built()) SKIP("cuvmm-plan was built with RMM");
  CHECK(rmm_replay_name(RmmResource::pool) == "rmm_pool");
  CHECK(rmm_replay_name(RmmResource::arena) == "rmm_arena");
  try {
    (void)make_rmm_allocator(RmmResource::pool, nullptr);
    FAIL("no Unsupported");
  } catch (const Unsupported& e) {
    CHECK_THAT(e.what(), Catch::Matchers::ContainsSubstring("-Drmm_root"));
    CHECK_THAT(e.what(), Catch::Matchers::ContainsSubstring("rmm_pool"));
  }
}
