// The process's budget for default-sized reservations (DefaultReservationLimits, DESIGN invariant 5),
// on the host backend, whose address space is the real Linux one: default buffers get the
// device's size while the budget lasts, then the fallback size; the budget comes back when a
// buffer goes, follows moves, and buffers that chose their size are never counted.
#include <catch2/catch_test_macros.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include <cuvmm/host_backend.hpp>
#include <cuvmm/host_growable_buffer.hpp>

using namespace cuvmm;

namespace {

constexpr std::size_t granule = 64 * KiB;

/// Sets the process's limits for one test case and puts the previous ones back.
class LimitsScope {
 public:
  explicit LimitsScope(DefaultReservationLimits limits) : saved_(default_reservation_limits()) {
    set_default_reservation_limits(limits);
  }
  LimitsScope(const LimitsScope&) = delete;
  LimitsScope& operator=(const LimitsScope&) = delete;
  ~LimitsScope() { set_default_reservation_limits(saved_); }

 private:
  DefaultReservationLimits saved_;
};

/// What a default buffer reserves on `backend` within the budget: the device's memory, in granules.
std::size_t device_bytes(HostBackend& backend) {
  std::size_t const total = backend.memory_info(0).total;
  return (total + granule - 1) / granule * granule;
}

}  // namespace

TEST_CASE("the default limits are half of a 128 TiB address space, then 4 GiB per buffer", "[growable][host][budget]") {
  DefaultReservationLimits const limits = default_reservation_limits();
  CHECK(limits.budget_bytes == 64 * (std::size_t{1} << 40));
  CHECK(limits.fallback_bytes == 4 * GiB);
  CHECK(default_reserved_bytes() == 0);
}

TEST_CASE("default buffers past the budget reserve the fallback size; a freed one gives its share back",
          "[growable][host][budget]") {
  HostBackend backend({.granularity = granule});
  std::size_t const full = device_bytes(backend);
  LimitsScope const scope({.budget_bytes = 3 * full, .fallback_bytes = 8 * MiB + 1});  // rounds up to 8 MiB + a granule
  std::size_t const fallback = 8 * MiB + granule;
  {
    std::vector<HostGrowableBuffer<std::uint32_t>> buffers;
    for (std::uint32_t i = 0; i < 5; ++i) buffers.emplace_back(backend).append({i, 0xA5A5A5A5u - i});
    CHECK(default_reserved_bytes() == 3 * full);
    for (std::uint32_t i = 0; i < 5; ++i) {
      INFO("buffer " << i);
      CHECK(buffers[i].reserved_bytes() == (i < 3 ? full : fallback));
      CHECK(buffers[i].max_capacity() == (i < 3 ? full : fallback) / sizeof(std::uint32_t));
      CHECK(buffers[i].to_vector() == std::vector<std::uint32_t>{i, 0xA5A5A5A5u - i});
    }
    // A fallback buffer holds what it says and no more.
    buffers[4].resize(buffers[4].max_capacity(), 0x5A5A5A5Au);
    CHECK(buffers[4][0] == 4u);
    CHECK_THROWS_AS(buffers[4].push_back(1), CapacityExceeded);
    CHECK(buffers[4].size() == fallback / sizeof(std::uint32_t));

    buffers.erase(buffers.begin());  // one default-sized range goes: its share comes back
    CHECK(default_reserved_bytes() == 2 * full);
    CHECK(buffers.emplace_back(backend).reserved_bytes() == full);
    CHECK(default_reserved_bytes() == 3 * full);
    CHECK(backend.live_counts().ranges == 5);
  }
  CHECK(default_reserved_bytes() == 0);
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a budget share follows its buffer through moves and is given back once", "[growable][host][budget]") {
  HostBackend backend({.granularity = granule});
  std::size_t const full = device_bytes(backend);
  LimitsScope const scope({.budget_bytes = 2 * full, .fallback_bytes = 4 * MiB});
  HostGrowableBuffer<int> a(backend);
  a.push_back(7);
  HostGrowableBuffer<int> b(std::move(a));  // the share moves with the range
  CHECK(default_reserved_bytes() == full);
  HostGrowableBuffer<int> c(backend);
  c.push_back(9);
  CHECK(default_reserved_bytes() == 2 * full);
  c = std::move(b);  // c's own range and share go; b's come over
  CHECK(default_reserved_bytes() == full);
  CHECK(c[0] == 7);
  HostGrowableBuffer<int> d(backend);  // within the budget again
  CHECK(d.reserved_bytes() == full);
  CHECK(default_reserved_bytes() == 2 * full);
}

TEST_CASE("buffers that choose their size or a pool are not counted against the budget", "[growable][host][budget]") {
  HostBackend backend({.granularity = granule});
  std::size_t const full = device_bytes(backend);
  LimitsScope const scope({.budget_bytes = full, .fallback_bytes = 4 * MiB});
  GrowableOptions sized;
  sized.max_capacity_bytes = 16 * MiB;
  HostGrowableBuffer<int> chosen(backend, sized);
  ReservationPool pool(backend, {.slot_bytes = 1 * MiB, .slots_per_reservation = 4});
  GrowableOptions pooled;
  pooled.reservation_pool = &pool;
  HostGrowableBuffer<int> on_pool(backend, pooled);
  CHECK(default_reserved_bytes() == 0);
  CHECK(chosen.reserved_bytes() == 16 * MiB);
  CHECK(on_pool.reserved_bytes() == 1 * MiB);
  HostGrowableBuffer<int> first(backend);  // takes the whole budget
  HostGrowableBuffer<int> second(backend);
  CHECK(first.reserved_bytes() == full);
  CHECK(second.reserved_bytes() == 4 * MiB);
  CHECK(default_reserved_bytes() == full);
}

TEST_CASE("a budget that a device-sized range would pass, or none at all, gives every default buffer the fallback",
          "[growable][host][budget]") {
  HostBackend backend({.granularity = granule});
  std::size_t const full = device_bytes(backend);
  LimitsScope const scope({.budget_bytes = full - granule, .fallback_bytes = 2 * MiB});
  HostGrowableBuffer<int> a(backend);
  CHECK(a.reserved_bytes() == 2 * MiB);
  set_default_reservation_limits({.budget_bytes = 0, .fallback_bytes = 0});  // 0: one granule
  HostGrowableBuffer<int> b(backend);
  CHECK(b.reserved_bytes() == granule);
  CHECK(default_reserved_bytes() == 0);
}

TEST_CASE("3000 default buffers all get a range and keep their data", "[growable][host][budget]") {
  HostBackend backend({.granularity = granule});
  std::size_t const full = device_bytes(backend);
  LimitsScope const scope({.budget_bytes = 10 * full, .fallback_bytes = 1 * MiB});
  std::vector<HostGrowableBuffer<std::uint32_t>> buffers;
  buffers.reserve(3000);
  auto const has_data = [](std::uint32_t i) { return i % 16 == 5; };  // each host chunk is a memfd
  for (std::uint32_t i = 0; i < 3000; ++i) {
    buffers.emplace_back(backend);
    if (has_data(i)) buffers.back().append({i, ~i});
  }
  std::size_t full_sized = 0;
  for (std::uint32_t i = 0; i < 3000; ++i) {
    full_sized += buffers[i].reserved_bytes() == full ? 1 : 0;
    if (i >= 10) REQUIRE(buffers[i].reserved_bytes() == 1 * MiB);
    if (has_data(i)) REQUIRE(buffers[i].to_vector() == std::vector<std::uint32_t>{i, ~i});
  }
  CHECK(full_sized == 10);
  CHECK(backend.live_counts().ranges == 3000);
}

TEST_CASE("past the budget a default buffer reserves at least its min_capacity_bytes", "[growable][host][budget]") {
  HostBackend backend({.granularity = granule});
  LimitsScope const scope({.budget_bytes = 0, .fallback_bytes = 1 * MiB});
  GrowableOptions options;
  options.min_capacity_bytes = 3 * MiB;
  HostGrowableBuffer<int> b(backend, options);
  CHECK(b.reserved_bytes() == 3 * MiB);
  CHECK(default_reserved_bytes() == 0);
}
