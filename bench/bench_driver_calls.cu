// Cost of each VMM step on this GPU. The driver-call cycle by chunk size (driver_calls/) and made
// by 1 to 8 threads at once (driver_threads/) are Google Benchmark front ends over cuvmm-plan's own
// measurement (tools/cuvmm-plan/measure.hpp: measure_driver_calls, measure_driver_threads), so the
// benchmark and the tool time the same code. Measured here only: the bandwidth of the first fill of
// a fresh chunk against a second fill (first_touch/), one cuMemSetAccess over many chunks against
// one per chunk (access_batching/), GrowableBuffer growth without fills (growth_without_fills/) and
// the driver calls of the growth policy's steps (growth_steps/, chunk sizes from
// cuvmm::next_chunk_bytes with the buffer's default GrowthShape).
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/growth_policy.hpp>

#include "bench_support.hpp"
#include "measure.hpp"

namespace {

using cuvmm::plan::check_cuda;

using clock_type = std::chrono::steady_clock;

__global__ void fill_kernel(uint4* out, std::size_t words) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = make_uint4(static_cast<unsigned>(i), 1, 2, 3);
}

double fill_seconds(void* data, std::size_t bytes) {
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  std::size_t const words = bytes / sizeof(uint4);
  unsigned const blocks = static_cast<unsigned>(std::min<std::size_t>((words + 255) / 256, 132 * 16));
  check_cuda(cudaEventRecord(start), "record");
  fill_kernel<<<blocks, 256>>>(static_cast<uint4*>(data), words);
  check_cuda(cudaEventRecord(stop), "record");
  check_cuda(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "elapsed");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / 1e3;
}

template <class F>
double seconds(F&& f) {
  auto const t0 = clock_type::now();
  f();
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// cuvmm-plan's driver-call measurement for one chunk size: `calls` cycles of create, map, set
/// access, unmap and release, each call timed; the medians as counters.
void BM_DriverCalls(benchmark::State& state) {
  std::size_t const sizes[] = {static_cast<std::size_t>(state.range(0)) << 20};
  constexpr std::size_t calls = 9;
  std::vector<cuvmm::plan::DriverCallRow> rows;
  for (auto _ : state) rows = cuvmm::plan::measure_driver_calls(cuvmm::cuda_backend(0), sizes, calls);
  cuvmm::plan::DriverCallRow const& row = rows.at(0);
  state.counters["create_us"] = row.create.median_us;
  state.counters["map_us"] = row.map.median_us;
  state.counters["access_us"] = row.set_access.median_us;
  state.counters["unmap_us"] = row.unmap.median_us;
  state.counters["release_us"] = row.release.median_us;
  state.counters["ms_per_GiB"] = row.ms_per_gib();
}

/// cuvmm-plan's driver-call measurement by thread count: each of state.range(1) threads runs
/// `cycles` whole cycles on a chunk and a range of its own, all at once. Repeated (the spread).
void BM_DriverThreads(benchmark::State& state) {
  std::size_t const bytes = static_cast<std::size_t>(state.range(0)) << 20;
  std::size_t const threads[] = {static_cast<std::size_t>(state.range(1))};
  constexpr std::size_t cycles = 20;
  std::vector<cuvmm::plan::DriverThreadsRow> rows;
  for (auto _ : state) rows = cuvmm::plan::measure_driver_threads(cuvmm::cuda_backend(0), bytes, threads, cycles);
  cuvmm::plan::DriverThreadsRow const& row = rows.at(0);
  state.counters["cycles_per_s"] = row.cycles_per_second;
  state.counters["create_us"] = row.create.median_us;
  state.counters["access_us"] = row.set_access.median_us;
  state.counters["release_us"] = row.release.median_us;
}

/// The bandwidth of the first fill of freshly mapped memory against a second fill of the same
/// memory (does new physical memory cost extra on first touch?). The driver calls are not timed.
void BM_FirstTouch(benchmark::State& state) {
  std::size_t const bytes = static_cast<std::size_t>(state.range(0)) << 20;
  cuvmm::CudaBackend& backend = cuvmm::cuda_backend(0);
  cuvmm::AccessGrant const rw[] = {{0, cuvmm::Access::read_write}};
  cuvmm::Address const range = backend.reserve(bytes, 0);
  std::vector<double> fresh, again;
  for (auto _ : state) {
    cuvmm::ChunkHandle const chunk = backend.create_chunk(bytes, {});
    backend.map(range, bytes, chunk);
    backend.set_access(range, bytes, rw);
    fresh.push_back(fill_seconds(reinterpret_cast<void*>(range), bytes));
    again.push_back(fill_seconds(reinterpret_cast<void*>(range), bytes));
    backend.unmap(range, bytes);
    backend.release_chunk(chunk);
  }
  backend.free_range(range, bytes);
  state.counters["first_fill_GBps"] = static_cast<double>(bytes) / median(fresh) / 1e9;
  state.counters["second_fill_GBps"] = static_cast<double>(bytes) / median(again) / 1e9;
}

/// One cuMemSetAccess over `count` 2 MiB chunks mapped side by side, against one call per chunk.
void BM_AccessBatching(benchmark::State& state) {
  std::size_t const count = static_cast<std::size_t>(state.range(0));
  cuvmm::CudaBackend& backend = cuvmm::cuda_backend(0);
  std::size_t const g = backend.granularity({}, cuvmm::GranularityKind::minimum);
  cuvmm::AccessGrant const rw[] = {{0, cuvmm::Access::read_write}};
  cuvmm::Address const range = backend.reserve(count * g, 0);
  std::vector<cuvmm::ChunkHandle> chunks;
  for (std::size_t i = 0; i < count; ++i) {
    chunks.push_back(backend.create_chunk(g, {}));
    backend.map(range + i * g, g, chunks.back());
  }
  std::vector<double> one_call, per_chunk;
  for (auto _ : state) {
    one_call.push_back(seconds([&] { backend.set_access(range, count * g, rw); }));
    per_chunk.push_back(seconds([&] {
      for (std::size_t i = 0; i < count; ++i) backend.set_access(range + i * g, g, rw);
    }));
  }
  for (std::size_t i = 0; i < count; ++i) {
    backend.unmap(range + i * g, g);
    backend.release_chunk(chunks[i]);
  }
  backend.free_range(range, count * g);
  state.counters["one_call_us"] = 1e6 * median(one_call);
  state.counters["per_chunk_calls_us"] = 1e6 * median(per_chunk);
}

/// GrowableBuffer growth alone (no fills): 64 MiB resizes to the target, host time of the driver work.
void BM_GrowthWithoutFills(benchmark::State& state) {
  std::size_t const target = static_cast<std::size_t>(state.range(0)) << 30;
  std::size_t chunks = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let earlier frees settle
    cuvmm::GrowableBuffer<std::uint8_t> buffer;
    auto const t0 = clock_type::now();
    for (std::size_t size = 0; size < target; size += 64 << 20) buffer.resize(size + (64 << 20));
    state.SetIterationTime(std::chrono::duration<double>(clock_type::now() - t0).count());
    chunks = buffer.stats().chunks_created;
  }
  state.counters["chunks"] = static_cast<double>(chunks);
}

/// The driver calls of GrowableBuffer's growth to the target, replayed one by one through the
/// backend with the policy's chunk sizes: total time of each kind of call, and the slowest call.
void BM_GrowthSteps(benchmark::State& state) {
  std::size_t const target = static_cast<std::size_t>(state.range(0)) << 30;
  cuvmm::CudaBackend& backend = cuvmm::cuda_backend(0);
  std::size_t const g = backend.granularity({}, cuvmm::GranularityKind::minimum);
  // The shape a default GrowableBuffer on this device grows with (fast policy, default hide size).
  cuvmm::GrowthShape const shape{g, cuvmm::default_max_chunk_bytes,
                                 cuvmm::default_hide_bytes(backend.memory_info(0).total, g), cuvmm::GrowthPolicy::fast};
  cuvmm::AccessGrant const rw[] = {{0, cuvmm::Access::read_write}};
  double create = 0, map = 0, access = 0, slowest_create = 0, slowest_access = 0, release = 0;
  std::size_t chunks = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let earlier frees settle
    std::size_t const range_bytes = target + (std::size_t{4} << 30);
    cuvmm::Address const range = backend.reserve(range_bytes, 0);
    std::vector<std::pair<cuvmm::ChunkHandle, std::size_t>> mapped;
    std::size_t size = 0;
    for (std::size_t wanted = 64 << 20; wanted <= target; wanted += 64 << 20) {
      if (wanted <= size) continue;
      std::size_t const chunk_bytes = cuvmm::next_chunk_bytes(size, wanted, shape);
      cuvmm::ChunkHandle chunk{};
      double const c = seconds([&] { chunk = backend.create_chunk(chunk_bytes, {}); });
      double const m = seconds([&] { backend.map(range + size, chunk_bytes, chunk); });
      double const a = seconds([&] { backend.set_access(range + size, chunk_bytes, rw); });
      create += c;
      map += m;
      access += a;
      slowest_create = std::max(slowest_create, c);
      slowest_access = std::max(slowest_access, a);
      mapped.emplace_back(chunk, chunk_bytes);
      size += chunk_bytes;
    }
    chunks = mapped.size();
    release += seconds([&] {
      std::size_t offset = 0;
      for (auto [chunk, bytes] : mapped) {
        backend.unmap(range + offset, bytes);
        backend.release_chunk(chunk);
        offset += bytes;
      }
    });
    backend.free_range(range, range_bytes);
  }
  double const n = static_cast<double>(state.iterations());
  state.counters["chunks"] = static_cast<double>(chunks);
  state.counters["create_ms"] = 1e3 * create / n;
  state.counters["map_ms"] = 1e3 * map / n;
  state.counters["access_ms"] = 1e3 * access / n;
  state.counters["slowest_create_ms"] = 1e3 * slowest_create;
  state.counters["slowest_access_ms"] = 1e3 * slowest_access;
  state.counters["teardown_ms"] = 1e3 * release / n;
}

}  // namespace

BENCHMARK(BM_GrowthSteps)->Name("growth_steps")->ArgName("GiB")->Arg(16)->Arg(64)->Iterations(3);
BENCHMARK(BM_DriverCalls)->Name("driver_calls")->ArgName("MiB")->Arg(2)->Arg(32)->Arg(512)->Arg(2048)->Arg(4096)->Iterations(1);
BENCHMARK(BM_DriverThreads)->Name("driver_threads")->ArgNames({"MiB", "thread_count"})
    ->ArgsProduct({{2, 64, 1024}, {1, 2, 4, 8}})->Iterations(1)->Repetitions(3)->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FirstTouch)->Name("first_touch")->ArgName("MiB")->Arg(2)->Arg(32)->Arg(512)->Arg(2048)->Iterations(9);
BENCHMARK(BM_AccessBatching)->Name("access_batching")->ArgName("chunks")->Arg(16)->Arg(256)->Iterations(9);
BENCHMARK(BM_GrowthWithoutFills)->Name("growth_without_fills")->ArgName("GiB")->Arg(16)->Arg(64)->UseManualTime()
    ->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
