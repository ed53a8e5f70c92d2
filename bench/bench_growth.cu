// Growth benchmark: a buffer grows to a target size in 64 MiB appends, each append filled on the
// device, with four strategies side by side in one run:
//   growable      cuvmm::GrowableBuffer (maps chunks behind the end; copies nothing)
//   copy_and_grow cudaMalloc doubling: allocate 2x, copy, free the old buffer
//   thrust_vector thrust::device_vector::resize (its own growth, copies, value-initializes)
//   preallocated  the same fills into one buffer allocated up front: the physical limit
// Timed window: the appends and their fills, ended by a stream synchronization. Teardown (freeing
// the buffer) is timed on its own and reported as the teardown_ms counter. Peak memory is the
// device memory in use (cudaMemGetInfo) minus the baseline before the run, sampled after every
// append and also inside a copy-and-grow step, after the new buffer is allocated and before the old
// one is freed (for thrust::device_vector, through its allocator), since a sample after the append
// would miss that transient. It is measured in a separate, untimed pass so that sampling does not
// perturb the timing.
// BM_Reach grows each strategy in 64 MiB appends until the device refuses, and reports the size
// reached as a fraction of the memory free at the start.
#include <benchmark/benchmark.h>

#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include <cuvmm/growable_buffer.hpp>

#include "bench_support.hpp"

namespace {

using cuvmm::bench::Stream;
using cuvmm::bench::check;
using cuvmm::bench::device_memory_free;
using cuvmm::bench::device_memory_in_use;

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;
constexpr std::size_t append_bytes = 64 * MiB;

__global__ void fill_kernel(uint4* out, std::size_t words, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < words; i += std::size_t{gridDim.x} * blockDim.x) {
    auto const x = static_cast<std::uint32_t>(i) * 2654435761u + seed;
    out[i] = make_uint4(x, x ^ 0x9E3779B9u, x + 1, ~x);
  }
}

/// Fills [data, data + bytes) with a pattern, ordered on `stream` (bytes is a multiple of 16).
void fill(void* data, std::size_t bytes, cudaStream_t stream) {
  std::size_t const words = bytes / sizeof(uint4);
  unsigned const blocks = static_cast<unsigned>(std::min<std::size_t>((words + 255) / 256, 132 * 16));
  fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<uint4*>(data), words, 12345u);
  check(cudaGetLastError(), "fill_kernel");
}

/// The most device memory in use seen by sample_peak() since reset_peak().
std::size_t peak_in_use = 0;
bool sampling = false;
void reset_peak(bool enable) {
  peak_in_use = 0;
  sampling = enable;
}
void sample_peak() {
  if (sampling) peak_in_use = std::max(peak_in_use, device_memory_in_use());
}

// --- the strategies: each grows by `append_bytes` and returns where the new bytes start ---------

struct Growable {
  explicit Growable(cudaStream_t s) : buffer(cuvmm::GrowableOptions{}, s) {}
  std::uint8_t* append(std::size_t bytes) {
    std::size_t const old = buffer.size();
    buffer.resize(old + bytes);
    return buffer.data() + old;
  }
  cuvmm::GrowableBuffer<std::uint8_t> buffer;
};

struct CopyAndGrow {
  explicit CopyAndGrow(cudaStream_t s) : stream(s) {}
  CopyAndGrow(const CopyAndGrow&) = delete;
  ~CopyAndGrow() { cudaFree(data); }
  std::uint8_t* append(std::size_t bytes) {
    if (size + bytes > capacity) {
      std::size_t const new_capacity = std::max(size + bytes, 2 * capacity);
      void* fresh = nullptr;
      if (cudaMalloc(&fresh, new_capacity) != cudaSuccess) {
        (void)cudaGetLastError();
        throw std::bad_alloc();
      }
      sample_peak();  // old and new buffer both held: the transient a per-append sample misses
      if (size != 0) check(cudaMemcpyAsync(fresh, data, size, cudaMemcpyDeviceToDevice, stream), "copy");
      check(cudaFree(data), "cudaFree");  // synchronizes: the copy is done before the old buffer goes
      data = static_cast<std::uint8_t*>(fresh);
      capacity = new_capacity;
      bytes_copied += size;
    }
    std::uint8_t* out = data + size;
    size += bytes;
    return out;
  }
  cudaStream_t stream;
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
  std::size_t capacity = 0;
  std::size_t bytes_copied = 0;
};

/// thrust's device allocator, sampling memory in use after each allocation (resize holds the old
/// and the new storage at once while it copies).
struct SamplingAllocator : thrust::device_allocator<std::uint8_t> {
  using Base = thrust::device_allocator<std::uint8_t>;
  template <class U>
  struct rebind {
    using other = SamplingAllocator;
  };
  Base::pointer allocate(std::size_t n) {
    Base::pointer p = Base::allocate(n);
    sample_peak();
    return p;
  }
};

struct ThrustVector {
  explicit ThrustVector(cudaStream_t) {}
  std::uint8_t* append(std::size_t bytes) {
    std::size_t const old = vector.size();
    vector.resize(old + bytes);
    return thrust::raw_pointer_cast(vector.data()) + old;
  }
  thrust::device_vector<std::uint8_t, SamplingAllocator> vector;
};

struct Preallocated {
  explicit Preallocated(cudaStream_t, std::size_t capacity) {
    void* p = nullptr;
    if (cudaMalloc(&p, capacity) != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::bad_alloc();
    }
    data = static_cast<std::uint8_t*>(p);
  }
  Preallocated(const Preallocated&) = delete;
  ~Preallocated() { cudaFree(data); }
  std::uint8_t* append(std::size_t bytes) {
    std::uint8_t* out = data + size;
    size += bytes;
    return out;
  }
  std::uint8_t* data = nullptr;
  std::size_t size = 0;
};

template <class Strategy>
std::unique_ptr<Strategy> make(cudaStream_t stream, std::size_t target) {
  if constexpr (std::is_same_v<Strategy, Preallocated>) {
    return std::make_unique<Preallocated>(stream, target);
  } else {
    return std::make_unique<Strategy>(stream);
  }
}

/// Between iterations in one process. The driver completes large frees lazily: on the H200 the
/// first cuMemCreate after an iteration's 64 GiB were released took 13-26 ms, even after this
/// pause (seen on 2026-11-29 by timing every cuMemCreate of bench_driver_calls' growth_steps), and
/// a small allocation made to pay it early only spread the cost over later creates (7 ms each,
/// every few GiB). So iterations after the first in a process carry part of the previous
/// teardown; fresh-process runs (CUVMM_BENCH_ITERATIONS=1, as scripts/h200-run.sh does) do not.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(500)); }

/// Iterations of each growth benchmark: CUVMM_BENCH_ITERATIONS, else 5. With 1, and one benchmark
/// per process (scripts/h200-run.sh does this), the timed growth is the first in its process, so it
/// pays no lazy completion of earlier frees (see settle()).
int iterations_from_environment() {
  char const* value = std::getenv("CUVMM_BENCH_ITERATIONS");
  int const n = value != nullptr ? std::atoi(value) : 0;
  return n > 0 ? n : 5;
}

/// Context, driver entry points and the fill kernel ready before anything is timed.
void warm_up(cudaStream_t stream) {
  (void)cuvmm::cuda_backend(0);
  void* p = nullptr;
  check(cudaMalloc(&p, 2 * MiB), "cudaMalloc (warm-up)");
  fill(p, 2 * MiB, stream);
  check(cudaStreamSynchronize(stream), "sync");
  check(cudaFree(p), "cudaFree (warm-up)");
}

template <class Strategy>
void BM_Grow(benchmark::State& state) {
  std::size_t const target = static_cast<std::size_t>(state.range(0)) * GiB;
  Stream s;
  warm_up(s.stream);

  double teardown_seconds = 0;
  double growth_seconds = 0;  // host time inside GrowableBuffer's growth steps (driver calls)
  for (auto _ : state) {
    std::unique_ptr<Strategy> strategy;
    if constexpr (std::is_same_v<Strategy, Preallocated>) strategy = make<Strategy>(s.stream, target);
    auto const start = std::chrono::steady_clock::now();
    if constexpr (!std::is_same_v<Strategy, Preallocated>) strategy = make<Strategy>(s.stream, target);
    for (std::size_t size = 0; size < target; size += append_bytes) {
      fill(strategy->append(append_bytes), append_bytes, s.stream);
    }
    check(cudaStreamSynchronize(s.stream), "sync");
    auto const grown = std::chrono::steady_clock::now();
    if constexpr (std::is_same_v<Strategy, Growable>) {
      growth_seconds += 1e-9 * static_cast<double>(strategy->buffer.stats().growth_nanoseconds);
    }
    strategy.reset();
    check(cudaDeviceSynchronize(), "sync");
    auto const torn_down = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(grown - start).count());
    teardown_seconds += std::chrono::duration<double>(torn_down - grown).count();
    settle();
  }

  // Untimed pass after the timed ones: peak device memory in use while growing.
  double peak_ratio = 0;
  {
    std::size_t const baseline = device_memory_in_use();
    reset_peak(true);
    auto strategy = make<Strategy>(s.stream, target);
    for (std::size_t size = 0; size < target; size += append_bytes) {
      fill(strategy->append(append_bytes), append_bytes, s.stream);
      sample_peak();
    }
    check(cudaStreamSynchronize(s.stream), "sync");
    peak_ratio = static_cast<double>(peak_in_use - baseline) / static_cast<double>(target);
    reset_peak(false);
  }

  state.counters["size_GiB"] = static_cast<double>(target) / GiB;
  state.counters["peak_over_size"] = peak_ratio;
  state.counters["teardown_ms"] = 1e3 * teardown_seconds / static_cast<double>(state.iterations());
  if constexpr (std::is_same_v<Strategy, Growable>) {
    state.counters["growth_calls_ms"] = 1e3 * growth_seconds / static_cast<double>(state.iterations());
  }
  state.counters["GiB_per_s"] =
      benchmark::Counter(static_cast<double>(target) / GiB, benchmark::Counter::kIsIterationInvariantRate);
}

template <class Strategy>
void BM_Reach(benchmark::State& state) {
  Stream s;
  for (auto _ : state) {
    check(cudaDeviceSynchronize(), "sync");
    settle();
    std::size_t const free_at_start = device_memory_free();
    std::size_t reached = 0;
    if constexpr (std::is_same_v<Strategy, Preallocated>) {
      // The largest single cudaMalloc, found by bisection in 64 MiB steps.
      std::size_t lo = 0, hi = free_at_start / append_bytes + 1;
      while (hi - lo > 1) {
        std::size_t const mid = (lo + hi) / 2;
        void* p = nullptr;
        if (cudaMalloc(&p, mid * append_bytes) == cudaSuccess) {
          cudaFree(p);
          lo = mid;
        } else {
          (void)cudaGetLastError();
          hi = mid;
        }
      }
      reached = lo * append_bytes;
    } else {
      auto strategy = make<Strategy>(s.stream, 0);
      try {
        for (;;) {
          fill(strategy->append(append_bytes), append_bytes, s.stream);
          reached += append_bytes;
        }
      } catch (const std::bad_alloc&) {
      } catch (const std::runtime_error&) {  // thrust reports some failures this way
        (void)cudaGetLastError();
      }
      check(cudaStreamSynchronize(s.stream), "sync");
    }
    state.counters["reached_GiB"] = static_cast<double>(reached) / GiB;
    state.counters["reached_over_free"] = static_cast<double>(reached) / static_cast<double>(free_at_start);
  }
}

}  // namespace

/// Registers one strategy: growth to each size given (GiB), and its reach.
template <class Strategy>
void register_growth(const char* label, std::initializer_list<std::int64_t> sizes_gib) {
  auto* grow = benchmark::RegisterBenchmark((std::string("grow/") + label).c_str(), BM_Grow<Strategy>);
  for (std::int64_t size : sizes_gib) grow->Arg(size);
  grow->UseManualTime()->Unit(benchmark::kMillisecond)->Iterations(iterations_from_environment());
  benchmark::RegisterBenchmark((std::string("reach/") + label).c_str(), BM_Reach<Strategy>)
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

// Copy-and-grow and thrust::device_vector cannot hold 120 GiB on a 141 GB device (they stop at 64
// GiB); the VMM buffer and the preallocated limit can.
int const registered = [] {
  register_growth<Growable>("growable", {16, 64, 120});
  register_growth<CopyAndGrow>("copy_and_grow", {16, 64});
  register_growth<ThrustVector>("thrust_vector", {16, 64});
  register_growth<Preallocated>("preallocated", {16, 64, 120});
  return 0;
}();

BENCHMARK_MAIN();
