// measure.hpp: cuvmm-plan's measurements, written against cuvmm's public API so that they run on
// any Backend (CudaBackend on a GPU, HostBackend without one).
//
//  - driver-call latency by chunk size: create, map, set access, unmap, release, one call each,
//    timed by the host clock (median and p99 over the iterations);
//  - growth of a buffer to a target size in appends of a fixed size, each append filled: total
//    time (ended by finish(), so queued device work is included), p99 host time per append
//    (growth plus enqueuing the fill), peak bytes held, bytes copied, chunks, size reached;
//  - how far a growable buffer can grow on this backend (reach);
//  - trace replay: the memory an allocator holds while a trace runs, against what it asked for.
// Strategies and allocators that need the CUDA runtime (cudaMalloc copy-and-grow, cudaMallocAsync)
// implement the same interfaces in device.cu. Nothing here prints: progress goes through a callback.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/growable_storage.hpp>

#include "trace_csv.hpp"

namespace cuvmm::plan {

/// Fewest samples for which a 99th percentile means something: with fewer, the nearest-rank p99
/// is simply the largest sample, and cuvmm-plan reports it as "max of N".
inline constexpr std::size_t min_samples_for_p99 = 100;

/// Median, 99th percentile and maximum of a set of samples, in microseconds.
struct LatencyStats {
  double median_us = 0;
  double p99_us = 0;
  std::size_t samples = 0;
  double max_us = 0;
  /// Whether p99_us comes from enough samples to be a p99 (min_samples_for_p99).
  [[nodiscard]] bool has_p99() const noexcept { return samples >= min_samples_for_p99; }
};
/// The tail of `stats` in words: "p99 12.5 us" with enough samples, else "max of 5: 12.5 us".
std::string tail_text(const LatencyStats& stats);
/// Nearest-rank percentile `p` (0..100) of `seconds_samples`, in microseconds (0 for none).
double percentile_us(std::vector<double> seconds_samples, double p);
LatencyStats latency_stats(const std::vector<double>& seconds_samples);

/// One chunk size's driver-call latencies.
struct DriverCallRow {
  std::size_t chunk_bytes = 0;
  LatencyStats create, map, set_access, unmap, release;
  /// The five calls together, per GiB of chunks (median), in milliseconds.
  [[nodiscard]] double ms_per_gib() const;
};

/// Writes new memory (a fill kernel on the device, memset on the host) and waits for it.
class MemoryOps {
 public:
  virtual ~MemoryOps() = default;
  virtual void fill(void* data, std::size_t bytes) = 0;
  /// Returns when every fill so far is done.
  virtual void finish() = 0;
  /// Memory in use on the device now (cudaMemGetInfo: total - free), when these ops can tell.
  [[nodiscard]] virtual std::optional<std::size_t> memory_in_use() { return std::nullopt; }
};

/// A buffer that grows by appends; each strategy keeps its own accounting of what it holds.
class GrowthStrategy {
 public:
  virtual ~GrowthStrategy() = default;
  /// Room for `bytes` more at the end; returns where they start. Throws cuvmm::OutOfMemory,
  /// std::bad_alloc or cuvmm::CapacityExceeded when it cannot grow (and changes nothing).
  virtual void* append(std::size_t bytes) = 0;
  /// Most bytes of memory held at once, transients of a copy included.
  [[nodiscard]] virtual std::size_t peak_bytes() const = 0;
  [[nodiscard]] virtual std::size_t bytes_copied() const { return 0; }
  /// Physical chunks (or allocations) made so far.
  [[nodiscard]] virtual std::size_t chunks() const = 0;
  /// Host time spent inside growth steps (driver or allocator calls), if the strategy knows it.
  [[nodiscard]] virtual double growth_seconds() const { return 0; }
  /// For strategies that copy: `hook` is called while the old and the new memory are both held
  /// (to sample memory in use at its peak). Others ignore it.
  virtual void set_copy_hook(std::function<void()> hook) { (void)hook; }
};

/// Growth strategy names, as they appear in the JSON, the CSV and the plots.
inline constexpr const char* growable_policy_name = "growable";               // the real policy
inline constexpr const char* growable_fixed_name = "growable_fixed_chunks";   // one granule per chunk
/// "growable_hide_MiB_N": the real policy with GrowableOptions::hide_bytes = N MiB (for experiments
/// with --growth-case; not one of the profiles' strategies).
inline constexpr const char* growable_hide_prefix = "growable_hide_MiB_";
inline constexpr const char* copy_grow_2x_name = "cudaMalloc_copy_grow_2x";
inline constexpr const char* copy_grow_1_5x_name = "cudaMalloc_copy_grow_1.5x";
inline constexpr const char* async_copy_grow_2x_name = "cudaMallocAsync_copy_grow_2x";
inline constexpr const char* thrust_vector_name = "thrust_device_vector";
inline constexpr const char* preallocated_name = "preallocated";

/// A cuvmm::GrowableStorage used as a byte buffer: its real policy, or with `options` changed.
std::unique_ptr<GrowthStrategy> make_growable_strategy(Backend& backend, GrowableOptions options = {});

/// One growth: to `target_bytes` in appends of `append_bytes`.
struct GrowthCase {
  std::size_t target_bytes = 0;
  std::size_t append_bytes = 0;
};

/// The growths measured on a GPU by cuvmm-plan's full profile and by bench_growth: the targets
/// cuvmm is built for (256 MiB in 4 KiB appends, 1 GiB in 1 MiB, 4 GiB in 64 MiB, 64 and 120 GiB in 64 MiB)
/// and, where the count of appends stays sensible, 8 GiB in 1 MiB and 64 MiB appends and 8, 64 and
/// 120 GiB in 1 GiB appends.
std::vector<GrowthCase> device_growth_cases();

struct GrowthRow {
  std::string strategy;
  std::size_t target_bytes = 0;
  std::size_t append_bytes = 0;
  std::string status;                ///< "ok", "out_of_memory" or "capacity_exceeded"
  std::size_t reached_bytes = 0;     ///< size when it stopped
  std::size_t appends = 0;
  double total_seconds = 0;          ///< the appends and fills, ended by MemoryOps::finish()
  double p99_append_us = 0;          ///< host time of one append plus enqueuing its fill
  std::size_t peak_bytes = 0;
  std::size_t bytes_copied = 0;
  std::size_t chunks = 0;
  double growth_seconds = 0;         ///< inside growth steps (driver calls), when known
  /// Device memory in use, sampled after every append (and during copies) in a separate, untimed
  /// pass, minus what was in use before: measure_peak_in_use(). 0 when not measured (host).
  std::size_t peak_in_use_bytes = 0;
  /// Runs of this case that the row stands for (median_run); their fastest and slowest total time.
  std::size_t runs = 1;
  double min_total_seconds = 0;
  double max_total_seconds = 0;
};

/// One row for several runs of the same growth: the run with the median total time (the lower of
/// the two middle ones for an even count), with `runs`, `min_total_seconds` and
/// `max_total_seconds` over all of them. Throws cuvmm::Error for no runs, or for runs of
/// different cases.
GrowthRow median_run(std::vector<GrowthRow> runs);

/// Grows `strategy` to `target_bytes` in appends of `append_bytes`, each filled through `ops`.
GrowthRow measure_growth(std::string name, GrowthStrategy& strategy, std::size_t target_bytes,
                         std::size_t append_bytes, MemoryOps& ops);

/// The untimed pass: grows a new strategy from `make` as measure_growth does, sampling
/// ops.memory_in_use() after every append and inside copies; returns the most seen minus the
/// memory in use before the strategy was made. 0 when `ops` cannot tell memory in use. A strategy
/// that cannot be made or cannot grow stops the pass where it is (its peak so far is returned).
std::size_t measure_peak_in_use(const std::function<std::unique_ptr<GrowthStrategy>()>& make, std::size_t target_bytes,
                                std::size_t append_bytes, MemoryOps& ops);

/// Times create, map, set access, unmap and release of one chunk of each size on `backend`.
/// `before_each` is called with each size (rounded) before it is measured (for progress).
std::vector<DriverCallRow> measure_driver_calls(Backend& backend, std::span<const std::size_t> chunk_sizes,
                                                std::size_t iterations,
                                                const std::function<void(std::size_t)>& before_each = {});

/// The same five calls made by several threads at once, each on a chunk and a range of its own.
struct DriverThreadsRow {
  std::size_t threads = 0;
  std::size_t chunk_bytes = 0;
  LatencyStats create, map, set_access, unmap, release;  ///< over every thread's calls
  /// Whole create-to-release cycles finished per second by all threads together (wall clock from
  /// the moment all threads start to the last one done).
  double cycles_per_second = 0;
  /// Which repeat of the thread-count measurement this row belongs to (1-based): the counts are
  /// measured one after another in each repeat, and the scaling is read per repeat.
  std::size_t repeat = 1;
};

/// For each count in `thread_counts`, that many threads each run `iterations` cycles of create,
/// map, set access, unmap and release of a `chunk_bytes` chunk (rounded up to the granularity).
std::vector<DriverThreadsRow> measure_driver_threads(Backend& backend, std::size_t chunk_bytes,
                                                     std::span<const std::size_t> thread_counts,
                                                     std::size_t iterations,
                                                     const std::function<void(std::size_t)>& before_each = {});

/// How far a growable buffer with the real policy grows on `backend` in `step_bytes` reserves
/// (no fills), until the device is full or its whole address range (by default as large as the
/// device's memory) is mapped.
struct Reach {
  std::size_t free_at_start = 0;
  std::size_t reached_bytes = 0;
  std::string stopped_by;  ///< "out_of_memory" or "address_range_full"
  double seconds = 0;
};
Reach measure_reach(Backend& backend, std::size_t step_bytes);

/// An allocator that a trace is replayed against.
class TraceAllocator {
 public:
  virtual ~TraceAllocator() = default;
  /// nullptr when it is out of memory.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* p, std::size_t bytes) = 0;
  /// Memory it holds from the device (or the host backend) now.
  [[nodiscard]] virtual std::size_t held_bytes() = 0;
  /// The most it held at once, when the allocator keeps that count exactly (else the replay
  /// reports the most it sampled).
  [[nodiscard]] virtual std::optional<std::size_t> exact_peak_held_bytes() { return std::nullopt; }
  /// Waits for queued work (stream-ordered allocators).
  virtual void finish() {}
  /// The Arena's statistics, for an allocator that is a cuvmm::Arena.
  [[nodiscard]] virtual std::optional<ArenaStats> arena_stats() const { return std::nullopt; }
};

/// A cuvmm::Arena over `backend` (default options otherwise).
std::unique_ptr<TraceAllocator> make_arena_allocator(Backend& backend, ArenaOptions options = {});

struct TimelinePoint {
  std::size_t op_index = 0;
  std::size_t requested_bytes = 0;  ///< live bytes the trace asked for
  std::size_t held_bytes = 0;       ///< what the allocator held
};

struct ReplayResult {
  std::string allocator;
  std::size_t ops = 0;
  std::size_t failed_allocations = 0;  ///< out of memory (their frees are skipped)
  double seconds = 0;                  ///< allocate/deallocate calls only, not the sampling
  std::size_t peak_requested_bytes = 0;
  std::size_t peak_held_bytes = 0;
  /// Requested over held, averaged over the sampled points where anything was held.
  double mean_utilization = 0;
  std::vector<TimelinePoint> timeline;  ///< at most about `max_points`, and the last op
  /// A cuvmm::Arena's statistics after the replay, every allocation freed (peaks and totals cover
  /// the whole replay); none for other allocators. Not carried by encode_replay.
  std::optional<ArenaStats> arena_stats;
};

/// Replays `trace` against `allocator`, sampling held memory at most about `max_points` times.
ReplayResult replay_trace(std::string name, TraceAllocator& allocator, const Trace& trace, std::size_t max_points);

/// A replay as lines of text, the form in which another process (tools/cuvmm-plan/torch_trace.py replaying
/// the trace through PyTorch's caching allocator) hands its result to cuvmm-plan:
///   replay NAME OPS FAILED SECONDS PEAK_REQUESTED PEAK_HELD MEAN_UTILIZATION
///   point OP_INDEX REQUESTED HELD        (one line per timeline point)
/// Other lines are ignored. decode_replays throws cuvmm::Error naming the bad line when a
/// replay or point line is malformed, or when a point comes before any replay line.
std::string encode_replay(const ReplayResult& result);
std::vector<ReplayResult> decode_replays(const std::string& text);

}  // namespace cuvmm::plan
