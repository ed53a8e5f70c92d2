// ReservationPool on the host backend (its address space is the real Linux one): thousands of
// buffers in a few reservations, slots reused, limits and failures, lifetimes.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/host_growable_buffer.hpp>
#include <cuvmm/reservation_pool.hpp>

using namespace cuvmm;

namespace {

constexpr std::size_t granule = 64 * KiB;

GrowableOptions on_pool(ReservationPool& pool) {
  GrowableOptions o;
  o.reservation_pool = &pool;
  return o;
}

}  // namespace

TEST_CASE("4096 buffers on a pool cost 16 reservations of 256 slots, and freed slots are reused",
          "[growable][host][pool]") {
  HostBackend backend({.granularity = granule});
  {
    ReservationPool pool(backend, {.slot_bytes = 1 * MiB, .slots_per_reservation = 256});
    CHECK(pool.reservations() == 0);  // nothing until the first buffer
    std::vector<HostGrowableBuffer<std::uint32_t>> buffers;
    buffers.reserve(4096);
    // Data in every 16th buffer only: each host chunk is a memfd, and CI may allow 1024 fds.
    auto const has_data = [](std::uint32_t i) { return i % 16 == 3; };
    for (std::uint32_t i = 0; i < 4096; ++i) {
      buffers.emplace_back(backend, on_pool(pool));
      if (has_data(i)) buffers.back().append({i, i * 7u + 1});
    }
    CHECK(pool.reservations() == 16);
    CHECK(pool.slots_in_use() == 4096);
    LiveCounts const live = backend.live_counts();
    CHECK(live.ranges == 16);                          // not 4096
    CHECK(live.bytes_reserved == 4096 * MiB);          // 1 MiB of address space each
    CHECK(live.chunks == 256);
    std::set<const std::uint32_t*> addresses;  // data() is known before the first growth
    for (std::uint32_t i = 0; i < 4096; ++i) {
      const auto& b = buffers[i];
      REQUIRE(b.reserved_bytes() == 1 * MiB);
      REQUIRE(b.max_capacity() == 1 * MiB / 4);
      REQUIRE(b.storage().pooled());
      if (has_data(i)) {
        REQUIRE(b[0] == i);
        REQUIRE(b[1] == i * 7u + 1);
      }
      addresses.insert(b.data());
    }
    CHECK(addresses.size() == 4096);
    // Slots never overlap: each buffer can fill its whole slot without touching its neighbours.
    buffers[98].resize(buffers[98].max_capacity(), 0xFFFFFFFFu);
    CHECK(buffers[99][0] == 99);
    CHECK(buffers[83][1] == 83 * 7u + 1);

    // Half go away; as many new ones reuse their slots: no new reservation.
    buffers.erase(buffers.begin(), buffers.begin() + 2048);
    CHECK(pool.slots_in_use() == 2048);
    for (int i = 0; i < 2048; ++i) buffers.emplace_back(backend, on_pool(pool));
    CHECK(pool.reservations() == 16);
    CHECK(backend.live_counts().ranges == 16);
    buffers.emplace_back(backend, on_pool(pool)).push_back(6);  // the 4097th: one more slab
    CHECK(pool.reservations() == 17);
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("without a pool every buffer is a reservation of its own", "[growable][host][pool]") {
  // What the pool saves: the same 1 MiB buffers, one reservation each.
  HostBackend backend({.granularity = granule});
  std::vector<HostGrowableBuffer<std::uint32_t>> buffers;
  GrowableOptions options;
  options.max_capacity_bytes = 1 * MiB;
  for (int i = 0; i < 1024; ++i) buffers.emplace_back(backend, options).push_back(1);
  CHECK(backend.live_counts().ranges == 1024);
}

TEST_CASE("a pooled buffer cannot grow past its slot, and asks for no more than the slot",
          "[growable][host][pool]") {
  HostBackend backend({.granularity = granule});
  ReservationPool pool(backend, {.slot_bytes = 4 * granule, .slots_per_reservation = 4});
  HostGrowableBuffer<std::uint8_t> buffer(backend, on_pool(pool));
  buffer.resize(4 * granule, 0x11);
  CHECK_THROWS_AS(buffer.push_back(1), std::length_error);
  CHECK(buffer.size() == 4 * granule);
  CHECK(buffer.back() == 0x11);

  GrowableOptions limited = on_pool(pool);
  limited.max_capacity_bytes = granule + 1;  // rounded to two granules, within the slot
  HostGrowableBuffer<std::uint8_t> small(backend, limited);
  CHECK(small.reserved_bytes() == 2 * granule);
  CHECK_THROWS_AS(small.resize(2 * granule + 1), CapacityExceeded);

  std::size_t const in_use = pool.slots_in_use();
  limited.max_capacity_bytes = 4 * granule + 1;  // more than a slot
  CHECK_THROWS_AS(HostGrowableBuffer<std::uint8_t>(backend, limited), Error);
  HostBackend other({.granularity = granule});
  CHECK_THROWS_AS(HostGrowableBuffer<std::uint8_t>(other, on_pool(pool)), Error);  // another backend
  CHECK(pool.slots_in_use() == in_use);  // refused buffers took no slot
  CHECK(other.live_counts() == LiveCounts{});

  CHECK_THROWS_AS(ReservationPool(backend, {.slot_bytes = 0}), Error);
  CHECK_THROWS_AS(ReservationPool(backend, {.slot_bytes = SIZE_MAX / 2, .slots_per_reservation = 4}), Error);
}

TEST_CASE("a pooled buffer may outlive its pool object; moves keep its slot", "[growable][host][pool]") {
  HostBackend backend({.granularity = granule});
  auto pool = std::make_unique<ReservationPool>(backend, ReservationPoolOptions{.slot_bytes = 1 * MiB,
                                                                               .slots_per_reservation = 8});
  HostGrowableBuffer<int> a(backend, on_pool(*pool));
  a.append({1, 2, 3});
  int* const address = a.data();
  HostGrowableBuffer<int> b(backend, on_pool(*pool));
  b.push_back(9);
  pool.reset();  // the slab stays while slots are leased
  CHECK(backend.live_counts().ranges == 1);
  a.resize(100000, 4);  // and keeps growing in its slot
  CHECK(a.data() == address);

  HostGrowableBuffer<int> moved(std::move(a));
  CHECK(moved.data() == address);
  CHECK(moved[2] == 3);
  b = std::move(moved);  // b's old slot goes back, before the slab can go
  CHECK(b.data() == address);
  CHECK(b[99999] == 4);
  CHECK(backend.live_counts().ranges == 1);
  b = HostGrowableBuffer<int>();
  CHECK(backend.live_counts() == LiveCounts{});  // the last slot freed the slab
}

TEST_CASE("a refused slab reservation changes nothing; the next acquire reserves it", "[growable][host][pool]") {
  HostBackend real({.granularity = granule});
  FaultInjectingBackend faulty(real);
  ReservationPool pool(faulty, {.slot_bytes = 1 * MiB, .slots_per_reservation = 2});
  faulty.fail_nth(1, {BackendOp::reserve}, FaultInjectingBackend::Failure::out_of_memory);
  CHECK_THROWS_AS(HostGrowableBuffer<int>(faulty, on_pool(pool)), OutOfMemory);
  CHECK(pool.reservations() == 0);
  CHECK(pool.slots_in_use() == 0);
  CHECK(real.live_counts() == LiveCounts{});
  faulty.disarm();
  HostGrowableBuffer<int> buffer(faulty, on_pool(pool));
  buffer.push_back(1);
  CHECK(pool.reservations() == 1);
  CHECK(faulty.calls(BackendOp::reserve) == 2);
}

TEST_CASE("threads lease and return slots of one pool concurrently", "[growable][host][pool]") {
  HostBackend backend({.granularity = granule});
  {
    ReservationPool pool(backend, {.slot_bytes = 1 * MiB, .slots_per_reservation = 64});
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int round = 0; round < 50; ++round) {
          std::vector<HostGrowableBuffer<int>> mine;
          for (int i = 0; i < 16; ++i) mine.emplace_back(backend, on_pool(pool));
          mine[round % 16].push_back(t * 1000 + round);
          if (mine[round % 16][0] != t * 1000 + round) ++wrong;
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(wrong == 0);
    CHECK(pool.slots_in_use() == 0);
    CHECK(pool.reservations() >= 1);
    CHECK(pool.reservations() <= 2);  // at most 64 slots are ever in use at once
  }
  CHECK(backend.live_counts() == LiveCounts{});
}
