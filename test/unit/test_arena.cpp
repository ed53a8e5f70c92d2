// Arena on the host backend: the allocator battery (test/battery) on host memory, the extent set
// underneath, and every-k fault injection with leak checks on the backend's real tally.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>

#include "allocators/extent_set.hpp"
#include "arena_battery.hpp"
#include "observables.hpp"
#include "pattern.hpp"

using namespace cuvmm;

namespace {

constexpr std::size_t host_page = 64 * KiB;
constexpr std::size_t host_memory = 512 * MiB;

/// Host memory for the battery: 64 KiB pages, 512 MiB of "device" memory, fake stream handles.
class HostBatteryMemory final : public test::BatteryMemory {
 public:
  Backend& backend() override { return backend_; }
  ArenaOptions options() override {
    ArenaOptions o;
    o.address_space_bytes = 1 * GiB;
    o.large_page_bytes = 8 * host_page;  // large layouts from 8 pages on, as 16 of 2 MiB on the H200
    return o;
  }
  Stream new_stream() override { return reinterpret_cast<Stream>(static_cast<std::uintptr_t>(++streams_) * 64); }
  void write_pattern(void* p, std::size_t bytes, std::uint64_t seed, Stream) override {
    auto* words = static_cast<std::uint32_t*>(p);
    for (std::size_t i = 0; i < bytes / 4; ++i) words[i] = test::pattern_value(seed, i);
  }
  std::size_t mismatches(const void* p, std::size_t bytes, std::uint64_t seed, Stream) override {
    auto const* words = static_cast<const std::uint32_t*>(p);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < bytes / 4; ++i) wrong += words[i] != test::pattern_value(seed, i);
    return wrong;
  }
  std::size_t free_bytes() override { return backend_.memory_info(0).free; }
  void synchronize(Stream) override {}

 private:
  HostBackend backend_{{.granularity = host_page, .physical_limit = host_memory}};
  std::atomic<int> streams_{0};
};

}  // namespace

std::unique_ptr<test::BatteryMemory> test::make_battery_memory() { return std::make_unique<HostBatteryMemory>(); }

// --- the extent set ------------------------------------------------------------------------------

TEST_CASE("the extent set merges neighbours and hands out the best fit", "[arena][extents]") {
  detail::ExtentSet set;
  set.insert(10, 2);
  set.insert(20, 5);
  set.insert(12, 3);  // touches [10, 12): merged into [10, 15)
  CHECK(set.extent_count() == 2);
  CHECK(set.pages() == 10);
  CHECK(set.largest() == 5);
  CHECK(set.take(4) == 10);  // both fit; the lowest address among the smallest fitting
  CHECK(set.extents() == std::map<std::size_t, std::size_t>{{14, 1}, {20, 5}});
  CHECK(set.take(1) == 14);  // exact fit beats splitting the big one
  CHECK(set.take(6) == std::nullopt);
  set.insert(15, 5);  // bridges nothing: [15, 20) touches [20, 25)
  CHECK(set.extents() == std::map<std::size_t, std::size_t>{{15, 10}});
  set.erase(17, 2);
  CHECK(set.extents() == std::map<std::size_t, std::size_t>{{15, 2}, {19, 6}});
  CHECK(set.pages() == 8);
  set.insert(17, 2);
  CHECK(set.extents() == std::map<std::size_t, std::size_t>{{15, 10}});
}

TEST_CASE("the extent set agrees with a page-by-page model under random use", "[arena][extents]") {
  detail::ExtentSet set;
  std::vector<bool> model(512, false);  // true: the page is in the set
  std::mt19937_64 rng(5);
  for (int step = 0; step < 4000; ++step) {
    std::size_t const first = rng() % 512;
    std::size_t const count = 1 + rng() % 16;
    if (rng() % 2 == 0) {
      bool clear = first + count <= model.size();
      for (std::size_t i = first; clear && i < first + count; ++i) clear = !model[i];
      if (!clear) continue;
      set.insert(first, count);
      for (std::size_t i = first; i < first + count; ++i) model[i] = true;
    } else if (auto const got = set.take(count)) {
      REQUIRE(std::all_of(model.begin() + static_cast<std::ptrdiff_t>(*got),
                          model.begin() + static_cast<std::ptrdiff_t>(*got + count), [](bool in) { return in; }));
      std::fill_n(model.begin() + static_cast<std::ptrdiff_t>(*got), count, false);
    }
    std::size_t pages = 0;
    std::size_t previous_end = 0;
    bool first_extent = true;
    for (auto [f, c] : set.extents()) {
      REQUIRE((first_extent || f > previous_end));  // never touching: always merged
      REQUIRE(std::all_of(model.begin() + static_cast<std::ptrdiff_t>(f), model.begin() + static_cast<std::ptrdiff_t>(f + c),
                          [](bool in) { return in; }));
      pages += c;
      previous_end = f + c;
      first_extent = false;
    }
    REQUIRE(pages == static_cast<std::size_t>(std::count(model.begin(), model.end(), true)));
    REQUIRE(set.pages() == pages);
  }
}

// --- failures ------------------------------------------------------------------------------------

TEST_CASE("a failure at any backend call leaves the arena as it was and leaks nothing", "[arena][faults]") {
  HostBackend host({.granularity = host_page, .physical_limit = host_memory});
  LiveCounts const empty = host.live_counts();
  std::size_t const fds = test::open_fd_count();
  auto const stream_a = reinterpret_cast<Stream>(std::uintptr_t{64});
  auto const stream_b = reinterpret_cast<Stream>(std::uintptr_t{128});
  bool const share_tails = GENERATE(false, true);  // with shared tails: lending and returning too
  // With whole chunks from 4 pages on: creating, reusing and giving back chunks too.
  std::size_t const whole_chunk = GENERATE(std::size_t{0}, 4 * host_page);
  CAPTURE(share_tails, whole_chunk);

  // A script that needs every path: slabs, spans, reuse, stitching, stealing, trimming.
  struct Op {
    bool allocate;
    std::size_t bytes;
    Stream stream;
    std::size_t slot;  // which live allocation (for frees) / where to keep it (for allocations)
  };
  std::vector<Op> const script = {
      {true, 100, stream_a, 0},          {true, 3 * host_page, stream_a, 1}, {true, host_page, stream_a, 2},
      {true, 5000, stream_b, 3},         {false, 0, stream_a, 1},            {true, host_page + 1, stream_a, 4},
      {false, 0, stream_a, 2},           {true, 4 * host_page, stream_a, 5}, {false, 0, stream_b, 0},
      {true, 100, stream_b, 6},          {false, 0, stream_b, 5},            {true, 2 * host_page, stream_b, 7},
      {true, 9 * host_page, stream_b, 8},  {true, 2 * host_page, stream_b, 9}, {false, 0, stream_b, 8},
      {false, 0, stream_a, 9},             {true, 8 * host_page, stream_a, 10},
  };

  std::size_t failures_injected = 0;
  for (std::size_t k = 1;; ++k) {
    INFO("failing backend call " << k);
    bool fired = false;
    {
      FaultInjectingBackend faulty(host);
      {
        ArenaOptions options;
        options.address_space_bytes = 64 * host_page;
        options.large_page_bytes = 4 * host_page;  // the 4- and 9-page requests use large pages
        options.share_large_page_tails = share_tails;
        options.whole_chunk_bytes = whole_chunk;
        Arena arena(faulty, options);
        std::map<std::size_t, std::pair<void*, std::size_t>> live;
        faulty.fail_nth(k, {}, k % 2 == 0 ? FaultInjectingBackend::Failure::out_of_memory
                                           : FaultInjectingBackend::Failure::error);
        for (Op const& op : script) {
          if (!op.allocate) {
            auto const [p, bytes] = live.at(op.slot);
            arena.deallocate(p, bytes, op.stream);
            live.erase(op.slot);
            continue;
          }
          ArenaStats const before = arena.stats();
          LiveCounts const counts_before = host.live_counts();
          try {
            void* p = arena.allocate(op.bytes, op.stream);
            std::memset(p, 0x5A, op.bytes);
            live[op.slot] = {p, op.bytes};
          } catch (const std::exception&) {
            REQUIRE(faulty.fired());
            ArenaStats const after = arena.stats();
            CHECK(after.bytes_requested.current == before.bytes_requested.current);
            CHECK(after.allocations.current == before.allocations.current);
            // Pages may have moved to the pool, never out of the backend's sight.
            CHECK(host.live_counts().bytes_mapped <= counts_before.bytes_mapped);
            CHECK(after.bytes_mapped.current + after.bytes_stale == host.live_counts().bytes_mapped);
            CHECK(after.bytes_physical.current == host.live_counts().bytes_physical);
            CHECK(after.bytes_physical.current <= before.bytes_physical.current);  // created pages given back
            break;
          }
        }
        fired = faulty.fired();
        // Every live allocation still holds what was written.
        for (auto const& [slot, allocation] : live) {
          auto const* bytes = static_cast<const unsigned char*>(allocation.first);
          REQUIRE(std::all_of(bytes, bytes + allocation.second, [](unsigned char b) { return b == 0x5A; }));
        }
        faulty.disarm();
        for (auto const& [slot, allocation] : live) arena.deallocate(allocation.first, allocation.second, stream_a);
        arena.trim();
        CHECK(host.live_counts().chunks == 0);
        CHECK(host.live_counts().mappings == 0);
      }
    }
    CHECK(host.live_counts() == empty);
    CHECK(test::open_fd_count() == fds);
    if (!fired) break;  // the script ran through: every call has been failed once
    ++failures_injected;
  }
  CHECK(failures_injected >= 20);
}

TEST_CASE("page sizes that do not fit the granularity are refused", "[arena]") {
  HostBackend host({.granularity = host_page});
  ArenaOptions options;
  options.address_space_bytes = 64 * host_page;
  options.page_bytes = host_page + 4096;
  CHECK_THROWS_WITH(Arena(host, options), Catch::Matchers::ContainsSubstring("not a multiple of the granularity"));
  options.page_bytes = 0;
  options.large_page_bytes = 3 * host_page;
  CHECK_THROWS_WITH(Arena(host, options), Catch::Matchers::ContainsSubstring("not a power of two multiple"));
  CHECK(host.live_counts() == LiveCounts{});
}

// --- cost per operation as the arena grows ---------------------------------------------------------
//
// Counted in time ratios between sizes, not absolute times: the median cost of a batch of 1024
// operations at each size is compared with the median at 1k live blocks. An O(log n) or amortized
// O(1) arena stays within a small factor; the old per-free reallocation (O(n) per free) and the
// linear stream scan did not. A size whose operations already cost more than the bound stops the
// test there (the old code would otherwise take hours at 1M). A size over the bound is measured
// again, up to three times, and its best median counts: a loaded machine (the tests run side by
// side) slows one attempt, an O(n) cost slows every one.

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Seconds per operation of `op(i)` over [0, n), in batches of 1024: one sample per batch. Stops
/// early (returning false) once the phase has taken `budget` seconds.
template <class Op>
bool time_batches(std::size_t n, std::vector<double>& samples, double budget, Op&& op) {
  constexpr std::size_t batch = 1024;
  auto const begin = Clock::now();
  for (std::size_t start = 0; start < n; start += batch) {
    std::size_t const end = std::min(n, start + batch);
    auto const t0 = Clock::now();
    for (std::size_t i = start; i < end; ++i) op(i);
    auto const t1 = Clock::now();
    samples.push_back(std::chrono::duration<double>(t1 - t0).count() / static_cast<double>(end - start));
    if (std::chrono::duration<double>(t1 - begin).count() > budget) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("allocating and freeing small blocks costs the same per call at 1k and at 1M live blocks",
          "[arena][scaling]") {
  HostBackend host({.granularity = 1 * MiB, .physical_limit = 1 * GiB});
  ArenaOptions options;
  options.address_space_bytes = 2 * GiB;
  options.large_page_bytes = 0;
  Arena arena(host, options);
  constexpr std::size_t block = 256;
  constexpr double bound = 8.0;           // median cost per call at n / at 1k, per phase
  constexpr double floor_seconds = 2e-7;  // below this a ratio is timer noise
  constexpr int phases = 4;               // allocate n, free them, allocate n again, free in reverse
  std::vector<void*> live;
  std::array<double, phases> baseline{};
  std::size_t allocations = 0;
  for (std::size_t n : {std::size_t{1} << 10, std::size_t{1} << 13, std::size_t{1} << 16, std::size_t{1} << 20}) {
    int const rounds = n == 1024 ? 32 : 1;    // enough batches at 1k for a stable median
    int const attempts = n == 1024 ? 1 : 3;  // measured again while over the bound
    auto const limit = [&](int phase) { return bound * baseline[phase] + floor_seconds; };  // seconds per call
    // A phase that already took 4x what the bound allows (and at least 6 s, for a loaded machine:
    // 2 s ran out at 1M in the busy-machine run with another CPU-bound process beside it) stops
    // there: the old code would have taken hours at 1M.
    auto const budget = [&](int phase) {
      return n == 1024 ? 60.0 : std::max(6.0, 4.0 * static_cast<double>(n) * limit(phase));
    };
    auto const within_bound = [&](std::array<double, phases> const& cost) {
      for (int phase = 0; phase < phases; ++phase) {
        if (cost[phase] > limit(phase)) return false;
      }
      return true;
    };
    std::array<double, phases> best;
    best.fill(std::numeric_limits<double>::infinity());
    bool finished = true;
    for (int attempt = 0; attempt < attempts && finished && (attempt == 0 || !within_bound(best)); ++attempt) {
      std::array<std::vector<double>, phases> samples;
      for (int round = 0; round < rounds && finished; ++round) {
        live.assign(n, nullptr);
        finished = time_batches(n, samples[0], budget(0), [&](std::size_t i) { live[i] = arena.allocate(block, nullptr); ++allocations; }) &&
                   time_batches(n, samples[1], budget(1), [&](std::size_t i) { arena.deallocate(live[i], block, nullptr); }) &&
                   time_batches(n, samples[2], budget(2), [&](std::size_t i) { live[i] = arena.allocate(block, nullptr); ++allocations; }) &&
                   time_batches(n, samples[3], budget(3), [&](std::size_t i) { arena.deallocate(live[n - 1 - i], block, nullptr); });
      }
      for (int phase = 0; phase < phases && finished; ++phase) best[phase] = std::min(best[phase], median(samples[phase]));
    }
    for (int phase = 0; phase < phases; ++phase) {
      double const cost = best[phase];
      if (n == 1024) baseline[phase] = cost;
      INFO("live blocks " << n << ", phase " << phase << ": best median seconds per call " << cost << ", at 1k "
                          << baseline[phase] << (finished ? "" : " (stopped: over the time budget)"));
      REQUIRE(finished);
      REQUIRE(cost <= limit(phase));
    }
  }
  ArenaStats const s = arena.stats();
  CHECK(s.allocations.current == 0);
  CHECK(s.allocations.total == allocations);
  CHECK(allocations >= 2 * (32 * 1024 + (std::size_t{1} << 13) + (std::size_t{1} << 16) + (std::size_t{1} << 20)));
  CHECK(s.bytes_mapped.current == (std::size_t{1} << 20) * block);  // 1M blocks of slabs, cached
}

TEST_CASE("an allocation and free costs the same per call with 10 streams and with 40k streams known",
          "[arena][scaling]") {
  struct Costs {
    double new_stream;  // median seconds for a stream's first allocation and free, over its last 1024 streams
    double pair;        // median seconds per pair on one more stream, with `streams` known
  };
  auto const costs = [](std::size_t streams) {
    HostBackend host({.granularity = 64 * KiB, .physical_limit = 1 * GiB});
    ArenaOptions options;
    options.address_space_bytes = 4 * GiB;
    Arena arena(host, options);
    std::vector<double> first;  // each stream frees a block into the arena; seconds per stream, per 128
    constexpr std::size_t batch = 128;
    for (std::size_t start = 0; start < streams; start += batch) {
      auto const t0 = Clock::now();
      for (std::size_t i = start; i < start + batch; ++i) {
        auto const stream = reinterpret_cast<Stream>((i + 1) * 64);
        arena.deallocate(arena.allocate(300, stream), 300, stream);
      }
      first.push_back(std::chrono::duration<double>(Clock::now() - t0).count() / batch);
    }
    REQUIRE(arena.stats().streams == streams);
    auto const mine = reinterpret_cast<Stream>((streams + 1) * 64);
    std::vector<double> samples;
    for (int round = 0; round < 16; ++round) {
      time_batches(1024, samples, 60.0, [&](std::size_t) { arena.deallocate(arena.allocate(5000, mine), 5000, mine); });
    }
    return Costs{.new_stream = median({first.end() - 4, first.end()}), .pair = median(samples)};
  };
  Costs const few = costs(1024);
  Costs const many = costs(40 * 1024);
  INFO("median seconds per pair: 1k streams " << few.pair << ", 40k streams " << many.pair);
  CHECK(many.pair <= 8.0 * few.pair + 2e-7);
  // A new stream's first free and the next stream's allocation: nothing visits every stream known
  // (draining the streams' fronts once did: 87x the cost at 40x the streams, 52 s for this setup).
  // Each new stream's own records cost more in a larger heap (10x at 40x the streams on a busy CI
  // machine), so the bound is looser than the pair's, and still below what a walk costs.
  INFO("seconds per new stream, median over the last 512: at 1k streams " << few.new_stream << ", at 40k "
                                                                         << many.new_stream);
  CHECK(many.new_stream <= 32.0 * few.new_stream + 2e-7);
}
