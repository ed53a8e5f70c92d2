// Cost of each VMM step on this GPU, by chunk size: cuMemCreate, cuMemMap, cuMemSetAccess,
// cuMemUnmap, cuMemRelease (through cuvmm's CudaBackend, one call each); the whole cycle made by
// 1 to 8 threads at once (chunk_cycle_threads); and the bandwidth of the
// first fill of a fresh chunk against a second fill of the same chunk (does new physical memory
// cost extra on first touch?). Each timing is one call bracketed by a host clock; the benchmark
// reports the median over its iterations.
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

namespace {

using cuvmm::bench::check;

using clock_type = std::chrono::steady_clock;

__global__ void fill_kernel(uint4* out, std::size_t words) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x)
    out[i] = make_uint4(static_cast<unsigned>(i), 1, 2, 3);
}

double fill_seconds(void* data, std::size_t bytes) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::size_t const words = bytes / sizeof(uint4);
  unsigned const blocks = static_cast<unsigned>(std::min<std::size_t>((words + 255) / 256, 132 * 16));
  check(cudaEventRecord(start), "record");
  fill_kernel<<<blocks, 256>>>(static_cast<uint4*>(data), words);
  check(cudaEventRecord(stop), "record");
  check(cudaEventSynchronize(stop), "sync");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
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

void BM_ChunkLifecycle(benchmark::State& state) {
  std::size_t const bytes = static_cast<std::size_t>(state.range(0)) << 20;
  cuvmm::CudaBackend& backend = cuvmm::cuda_backend(0);
  cuvmm::AccessGrant const rw[] = {{0, cuvmm::Access::read_write}};
  cuvmm::Address const range = backend.reserve(bytes, 0);
  std::vector<double> create, map, access, fresh, again, unmap, release;
  for (auto _ : state) {
    cuvmm::ChunkHandle chunk{};
    create.push_back(seconds([&] { chunk = backend.create_chunk(bytes, {}); }));
    map.push_back(seconds([&] { backend.map(range, bytes, chunk); }));
    access.push_back(seconds([&] { backend.set_access(range, bytes, rw); }));
    fresh.push_back(fill_seconds(reinterpret_cast<void*>(range), bytes));
    again.push_back(fill_seconds(reinterpret_cast<void*>(range), bytes));
    unmap.push_back(seconds([&] { backend.unmap(range, bytes); }));
    release.push_back(seconds([&] { backend.release_chunk(chunk); }));
  }
  backend.free_range(range, bytes);
  state.counters["create_us"] = 1e6 * median(create);
  state.counters["map_us"] = 1e6 * median(map);
  state.counters["access_us"] = 1e6 * median(access);
  state.counters["unmap_us"] = 1e6 * median(unmap);
  state.counters["release_us"] = 1e6 * median(release);
  state.counters["first_fill_GBps"] = static_cast<double>(bytes) / median(fresh) / 1e9;
  state.counters["second_fill_GBps"] = static_cast<double>(bytes) / median(again) / 1e9;
}

/// Whole create, map, set access, unmap and release cycles of one chunk, made by several threads
/// at once, each on a chunk and a range of its own: how far the driver lets these calls run side by
/// side. Real time per cycle; cycles_per_s counts every thread's cycles over the wall time.
void BM_ChunkCycleThreads(benchmark::State& state) {
  std::size_t const bytes = static_cast<std::size_t>(state.range(0)) << 20;
  cuvmm::CudaBackend& backend = cuvmm::cuda_backend(0);
  cuvmm::AccessGrant const rw[] = {{0, cuvmm::Access::read_write}};
  cuvmm::Address const range = backend.reserve(bytes, 0);
  for (auto _ : state) {
    cuvmm::ChunkHandle const chunk = backend.create_chunk(bytes, {});
    backend.map(range, bytes, chunk);
    backend.set_access(range, bytes, rw);
    backend.unmap(range, bytes);
    backend.release_chunk(chunk);
  }
  backend.free_range(range, bytes);
  state.counters["cycles_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
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
      std::size_t const chunk_bytes = cuvmm::next_chunk_bytes(size, wanted, g, cuvmm::default_max_chunk_bytes);
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
BENCHMARK(BM_ChunkLifecycle)->Name("chunk_lifecycle")->ArgName("MiB")->Arg(2)->Arg(32)->Arg(512)->Arg(2048)->Arg(4096)->Iterations(9);
BENCHMARK(BM_ChunkCycleThreads)->Name("chunk_cycle_threads")->ArgName("MiB")->Arg(2)->Arg(64)->Arg(1024)->ThreadRange(1, 8)
    ->UseRealTime()->Unit(benchmark::kMicrosecond)->MinTime(0.2);
BENCHMARK(BM_AccessBatching)->Name("access_batching")->ArgName("chunks")->Arg(16)->Arg(256)->Iterations(9);
BENCHMARK(BM_GrowthWithoutFills)->Name("growth_without_fills")->ArgName("GiB")->Arg(16)->Arg(64)->UseManualTime()
    ->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
