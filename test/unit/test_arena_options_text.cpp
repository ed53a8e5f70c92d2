// parse_arena_options: ArenaOptions from "key:value,..." text (what the PyTorch plug-ins read from
// CUVMM_ARENA_CONF). Exact values for every key and unit; a bad text is refused with a message that
// names the pair and says what it wants, and changes nothing.
#include <catch2/catch_test_macros.hpp>

#include <cstddef>
#include <limits>
#include <string>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>

#include "host_memory.hpp"

using namespace cuvmm;

namespace {

/// Options unlike the defaults in every field a text can set, so that a test sees what changed.
ArenaOptions unusual() {
  ArenaOptions o;
  o.device = 3;
  o.address_space_bytes = 7 * GiB;
  o.page_bytes = 4 * MiB;
  o.large_page_bytes = 16 * MiB;
  o.share_large_page_tails = false;
  o.max_lent_bytes = 3 * GiB;
  o.byte_limit = 5 * GiB;
  o.compression = Compression::preferred;
  return o;
}

void check_same(const ArenaOptions& a, const ArenaOptions& b) {
  CHECK(a.device == b.device);
  CHECK(a.address_space_bytes == b.address_space_bytes);
  CHECK(a.page_bytes == b.page_bytes);
  CHECK(a.large_page_bytes == b.large_page_bytes);
  CHECK(a.share_large_page_tails == b.share_large_page_tails);
  CHECK(a.max_lent_bytes == b.max_lent_bytes);
  CHECK(a.byte_limit == b.byte_limit);
  CHECK(a.compression == b.compression);
  CHECK(a.access.size() == b.access.size());
}

/// The message of the Error that parsing `text` throws (it must throw one, of invalid_argument).
std::string refusal(const std::string& text) {
  auto const error = test::thrown_by<Error>([&] { (void)parse_arena_options(text, unusual()); });
  CHECK(error.is(ErrorCode::invalid_argument));
  return error.context();
}

}  // namespace

TEST_CASE("an empty text changes nothing", "[arena][options_text]") {
  for (const char* text : {"", " ", "\t ", ","}) {
    INFO('"' << text << '"');
    check_same(parse_arena_options(text, unusual()), unusual());
  }
  check_same(parse_arena_options(""), ArenaOptions{});
}

TEST_CASE("every key a text can set, with spaces and every unit", "[arena][options_text]") {
  ArenaOptions const o = parse_arena_options(
      " address_space_bytes : 3TiB, page_bytes:2MiB ,large_page_bytes:128MiB,byte_limit:1048576,"
      "share_large_page_tails:true, compression: required, max_lent_bytes:96MiB",
      unusual());
  CHECK(o.address_space_bytes == std::size_t{3} << 40);
  CHECK(o.page_bytes == 2 * MiB);
  CHECK(o.large_page_bytes == 128 * MiB);
  CHECK(o.byte_limit == 1048576);
  CHECK(o.share_large_page_tails);
  CHECK(o.max_lent_bytes == 96 * MiB);
  CHECK(o.compression == Compression::required);
  CHECK(o.device == 3);  // not settable by text: kept
  CHECK(parse_arena_options("byte_limit:5KiB").byte_limit == 5 * 1024);
  CHECK(parse_arena_options("byte_limit:9GiB").byte_limit == 9 * GiB);
  CHECK(parse_arena_options("large_page_bytes:0").large_page_bytes == 0);  // large pages off
  CHECK(!parse_arena_options("share_large_page_tails:0").share_large_page_tails);
  CHECK(!parse_arena_options("share_large_page_tails:false").share_large_page_tails);
  CHECK(parse_arena_options("share_large_page_tails:1", unusual()).share_large_page_tails);
  CHECK(parse_arena_options("compression:none", unusual()).compression == Compression::none);
  CHECK(parse_arena_options("compression:preferred").compression == Compression::preferred);
  CHECK(parse_arena_options("byte_limit:1GiB,").byte_limit == GiB);  // empty pairs are skipped
  ArenaOptions const doubled = parse_arena_options(",byte_limit:1GiB,, page_bytes:4MiB");
  CHECK(doubled.byte_limit == GiB);
  CHECK(doubled.page_bytes == 4 * MiB);
}

TEST_CASE("sizes up to 64 bits are taken; one more is refused", "[arena][options_text]") {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  CHECK(parse_arena_options("byte_limit:18446744073709551615").byte_limit == most);
  CHECK(parse_arena_options("byte_limit:16777215TiB").byte_limit == (std::size_t{16777215} << 40));
  std::string const wants = "wants a whole number of bytes, or one followed by KiB, MiB, GiB or TiB, that fits in 64 bits";
  CHECK(refusal("byte_limit:18446744073709551616") ==
        "'byte_limit:18446744073709551616' in \"byte_limit:18446744073709551616\": " + wants);
  CHECK(refusal("byte_limit:16777216TiB") == "'byte_limit:16777216TiB' in \"byte_limit:16777216TiB\": " + wants);
  for (const char* bad : {"byte_limit:", "byte_limit:-1", "byte_limit:1.5GiB", "byte_limit:1 GiB", "byte_limit:1gib",
                          "byte_limit:1GB", "byte_limit:GiB", "byte_limit:0x10"}) {
    INFO(bad);
    CHECK(refusal(bad) == "'" + std::string(bad) + "' in \"" + bad + "\": " + wants);
  }
}

TEST_CASE("a bad text is refused naming the pair and what it wants", "[arena][options_text]") {
  CHECK(refusal("large_page_bytes:64MiB,huge_pages:1") ==
        "'huge_pages:1' in \"large_page_bytes:64MiB,huge_pages:1\": no such key (address_space_bytes, page_bytes, "
        "large_page_bytes, byte_limit, max_lent_bytes, share_large_page_tails, compression)");
  CHECK(refusal("byte_limit:1GiB, byte_limit:2GiB") ==
        "'byte_limit:2GiB' in \"byte_limit:1GiB, byte_limit:2GiB\": 'byte_limit' is given twice");
  CHECK(refusal("large_page_bytes=64MiB") == "'large_page_bytes=64MiB' in \"large_page_bytes=64MiB\": wants key:value");
  CHECK(refusal("byte_limit:1GiB,page_bytes") == "'page_bytes' in \"byte_limit:1GiB,page_bytes\": wants key:value");
  CHECK(refusal("share_large_page_tails:yes") ==
        "'share_large_page_tails:yes' in \"share_large_page_tails:yes\": wants true, false, 1 or 0");
  CHECK(refusal("compression:generic") == "'compression:generic' in \"compression:generic\": wants none, preferred or required");
  CHECK(refusal("device:1") ==
        "'device:1' in \"device:1\": no such key (address_space_bytes, page_bytes, large_page_bytes, byte_limit, "
        "max_lent_bytes, share_large_page_tails, compression)");
  // The caller's options are a copy: a refused text leaves them as they were.
  ArenaOptions kept = unusual();
  CHECK_THROWS_AS(kept = parse_arena_options("page_bytes:4MiB,bad", kept), Error);
  check_same(kept, unusual());
}

TEST_CASE("an Arena made from parsed options has them", "[arena][options_text]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  Arena arena(backend,
              parse_arena_options("large_page_bytes:64MiB,address_space_bytes:4GiB,byte_limit:256MiB,max_lent_bytes:48MiB"));
  CHECK(arena.large_page_bytes() == 64 * MiB);
  CHECK(arena.address_space_bytes() == 4 * GiB);
  CHECK(arena.page_bytes() == 2 * MiB);
  // An 80 MiB request takes two whole 64 MiB large pages (shared tails, the default), lending the
  // 48 MiB behind it (max_lent_bytes allows exactly that); with the default 32 MiB large pages it
  // would hold three.
  void* p = arena.allocate(80 * MiB);
  CHECK(arena.stats().bytes_physical.current == 128 * MiB);
  CHECK(arena.stats().bytes_lent == 48 * MiB);
  arena.deallocate(p, 80 * MiB);
  // max_lent_bytes: a request whose tail would lend more takes small pages behind its large page.
  Arena capped(backend, parse_arena_options("large_page_bytes:64MiB,address_space_bytes:4GiB,max_lent_bytes:46MiB"));
  void* q = capped.allocate(80 * MiB);
  CHECK(capped.stats().bytes_physical.current == 80 * MiB);
  CHECK(capped.stats().bytes_lent == 0);
  capped.deallocate(q, 80 * MiB);
  // byte_limit: 256 MiB is all it may hold.
  CHECK_THROWS_AS(arena.allocate(300 * MiB), OutOfMemory);
  // A value the Arena refuses is refused when the Arena is made, as for any options.
  CHECK_THROWS_AS(Arena(backend, parse_arena_options("large_page_bytes:48MiB")), Error);
}
