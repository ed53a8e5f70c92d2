// Arena benchmarks on one GPU, side by side in one run:
//   pair/...    alloc+free pair latency for a cached size (warmed up, one stream): Arena,
//               cudaMallocAsync (default pool, warmed up), cudaMalloc. Repeated; compare medians.
//               pair/arena_host is the Arena on the host backend (its bookkeeping alone; runs
//               without a GPU: --benchmark_filter=pair/arena_host).
//   threads/... T threads (Arg), each on its own stream, allocating and freeing mixed sizes (4 KiB
//               to 4 MiB, log-uniform, 16 live per thread, the oldest freed first) on one allocator:
//               the Arena, the Arena on the host backend (its bookkeeping and lock alone; runs
//               without a GPU: --benchmark_filter=threads/arena_host; the _no_runs variants keep
//               runs of pages out of the streams' fronts, ArenaOptions::stream_cache_run_bytes 0),
//               cudaMallocAsync (its default pool). items_per_second counts alloc+free pairs of
//               all threads together after an untimed first round (the allocator warmed, as for
//               pair/); first_round_pairs_per_second is that first round's rate. The Arena's
//               counters: lock_share, cross_stream_reuses and maps over every round.
//   trace/...   a random mixed-size trace (1 B to 1 GiB, tens of GiB live) replayed by cuvmm-plan's
//               own replay (tools/cuvmm-plan/measure.hpp: replay_trace, make_arena_allocator,
//               device_runtime.hpp's cudaMallocAsync baseline, and rmm_replay.hpp's RMM pool and
//               arena resources, trace/rmm_pool and trace/rmm_arena, when built with -Drmm_root), so
//               the benchmark and the tool measure the same thing. Counters: utilization = peak
//               bytes live / peak bytes the allocator held, mean_utilization over the replay,
//               replay_s (allocator calls only).
//               By default the trace of cuvmm-plan's full profile on a GPU (10000 allocations,
//               40 GiB live, seed 1234); PyTorch's caching allocator replays the same trace in
//               tools/cuvmm-plan/torch_trace.py. trace/arena has the Arena's defaults (Arg: its
//               page size); trace/arena_small_tails has ArenaOptions::share_large_page_tails off;
//               trace/arena_max_lent has ArenaOptions::max_lent_bytes at Arg thousandths of the
//               device's memory (0: nothing lent), the time side of the frontier that
//               `unit_arena_trace "[.profile_lent]"` prints from the bookkeeping replay;
//               trace/arena_max_lent_tail has ArenaOptions::max_lent_tail_bytes at Arg MiB;
//               trace/arena_max_idle has ArenaOptions::max_idle_percent at Arg;
//               trace/arena_whole_chunks has ArenaOptions::whole_chunk_bytes at Arg MiB.
//   sort/...    thrust::sort of 2^28 uint32 keys in place with ThrustAllocator (temporary storage
//               from the Arena) and with Thrust's default allocator, vs cub::DeviceRadixSort with
//               every buffer allocated beforehand (in place with a DoubleBuffer, as thrust::sort
//               sorts, and into a second array).
// Environment: CUVMM_TRACE_CSV=path writes the trace replayed here (for torch_trace.py);
// CUVMM_TRACE_LIVE_GIB (default 40), CUVMM_TRACE_ALLOCATIONS (default 10000) and CUVMM_TRACE_SEED
// (default 1234) choose it; CUVMM_TRACE_FILE=path replays that trace instead (cuvmm's CSV or RMM's
// log, as `cuvmm-plan --trace`: e.g. `bench/torch_allocators.py traces`' random ones).
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>

#include <cub/device/device_radix_sort.cuh>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>
#include <thrust/tabulate.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/thrust_allocator.hpp>

#include "bench_support.hpp"
#include "threads_pattern.hpp"
#include "device_runtime.hpp"
#include "measure.hpp"
#include "rmm_replay.hpp"
#include "trace.hpp"
#include "trace_csv.hpp"

namespace {

using cuvmm::bench::Stream;
using cuvmm::bench::churn;
using cuvmm::bench::pairs_per_thread;
using cuvmm::bench::thread_sizes;
using cuvmm::plan::check_cuda;

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

/// The same pair on the host backend (2 MiB granularity, as on the H200): the Arena's bookkeeping
/// alone, measurable on any machine.
void BM_PairArenaHost(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  cuvmm::HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  cuvmm::Arena arena(backend);
  arena.deallocate(arena.allocate(bytes), bytes);  // warm: the size is cached
  for (auto _ : state) {
    void* p = arena.allocate(bytes);
    benchmark::DoNotOptimize(p);
    arena.deallocate(p, bytes);
  }
  state.counters["driver_calls"] = static_cast<double>(arena.stats().maps);
}

void BM_PairMallocAsync(benchmark::State& state) {
  auto const bytes = static_cast<std::size_t>(state.range(0));
  Stream s;
  for (int i = 0; i < 100; ++i) {  // warm the pool
    void* p = nullptr;
    check_cuda(cudaMallocAsync(&p, bytes, s.stream), "cudaMallocAsync");
    check_cuda(cudaFreeAsync(p, s.stream), "cudaFreeAsync");
  }
  for (auto _ : state) {
    void* p = nullptr;
    cudaMallocAsync(&p, bytes, s.stream);
    benchmark::DoNotOptimize(p);
    cudaFreeAsync(p, s.stream);
  }
  check_cuda(cudaStreamSynchronize(s.stream), "sync");
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

// --- threads: mixed sizes, each thread on its own stream -------------------------------------------

/// Runs `work(t, sizes)` on state.range(0) threads at once and counts their pairs. The first round
/// is not timed: it fills the allocator (the Arena creates its pages and fills its streams' fronts,
/// cudaMallocAsync's pool grows), as the cached pair is timed warm. Its rate, all threads together,
/// is the counter first_round_pairs_per_second.
template <class Work>
void run_threads(benchmark::State& state, Work&& work) {
  auto const threads = static_cast<int>(state.range(0));
  std::vector<std::vector<std::size_t>> sizes;
  for (int t = 0; t < threads; ++t) sizes.push_back(thread_sizes(t));
  auto const round = [&] {
    std::vector<std::thread> running;
    for (int t = 0; t < threads; ++t) running.emplace_back([&, t] { work(t, sizes[static_cast<std::size_t>(t)]); });
    for (auto& thread : running) thread.join();
  };
  auto const started = std::chrono::steady_clock::now();
  round();
  std::chrono::duration<double> const first = std::chrono::steady_clock::now() - started;
  for (auto _ : state) round();
  state.SetItemsProcessed(state.iterations() * threads * pairs_per_thread);
  state.counters["first_round_pairs_per_second"] = threads * pairs_per_thread / first.count();
}

/// Over every round (the first included): the share of requests that took the Arena's lock
/// (lock_share), memory one stream freed handed to another (cross_stream_reuses, each an event
/// recorded and waited for on the device), and pages mapped (maps).
void report_misses(benchmark::State& state, const cuvmm::Arena& arena) {
  cuvmm::ArenaStats const st = arena.stats();
  auto const allocations = static_cast<double>(std::max<std::size_t>(1, st.allocations.total));
  state.counters["lock_share"] = 1.0 - static_cast<double>(st.front_allocations) / allocations;
  state.counters["cross_stream_reuses"] = static_cast<double>(st.cross_stream_reuses);
  state.counters["maps"] = static_cast<double>(st.maps);
}

/// `options`: the Arena's defaults, or with no runs of pages parked (threads/arena_no_runs).
void threads_arena(benchmark::State& state, const cuvmm::ArenaOptions& options) {
  cuvmm::Arena arena(options);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int t = 0; t < state.range(0); ++t) streams.push_back(std::make_unique<Stream>());
  run_threads(state, [&](int t, const std::vector<std::size_t>& sizes) {
    cudaStream_t const s = streams[static_cast<std::size_t>(t)]->stream;
    churn(sizes, [&](std::size_t bytes) { return arena.allocate(bytes, s); },
          [&](void* p, std::size_t bytes) { arena.deallocate(p, bytes, s); });
  });
  for (auto& s : streams) check_cuda(cudaStreamSynchronize(s->stream), "sync");
  report_misses(state, arena);
  for (auto& s : streams) arena.release_stream(s->stream);
}

void threads_arena_host(benchmark::State& state, const cuvmm::ArenaOptions& options) {
  cuvmm::HostBackend backend({.granularity = 2 * MiB, .physical_limit = 4 * GiB});
  cuvmm::Arena arena(backend, options);
  run_threads(state, [&](int t, const std::vector<std::size_t>& sizes) {
    auto* const s = reinterpret_cast<cuvmm::Stream>(static_cast<std::uintptr_t>(t + 1) * 64);  // a handle per thread
    churn(sizes, [&](std::size_t bytes) { return arena.allocate(bytes, s); },
          [&](void* p, std::size_t bytes) { arena.deallocate(p, bytes, s); });
  });
  report_misses(state, arena);
}

void BM_ThreadsArena(benchmark::State& state) { threads_arena(state, {}); }
void BM_ThreadsArenaNoRuns(benchmark::State& state) { threads_arena(state, {.stream_cache_run_bytes = 0}); }
void BM_ThreadsArenaHost(benchmark::State& state) { threads_arena_host(state, {}); }
void BM_ThreadsArenaHostNoRuns(benchmark::State& state) { threads_arena_host(state, {.stream_cache_run_bytes = 0}); }

void BM_ThreadsMallocAsync(benchmark::State& state) {
  std::vector<std::unique_ptr<Stream>> streams;
  for (int t = 0; t < state.range(0); ++t) streams.push_back(std::make_unique<Stream>());
  run_threads(state, [&](int t, const std::vector<std::size_t>& sizes) {
    cudaStream_t const s = streams[static_cast<std::size_t>(t)]->stream;
    churn(sizes,
          [&](std::size_t bytes) {
            void* p = nullptr;
            check_cuda(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync");
            return p;
          },
          [&](void* p, std::size_t) { check_cuda(cudaFreeAsync(p, s), "cudaFreeAsync"); });
  });
  for (auto& s : streams) check_cuda(cudaStreamSynchronize(s->stream), "sync");
}

// --- trace replay ---------------------------------------------------------------------------------

const cuvmm::plan::Trace& trace() {
  static const cuvmm::plan::Trace made = [] {
    if (char const* path = std::getenv("CUVMM_TRACE_FILE")) return cuvmm::plan::read_trace_file(path);
    cuvmm::plan::Trace t;
    t.ops = cuvmm::plan::make_trace(env_size("CUVMM_TRACE_ALLOCATIONS", 10000), env_size("CUVMM_TRACE_LIVE_GIB", 40) * GiB,
                                    env_size("CUVMM_TRACE_SEED", 1234));
    if (char const* path = std::getenv("CUVMM_TRACE_CSV")) {
      std::ofstream out(path);
      cuvmm::plan::write_trace_csv(out, t.ops);
    }
    return t;
  }();
  return made;
}

void report_replay(benchmark::State& state, const cuvmm::plan::ReplayResult& r) {
  state.counters["peak_live_GiB"] = static_cast<double>(r.peak_requested_bytes) / GiB;
  state.counters["peak_held_GiB"] = static_cast<double>(r.peak_held_bytes) / GiB;
  state.counters["utilization"] =
      r.peak_held_bytes == 0 ? 0 : static_cast<double>(r.peak_requested_bytes) / static_cast<double>(r.peak_held_bytes);
  state.counters["mean_utilization"] = r.mean_utilization;
  state.counters["failed_allocations"] = static_cast<double>(r.failed_allocations);
  state.counters["replay_s"] = r.seconds;
}

constexpr std::size_t timeline_points = 2000;  // as cuvmm-plan samples

/// The trace replayed on a fresh cuvmm::Arena with `options`, once per iteration.
void replay_on_arena(benchmark::State& state, const cuvmm::ArenaOptions& options) {
  for (auto _ : state) {
    auto arena = cuvmm::plan::make_arena_allocator(cuvmm::cuda_backend(0), options);
    report_replay(state, cuvmm::plan::replay_trace("cuvmm_arena", *arena, trace(), timeline_points));
  }
}

/// The trace on a cuvmm::Arena with state.range(0) MiB pages.
void BM_TraceArena(benchmark::State& state) {
  cuvmm::ArenaOptions options;
  options.page_bytes = static_cast<std::size_t>(state.range(0)) * MiB;
  options.large_page_bytes = std::max(options.large_page_bytes, options.page_bytes);  // at least one page
  replay_on_arena(state, options);
}

/// The trace on a cuvmm::Arena with ArenaOptions::share_large_page_tails off (large pages then small
/// ones).
void BM_TraceArenaSmallTails(benchmark::State& state) {
  cuvmm::ArenaOptions options;
  options.share_large_page_tails = false;
  replay_on_arena(state, options);
}

/// The trace on a cuvmm::Arena with ArenaOptions::max_lent_bytes at state.range(0) thousandths of
/// the device's memory (0: nothing lent).
void BM_TraceArenaMaxLent(benchmark::State& state) {
  std::size_t const device_bytes = cuvmm::cuda_backend(0).memory_info(0).total;
  cuvmm::ArenaOptions options;
  options.max_lent_bytes = std::max<std::size_t>(1, device_bytes / 1000 * static_cast<std::size_t>(state.range(0)));
  replay_on_arena(state, options);
}

/// The trace on a cuvmm::Arena with ArenaOptions::max_lent_tail_bytes at state.range(0) MiB.
void BM_TraceArenaMaxLentTail(benchmark::State& state) {
  cuvmm::ArenaOptions options;
  options.max_lent_tail_bytes = static_cast<std::size_t>(state.range(0)) * MiB;
  replay_on_arena(state, options);
}

/// The trace on a cuvmm::Arena with ArenaOptions::max_idle_percent at state.range(0).
void BM_TraceArenaMaxIdle(benchmark::State& state) {
  cuvmm::ArenaOptions options;
  options.max_idle_percent = static_cast<std::size_t>(state.range(0));
  replay_on_arena(state, options);
}

/// The trace on a cuvmm::Arena with whole chunks from Arg MiB on (ArenaOptions::whole_chunk_bytes).
void BM_TraceArenaWholeChunks(benchmark::State& state) {
  cuvmm::ArenaOptions options;
  options.whole_chunk_bytes = static_cast<std::size_t>(state.range(0)) * MiB;
  replay_on_arena(state, options);
}

/// The trace on cudaMallocAsync (cuvmm-plan's baseline: the default pool on one stream).
void BM_TraceMallocAsync(benchmark::State& state) {
  static cuvmm::plan::DeviceRuntimeSession session;
  for (auto _ : state) {
    auto async = session.cuda_malloc_async();
    report_replay(state, cuvmm::plan::replay_trace("cudaMallocAsync", *async, trace(), timeline_points));
  }
}

/// The trace on one of RMM's resources (registered only when built with RMM: rmm_replay.hpp).
void BM_TraceRmm(benchmark::State& state, cuvmm::plan::RmmResource which) {
  static cuvmm::plan::DeviceRuntimeSession session;
  for (auto _ : state) {
    auto rmm = cuvmm::plan::make_rmm_allocator(which, session.stream());
    report_replay(state, cuvmm::plan::replay_trace(std::string(cuvmm::plan::rmm_replay_name(which)), *rmm, trace(),
                                                   timeline_points));
  }
}

[[maybe_unused]] bool const rmm_traces_registered = [] {
  if (!cuvmm::plan::rmm_replay_built()) return false;
  for (auto const which : cuvmm::plan::rmm_resources) {
    std::string const name = "trace/" + std::string(cuvmm::plan::rmm_replay_name(which));
    benchmark::RegisterBenchmark(name.c_str(), BM_TraceRmm, which)->Iterations(1)->Unit(benchmark::kMillisecond);
  }
  return true;
}();

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
    check_cuda(cudaStreamSynchronize(s.stream), "sync");
    state.ResumeTiming();
    if constexpr (with_arena) {
      thrust::sort(thrust::cuda::par(alloc).on(s.stream), keys.begin(), keys.end());
    } else {
      thrust::sort(thrust::cuda::par.on(s.stream), keys.begin(), keys.end());
    }
    check_cuda(cudaStreamSynchronize(s.stream), "sync");
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
    check_cuda(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, buffers, static_cast<int>(n), 0, 32, s.stream), "size");
  } else {
    check_cuda(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, in, out, static_cast<int>(n), 0, 32, s.stream), "size");
  }
  thrust::device_vector<std::uint8_t> temp(temp_bytes);
  void* temp_storage = thrust::raw_pointer_cast(temp.data());
  for (auto _ : state) {
    state.PauseTiming();
    thrust::tabulate(thrust::cuda::par.on(s.stream), keys.begin(), keys.end(), Key{});
    buffers = cub::DoubleBuffer<std::uint32_t>(in, out);
    check_cuda(cudaStreamSynchronize(s.stream), "sync");
    state.ResumeTiming();
    if constexpr (double_buffer) {
      check_cuda(cub::DeviceRadixSort::SortKeys(temp_storage, temp_bytes, buffers, static_cast<int>(n), 0, 32, s.stream),
            "SortKeys");
      if (buffers.Current() != in) {
        check_cuda(cudaMemcpyAsync(in, buffers.Current(), n * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice, s.stream), "copy");
      }
    } else {
      check_cuda(cub::DeviceRadixSort::SortKeys(temp_storage, temp_bytes, in, out, static_cast<int>(n), 0, 32, s.stream),
            "SortKeys");
    }
    check_cuda(cudaStreamSynchronize(s.stream), "sync");
  }
}

}  // namespace

BENCHMARK(BM_PairArena)->Name("pair/arena")->Arg(64 << 10)->Arg(1 << 20)->Repetitions(5)->ReportAggregatesOnly(false);
BENCHMARK(BM_PairArenaHost)->Name("pair/arena_host")->Arg(64 << 10)->Arg(1 << 20)->Arg(4 << 20)->Arg(32 << 20)->Repetitions(5)->ReportAggregatesOnly(false);
BENCHMARK(BM_PairMallocAsync)->Name("pair/cudaMallocAsync")->Arg(64 << 10)->Arg(1 << 20)->Repetitions(5);
BENCHMARK(BM_PairMalloc)->Name("pair/cudaMalloc")->Arg(64 << 10)->Arg(1 << 20)->Repetitions(3);
BENCHMARK(BM_ThreadsArena)->Name("threads/arena")->RangeMultiplier(2)->Range(1, 16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadsArenaHost)->Name("threads/arena_host")->RangeMultiplier(2)->Range(1, 16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadsArenaNoRuns)->Name("threads/arena_no_runs")->RangeMultiplier(2)->Range(1, 16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadsArenaHostNoRuns)->Name("threads/arena_host_no_runs")->RangeMultiplier(2)->Range(1, 16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ThreadsMallocAsync)->Name("threads/cudaMallocAsync")->RangeMultiplier(2)->Range(1, 16)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceArena)->Name("trace/arena")->ArgName("page_MiB")->Arg(2)->Arg(8)->Arg(32)->Arg(64)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceArenaSmallTails)->Name("trace/arena_small_tails")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceArenaMaxLent)->Name("trace/arena_max_lent")->ArgName("permille")->Arg(50)->Arg(20)->Arg(10)->Arg(5)->Arg(0)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceArenaMaxLentTail)->Name("trace/arena_max_lent_tail")->ArgName("MiB")->Arg(16)->Arg(8)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceArenaMaxIdle)->Name("trace/arena_max_idle")->ArgName("percent")->Arg(0)->Arg(5)->Arg(20)->Arg(50)->Arg(100)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceArenaWholeChunks)->Name("trace/arena_whole_chunks")->ArgName("MiB")->Arg(2)->Arg(32)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TraceMallocAsync)->Name("trace/cudaMallocAsync")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortThrust<true>)->Name("sort/thrust_arena")->ArgName("page_MiB")->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortThrust<false>)->Name("sort/thrust_default")->Arg(0)->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortCub<true>)->Name("sort/cub_double_buffer_preallocated")->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SortCub<false>)->Name("sort/cub_preallocated")->Iterations(5)->Repetitions(3)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
