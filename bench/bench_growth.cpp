// Growth benchmark: Google Benchmark's front end to cuvmm-plan's growth measurement
// (tools/cuvmm-plan/measure.hpp and device_runtime.hpp), so that the benchmark and the tool time
// the same code. A buffer grows to a target size in appends of a fixed size, each append filled on
// the device (cudaMemsetAsync on one stream), with every strategy cuvmm-plan knows side by side:
//   growable                      cuvmm's GrowableStorage, its real growth policy (copies nothing)
//   growable_no_map_ahead         the same with GrowableOptions::map_ahead off: every step on the
//                                 appending thread (the default prepares the next one ahead)
//   growable_fixed_chunks         the same with every chunk one granule (2 MiB)
//   cudaMalloc_copy_grow_2x/1.5x  cudaMalloc a larger buffer, copy, wait, cudaFree the old one
//   cudaMallocAsync_copy_grow_2x  the same, stream-ordered, from the default pool, no host wait
//   thrust_device_vector          thrust::device_vector::resize (value-initializes, copies)
//   preallocated                  one cudaMalloc made before the clock starts: the physical limit
// for each growth of cuvmm-plan's full profile (256 MiB to 120 GiB in appends of 4 KiB, 1 MiB,
// 64 MiB, 1 GiB: plan::device_growth_cases()). Timed: the appends and their fills, ended by a
// stream synchronization (measure_growth). Counters: p99 host time per append, peak device memory
// in use over the size (from an untimed second pass), bytes copied, chunks or allocations made,
// size reached, whether it completed, and the teardown time. Reach (how far each strategy grows
// before the device refuses) is cuvmm-plan's reach run and bench_growth's reach/ benchmarks.
//
// The driver finishes large frees lazily, at later allocations: a growth timed after another in
// the same process pays for part of the other's teardown. Run one benchmark per process with
// CUVMM_BENCH_ITERATIONS=1 (as cuvmm-plan does) for numbers that do not.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>

#include "device_runtime.hpp"
#include "measure.hpp"

namespace {

using namespace cuvmm::plan;
using cuvmm::GiB;
using cuvmm::MiB;

/// One session (stream, warmed-up runtime) for the whole program.
DeviceRuntimeSession& session() {
  static DeviceRuntimeSession instance;
  return instance;
}

/// Between iterations: half a second for the driver to finish the previous teardown's frees
/// (grow/growable/120GiB/64MiB on an H200: 1.99x the preallocated time without this pause, 1.06x
/// with it).
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(500)); }

/// Iterations of each growth benchmark: CUVMM_BENCH_ITERATIONS, else 3.
int iterations_from_environment() {
  char const* value = std::getenv("CUVMM_BENCH_ITERATIONS");
  int const n = value != nullptr ? std::atoi(value) : 0;
  return n > 0 ? n : 3;
}

/// The row beside `growable` that shows what mapping ahead gains; the others are cuvmm-plan's.
constexpr const char* no_map_ahead_name = "growable_no_map_ahead";

std::unique_ptr<GrowthStrategy> make_strategy(const std::string& strategy, cuvmm::Backend& backend,
                                              DeviceRuntimeSession& device, std::size_t target_bytes) {
  if (strategy == no_map_ahead_name) {
    cuvmm::GrowableOptions options;
    options.map_ahead = cuvmm::MapAhead::off;
    return make_growable_strategy(backend, options);
  }
  return make_growth_strategy(strategy, backend, &device, target_bytes);
}

std::vector<std::string> strategy_names() {
  std::vector<std::string> names = growth_strategy_names(true);
  auto const growable = std::find(names.begin(), names.end(), growable_policy_name);
  names.insert(growable == names.end() ? names.end() : growable + 1, no_map_ahead_name);
  return names;
}

void grow(benchmark::State& state, const std::string& strategy, GrowthCase growth) {
  DeviceRuntimeSession& device = session();
  cuvmm::Backend& backend = cuvmm::cuda_backend(0);
  auto const make = [&] { return make_strategy(strategy, backend, device, growth.target_bytes); };
  GrowthRow row;
  double teardown_seconds = 0;
  for (auto _ : state) {
    settle();
    std::unique_ptr<GrowthStrategy> buffer;
    try {
      buffer = make();  // outside the clock: only the preallocated buffer allocates here
    } catch (const std::bad_alloc&) {
      state.SkipWithError("the preallocated buffer does not fit on this device");
      return;
    }
    row = measure_growth(strategy, *buffer, growth.target_bytes, growth.append_bytes, device.memory_ops());
    state.SetIterationTime(row.total_seconds);
    auto const torn = std::chrono::steady_clock::now();
    buffer.reset();
    device.synchronize_device();
    teardown_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - torn).count();
  }
  settle();
  std::size_t const peak_in_use = measure_peak_in_use(make, growth.target_bytes, growth.append_bytes, device.memory_ops());
  device.synchronize_device();

  auto const gib = [](std::size_t bytes) { return static_cast<double>(bytes) / GiB; };
  state.counters["size_GiB"] = gib(growth.target_bytes);
  state.counters["append_bytes"] = static_cast<double>(growth.append_bytes);
  state.counters["completed"] = row.status == "ok" ? 1 : 0;  // 0: out of memory on the way
  state.counters["reached_GiB"] = gib(row.reached_bytes);
  state.counters["p99_append_us"] = row.p99_append_us;
  state.counters["peak_over_size"] = static_cast<double>(peak_in_use) / static_cast<double>(growth.target_bytes);
  state.counters["copied_GiB"] = gib(row.bytes_copied);
  state.counters["chunks"] = static_cast<double>(row.chunks);
  state.counters["growth_calls_ms"] = 1e3 * row.growth_seconds;
  state.counters["teardown_ms"] = 1e3 * teardown_seconds / static_cast<double>(state.iterations());
}

/// How far a growable buffer (real policy) grows before the device refuses, in 1 GiB steps.
void reach(benchmark::State& state) {
  for (auto _ : state) {
    Reach const r = measure_reach(cuvmm::cuda_backend(0), 1 * GiB);
    state.counters["reached_GiB"] = static_cast<double>(r.reached_bytes) / GiB;
    state.counters["reached_over_free"] = static_cast<double>(r.reached_bytes) / static_cast<double>(r.free_at_start);
  }
}

/// A size in a benchmark name: the tools' "64 MiB" without its space ("64MiB").
std::string label(std::size_t bytes) {
  std::string text = cuvmm::format_bytes(bytes);
  std::erase(text, ' ');
  return text;
}

int const registered = [] {
  for (std::string const& strategy : strategy_names()) {
    for (GrowthCase const growth : device_growth_cases()) {
      std::string const name = "grow/" + strategy + "/" + label(growth.target_bytes) + "/" + label(growth.append_bytes);
      benchmark::RegisterBenchmark(name.c_str(), grow, strategy, growth)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(iterations_from_environment());
    }
  }
  benchmark::RegisterBenchmark("reach/growable", reach)->Iterations(1)->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
