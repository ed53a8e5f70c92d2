// parse_arena_options: ArenaOptions from "key:value,..." text (what the PyTorch plug-ins read from
// CUVMM_ARENA_CONF). Exact values for every key and unit; a bad text is refused with a message that
// names the pair and says what it wants, and changes nothing.
#include <catch2/catch_test_macros.hpp>

#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>

#include "allocators/arena_options.hpp"
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
  o.max_lent_tail_bytes = 10 * MiB;
  o.byte_limit = 5 * GiB;
  o.compression = Compression::preferred;
  o.stream_cache_run_bytes = 6 * MiB;
  o.max_idle_percent = 40;
  o.whole_chunk_bytes = 96 * MiB;
  o.wait_before_create = true;
  return o;
}

void check_same(const ArenaOptions& a, const ArenaOptions& b) {
  CHECK(a.device == b.device);
  CHECK(a.address_space_bytes == b.address_space_bytes);
  CHECK(a.page_bytes == b.page_bytes);
  CHECK(a.large_page_bytes == b.large_page_bytes);
  CHECK(a.share_large_page_tails == b.share_large_page_tails);
  CHECK(a.max_lent_bytes == b.max_lent_bytes);
  CHECK(a.max_lent_tail_bytes == b.max_lent_tail_bytes);
  CHECK(a.byte_limit == b.byte_limit);
  CHECK(a.compression == b.compression);
  CHECK(a.stream_cache_run_bytes == b.stream_cache_run_bytes);
  CHECK(a.max_idle_percent == b.max_idle_percent);
  CHECK(a.whole_chunk_bytes == b.whole_chunk_bytes);
  CHECK(a.wait_before_create == b.wait_before_create);
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
      "share_large_page_tails:true, compression: required, max_lent_bytes:96MiB, stream_cache_run_bytes: 8MiB,"
      "max_lent_tail_bytes:16MiB, max_idle_percent: 250, whole_chunk_bytes:4MiB, wait_before_create:false",
      unusual());
  CHECK(o.address_space_bytes == std::size_t{3} << 40);
  CHECK(o.page_bytes == 2 * MiB);
  CHECK(o.large_page_bytes == 128 * MiB);
  CHECK(o.byte_limit == 1048576);
  CHECK(o.share_large_page_tails);
  CHECK(o.max_lent_bytes == 96 * MiB);
  CHECK(o.max_lent_tail_bytes == 16 * MiB);
  CHECK(o.compression == Compression::required);
  CHECK(o.stream_cache_run_bytes == 8 * MiB);
  CHECK(o.max_idle_percent == 250);
  CHECK(o.whole_chunk_bytes == 4 * MiB);
  CHECK(!o.wait_before_create);
  CHECK(o.device == 3);  // not settable by text: kept
  CHECK(parse_arena_options("byte_limit:5KiB").byte_limit == 5 * 1024);
  CHECK(parse_arena_options("byte_limit:9GiB").byte_limit == 9 * GiB);
  CHECK(parse_arena_options("large_page_bytes:0").large_page_bytes == 0);  // large pages off
  CHECK(!parse_arena_options("share_large_page_tails:0").share_large_page_tails);
  CHECK(!parse_arena_options("share_large_page_tails:false").share_large_page_tails);
  CHECK(parse_arena_options("share_large_page_tails:1", unusual()).share_large_page_tails);
  CHECK(parse_arena_options("wait_before_create:true").wait_before_create);
  CHECK(!parse_arena_options("wait_before_create:0", unusual()).wait_before_create);
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
        "large_page_bytes, byte_limit, max_lent_bytes, max_lent_tail_bytes, share_large_page_tails, compression, "
        "stream_cache_run_bytes, max_idle_percent, whole_chunk_bytes, wait_before_create)");
  CHECK(refusal("byte_limit:1GiB, byte_limit:2GiB") ==
        "'byte_limit:2GiB' in \"byte_limit:1GiB, byte_limit:2GiB\": 'byte_limit' is given twice");
  CHECK(refusal("large_page_bytes=64MiB") == "'large_page_bytes=64MiB' in \"large_page_bytes=64MiB\": wants key:value");
  CHECK(refusal("byte_limit:1GiB,page_bytes") == "'page_bytes' in \"byte_limit:1GiB,page_bytes\": wants key:value");
  CHECK(refusal("share_large_page_tails:yes") ==
        "'share_large_page_tails:yes' in \"share_large_page_tails:yes\": wants true, false, 1 or 0");
  std::string const whole = "wants a whole number that fits in 64 bits";
  for (const char* bad : {"max_idle_percent:5%", "max_idle_percent:0.5", "max_idle_percent:5MiB", "max_idle_percent:",
                          "max_idle_percent:-5", "max_idle_percent:18446744073709551616"}) {
    INFO(bad);
    CHECK(refusal(bad) == "'" + std::string(bad) + "' in \"" + bad + "\": " + whole);
  }
  CHECK(refusal("compression:generic") == "'compression:generic' in \"compression:generic\": wants none, preferred or required");
  CHECK(refusal("device:1") ==
        "'device:1' in \"device:1\": no such key (address_space_bytes, page_bytes, large_page_bytes, byte_limit, "
        "max_lent_bytes, max_lent_tail_bytes, share_large_page_tails, compression, stream_cache_run_bytes, "
        "max_idle_percent, whole_chunk_bytes, wait_before_create)");
  // The caller's options are a copy: a refused text leaves them as they were.
  ArenaOptions kept = unusual();
  CHECK_THROWS_AS(kept = parse_arena_options("page_bytes:4MiB,bad", kept), Error);
  check_same(kept, unusual());
}

TEST_CASE("an Arena made from parsed options has them", "[arena][options_text]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  Arena arena(backend,
              parse_arena_options("large_page_bytes:64MiB,address_space_bytes:4GiB,byte_limit:256MiB,max_lent_bytes:48MiB,"
                                          "max_lent_tail_bytes:48MiB"));
  CHECK(arena.large_page_bytes() == 64 * MiB);
  CHECK(arena.address_space_bytes() == 4 * GiB);
  CHECK(arena.page_bytes() == 2 * MiB);
  // An 80 MiB request takes two whole 64 MiB large pages (shared tails, the default), lending the
  // 48 MiB behind it (max_lent_bytes and max_lent_tail_bytes allow exactly that); with the default 32 MiB large pages it
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
  // max_lent_tail_bytes: the same for one request's tail alone, whatever the others lend.
  Arena bounded_tail(backend, parse_arena_options("large_page_bytes:64MiB,address_space_bytes:4GiB,max_lent_tail_bytes:46MiB"));
  void* r = bounded_tail.allocate(80 * MiB);
  CHECK(bounded_tail.stats().bytes_physical.current == 80 * MiB);
  CHECK(bounded_tail.stats().bytes_lent == 0);
  bounded_tail.deallocate(r, 80 * MiB);
  // byte_limit: 256 MiB is all it may hold.
  CHECK_THROWS_AS(arena.allocate(300 * MiB), OutOfMemory);
  // A value the Arena refuses is refused when the Arena is made, as for any options.
  CHECK_THROWS_AS(Arena(backend, parse_arena_options("large_page_bytes:48MiB")), Error);
}

// --- linear work ---------------------------------------------------------------------------------

namespace {

/// The characters parse_arena_options examines for `text` (which it must accept).
std::size_t examined_for(const std::string& text) {
  std::size_t examined = 0;
  (void)detail::parse_arena_options_counting(text, ArenaOptions{}, examined);
  return examined;
}

}  // namespace

TEST_CASE("parsing examines each character of a text a bounded number of times, however long", "[arena][options_text]") {
  constexpr std::size_t half = 80 * 1024;  // 160 KB texts, four times CUVMM_ARENA_CONF's 40 KB of a slow report
  // Every pair looked at the blanks after it once more, and every pair here is empty.
  std::string const commas_then_blanks = std::string(half, ',') + std::string(half, ' ');
  std::string const blank_pairs = [] {
    std::string t;
    while (t.size() < 2 * half) t += " \t ,";
    return t;
  }();
  std::string const wide_values = "page_bytes:" + std::string(half, ' ') + "4MiB," + std::string(half, '\t') +
                                  "byte_limit:1GiB";
  for (const std::string* text : {&commas_then_blanks, &blank_pairs, &wide_values}) {
    CAPTURE(text->size());
    std::size_t const examined = examined_for(*text);
    CAPTURE(examined);
    CHECK(examined >= text->size());          // every character is looked at
    CHECK(examined <= 3 * text->size() + 64);  // and none more than three times
  }
  ArenaOptions const wide = parse_arena_options(wide_values);
  CHECK(wide.page_bytes == 4 * MiB);
  CHECK(wide.byte_limit == 1 * GiB);
  // Twice the text, twice the work (not four times).
  std::string const doubled = std::string(2 * half, ',') + std::string(2 * half, ' ');
  CHECK(examined_for(doubled) <= 2 * examined_for(commas_then_blanks) + 64);
}

// --- sizes that overflow or contradict each other -------------------------------------------------

namespace {

/// The message of the invalid_argument Error that making an Arena from `options` throws.
std::string arena_refusal(Backend& backend, const ArenaOptions& options) {
  auto const error = test::thrown_by<Error>([&] { Arena arena(backend, options); });
  CHECK(error.is(ErrorCode::invalid_argument));
  CHECK(error.call() == "Arena");
  return error.context();
}

}  // namespace

TEST_CASE("an Arena refuses sizes that overflow or contradict each other, naming the option", "[arena][options]") {
  HostBackend backend({.granularity = 2 * MiB, .physical_limit = 1 * GiB});
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  using Catch::Matchers::ContainsSubstring;

  ArenaOptions huge;
  huge.address_space_bytes = most;
  CHECK_THAT(arena_refusal(backend, huge),
             ContainsSubstring("ArenaOptions::address_space_bytes 18446744073709551615 does not fit in 64 bits once "
                               "rounded up to whole pages of 33554432 bytes"));
  // The same through CUVMM_ARENA_CONF's text: the parser takes the number, the Arena refuses it.
  CHECK_THAT(arena_refusal(backend, parse_arena_options("address_space_bytes:18446744073709551615")),
             ContainsSubstring("ArenaOptions::address_space_bytes 18446744073709551615 does not fit"));
  ArenaOptions nearly = huge;
  nearly.address_space_bytes = most - 32 * MiB + 2;  // one byte short of a whole page still overflows
  CHECK_THAT(arena_refusal(backend, nearly), ContainsSubstring("does not fit in 64 bits"));

  ArenaOptions small_large;
  small_large.large_page_bytes = 1 * MiB;  // below the 2 MiB page: was quietly turned off
  CHECK(arena_refusal(backend, small_large) ==
        "ArenaOptions::large_page_bytes 1048576 is not a power of two multiple of the page size 2097152 (0 turns "
        "large pages off)");
  ArenaOptions odd_large;
  odd_large.large_page_bytes = 48 * MiB;
  CHECK_THAT(arena_refusal(backend, odd_large), ContainsSubstring("large_page_bytes 50331648 is not a power of two"));
  ArenaOptions odd_page;
  odd_page.page_bytes = 3 * MiB;
  CHECK(arena_refusal(backend, odd_page) == "ArenaOptions::page_bytes 3145728 is not a multiple of the granularity 2097152");
  CHECK(backend.live_counts() == LiveCounts{});  // refused before anything was taken

  // What stays allowed: large pages off, a large page the size of a page (off too), the largest
  // address space that rounds up without overflow (its reservation then fails on its own terms).
  ArenaOptions off;
  off.large_page_bytes = 0;
  off.address_space_bytes = 64 * MiB;
  CHECK(Arena(backend, off).large_page_bytes() == 0);
  off.large_page_bytes = 2 * MiB;
  CHECK(Arena(backend, off).large_page_bytes() == 0);
  detail::ArenaGeometry const edge = [&] {
    ArenaOptions o;
    o.address_space_bytes = most - 32 * MiB + 1;
    return detail::check_arena_geometry(o, 2 * MiB, 1 * GiB);
  }();
  CHECK(edge.address_space == most - 32 * MiB + 1);
  CHECK(edge.large_page == 32 * MiB);
  CHECK(edge.page == 2 * MiB);
  // The default (8 times the device's memory) is refused when it would overflow.
  auto const device_overflow = test::thrown_by<Error>(
      [] { (void)detail::check_arena_geometry(ArenaOptions{}, 2 * MiB, most / 4); });
  CHECK_THAT(device_overflow.context(), ContainsSubstring("ArenaOptions::address_space_bytes 0 (the default) overflows"));
}
