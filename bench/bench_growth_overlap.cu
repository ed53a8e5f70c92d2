// bench_growth_overlap: can a GrowableBuffer's growth steps run on a background thread without
// slowing the application thread's launches, and how much of growth does mapping ahead hide?
//
// A growth step is cuMemCreate + cuMemMap + cuMemSetAccess of one new chunk (here through cuvmm's
// PhysicalChunk and Mapping on the CudaBackend). Doing it ahead of need, on another thread, helps
// only if the driver does not make the application thread's cudaMemsetAsync launches wait behind
// those calls. Rows (each a median of `reps` repetitions, with min and max):
//  A  foreground alone: 1024 cudaMemsetAsync of 1 MiB into a cudaMalloc buffer, then a sync;
//  B  the same while a second thread makes growth steps of 256 MiB chunks;
//  C  as B with 2 MiB and with 1 GiB chunks;
//  D  the steps alone, for the same chunk sizes;
//  E  4 GiB reached in 64 MiB memsets: preallocated, growth in 288 MiB chunks on the application
//     thread, and the same chunks prepared one chunk ahead by a background thread.
//  F  GrowableStorage itself (its policy, default hide size) reached in memsets, 4 GiB in 64 MiB
//     and 1 GiB in 1 MiB: preallocated, map_ahead off, map_ahead on (the mapping thread prepares
//     the next step while the stream fills): total time over preallocated, the application
//     thread's time in growth steps, and how many prepared steps growth used.
// Chunks made during a foreground window are unmapped and released after it (the stream never
// uses them); in E, only after the stream has been synchronized. Background chunks are capped at
// 16 GiB per window, so the process stays below 20 GiB of device memory.
// Exit status: 0 done, 77 no CUDA device, 1 any error.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;
constexpr int reps = 7;
constexpr int launches = 1024;                      // rows A-C: memsets per window
constexpr std::size_t launch_bytes = MiB;           // rows A-C: bytes per memset
constexpr std::size_t background_cap = 16 * GiB;    // rows B-D: chunk bytes alive at once, at most

double us_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}

/// median, min and max of a sample.
struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}
void print_row(const char* row, const char* metric, const Stats& s, const char* unit) {
  std::printf("%-34s %-26s %11.1f %11.1f %11.1f  %s\n", row, metric, s.median, s.min, s.max, unit);
}

/// One growth step's parts, in microseconds.
struct StepTimes {
  double create = 0, map = 0, access = 0;
  double total() const { return create + map + access; }
};

/// Chunks mapped into one reserved range, side by side: the growth steps of a buffer.
/// Declared range first, so the mappings are destroyed (unmapped) before it is freed.
class GrowthRange {
 public:
  GrowthRange(cuvmm::Backend& backend, std::size_t size) : backend_(&backend), range_(backend, size) {}

  std::size_t mapped() const noexcept { return mapped_; }
  bool can_grow(std::size_t chunk) const noexcept { return range_.contains(mapped_, chunk); }
  void* base() const noexcept { return reinterpret_cast<void*>(range_.base()); }

  /// create + map + grant read-write access to device 0 of one more chunk at the end.
  StepTimes step(std::size_t chunk_bytes) {
    static constexpr cuvmm::AccessGrant grant{0, cuvmm::Access::read_write};
    StepTimes t;
    const auto t0 = Clock::now();
    cuvmm::PhysicalChunk chunk(*backend_, chunk_bytes);
    const auto t1 = Clock::now();
    cuvmm::Mapping mapping(range_, mapped_, chunk);
    const auto t2 = Clock::now();
    mapping.set_access({&grant, 1});
    const auto t3 = Clock::now();
    t.create = us_between(t0, t1);
    t.map = us_between(t1, t2);
    t.access = us_between(t2, t3);
    mapped_ += chunk_bytes;
    chunks_.push_back(std::move(chunk));
    mappings_.push_back(std::move(mapping));
    return t;
  }

  /// Unmaps and releases every chunk (the caller makes sure no queued work uses them).
  void release_all() noexcept {
    mappings_.clear();
    chunks_.clear();
    mapped_ = 0;
  }
  ~GrowthRange() { release_all(); }

 private:
  cuvmm::Backend* backend_;
  cuvmm::AddressRange range_;
  std::vector<cuvmm::PhysicalChunk> chunks_;
  std::vector<cuvmm::Mapping> mappings_;
  std::size_t mapped_ = 0;
};

/// What one foreground window measured.
struct Foreground {
  double loop_us = 0;   // host time of the launch loop
  double total_us = 0;  // launch loop + cudaStreamSynchronize
  double p99_us = 0;    // 99th percentile of one cudaMemsetAsync call
  double max_us = 0;    // slowest cudaMemsetAsync call
  Clock::time_point loop_start, loop_end;
};

Foreground run_foreground(void* buffer, cudaStream_t stream) {
  std::vector<double> per_launch(launches);
  Foreground f;
  f.loop_start = Clock::now();
  auto* bytes = static_cast<unsigned char*>(buffer);
  for (int i = 0; i < launches; ++i) {
    const auto a = Clock::now();
    check(cudaMemsetAsync(bytes + static_cast<std::size_t>(i) * launch_bytes, i & 0xff, launch_bytes, stream),
          "cudaMemsetAsync");
    per_launch[static_cast<std::size_t>(i)] = us_between(a, Clock::now());
  }
  f.loop_end = Clock::now();
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  f.total_us = us_between(f.loop_start, Clock::now());
  f.loop_us = us_between(f.loop_start, f.loop_end);
  f.p99_us = percentile(per_launch, 0.99);
  f.max_us = *std::max_element(per_launch.begin(), per_launch.end());
  return f;
}

/// What the background thread did during one window.
struct Background {
  int steps = 0;
  StepTimes sum;
  bool capped = false;  // stopped because background_cap was reached
  Clock::time_point last_end;
};

/// Makes steps of `chunk_bytes` into `range` until `stop` is set or the range is full.
void run_background(GrowthRange& range, std::size_t chunk_bytes, const std::atomic<bool>& stop,
                    std::atomic<bool>& started, Background& out, std::exception_ptr& error) {
  try {
    started.store(true);
    while (!stop.load(std::memory_order_relaxed)) {
      if (!range.can_grow(chunk_bytes)) {
        out.capped = true;
        break;
      }
      const StepTimes t = range.step(chunk_bytes);
      out.sum.create += t.create;
      out.sum.map += t.map;
      out.sum.access += t.access;
      ++out.steps;
      out.last_end = Clock::now();
    }
  } catch (...) {
    error = std::current_exception();
    started.store(true);
  }
}

void print_header() {
  std::printf("%-34s %-26s %11s %11s %11s\n", "row", "metric", "median", "min", "max");
}

/// Rows A (chunk_bytes == 0) and B/C: the foreground window, alone or beside background steps.
void foreground_rows(cuvmm::Backend& backend, void* buffer, cudaStream_t stream, std::size_t chunk_bytes,
                     const char* label) {
  std::vector<double> loop, total, p99, maxl, steps, step_us, create_us, map_us, access_us, covered;
  int capped = 0;
  for (int r = -1; r < reps; ++r) {  // r == -1: warm-up, not kept
    Foreground f;
    Background b;
    if (chunk_bytes == 0) {
      f = run_foreground(buffer, stream);
    } else {
      GrowthRange range(backend, background_cap);
      std::atomic<bool> stop{false}, started{false};
      std::exception_ptr error;
      std::thread worker(run_background, std::ref(range), chunk_bytes, std::cref(stop), std::ref(started),
                         std::ref(b), std::ref(error));
      while (!started.load()) std::this_thread::yield();
      try {
        f = run_foreground(buffer, stream);
      } catch (...) {
        stop.store(true);
        worker.join();
        throw;
      }
      stop.store(true);
      worker.join();
      if (error) std::rethrow_exception(error);
      range.release_all();  // off the timed path; the stream never used these chunks
    }
    if (r < 0) continue;
    loop.push_back(f.loop_us / 1000.0);
    total.push_back(f.total_us / 1000.0);
    p99.push_back(f.p99_us);
    maxl.push_back(f.max_us);
    if (chunk_bytes != 0) {
      steps.push_back(b.steps);
      const double n = std::max(b.steps, 1);
      step_us.push_back(b.sum.total() / n);
      create_us.push_back(b.sum.create / n);
      map_us.push_back(b.sum.map / n);
      access_us.push_back(b.sum.access / n);
      const auto busy_end = b.capped ? std::min(b.last_end, f.loop_end) : f.loop_end;
      covered.push_back(100.0 * std::max(0.0, us_between(f.loop_start, busy_end)) /
                        std::max(1e-9, us_between(f.loop_start, f.loop_end)));
      capped += b.capped ? 1 : 0;
    }
  }
  print_row(label, "launch loop", stats(loop), "ms");
  print_row(label, "loop + sync", stats(total), "ms");
  print_row(label, "p99 per launch", stats(p99), "us");
  print_row(label, "max per launch", stats(maxl), "us");
  if (chunk_bytes != 0) {
    print_row(label, "bg steps in window", stats(steps), "");
    print_row(label, "bg step mean", stats(step_us), "us");
    print_row(label, "  create", stats(create_us), "us");
    print_row(label, "  map", stats(map_us), "us");
    print_row(label, "  set_access", stats(access_us), "us");
    print_row(label, "loop covered by bg steps", stats(covered), "%");
    if (capped > 0) {
      std::printf("%-34s (the 16 GiB cap stopped the background thread in %d of %d windows)\n", label, capped,
                  reps);
    }
  }
}

/// Row D: `count` steps of `chunk_bytes` alone.
void steps_alone_row(cuvmm::Backend& backend, std::size_t chunk_bytes, int count, const char* label) {
  std::vector<double> step_us, create_us, map_us, access_us;
  for (int r = -1; r < reps; ++r) {
    GrowthRange range(backend, static_cast<std::size_t>(count) * chunk_bytes);
    StepTimes sum;
    for (int i = 0; i < count; ++i) {
      const StepTimes t = range.step(chunk_bytes);
      sum.create += t.create;
      sum.map += t.map;
      sum.access += t.access;
    }
    range.release_all();
    if (r < 0) continue;
    step_us.push_back(sum.total() / count);
    create_us.push_back(sum.create / count);
    map_us.push_back(sum.map / count);
    access_us.push_back(sum.access / count);
  }
  print_row(label, "step mean", stats(step_us), "us");
  print_row(label, "  create", stats(create_us), "us");
  print_row(label, "  map", stats(map_us), "us");
  print_row(label, "  set_access", stats(access_us), "us");
}

// Row E: 4 GiB in 64 MiB memsets.
constexpr std::size_t e_total = 4 * GiB;
constexpr std::size_t e_fill = 64 * MiB;
constexpr std::size_t e_chunk = 288 * MiB;
constexpr std::size_t e_range = ((e_total + e_chunk - 1) / e_chunk) * e_chunk;

/// (ii): each memset first grows the range on this thread until it covers the memset.
double e_growth_on_app_thread(cuvmm::Backend& backend, cudaStream_t stream, double& step_ms, int& step_count) {
  GrowthRange range(backend, e_range);
  auto* bytes = static_cast<unsigned char*>(range.base());
  step_ms = 0;
  step_count = 0;
  const auto t0 = Clock::now();
  for (std::size_t off = 0; off < e_total; off += e_fill) {
    while (range.mapped() < off + e_fill) {
      step_ms += range.step(e_chunk).total() / 1000.0;
      ++step_count;
    }
    check(cudaMemsetAsync(bytes + off, 1, e_fill, stream), "cudaMemsetAsync");
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const double ms = us_between(t0, Clock::now()) / 1000.0;
  range.release_all();  // the stream has finished with it
  return ms;
}

/// (iii): a background thread keeps the range one chunk ahead of what the memsets need; the
/// application thread waits only when the chunk it needs is not ready.
double e_growth_ahead(cuvmm::Backend& backend, cudaStream_t stream, double& wait_ms, int& waits) {
  GrowthRange range(backend, e_range);
  auto* bytes = static_cast<unsigned char*>(range.base());
  std::mutex m;
  std::condition_variable cv;
  std::size_t wanted = 0, ready = 0;  // guarded by m
  bool done = false;
  std::exception_ptr error;
  wait_ms = 0;
  waits = 0;
  const auto t0 = Clock::now();
  std::thread worker([&] {
    try {
      for (;;) {
        {
          std::unique_lock lock(m);
          cv.wait(lock, [&] { return done || ready < wanted; });
          if (done) return;
        }
        range.step(e_chunk);  // only this thread touches the range until it is joined
        {
          std::lock_guard lock(m);
          ready = range.mapped();
        }
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(m);
      error = std::current_exception();
      done = true;
      cv.notify_all();
    }
  });
  auto finish = [&] {
    {
      std::lock_guard lock(m);
      done = true;
    }
    cv.notify_all();
    worker.join();
  };
  try {
    for (std::size_t off = 0; off < e_total; off += e_fill) {
      const std::size_t need = off + e_fill;
      {
        std::unique_lock lock(m);
        const std::size_t ahead = std::min(e_range, ((need + e_chunk - 1) / e_chunk + 1) * e_chunk);
        if (wanted < ahead) {
          wanted = ahead;
          cv.notify_all();
        }
        if (ready < need) {
          ++waits;
          const auto w0 = Clock::now();
          cv.wait(lock, [&] { return ready >= need || error; });
          wait_ms += us_between(w0, Clock::now()) / 1000.0;
          if (error) break;
        }
      }
      check(cudaMemsetAsync(bytes + off, 1, e_fill, stream), "cudaMemsetAsync");
    }
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  } catch (...) {
    finish();
    cudaStreamSynchronize(stream);  // the first error is the one reported; the chunks go after the stream
    throw;
  }
  const double ms = us_between(t0, Clock::now()) / 1000.0;
  finish();
  if (error) std::rethrow_exception(error);
  range.release_all();  // the stream has finished with it
  return ms;
}

void growth_rows(cuvmm::Backend& backend, cudaStream_t stream) {
  void* pre = nullptr;
  check(cudaMalloc(&pre, e_total), "cudaMalloc(4 GiB)");
  std::vector<double> t1, t2, t3, steps2, nsteps2, wait3, waits3, r21, r31;
  try {
    for (int r = -1; r < reps; ++r) {
      const auto a = Clock::now();
      for (std::size_t off = 0; off < e_total; off += e_fill) {
        check(cudaMemsetAsync(static_cast<unsigned char*>(pre) + off, 1, e_fill, stream), "cudaMemsetAsync");
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const double pre_ms = us_between(a, Clock::now()) / 1000.0;
      double step_ms = 0, wait_ms = 0;
      int step_count = 0, wait_count = 0;
      const double app_ms = e_growth_on_app_thread(backend, stream, step_ms, step_count);
      const double ahead_ms = e_growth_ahead(backend, stream, wait_ms, wait_count);
      if (r < 0) continue;
      t1.push_back(pre_ms);
      t2.push_back(app_ms);
      t3.push_back(ahead_ms);
      steps2.push_back(step_ms);
      nsteps2.push_back(step_count);
      wait3.push_back(wait_ms);
      waits3.push_back(wait_count);
      r21.push_back(app_ms / pre_ms);
      r31.push_back(ahead_ms / pre_ms);
    }
  } catch (...) {
    cudaFree(pre);
    throw;
  }
  check(cudaFree(pre), "cudaFree");
  print_row("E(i)   4 GiB/64 MiB preallocated", "total", stats(t1), "ms");
  print_row("E(ii)  288 MiB steps on app thread", "total", stats(t2), "ms");
  print_row("E(ii)", "host time in steps", stats(steps2), "ms");
  print_row("E(ii)", "steps", stats(nsteps2), "");
  print_row("E(iii) 288 MiB steps one ahead (bg)", "total", stats(t3), "ms");
  print_row("E(iii)", "app thread waiting", stats(wait3), "ms");
  print_row("E(iii)", "waits", stats(waits3), "");
  print_row("E", "(ii)/(i) per rep", stats(r21), "x");
  print_row("E", "(iii)/(i) per rep", stats(r31), "x");
  const double m1 = stats(t1).median;
  std::printf("%-34s %-26s %11.2f\n", "E", "median(ii)/median(i)", stats(t2).median / m1);
  std::printf("%-34s %-26s %11.2f\n", "E", "median(iii)/median(i)", stats(t3).median / m1);
}

/// F: GrowableStorage grown to `total` in memsets of `fill`, each reserve() right before its memset;
/// the storage's range is reserved before the clock starts and released after it stops.
double f_growable(cuvmm::Backend& backend, cudaStream_t stream, std::size_t total, std::size_t fill,
                  cuvmm::MapAhead map_ahead, cuvmm::GrowableStats& stats) {
  cuvmm::GrowableOptions options;
  options.max_capacity_bytes = total;
  options.map_ahead = map_ahead;
  cuvmm::GrowableStorage storage(backend, options);
  const auto a = Clock::now();
  for (std::size_t off = 0; off < total; off += fill) {
    storage.reserve(off + fill);
    check(cudaMemsetAsync(reinterpret_cast<unsigned char*>(storage.data()) + off, 1, fill, stream), "cudaMemsetAsync");
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  const double ms = us_between(a, Clock::now()) / 1000.0;
  storage.settle_step_ahead();
  stats = storage.stats();
  return ms;
}

void growable_rows(cuvmm::Backend& backend, cudaStream_t stream, std::size_t total, std::size_t fill,
                   const char* label) {
  void* pre = nullptr;
  check(cudaMalloc(&pre, total), "cudaMalloc");
  std::vector<double> t_pre, t_off, t_on, r_off, r_on, steps_off, steps_on, used_on;
  try {
    for (int r = -1; r < reps; ++r) {
      const auto a = Clock::now();
      for (std::size_t off = 0; off < total; off += fill) {
        check(cudaMemsetAsync(static_cast<unsigned char*>(pre) + off, 1, fill, stream), "cudaMemsetAsync");
      }
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      const double pre_ms = us_between(a, Clock::now()) / 1000.0;
      cuvmm::GrowableStats off_stats, on_stats;
      const double off_ms = f_growable(backend, stream, total, fill, cuvmm::MapAhead::off, off_stats);
      const double on_ms = f_growable(backend, stream, total, fill, cuvmm::MapAhead::on, on_stats);
      if (r < 0) continue;
      t_pre.push_back(pre_ms);
      t_off.push_back(off_ms);
      t_on.push_back(on_ms);
      r_off.push_back(off_ms / pre_ms);
      r_on.push_back(on_ms / pre_ms);
      steps_off.push_back(1e-6 * static_cast<double>(off_stats.growth_nanoseconds));
      steps_on.push_back(1e-6 * static_cast<double>(on_stats.growth_nanoseconds));
      used_on.push_back(static_cast<double>(on_stats.prepared_used));
    }
  } catch (...) {
    cudaFree(pre);
    throw;
  }
  check(cudaFree(pre), "cudaFree");
  const std::string row = std::string("F  ") + label;
  print_row(row.c_str(), "preallocated total", stats(t_pre), "ms");
  print_row(row.c_str(), "map_ahead off total", stats(t_off), "ms");
  print_row(row.c_str(), "map_ahead on total", stats(t_on), "ms");
  print_row(row.c_str(), "off / preallocated per rep", stats(r_off), "x");
  print_row(row.c_str(), "on / preallocated per rep", stats(r_on), "x");
  print_row(row.c_str(), "off: app thread in steps", stats(steps_off), "ms");
  print_row(row.c_str(), "on: app thread in steps", stats(steps_on), "ms");
  print_row(row.c_str(), "on: prepared steps used", stats(used_on), "");
}

int run() {
  int devices = 0;
  const cudaError_t probe = cudaGetDeviceCount(&devices);
  if (probe != cudaSuccess || devices == 0) {
    std::printf("no CUDA device (cudaGetDeviceCount: %s); nothing measured\n",
                probe != cudaSuccess ? cudaGetErrorName(probe) : "0 devices");
    return 77;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "cudaFree(nullptr) (context creation)");
  cuvmm::CudaBackend& backend = cuvmm::cuda_backend(0);
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("device 0: %s; granularity %zu KiB; %d repetitions per row (after 1 warm-up)\n", prop.name,
              backend.granularity({}) / 1024, reps);

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  void* buffer = nullptr;
  try {
    check(cudaMalloc(&buffer, static_cast<std::size_t>(launches) * launch_bytes), "cudaMalloc(1 GiB)");
    print_header();
    foreground_rows(backend, buffer, stream, 0, "A  fg alone 1024 x 1 MiB");
    foreground_rows(backend, buffer, stream, 256 * MiB, "B  fg + bg steps 256 MiB");
    foreground_rows(backend, buffer, stream, 2 * MiB, "C  fg + bg steps 2 MiB");
    foreground_rows(backend, buffer, stream, GiB, "C  fg + bg steps 1 GiB");
    steps_alone_row(backend, 2 * MiB, 64, "D  steps alone 2 MiB (64)");
    steps_alone_row(backend, 256 * MiB, 32, "D  steps alone 256 MiB (32)");
    steps_alone_row(backend, GiB, 12, "D  steps alone 1 GiB (12)");
    check(cudaFree(buffer), "cudaFree");
    buffer = nullptr;
    growth_rows(backend, stream);
    growable_rows(backend, stream, 4 * GiB, 64 * MiB, "4 GiB in 64 MiB");
    growable_rows(backend, stream, GiB, MiB, "1 GiB in 1 MiB");
  } catch (...) {
    if (buffer != nullptr) cudaFree(buffer);
    cudaStreamDestroy(stream);
    throw;
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  const cuvmm::LiveCounts live = backend.live_counts();
  if (live.chunks != 0 || live.mappings != 0 || live.ranges != 0) {
    std::fprintf(stderr, "leak: %zu ranges, %zu chunks, %zu mappings still live\n", live.ranges, live.chunks,
                 live.mappings);
    return 1;
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_growth_overlap: %s\n", e.what());
    return 1;
  }
}
