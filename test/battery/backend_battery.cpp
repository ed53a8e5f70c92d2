// The backend battery's cases (see backend_battery.hpp). Every case asks make_battery_backend()
// for its backend, compares live counts with exact values relative to where the case started (the
// CUDA backend is process-wide), poisons memory before it checks data, and gives back everything
// it made, in order, even when a check fails (Scene).
#include "backend_battery.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include <cuvmm/error.hpp>

using cuvmm::Access;
using cuvmm::AccessGrant;
using cuvmm::Address;
using cuvmm::Backend;
using cuvmm::ChunkHandle;
using cuvmm::LiveCounts;
using cuvmm::test::BatteryBackend;
using cuvmm::test::make_battery_backend;

namespace {

constexpr AccessGrant read_write_grant{.device = 0, .access = Access::read_write};
constexpr AccessGrant no_access_grant{.device = 0, .access = Access::none};
const std::span<const AccessGrant> read_write(&read_write_grant, 1);
const std::span<const AccessGrant> no_access(&no_access_grant, 1);

constexpr std::uint8_t poison = 0xA5;

/// Everything a case made, given back in order (unmap, release, free) when the case ends.
class Scene {
 public:
  explicit Scene(Backend& backend) : backend_(backend) {}
  Scene(const Scene&) = delete;
  Scene& operator=(const Scene&) = delete;
  ~Scene() {
    for (auto const& [address, size] : mappings_) backend_.unmap(address, size);
    for (ChunkHandle chunk : chunks_) backend_.release_chunk(chunk);
    for (auto const& [base, size] : ranges_) backend_.free_range(base, size);
  }

  Address reserve(std::size_t size) {
    Address const base = backend_.reserve(size, 0);
    ranges_.emplace_back(base, size);
    return base;
  }
  void free_range(Address base) {
    auto const found = std::find_if(ranges_.begin(), ranges_.end(), [&](auto const& r) { return r.first == base; });
    backend_.free_range(found->first, found->second);
    ranges_.erase(found);
  }
  ChunkHandle create(std::size_t size, cuvmm::ChunkProperties props = {}) {
    ChunkHandle const chunk = backend_.create_chunk(size, props);
    chunks_.push_back(chunk);
    return chunk;
  }
  ChunkHandle adopt(ChunkHandle chunk) {
    chunks_.push_back(chunk);
    return chunk;
  }
  void release(ChunkHandle chunk) {
    backend_.release_chunk(chunk);
    chunks_.erase(std::find(chunks_.begin(), chunks_.end(), chunk));
  }
  void map(Address address, std::size_t size, ChunkHandle chunk) {
    backend_.map(address, size, chunk);
    mappings_.emplace_back(address, size);
  }
  /// Unmaps [address, address + size), which holds whole mappings made through this scene.
  void unmap(Address address, std::size_t size) {
    backend_.unmap(address, size);
    std::erase_if(mappings_, [&](auto const& m) { return m.first >= address && m.first < address + size; });
  }

 private:
  Backend& backend_;
  std::vector<std::pair<Address, std::size_t>> ranges_;
  std::vector<ChunkHandle> chunks_;
  std::vector<std::pair<Address, std::size_t>> mappings_;
};

LiveCounts plus(LiveCounts base, LiveCounts delta) {
  return LiveCounts{base.ranges + delta.ranges,
                    base.chunks + delta.chunks,
                    base.mappings + delta.mappings,
                    base.bytes_reserved + delta.bytes_reserved,
                    base.bytes_physical + delta.bytes_physical,
                    base.bytes_mapped + delta.bytes_mapped};
}

std::size_t bytes_other_than(const std::vector<std::uint8_t>& bytes, std::uint8_t value) {
  return static_cast<std::size_t>(std::count_if(bytes.begin(), bytes.end(), [&](std::uint8_t b) { return b != value; }));
}

/// Runs `operation`, which must throw cuvmm::Error; returns it (a default Error when it did not throw).
template <class Operation>
cuvmm::Error error_of(Operation&& operation) {
  try {
    operation();
  } catch (const cuvmm::Error& error) {
    return error;
  }
  FAIL_CHECK("no cuvmm::Error was thrown");
  return cuvmm::Error(cuvmm::ErrorDetails{});
}

/// Checks that `operation` is refused as cuvmm's invalid_argument naming `call`, changing no count.
template <class Operation>
void check_refused(BatteryBackend& under_test, std::string_view call, Operation&& operation) {
  LiveCounts const before = under_test.tally().live_counts();
  cuvmm::Error const error = error_of(operation);
  CAPTURE(error.what());
  CHECK(error.call() == call);
  CHECK(error.is(cuvmm::ErrorCode::invalid_argument));
  CHECK(under_test.tally().live_counts() == before);
}

/// Two ranges of `size` bytes side by side (lower first), found among at most eight reservations;
/// the others are freed again. None when the backend placed no two side by side.
std::optional<std::pair<Address, Address>> adjacent_ranges(Scene& scene, std::size_t size) {
  std::vector<Address> bases;
  std::optional<std::pair<Address, Address>> found;
  for (int attempt = 0; attempt < 8 && !found; ++attempt) {
    Address const base = scene.reserve(size);
    for (Address other : bases) {
      if (other + size == base) found = std::pair{other, base};
      if (base + size == other) found = std::pair{base, other};
    }
    bases.push_back(base);
  }
  for (Address base : bases) {
    if (!found || (base != found->first && base != found->second)) scene.free_range(base);
  }
  return found;
}

}  // namespace

TEST_CASE("backend: reserve, create, map, grant, unmap, release and free move the live counts exactly and back",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  LiveCounts const start = under_test->tally().live_counts();
  {
    Scene scene(backend);
    Address const base = scene.reserve(4 * g);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 0, 0, 4 * g, 0, 0}));
    ChunkHandle const chunk = scene.create(2 * g);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 1, 0, 4 * g, 2 * g, 0}));
    scene.map(base + g, 2 * g, chunk);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 1, 1, 4 * g, 2 * g, 2 * g}));
    backend.set_access(base + g, 2 * g, read_write);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 1, 1, 4 * g, 2 * g, 2 * g}));

    under_test->fill(base + g, 2 * g, poison);
    under_test->fill(base + g, 2 * g, 0x3C);
    CHECK(bytes_other_than(under_test->read(base + g, 2 * g), 0x3C) == 0);

    scene.unmap(base + g, 2 * g);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 1, 0, 4 * g, 2 * g, 0}));
    scene.release(chunk);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 0, 0, 4 * g, 0, 0}));
    scene.free_range(base);
  }
  CHECK(under_test->tally().live_counts() == start);
}

// Before the shared ledger, CudaBackend refused this map ("not inside a reserved range") while
// HostBackend and the driver itself (measured on the H200) accept it.
TEST_CASE("backend: a chunk maps across the boundary of two adjacent ranges, and one set_access and one unmap cover it",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  LiveCounts const start = under_test->tally().live_counts();
  {
    Scene scene(backend);
    auto const pair = adjacent_ranges(scene, 2 * g);
    if (!pair) SKIP("the backend placed no two of eight ranges side by side");
    auto const [lower, upper] = *pair;
    REQUIRE(upper == lower + 2 * g);
    ChunkHandle const chunk = scene.create(2 * g);
    scene.map(lower + g, 2 * g, chunk);  // half in each range
    backend.set_access(lower + g, 2 * g, read_write);
    CHECK(under_test->tally().live_counts() == plus(start, {2, 1, 1, 4 * g, 2 * g, 2 * g}));

    under_test->fill(lower + g, 2 * g, poison);
    under_test->fill(lower + g, 2 * g, 0x5E);
    CHECK(bytes_other_than(under_test->read(lower + g, 2 * g), 0x5E) == 0);

    scene.unmap(lower + g, 2 * g);
    CHECK(under_test->tally().live_counts() == plus(start, {2, 1, 0, 4 * g, 2 * g, 0}));
  }
  CHECK(under_test->tally().live_counts() == start);
}

// Before the shared ledger, CudaBackend accepted this (its check only asked for mapped bytes),
// while HostBackend refused it.
TEST_CASE("backend: set_access over part of a mapping is refused naming cuMemSetAccess, and the mapping keeps its access",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  Scene scene(backend);
  Address const base = scene.reserve(4 * g);
  ChunkHandle const chunk = scene.create(2 * g);
  scene.map(base, 2 * g, chunk);
  backend.set_access(base, 2 * g, read_write);
  under_test->fill(base, 2 * g, poison);
  under_test->fill(base, 2 * g, 0x11);

  check_refused(*under_test, "cuMemSetAccess", [&] { backend.set_access(base, g, no_access); });
  check_refused(*under_test, "cuMemSetAccess", [&] { backend.set_access(base + g, g, no_access); });
  check_refused(*under_test, "cuMemSetAccess", [&] { backend.set_access(base, 3 * g, no_access); });  // past it
  check_refused(*under_test, "cuMemSetAccess", [&] { backend.set_access(base + 2 * g, g, read_write); });  // unmapped
  check_refused(*under_test, "cuMemSetAccess", [&] { backend.set_access(base, 2 * g, {}); });  // no grants
  CHECK(bytes_other_than(under_test->read(base, 2 * g), 0x11) == 0);
}

// Before the shared ledger, HostBackend named these "HostBackend::map".
TEST_CASE("backend: refused maps name cuMemMap, are invalid_argument, and change nothing", "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  Scene scene(backend);
  Address const base = scene.reserve(4 * g);
  ChunkHandle const big = scene.create(2 * g);
  ChunkHandle const small = scene.create(g);
  ChunkHandle const gone = scene.create(g);
  scene.release(gone);

  check_refused(*under_test, "cuMemMap", [&] { backend.map(base, g, big); });              // part of a chunk
  check_refused(*under_test, "cuMemMap", [&] { backend.map(base, 2 * g, small); });        // more than the chunk
  check_refused(*under_test, "cuMemMap", [&] { backend.map(base + g / 2, g, small); });    // off the granularity
  check_refused(*under_test, "cuMemMap", [&] { backend.map(base + 3 * g, 2 * g, big); });  // past the range
  check_refused(*under_test, "cuMemMap", [&] { backend.map(base, g, gone); });             // released handle
  scene.map(base + g, 2 * g, big);
  check_refused(*under_test, "cuMemMap", [&] { backend.map(base + g, g, small); });        // over a mapped slot
  check_refused(*under_test, "cuMemMap", [&] { backend.map(base + 2 * g, g, small); });    // inside a mapping
  scene.map(base, g, small);  // the slot before it is still free
}

TEST_CASE("backend: one unmap covers a run of whole mappings side by side, or any sub-run of it", "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  LiveCounts const start = under_test->tally().live_counts();
  {
    Scene scene(backend);
    Address const base = scene.reserve(4 * g);
    std::vector<ChunkHandle> chunks;
    for (std::size_t i = 0; i < 4; ++i) {
      chunks.push_back(scene.create(g));
      scene.map(base + i * g, g, chunks.back());
    }
    backend.set_access(base, 4 * g, read_write);  // one call over four mappings
    CHECK(under_test->tally().live_counts() == plus(start, {1, 4, 4, 4 * g, 4 * g, 4 * g}));
    scene.unmap(base + g, 2 * g);  // the middle two
    CHECK(under_test->tally().live_counts() == plus(start, {1, 4, 2, 4 * g, 4 * g, 2 * g}));
    scene.unmap(base + 3 * g, g);
    scene.unmap(base, g);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 4, 0, 4 * g, 4 * g, 0}));
  }
  CHECK(under_test->tally().live_counts() == start);
}

// Before the shared ledger, CudaBackend dropped the bytes at release (the driver frees the memory
// only when the last mapping goes, as HostBackend counted it).
TEST_CASE("backend: a chunk released while mapped leaves the chunk count but keeps its bytes until unmapped",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  LiveCounts const start = under_test->tally().live_counts();
  {
    Scene scene(backend);
    Address const base = scene.reserve(2 * g);
    ChunkHandle const chunk = scene.create(2 * g);
    scene.map(base, 2 * g, chunk);
    backend.set_access(base, 2 * g, read_write);
    under_test->fill(base, 2 * g, poison);
    under_test->fill(base, 2 * g, 0x77);
    scene.release(chunk);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 0, 1, 2 * g, 2 * g, 2 * g}));
    CHECK(bytes_other_than(under_test->read(base, 2 * g), 0x77) == 0);
    scene.unmap(base, 2 * g);
    CHECK(under_test->tally().live_counts() == plus(start, {1, 0, 0, 2 * g, 0, 0}));
  }
  CHECK(under_test->tally().live_counts() == start);
}

// Before the shared ledger, HostBackend named these "HostBackend::reserve", "HostBackend::create_chunk",
// "HostBackend::chunk_info" and "HostBackend::export_posix_fd".
TEST_CASE("backend: refused reserve, create, chunk_info and export name the driver call and change nothing",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  Scene scene(backend);
  ChunkHandle const gone = scene.create(g);
  scene.release(gone);

  check_refused(*under_test, "cuMemAddressReserve", [&] { (void)backend.reserve(0, 0); });
  check_refused(*under_test, "cuMemAddressReserve", [&] { (void)backend.reserve(g + g / 2, 0); });
  check_refused(*under_test, "cuMemAddressReserve", [&] { (void)backend.reserve(g, 3 * g); });
  check_refused(*under_test, "cuMemCreate", [&] { (void)backend.create_chunk(0, {}); });
  check_refused(*under_test, "cuMemCreate", [&] { (void)backend.create_chunk(g / 2, {}); });
  check_refused(*under_test, "cuMemGetAllocationPropertiesFromHandle", [&] { (void)backend.chunk_info(gone); });
  check_refused(*under_test, "cuMemExportToShareableHandle", [&] { (void)backend.export_posix_fd(gone); });
}

TEST_CASE("backend: chunk_info reports the size, device and handle types a chunk was created with",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({.shareable = cuvmm::HandleType::posix_fd});
  Scene scene(backend);
  ChunkHandle const plain = scene.create(2 * g);
  ChunkHandle const shareable = scene.create(g, {.shareable = cuvmm::HandleType::posix_fd});
  cuvmm::ChunkInfo const plain_info = backend.chunk_info(plain);
  CHECK(plain_info.size == 2 * g);
  CHECK(plain_info.device == 0);
  CHECK(plain_info.shareable == cuvmm::HandleType::none);
  CHECK_FALSE(plain_info.compression_granted);
  cuvmm::ChunkInfo const shareable_info = backend.chunk_info(shareable);
  CHECK(shareable_info.size == g);
  CHECK(shareable_info.device == 0);
  CHECK(shareable_info.shareable == cuvmm::HandleType::posix_fd);
  CHECK_FALSE(shareable_info.compression_granted);
}

TEST_CASE("backend: one chunk mapped at two addresses shows through one what was written through the other",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({});
  Scene scene(backend);
  Address const base = scene.reserve(4 * g);
  ChunkHandle const chunk = scene.create(g);
  scene.map(base, g, chunk);
  scene.map(base + 3 * g, g, chunk);
  backend.set_access(base, g, read_write);
  backend.set_access(base + 3 * g, g, read_write);
  under_test->fill(base + 3 * g, g, poison);
  under_test->fill(base, g, 0x2D);
  CHECK(bytes_other_than(under_test->read(base + 3 * g, g), 0x2D) == 0);
  CHECK(under_test->tally().live_counts().mappings >= 2);
}

// Before the shared ledger, HostBackend named the wrong-size import "HostBackend::import_posix_fd".
TEST_CASE("backend: an exported POSIX fd imports as a chunk of the same memory; a wrong size is refused",
          "[backend][battery]") {
  auto under_test = make_battery_backend();
  Backend& backend = under_test->backend();
  std::size_t const g = backend.granularity({.shareable = cuvmm::HandleType::posix_fd});
  LiveCounts const start = under_test->tally().live_counts();
  {
    Scene scene(backend);
    Address const base = scene.reserve(4 * g);
    ChunkHandle const chunk = scene.create(2 * g, {.shareable = cuvmm::HandleType::posix_fd});
    cuvmm::UniqueFd const fd = backend.export_posix_fd(chunk);
    REQUIRE(fd.valid());
    check_refused(*under_test, "cuMemImportFromShareableHandle", [&] { (void)backend.import_posix_fd(fd.get(), g); });
    check_refused(*under_test, "cuMemImportFromShareableHandle", [&] { (void)backend.import_posix_fd(-1, 2 * g); });
    ChunkHandle const imported = scene.adopt(backend.import_posix_fd(fd.get(), 2 * g));
    CHECK(under_test->tally().live_counts() == plus(start, {1, 2, 0, 4 * g, 4 * g, 0}));
    scene.map(base, 2 * g, chunk);
    scene.map(base + 2 * g, 2 * g, imported);
    backend.set_access(base, 4 * g, read_write);
    under_test->fill(base + 2 * g, 2 * g, poison);
    under_test->fill(base, 2 * g, 0x6B);
    CHECK(bytes_other_than(under_test->read(base + 2 * g, 2 * g), 0x6B) == 0);
  }
  CHECK(under_test->tally().live_counts() == start);
}
