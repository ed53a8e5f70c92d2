// The RAII handles (AddressRange, PhysicalChunk, Mapping) on the host backend: what they give back,
// how moves hand ownership over, what a Mapping records, and how many backend calls they make.
#include <csignal>
#include <optional>
#include <type_traits>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/address_range.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "host_memory.hpp"
#include "observables.hpp"
#include "recording_backend.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::AddressRange;
using cuvmm::BackendOp;
using cuvmm::ChunkProperties;
using cuvmm::FaultInjectingBackend;
using cuvmm::HandleType;
using cuvmm::HostBackend;
using cuvmm::LiveCounts;
using cuvmm::Mapping;
using cuvmm::PhysicalChunk;
using cuvmm::test::open_fd_count;
using cuvmm::test::protection_at;
using cuvmm::test::random_bytes;
using cuvmm::test::read_bytes;
using cuvmm::test::thrown_by;
using cuvmm::test::write_bytes;

template <class Handle>
constexpr bool is_move_only_handle = std::is_nothrow_move_constructible_v<Handle> &&
                                     std::is_nothrow_move_assignable_v<Handle> &&
                                     std::is_nothrow_destructible_v<Handle> &&
                                     !std::is_copy_constructible_v<Handle> && !std::is_copy_assignable_v<Handle>;
static_assert(is_move_only_handle<AddressRange>);
static_assert(is_move_only_handle<PhysicalChunk>);
static_assert(is_move_only_handle<Mapping>);
static_assert(is_move_only_handle<cuvmm::UniqueFd>);

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;
constexpr AccessGrant read_write[] = {{0, Access::read_write}};
constexpr ChunkProperties shareable{0, HandleType::posix_fd, false};

HostBackend::Options small_granules() {
  HostBackend::Options options;
  options.granularity = G;
  return options;
}

}  // namespace

TEST_CASE("handles give back their range, chunk, mapping and descriptors when they go out of scope",
          "[handles]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(small_granules());
  {
    AddressRange range(host, 4 * G);
    PhysicalChunk const chunk(host, 2 * G, shareable);
    Mapping const mapping(range, G, chunk, read_write);
    CHECK(mapping.address() == range.base() + G);
    CHECK(mapping.size() == 2 * G);
    CHECK(range.live_mappings() == 1);
    CHECK(host.live_counts() == LiveCounts{1, 1, 1, 4 * G, 2 * G, 2 * G});
    CHECK(open_fd_count() == fd_baseline + 1);

    auto const data = random_bytes(2 * G, 21);
    write_bytes(mapping.address(), data);
    CHECK(read_bytes(mapping.address(), 2 * G) == data);
  }
  CHECK(host.live_counts() == LiveCounts{});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("a moved-from AddressRange is empty and only the new owner frees the range", "[handles]") {
  HostBackend host(small_granules());
  FaultInjectingBackend counting(host);
  {
    AddressRange first(counting, 2 * G);
    cuvmm::Address const base = first.base();
    AddressRange second(std::move(first));
    CHECK(first.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
    CHECK_FALSE(static_cast<bool>(first));
    CHECK(first.base() == 0);
    CHECK(first.size() == 0);
    CHECK(first.backend() == nullptr);
    CHECK(second.base() == base);
    CHECK(second.size() == 2 * G);

    AddressRange third(counting, G);
    third = std::move(second);  // frees what third held
    CHECK(counting.calls(BackendOp::free_range) == 1);
    CHECK(host.live_counts() == LiveCounts{1, 0, 0, 2 * G, 0, 0});
    CHECK(third.base() == base);
    CHECK(second.empty());  // NOLINT(bugprone-use-after-move)
  }
  CHECK(counting.calls(BackendOp::free_range) == 2);
  CHECK(counting.calls(BackendOp::reserve) == 2);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("a moved-from PhysicalChunk is empty and only the new owner releases the chunk", "[handles]") {
  HostBackend host(small_granules());
  FaultInjectingBackend counting(host);
  {
    PhysicalChunk first(counting, 2 * G, shareable);
    cuvmm::ChunkHandle const handle = first.handle();
    PhysicalChunk second(std::move(first));
    CHECK(first.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(first.handle() == cuvmm::ChunkHandle{});
    CHECK(first.size() == 0);
    CHECK(second.handle() == handle);
    CHECK(second.size() == 2 * G);
    CHECK(second.shareable() == HandleType::posix_fd);

    PhysicalChunk third(counting, G);
    third = std::move(second);
    CHECK(counting.calls(BackendOp::release_chunk) == 1);
    CHECK(host.live_counts() == LiveCounts{0, 1, 0, 0, 2 * G, 0});
    CHECK(third.handle() == handle);
  }
  CHECK(counting.calls(BackendOp::release_chunk) == 2);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("a moved-from Mapping is empty and only the new owner unmaps", "[handles]") {
  HostBackend host(small_granules());
  FaultInjectingBackend counting(host);
  AddressRange range(counting, 4 * G);
  PhysicalChunk const chunk(counting, G);
  {
    Mapping first(range, 0, chunk, read_write);
    Mapping second(std::move(first));
    CHECK(first.empty());  // NOLINT(bugprone-use-after-move)
    CHECK(first.address() == 0);
    CHECK(first.access().empty());
    CHECK(second.address() == range.base());
    CHECK(second.access(0) == Access::read_write);
    CHECK(range.live_mappings() == 1);

    Mapping third(range, 2 * G, chunk);
    CHECK(range.live_mappings() == 2);
    third = std::move(second);
    CHECK(counting.calls(BackendOp::unmap) == 1);
    CHECK(range.live_mappings() == 1);
    CHECK(third.address() == range.base());
    CHECK(protection_at(range.base() + 2 * G) == "---p");
    CHECK(protection_at(range.base()) == "rw-s");
  }
  CHECK(counting.calls(BackendOp::unmap) == 2);
  CHECK(range.live_mappings() == 0);
  CHECK(host.live_counts() == LiveCounts{1, 1, 0, 4 * G, G, 0});
}

TEST_CASE("a PhysicalChunk records what was asked for and what the backend granted", "[handles]") {
  HostBackend host(small_granules());
  PhysicalChunk const created(host, 2 * G, ChunkProperties{0, HandleType::posix_fd, true});
  CHECK(created.size() == 2 * G);
  CHECK(created.device() == 0);
  CHECK(created.shareable() == HandleType::posix_fd);
  CHECK(created.compression_requested());
  CHECK_FALSE(created.compression_granted());  // host memory is never compressed
  CHECK_FALSE(created.imported());

  cuvmm::UniqueFd const exported = created.export_posix_fd();
  PhysicalChunk const imported = PhysicalChunk::import_posix_fd(host, exported.get(), created.size());
  CHECK(imported.imported());
  CHECK(imported.size() == 2 * G);
  CHECK(imported.shareable() == HandleType::posix_fd);
  CHECK_FALSE(imported.compression_requested());
  CHECK(imported.handle() != created.handle());
  CHECK(host.live_counts().chunks == 2);
}

TEST_CASE("a PhysicalChunk of a size that is not a multiple of the granularity is refused before the backend "
          "creates anything",
          "[handles]") {
  HostBackend host(small_granules());
  FaultInjectingBackend counting(host);
  auto const error = thrown_by<cuvmm::Error>([&] { PhysicalChunk const chunk(counting, G + 4096); });
  CHECK(error.call() == "PhysicalChunk");
  CHECK_THAT(error.context(), ContainsSubstring("not a positive multiple of the granularity"));
  CHECK(counting.calls(BackendOp::create_chunk) == 0);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("a Mapping records the access granted to each device", "[handles]") {
  HostBackend host(small_granules());
  AddressRange range(host, 2 * G);
  PhysicalChunk const chunk(host, 2 * G);
  Mapping mapping(range, 0, chunk);
  CHECK(mapping.access().empty());
  CHECK(mapping.access(0) == Access::none);
  CHECK(protection_at(mapping.address()) == "---s");

  constexpr AccessGrant reader[] = {{0, Access::read}};
  mapping.set_access(reader);
  CHECK(mapping.access(0) == Access::read);
  CHECK(mapping.access(1) == Access::none);
  CHECK(protection_at(mapping.address()) == "r--s");

  constexpr AccessGrant peer_writer[] = {{1, Access::read_write}};
  mapping.set_access(peer_writer);
  CHECK(mapping.access(0) == Access::read);
  CHECK(mapping.access(1) == Access::read_write);
  CHECK(mapping.access().size() == 2);
  CHECK(protection_at(mapping.address()) == "rw-s");  // the host applies the most permissive grant

  mapping.set_access(read_write);
  CHECK(mapping.access(0) == Access::read_write);
  CHECK(mapping.access().size() == 2);
}

TEST_CASE("set_access over mappings side by side makes one backend call per run", "[handles]") {
  HostBackend host(small_granules());
  FaultInjectingBackend counting(host);
  AddressRange range(counting, 8 * G);
  std::vector<PhysicalChunk> chunks;
  std::vector<Mapping> mappings;
  // Three runs: granules [0, 3), [4, 6), [7, 8).
  for (std::size_t const granule : {0, 1, 2, 4, 5, 7}) {
    chunks.emplace_back(counting, G);
    mappings.emplace_back(range, granule * G, chunks.back());
  }
  std::size_t const before = counting.calls(BackendOp::set_access);
  cuvmm::set_access(mappings, read_write);
  CHECK(counting.calls(BackendOp::set_access) == before + 3);
  for (const Mapping& mapping : mappings) {
    CHECK(mapping.access(0) == Access::read_write);
    CHECK(protection_at(mapping.address()) == "rw-s");
  }
  CHECK(protection_at(range.base() + 3 * G) == "---p");
  CHECK(protection_at(range.base() + 6 * G) == "---p");

  auto const data = random_bytes(3 * G, 22);
  write_bytes(range.base(), data);
  CHECK(read_bytes(range.base(), 3 * G) == data);

  SECTION("runs are found in the order given, not in address order") {
    std::vector<Mapping> shuffled;
    shuffled.push_back(std::move(mappings[2]));
    shuffled.push_back(std::move(mappings[0]));
    shuffled.push_back(std::move(mappings[1]));
    constexpr AccessGrant reader[] = {{0, Access::read}};
    std::size_t const start = counting.calls(BackendOp::set_access);
    cuvmm::set_access(shuffled, reader);
    CHECK(counting.calls(BackendOp::set_access) == start + 2);  // [2] alone, then [0, 1] together
    CHECK(protection_at(range.base()) == "r--s");
    CHECK(protection_at(range.base() + 2 * G) == "r--s");
    CHECK(shuffled[0].access(0) == Access::read);
  }
}

TEST_CASE("a Mapping that does not fit its range is refused before the backend is called", "[handles]") {
  HostBackend host(small_granules());
  FaultInjectingBackend counting(host);
  AddressRange range(counting, 2 * G);
  PhysicalChunk const chunk(counting, 2 * G);

  auto const error = thrown_by<cuvmm::Error>([&] { Mapping const mapping(range, G, chunk); });
  CHECK(error.call() == "Mapping");
  CHECK(counting.calls(BackendOp::map) == 0);
  CHECK(range.live_mappings() == 0);

  Mapping const first(range, 0, chunk);
  auto const twice = thrown_by<cuvmm::Error>([&] { Mapping const again(range, 0, chunk); });
  CHECK(twice.call() == "cuMemMap");
  CHECK(range.live_mappings() == 1);
  CHECK(host.live_counts().mappings == 1);
}

TEST_CASE("a composite object tears down its mappings, then its chunks, then its range", "[handles]") {
  HostBackend host(small_granules());
  cuvmm::test::RecordingBackend recording(host);
  // Members in the order the design asks for: the range first, so it is destroyed last.
  struct MappedSpan {
    AddressRange range;
    PhysicalChunk chunk;
    Mapping mapping;
  };
  std::optional<MappedSpan> span;
  span.emplace(MappedSpan{AddressRange(recording, 2 * G), PhysicalChunk(recording, G), Mapping()});
  span->mapping = Mapping(span->range, G, span->chunk, read_write);
  auto const data = random_bytes(G, 23);
  write_bytes(span->mapping.address(), data);
  CHECK(read_bytes(span->mapping.address(), G) == data);

  recording.clear();
  span.reset();
  CHECK(recording.operations() ==
        std::vector<BackendOp>{BackendOp::unmap, BackendOp::release_chunk, BackendOp::free_range});
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("a chunk reset while mapped keeps its memory valid until the mapping goes", "[handles]") {
  std::size_t const fd_baseline = open_fd_count();
  HostBackend host(small_granules());
  AddressRange range(host, 2 * G);
  PhysicalChunk chunk(host, 2 * G);
  Mapping mapping(range, 0, chunk, read_write);
  auto const data = random_bytes(2 * G, 24);
  write_bytes(mapping.address(), data);

  chunk.reset();
  CHECK(chunk.empty());
  CHECK(host.live_counts() == LiveCounts{1, 0, 1, 2 * G, 2 * G, 2 * G});
  CHECK(read_bytes(mapping.address(), 2 * G) == data);

  mapping.reset();
  CHECK(mapping.empty());
  CHECK(host.live_counts() == LiveCounts{1, 0, 0, 2 * G, 0, 0});
  CHECK(open_fd_count() == fd_baseline);
}

TEST_CASE("freeing a range while a mapping into it lives is caught in debug builds", "[handles]") {
  HostBackend host(small_granules());
  std::optional<AddressRange> range;
  range.emplace(host, 2 * G);
  PhysicalChunk const chunk(host, G);
  Mapping mapping(*range, 0, chunk, read_write);

  auto const outcome = cuvmm::test::run_in_child([&] {
    range.reset();  // the wrong order: the range dies before its mapping
    ::_exit(host.live_counts().ranges == 1 ? 0 : 1);  // a release build keeps the range reserved
  }, /*quiet=*/true);
#ifdef NDEBUG
  CHECK_FALSE(outcome.signaled);
  CHECK(outcome.exit_code == 0);
#else
  CHECK(outcome.signaled);
  CHECK(outcome.signal == SIGABRT);
#endif
  mapping.reset();
  range.reset();
  CHECK(host.live_counts() == LiveCounts{0, 1, 0, 0, G, 0});
}
