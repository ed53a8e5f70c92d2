// HostGrowableBuffer's std::vector-like surface: construction traps, element access,
// assign/append/insert/erase, ==, copy_to, reverse iterators and the error hierarchy, each checked
// against std::vector, plus a random model test over all of them. This file includes only
// host_growable_buffer.hpp: the host container must compile without Thrust or CUDA headers.
#include <cuvmm/host_growable_buffer.hpp>

#if defined(THRUST_VERSION) || defined(CUDART_VERSION) || defined(CUDA_VERSION)
#error "host_growable_buffer.hpp must not include Thrust or CUDA headers"
#endif

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <list>
#include <new>
#include <random>
#include <ranges>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include <cuvmm/host_backend.hpp>

using namespace cuvmm;

namespace {

constexpr std::size_t granule = 64 * KiB;

HostBackend::Options small_granules() { return {.granularity = granule}; }

GrowableOptions capped(std::size_t max_capacity) {
  GrowableOptions o;
  o.max_capacity_bytes = max_capacity;
  return o;
}

template <class T>
std::vector<T> contents(const HostGrowableBuffer<T>& b) {
  return std::vector<T>(b.begin(), b.end());
}

/// What a catch clause of type E would catch from `thrower`.
template <class E, class F>
bool caught_as(F&& thrower) {
  try {
    thrower();
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

}  // namespace

// --- traps -------------------------------------------------------------------------------------

TEST_CASE("a braced list of elements constructs those elements, never options", "[growable][host][traps]") {
  HostGrowableBuffer<int> const x({1, 2});
  CHECK(contents(x) == std::vector<int>{1, 2});
  HostGrowableBuffer<int> const y{1, 2, 3};
  CHECK(contents(y) == std::vector<int>{1, 2, 3});
  HostGrowableBuffer<int> const z = {7};
  CHECK(contents(z) == std::vector<int>{7});
  // Options are only ever taken explicitly, by their type.
  static_assert(!std::is_convertible_v<GrowableOptions, HostGrowableBuffer<int>>);
  HostGrowableBuffer<int> const w(capped(4 * MiB));
  CHECK(w.empty());
  CHECK(w.reserved_bytes() == 4 * MiB);
}

TEST_CASE("growth past the address range is a std::length_error, as std::vector past max_size()",
          "[growable][host][traps][errors]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint8_t> buffer(backend, capped(2 * granule));
  buffer.resize(2 * granule, 3);
  auto const grow = [&] { buffer.push_back(1); };
  CHECK(caught_as<CapacityExceeded>(grow));
  CHECK(caught_as<std::length_error>(grow));
  CHECK(caught_as<std::logic_error>(grow));
  CHECK(caught_as<std::exception>(grow));  // one std::exception base: the catch-all still catches it
  CHECK_FALSE(caught_as<std::bad_alloc>(grow));
  CHECK_FALSE(caught_as<Error>(grow));
  try {
    grow();
  } catch (const CapacityExceeded& e) {
    CHECK(e.is(ErrorCode::capacity_exceeded));
    CHECK(e.requested_bytes() == 2 * granule + 1);
    CHECK(e.max_capacity_bytes() == 2 * granule);
    CHECK(e.call() == "grow");
  }
  CHECK(buffer.size() == 2 * granule);  // and nothing changed
  CHECK(buffer[2 * granule - 1] == 3);
  // std::vector throws the same family past its max_size().
  CHECK(caught_as<std::length_error>([] { std::vector<std::uint8_t> v; v.reserve(v.max_size() + 1); }));
}

TEST_CASE("a default-constructed buffer reserves nothing until it first grows", "[growable][host][traps]") {
  static_assert(std::is_nothrow_default_constructible_v<HostGrowableBuffer<int>>);
  HostGrowableBuffer<int> buffer;
  CHECK(buffer.reserved_bytes() == 0);
  CHECK(buffer.max_capacity() == 0);
  CHECK(buffer.capacity() == 0);
  CHECK(buffer.data() == nullptr);
  CHECK(buffer.stats().max_capacity_bytes == 0);
  CHECK(!buffer.storage().bound());
  CHECK(buffer.begin() == buffer.end());

  buffer.push_back(5);  // the first growth reserves on the default host backend
  REQUIRE(buffer.storage().bound());
  CHECK(&buffer.backend() == &buffer.storage().backend());
  CHECK(buffer.reserved_bytes() > 0);
  int* const base = buffer.data();
  REQUIRE(base != nullptr);
  buffer.resize(100000, 9);
  CHECK(buffer.data() == base);
  CHECK(buffer.front() == 5);
  CHECK(buffer.back() == 9);

  // A default-constructed buffer that never grew moves, swaps and copies as an empty one.
  HostGrowableBuffer<int> other;
  HostGrowableBuffer<int> copy(other, nullptr);
  CHECK(copy.empty());
  CHECK(copy.reserved_bytes() == 0);
  other.swap(buffer);
  CHECK(other.data() == base);
  CHECK(buffer.data() == nullptr);
}

// --- construction ------------------------------------------------------------------------------

TEST_CASE("the (n), (n, value), range and list constructors give what std::vector gives", "[growable][host]") {
  HostGrowableBuffer<std::uint32_t> const n(1000);
  CHECK(n.size() == 1000);  // uninitialized, like resize(n) and rmm::device_uvector(n, stream)
  HostGrowableBuffer<std::uint32_t> const filled(1000, 0xABCD1234u);
  CHECK(contents(filled) == std::vector<std::uint32_t>(1000, 0xABCD1234u));
  HostGrowableBuffer<std::uint32_t> const zero(0, 7u, nullptr);
  CHECK(zero.empty());

  std::list<int> const source{4, 8, 15, 16, 23, 42};
  HostGrowableBuffer<double> const from_list(source.begin(), source.end());
  CHECK(contents(from_list) == std::vector<double>{4, 8, 15, 16, 23, 42});
  std::istringstream text("1 2 3");
  HostGrowableBuffer<int> const from_stream{std::istream_iterator<int>(text), std::istream_iterator<int>()};
  CHECK(contents(from_stream) == std::vector<int>{1, 2, 3});
  HostGrowableBuffer<int> const listed({9, 8, 7}, nullptr);
  CHECK(contents(listed) == std::vector<int>{9, 8, 7});
}

// --- element access ----------------------------------------------------------------------------

TEST_CASE("operator[], at, front and back read and write host elements; at checks the index",
          "[growable][host][access]") {
  HostGrowableBuffer<int> buffer{10, 20, 30};
  static_assert(std::is_same_v<HostGrowableBuffer<int>::reference, int&>);
  static_assert(std::is_same_v<HostGrowableBuffer<int>::const_reference, const int&>);
  buffer[1] = 21;
  buffer.at(2) += 1;
  buffer.front() = 11;
  buffer.back() *= 2;
  CHECK(contents(buffer) == std::vector<int>{11, 21, 62});
  CHECK(std::as_const(buffer).at(0) == 11);
  CHECK_THROWS_AS(buffer.at(3), std::out_of_range);
  CHECK_THROWS_AS(std::as_const(buffer).at(SIZE_MAX), std::out_of_range);
  CHECK(buffer.element_ptr(2) == buffer.data() + 2);
  CHECK_THROWS_AS(buffer.element_ptr(3), Error);
  CHECK(buffer.front_element() == 11);
  CHECK(buffer.back_element() == 62);
  buffer.set_element_async(0, -5, nullptr);
  CHECK(buffer[0] == -5);

  HostGrowableBuffer<int> empty;
  CHECK_THROWS_AS(empty.front(), Error);
  CHECK_THROWS_AS(empty.back(), Error);
  CHECK_THROWS_AS((void)empty.front_element(), Error);
  CHECK_THROWS_AS((void)empty.back_element(), Error);
  CHECK_THROWS_AS(empty.at(0), std::out_of_range);
}

TEST_CASE("reverse iterators walk the elements backwards", "[growable][host][access]") {
  HostGrowableBuffer<int> buffer{1, 2, 3, 4};
  CHECK(std::vector<int>(buffer.rbegin(), buffer.rend()) == std::vector<int>{4, 3, 2, 1});
  CHECK(std::vector<int>(buffer.crbegin(), buffer.crend()) == std::vector<int>{4, 3, 2, 1});
  *buffer.rbegin() = 40;
  CHECK(buffer.back() == 40);
}

TEST_CASE("== compares sizes and elements", "[growable][host]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<int> a(backend, capped(MiB));
  HostGrowableBuffer<int> b(backend, capped(2 * MiB));
  CHECK(a == b);
  a.append({1, 2, 3});
  CHECK(a != b);
  b.append({1, 2});
  CHECK(a != b);
  b.push_back(3);
  CHECK(a == b);
  b[2] = 4;
  CHECK(a != b);
}

TEST_CASE("copy_to copies every element out and refuses a destination too small", "[growable][host]") {
  HostGrowableBuffer<std::uint64_t> buffer{5, 6, 7};
  std::vector<std::uint64_t> out(5, 0xDEADBEEFDEADBEEFull);  // poisoned
  buffer.copy_to(std::span<std::uint64_t>(out), nullptr);
  CHECK(out == std::vector<std::uint64_t>{5, 6, 7, 0xDEADBEEFDEADBEEFull, 0xDEADBEEFDEADBEEFull});
  std::vector<std::uint64_t> small(2, 1);
  CHECK_THROWS_AS(buffer.copy_to(std::span<std::uint64_t>(small)), Error);
  CHECK(small == std::vector<std::uint64_t>{1, 1});  // nothing written
  CHECK(buffer.to_vector() == std::vector<std::uint64_t>{5, 6, 7});
}

// --- changing the contents ---------------------------------------------------------------------

TEST_CASE("insert and erase work at the end and are refused elsewhere, changing nothing",
          "[growable][host]") {
  HostGrowableBuffer<int> buffer{1, 2, 3};
  auto it = buffer.insert(buffer.end(), 4);
  CHECK(it == buffer.begin() + 3);
  it = buffer.insert(buffer.cend(), 2, 5);
  CHECK(it == buffer.begin() + 4);
  std::list<int> const more{6, 7};
  buffer.insert(buffer.end(), more.begin(), more.end());
  buffer.insert(buffer.end(), {8});
  CHECK(contents(buffer) == std::vector<int>{1, 2, 3, 4, 5, 5, 6, 7, 8});

  CHECK_THROWS_AS(buffer.insert(buffer.begin(), 0), Error);
  CHECK_THROWS_AS(buffer.insert(buffer.begin() + 1, 2, 0), Error);
  CHECK_THROWS_AS(buffer.erase(buffer.begin()), Error);
  CHECK_THROWS_AS(buffer.erase(buffer.begin(), buffer.begin() + 2), Error);
  CHECK(contents(buffer) == std::vector<int>{1, 2, 3, 4, 5, 5, 6, 7, 8});

  auto const after_last = buffer.erase(buffer.end() - 1);
  CHECK(after_last == buffer.end());
  auto const after_suffix = buffer.erase(buffer.begin() + 5, buffer.end());
  CHECK(after_suffix == buffer.end());
  CHECK(contents(buffer) == std::vector<int>{1, 2, 3, 4, 5});
  auto const after_empty = buffer.erase(buffer.end(), buffer.end());  // an empty suffix
  CHECK(after_empty == buffer.end());
  buffer.erase(buffer.begin(), buffer.end());
  CHECK(buffer.empty());
  CHECK_THROWS_AS(buffer.erase(buffer.end()), Error);
}

TEST_CASE("assign replaces the contents; a range too long throws before anything changes", "[growable][host]") {
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint32_t> buffer(backend, capped(granule));  // 16384 elements
  buffer.assign({1, 2, 3});
  CHECK(contents(buffer) == std::vector<std::uint32_t>{1, 2, 3});
  buffer.assign(5, 9u);
  CHECK(contents(buffer) == std::vector<std::uint32_t>(5, 9u));
  std::list<int> const source{4, 5};
  buffer.assign(source.begin(), source.end());
  CHECK(contents(buffer) == std::vector<std::uint32_t>{4, 5});

  std::vector<std::uint32_t> const too_long(granule / 4 + 1, 1);
  CHECK_THROWS_AS(buffer.assign(too_long.begin(), too_long.end()), CapacityExceeded);
  CHECK_THROWS_AS(buffer.assign(granule / 4 + 1, 1u), CapacityExceeded);
  CHECK(contents(buffer) == std::vector<std::uint32_t>{4, 5});  // strong for counted ranges
}

TEST_CASE("append and append_range take lists and any range", "[growable][host]") {
  HostGrowableBuffer<long> buffer;
  buffer.append({1, 2});
  buffer.append_range(std::vector<long>{3, 4});                     // contiguous: one copy
  buffer.append_range(std::list<int>{5, 6});                        // converted
  buffer.append_range(std::views::iota(7, 9));                      // a view
  buffer.append_range(std::views::iota(9) | std::views::take(2));   // not a common range
  std::istringstream text("11 12");
  buffer.append_range(std::ranges::subrange(std::istream_iterator<long>(text), std::istream_iterator<long>()));
  CHECK(contents(buffer) == std::vector<long>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
}

TEST_CASE("the std::vector surface matches std::vector through random operation sequences",
          "[growable][host][model]") {
  auto const seed = GENERATE(11u, 12u, 13u, 14u, 15u, 16u);
  HostBackend backend(small_granules());
  HostGrowableBuffer<std::uint16_t> buffer(backend, capped(4 * MiB));  // 2 Mi elements
  std::vector<std::uint16_t> model;
  std::mt19937 rng(seed);
  auto const value = [&] { return static_cast<std::uint16_t>(rng()); };
  auto const random_block = [&](std::size_t max) {
    std::vector<std::uint16_t> block(rng() % max);
    for (auto& x : block) x = value();
    return block;
  };

  for (int step = 0; step < 600; ++step) {
    int const op = static_cast<int>(rng() % 12);
    INFO("step " << step << " op " << op << " size " << model.size());
    switch (op) {
      case 0: {
        std::uint16_t const v = value();
        buffer.insert(buffer.end(), v);
        model.insert(model.end(), v);
        break;
      }
      case 1: {
        std::size_t const n = rng() % 3000;
        std::uint16_t const v = value();
        buffer.insert(buffer.cend(), n, v);
        model.insert(model.end(), n, v);
        break;
      }
      case 2: {
        std::vector<std::uint16_t> const block = random_block(20000);
        std::list<std::uint16_t> const as_list(block.begin(), block.end());
        buffer.append_range(as_list);
        model.insert(model.end(), block.begin(), block.end());
        break;
      }
      case 3: {
        std::uint16_t const a = value(), b = value();
        buffer.append({a, b});
        model.insert(model.end(), {a, b});
        break;
      }
      case 4:
        if (!model.empty()) {
          std::size_t const keep = rng() % (model.size() + 1);
          buffer.erase(buffer.begin() + static_cast<std::ptrdiff_t>(keep), buffer.end());
          model.erase(model.begin() + static_cast<std::ptrdiff_t>(keep), model.end());
        }
        break;
      case 5:
        if (!model.empty()) {
          buffer.erase(buffer.end() - 1);
          model.erase(model.end() - 1);
        }
        break;
      case 6:
        if (rng() % 4 == 0) {
          std::vector<std::uint16_t> const block = random_block(50000);
          buffer.assign(block.begin(), block.end());
          model.assign(block.begin(), block.end());
        }
        break;
      case 7:
        if (rng() % 4 == 0) {
          std::size_t const n = rng() % 40000;
          std::uint16_t const v = value();
          buffer.assign(n, v);
          model.assign(n, v);
        }
        break;
      case 8:
        if (!model.empty()) {
          std::size_t const i = rng() % model.size();
          std::uint16_t const v = value();
          buffer[i] = v;
          model[i] = v;
          REQUIRE(buffer.at(i) == model.at(i));
          REQUIRE(buffer.front() == model.front());
          REQUIRE(buffer.back() == model.back());
        }
        break;
      case 9: {  // refused mid-sequence insert/erase change nothing
        if (!model.empty()) {
          CHECK_THROWS_AS(buffer.insert(buffer.begin(), value()), Error);
          CHECK_THROWS_AS(buffer.erase(buffer.begin(), buffer.end() - 1), Error);
        }
        break;
      }
      case 10: {
        std::size_t const n = rng() % 60000;
        std::uint16_t const v = value();
        buffer.resize(n, v);
        model.resize(n, v);
        break;
      }
      case 11:
        if (!model.empty()) {
          buffer.pop_back();
          model.pop_back();
        }
        break;
    }
    REQUIRE(buffer.size() == model.size());
    REQUIRE(std::equal(buffer.begin(), buffer.end(), model.begin(), model.end()));
    REQUIRE(std::equal(buffer.rbegin(), buffer.rend(), model.rbegin(), model.rend()));
  }
  std::vector<std::uint16_t> out(model.size() + 1, 0xA5A5);
  buffer.copy_to(std::span<std::uint16_t>(out));
  CHECK(std::equal(model.begin(), model.end(), out.begin()));
  CHECK(out.back() == 0xA5A5);
  HostGrowableBuffer<std::uint16_t> same(backend, capped(4 * MiB));
  same.append(std::span<const std::uint16_t>(model));
  CHECK(buffer == same);
}

TEST_CASE("a min_capacity_bytes that overflows when rounded to the granularity is refused", "[growable][host][options]") {
  HostBackend backend(small_granules());
  GrowableOptions o = capped(16 * granule);
  o.min_capacity_bytes = std::numeric_limits<std::size_t>::max() - granule + 2;  // rounds past 2^64
  try {
    HostGrowableBuffer<int> buffer(backend, o);
    buffer.reserve(1);
    FAIL("min_capacity_bytes " << o.min_capacity_bytes << " was taken");
  } catch (const Error& e) {
    CHECK(e.is(ErrorCode::invalid_argument));
    CHECK(e.context() == "min_capacity_bytes " + std::to_string(o.min_capacity_bytes) +
                             " cannot be rounded to the granularity " + std::to_string(granule));
  }
  CHECK(backend.live_counts() == LiveCounts{});
  o.min_capacity_bytes = 4 * granule;  // an ordinary floor is still taken
  HostGrowableBuffer<int> fine(backend, o);
  fine.reserve(1);
  CHECK(fine.max_capacity() * sizeof(int) == 16 * granule);
}
