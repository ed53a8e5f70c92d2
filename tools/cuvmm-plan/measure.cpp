// measure.cpp: the backend-generic measurements of cuvmm-plan (see measure.hpp). Timings are host
// clock intervals around exactly the calls named; nothing else (sampling, bookkeeping) is inside.
#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <latch>
#include <new>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <cuvmm/address_range.hpp>
#include <cuvmm/error.hpp>

namespace cuvmm::plan {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

template <class F>
double timed(F&& f) {
  auto const start = clock_type::now();
  f();
  return seconds_since(start);
}

class GrowableStrategy final : public GrowthStrategy {
 public:
  GrowableStrategy(Backend& backend, GrowableOptions options) : storage_(backend, std::move(options)) {}
  void* append(std::size_t bytes) override {
    if (bytes > storage_.max_capacity() - size_) throw CapacityExceeded(size_ + bytes, storage_.max_capacity());
    storage_.reserve(size_ + bytes);
    void* const out = reinterpret_cast<std::byte*>(storage_.data()) + size_;
    size_ += bytes;
    return out;
  }
  std::size_t peak_bytes() const override { return storage_.stats().peak_capacity_bytes; }
  std::size_t chunks() const override { return storage_.stats().chunks_created; }
  double growth_seconds() const override { return 1e-9 * static_cast<double>(storage_.stats().growth_nanoseconds); }

 private:
  GrowableStorage storage_;
  std::size_t size_ = 0;
};

class ArenaAllocator final : public TraceAllocator {
 public:
  ArenaAllocator(Backend& backend, ArenaOptions options) : arena_(backend, std::move(options)) {}
  void* allocate(std::size_t bytes) override {
    try {
      return arena_.allocate(bytes);
    } catch (const OutOfMemory&) {
      return nullptr;
    }
  }
  void deallocate(void* p, std::size_t bytes) override { arena_.deallocate(p, bytes); }
  std::size_t held_bytes() override { return arena_.physical().bytes; }
  std::optional<std::size_t> exact_peak_held_bytes() override { return arena_.stats().bytes_physical.peak; }
  std::optional<ArenaStats> arena_stats() const override { return arena_.stats(); }

 private:
  Arena arena_;
};

}  // namespace

double percentile_us(std::vector<double> seconds_samples, double p) {
  if (seconds_samples.empty()) return 0;
  std::sort(seconds_samples.begin(), seconds_samples.end());
  // Nearest rank: the smallest sample with at least p% of the samples at or below it.
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(seconds_samples.size())));
  rank = std::clamp<std::size_t>(rank, 1, seconds_samples.size());
  return 1e6 * seconds_samples[rank - 1];
}

LatencyStats latency_stats(const std::vector<double>& seconds_samples) {
  return {percentile_us(seconds_samples, 50), percentile_us(seconds_samples, 99), seconds_samples.size(),
          percentile_us(seconds_samples, 100)};
}

std::string tail_text(const LatencyStats& stats) {
  char text[96] = {};
  if (stats.has_p99()) {
    std::snprintf(text, sizeof text, "p99 %.3g us", stats.p99_us);
  } else {
    std::snprintf(text, sizeof text, "max of %zu: %.3g us", stats.samples, stats.max_us);
  }
  return text;
}

double DriverCallRow::ms_per_gib() const {
  if (chunk_bytes == 0) return 0;
  double const us = create.median_us + map.median_us + set_access.median_us + unmap.median_us + release.median_us;
  return us / 1e3 * static_cast<double>(GiB) / static_cast<double>(chunk_bytes);
}

std::unique_ptr<GrowthStrategy> make_growable_strategy(Backend& backend, GrowableOptions options) {
  return std::make_unique<GrowableStrategy>(backend, std::move(options));
}

std::unique_ptr<TraceAllocator> make_arena_allocator(Backend& backend, ArenaOptions options) {
  return std::make_unique<ArenaAllocator>(backend, std::move(options));
}

std::vector<GrowthCase> device_growth_cases() {
  return {{256 * MiB, 4 * KiB}, {1 * GiB, 1 * MiB},   {8 * GiB, 1 * MiB},    {4 * GiB, 64 * MiB},
          {8 * GiB, 64 * MiB},  {64 * GiB, 64 * MiB}, {120 * GiB, 64 * MiB}, {8 * GiB, 1 * GiB},
          {64 * GiB, 1 * GiB},  {120 * GiB, 1 * GiB}};
}

GrowthRow median_run(std::vector<GrowthRow> runs) {
  if (runs.empty()) throw_invalid_argument("median_run", "no runs");
  for (auto const& run : runs) {
    if (run.strategy != runs.front().strategy || run.target_bytes != runs.front().target_bytes ||
        run.append_bytes != runs.front().append_bytes) {
      throw_invalid_argument("median_run", "runs of different growths: " + runs.front().strategy + " and " +
                                               run.strategy);
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](GrowthRow const& a, GrowthRow const& b) { return a.total_seconds < b.total_seconds; });
  GrowthRow row = runs[(runs.size() - 1) / 2];
  row.runs = runs.size();
  row.min_total_seconds = runs.front().total_seconds;
  row.max_total_seconds = runs.back().total_seconds;
  return row;
}

GrowthRow measure_growth(std::string name, GrowthStrategy& strategy, std::size_t target_bytes,
                         std::size_t append_bytes, MemoryOps& ops) {
  if (append_bytes == 0) throw_invalid_argument("measure_growth", "appends of 0 bytes never reach a size");
  GrowthRow row;
  row.strategy = std::move(name);
  row.target_bytes = target_bytes;
  row.append_bytes = append_bytes;
  row.status = "ok";
  std::vector<double> append_seconds;
  append_seconds.reserve(target_bytes / append_bytes + 1);
  auto const start = clock_type::now();
  try {
    while (row.reached_bytes < target_bytes) {
      std::size_t const bytes = std::min(append_bytes, target_bytes - row.reached_bytes);
      auto const append_start = clock_type::now();
      ops.fill(strategy.append(bytes), bytes);
      append_seconds.push_back(seconds_since(append_start));
      row.reached_bytes += bytes;
    }
  } catch (const CapacityExceeded&) {
    row.status = "capacity_exceeded";
  } catch (const std::bad_alloc&) {  // cuvmm::OutOfMemory is one
    row.status = "out_of_memory";
  }
  ops.finish();
  row.total_seconds = seconds_since(start);
  row.appends = append_seconds.size();
  row.p99_append_us = percentile_us(std::move(append_seconds), 99);
  row.peak_bytes = strategy.peak_bytes();
  row.bytes_copied = strategy.bytes_copied();
  row.chunks = strategy.chunks();
  row.growth_seconds = strategy.growth_seconds();
  row.min_total_seconds = row.max_total_seconds = row.total_seconds;
  return row;
}

std::size_t measure_peak_in_use(const std::function<std::unique_ptr<GrowthStrategy>()>& make, std::size_t target_bytes,
                                std::size_t append_bytes, MemoryOps& ops) {
  if (append_bytes == 0) throw_invalid_argument("measure_peak_in_use", "appends of 0 bytes never reach a size");
  ops.finish();
  std::optional<std::size_t> const baseline = ops.memory_in_use();
  if (!baseline) return 0;
  std::size_t peak = *baseline;
  auto sample = [&] { peak = std::max(peak, ops.memory_in_use().value_or(0)); };
  // Declared outside the try: a growth that runs out of memory must not free the buffer (unmap
  // it, on a device) while its fills are still queued; it goes after the ops.finish() below.
  std::unique_ptr<GrowthStrategy> strategy;
  try {
    strategy = make();
    strategy->set_copy_hook(sample);
    for (std::size_t reached = 0; reached < target_bytes;) {
      std::size_t const bytes = std::min(append_bytes, target_bytes - reached);
      ops.fill(strategy->append(bytes), bytes);
      reached += bytes;
      sample();
    }
  } catch (const CapacityExceeded&) {
  } catch (const std::bad_alloc&) {
  }
  ops.finish();
  return peak - *baseline;
}

namespace {

/// Each driver call's times, one sample per call.
struct CallSamples {
  std::vector<double> create, map, set_access, unmap, release;

  void append(const CallSamples& other) {
    for (auto [to, from] : {std::pair{&create, &other.create}, std::pair{&map, &other.map},
                            std::pair{&set_access, &other.set_access}, std::pair{&unmap, &other.unmap},
                            std::pair{&release, &other.release}}) {
      to->insert(to->end(), from->begin(), from->end());
    }
  }
};

/// The latency statistics of each call (a DriverCallRow or a DriverThreadsRow) from its samples.
template <class Row>
void set_latencies(Row& row, const CallSamples& samples) {
  row.create = latency_stats(samples.create);
  row.map = latency_stats(samples.map);
  row.set_access = latency_stats(samples.set_access);
  row.unmap = latency_stats(samples.unmap);
  row.release = latency_stats(samples.release);
}

/// `iterations` cycles of create, map, set access, unmap and release of one `range.size()` chunk
/// at `range`; each call's time is added to `samples`. Whatever fails, nothing is left mapped or held.
void time_cycles(Backend& backend, const AddressRange& range, std::size_t iterations, CallSamples& samples) {
  ChunkProperties const props{};
  AccessGrant const grants[] = {{0, Access::read_write}};
  std::size_t const bytes = range.size();
  for (std::size_t i = 0; i < iterations; ++i) {
    ChunkHandle chunk{};
    samples.create.push_back(timed([&] { chunk = backend.create_chunk(bytes, props); }));
    try {
      samples.map.push_back(timed([&] { backend.map(range.base(), bytes, chunk); }));
      try {
        samples.set_access.push_back(timed([&] { backend.set_access(range.base(), bytes, grants); }));
      } catch (...) {
        backend.unmap(range.base(), bytes);
        throw;
      }
      samples.unmap.push_back(timed([&] { backend.unmap(range.base(), bytes); }));
    } catch (...) {
      backend.release_chunk(chunk);
      throw;
    }
    samples.release.push_back(timed([&] { backend.release_chunk(chunk); }));
  }
}

}  // namespace

std::vector<DriverCallRow> measure_driver_calls(Backend& backend, std::span<const std::size_t> chunk_sizes,
                                                std::size_t iterations,
                                                const std::function<void(std::size_t)>& before_each) {
  std::size_t const granularity = backend.granularity({}, GranularityKind::minimum);
  std::vector<DriverCallRow> rows;
  for (std::size_t const requested : chunk_sizes) {
    std::size_t const bytes = round_up(requested, granularity);
    if (before_each) before_each(bytes);
    AddressRange const range(backend, bytes);
    CallSamples samples;
    time_cycles(backend, range, iterations, samples);
    DriverCallRow row;
    row.chunk_bytes = bytes;
    set_latencies(row, samples);
    rows.push_back(row);
  }
  return rows;
}

std::vector<DriverThreadsRow> measure_driver_threads(Backend& backend, std::size_t chunk_bytes,
                                                     std::span<const std::size_t> thread_counts,
                                                     std::size_t iterations,
                                                     const std::function<void(std::size_t)>& before_each) {
  std::size_t const bytes = round_up(chunk_bytes, backend.granularity({}, GranularityKind::minimum));
  std::vector<DriverThreadsRow> rows;
  for (std::size_t const threads : thread_counts) {
    if (threads == 0) throw_invalid_argument("measure_driver_threads", "0 threads make no calls");
    if (before_each) before_each(threads);
    std::vector<AddressRange> ranges;  // reserved before the clock starts
    for (std::size_t t = 0; t < threads; ++t) ranges.emplace_back(backend, bytes);
    std::vector<CallSamples> samples(threads);
    std::vector<std::exception_ptr> errors(threads);
    std::latch ready(static_cast<std::ptrdiff_t>(threads));
    std::latch go(1);
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        ready.count_down();
        go.wait();
        try {
          time_cycles(backend, ranges[t], iterations, samples[t]);
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    }
    ready.wait();
    auto const start = clock_type::now();
    go.count_down();
    for (auto& worker : workers) worker.join();
    double const wall = seconds_since(start);
    for (auto const& error : errors) {
      if (error) std::rethrow_exception(error);
    }
    CallSamples all;
    for (auto const& s : samples) all.append(s);
    DriverThreadsRow row;
    row.threads = threads;
    row.chunk_bytes = bytes;
    set_latencies(row, all);
    row.cycles_per_second = static_cast<double>(threads * iterations) / wall;
    rows.push_back(row);
  }
  return rows;
}

Reach measure_reach(Backend& backend, std::size_t step_bytes) {
  Reach reach;
  reach.free_at_start = backend.memory_info(0).free;
  auto const start = clock_type::now();
  GrowableStorage storage(backend);
  try {
    while (storage.capacity() < storage.max_capacity()) {
      storage.reserve(std::min(storage.capacity() + step_bytes, storage.max_capacity()));
    }
    reach.stopped_by = "address_range_full";
  } catch (const std::bad_alloc&) {  // cuvmm::OutOfMemory is one
    reach.stopped_by = "out_of_memory";
  }
  reach.reached_bytes = storage.capacity();
  reach.seconds = seconds_since(start);
  return reach;
}

ReplayResult replay_trace(std::string name, TraceAllocator& allocator, const Trace& trace, std::size_t max_points) {
  ReplayResult result;
  result.allocator = std::move(name);
  result.ops = trace.ops.size();
  std::size_t const stride = std::max<std::size_t>(1, trace.ops.size() / std::max<std::size_t>(1, max_points));
  struct Live {
    void* pointer;
    std::size_t bytes;
  };
  std::unordered_map<std::size_t, Live> live;  // allocation id -> its memory (failed ones absent)
  std::size_t requested = 0;
  std::size_t sampled_peak = 0;
  double utilization_sum = 0;
  std::size_t utilization_points = 0;
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    auto const& op = trace.ops[i];
    if (op.allocate) {
      if (op.bytes != 0) {
        void* p = nullptr;
        result.seconds += timed([&] { p = allocator.allocate(op.bytes); });
        if (p == nullptr) {
          ++result.failed_allocations;
        } else {
          live.emplace(op.id, Live{p, op.bytes});
          requested += op.bytes;
        }
      }
    } else if (auto const found = live.find(op.id); found != live.end()) {
      result.seconds += timed([&] { allocator.deallocate(found->second.pointer, op.bytes); });
      live.erase(found);
      requested -= op.bytes;
    }
    result.peak_requested_bytes = std::max(result.peak_requested_bytes, requested);
    if (i % stride == 0 || i + 1 == trace.ops.size()) {
      std::size_t const held = allocator.held_bytes();
      sampled_peak = std::max(sampled_peak, held);
      result.timeline.push_back({i, requested, held});
      if (held != 0) {
        utilization_sum += static_cast<double>(requested) / static_cast<double>(held);
        ++utilization_points;
      }
    }
  }
  for (auto const& entry : live) allocator.deallocate(entry.second.pointer, entry.second.bytes);  // survivors, untimed
  allocator.finish();
  result.peak_held_bytes = allocator.exact_peak_held_bytes().value_or(sampled_peak);
  result.arena_stats = allocator.arena_stats();
  result.mean_utilization = utilization_points == 0 ? 0 : utilization_sum / static_cast<double>(utilization_points);
  return result;
}

std::string encode_replay(const ReplayResult& r) {
  std::string text;
  char line[256];
  std::snprintf(line, sizeof line, "replay %s %zu %zu %.9g %zu %zu %.9g\n", r.allocator.c_str(), r.ops,
                r.failed_allocations, r.seconds, r.peak_requested_bytes, r.peak_held_bytes, r.mean_utilization);
  text += line;
  for (auto const& p : r.timeline) {
    std::snprintf(line, sizeof line, "point %zu %zu %zu\n", p.op_index, p.requested_bytes, p.held_bytes);
    text += line;
  }
  return text;
}

std::vector<ReplayResult> decode_replays(const std::string& text) {
  std::vector<ReplayResult> results;
  std::istringstream lines(text);
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    auto bad = [&](const char* what) {
      throw_invalid_argument("decode_replays", "line " + std::to_string(number) + ": " + what + ": '" + line + "'");
    };
    if (line.starts_with("replay ")) {
      char name[128] = {};
      ReplayResult r;
      int consumed = 0;
      if (std::sscanf(line.c_str(), "replay %127s %zu %zu %lg %zu %zu %lg%n", name, &r.ops, &r.failed_allocations,
                      &r.seconds, &r.peak_requested_bytes, &r.peak_held_bytes, &r.mean_utilization, &consumed) != 7 ||
          static_cast<std::size_t>(consumed) != line.size()) {
        bad("a replay line wants NAME OPS FAILED SECONDS PEAK_REQUESTED PEAK_HELD MEAN_UTILIZATION");
      }
      r.allocator = name;
      results.push_back(std::move(r));
    } else if (line.starts_with("point ")) {
      if (results.empty()) bad("a point before any replay line");
      TimelinePoint p;
      int consumed = 0;
      if (std::sscanf(line.c_str(), "point %zu %zu %zu%n", &p.op_index, &p.requested_bytes, &p.held_bytes,
                      &consumed) != 3 ||
          static_cast<std::size_t>(consumed) != line.size()) {
        bad("a point line wants OP_INDEX REQUESTED HELD");
      }
      results.back().timeline.push_back(p);
    }
  }
  return results;
}

}  // namespace cuvmm::plan
