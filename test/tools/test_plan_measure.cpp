// cuvmm-plan's measurements on the host backend: growth reaches its target in place with exact
// chunk counts (the real policy and fixed chunks of one granule), stops with the right status on
// a full backend, reach, driver-call timing (also under a failure at every call, leaking nothing),
// and trace replay on cuvmm::Arena with exact peaks and timeline points.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "measure.hpp"
#include "report.hpp"

using namespace cuvmm;
using namespace cuvmm::plan;

namespace {

/// Fills each append with its own byte value and remembers where it went.
class RecordingFills final : public MemoryOps {
 public:
  struct Fill {
    std::byte* data;
    std::size_t bytes;
    unsigned char value;
  };
  void fill(void* data, std::size_t bytes) override {
    auto const value = static_cast<unsigned char>(0x11 + fills.size() % 200);
    std::memset(data, value, bytes);
    fills.push_back({static_cast<std::byte*>(data), bytes, value});
  }
  void finish() override { ++finishes; }
  std::vector<Fill> fills;
  int finishes = 0;
};

/// Every fill lies right behind the previous one and still holds its own value.
void check_fills_in_place(const RecordingFills& ops) {
  REQUIRE_FALSE(ops.fills.empty());
  std::byte* expected = ops.fills.front().data;
  for (auto const& f : ops.fills) {
    REQUIRE(f.data == expected);
    for (std::size_t i = 0; i < f.bytes; i += 4093) REQUIRE(static_cast<unsigned char>(f.data[i]) == f.value);
    REQUIRE(static_cast<unsigned char>(f.data[f.bytes - 1]) == f.value);
    expected += f.bytes;
  }
}

GrowableOptions fixed_chunks(std::size_t granularity) {
  GrowableOptions o;
  o.max_chunk_bytes = granularity;
  return o;
}

}  // namespace

TEST_CASE("growth reaches its target in place; the real policy maps few chunks, fixed chunks one per granule",
          "[plan][measure]") {
  // 64 GiB of "device memory": the default hide size is 128 MiB, whatever this machine has.
  HostBackend backend({.physical_limit = 64 * GiB});
  {
    RecordingFills ops;
    auto policy = make_growable_strategy(backend);
    GrowthRow const row = measure_growth(growable_policy_name, *policy, 64 * MiB, 48 * MiB, ops);
    CHECK(row.status == "ok");
    CHECK(row.reached_bytes == 64 * MiB);
    CHECK(row.appends == 2);  // 48 MiB, then the 16 MiB that remain
    CHECK(row.chunks == 2);   // one chunk per growth step: 48 MiB, then 48 MiB (doubling below the hide size)
    CHECK(row.peak_bytes == 96 * MiB);
    CHECK(row.bytes_copied == 0);
    CHECK(ops.finishes == 1);
    check_fills_in_place(ops);
  }
  {
    RecordingFills ops;
    auto fixed = make_growable_strategy(backend, fixed_chunks(2 * MiB));
    GrowthRow const row = measure_growth(growable_fixed_name, *fixed, 64 * MiB, 48 * MiB, ops);
    CHECK(row.status == "ok");
    CHECK(row.chunks == 32);  // the policy capped at one granule makes every chunk one granule
    CHECK(row.peak_bytes == 64 * MiB);
    check_fills_in_place(ops);
  }
  {
    RecordingFills ops;
    auto fixed = make_growable_strategy(backend, fixed_chunks(2 * MiB));
    GrowthRow const row = measure_growth(growable_fixed_name, *fixed, 8 * MiB, 4 * KiB, ops);
    CHECK(row.appends == 2048);
    CHECK(row.chunks == 4);
    CHECK(row.p99_append_us > 0);
    check_fills_in_place(ops);
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("growth on a full backend stops with its status and the size it reached", "[plan][measure]") {
  HostBackend backend(HostBackend::Options{2 * MiB, 32 * MiB});
  {
    RecordingFills ops;
    auto bounded = make_growable_strategy(backend);  // its address range is the 32 MiB "device"
    GrowthRow const row = measure_growth(growable_policy_name, *bounded, 64 * MiB, 4 * MiB, ops);
    CHECK(row.status == "capacity_exceeded");
    CHECK(row.reached_bytes == 32 * MiB);
    CHECK(row.appends == 8);
    check_fills_in_place(ops);
  }
  {
    RecordingFills ops;
    GrowableOptions wide;
    wide.max_capacity_bytes = 1 * GiB;  // more address space than memory: the memory runs out first
    auto strategy = make_growable_strategy(backend, wide);
    GrowthRow const row = measure_growth(growable_policy_name, *strategy, 64 * MiB, 4 * MiB, ops);
    CHECK(row.status == "out_of_memory");
    CHECK(row.reached_bytes == 32 * MiB);
    CHECK(row.peak_bytes == 32 * MiB);
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

/// Reports the backend's physical bytes as memory in use, as cudaMemGetInfo does on a device.
class CountingFills final : public MemoryOps {
 public:
  explicit CountingFills(const Backend& backend) : backend_(backend) {}
  void fill(void* data, std::size_t bytes) override { std::memset(data, 0x77, bytes); }
  void finish() override {}
  std::optional<std::size_t> memory_in_use() override { return backend_.live_counts().bytes_physical + 6 * MiB; }

 private:
  const Backend& backend_;
};

TEST_CASE("the untimed pass samples memory in use after every append, minus the baseline", "[plan][measure]") {
  HostBackend backend(HostBackend::Options{2 * MiB, 40 * MiB});
  CountingFills ops(backend);
  auto const policy = [&] { return make_growable_strategy(backend); };
  CHECK(measure_peak_in_use(policy, 24 * MiB, 7 * MiB, ops) == 24 * MiB);  // the 6 MiB "elsewhere" is the baseline
  // Stopped by the 40 MiB range: the peak so far.
  CHECK(measure_peak_in_use(policy, 64 * MiB, 8 * MiB, ops) == 40 * MiB);
  RecordingFills blind;  // cannot tell memory in use
  CHECK(measure_peak_in_use(policy, 8 * MiB, 1 * MiB, blind) == 0);
  CHECK(backend.live_counts() == LiveCounts{});
}

/// Fills that stay queued until finish(), as cudaMemsetAsync's do on a device.
class QueuedFills final : public MemoryOps {
 public:
  void fill(void* data, std::size_t bytes) override {
    std::memset(data, 0x5a, bytes);
    queued = true;
  }
  void finish() override { queued = false; }
  std::optional<std::size_t> memory_in_use() override { return 0; }
  bool queued = false;
};

/// A growable strategy that records whether fills were still queued when it was freed.
class FreedWhileQueued final : public GrowthStrategy {
 public:
  FreedWhileQueued(std::unique_ptr<GrowthStrategy> inner, const QueuedFills& ops, int& freed_with_fills_queued)
      : inner_(std::move(inner)), ops_(ops), freed_with_fills_queued_(freed_with_fills_queued) {}
  ~FreedWhileQueued() override { freed_with_fills_queued_ += ops_.queued ? 1 : 0; }
  void* append(std::size_t bytes) override { return inner_->append(bytes); }
  [[nodiscard]] std::size_t peak_bytes() const override { return inner_->peak_bytes(); }
  [[nodiscard]] std::size_t chunks() const override { return inner_->chunks(); }

 private:
  std::unique_ptr<GrowthStrategy> inner_;
  const QueuedFills& ops_;
  int& freed_with_fills_queued_;
};

TEST_CASE("the untimed pass frees a buffer that ran out of memory only after its fills finish", "[plan][measure]") {
  // On a device, freeing first unmaps memory that queued fills still write: an illegal address.
  HostBackend backend(HostBackend::Options{2 * MiB, 64 * MiB});
  PhysicalChunk const held_elsewhere(backend, 32 * MiB);  // 32 MiB free: the growth to 64 MiB stops
  QueuedFills ops;
  int freed_with_fills_queued = 0;
  int made = 0;
  auto const make = [&]() -> std::unique_ptr<GrowthStrategy> {
    ++made;
    return std::make_unique<FreedWhileQueued>(make_growable_strategy(backend), ops, freed_with_fills_queued);
  };
  CHECK(measure_peak_in_use(make, 64 * MiB, 4 * MiB, ops) == 0);
  CHECK(made == 1);
  CHECK(freed_with_fills_queued == 0);
  CHECK_FALSE(ops.queued);
  CHECK(measure_peak_in_use(make, 16 * MiB, 4 * MiB, ops) == 0);  // and one that completes
  CHECK(made == 2);
  CHECK(freed_with_fills_queued == 0);
  CHECK(backend.live_counts().bytes_physical == 32 * MiB);
}

TEST_CASE("appends of 0 bytes are refused with cuvmm::Error", "[plan][measure]") {
  HostBackend backend;
  RecordingFills ops;
  auto strategy = make_growable_strategy(backend);
  CHECK_THROWS_AS(measure_growth("x", *strategy, 4 * MiB, 0, ops), Error);
  CHECK_THROWS_AS(measure_peak_in_use([&] { return make_growable_strategy(backend); }, 4 * MiB, 0, ops), Error);
}

TEST_CASE("reach grows one buffer until the backend's memory is mapped", "[plan][measure]") {
  HostBackend backend(HostBackend::Options{2 * MiB, 96 * MiB});
  Reach const reach = measure_reach(backend, 64 * MiB);
  CHECK(reach.free_at_start == 96 * MiB);
  CHECK(reach.reached_bytes == 96 * MiB);
  CHECK(reach.stopped_by == "address_range_full");
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("reach stops with out_of_memory when the memory runs out before the address range", "[plan][measure]") {
  HostBackend backend(HostBackend::Options{2 * MiB, 96 * MiB});
  {
    PhysicalChunk const held_elsewhere(backend, 32 * MiB);  // the range is 96 MiB, the memory free 64 MiB
    Reach const reach = measure_reach(backend, 64 * MiB);
    CHECK(reach.free_at_start == 64 * MiB);
    CHECK(reach.reached_bytes == 64 * MiB);
    CHECK(reach.stopped_by == "out_of_memory");
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("driver calls are timed once per iteration for each chunk size, rounded to the granularity",
          "[plan][measure]") {
  HostBackend backend;
  std::vector<std::size_t> const sizes = {2 * MiB, 3 * MiB};
  std::vector<std::size_t> reported;
  auto const rows = measure_driver_calls(backend, sizes, 3, [&](std::size_t bytes) { reported.push_back(bytes); });
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].chunk_bytes == 2 * MiB);
  CHECK(rows[1].chunk_bytes == 4 * MiB);
  CHECK(reported == std::vector<std::size_t>{2 * MiB, 4 * MiB});
  for (auto const& row : rows) {
    for (LatencyStats const* s : {&row.create, &row.map, &row.set_access, &row.unmap, &row.release}) {
      CHECK(s->samples == 3);
      CHECK(s->median_us > 0);
      CHECK(s->p99_us >= s->median_us);
    }
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a failure at any backend call while timing driver calls leaks nothing", "[plan][measure][faults]") {
  HostBackend real;
  FaultInjectingBackend faulty(real);
  std::vector<std::size_t> const sizes = {2 * MiB, 4 * MiB};
  std::size_t failures = 0;
  for (std::size_t k = 1;; ++k) {
    faulty.fail_nth(k);
    try {
      (void)measure_driver_calls(faulty, sizes, 2);
    } catch (const Error&) {
      ++failures;
    }
    bool const fired = faulty.fired();
    faulty.disarm();
    INFO("k = " << k);
    REQUIRE(real.live_counts() == LiveCounts{});
    if (!fired) break;
  }
  // reserve + 2 x (create, map, set access) for each of the two sizes can fail; releases cannot.
  CHECK(failures == 14);
}

TEST_CASE("a trace replayed on the arena reports exact peaks, failures and timeline points", "[plan][measure]") {
  HostBackend backend;
  ArenaOptions options;
  options.byte_limit = 8 * MiB;
  auto arena = make_arena_allocator(backend, options);
  Trace trace;
  trace.ops = {{true, 0, 6 * MiB}, {true, 1, 6 * MiB}, {false, 1, 6 * MiB}, {false, 0, 6 * MiB},
               {true, 2, 4 * MiB}};
  ReplayResult const r = replay_trace("cuvmm_arena", *arena, trace, 2);
  CHECK(r.ops == 5);
  CHECK(r.failed_allocations == 1);  // the second 6 MiB does not fit under 8 MiB; its free is skipped
  CHECK(r.peak_requested_bytes == 6 * MiB);
  // The failed request is refused before any page is made: the arena checks the byte limit for the
  // whole request first, rather than making pages up to the limit and giving them back.
  CHECK(r.peak_held_bytes == 6 * MiB);
  // The Arena's own statistics after the replay: the same peaks; ids 0 and 2 made, both freed.
  REQUIRE(r.arena_stats.has_value());
  CHECK(r.arena_stats->bytes_physical.peak == 6 * MiB);
  CHECK(r.arena_stats->bytes_requested.peak == 6 * MiB);
  CHECK(r.arena_stats->allocations.total == 2);
  CHECK(r.arena_stats->allocations.current == 0);
  REQUIRE(r.timeline.size() == 3);  // every 2nd op (the last is one of them)
  CHECK(r.timeline[0].op_index == 0);
  CHECK(r.timeline[0].requested_bytes == 6 * MiB);
  CHECK(r.timeline[0].held_bytes == 6 * MiB);
  CHECK(r.timeline[1].op_index == 2);
  CHECK(r.timeline[1].requested_bytes == 6 * MiB);
  CHECK(r.timeline[2].op_index == 4);
  CHECK(r.timeline[2].requested_bytes == 4 * MiB);
  CHECK(r.timeline[2].held_bytes >= 4 * MiB);
  CHECK(r.mean_utilization > 0);
  CHECK(r.mean_utilization <= 1);
  arena.reset();
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("driver calls from several threads: every thread's calls are timed, and nothing leaks", "[plan][measure]") {
  HostBackend backend;
  std::vector<std::size_t> const counts = {1, 3};
  std::vector<std::size_t> reported;
  auto const rows = measure_driver_threads(backend, 3 * MiB, counts, 2, [&](std::size_t t) { reported.push_back(t); });
  CHECK(reported == counts);
  REQUIRE(rows.size() == 2);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    INFO("threads " << counts[i]);
    CHECK(rows[i].threads == counts[i]);
    CHECK(rows[i].chunk_bytes == 4 * MiB);  // rounded up to the 2 MiB granularity
    for (LatencyStats const* s : {&rows[i].create, &rows[i].map, &rows[i].set_access, &rows[i].unmap, &rows[i].release}) {
      CHECK(s->samples == 2 * counts[i]);
      CHECK(s->median_us > 0);
    }
    CHECK(rows[i].cycles_per_second > 0);
  }
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK_THROWS_AS(measure_driver_threads(backend, 2 * MiB, std::vector<std::size_t>{0}, 1), Error);
}

TEST_CASE("a failure in one of several threads making driver calls is rethrown, and nothing leaks",
          "[plan][measure][faults]") {
  HostBackend real;
  FaultInjectingBackend faulty(real);
  std::vector<std::size_t> const counts = {4};
  for (std::size_t k : {1, 5, 9, 17, 30}) {  // reserves (1-4), then creates, maps and grants of the four threads
    INFO("k = " << k);
    faulty.fail_nth(k);
    CHECK_THROWS_AS(measure_driver_threads(faulty, 2 * MiB, counts, 3), Error);
    CHECK(faulty.fired());
    faulty.disarm();
    CHECK(real.live_counts() == LiveCounts{});
  }
}

namespace {

GrowthRow run_of(double seconds, std::size_t chunks) {
  GrowthRow r;
  r.strategy = growable_policy_name;
  r.target_bytes = 8 * MiB;
  r.append_bytes = 1 * MiB;
  r.status = "ok";
  r.total_seconds = r.min_total_seconds = r.max_total_seconds = seconds;
  r.chunks = chunks;  // tells the runs apart
  return r;
}

}  // namespace

TEST_CASE("the median run stands for several runs, with their fastest and slowest times", "[plan][measure]") {
  GrowthRow const odd = median_run({run_of(3.0, 1), run_of(1.0, 2), run_of(2.0, 3)});
  CHECK(odd.chunks == 3);  // the 2.0 s run, whole
  CHECK(odd.total_seconds == 2.0);
  CHECK(odd.runs == 3);
  CHECK(odd.min_total_seconds == 1.0);
  CHECK(odd.max_total_seconds == 3.0);
  GrowthRow const even = median_run({run_of(4.0, 1), run_of(1.0, 2), run_of(3.0, 3), run_of(2.0, 4)});
  CHECK(even.chunks == 4);  // the lower of the middle two (2.0 s and 3.0 s)
  CHECK(even.runs == 4);
  CHECK(even.max_total_seconds == 4.0);
  GrowthRow const one = median_run({run_of(5.0, 7)});
  CHECK(one.runs == 1);
  CHECK(one.chunks == 7);
  CHECK(one.min_total_seconds == 5.0);

  CHECK_THROWS_AS(median_run({}), Error);
  GrowthRow other = run_of(1.0, 1);
  other.append_bytes = 2 * MiB;
  CHECK_THROWS_AS(median_run({run_of(1.0, 1), other}), Error);
}

TEST_CASE("replays handed over as text read back exactly; malformed lines are refused naming the line",
          "[plan][measure]") {
  ReplayResult a;
  a.allocator = "pytorch";
  a.ops = 5;
  a.failed_allocations = 1;
  a.seconds = 0.25;
  a.peak_requested_bytes = 6 * MiB;
  a.peak_held_bytes = 20 * MiB;
  a.mean_utilization = 0.375;
  a.timeline = {{0, 6 * MiB, 20 * MiB}, {4, 4 * MiB, 20 * MiB}};
  ReplayResult b;
  b.allocator = "pytorch_expandable_segments";
  b.ops = 5;
  std::string const text = "some other output\n" + encode_replay(a) + encode_replay(b);
  auto const back = decode_replays(text);
  REQUIRE(back.size() == 2);
  CHECK(back[0].allocator == "pytorch");
  CHECK(back[0].ops == 5);
  CHECK(back[0].failed_allocations == 1);
  CHECK(back[0].seconds == 0.25);
  CHECK(back[0].peak_requested_bytes == 6 * MiB);
  CHECK(back[0].peak_held_bytes == 20 * MiB);
  CHECK(back[0].mean_utilization == 0.375);
  REQUIRE(back[0].timeline.size() == 2);
  CHECK(back[0].timeline[1].op_index == 4);
  CHECK(back[0].timeline[1].requested_bytes == 4 * MiB);
  CHECK(back[0].timeline[1].held_bytes == 20 * MiB);
  CHECK(back[1].allocator == "pytorch_expandable_segments");
  CHECK(back[1].timeline.empty());

  auto refused = [](const std::string& bad) {
    try {
      (void)decode_replays(bad);
    } catch (const Error& error) {
      return error.context();
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused("replay x 1 0 0.1 10 20 0.5\npoint 0 10\n"),
             Catch::Matchers::ContainsSubstring("line 2: a point line wants OP_INDEX REQUESTED HELD"));
  CHECK_THAT(refused("point 0 1 2\n"), Catch::Matchers::ContainsSubstring("line 1: a point before any replay line"));
  CHECK_THAT(refused("hello\nreplay x 1 0 fast 10 20 0.5\n"),
             Catch::Matchers::ContainsSubstring("line 2: a replay line wants NAME OPS FAILED"));
  CHECK_THAT(refused("replay x 1 0 0.1 10 20 0.5 extra\n"), Catch::Matchers::ContainsSubstring("line 1:"));
}
