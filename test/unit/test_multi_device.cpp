// Several devices in one address range, on the host backend with fake device ids (the host
// backend records the device a chunk was asked for and has one accessor, the CPU): placement of
// chunks (striped, balanced), the bytes per device, per-allocation access changed after growth
// and applied to later growth, bad device lists, and a failed access change that changes nothing.
#include <csignal>
#include <cstdint>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/host_backend.hpp>

#include "host_memory.hpp"
#include "observables.hpp"

using namespace cuvmm;
using cuvmm::test::protection_at;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;

GrowableOptions over(std::vector<int> devices, Placement placement) {
  GrowableOptions options;
  options.max_capacity_bytes = 256 * G;
  options.max_chunk_bytes = 8 * G;
  options.devices = std::move(devices);
  options.placement = placement;
  return options;
}

/// Whether writing `address` faults (asked of the kernel: mappings are not inherited across fork).
bool write_faults(Address address) { return test::write_refused(address); }

/// Grows the buffer in uneven steps, so chunk sizes differ (1 to 8 granules).
void grow_unevenly(HostGrowableBuffer<std::uint8_t>& buffer) {
  for (std::size_t granules : {1, 1, 3, 2, 7, 1, 12, 5, 20, 2, 30}) buffer.resize(buffer.size() + granules * G, 1);
}

}  // namespace

TEST_CASE("striped placement puts chunk i on devices[i % n], in the order listed", "[multi-device][host]") {
  HostBackend backend({.granularity = G});
  HostGrowableBuffer<std::uint8_t> buffer(backend, over({2, 0, 1}, Placement::striped));
  grow_unevenly(buffer);
  const auto& chunks = buffer.storage().chunks();
  REQUIRE(chunks.size() > 6);
  std::vector<int> const order{2, 0, 1};
  for (std::size_t i = 0; i < chunks.size(); ++i) CHECK(chunks[i].device() == order[i % 3]);
}

TEST_CASE("balanced placement puts each chunk on the device holding the fewest bytes so far", "[multi-device][host]") {
  HostBackend backend({.granularity = G});
  HostGrowableBuffer<std::uint8_t> buffer(backend, over({3, 1, 2}, Placement::balanced));
  grow_unevenly(buffer);
  const auto& chunks = buffer.storage().chunks();
  REQUIRE(chunks.size() > 6);
  std::vector<int> const devices{3, 1, 2};
  std::vector<std::size_t> held(3, 0);
  std::size_t largest = 0;
  for (const PhysicalChunk& chunk : chunks) {
    std::size_t const fewest = static_cast<std::size_t>(std::min_element(held.begin(), held.end()) - held.begin());
    CHECK(chunk.device() == devices[fewest]);  // min_element takes the first of equals: list order
    auto const at = static_cast<std::size_t>(std::find(devices.begin(), devices.end(), chunk.device()) - devices.begin());
    held[at] += chunk.size();
    largest = std::max(largest, chunk.size());
  }
  for (std::size_t i = 0; i < 3; ++i) CHECK(buffer.storage().bytes_on_device(devices[i]) == held[i]);
  CHECK(buffer.storage().bytes_on_device(0) == 0);
  CHECK(held[0] + held[1] + held[2] == buffer.storage().capacity());
  // Balanced: no device holds more than one chunk's worth beyond another.
  CHECK(*std::max_element(held.begin(), held.end()) - *std::min_element(held.begin(), held.end()) <= largest);
}

TEST_CASE("access granted to a peer after growth covers the mapped span and every later growth step",
          "[multi-device][host][access]") {
  HostBackend backend({.granularity = G});
  HostGrowableBuffer<std::uint8_t> buffer(backend, over({0, 1}, Placement::balanced));
  buffer.resize(10 * G, 7);
  CHECK(buffer.storage().options().access ==
        std::vector<AccessGrant>{{0, Access::read_write}, {1, Access::read_write}});

  std::size_t const calls_before = buffer.stats().access_calls;
  AccessGrant const peer_reads[] = {{4, Access::read}};
  buffer.grant_access(peer_reads);
  CHECK(buffer.storage().options().access ==
        std::vector<AccessGrant>{{0, Access::read_write}, {1, Access::read_write}, {4, Access::read}});
  CHECK(buffer.stats().access_calls == calls_before);  // growth steps only
  CHECK(protection_at(reinterpret_cast<Address>(buffer.data())) == "rw-s");

  // Every device but the reading peer loses write access: the host's one accessor can only read.
  AccessGrant const revoke[] = {{0, Access::none}, {1, Access::none}};
  buffer.grant_access(revoke);
  CHECK(buffer.storage().options().access ==
        std::vector<AccessGrant>{{0, Access::none}, {1, Access::none}, {4, Access::read}});
  Address const base = reinterpret_cast<Address>(buffer.data());
  CHECK(protection_at(base) == "r--s");
  CHECK(protection_at(base + 10 * G - 1) == "r--s");
  CHECK(write_faults(base));
  CHECK(buffer.data()[G + 3] == 7);  // still readable

  buffer.reserve(30 * G);  // later growth gets the changed grants too
  CHECK(protection_at(base + 29 * G) == "r--s");
  AccessGrant const restore[] = {{0, Access::read_write}};
  buffer.grant_access(restore);
  CHECK(protection_at(base + 29 * G) == "rw-s");
  CHECK_FALSE(write_faults(base));
}

TEST_CASE("a failed access change leaves the grants and the memory's protection as they were",
          "[multi-device][host][faults]") {
  HostBackend real({.granularity = G});
  FaultInjectingBackend faulty(real);
  GrowableStorage storage(faulty, over({0, 1}, Placement::striped));
  storage.reserve(12 * G);
  std::vector<AccessGrant> const before = storage.options().access;
  faulty.fail_nth(1, {BackendOp::set_access});
  AccessGrant const revoke[] = {{0, Access::read}, {1, Access::read}};
  CHECK_THROWS_AS(storage.grant_access(revoke), Error);
  CHECK(faulty.fired());
  CHECK(storage.options().access == before);
  CHECK(protection_at(storage.data()) == "rw-s");
  faulty.disarm();
}

TEST_CASE("a device list with duplicates or negative ids is a clear error and reserves nothing",
          "[multi-device][host]") {
  HostBackend backend({.granularity = G});
  auto const twice = test::thrown_by<Error>([&] { (void)GrowableStorage(backend, over({0, 1, 0}, Placement::striped)); });
  CHECK(twice.context() == "device 0 is listed twice in GrowableOptions::devices");
  auto const negative = test::thrown_by<Error>([&] { (void)GrowableStorage(backend, over({1, -2}, Placement::balanced)); });
  CHECK(negative.context() == "device -2 is negative");
  CHECK(backend.live_counts() == LiveCounts{});
}
