// Growth that maps one step ahead (GrowableOptions::map_ahead, DESIGN.md invariant 6) on the host
// backend: when it is on, what a growth takes, the slack bound, exact statistics, failures on the
// mapping thread at every call, and what shrinking, moves, access changes and destruction do to a
// step that is prepared or still being prepared. The growable TSan build runs this file too.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <cuvmm/counting_backend.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/host_growable_buffer.hpp>

#include "growable_contents.hpp"
#include "observables.hpp"

using namespace cuvmm;
using cuvmm::test::contents;
using cuvmm::test::random_words;

namespace {

constexpr std::size_t granule = 64 * KiB;

HostBackend::Options small_granules(std::size_t physical_limit = 0) {
  return {.granularity = granule, .physical_limit = physical_limit};
}

/// 64 MiB of range; doubling up to 1 MiB (16 granules), then 1 MiB chunks; mapping ahead on.
GrowableOptions mapping_ahead(MapAhead map_ahead = MapAhead::on) {
  GrowableOptions o;
  o.max_capacity_bytes = 64 * MiB;
  o.hide_bytes = 1 * MiB;
  o.map_ahead = map_ahead;
  return o;
}

/// Every step handed to the mapping thread has ended one way, or is the one pending.
bool accounted(const GrowableStats& s, bool pending) {
  return s.prepared_steps == s.prepared_used + s.prepared_discarded + s.prepared_failed + (pending ? 1 : 0);
}

/// A backend that reports device memory (over host memory), to see the default of map_ahead.
class DeviceLikeBackend final : public CountingBackend {
 public:
  using CountingBackend::CountingBackend;
  MemorySpace space() const noexcept override { return MemorySpace::device; }
};

/// Holds the next create_chunk call made on another thread than the test's in the backend until
/// open(), and records on which thread every map call ran.
class GateBackend final : public CountingBackend {
 public:
  explicit GateBackend(Backend& inner) : CountingBackend(inner), test_thread_(std::this_thread::get_id()) {}

  void close_for_next_create() {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  void wait_until_held() const {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return held_; });
  }
  void open() {
    std::lock_guard lock(mutex_);
    closed_ = false;
    changed_.notify_all();
  }
  std::size_t maps_off_test_thread() const {
    std::lock_guard lock(mutex_);
    return maps_off_test_thread_;
  }
  std::size_t maps_on_test_thread() const {
    std::lock_guard lock(mutex_);
    return maps_on_test_thread_;
  }

 protected:
  void before_call(BackendOp op) const override {
    bool const off_test_thread = std::this_thread::get_id() != test_thread_;
    std::unique_lock lock(mutex_);
    if (op == BackendOp::map) ++(off_test_thread ? maps_off_test_thread_ : maps_on_test_thread_);
    if (op != BackendOp::create_chunk || !off_test_thread || !closed_) return;
    held_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return !closed_; });
    held_ = false;
  }

 private:
  std::thread::id test_thread_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable bool closed_ = false;
  mutable bool held_ = false;  // a create_chunk call waits in the gate
  mutable std::size_t maps_off_test_thread_ = 0;
  mutable std::size_t maps_on_test_thread_ = 0;
};

/// Opens `gate` from another thread once a call waits in it, after raising `opened`.
std::thread opener(GateBackend& gate, std::atomic<bool>& opened) {
  return std::thread([&gate, &opened] {
    gate.wait_until_held();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the driver call takes a while
    opened.store(true);
    gate.open();
  });
}

}  // namespace

TEST_CASE("the step ahead is the chunk the next growth would map below the hide size, and none from it on or under the compact policy",
          "[growable][map-ahead][policy]") {
  constexpr std::size_t g = 2 * MiB;
  GrowthShape const fast{g, 2 * GiB, 256 * MiB, GrowthPolicy::fast};
  CHECK(step_ahead_bytes(0, fast) == g);
  CHECK(step_ahead_bytes(64 * MiB, fast) == 64 * MiB);    // doubling below the hide size
  CHECK(step_ahead_bytes(254 * MiB, fast) == 254 * MiB);  // the last size below it
  CHECK(step_ahead_bytes(256 * MiB, fast) == 0);          // from the hide size on, steps are hidden without it
  CHECK(step_ahead_bytes(8 * GiB, fast) == 0);
  for (std::size_t mapped : {g, 64 * MiB, 254 * MiB}) {
    CHECK(step_ahead_bytes(mapped, fast) == next_chunk_bytes(mapped, mapped + 1, fast));
  }
  // The hide size as next_chunk_bytes takes it: whole granules, within [one granule, the cap].
  CHECK(hide_size_bytes(GrowthShape{g, 2 * GiB, 3 * MiB, GrowthPolicy::fast}) == g);
  CHECK(hide_size_bytes(GrowthShape{g, 2 * GiB, 0, GrowthPolicy::fast}) == g);
  CHECK(hide_size_bytes(GrowthShape{g, 2 * GiB, 8 * GiB, GrowthPolicy::fast}) == 2 * GiB);
  CHECK(step_ahead_bytes(g, GrowthShape{g, 2 * GiB, 0, GrowthPolicy::fast}) == 0);
  CHECK(step_ahead_bytes(64 * MiB, GrowthShape{g, 2 * GiB, 256 * MiB, GrowthPolicy::compact}) == 0);
}

TEST_CASE("mapping ahead is on by default for device memory under the fast policy only", "[growable][map-ahead]") {
  HostBackend real(small_granules());
  DeviceLikeBackend device(real);
  auto const maps_ahead = [](Backend& backend, MapAhead setting, GrowthPolicy policy) {
    GrowableOptions options = mapping_ahead(setting);
    options.growth = policy;
    return GrowableStorage(backend, options).maps_ahead();
  };
  CHECK(maps_ahead(device, MapAhead::automatic, GrowthPolicy::fast));
  CHECK_FALSE(maps_ahead(real, MapAhead::automatic, GrowthPolicy::fast));
  CHECK(maps_ahead(real, MapAhead::on, GrowthPolicy::fast));
  CHECK_FALSE(maps_ahead(device, MapAhead::off, GrowthPolicy::fast));
  CHECK_FALSE(maps_ahead(device, MapAhead::automatic, GrowthPolicy::compact));
  CHECK_FALSE(maps_ahead(real, MapAhead::on, GrowthPolicy::compact));  // compact never maps ahead
  CHECK(GrowableOptions{}.map_ahead == MapAhead::automatic);
}

TEST_CASE("from the second growth on, the next step is prepared ahead and the growth that needs it takes it",
          "[growable][map-ahead]") {
  HostBackend backend(small_granules());
  {
    GrowableStorage storage(backend, mapping_ahead());
    storage.reserve(1);  // the first step: a buffer resized once holds no more than its size
    storage.settle_step_ahead();
    CHECK(storage.capacity() == granule);
    CHECK(storage.stats().prepared_steps == 0);
    CHECK(backend.live_counts().bytes_mapped == granule);

    storage.reserve(granule + 1);  // the second step: 2 granules, then 2 more prepared ahead
    storage.settle_step_ahead();
    GrowableStats s = storage.stats();
    CHECK(storage.capacity() == 2 * granule);
    CHECK(s.bytes_prepared == 2 * granule);
    CHECK(s.prepared_steps == 1);
    CHECK(s.chunks_created == 3);
    CHECK(s.chunk_count == 2);
    CHECK(backend.live_counts().bytes_mapped == 4 * granule);
    CHECK(backend.live_counts().chunks == 3);
    CHECK(accounted(s, true));

    storage.reserve(2 * granule + 1);  // takes the prepared step whole: no chunk made now
    CHECK(storage.capacity() == 4 * granule);
    storage.settle_step_ahead();
    s = storage.stats();
    CHECK(s.growth_steps == 3);
    CHECK(s.chunk_count == 3);
    CHECK(s.prepared_used == 1);
    CHECK(s.prepared_steps == 2);  // and the next one: 4 granules
    CHECK(s.bytes_prepared == 4 * granule);
    CHECK(s.chunks_created == 4);
    CHECK(s.access_calls == 4);  // one per step, the prepared ones' included
    CHECK(s.peak_capacity_bytes == 4 * granule);
    CHECK(backend.live_counts().bytes_mapped == 8 * granule);
    CHECK(accounted(s, true));

    // A growth past the prepared step takes it and maps the rest in the same step.
    storage.reserve(20 * granule);
    storage.settle_step_ahead();
    s = storage.stats();
    CHECK(storage.capacity() == 20 * granule);  // 4 mapped + 4 prepared + the 12 missing
    CHECK(s.chunk_count == 5);
    CHECK(s.growth_steps == 4);
    CHECK(s.prepared_used == 2);
    CHECK(s.prepared_steps == 2);  // and none ahead: past the hide size (16 granules) steps are hidden without it
    CHECK(s.bytes_prepared == 0);
    CHECK(backend.live_counts().bytes_mapped == 20 * granule);
    CHECK(accounted(s, false));
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("with mapping ahead, push_back keeps every element and the slack within invariant 6's bound plus one step",
          "[growable][map-ahead]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint64_t> buffer(backend, mapping_ahead());
  std::uint64_t* const base = buffer.data();
  std::vector<std::uint64_t> const values = random_words(1 << 20, 17);  // 8 MiB
  std::size_t last_capacity = 0;
  for (std::uint64_t value : values) {
    buffer.push_back(value);
    REQUIRE(buffer.data() == base);
    if (buffer.capacity() == last_capacity) continue;
    last_capacity = buffer.capacity();
    buffer.storage().settle_step_ahead();
    std::size_t const size = buffer.size_bytes();
    std::size_t const capacity = buffer.storage().capacity();
    std::size_t const held = backend.live_counts().bytes_physical;
    REQUIRE(held == capacity + buffer.stats().bytes_prepared);
    std::size_t const step = step_ahead_bytes(capacity, buffer.storage().growth_shape());
    REQUIRE(held - size <= std::max(size / 16, std::min(size, 1 * MiB)) + granule + step);
  }
  CHECK(contents(buffer) == values);
  GrowableStats const s = buffer.stats();
  // 64 KiB, 128, 256, 512 KiB, 1 MiB by doubling, then seven 1 MiB chunks, as without mapping
  // ahead: the steps after the second up to the hide size (1 MiB) were prepared ahead and used,
  // none after it.
  CHECK(s.growth_steps == 12);
  CHECK(s.chunk_count == 12);
  CHECK(s.prepared_used == 3);
  CHECK(s.prepared_steps == 3);
  CHECK(s.prepared_failed == 0);
  CHECK(s.bytes_prepared == 0);
  CHECK(accounted(s, false));
}

TEST_CASE("a preparation that fails at any call leaves nothing, and the growth that needs the step makes it",
          "[growable][map-ahead][faults]") {
  auto const failure = GENERATE(FaultInjectingBackend::Failure::error, FaultInjectingBackend::Failure::out_of_memory);
  HostBackend real(small_granules());
  std::size_t const fds_before = test::open_fd_count();
  std::vector<std::uint64_t> const first = random_words(granule / 8, 1);
  std::vector<std::uint64_t> const second = random_words(granule / 8, 2);
  std::vector<std::uint64_t> const third = random_words(2 * granule / 8, 3);
  std::size_t caller_faults = 0;
  std::size_t worker_faults = 0;
  for (std::size_t k = 1;; ++k) {
    INFO("fault at backend call " << k);
    FaultInjectingBackend faulty(real);
    bool fired = false;
    {
      HostGrowableBuffer<std::uint64_t> buffer(faulty, mapping_ahead());
      buffer.append(first);  // the first step
      // The second step makes 4 calls on this thread (create, chunk_info, map, set_access), then
      // hands the next step to the mapping thread, which makes the same 4.
      faulty.fail_nth(k, {}, failure);
      bool threw = false;
      try {
        buffer.append(second);
      } catch (const Error& e) {
        threw = true;
        CHECK(e.context() == "injected fault");
      } catch (const OutOfMemory& e) {
        threw = true;
        CHECK(e.context() == "injected fault");
      }
      buffer.storage().settle_step_ahead();
      fired = faulty.fired();
      faulty.disarm();
      GrowableStats const s = buffer.stats();
      if (threw) {  // on this thread: nothing changed, nothing handed to the mapping thread
        ++caller_faults;
        REQUIRE(contents(buffer) == first);
        REQUIRE(buffer.capacity() * sizeof(std::uint64_t) == granule);
        REQUIRE(s.prepared_steps == 0);
        REQUIRE(real.live_counts().bytes_mapped == granule);
        continue;
      }
      std::vector<std::uint64_t> expected = first;
      expected.insert(expected.end(), second.begin(), second.end());
      REQUIRE(contents(buffer) == expected);
      REQUIRE(s.prepared_steps == 1);
      if (fired) {  // on the mapping thread: reported nowhere, nothing held
        ++worker_faults;
        REQUIRE(s.prepared_failed == 1);
        REQUIRE(s.bytes_prepared == 0);
        REQUIRE(real.live_counts().bytes_mapped == 2 * granule);
        REQUIRE(real.live_counts().chunks == 2);
      } else {
        REQUIRE(s.bytes_prepared == 2 * granule);
      }
      // The append that needs the step makes it (or takes it), and the next is prepared.
      buffer.append(third);
      buffer.storage().settle_step_ahead();
      expected.insert(expected.end(), third.begin(), third.end());
      REQUIRE(contents(buffer) == expected);
      GrowableStats const after = buffer.stats();
      REQUIRE(after.prepared_used == (fired ? 0 : 1));
      REQUIRE(after.prepared_steps == 2);
      REQUIRE(after.bytes_prepared == 4 * granule);
      REQUIRE(accounted(after, true));
      REQUIRE(real.live_counts().bytes_mapped == 8 * granule);
    }
    REQUIRE(real.live_counts() == LiveCounts{});
    REQUIRE(test::open_fd_count() == fds_before);
    if (!fired) break;
  }
  CHECK(caller_faults == 4);
  CHECK(worker_faults == 4);
}

TEST_CASE("a growth that fails after taking the prepared step gives it back and changes nothing",
          "[growable][map-ahead][faults]") {
  HostBackend real(small_granules());
  FaultInjectingBackend faulty(real);
  GrowableOptions options = mapping_ahead();
  options.max_chunk_bytes = 4 * granule;
  HostGrowableBuffer<std::uint64_t> buffer(faulty, options);
  std::vector<std::uint64_t> const first = random_words(3 * granule / 8, 4);
  buffer.append(std::span(first).first(granule / 8));
  buffer.append(std::span(first).subspan(granule / 8));  // 3 granules mapped, 3 prepared
  buffer.storage().settle_step_ahead();
  REQUIRE(buffer.stats().bytes_prepared == 3 * granule);
  std::size_t const capacity = buffer.capacity();

  faulty.fail_nth(1, {BackendOp::set_access});  // the rest of the step maps, then cannot be granted
  std::vector<std::uint64_t> const more = random_words(20 * granule / 8, 5);
  CHECK_THROWS_AS(buffer.append(more), Error);
  faulty.disarm();
  GrowableStats const s = buffer.stats();
  CHECK(contents(buffer) == first);
  CHECK(buffer.capacity() == capacity);
  CHECK(s.bytes_prepared == 0);
  CHECK(s.prepared_discarded == 1);
  CHECK(s.prepared_used == 0);
  CHECK(accounted(s, false));
  CHECK(real.live_counts().bytes_mapped == 3 * granule);
  CHECK(real.live_counts().chunks == 2);
}

TEST_CASE("shrink_to_fit, grant_access and moves give the prepared step back", "[growable][map-ahead]") {
  HostBackend backend(small_granules());
  auto const prepare = [&backend](HostGrowableBuffer<std::uint8_t>& buffer) {
    buffer.resize(granule);
    buffer.resize(2 * granule, 0x5A);
    buffer.storage().settle_step_ahead();
    REQUIRE(buffer.stats().bytes_prepared == 2 * granule);
    REQUIRE(backend.live_counts().bytes_mapped == 4 * granule);
  };
  {
    HostGrowableBuffer<std::uint8_t> buffer(backend, mapping_ahead());
    prepare(buffer);
    buffer.shrink_to_fit();  // nothing of the mapped prefix goes: only the step ahead
    CHECK(buffer.capacity() == 2 * granule);
    CHECK(buffer.stats().bytes_prepared == 0);
    CHECK(buffer.stats().prepared_discarded == 1);
    CHECK(backend.live_counts().bytes_mapped == 2 * granule);
    CHECK(backend.live_counts().chunks == 2);
  }
  {
    HostGrowableBuffer<std::uint8_t> buffer(backend, mapping_ahead());
    prepare(buffer);
    AccessGrant const read_only{0, Access::read};
    buffer.grant_access(std::span(&read_only, 1));  // the step was prepared with the access of before
    CHECK(buffer.stats().bytes_prepared == 0);
    CHECK(buffer.stats().prepared_discarded == 1);
    CHECK(backend.live_counts().bytes_mapped == 2 * granule);
  }
  {
    HostGrowableBuffer<std::uint8_t> source(backend, mapping_ahead());
    prepare(source);
    std::uint8_t* const base = source.data();
    HostGrowableBuffer<std::uint8_t> moved(std::move(source));
    CHECK(moved.data() == base);
    CHECK(moved.stats().bytes_prepared == 0);
    CHECK(moved.stats().prepared_discarded == 1);
    CHECK(backend.live_counts().bytes_mapped == 2 * granule);
    CHECK(std::count(moved.begin(), moved.end(), std::uint8_t{0x5A}) == static_cast<std::ptrdiff_t>(granule));
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("destroying a buffer while its step is being prepared waits only for the current driver call",
          "[growable][map-ahead]") {
  HostBackend real(small_granules());
  GateBackend gate(real);
  std::atomic<bool> opened{false};
  std::optional<std::thread> helper;
  {
    HostGrowableBuffer<std::uint8_t> buffer(gate, mapping_ahead());
    buffer.resize(granule);
    gate.close_for_next_create();
    buffer.resize(2 * granule);  // hands the next step over; the mapping thread waits in cuMemCreate
    gate.wait_until_held();
    helper.emplace(opener(gate, opened));
  }  // the destructor takes the step once that call returns and releases the chunk itself
  CHECK(opened.load());
  CHECK(real.live_counts() == LiveCounts{});
  CHECK(gate.calls(BackendOp::create_chunk) == 3);
  CHECK(gate.calls(BackendOp::map) == 2);  // the prepared chunk was never mapped
  CHECK(gate.maps_off_test_thread() == 0);
  helper->join();
}

TEST_CASE("a growth that needs a step being prepared takes it after the current driver call and finishes it",
          "[growable][map-ahead]") {
  HostBackend real(small_granules());
  GateBackend gate(real);
  std::atomic<bool> opened{false};
  HostGrowableBuffer<std::uint32_t> buffer(gate, mapping_ahead());
  buffer.resize(granule / 4, 1);
  gate.close_for_next_create();
  buffer.resize(2 * granule / 4, 2);
  gate.wait_until_held();
  REQUIRE(gate.maps_on_test_thread() == 2);
  std::thread helper = opener(gate, opened);
  buffer.resize(4 * granule / 4, 3);  // needs the step: takes the chunk, maps and grants it here
  CHECK(opened.load());
  CHECK(gate.maps_on_test_thread() == 3);  // the prepared chunk, mapped by this growth
  helper.join();
  GrowableStats const s = buffer.stats();
  CHECK(s.prepared_used == 1);
  CHECK(s.chunk_count == 3);
  CHECK(buffer.capacity() == 4 * granule / 4);
  CHECK(std::count(buffer.begin(), buffer.end(), 1u) == static_cast<std::ptrdiff_t>(granule / 4));
  CHECK(std::count(buffer.begin(), buffer.end(), 2u) == static_cast<std::ptrdiff_t>(granule / 4));
  CHECK(std::count(buffer.begin(), buffer.end(), 3u) == static_cast<std::ptrdiff_t>(2 * granule / 4));
}

TEST_CASE("buffers on several threads share the mapping thread and keep every element",
          "[growable][map-ahead][threads]") {
  HostBackend backend(small_granules());
  constexpr int threads = 4;
  std::vector<std::thread> workers;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&backend, &mismatches, t] {
      for (int round = 0; round < 3; ++round) {
        HostGrowableBuffer<std::uint64_t> buffer(backend, mapping_ahead());
        std::vector<std::uint64_t> const values = random_words(300'000 + 1000 * t, 100 + t * 10 + round);
        for (std::size_t i = 0; i < values.size(); ++i) {
          buffer.push_back(values[i]);
          if (i % 50'000 == 49'999) (void)buffer.stats();  // reads the step ahead while it is prepared
          if (i == values.size() / 2) buffer.shrink_to_fit();
        }
        if (contents(buffer) != values) mismatches.fetch_add(1);
      }  // destroyed with a step prepared or being prepared
    });
  }
  for (std::thread& w : workers) w.join();
  CHECK(mismatches.load() == 0);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a growth that needs a step the mapping thread has not started makes the planned step itself",
          "[growable][map-ahead]") {
  HostBackend real(small_granules());
  GateBackend gate(real);
  std::atomic<bool> opened{false};
  HostGrowableBuffer<std::uint8_t> busy(gate, mapping_ahead());  // holds the mapping thread
  busy.resize(granule);
  gate.close_for_next_create();
  busy.resize(2 * granule);
  gate.wait_until_held();

  HostGrowableBuffer<std::uint8_t> buffer(real, mapping_ahead());
  buffer.resize(granule, 1);
  buffer.resize(2 * granule, 2);  // its step ahead (2 granules) queues behind busy's
  buffer.resize(2 * granule + 1, 3);
  GrowableStats const s = buffer.stats();
  CHECK(buffer.storage().capacity() == 4 * granule);  // the planned 2 granules, made here
  CHECK(s.chunk_count == 3);
  CHECK(s.prepared_used == 1);
  CHECK(s.prepared_steps == 2);
  CHECK(buffer[2 * granule] == 3);
  std::thread helper = opener(gate, opened);
  busy.storage().settle_step_ahead();
  buffer.storage().settle_step_ahead();
  helper.join();
  CHECK(buffer.stats().bytes_prepared == 4 * granule);
  CHECK(accounted(buffer.stats(), true));
}
