// The compression policy on the host backend, which never grants compression: Compression::none
// asks for nothing, preferred falls back to ordinary memory and says so in stats, required throws
// cuvmm::Unsupported and leaves the buffer and the backend as they were. The gpu suite checks the
// grant on the H200 (test/gpu/test_compression.cpp).
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/error.hpp>
#include <cuvmm/growable_buffer.hpp>
#include <cuvmm/host_backend.hpp>
#include <cuvmm/physical_chunk.hpp>

#include "host_memory.hpp"
#include "growable_contents.hpp"
#include "observables.hpp"

using namespace cuvmm;
using cuvmm::test::random_words;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr std::size_t G = cuvmm::test::test_granularity;

GrowableOptions with_compression(Compression compression) {
  GrowableOptions options;
  options.max_capacity_bytes = 64 * G;
  options.max_chunk_bytes = 2 * G;
  options.compression = compression;
  return options;
}

}  // namespace

TEST_CASE("compression policies have names", "[compression]") {
  CHECK(to_string(Compression::none) == "none");
  CHECK(to_string(Compression::preferred) == "preferred");
  CHECK(to_string(Compression::required) == "required");
}

TEST_CASE("the host backend records a compression request and never grants it", "[compression][host]") {
  HostBackend backend({.granularity = G});
  PhysicalChunk const asked(backend, G, ChunkProperties{.device = 0, .compression = true});
  CHECK(asked.compression_requested());
  CHECK_FALSE(asked.compression_granted());
  PhysicalChunk const plain(backend, G);
  CHECK_FALSE(plain.compression_requested());
  CHECK_FALSE(plain.compression_granted());

  CHECK_NOTHROW(check_compression(asked, Compression::none));
  CHECK_NOTHROW(check_compression(asked, Compression::preferred));
  auto const refused = test::thrown_by<Unsupported>([&] { check_compression(asked, Compression::required); });
  CHECK(refused.capability() == "generic compression on device 0");
  CHECK_THAT(refused.remedy(), ContainsSubstring("Compression::preferred"));
  CHECK_THAT(std::string(refused.what()), ContainsSubstring("although it was requested"));
}

TEST_CASE("preferred compression falls back to ordinary memory and reports every byte that fell back",
          "[compression][host]") {
  HostBackend backend({.granularity = G});
  HostGrowableBuffer<std::uint64_t> buffer(backend, with_compression(Compression::preferred));
  auto const words = random_words(5 * G / 8 + 3, 41);
  buffer.append(words);
  CHECK(std::vector<std::uint64_t>(buffer.begin(), buffer.end()) == words);
  GrowableStats const stats = buffer.stats();
  REQUIRE(stats.capacity_bytes >= 5 * G + 24);
  CHECK(stats.compression == Compression::preferred);
  CHECK(stats.compressed_bytes == 0);
  CHECK(stats.compression_fallback_bytes == stats.capacity_bytes);
  for (const PhysicalChunk& chunk : buffer.storage().chunks()) CHECK(chunk.compression_requested());
}

TEST_CASE("without compression nothing is requested and nothing is reported as fallen back", "[compression][host]") {
  HostBackend backend({.granularity = G});
  HostGrowableBuffer<std::uint64_t> buffer(backend, with_compression(Compression::none));
  buffer.resize(3 * G / 8, 7);
  GrowableStats const stats = buffer.stats();
  CHECK(stats.compression == Compression::none);
  CHECK(stats.compressed_bytes == 0);
  CHECK(stats.compression_fallback_bytes == 0);
  for (const PhysicalChunk& chunk : buffer.storage().chunks()) CHECK_FALSE(chunk.compression_requested());
}

TEST_CASE("required compression that is not granted throws Unsupported, changes nothing and leaks nothing",
          "[compression][host]") {
  HostBackend backend({.granularity = G});
  std::size_t const fds_before = test::open_fd_count();
  {
    HostGrowableBuffer<std::uint64_t> buffer(backend, with_compression(Compression::required));
    LiveCounts const empty = backend.live_counts();
    CHECK(empty.ranges == 1);
    std::uint64_t* const base = buffer.data();
    auto const words = random_words(G / 8, 42);
    auto const refused = test::thrown_by<Unsupported>([&] { buffer.append(words); });
    CHECK(refused.capability() == "generic compression on device 0");
    CHECK(buffer.size() == 0);
    CHECK(buffer.capacity() == 0);
    CHECK(buffer.data() == base);
    CHECK(buffer.stats().chunks_created == 0);
    CHECK(backend.live_counts() == empty);
    CHECK(test::open_fd_count() == fds_before);
    CHECK_THROWS_AS(buffer.reserve(10 * G / 8), Unsupported);  // a step of many chunks: the first one fails
    CHECK(backend.live_counts() == empty);
  }
  CHECK(backend.live_counts() == LiveCounts{});
  CHECK(test::open_fd_count() == fds_before);
}
