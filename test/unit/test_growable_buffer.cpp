// GrowableBuffer on the host backend: growth, pointer stability, the growth policy, transactions
// under fault injection at every call, capacity limits, shrinking, moves and copies. The same
// template serves device memory; the gpu suite proves the CUDA side.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <list>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/host_backend.hpp>

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

GrowableOptions capped(std::size_t max_capacity) {
  GrowableOptions o;
  o.max_capacity_bytes = max_capacity;
  return o;
}

}  // namespace

TEST_CASE("the compact growth unit is 1/16 of the target in whole granules, between the granularity and the cap",
          "[growable][policy]") {
  constexpr std::size_t g = 2 * MiB;
  CHECK(growth_unit_bytes(0, g, 2 * GiB) == g);
  CHECK(growth_unit_bytes(1, g, 2 * GiB) == g);
  CHECK(growth_unit_bytes(16 * g - 1, g, 2 * GiB) == g);
  CHECK(growth_unit_bytes(32 * g, g, 2 * GiB) == 2 * g);
  CHECK(growth_unit_bytes(48 * g, g, 2 * GiB) == 3 * g);
  CHECK(growth_unit_bytes(63 * g, g, 2 * GiB) == 3 * g);
  CHECK(growth_unit_bytes(64 * g, g, 2 * GiB) == 4 * g);
  CHECK(growth_unit_bytes(16 * GiB, g, 2 * GiB) == 1 * GiB);
  CHECK(growth_unit_bytes(24 * GiB, g, 2 * GiB) == 1536 * MiB);
  CHECK(growth_unit_bytes(64 * GiB, g, 2 * GiB) == 2 * GiB);
  CHECK(growth_unit_bytes(140 * GiB, g, 2 * GiB) == 2 * GiB);
  CHECK(growth_unit_bytes(64 * GiB, g, 3 * MiB) == g);  // a cap below two granules
  CHECK(growth_unit_bytes(64 * GiB, g, 0) == g);        // the cap never goes below one granule
}

TEST_CASE("a compact growth step maps what is missing rounded up to its unit, in one chunk below the cap",
          "[growable][policy]") {
  constexpr std::size_t g = 2 * MiB;
  CHECK(next_chunk_bytes(0, 1, g, 2 * GiB) == g);                         // a first element: one granule
  CHECK(next_chunk_bytes(0, 64 * MiB, g, 2 * GiB) == 64 * MiB);           // a 64 MiB append: one chunk
  CHECK(next_chunk_bytes(64 * MiB, 64 * MiB + 1, g, 2 * GiB) == 4 * MiB);  // push_back: one unit
  CHECK(next_chunk_bytes(1 * GiB, 1 * GiB + 65 * MiB, g, 2 * GiB) == 68 * MiB);  // one unit: 1089 MiB / 16 = 34 granules
  CHECK(next_chunk_bytes(0, 5 * GiB, g, 2 * GiB) == 2 * GiB);             // split at the cap
  CHECK(next_chunk_bytes(4 * GiB, 5 * GiB, g, 2 * GiB) == 1280 * MiB);    // the rest, in units of 320 MiB
  CHECK(next_chunk_bytes(4 * GiB, 4 * GiB, g, 2 * GiB) == 0);             // nothing missing
  CHECK(next_chunk_bytes(0, 5 * GiB, g, 3 * MiB) == g);                   // cap below two granules
  // Slack (the last chunk's rounding) is always below 1/16 of the target, or one granule.
  for (std::size_t target = 1; target < 3 * GiB; target = target * 3 / 2 + 7 * MiB) {
    for (std::size_t mapped : {std::size_t{0}, target / 2 / g * g, target / g * g}) {
      if (mapped >= target) continue;
      std::size_t total = mapped;
      while (total < target) total += next_chunk_bytes(total, target, g, 2 * GiB);
      REQUIRE(total - target < std::max(g, target / 16));
    }
  }
}

namespace {

constexpr std::size_t g2 = 2 * MiB;  // the H200's granularity

GrowthShape fast_shape(std::size_t hide_bytes, std::size_t max_chunk_bytes = 2 * GiB) {
  return GrowthShape{g2, max_chunk_bytes, hide_bytes, GrowthPolicy::fast};
}

/// Growth as GrowableStorage::reserve does it: chunks from next_chunk_bytes until `target` is mapped.
struct Step {
  std::size_t mapped_after = 0;
  std::size_t chunks = 0;
  std::size_t smallest_chunk = 0;
};
Step grow_to(std::size_t mapped, std::size_t target, const GrowthShape& shape) {
  Step step{mapped, 0, SIZE_MAX};
  while (step.mapped_after < target) {
    std::size_t const chunk = next_chunk_bytes(step.mapped_after, target, shape);
    REQUIRE(chunk != 0);
    REQUIRE(chunk % shape.granularity == 0);
    step.mapped_after += chunk;
    step.chunks += 1;
    step.smallest_chunk = std::min(step.smallest_chunk, chunk);
  }
  return step;
}

/// Growth to `total` bytes in appends of `append` bytes: growth steps, chunks and what is mapped at the end.
struct Growth {
  std::size_t steps = 0;
  std::size_t chunks = 0;
  std::size_t mapped = 0;
};
Growth grow_by_appends(std::size_t total, std::size_t append, const GrowthShape& shape) {
  Growth growth;
  std::size_t size = 0;
  while (size < total) {
    // The next size that is not mapped yet: appends up to there need no step.
    size = std::min(total, std::max(size + append, (growth.mapped / append + 1) * append));
    if (size > growth.mapped) {
      Step const step = grow_to(growth.mapped, size, shape);
      growth.mapped = step.mapped_after;
      growth.chunks += step.chunks;
      growth.steps += 1;
    }
  }
  return growth;
}

}  // namespace

TEST_CASE("the fast policy doubles below the hide size, then maps hide-size chunks, then 1/16 of the size",
          "[growable][policy]") {
  GrowthShape const h200 = fast_shape(256 * MiB);
  CHECK(next_chunk_bytes(0, 4 * KiB, h200) == g2);                          // one granule first
  CHECK(next_chunk_bytes(g2, g2 + 4 * KiB, h200) == g2);                    // doubles: 4 MiB mapped
  CHECK(next_chunk_bytes(64 * MiB, 64 * MiB + 1, h200) == 64 * MiB);        // doubles
  CHECK(next_chunk_bytes(192 * MiB, 192 * MiB + 1, h200) == 192 * MiB);     // still below the hide size
  CHECK(next_chunk_bytes(0, 64 * MiB, h200) == 64 * MiB);                   // a big append: one exact chunk
  CHECK(next_chunk_bytes(2 * MiB, 100 * MiB + 1, h200) == 100 * MiB);       // what is missing, in granules
  CHECK(next_chunk_bytes(256 * MiB, 256 * MiB + 1, h200) == 256 * MiB);     // hide-size chunks from there
  CHECK(next_chunk_bytes(1 * GiB, 1 * GiB + 1, h200) == 256 * MiB);
  CHECK(next_chunk_bytes(4 * GiB, 4 * GiB + 1, h200) == 256 * MiB);         // 1/16 is the hide size here
  CHECK(next_chunk_bytes(8 * GiB, 8 * GiB + 1, h200) == 512 * MiB);         // 1/16 of the size
  CHECK(next_chunk_bytes(24 * GiB, 24 * GiB + 1, h200) == 1536 * MiB);
  CHECK(next_chunk_bytes(40 * GiB, 40 * GiB + 1, h200) == 2 * GiB);         // the cap
  CHECK(next_chunk_bytes(4 * GiB, 5 * GiB, h200) == 1280 * MiB);            // in units of 320 MiB
  CHECK(next_chunk_bytes(0, 5 * GiB, h200) == 2 * GiB);                     // split at the cap
  CHECK(next_chunk_bytes(4 * GiB, 4 * GiB, h200) == 0);                     // nothing missing
  // The hide size is taken in whole granules, at least one, at most the cap.
  CHECK(next_chunk_bytes(g2, g2 + 1, fast_shape(1)) == g2);
  CHECK(next_chunk_bytes(64 * MiB, 64 * MiB + 1, fast_shape(3 * MiB)) == 4 * MiB);  // 1/16 of 64 MiB
  CHECK(next_chunk_bytes(128 * MiB, 128 * MiB + 1, fast_shape(129 * MiB)) == 128 * MiB);  // hide: 128 MiB
  CHECK(next_chunk_bytes(1 * GiB, 1 * GiB + 1, fast_shape(8 * GiB)) == 1 * GiB);    // hide capped at 2 GiB
  CHECK(next_chunk_bytes(2 * GiB, 2 * GiB + 1, fast_shape(8 * GiB)) == 2 * GiB);
  CHECK(next_chunk_bytes(64 * MiB, 64 * MiB + 1, fast_shape(256 * MiB, 16 * MiB)) == 16 * MiB);  // cap below
  // The compact policy is the four-argument form.
  GrowthShape const compact{g2, 2 * GiB, 256 * MiB, GrowthPolicy::compact};
  CHECK(next_chunk_bytes(64 * MiB, 64 * MiB + 1, compact) == 4 * MiB);
  CHECK(next_chunk_bytes(64 * MiB, 64 * MiB + 1, compact) == next_chunk_bytes(64 * MiB, 64 * MiB + 1, g2, 2 * GiB));
  CHECK(next_chunk_bytes(0, 1, GrowthShape{0, 2 * GiB, 256 * MiB, GrowthPolicy::fast}) == 0);  // no granularity
}

TEST_CASE("the fast policy's slack stays within max(size/16, min(size, hide size)) plus one granule at every size",
          "[growable][policy]") {
  auto const hide = GENERATE(g2, 64 * MiB, 256 * MiB, 1 * GiB, 2 * GiB, 8 * GiB);
  auto const append = GENERATE(std::size_t{1}, 4 * KiB, 1 * MiB + 3, 64 * MiB, 1 * GiB + 5);
  GrowthShape const shape = fast_shape(hide);
  std::size_t const effective_hide = std::min(hide, 2 * GiB);
  INFO("hide size " << hide << ", appends of " << append);
  std::size_t mapped = 0;
  std::size_t size = 0;
  std::size_t steps = 0;
  while (size < 150 * GiB) {
    size = std::max(size + append, (mapped / append + 1) * append);  // the next size that needs a step
    Step const step = grow_to(mapped, size, shape);
    INFO("from " << mapped << " to " << size << " mapped " << step.mapped_after);
    std::size_t const slack = step.mapped_after - size;
    REQUIRE(slack <= std::max(size / 16, std::min(size, effective_hide)) + g2);
    if (mapped != 0 && mapped < effective_hide) REQUIRE(step.mapped_after >= 2 * mapped);  // geometric
    if (mapped >= effective_hide) REQUIRE(step.smallest_chunk >= effective_hide);        // hidden steps
    mapped = step.mapped_after;
    ++steps;
  }
  // Far fewer steps than chunks of one granule would need.
  CHECK(steps < 200);
}

TEST_CASE("growth step counts of the benchmarked growth cases, fast against compact", "[growable][policy]") {
  GrowthShape const fast = fast_shape(256 * MiB);
  GrowthShape const compact{g2, 2 * GiB, 0, GrowthPolicy::compact};
  struct Case {
    std::size_t total, append, fast_steps, fast_mapped, compact_steps;
  };
  // The cases of bench_growth and cuvmm-plan's profile (plan::device_growth_cases); compact's counts
  // are what ~11 steps per doubling cost in each.
  Case const cases[] = {
      {256 * MiB, 4 * KiB, 8, 256 * MiB, 58},          // 2, 4, ... 256 MiB
      {1 * GiB, 1 * MiB, 11, 1 * GiB, 82},             // 8 doublings, then 3 chunks of 256 MiB
      {4 * GiB, 64 * MiB, 18, 4 * GiB, 39},            // 64, 128, 256 MiB, then 15 of 256 MiB
      {64 * GiB, 64 * MiB, 69, 70476890112, 89},       // then 1/16 of the size: 65.64 GiB mapped
      {120 * GiB, 64 * MiB, 97, 130606432256, 117},
  };
  for (Case const& c : cases) {
    INFO(c.total << " bytes in appends of " << c.append);
    Growth const f = grow_by_appends(c.total, c.append, fast);
    CHECK(f.steps == c.fast_steps);
    CHECK(f.chunks == c.fast_steps);  // one chunk per step: no step needs more than the cap
    CHECK(f.mapped == c.fast_mapped);
    CHECK(static_cast<double>(f.mapped) / static_cast<double>(c.total) <= 1.07);
    CHECK(grow_by_appends(c.total, c.append, compact).steps == c.compact_steps);
  }
}

TEST_CASE("a host buffer grows with the fast policy's steps, and the hide size defaults to memory / 256",
          "[growable][host][policy]") {
  HostBackend backend({.granularity = g2, .physical_limit = 128 * GiB});
  {
    GrowableStorage storage(backend, capped(2 * GiB));
    CHECK(storage.growth_shape().hide_bytes == 512 * MiB);  // 128 GiB / 256
    CHECK(storage.growth_shape().policy == GrowthPolicy::fast);
    CHECK(storage.growth_shape().granularity == g2);
    for (std::size_t size = 4 * KiB; size <= 256 * MiB; size += 4 * KiB) storage.reserve(size);
    CHECK(storage.stats().growth_steps == 8);
    CHECK(storage.capacity() == 256 * MiB);
    CHECK(storage.chunk_count() == 8);
    // One more doubling (256 MiB < the hide size), then one chunk of the hide size: 512 MiB.
    for (std::size_t size = 257 * MiB; size <= 1 * GiB; size += 1 * MiB) storage.reserve(size);
    CHECK(storage.stats().growth_steps == 10);
    CHECK(storage.chunks().back().size() == 512 * MiB);
    CHECK(storage.capacity() == 1 * GiB);
  }
  {
    GrowableOptions options = capped(2 * GiB);
    options.growth = GrowthPolicy::compact;
    GrowableStorage storage(backend, options);
    for (std::size_t size = 4 * KiB; size <= 256 * MiB; size += 4 * KiB) storage.reserve(size);
    CHECK(storage.stats().growth_steps == 58);
    CHECK(storage.growth_shape().policy == GrowthPolicy::compact);
  }
  {
    GrowableOptions options = capped(2 * GiB);
    options.hide_bytes = 32 * MiB;  // as cuvmm-plan would set it
    GrowableStorage storage(backend, options);
    CHECK(storage.growth_shape().hide_bytes == 32 * MiB);
    storage.reserve(16 * MiB + 1);
    CHECK(storage.capacity() == 18 * MiB);  // one exact chunk
    storage.reserve(18 * MiB + 1);
    CHECK(storage.capacity() == 36 * MiB);  // doubling below the hide size
    storage.reserve(36 * MiB + 1);
    CHECK(storage.capacity() == 68 * MiB);  // a hide-size chunk, not doubling
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a buffer grows by push_back without moving, with slack within the policy's bound",
          "[growable][host]") {
  HostBackend backend(small_granules());
  GrowableOptions options = capped(256 * MiB);
  options.hide_bytes = 1 * MiB;  // 16 granules: doubling to 1 MiB, then 1 MiB chunks
  HostGrowableBuffer<std::uint64_t> buffer(backend, options);
  REQUIRE(buffer.max_capacity() == 256 * MiB / sizeof(std::uint64_t));
  std::uint64_t* const base = buffer.data();
  REQUIRE(base != nullptr);

  std::vector<std::uint64_t> const values = random_words(1 << 20, 7);  // 8 MiB: 128 granules
  std::size_t growth_steps_seen = 0;
  std::size_t last_capacity = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    buffer.push_back(values[i]);
    REQUIRE(buffer.data() == base);
    if (buffer.capacity() != last_capacity) {
      ++growth_steps_seen;
      last_capacity = buffer.capacity();
      std::size_t const slack = buffer.storage().capacity() - buffer.size_bytes();
      REQUIRE(slack <= std::max(buffer.size_bytes() / 16, std::min(buffer.size_bytes(), 1 * MiB)) + granule);
    }
  }
  REQUIRE(buffer.size() == values.size());
  CHECK(contents(buffer) == values);
  GrowableStats const stats = buffer.stats();
  CHECK(stats.growth_steps == growth_steps_seen);
  CHECK(stats.chunks_created == buffer.storage().chunk_count());
  CHECK(stats.access_calls == stats.growth_steps);  // one access call per growth step
  CHECK(stats.growth_nanoseconds > 0);
  // 64 KiB, 128, 256, 512 KiB, 1 MiB by doubling, then seven 1 MiB chunks to 8 MiB.
  CHECK(stats.chunk_count == 12);
  CHECK(stats.growth_steps == 12);
  CHECK(buffer.storage().capacity() == 8 * MiB);
  CHECK(backend.live_counts().chunks == stats.chunk_count);
  CHECK(backend.live_counts().bytes_mapped == buffer.storage().capacity());
}

TEST_CASE("a buffer matches std::vector through random operation sequences", "[growable][host][model]") {
  auto const seed = GENERATE(1u, 2u, 3u, 4u, 5u);
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint32_t> buffer(backend, capped(64 * MiB));
  std::vector<std::uint32_t> model;
  std::mt19937 rng(seed);
  std::uint32_t* const base = buffer.data();

  for (int step = 0; step < 400; ++step) {
    switch (rng() % 9) {
      case 0: {
        std::uint32_t const v = rng();
        buffer.push_back(v);
        model.push_back(v);
        break;
      }
      case 1: {
        std::vector<std::uint32_t> block(rng() % 50000);
        for (auto& x : block) x = rng();
        buffer.append(block);
        model.insert(model.end(), block.begin(), block.end());
        break;
      }
      case 2: {
        std::size_t const n = rng() % 120000;
        std::uint32_t const v = rng();
        buffer.resize(n, v);
        model.resize(n, v);
        break;
      }
      case 3:
        if (!model.empty()) {
          buffer.pop_back();
          model.pop_back();
        }
        break;
      case 4:
        if (rng() % 8 == 0) {
          buffer.clear();
          model.clear();
        }
        break;
      case 5:
        buffer.shrink_to_fit();
        CHECK(buffer.storage().capacity() - buffer.size_bytes() <
              std::max(granule, buffer.storage().chunks().empty() ? granule : buffer.storage().chunks().back().size()));
        break;
      case 6:
        buffer.reserve(rng() % 150000);
        break;
      case 7:
        if (!model.empty()) {
          std::size_t const i = rng() % model.size();
          std::uint32_t const v = rng();
          buffer.set_element(i, v);
          model[i] = v;
          REQUIRE(buffer.element(i) == v);
        }
        break;
      case 8: {  // self-append: growth never moves the source
        std::size_t const n = std::min<std::size_t>(model.size(), rng() % 5000);
        buffer.append(std::span<const std::uint32_t>(buffer.data(), n));
        model.insert(model.end(), model.begin(), model.begin() + static_cast<std::ptrdiff_t>(n));
        break;
      }
    }
    REQUIRE(buffer.size() == model.size());
    REQUIRE(buffer.capacity() >= buffer.size());
    REQUIRE(buffer.data() == base);
  }
  CHECK(contents(buffer) == model);
}

TEST_CASE("append takes iterators of other types and non-contiguous ranges", "[growable][host]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<double> buffer(backend, capped(16 * MiB));
  std::list<int> const ints{3, -1, 4, -1, 5};
  buffer.append(ints.begin(), ints.end());
  std::vector<float> const floats{0.5f, 2.25f};
  buffer.append(floats.begin(), floats.end());
  CHECK(contents(buffer) == std::vector<double>{3, -1, 4, -1, 5, 0.5, 2.25});
}

TEST_CASE("a failed growth step leaves the buffer as it was and leaks nothing, at every k",
          "[growable][host][faults]") {
  auto const failure = GENERATE(FaultInjectingBackend::Failure::error, FaultInjectingBackend::Failure::out_of_memory);
  HostBackend real(small_granules());
  FaultInjectingBackend faulty(real);
  std::size_t const fds_before = test::open_fd_count();
  {
    GrowableOptions options = capped(64 * MiB);
    options.max_chunk_bytes = 4 * granule;  // so the step below needs ten chunks
    HostGrowableBuffer<std::uint64_t> buffer(faulty, options);
    std::vector<std::uint64_t> const first = random_words(3 * granule / 8 + 5, 11);
    buffer.append(first);
    std::vector<std::uint64_t> const more = random_words(40 * granule / 8, 12);  // many chunks, one step

    std::size_t k = 1;
    for (;; ++k) {
      LiveCounts const live_before = real.live_counts();
      std::size_t const fds_in_buffer = test::open_fd_count();
      std::size_t const capacity_before = buffer.capacity();
      GrowableStats const stats_before = buffer.stats();
      std::uint64_t* const base = buffer.data();

      faulty.fail_nth(k, {}, failure);
      bool threw = false;
      try {
        buffer.append(more);
      } catch (const Error& e) {
        threw = true;
        CHECK(e.context() == "injected fault");
      } catch (const OutOfMemory& e) {
        threw = true;
        CHECK(e.context() == "injected fault");
      }
      faulty.disarm();
      if (!threw) break;
      INFO("fault at backend call " << k);
      REQUIRE(faulty.fired());
      REQUIRE(buffer.size() == first.size());
      REQUIRE(buffer.data() == base);
      REQUIRE(buffer.capacity() == capacity_before);
      REQUIRE(buffer.stats().chunks_created == stats_before.chunks_created);
      REQUIRE(real.live_counts() == live_before);
      REQUIRE(test::open_fd_count() == fds_in_buffer);
      REQUIRE(contents(buffer) == first);
    }
    // The step maps 40 granules in ten chunks: create, chunk_info and map for each, then one
    // access call, 31 calls; the 32nd attempt no longer hits a call.
    CHECK(k == 32);
    REQUIRE(buffer.size() == first.size() + more.size());
    std::vector<std::uint64_t> expected = first;
    expected.insert(expected.end(), more.begin(), more.end());
    CHECK(contents(buffer) == expected);
  }
  CHECK(real.live_counts() == LiveCounts{});
  CHECK(test::open_fd_count() == fds_before);
}

TEST_CASE("growth past the address range throws CapacityExceeded and changes nothing", "[growable][host]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint8_t> buffer(backend, capped(4 * granule));
  REQUIRE(buffer.max_capacity() == 4 * granule);
  std::vector<std::uint8_t> const bytes(3 * granule, 0xA5);
  buffer.append(bytes);
  LiveCounts const live = backend.live_counts();

  std::vector<std::uint8_t> const too_much(granule + 1, 0x5A);
  try {
    buffer.append(too_much);
    FAIL("append past max_capacity did not throw");
  } catch (const CapacityExceeded& e) {
    CHECK(e.requested_bytes() == 4 * granule + 1);
    CHECK(e.max_capacity_bytes() == 4 * granule);
  }
  CHECK(buffer.size() == 3 * granule);
  CHECK(contents(buffer) == bytes);
  CHECK(backend.live_counts() == live);

  buffer.append(std::vector<std::uint8_t>(granule, 1));  // exactly full is fine
  CHECK(buffer.size() == buffer.max_capacity());
  CHECK_THROWS_AS(buffer.push_back(2), CapacityExceeded);
}

TEST_CASE("append from a single-pass input iterator that runs past max_capacity changes nothing and leaks nothing",
          "[growable][host][strong]") {
  // A true single-pass source: std::istream_iterator reads each value once, so append cannot count
  // it before it reads it.
  static_assert(std::input_iterator<std::istream_iterator<std::uint32_t>> &&
                !std::forward_iterator<std::istream_iterator<std::uint32_t>>);
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint32_t> buffer(backend, capped(4 * granule));  // 65536 elements at most
  std::vector<std::uint32_t> const first{7, 0xDEADBEEF, 9, 0, 0xFFFFFFFF};
  buffer.append(first);
  std::uint32_t* const base = buffer.data();
  std::size_t const capacity_before = buffer.capacity();
  LiveCounts const live_before = backend.live_counts();
  REQUIRE(live_before.chunks == 1);
  // Poison the mapped tail: a failed append must not have written there either (it stages first).
  std::fill(buffer.data() + buffer.size(), buffer.data() + capacity_before, 0xA5A5A5A5u);

  std::size_t const room = buffer.max_capacity() - buffer.size();  // 65531
  std::ostringstream text;
  for (std::size_t i = 0; i < room + 1; ++i) text << i << ' ';  // one element too many
  std::istringstream in(text.str());
  try {
    buffer.append(std::istream_iterator<std::uint32_t>(in), std::istream_iterator<std::uint32_t>());
    FAIL("append past max_capacity did not throw");
  } catch (const CapacityExceeded& e) {
    // The first element that did not fit is the one asked for.
    CHECK(e.requested_bytes() == (buffer.max_capacity() + 1) * sizeof(std::uint32_t));
    CHECK(e.max_capacity_bytes() == 4 * granule);
  }
  CHECK(buffer.size() == first.size());
  CHECK(contents(buffer) == first);
  CHECK(buffer.data() == base);
  CHECK(buffer.capacity() == capacity_before);
  CHECK(backend.live_counts() == live_before);
  CHECK(std::all_of(buffer.data() + buffer.size(), buffer.data() + capacity_before,
                    [](std::uint32_t x) { return x == 0xA5A5A5A5u; }));

  // Exactly up to max_capacity fits, read once, in order.
  std::ostringstream exact;
  for (std::size_t i = 0; i < room; ++i) exact << i * 3 << ' ';
  std::istringstream in_exact(exact.str());
  buffer.append(std::istream_iterator<std::uint32_t>(in_exact), std::istream_iterator<std::uint32_t>());
  REQUIRE(buffer.size() == buffer.max_capacity());
  CHECK(std::equal(first.begin(), first.end(), buffer.data()));
  for (std::size_t i = 0; i < room; ++i) REQUIRE(buffer.data()[first.size() + i] == i * 3);
  CHECK(buffer.data() == base);
}

namespace {
/// A single-pass iterator over n values whose reading throws at value `throw_at`.
struct ThrowingReader {
  using iterator_category = std::input_iterator_tag;
  using value_type = std::uint32_t;
  using difference_type = std::ptrdiff_t;
  using reference = value_type;
  using pointer = void;
  std::size_t i = 0;
  std::size_t throw_at = 0;
  value_type operator*() const {
    if (i == throw_at) throw std::runtime_error("the source failed");
    return static_cast<value_type>(i + 100);
  }
  ThrowingReader& operator++() {
    ++i;
    return *this;
  }
  ThrowingReader operator++(int) {
    ThrowingReader const before = *this;
    ++i;
    return before;
  }
  friend bool operator==(const ThrowingReader& a, const ThrowingReader& b) { return a.i == b.i; }
};
}  // namespace

TEST_CASE("append from a single-pass iterator that throws midway changes nothing and leaks nothing",
          "[growable][host][strong]") {
  static_assert(std::input_iterator<ThrowingReader> && !std::forward_iterator<ThrowingReader>);
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint32_t> buffer(backend, capped(64 * granule));
  buffer.push_back(1);
  LiveCounts const live_before = backend.live_counts();
  std::size_t const capacity_before = buffer.capacity();
  // Throws after 3 granules' worth of elements: growth would have been needed to hold them.
  std::size_t const throw_at = 3 * granule / sizeof(std::uint32_t);
  CHECK_THROWS_AS(buffer.append(ThrowingReader{0, throw_at}, ThrowingReader{throw_at + 10, throw_at}),
                  std::runtime_error);
  CHECK(contents(buffer) == std::vector<std::uint32_t>{1});
  CHECK(buffer.capacity() == capacity_before);
  CHECK(backend.live_counts() == live_before);

  buffer.append(ThrowingReader{0, 99}, ThrowingReader{3, 99});
  CHECK(contents(buffer) == std::vector<std::uint32_t>{1, 100, 101, 102});
}

TEST_CASE("zero and absurd sizes are no-ops or clear errors", "[growable][host]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint64_t> buffer(backend, capped(granule));
  buffer.reserve(0);
  buffer.resize(0);
  buffer.append(std::span<const std::uint64_t>{});
  CHECK(buffer.empty());
  CHECK(buffer.capacity() == 0);
  CHECK(backend.live_counts().chunks == 0);

  CHECK_THROWS_AS(buffer.reserve(std::numeric_limits<std::size_t>::max()), CapacityExceeded);
  CHECK_THROWS_AS(buffer.resize(std::numeric_limits<std::size_t>::max() / 2), CapacityExceeded);
  CHECK_THROWS_AS(buffer.pop_back(), Error);
  CHECK_THROWS_AS((void)buffer.element(0), Error);
  CHECK(buffer.empty());
  CHECK(backend.live_counts().chunks == 0);

  GrowableOptions zero_granules;
  zero_granules.max_capacity_bytes = std::numeric_limits<std::size_t>::max();
  CHECK_THROWS_AS(HostGrowableBuffer<int>(backend, zero_granules), Error);  // cannot be rounded
}

TEST_CASE("running out of physical memory throws OutOfMemory with the buffer intact", "[growable][host][oom]") {
  // 38 granules of physical memory, a 64-granule range, appends of one granule. Past 32 granules the
  // policy asks for 2-granule chunks; the one that would end at 39 does not fit, so growth falls
  // back to the exact size needed and the buffer still reaches all 38.
  HostBackend backend(small_granules(38 * granule));
  GrowableOptions options = capped(64 * granule);
  options.growth = GrowthPolicy::compact;  // 1/16 units, so the chunk sizes above are exact
  HostGrowableBuffer<std::uint64_t> buffer(backend, options);
  std::vector<std::uint64_t> const block = random_words(granule / 8, 3);
  std::size_t appended = 0;
  std::uint64_t* const base = buffer.data();
  try {
    for (;; ++appended) buffer.append(block);
  } catch (const OutOfMemory& e) {
    CHECK(std::string(e.what()).find("out of memory") != std::string::npos);
  }
  CHECK(appended == 38);
  CHECK(buffer.size() == 38 * block.size());
  CHECK(buffer.data() == base);
  CHECK(buffer.stats().oom_retries == 1);
  CHECK(backend.live_counts().bytes_physical == 38 * granule);
  for (std::size_t i = 0; i < appended; ++i) {
    REQUIRE(std::equal(block.begin(), block.end(), buffer.data() + i * block.size()));
  }
}

TEST_CASE("a refused reservation is retried at half the size down to the floor", "[growable][host]") {
  HostBackend real(small_granules());
  FaultInjectingBackend faulty(real);
  GrowableOptions options = capped(64 * granule);
  options.min_capacity_bytes = 16 * granule;

  faulty.fail_nth(1, {BackendOp::reserve}, FaultInjectingBackend::Failure::out_of_memory);
  {
    GrowableStorage storage(faulty, options);
    CHECK(storage.max_capacity() == 32 * granule);
    CHECK(faulty.calls(BackendOp::reserve) == 2);
  }
  faulty.fail_nth(1, {BackendOp::reserve}, FaultInjectingBackend::Failure::error);
  {
    GrowableStorage storage(faulty, options);
    CHECK(storage.max_capacity() == 32 * granule);
  }
  // At the floor the refusal reaches the caller, and nothing is left behind.
  options.max_capacity_bytes = 16 * granule;
  faulty.fail_nth(1, {BackendOp::reserve}, FaultInjectingBackend::Failure::out_of_memory);
  CHECK_THROWS_AS(GrowableStorage(faulty, options), OutOfMemory);
  CHECK(real.live_counts() == LiveCounts{});
}

TEST_CASE("clear and shrink_to_fit return every chunk", "[growable][host]") {
  HostBackend backend(small_granules());
  std::size_t const fds_before = test::open_fd_count();
  HostGrowableBuffer<std::uint16_t> buffer(backend, capped(32 * MiB));
  for (int step = 0; step < 40; ++step) buffer.resize(buffer.size() + granule / 4, 0xBEEF);  // many small steps
  std::size_t const chunks = buffer.storage().chunk_count();
  REQUIRE(chunks > 1);
  REQUIRE(backend.live_counts().bytes_physical == buffer.storage().capacity());

  buffer.resize(granule / 2 / 2);  // a quarter of a granule in use: one chunk stays
  buffer.shrink_to_fit();
  CHECK(buffer.storage().chunk_count() == 1);
  CHECK(buffer.stats().chunks_released == chunks - 1);
  CHECK(backend.live_counts().chunks == 1);
  CHECK(std::all_of(buffer.begin(), buffer.end(), [](std::uint16_t v) { return v == 0xBEEF; }));

  buffer.clear();
  buffer.shrink_to_fit();
  CHECK(buffer.capacity() == 0);
  CHECK(backend.live_counts().chunks == 0);
  CHECK(backend.live_counts().mappings == 0);
  CHECK(backend.live_counts().ranges == 1);  // the address range stays: data() never changes
  CHECK(test::open_fd_count() == fds_before);

  buffer.resize(10, 7);  // and it grows again at the same address
  CHECK(contents(buffer) == std::vector<std::uint16_t>(10, 7));
}

TEST_CASE("moves are noexcept and empty the source; copies take a stream and are independent",
          "[growable][host]") {
  static_assert(std::is_nothrow_move_constructible_v<HostGrowableBuffer<int>>);
  static_assert(std::is_nothrow_move_assignable_v<HostGrowableBuffer<int>>);
  static_assert(!std::is_copy_constructible_v<HostGrowableBuffer<int>>);
  HostBackend backend(small_granules());
  HostGrowableBuffer<int> a(backend, capped(8 * MiB));
  std::vector<int> const values{9, 8, 7, 6};
  a.append(values);
  int* const address = a.data();

  HostGrowableBuffer<int> b(std::move(a));
  CHECK(b.data() == address);
  CHECK(contents(b) == values);
  CHECK(a.size() == 0);
  CHECK(a.data() == nullptr);
  CHECK(a.capacity() == 0);
  CHECK(backend.live_counts().ranges == 1);

  HostGrowableBuffer<int> c(b, nullptr);
  CHECK(c.data() != b.data());
  CHECK(contents(c) == values);
  c.set_element(0, -1);
  CHECK(b.element(0) == 9);
  CHECK(backend.live_counts().ranges == 2);

  b.swap(c);
  CHECK(b.element(0) == -1);
  CHECK(c.data() == address);

  a = std::move(c);
  CHECK(a.data() == address);
  CHECK(contents(a) == values);
  CHECK(backend.live_counts().ranges == 2);
}

TEST_CASE("chunks are striped over the placement devices and access is granted to each",
          "[growable][host][multi-device]") {
  HostBackend backend(small_granules());
  GrowableOptions options = capped(64 * MiB);
  options.devices = {0, 1, 2};
  options.max_chunk_bytes = 2 * granule;
  HostGrowableBuffer<std::uint8_t> buffer(backend, options);
  buffer.resize(40 * granule, 1);  // twenty chunks of two granules
  const auto& chunks = buffer.storage().chunks();
  REQUIRE(chunks.size() == 20);
  for (std::size_t i = 0; i < chunks.size(); ++i) CHECK(chunks[i].device() == static_cast<int>(i % 3));
  CHECK(buffer.storage().options().access ==
        std::vector<AccessGrant>{{0, Access::read_write}, {1, Access::read_write}, {2, Access::read_write}});
}

TEST_CASE("a buffer needs a backend of its memory space", "[growable][host]") {
  HostBackend host(small_granules());
  CHECK_THROWS_AS(GrowableBuffer<int>(host, capped(granule)), Error);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("a default-constructed device buffer touches no driver until it grows", "[growable][host][traps]") {
  // Constructible anywhere: here there may be no driver at all (CI), and nothing is reserved.
  static_assert(std::is_nothrow_default_constructible_v<GrowableBuffer<int>>);
  GrowableBuffer<int> buffer;
  CHECK(buffer.reserved_bytes() == 0);
  CHECK(buffer.max_capacity() == 0);
  CHECK(buffer.data() == nullptr);
  CHECK(buffer.empty());
  CHECK_FALSE(buffer.storage().bound());
  GrowableBuffer<int> moved(std::move(buffer));
  CHECK(moved.data() == nullptr);
}
