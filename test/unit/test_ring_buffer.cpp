// HostRingBuffer / RingStorage on the host backend: the doubled mapping, windows across the wrap
// point, capacity rounding, bad input, and failures at every backend call (leaks counted on the
// real backend and /proc/self/fd). RingBuffer<T> is the same template on device memory; the gpu
// suite proves it there.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/ring_buffer.hpp>

#include "host_memory.hpp"
#include "observables.hpp"

using namespace cuvmm;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;

HostBackend::Options small_granules(std::size_t physical_limit = 0) {
  return {.granularity = G, .physical_limit = physical_limit};
}

struct Triple {  // 12 bytes: does not divide the granularity
  std::uint32_t a, b, c;
  friend bool operator==(const Triple&, const Triple&) = default;
};

std::vector<std::uint32_t> random_words(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = static_cast<std::uint32_t>(rng());
  return v;
}

}  // namespace

TEST_CASE("a ring's capacity is rounded to whole granules and whole elements", "[ring][host]") {
  HostBackend backend(small_granules());
  HostRingBuffer<std::uint32_t> const words(backend, 1);
  CHECK(words.capacity() == G / 4);
  CHECK(words.storage().capacity() == G);
  CHECK(words.storage().range().size() == 2 * G);

  HostRingBuffer<std::uint32_t> const more(backend, G / 4 + 1);
  CHECK(more.capacity() == 2 * G / 4);

  // 12-byte elements: a copy must hold whole elements, so it is lcm(64 KiB, 12) = 3 granules.
  HostRingBuffer<Triple> const triples(backend, 10);
  CHECK(triples.storage().capacity() == 3 * G);
  CHECK(triples.capacity() == 3 * G / 12);
  CHECK(backend.live_counts().chunks == 3);
  CHECK(backend.live_counts().mappings == 6);
}

TEST_CASE("the second copy of a ring is the first: writes through either are seen through the other",
          "[ring][host]") {
  HostBackend backend(small_granules());
  {
    HostRingBuffer<std::uint32_t> ring(backend, 3 * G / 4);
    std::size_t const n = ring.capacity();
    REQUIRE(n == 3 * G / 4);
    std::uint32_t* const first = ring.data();
    std::uint32_t* const second = ring.data() + n;
    std::fill(first, first + 2 * n, 0xCDCDCDCDu);  // poison: the last fill wins in both copies

    auto const a = random_words(n, 21);
    std::copy(a.begin(), a.end(), first);
    CHECK(std::equal(a.begin(), a.end(), second));
    auto const b = random_words(n, 22);
    std::copy(b.begin(), b.end(), second);
    CHECK(std::equal(b.begin(), b.end(), first));
    CHECK(std::vector<std::uint32_t>(ring.begin(), ring.end()) == b);
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a window across the wrap point is contiguous and aliases the ring's first and last elements",
          "[ring][host][wrap]") {
  HostBackend backend(small_granules());
  HostRingBuffer<Triple> ring(backend, 1);
  std::size_t const n = ring.capacity();
  std::fill(ring.begin(), ring.end(), Triple{0xCDCDCDCD, 0xCDCDCDCD, 0xCDCDCDCD});
  std::size_t const count = GENERATE(1, 7, 1000);
  std::size_t const before_wrap = GENERATE(0, 3, 999);
  std::size_t const first = n - std::min(before_wrap, count);  // `count` elements, some before the wrap
  CAPTURE(n, count, first);

  auto window = ring.window(first, count);
  REQUIRE(window.size() == count);
  CHECK(window.data() == ring.data() + first % n);  // first == n (nothing before the wrap) is index 0
  CHECK(window.begin() == window.data());
  CHECK(window.end() == window.data() + count);
  auto const words = random_words(3 * count, 23);
  for (std::size_t i = 0; i < count; ++i) window.span()[i] = Triple{words[3 * i], words[3 * i + 1], words[3 * i + 2]};

  // Each element of the window is the ring's element at its index modulo the capacity.
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t const index = (first + i) % n;
    CHECK(ring.data()[index] == window.data()[i]);
    CHECK(ring.view()[first + i] == window.data()[i]);
  }
  // Indices past the capacity wrap too: the window at first + n is the same window.
  CHECK(ring.window(first + n, count).data() == window.data());
  CHECK(ring.view().window(first + 5 * n) == window.data());
}

TEST_CASE("standard algorithms sort a window across the wrap in place", "[ring][host][wrap]") {
  HostBackend backend(small_granules());
  HostRingBuffer<std::uint32_t> ring(backend, 1);
  std::size_t const n = ring.capacity();
  auto const values = random_words(n, 24);
  std::copy(values.begin(), values.end(), ring.begin());
  std::size_t const first = n - 100;
  auto window = ring.window(first, 300);  // 100 elements before the wrap, 200 after
  std::sort(window.begin(), window.end());

  std::vector<std::uint32_t> expected(values.end() - 100, values.end());
  expected.insert(expected.end(), values.begin(), values.begin() + 200);
  std::sort(expected.begin(), expected.end());
  for (std::size_t i = 0; i < 300; ++i) CHECK(ring.view()[first + i] == expected[i]);
  // Elements outside the window kept their values.
  CHECK(std::equal(values.begin() + 200, values.end() - 100, ring.data() + 200));
}

TEST_CASE("bad ring sizes and windows are clear errors and leave nothing behind", "[ring][host]") {
  HostBackend backend(small_granules());
  auto const zero = test::thrown_by<Error>([&] { (void)HostRingBuffer<int>(backend, 0); });
  CHECK(zero.context() == "the capacity must be at least one element");
  CHECK_THROWS_AS(HostRingBuffer<int>(backend, SIZE_MAX / 2), CapacityExceeded);
  CHECK_THROWS_AS(RingBuffer<int>(backend, 16), Error);  // a device ring on a host backend
  CHECK_THROWS_AS(RingStorage(backend, 64, 0), Error);
  CHECK(backend.live_counts() == LiveCounts{});

  HostRingBuffer<int> ring(backend, 16);
  auto const long_window = test::thrown_by<Error>([&] { (void)ring.window(3, ring.capacity() + 1); });
  CHECK(long_window.context() == "a window of " + std::to_string(ring.capacity() + 1) +
                                     " elements is longer than the capacity " + std::to_string(ring.capacity()));
  CHECK(ring.window(3, ring.capacity()).size() == ring.capacity());
}

TEST_CASE("a ring that does not fit the memory throws OutOfMemory and leaks nothing", "[ring][host][oom]") {
  HostBackend backend(small_granules(4 * G));
  CHECK_THROWS_AS(HostRingBuffer<std::uint8_t>(backend, 5 * G), OutOfMemory);
  CHECK(backend.live_counts() == LiveCounts{});
  HostRingBuffer<std::uint8_t> const fits(backend, 4 * G);
  CHECK(fits.capacity() == 4 * G);
}

TEST_CASE("moving a ring moves its memory; the source is left empty", "[ring][host]") {
  HostBackend backend(small_granules());
  HostRingBuffer<std::uint32_t> a(backend, 1);
  a.data()[7] = 0xABCDEF01u;
  std::uint32_t* const address = a.data();
  HostRingBuffer<std::uint32_t> b(std::move(a));
  CHECK(a.capacity() == 0);
  CHECK(a.data() == nullptr);
  CHECK_THROWS_AS(a.window(0, 0), Error);
  CHECK(b.data() == address);
  CHECK(b.data()[b.capacity() + 7] == 0xABCDEF01u);
  HostRingBuffer<std::uint32_t> c(backend, 1);
  c = std::move(b);
  CHECK(c.data() == address);
  CHECK(backend.live_counts().chunks == 1);
  CHECK(backend.live_counts().mappings == 2);
  CHECK(backend.live_counts().ranges == 1);
}

TEST_CASE("failing any backend call while making a ring leaks nothing", "[ring][host][faults]") {
  auto const failure = GENERATE(FaultInjectingBackend::Failure::error, FaultInjectingBackend::Failure::out_of_memory);
  HostBackend real(small_granules());
  FaultInjectingBackend faulty(real);
  std::size_t const fds_before = cuvmm::test::open_fd_count();
  std::size_t const k = test::fail_each_call_in_turn(
      faulty, failure,
      [&] {
        HostRingBuffer<std::uint64_t> ring(faulty, 3 * G / 8);
        ring.data()[0] = 42;
        CHECK(ring.data()[ring.capacity()] == 42);
      },
      [&] {
        CHECK(real.live_counts() == LiveCounts{});
        CHECK(cuvmm::test::open_fd_count() == fds_before);
      });
  CHECK(k == 7);  // reserve, create, chunk_info, map, map, set_access; the seventh attempt succeeds
}
