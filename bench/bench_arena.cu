// Arena benchmarks on one GPU, side by side in one run:
//   pair/...    alloc+free pair latency for a cached size (warmed up, one stream): Arena,
//               cudaMallocAsync (default pool, warmed up), cudaMalloc. Repeated; compare medians.
//   trace/...   a random mixed-size trace (1 B to 1 GiB, tens of GiB live; tools/cuvmm-plan/trace.hpp) replayed
//               on one stream. Counters: utilization = peak bytes live / peak bytes the allocator
//               held from the device, and largest_after = the largest single allocation that
//               succeeds after the trace (with the trace's last live set still held) as a fraction
//               of the memory not in live allocations. Arena and cudaMallocAsync's pool; PyTorch's
//               caching allocator replays the same trace in bench/torch_trace.py.
//   sort/...    thrust::sort of 2^28 uint32 keys in place with ThrustAllocator (temporary storage
//               from the Arena) and with Thrust's default allocator, vs cub::DeviceRadixSort with
//               every buffer allocated beforehand (in place with a DoubleBuffer, as thrust::sort
//               sorts, and into a second array).
// Environment: CUVMM_TRACE_CSV=path writes the trace replayed here (for torch_trace.py);
// CUVMM_TRACE_LIVE_GIB (default 40) and CUVMM_TRACE_ALLOCATIONS (default 4000) size it.
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <cub/device/device_radix_sort.cuh>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>
#include <thrust/tabulate.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/thrust_allocator.hpp>

#include "trace.hpp"

#include "bench_support.hpp"

namespace {

using cuvmm::bench::Stream;
using cuvmm::bench::check;
using cuvmm::bench::device_memory_free;

using cuvmm::GiB;
using cuvmm::MiB;

std::size_t env_size(const char* name, std::size_t fallback) {
  char const* value = std::getenv(name);
  return value != nullptr ? static_cast<std::size_t>(std::strtoull(value, nullptr, 10)) : fallback;
}

// --- alloc+free pairs -----------------------------------------------------------------------------

void BM_PairArena(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  Stream s;
  cuvmm::Arena arena;
  arena.deallocate(arena.allocate(bytes, s.stream), bytes, s.stream);  // warm: the size is cached
  for (auto _ : state) {
    void* p = arena.allocate(bytes, s.stream);
    benchmark::DoNotOptimize(p);
    arena.deallocate(p, bytes, s.stream);
  }
  state.counters["driver_calls"] = static_cast<double>(arena.stats().maps);
}

void BM_PairMallocAsync(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  Stream s;
  for (int i = 0; i < 100; ++i) {  // warm the pool
    void* p = nullptr;
    check(cudaMallocAsync(&p, bytes, s.stream), "cudaMallocAsync");
    check(cudaFreeAsync(p, s.stream), "cudaFreeAsync");
  }
  for (auto _ : state) {
    void* p = nullptr;
    cudaMallocAsync(&p, bytes, s.stream);
    benchmark::DoNotOptimize(p);
    cudaFreeAsync(p, s.stream);
  }
  check(cudaStreamSynchronize(s.stream), "sync");
}

void BM_PairMalloc(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    void* p = nullptr;
    cudaMalloc(&p, bytes);
    benchmark::DoNotOptimize(p);
    cudaFree(p);
  }
}

// --- trace replay ---------------------------------------------------------------------------------

const std::vector<cuvmm::plan::TraceOp>& trace() {
  static const std::vector<cuvmm::plan::TraceOp> ops = [] {
    auto made = cuvmm::plan::make_trace(env_size("CUVMM_TRACE_ALLOCATIONS", 4000), env_size("CUVMM_TRACE_LIVE_GIB", 40) * GiB,
                                         20261129);
    if (char const* path = std::getenv("CUVMM_TRACE_CSV")) {
      std::ofstream out(path);
      cuvmm::plan::write_trace_csv(out, made);
    }
    return made;
  }();
  return ops;
}

/// The largest allocation (in 64 MiB steps) `try_allocate` can make now, by bisection.
template <class TryAllocate>
std::size_t largest_allocation(std::size_t upper, TryAllocate try_allocate) {
  std::size_t lo = 0, hi = upper / (64 * MiB) + 1;
  while (hi - lo > 1) {
    std::size_t const mid = (lo + hi) / 2;
    if (try_allocate(mid * 64 * MiB)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo * 64 * MiB;
}

void report_trace(benchmark::State& state, std::size_t peak_live, std::size_t peak_held, std::size_t largest,
                  std::size_t not_live) {
  state.counters["peak_live_GiB"] = static_cast<double>(peak_live) / GiB;
  state.counters["peak_held_GiB"] = static_cast<double>(peak_held) / GiB;
  state.counters["utilization"] = static_cast<double>(peak_live) / static_cast<double>(peak_held);
  state.counters["largest_after_GiB"] = static_cast<double>(largest) / GiB;
  state.counters["largest_after"] = static_cast<double>(largest) / static_cast<double>(not_live);
}

void BM_TraceArena(benchmark::State& state) {
  auto const& ops = trace();
  Stream s;
  cuvmm::ArenaOptions options;
  options.page_bytes = static_cast<std::size_t>(state.range(0)) * MiB;
  for (auto _ : state) {
    cuvmm::Arena arena(options);
    std::vector<void*> pointers(ops.size(), nullptr);
    for (auto const& op : ops) {
      if (op.allocate) {
        pointers[op.id] = arena.allocate(op.bytes, s.stream);
      } else {
        arena.deallocate(pointers[op.id], op.bytes, s.stream);
      }
    }
    check(cudaStreamSynchronize(s.stream), "sync");
    state.PauseTiming();
    cuvmm::ArenaStats const stats = arena.stats();
    // Memory not in live allocations: what the device has free plus what the arena holds unused.
    std::size_t const not_live = device_memory_free() + stats.bytes_physical.current - stats.bytes_requested.current;
    std::size_t const largest = largest_allocation(not_live, [&](std::size_t bytes) {
      try {
        arena.deallocate(arena.allocate(bytes, s.stream), bytes, s.stream);
        return true;
      } catch (const std::bad_alloc&) {
        return false;
      }
    });
    report_trace(state, stats.bytes_requested.peak, stats.bytes_physical.peak, largest, not_live);
    state.counters["driver_maps"] = static_cast<double>(stats.maps);
    state.counters["reclaims"] = static_cast<double>(stats.reclaims);
    state.ResumeTiming();
  }
}

void BM_TraceMallocAsync(benchmark::State& state) {
  auto const& ops = trace();
  Stream s;
  for (auto _ : state) {
    cudaMemPool_t pool = nullptr;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location = {cudaMemLocationTypeDevice, 0};
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    std::uint64_t keep_all = UINT64_MAX;  // a caching pool, as the Arena is
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all), "release threshold");
    std::vector<void*> pointers(ops.size(), nullptr);
    std::size_t live = 0, peak_live = 0;
    for (auto const& op : ops) {
      if (op.allocate) {
        check(cudaMallocFromPoolAsync(&pointers[op.id], op.bytes, pool, s.stream), "cudaMallocFromPoolAsync");
        live += op.bytes;
        peak_live = std::max(peak_live, live);
      } else {
        check(cudaFreeAsync(pointers[op.id], s.stream), "cudaFreeAsync");
        live -= op.bytes;
      }
    }
    check(cudaStreamSynchronize(s.stream), "sync");
    state.PauseTiming();
    std::uint64_t held_high = 0, held_now = 0;
    check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &held_high), "reserved high");
    check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &held_now), "reserved now");
    std::size_t const not_live = device_memory_free() + held_now - live;
    std::size_t const largest = largest_allocation(not_live, [&](std::size_t bytes) {
      void* p = nullptr;
      if (cudaMallocFromPoolAsync(&p, bytes, pool, s.stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
      }
      check(cudaFreeAsync(p, s.stream), "cudaFreeAsync");
      check(cudaStreamSynchronize(s.stream), "sync");
      return true;
    });
    report_trace(state, peak_live, held_high, largest, not_live);
    check(cudaDeviceSynchronize(), "sync");
    check(cudaMemPoolDestroy(pool), "cudaMemPoolDestroy");  // frees what is still live with it
    state.ResumeTiming();
  }
}

// --- thrust::sort temporary storage ---------------------------------------------------------------

struct Key {
  __host__ __device__ std::uint32_t operator()(std::uint32_t i) const { return i * 2654435761u ^ 0x5bd1e995u; }
};

/// thrust::sort in place: with ThrustAllocator (temporary storage from the Arena) or Thrust's
/// default (cudaMalloc/cudaFree per call).
template <bool with_arena>
void BM_SortThrust(benchmark::State& state) {
  std::size_t const n = std::size_t{1} << 28;
  Stream s;
  cuvmm::ArenaOptions options;
  options.page_bytes = static_cast<std::size_t>(state.range(0)) * MiB;  // 0 (default allocator): unused
  cuvmm::Arena arena(options);
  cuvmm::ThrustArenaResource resource(arena, s.stream);
  cuvmm::ThrustAllocator<std::uint32_t> alloc(resource);
  thrust::device_vector<std::uint32_t> keys(n);
  for (auto _ : state) {
    state.PauseTiming();
    thrust::tabulate(thrust::cuda::par.on(s.stream), keys.begin(), keys.end(), Key{});
    check(cudaStreamSynchronize(s.stream), "sync");
    state.ResumeTiming();
    if constexpr (with_arena) {
      thrust::sort(thrust::cuda::par(alloc).on(s.stream), keys.begin(), keys.end());
    } else {
      thrust::sort(thrust::cuda::par.on(s.stream), keys.begin(), keys.end());
    }
    check(cudaStreamSynchronize(s.stream), "sync");
  }
}

/// CUB's radix sort with every buffer allocated beforehand. `double_buffer`: in place, as
/// thrust::sort is (keys and an alternate buffer; copied back when the result ends in the
/// alternate); otherwise keys are sorted into a second array.
template <bool double_buffer>
void BM_SortCub(benchmark::State& state) {
  std::size_t const n = std::size_t{1} << 28;
  Stream s;
  thrust::device_vector<std::uint32_t> keys(n), other(n);
  auto* in = thrust::raw_pointer_cast(keys.data());
  auto* out = thrust::raw_pointer_cast(other.data());
  cub::DoubleBuffer<std::uint32_t> buffers(in, out);
  std::size_t temp_bytes = 0;
  if constexpr (double_buffer) {
    check(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, buffers, static_cast<int>(n), 0, 32, s.stream), "size");
  } else {
    check(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, in, out, static_cast<int>(n), 0, 32, s.stream), "size");
  }
  thrust::device_vector<std::uint8_t> temp(temp_bytes);
  void* temp_storage = thrust::raw_pointer_cast(temp.data());
  for (auto _ : state) {
    state.PauseTiming();
    thrust::tabulate(thrust::cuda::par.on(s.stream), keys.begin(), keys.end(), Key{});
    buffers = cub::DoubleBuffer<std::uint32_t>(in, out);
    check(cudaStreamSynchronize(s.stream), "sync");
    state.ResumeTiming();
    if constexpr (double_buffer) {
      check(cub::DeviceRadixSort::SortKeys(temp_storage, temp_bytes, buffers, static_cast<int>(n), 0, 32, s.stream),
            "SortKeys");
      if (buffers.Current() != in) {
        check(cudaMemcpyAsync(in, buffers.Current(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, s.stream), "copy");
      }
    } else {
      check(cub::DeviceRadixSort::SortKeys(temp_storage, temp_bytes, in, out, static_cast<int>(n), 0, 32, s.stream),
            "SortKeys");
    }
    check(cudaStreamSynchronize(s.stream), "sync");
  }
}

}  // namespace

BENCHMARK(BM_PairArena)->Name("pair/arena")->Arg(64 << 10)->Arg(1 << 20)->Repetitions(5)->ReportAggregatesOnly(false);
BENCHMARK(BM_PairMallocAsync)->Name("pair/cudaMallocAsync")->Arg(64 << 10)->Arg(1 << 20)->Repetitions(5);
BENCHMARK(BM_PairMalloc)->Name("pair/cudaMalloc")->Arg(64 << 10)->Arg(1 << 20)->Repetitions(3);
BENCHMARK(BM_TraceArena)->Name("trace/arena")->ArgName("page_MiB")->Arg(2)->Arg(8)->Arg(32)->Arg(64)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceMallocAsync)->Name("trace/cudaMallocAsync")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortThrust<true>)->Name("sort/thrust_arena")->ArgName("page_MiB")->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortThrust<false>)->Name("sort/thrust_default")->Arg(0)->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortCub<true>)->Name("sort/cub_double_buffer_preallocated")->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortCub<false>)->Name("sort/cub_preallocated")->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
