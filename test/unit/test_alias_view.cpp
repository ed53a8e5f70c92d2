// AliasView on the host backend: the same chunks at a second address (read-write and read-only),
// views of a growable buffer, the ownership rule (a view keeps the memory it mapped), bad input,
// and failures at every backend call, with leaks counted on the real backend and /proc/self/fd.
#include <csignal>
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <cuvmm/alias_view.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/host_backend.hpp>

#include "host_memory.hpp"
#include "observables.hpp"

using namespace cuvmm;
using cuvmm::test::protection_at;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::write_bytes;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr AccessGrant read_write[] = {{0, Access::read_write}};
constexpr AccessGrant read_only[] = {{0, Access::read}};

HostBackend::Options small_granules(std::size_t physical_limit = 0) {
  return {.granularity = G, .physical_limit = physical_limit};
}

/// Chunks of 1, 3 and 2 granules mapped side by side at an "owner" range: what a view aliases.
struct Owner {
  AddressRange range;
  std::vector<PhysicalChunk> chunks;
  std::vector<Mapping> mappings;
};

Owner make_owner(Backend& backend) {
  Owner owner{AddressRange(backend, 6 * G), {}, {}};
  std::size_t offset = 0;
  for (std::size_t granules : {1, 3, 2}) {
    owner.chunks.emplace_back(backend, granules * G);
    offset += granules * G;
  }
  offset = 0;
  for (const PhysicalChunk& chunk : owner.chunks) {
    owner.mappings.emplace_back(owner.range, offset, chunk);
    offset += chunk.size();
  }
  set_access(owner.mappings, read_write);
  return owner;
}

/// Whether writing `address` faults (asked of the kernel: mappings are not inherited across fork).
bool write_faults(Address address) { return cuvmm::test::write_refused(address); }

}  // namespace

TEST_CASE("an alias view shows the same bytes as the chunks' owner, both ways", "[alias][host]") {
  HostBackend backend(small_granules());
  {
    Owner const owner = make_owner(backend);
    AliasView const view(owner.chunks, read_write);
    REQUIRE(view.size() == 6 * G);
    CHECK(view.chunk_count() == 3);
    CHECK(view.data() != owner.range.base());
    CHECK(view.access(0) == Access::read_write);
    CHECK(backend.live_counts().mappings == 6);
    CHECK(backend.live_counts().chunks == 3);

    auto const first = random_bytes(6 * G, 1);
    write_bytes(owner.range.base(), first);
    CHECK(read_bytes(view.data(), 6 * G) == first);
    auto const second = random_bytes(6 * G, 2);
    write_bytes(view.data(), second);
    CHECK(read_bytes(owner.range.base(), 6 * G) == second);
  }
  CHECK(backend.live_counts() == LiveCounts{});
}

TEST_CASE("a read-only alias reads the data, a write through it kills the writer with SIGSEGV",
          "[alias][host][read-only]") {
  HostBackend backend(small_granules());
  Owner const owner = make_owner(backend);
  AliasView const view(owner.chunks, read_only);
  CHECK(view.access(0) == Access::read);
  CHECK(protection_at(view.data()) == "r--s");
  CHECK(protection_at(owner.range.base()) == "rw-s");
  auto const data = random_bytes(6 * G, 3);
  write_bytes(owner.range.base(), data);
  CHECK(read_bytes(view.data(), 6 * G) == data);
  CHECK(write_faults(view.data()));
  CHECK(write_faults(view.data() + 6 * G - 1));
  CHECK(read_bytes(view.data(), 6 * G) == data);   // the failed writes changed nothing
  // The owner's alias stays writable, and the child's write lands in the shared memory: the view sees it.
  CHECK_FALSE(write_faults(owner.range.base()));
  auto written = data;
  written[0] = std::byte{0x5A};
  CHECK(read_bytes(view.data(), 6 * G) == written);
}

TEST_CASE("a view of a growable buffer covers what it has mapped, read-only on request", "[alias][host]") {
  HostBackend backend(small_granules());
  GrowableOptions options;
  options.max_capacity_bytes = 64 * G;
  options.max_chunk_bytes = 2 * G;
  HostGrowableBuffer<std::uint64_t> buffer(backend, options);
  auto const bytes = random_bytes(7 * G, 4);
  std::vector<std::uint64_t> words(bytes.size() / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  buffer.append(words);
  REQUIRE(buffer.storage().chunk_count() > 1);

  AliasView const view(buffer.storage(), Access::read);
  CHECK(view.size() == buffer.storage().capacity());
  CHECK(view.chunk_count() == buffer.storage().chunk_count());
  CHECK(view.access(0) == Access::read);
  CHECK(read_bytes(view.data(), bytes.size()) == bytes);
  buffer.set_element(5, 0x0123456789ABCDEFull);
  CHECK(*reinterpret_cast<const std::uint64_t*>(view.data() + 5 * 8) == 0x0123456789ABCDEFull);
  CHECK(write_faults(view.data()));
}

TEST_CASE("a view keeps the memory it mapped alive after the chunks' owner is gone", "[alias][host][ownership]") {
  HostBackend backend(small_granules());
  std::size_t const fds_before = cuvmm::test::open_fd_count();
  auto const data = random_bytes(6 * G, 5);
  AliasView view;
  {
    Owner const owner = make_owner(backend);
    write_bytes(owner.range.base(), data);
    view = AliasView(owner.chunks, read_write);
  }
  // The owner unmapped and released everything; the view's mappings still hold the memory.
  LiveCounts const held = backend.live_counts();
  CHECK(held.chunks == 0);
  CHECK(held.ranges == 1);
  CHECK(held.mappings == 3);
  CHECK(held.bytes_physical == 6 * G);
  CHECK(read_bytes(view.data(), 6 * G) == data);
  auto const later = random_bytes(6 * G, 6);
  write_bytes(view.data(), later);
  CHECK(read_bytes(view.data(), 6 * G) == later);

  view.reset();
  CHECK(view.empty());
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(cuvmm::test::open_fd_count() == fds_before);
}

TEST_CASE("moving a view moves its mappings; the source is left empty", "[alias][host]") {
  HostBackend backend(small_granules());
  Owner const owner = make_owner(backend);
  AliasView first(owner.chunks, read_write);
  Address const address = first.data();
  AliasView second(std::move(first));
  CHECK(first.empty());
  CHECK(first.chunk_count() == 0);
  CHECK(second.data() == address);
  AliasView third(owner.chunks, read_only);
  third = std::move(second);  // the old read-only view is unmapped and freed
  CHECK(third.data() == address);
  CHECK(third.access(0) == Access::read_write);
  CHECK(backend.live_counts().ranges == 2);
  CHECK(backend.live_counts().mappings == 6);
}

TEST_CASE("bad input to an alias view is a clear error and leaves nothing behind", "[alias][host]") {
  HostBackend backend(small_granules());
  HostBackend other(small_granules());
  std::vector<PhysicalChunk> chunks;
  chunks.emplace_back(backend, G);
  chunks.emplace_back(backend, 2 * G);
  LiveCounts const before = backend.live_counts();

  auto const no_chunks = test::thrown_by<Error>([] { (void)AliasView(std::span<const PhysicalChunk>{}, read_write); });
  CHECK(no_chunks.context() == "no chunks were given");
  auto const no_grants = test::thrown_by<Error>([&] { (void)AliasView(chunks, std::span<const AccessGrant>{}); });
  CHECK(no_grants.context() == "no access grant was given");

  std::vector<PhysicalChunk> with_empty;
  with_empty.emplace_back(backend, G);
  with_empty.emplace_back();
  auto const empty = test::thrown_by<Error>([&] { (void)AliasView(with_empty, read_write); });
  CHECK(empty.context() == "chunk 1 is empty");

  std::vector<PhysicalChunk> mixed;
  mixed.emplace_back(backend, G);
  mixed.emplace_back(other, G);
  auto const foreign = test::thrown_by<Error>([&] { (void)AliasView(mixed, read_write); });
  CHECK(foreign.context() == "chunk 1 comes from another backend than chunk 0");

  GrowableOptions options;
  options.max_capacity_bytes = 4 * G;
  GrowableStorage const nothing_mapped(backend, options);
  CHECK_THROWS_AS(AliasView(nothing_mapped, Access::read), Error);

  CHECK(backend.live_counts().ranges == before.ranges + 1);  // only nothing_mapped's range
  CHECK(backend.live_counts().mappings == 0);
  CHECK(other.live_counts().mappings == 0);
}

TEST_CASE("failing any backend call while making a view leaks nothing and leaves the owner intact",
          "[alias][host][faults]") {
  auto const failure = GENERATE(FaultInjectingBackend::Failure::error, FaultInjectingBackend::Failure::out_of_memory);
  HostBackend real(small_granules());
  FaultInjectingBackend faulty(real);
  Owner const owner = make_owner(faulty);
  auto const data = random_bytes(6 * G, 7);
  write_bytes(owner.range.base(), data);
  LiveCounts const before = real.live_counts();
  std::size_t const fds_before = cuvmm::test::open_fd_count();

  std::size_t const k = test::fail_each_call_in_turn(
      faulty, failure,
      [&] {
        AliasView const view(owner.chunks, read_only);
        CHECK(read_bytes(view.data(), 6 * G) == data);
      },
      [&] {
        CHECK(real.live_counts() == before);
        CHECK(cuvmm::test::open_fd_count() == fds_before);
        CHECK(read_bytes(owner.range.base(), 6 * G) == data);
      });
  CHECK(k == 6);  // reserve, three maps, one access call; the sixth attempt succeeds
}
