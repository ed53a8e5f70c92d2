// The allocator test battery (see arena_battery.hpp): Arena behaviour that must hold on every
// backend. Data checks write a per-allocation random pattern and compare every word; statistics
// are compared with exact page counts and with the backend's own live-object tally.
#include "arena_battery.hpp"

#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>

using namespace cuvmm;
using namespace cuvmm::test;
using Catch::Matchers::ContainsSubstring;

namespace {

struct Allocation {
  std::byte* p = nullptr;
  std::size_t bytes = 0;
  std::uint64_t seed = 0;
  Stream stream = nullptr;
};

std::size_t pattern_bytes(std::size_t bytes) { return bytes / 4 * 4; }

/// Sizes from 1 byte to `pages` pages, spread evenly over their logarithm, so slabs, small-page
/// spans and (from the large page size on) large-page spans all get exercised.
std::size_t random_size(std::mt19937_64& rng, std::size_t page, double pages = 24.0) {
  std::uniform_real_distribution<double> exponent(0.0, std::log2(pages * static_cast<double>(page)));
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::exp2(exponent(rng))));
}

/// No two live allocations overlap.
void require_disjoint(std::vector<Allocation> live) {
  std::sort(live.begin(), live.end(), [](auto& a, auto& b) { return a.p < b.p; });
  for (std::size_t i = 1; i < live.size(); ++i) {
    INFO("allocation " << i << " at " << static_cast<void*>(live[i].p));
    REQUIRE(live[i - 1].p + live[i - 1].bytes <= live[i].p);
  }
}

}  // namespace

TEST_CASE("random allocations of sizes from bytes to pages are aligned, disjoint and keep their data",
          "[arena][battery]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  std::size_t const page = Arena(memory->backend(), options).page_bytes();
  options.whole_chunk_bytes = GENERATE_COPY(std::size_t{0}, 3 * page);  // with whole chunks from 3 pages on too
  options.wait_before_create = GENERATE(false, true);  // and with fences passed before pages are created
  CAPTURE(options.whole_chunk_bytes, options.wait_before_create);
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();
  std::mt19937_64 rng(20261129);
  std::vector<Allocation> live;
  std::size_t requested = 0;
  for (int step = 0; step < 400; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      std::size_t const victim = rng() % live.size();
      Allocation const a = live[victim];
      REQUIRE(memory->mismatches(a.p, pattern_bytes(a.bytes), a.seed, stream) == 0);
      arena.deallocate(a.p, a.bytes, stream);
      requested -= a.bytes;
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
      continue;
    }
    std::size_t const bytes = random_size(rng, arena.page_bytes());
    std::size_t const alignment = (step % 7 == 0) ? arena.page_bytes() : Arena::default_alignment;
    auto* p = static_cast<std::byte*>(arena.allocate(bytes, stream, alignment));
    REQUIRE(p != nullptr);
    REQUIRE(reinterpret_cast<std::uintptr_t>(p) % alignment == 0);
    Allocation const a{p, bytes, rng(), stream};
    memory->write_pattern(a.p, pattern_bytes(a.bytes), a.seed, stream);
    live.push_back(a);
    requested += bytes;
  }
  require_disjoint(live);
  for (auto const& a : live) REQUIRE(memory->mismatches(a.p, pattern_bytes(a.bytes), a.seed, stream) == 0);
  ArenaStats const s = arena.stats();
  CHECK(s.bytes_requested.current == requested);
  CHECK(s.allocations.current == live.size());
  CHECK(s.bytes_mapped.current + s.bytes_stale == memory->backend().live_counts().bytes_mapped);
  for (auto const& a : live) arena.deallocate(a.p, a.bytes, stream);
  CHECK(arena.stats().bytes_requested.current == 0);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("statistics count requested, mapped and physical bytes and the driver calls exactly", "[arena][battery]") {
  auto memory = make_battery_memory();
  Backend& backend = memory->backend();
  LiveCounts const before = backend.live_counts();
  Arena arena(backend, memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();

  ArenaStats s = arena.stats();
  CHECK(s.bytes_reserved.current == arena.address_space_bytes());
  CHECK(s.bytes_mapped.current == 0);
  CHECK(s.chunks_created == 0);

  void* big = arena.allocate(3 * page + 1, stream);  // a span of 4 pages
  void* small = arena.allocate(1000, stream);        // a slab of one page
  s = arena.stats();
  CHECK(s.bytes_requested.current == 3 * page + 1 + 1000);
  CHECK(s.allocations.current == 2);
  CHECK(s.bytes_mapped.current == 5 * page);
  CHECK(s.bytes_physical.current == 5 * page);
  CHECK(s.chunks_created == 5);
  CHECK(s.maps == 5);
  CHECK(s.access_calls == 2);  // one per span of pages mapped side by side
  CHECK(backend.live_counts().chunks == before.chunks + 5);
  CHECK(backend.live_counts().bytes_mapped == before.bytes_mapped + 5 * page);

  arena.deallocate(big, 3 * page + 1, stream);
  arena.deallocate(small, 1000, stream);
  s = arena.stats();
  CHECK(s.bytes_requested.current == 0);
  CHECK(s.bytes_requested.peak == 3 * page + 1 + 1000);
  CHECK(s.bytes_requested.total == 3 * page + 1 + 1000);
  CHECK(s.bytes_mapped.current == 5 * page);  // cached: mapped and free
  CHECK(s.chunks_released == 0);

  CHECK(arena.trim() == 5 * page);
  s = arena.stats();
  CHECK(s.bytes_mapped.current == 0);
  CHECK(s.bytes_physical.current == 0);
  CHECK(s.bytes_mapped.peak == 5 * page);
  CHECK(s.chunks_released == 5);
  CHECK(s.unmaps == 5);
  CHECK(backend.live_counts().chunks == before.chunks);
  CHECK(backend.live_counts().mappings == before.mappings);
}

TEST_CASE("requests up to half a page share slab pages instead of taking a page each", "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  CHECK(arena.small_max_bytes() == page / 2);
  // page/4 + 1 bytes fall in the class of 5/16 page (four classes per doubling): 3 blocks a page.
  // page/2 bytes: 2 blocks a page. These seven requests take 4 pages, not 7.
  std::vector<Allocation> live;
  std::mt19937_64 rng(7);
  for (std::size_t bytes : {page / 4 + 1, page / 4 + 1, page / 4 + 1, page / 2, page / 2, page / 4 + 1, page / 2}) {
    Allocation const a{static_cast<std::byte*>(arena.allocate(bytes, stream)), bytes, rng(), stream};
    memory->write_pattern(a.p, pattern_bytes(a.bytes), a.seed, stream);
    live.push_back(a);
  }
  require_disjoint(live);
  // The first three share one page, 5/16 page apart; the two halves share the next.
  CHECK(live[1].p == live[0].p + 5 * page / 16);
  CHECK(live[2].p == live[1].p + 5 * page / 16);
  CHECK(live[4].p == live[3].p + page / 2);
  ArenaStats const s = arena.stats();
  CHECK(s.bytes_mapped.current == 4 * page);  // slabs: 5/16 class (2 pages), 1/2 class (2 pages)
  CHECK(s.chunks_created == 4);
  for (auto const& a : live) REQUIRE(memory->mismatches(a.p, pattern_bytes(a.bytes), a.seed, stream) == 0);
  // A request just over half a page takes a page of its own.
  void* whole = arena.allocate(page / 2 + 1, stream);
  CHECK(arena.stats().bytes_mapped.current == 5 * page);
  arena.deallocate(whole, page / 2 + 1, stream);
  for (auto const& a : live) arena.deallocate(a.p, a.bytes, stream);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("memory freed on a stream is reused on that stream at once, with no driver call", "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  for (std::size_t bytes : {std::size_t{64}, std::size_t{4000}, 2 * page + 16}) {
    void* first = arena.allocate(bytes, stream);
    arena.deallocate(first, bytes, stream);
    ArenaStats const before = arena.stats();
    void* again = arena.allocate(bytes, stream);
    ArenaStats const after = arena.stats();
    CHECK(again == first);
    CHECK(after.chunks_created == before.chunks_created);
    CHECK(after.maps == before.maps);
    CHECK(after.cross_stream_reuses == before.cross_stream_reuses);
    CHECK(after.host_waits == before.host_waits);
    arena.deallocate(again, bytes, stream);
  }
}

TEST_CASE("memory freed on one stream goes to another only through an event wait", "[arena][battery]") {
  auto memory = make_battery_memory();
  Stream const one = memory->new_stream();
  Stream const two = memory->new_stream();
  std::size_t const page = Arena(memory->backend(), memory->options()).page_bytes();
  for (std::size_t bytes : {std::size_t{512}, 2 * page}) {
    // No room for more than the first allocation takes: stream two must take stream one's memory
    // (what one's front parks goes to another stream only when the device gives no page).
    ArenaOptions options = memory->options();
    options.byte_limit = (bytes + page - 1) / page * page;
    Arena arena(memory->backend(), options);
    void* p = arena.allocate(bytes, one);
    memory->write_pattern(p, pattern_bytes(bytes), 1, one);
    arena.deallocate(p, bytes, one);
    std::size_t const waits = arena.stats().cross_stream_reuses;
    std::size_t const created = arena.stats().chunks_created;
    void* q = arena.allocate(bytes, two);
    CHECK(q == p);  // reused, not created anew...
    CHECK(arena.stats().chunks_created == created);
    CHECK(arena.stats().cross_stream_reuses == waits + 1);  // ...after stream two waits for stream one
    memory->write_pattern(q, pattern_bytes(bytes), 2, two);
    CHECK(memory->mismatches(q, pattern_bytes(bytes), 2, two) == 0);
    arena.deallocate(q, bytes, two);
  }
}

TEST_CASE("a large request is stitched from scattered free pages without growing the arena", "[arena][battery]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  std::size_t const page = Arena(memory->backend(), options).page_bytes();
  options.byte_limit = 8 * page;  // room for exactly 8 pages
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();

  std::vector<void*> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(arena.allocate(page, stream));
  // Free every other page: 4 free pages, no two side by side.
  for (int i = 0; i < 8; i += 2) arena.deallocate(pages[static_cast<std::size_t>(i)], page, stream);
  CHECK(arena.stats().bytes_physical.current == 8 * page);
  CHECK(arena.stats().fragmentation == 0.75);  // 4 free pages in 4 extents: the largest is 1 of 4

  // A caching allocator would need 4 more pages here and fail at the limit; the arena remaps the
  // four scattered pages behind one new run of addresses.
  void* joined = arena.allocate(4 * page, stream);
  REQUIRE(joined != nullptr);
  memory->write_pattern(joined, 4 * page, 99, stream);
  for (int i = 1; i < 8; i += 2) memory->write_pattern(pages[static_cast<std::size_t>(i)], page, 100 + i, stream);
  CHECK(memory->mismatches(joined, 4 * page, 99, stream) == 0);
  for (int i = 1; i < 8; i += 2) CHECK(memory->mismatches(pages[static_cast<std::size_t>(i)], page, 100 + i, stream) == 0);
  ArenaStats const s = arena.stats();
  CHECK(s.chunks_created == 8);
  CHECK(s.bytes_physical.current == 8 * page);
  CHECK(s.bytes_mapped.current == 8 * page);
  CHECK(s.reclaims == 4);
  CHECK(s.pages_moved == 4);  // the four scattered pages, mapped again behind the new run
  CHECK(s.fragmentation == 0.0);

  arena.deallocate(joined, 4 * page, stream);
  for (int i = 1; i < 8; i += 2) arena.deallocate(pages[static_cast<std::size_t>(i)], page, stream);
}

TEST_CASE("at the byte limit a request fails with OutOfMemory, nothing changes, and the arena goes on",
          "[arena][battery]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  std::size_t const page = Arena(memory->backend(), options).page_bytes();
  options.byte_limit = 4 * page;
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();

  void* held = arena.allocate(3 * page, stream);
  memory->write_pattern(held, 3 * page, 7, stream);
  void* cached = arena.allocate(page, stream);
  arena.deallocate(cached, page, stream);  // one cached page: reclaimed before giving up
  ArenaStats const before = arena.stats();
  REQUIRE_THROWS_AS(arena.allocate(2 * page, stream), OutOfMemory);
  try {
    (void)arena.allocate(2 * page, stream);
  } catch (const OutOfMemory& e) {
    CHECK_THAT(e.context(), ContainsSubstring("after reclaiming every cached page"));
    CHECK_THAT(e.context(), ContainsSubstring("byte_limit"));
  }
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  CHECK(after.allocations.current == 1);
  CHECK(after.bytes_physical.current <= 4 * page);
  CHECK(memory->mismatches(held, 3 * page, 7, stream) == 0);
  // The page reclaimed during the failed attempt still serves a request that fits.
  void* fits = arena.allocate(page, stream);
  CHECK(fits != nullptr);
  arena.deallocate(fits, page, stream);
  arena.deallocate(held, 3 * page, stream);
  void* whole = arena.allocate(4 * page, stream);
  CHECK(whole != nullptr);
  arena.deallocate(whole, 4 * page, stream);
}

TEST_CASE("trim gives every page not in use back to the driver", "[arena][battery]") {
  auto memory = make_battery_memory();
  Backend& backend = memory->backend();
  Arena arena(backend, memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const chunks_before = backend.live_counts().chunks;

  void* keep = arena.allocate(page, stream);
  std::vector<std::pair<void*, std::size_t>> freed;
  for (std::size_t n : {1, 2, 5}) freed.emplace_back(arena.allocate(n * page, stream), n * page);
  void* block = arena.allocate(300, stream);  // a slab that empties
  for (auto [p, bytes] : freed) arena.deallocate(p, bytes, stream);
  arena.deallocate(block, 300, stream);
  memory->synchronize(stream);
  // What the backend holds (not the device's free memory, which other processes move).
  std::size_t const physical_before = backend.live_counts().bytes_physical;

  CHECK(arena.trim() == 9 * page);
  CHECK(backend.live_counts().chunks == chunks_before + 1);  // only the page still in use
  CHECK(backend.live_counts().bytes_physical == physical_before - 9 * page);
  CHECK(arena.stats().bytes_physical.current == page);
  CHECK(arena.trim() == 0);
  arena.deallocate(keep, page, stream);
}

TEST_CASE("bad frees and bad alignments get a clear error and change nothing", "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* small = arena.allocate(100, stream);
  void* large = arena.allocate(2 * page, stream);
  ArenaStats const before = arena.stats();
  int outside = 0;

  CHECK_THROWS_WITH(arena.deallocate(&outside, 4, stream), ContainsSubstring("outside the arena"));
  CHECK_THROWS_WITH(arena.deallocate(static_cast<std::byte*>(large) + 256, 100, stream),
                    ContainsSubstring("not allocated by this arena"));
  CHECK_THROWS_WITH(arena.deallocate(large, page, stream), ContainsSubstring("not the size that was allocated"));
  CHECK_THROWS_WITH(arena.deallocate(small, 5000, stream), ContainsSubstring("not the size that was allocated"));
  CHECK_THROWS_WITH(arena.deallocate(static_cast<std::byte*>(small) + 8, 100, stream),
                    ContainsSubstring("not a live allocation"));
  CHECK_THROWS_WITH(arena.allocate(64, stream, 3), ContainsSubstring("not a power of two"));
  CHECK_THROWS_WITH(arena.allocate(64, stream, 2 * page), ContainsSubstring("not a power of two up to the page size"));
  CHECK_THROWS_AS(arena.allocate(arena.address_space_bytes() + 1, stream), OutOfMemory);
  CHECK(arena.allocate(0, stream) == nullptr);
  arena.deallocate(nullptr, 0, stream);
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  CHECK(after.allocations.current == 2);

  arena.deallocate(small, 100, stream);
  CHECK_THROWS_WITH(arena.deallocate(small, 100, stream), ContainsSubstring("freed twice"));
  arena.deallocate(large, 2 * page, stream);
  CHECK_THROWS_WITH(arena.deallocate(large, 2 * page, stream), ContainsSubstring("not allocated by this arena"));
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("16 threads allocating and freeing at once get disjoint memory that keeps their data",
          "[arena][battery][threads]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  std::size_t const page = arena.page_bytes();
  constexpr int threads = 16;
  std::vector<Stream> streams;
  for (int t = 0; t < threads; ++t) streams.push_back(memory->new_stream());
  std::atomic<std::size_t> failures{0};
  std::atomic<std::size_t> made{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
     try {
      std::mt19937_64 rng(1000 + static_cast<unsigned>(t));
      std::vector<Allocation> mine;
      Stream const stream = streams[static_cast<std::size_t>(t)];
      for (int step = 0; step < 150; ++step) {
        if (!mine.empty() && rng() % 2 == 0) {
          Allocation const a = mine.back();
          mine.pop_back();
          if (memory->mismatches(a.p, pattern_bytes(a.bytes), a.seed, stream) != 0) ++failures;
          arena.deallocate(a.p, a.bytes, stream);
          continue;
        }
        std::size_t const bytes = std::max<std::size_t>(4, random_size(rng, page, 0.5));
        Allocation const a{static_cast<std::byte*>(arena.allocate(bytes, stream)), bytes, rng(), stream};
        ++made;
        memory->write_pattern(a.p, pattern_bytes(a.bytes), a.seed, stream);
        mine.push_back(a);
      }
      for (auto const& a : mine) {
        if (memory->mismatches(a.p, pattern_bytes(a.bytes), a.seed, stream) != 0) ++failures;
        arena.deallocate(a.p, a.bytes, stream);
      }
     } catch (const std::exception&) {  // Catch2 assertions are for the main thread only
      ++failures;
     }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(failures == 0);
  ArenaStats const s = arena.stats();
  CHECK(s.allocations.current == 0);
  CHECK(s.bytes_requested.current == 0);
  CHECK(s.allocations.total == made);
  CHECK(s.allocations.peak >= 1);
  CHECK(s.bytes_mapped.current + s.bytes_stale == memory->backend().live_counts().bytes_mapped);
}

TEST_CASE("release_stream hands a stream's free memory to the others", "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const going = memory->new_stream();
  Stream const staying = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* block = arena.allocate(700, going);
  void* span = arena.allocate(3 * page, going);
  arena.deallocate(block, 700, going);
  arena.deallocate(span, 3 * page, going);
  std::size_t const created = arena.stats().chunks_created;
  arena.release_stream(going);
  CHECK(arena.stats().bytes_mapped.current == page);  // the slab stays; the span's pages were unmapped
  // The block comes back without an event wait (the stream's work was waited for); the span's
  // pages are stitched again from the pool.
  std::size_t const waits = arena.stats().cross_stream_reuses;
  void* block_again = arena.allocate(700, nullptr);
  void* span_again = arena.allocate(3 * page, staying);
  CHECK(block_again == block);
  CHECK(arena.stats().cross_stream_reuses == waits);
  CHECK(arena.stats().chunks_created == created);
  arena.deallocate(block_again, 700, nullptr);
  arena.deallocate(span_again, 3 * page, staying);
}

TEST_CASE("by default a request of a large page or more takes whole large pages at an aligned address, and small "
          "requests of its stream borrow what the last one holds beyond it",
          "[arena][battery][tails]") {
  auto memory = make_battery_memory();
  REQUIRE(memory->options().share_large_page_tails);  // the default, which the battery's options keep
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const large = arena.large_page_bytes();
  REQUIRE(large >= 4 * page);
  // Two whole large pages; the second lends its last half less a page (tails up to
  // max_lent_tail_bytes, half a large page by default, are lent).
  std::size_t const bytes = large + large / 2 + page - 100;
  REQUIRE(large / 2 - page <= ArenaOptions{}.max_lent_tail_bytes);

  void* owner = arena.allocate(bytes, stream);
  CHECK(reinterpret_cast<std::uintptr_t>(owner) % large == 0);
  ArenaStats const made = arena.stats();
  CHECK(made.chunks_created == 2);
  CHECK(made.maps == 2);
  CHECK(made.bytes_physical.current == 2 * large);
  CHECK(memory->backend().live_counts().bytes_mapped == 2 * large);

  std::size_t const borrowed_bytes = 2 * page;
  void* borrower = arena.allocate(borrowed_bytes, stream);  // in the lent tail, nothing mapped
  CHECK(borrower == static_cast<std::byte*>(owner) + large + large / 2 + page);
  ArenaStats s = arena.stats();
  CHECK(s.maps == made.maps);
  CHECK(s.chunks_created == made.chunks_created);
  CHECK(s.bytes_physical.current == 2 * large);
  memory->write_pattern(owner, pattern_bytes(bytes), 21, stream);
  memory->write_pattern(borrower, borrowed_bytes, 22, stream);
  CHECK(memory->mismatches(owner, pattern_bytes(bytes), 21, stream) == 0);
  CHECK(memory->mismatches(borrower, borrowed_bytes, 22, stream) == 0);

  // Both freed on the stream: the two large pages are one cached span again, which the same
  // request takes as it lies.
  arena.deallocate(borrower, borrowed_bytes, stream);
  arena.deallocate(owner, bytes, stream);
  void* again = arena.allocate(bytes, stream);
  CHECK(again == owner);
  s = arena.stats();
  CHECK(s.maps == made.maps);
  CHECK(s.unmaps == 0);
  CHECK(s.chunks_created == made.chunks_created);
  memory->write_pattern(again, pattern_bytes(bytes), 23, stream);
  CHECK(memory->mismatches(again, pattern_bytes(bytes), 23, stream) == 0);
  arena.deallocate(again, bytes, stream);
  CHECK(arena.trim() == 2 * large);
  CHECK(memory->backend().live_counts().bytes_mapped == 0);
}

TEST_CASE("with small tails a request of a large page or more gets large pages at an aligned address, then small ones",
          "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), small_tail_layout(*memory));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const large = arena.large_page_bytes();
  REQUIRE(large >= 2 * page);
  std::size_t const bytes = 2 * large + 3 * page - 100;  // 2 large pages and 3 small ones

  void* p = arena.allocate(bytes, stream);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % large == 0);
  ArenaStats s = arena.stats();
  CHECK(s.chunks_created == 5);
  CHECK(s.maps == 5);
  CHECK(s.access_calls == 1);
  CHECK(s.bytes_mapped.current == 2 * large + 3 * page);
  CHECK(memory->backend().live_counts().bytes_mapped == 2 * large + 3 * page);
  memory->write_pattern(p, pattern_bytes(bytes), 11, stream);
  CHECK(memory->mismatches(p, pattern_bytes(bytes), 11, stream) == 0);

  // Freed, the span is cached whole: the same size comes back with no driver call.
  arena.deallocate(p, bytes, stream);
  void* again = arena.allocate(bytes, stream);
  CHECK(again == p);
  CHECK(arena.stats().maps == 5);
  arena.deallocate(again, bytes, stream);

  // A smaller size whose small pages the span's small tail holds takes the span's end: its last
  // large page and the first small page of its tail, mapped where they lie. Nothing is mapped,
  // unmapped or created; the front large page stays cached, and so do the tail's other two pages.
  std::size_t const other = large + page;
  ArenaStats before = arena.stats();
  void* q = arena.allocate(other, stream);
  CHECK(q == static_cast<std::byte*>(p) + large);
  CHECK(reinterpret_cast<std::uintptr_t>(q) % large == 0);
  s = arena.stats();
  CHECK(s.chunks_created == 5);
  CHECK(s.maps == before.maps);
  CHECK(s.unmaps == before.unmaps);
  CHECK(s.pages_moved == before.pages_moved);
  CHECK(s.bytes_mapped.current == 2 * large + 3 * page);
  memory->write_pattern(q, other, 12, stream);
  CHECK(memory->mismatches(q, other, 12, stream) == 0);
  arena.deallocate(q, other, stream);
  CHECK(arena.trim() == 2 * large + 3 * page);

  // A span with no small tail: a request that ends inside its second large page keeps the first,
  // and that second one is unmapped; with no small page pooled or cached, the idle large page is
  // released and one small page is created in its place. Nothing already mapped moves.
  void* whole = arena.allocate(2 * large, stream);
  arena.deallocate(whole, 2 * large, stream);
  before = arena.stats();
  void* cut = arena.allocate(other, stream);
  CHECK(cut == whole);
  s = arena.stats();
  CHECK(s.chunks_created - before.chunks_created == 1);
  CHECK(s.chunks_released - before.chunks_released == 1);
  CHECK(s.maps - before.maps == 1);
  CHECK(s.unmaps - before.unmaps == 1);
  CHECK(s.pages_moved == before.pages_moved);
  CHECK(s.reclaims - before.reclaims == 1);
  CHECK(s.bytes_physical.current == large + page);
  CHECK(s.bytes_mapped.current == large + page);
  memory->write_pattern(cut, other, 13, stream);
  CHECK(memory->mismatches(cut, other, 13, stream) == 0);
  arena.deallocate(cut, other, stream);
  CHECK(arena.trim() == large + page);
}

TEST_CASE("large pages the device will not give are replaced by small pages", "[arena][battery]") {
  auto memory = make_battery_memory();
  FaultInjectingBackend refusing(memory->backend());
  Arena arena(refusing, memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const large = arena.large_page_bytes();
  std::size_t const slots = large / page;

  refusing.fail_nth(1, {BackendOp::create_chunk}, FaultInjectingBackend::Failure::out_of_memory);
  void* p = arena.allocate(large, stream);  // one large page wanted: refused, so `slots` small pages
  CHECK(refusing.fired());
  CHECK(reinterpret_cast<std::uintptr_t>(p) % large == 0);
  ArenaStats const s = arena.stats();
  CHECK(s.chunks_created == 1 + slots);  // the refused attempt, then the small pages
  CHECK(s.maps == slots);
  CHECK(s.access_calls == 1);
  memory->write_pattern(p, large, 13, stream);
  CHECK(memory->mismatches(p, large, 13, stream) == 0);
  arena.deallocate(p, large, stream);
}

TEST_CASE("compression is granted, or refused with Unsupported when required, or dropped when preferred",
          "[arena][battery][compression]") {
  auto memory = make_battery_memory();
  Backend& backend = memory->backend();
  Stream const stream = memory->new_stream();
  // The host backend never grants compression; the H200 grants generic compression.
  bool const granted = backend.space() == MemorySpace::device;
  LiveCounts const before = backend.live_counts();
  for (Compression policy : {Compression::preferred, Compression::required}) {
    ArenaOptions options = memory->options();
    options.compression = policy;
    Arena arena(backend, options);
    std::size_t const bytes = 3 * arena.page_bytes();
    if (policy == Compression::required && !granted) {
      CHECK_THROWS_AS(arena.allocate(bytes, stream), Unsupported);
      CHECK(arena.stats().bytes_physical.current == 0);
      continue;
    }
    void* p = arena.allocate(bytes, stream);
    memory->write_pattern(p, bytes, 21, stream);
    CHECK(memory->mismatches(p, bytes, 21, stream) == 0);
    arena.deallocate(p, bytes, stream);
  }
  CHECK(backend.live_counts().chunks == before.chunks);
}

// --- memory held after a failure, wrong sizes, streams, alignment ---------------------------------

TEST_CASE("a request refused at the byte limit gives back every page it created", "[arena][battery][failure]") {
  auto memory = make_battery_memory();
  Backend& backend = memory->backend();
  ArenaOptions options = memory->options();
  std::size_t const page = Arena(backend, options).page_bytes();
  options.byte_limit = 6 * page;
  options.large_page_bytes = 0;  // small pages only: the limit refuses the fifth new page exactly
  Arena arena(backend, options);
  Stream const stream = memory->new_stream();
  void* held = arena.allocate(2 * page, stream);
  ArenaStats const before = arena.stats();
  std::size_t const chunks_before = backend.live_counts().chunks;
  REQUIRE(before.bytes_physical.current == 2 * page);

  CHECK_THROWS_AS(arena.allocate(5 * page, stream), OutOfMemory);  // 4 pages fit under the limit, 5 do not
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_physical.current == 2 * page);
  CHECK(after.bytes_mapped.current == 2 * page);
  CHECK(backend.live_counts().chunks == chunks_before);
  CHECK(after.chunks_released == after.chunks_created - 2);  // every page created for it was released
  CHECK(after.allocations.current == 1);
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  // The arena goes on: what fits is served.
  void* fits = arena.allocate(4 * page, stream);
  CHECK(arena.stats().bytes_physical.current == 6 * page);
  arena.deallocate(fits, 4 * page, stream);
  arena.deallocate(held, 2 * page, stream);
}

TEST_CASE("a request larger than the free memory gives back every page it created", "[arena][battery][failure]") {
  auto memory = make_battery_memory();
  Backend& backend = memory->backend();
  Arena arena(backend, memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* held = arena.allocate(3 * page, stream);
  memory->write_pattern(held, 3 * page, 31, stream);
  memory->synchronize(stream);
  ArenaStats const before = arena.stats();
  LiveCounts const held_before = backend.live_counts();
  std::size_t const free_before = memory->free_bytes();
  std::size_t const too_much = (free_before / page + 2) * page;
  REQUIRE(too_much < arena.address_space_bytes());

  CHECK_THROWS_AS(arena.allocate(too_much, stream), OutOfMemory);
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_physical.current == before.bytes_physical.current);
  CHECK(after.bytes_mapped.current == before.bytes_mapped.current);
  // The rest of the process gets the memory back at once: the backend holds what it held before
  // (counted in its books, not in the device's free memory, which other processes move).
  LiveCounts const held_after = backend.live_counts();
  CHECK(held_after.chunks == held_before.chunks);
  CHECK(held_after.bytes_physical == held_before.bytes_physical);
  CHECK(held_after.bytes_mapped == held_before.bytes_mapped);
  CHECK(after.allocations.current == 1);
  CHECK(memory->mismatches(held, 3 * page, 31, stream) == 0);
  arena.deallocate(held, 3 * page, stream);
}

TEST_CASE("a request that fails at a later backend call gives back the pages it created", "[arena][battery][failure]") {
  auto memory = make_battery_memory();
  FaultInjectingBackend faulty(memory->backend());
  ArenaOptions options = memory->options();
  options.large_page_bytes = 0;
  Arena arena(faulty, options);
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* held = arena.allocate(page, stream);
  std::size_t const chunks_before = memory->backend().live_counts().chunks;
  for (BackendOp op : {BackendOp::create_chunk, BackendOp::map, BackendOp::set_access}) {
    INFO("failing " << to_string(op));
    faulty.fail_nth(op == BackendOp::set_access ? 1 : 3, {op});
    CHECK_THROWS_AS(arena.allocate(4 * page, stream), Error);
    CHECK(faulty.fired());
    CHECK(arena.stats().bytes_physical.current == page);
    CHECK(arena.stats().bytes_mapped.current == page);
    CHECK(memory->backend().live_counts().chunks == chunks_before);
    CHECK(memory->backend().live_counts().bytes_mapped == page);
  }
  faulty.disarm();
  arena.deallocate(held, page, stream);
}

TEST_CASE("a free with a size other than the one allocated is refused even within one size class",
          "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  void* p = arena.allocate(300, stream);  // the 512-byte class
  void* q = arena.allocate(1000, stream);  // the 1024-byte class
  ArenaStats const before = arena.stats();
  CHECK_THROWS_WITH(arena.deallocate(p, 512, stream), ContainsSubstring("not the size that was allocated"));
  CHECK_THROWS_WITH(arena.deallocate(p, 299, stream), ContainsSubstring("not the size that was allocated"));
  CHECK_THROWS_WITH(arena.deallocate(q, 1024, stream), ContainsSubstring("not the size that was allocated"));
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_requested.current == 1300);
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  CHECK(after.allocations.current == 2);
  arena.deallocate(p, 300, stream);  // the right size is still accepted
  arena.deallocate(q, 1000, stream);
  CHECK(arena.stats().bytes_requested.current == 0);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("a refused free on a stream the arena has not seen does not register that stream", "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  void* p = arena.allocate(300, stream);
  CHECK(arena.stats().streams == 1);
  Stream const stranger = memory->new_stream();
  CHECK_THROWS_AS(arena.deallocate(p, 512, stranger), Error);
  CHECK_THROWS_AS(arena.deallocate(static_cast<std::byte*>(p) + 256, 300, stranger), Error);
  CHECK(arena.stats().streams == 1);
  arena.deallocate(p, 300, stranger);  // a right free registers it
  CHECK(arena.stats().streams == 2);
  arena.release_stream(stranger);  // forgotten; its free block passes to the default stream
  CHECK(arena.stats().streams == 2);
  void* again = arena.allocate(300, nullptr);
  CHECK(again == p);
  arena.deallocate(again, 300, nullptr);
}

TEST_CASE("a small request with an alignment a slab can honour shares a slab instead of taking a page",
          "[arena][battery]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  auto* p = static_cast<std::byte*>(arena.allocate(1, stream, 4096));
  auto* q = static_cast<std::byte*>(arena.allocate(1, stream, 4096));
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
  CHECK(q == p + 4096);  // one 4 KiB block each, in one slab page
  CHECK(arena.stats().bytes_mapped.current == page);
  // Up to small_max_bytes() the alignment is honoured by a block size that is a multiple of it.
  std::size_t const quarter = page / 4;
  auto* r = static_cast<std::byte*>(arena.allocate(100, stream, quarter));
  auto* t = static_cast<std::byte*>(arena.allocate(100, stream, quarter));
  CHECK(reinterpret_cast<std::uintptr_t>(r) % quarter == 0);
  CHECK(t == r + quarter);
  CHECK(arena.stats().bytes_mapped.current == 2 * page);
  memory->write_pattern(p, 4, 1, stream);
  memory->write_pattern(r, 100 / 4 * 4, 2, stream);
  CHECK(memory->mismatches(p, 4, 1, stream) == 0);
  CHECK(memory->mismatches(r, 100 / 4 * 4, 2, stream) == 0);
  CHECK_THROWS_WITH(arena.deallocate(p, 4096, stream), ContainsSubstring("not the size that was allocated"));
  for (auto [x, n] : {std::pair{p, 1}, {q, 1}, {r, 100}, {t, 100}}) arena.deallocate(x, static_cast<std::size_t>(n), stream);
  CHECK(arena.stats().allocations.current == 0);
}

// Churn: memory moves between addresses only when it must -----------------------------------------
// Moving a page costs a map and an access grant (~30 µs per page on the H200, `bench_driver_calls
// --benchmark_filter=driver_calls/`; the unmap is deferred); these
// cases pin how many pages each kind of reuse maps, unmaps and moves.

TEST_CASE("a request one page larger than a cached run extends it in place: 1 map, 0 unmaps", "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), memory->options());
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  REQUIRE(arena.large_page_bytes() >= 4 * page);  // 2 and 3 pages are small layouts

  void* p = arena.allocate(2 * page, stream);
  arena.deallocate(p, 2 * page, stream);  // cached: 2 mapped pages, free addresses behind them
  ArenaStats const before = arena.stats();
  void* q = arena.allocate(3 * page, stream);
  ArenaStats const after = arena.stats();
  CHECK(q == p);
  CHECK(after.maps - before.maps == 1);
  CHECK(after.unmaps - before.unmaps == 0);
  CHECK(after.pages_moved == 0);
  CHECK(after.chunks_created - before.chunks_created == 1);
  CHECK(after.access_calls - before.access_calls == 1);
  CHECK(after.bytes_mapped.current == 3 * page);
  CHECK(memory->backend().live_counts().bytes_mapped == 3 * page);
  memory->write_pattern(q, 3 * page, 31, stream);
  CHECK(memory->mismatches(q, 3 * page, 31, stream) == 0);
  arena.deallocate(q, 3 * page, stream);
}

TEST_CASE("a new run is spaced apart from the run before it, which then grows in place with no page moved",
          "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  options.address_space_bytes = 0;  // the default, 8x the device's memory: room to space runs apart
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  REQUIRE(arena.large_page_bytes() >= 4 * page);

  void* a = arena.allocate(2 * page, stream);
  void* wall = arena.allocate(2 * page, stream);  // packed, it would lie right behind `a`
  CHECK(wall != static_cast<std::byte*>(a) + 2 * page);
  memory->write_pattern(a, 2 * page, 34, stream);
  arena.deallocate(a, 2 * page, stream);
  ArenaStats const before = arena.stats();
  void* q = arena.allocate(3 * page, stream);
  ArenaStats const after = arena.stats();
  CHECK(q == a);
  CHECK(after.maps - before.maps == 1);
  CHECK(after.chunks_created - before.chunks_created == 1);
  CHECK(after.unmaps == before.unmaps);
  CHECK(after.pages_moved == 0);
  CHECK(memory->mismatches(q, 2 * page, 34, stream) == 0);  // the cached pages kept their data where they are
  memory->write_pattern(q, 3 * page, 35, stream);
  CHECK(memory->mismatches(q, 3 * page, 35, stream) == 0);
  arena.deallocate(q, 3 * page, stream);
  arena.deallocate(wall, 2 * page, stream);
}

TEST_CASE("a cached run with free addresses only before it grows downwards in place", "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  // 64 large pages of address space, less than the device's memory: spacing runs apart would cut into
  // the free run kept for the largest request, so runs are packed, each right behind the last.
  options.address_space_bytes = 64 * options.large_page_bytes;
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  REQUIRE(arena.large_page_bytes() >= 4 * page);

  auto* x = static_cast<std::byte*>(arena.allocate(page, stream));  // slot 0
  auto* y = static_cast<std::byte*>(arena.allocate(2 * page, stream));  // slots 1-2
  void* z = arena.allocate(page, stream);  // slot 3: nothing free behind y
  REQUIRE(y == x + page);
  arena.deallocate(x, page, stream);
  CHECK(arena.trim() == page);  // slot 0: free addresses, nothing mapped
  arena.deallocate(y, 2 * page, stream);
  ArenaStats const before = arena.stats();
  void* q = arena.allocate(3 * page, stream);
  ArenaStats const after = arena.stats();
  CHECK(q == x);
  CHECK(after.maps - before.maps == 1);
  CHECK(after.unmaps - before.unmaps == 0);
  CHECK(after.pages_moved == 0);
  memory->write_pattern(q, 3 * page, 32, stream);
  memory->write_pattern(z, page, 33, stream);
  CHECK(memory->mismatches(q, 3 * page, 32, stream) == 0);
  CHECK(memory->mismatches(z, page, 33, stream) == 0);
  arena.deallocate(q, 3 * page, stream);
  arena.deallocate(z, page, stream);
}

TEST_CASE("a cached large span serves a request of fewer whole large pages from its front with no driver call",
          "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), small_tail_layout(*memory));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const large = arena.large_page_bytes();
  REQUIRE(large >= 4 * page);

  auto* p = static_cast<std::byte*>(arena.allocate(3 * large + 2 * page, stream));
  arena.deallocate(p, 3 * large + 2 * page, stream);
  ArenaStats const before = arena.stats();
  void* q = arena.allocate(2 * large, stream);  // the first two large pages
  void* r = arena.allocate(large + page, stream);  // the rest: one large page and one of the two small ones
  void* t = arena.allocate(page, stream);  // the last small page, cached apart
  ArenaStats const after = arena.stats();
  CHECK(q == p);
  CHECK(r == p + 2 * large);
  CHECK(t == p + 3 * large + page);
  CHECK(after.maps == before.maps);
  CHECK(after.unmaps == before.unmaps);
  CHECK(after.chunks_created == before.chunks_created);
  CHECK(after.pages_moved == 0);
  memory->write_pattern(q, 2 * large, 41, stream);
  memory->write_pattern(r, large + page, 42, stream);
  memory->write_pattern(t, page, 43, stream);
  CHECK(memory->mismatches(q, 2 * large, 41, stream) == 0);
  CHECK(memory->mismatches(r, large + page, 42, stream) == 0);
  CHECK(memory->mismatches(t, page, 43, stream) == 0);
  arena.deallocate(q, 2 * large, stream);
  arena.deallocate(r, large + page, stream);
  arena.deallocate(t, page, stream);
  CHECK(arena.trim() == 3 * large + 2 * page);
}

TEST_CASE("a request larger than a cached large span with free addresses behind it grows the span in place",
          "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), small_tail_layout(*memory));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const large = arena.large_page_bytes();
  REQUIRE(large >= 4 * page);

  SECTION("more small pages: mapped behind the span's small tail") {
    void* p = arena.allocate(2 * large + page, stream);
    arena.deallocate(p, 2 * large + page, stream);
    ArenaStats const before = arena.stats();
    void* q = arena.allocate(2 * large + 3 * page, stream);
    ArenaStats const after = arena.stats();
    CHECK(q == p);
    CHECK(after.maps - before.maps == 2);
    CHECK(after.unmaps - before.unmaps == 0);
    CHECK(after.chunks_created - before.chunks_created == 2);
    CHECK(after.pages_moved == 0);
    CHECK(after.bytes_mapped.current == 2 * large + 3 * page);
    memory->write_pattern(q, 2 * large + 3 * page, 51, stream);
    CHECK(memory->mismatches(q, 2 * large + 3 * page, 51, stream) == 0);
    arena.deallocate(q, 2 * large + 3 * page, stream);
  }
  SECTION("one more large page: the small tail is unmapped and the large page mapped where it was") {
    void* p = arena.allocate(2 * large + page, stream);
    arena.deallocate(p, 2 * large + page, stream);
    ArenaStats const before = arena.stats();
    void* q = arena.allocate(3 * large + page, stream);
    ArenaStats const after = arena.stats();
    CHECK(q == p);
    CHECK(after.maps - before.maps == 2);      // the new large page, the tail's small page again
    CHECK(after.unmaps - before.unmaps == 1);  // the tail
    CHECK(after.chunks_created - before.chunks_created == 1);
    CHECK(after.pages_moved == 1);
    CHECK(after.bytes_mapped.current == 3 * large + page);
    CHECK(after.bytes_physical.current == 3 * large + page);
    memory->write_pattern(q, 3 * large + page, 52, stream);
    CHECK(memory->mismatches(q, 3 * large + page, 52, stream) == 0);
    arena.deallocate(q, 3 * large + page, stream);
  }
}

TEST_CASE("pages stitched from scattered free pages are counted as moved, first maps of new pages are not",
          "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  std::size_t const page = Arena(memory->backend(), options).page_bytes();
  options.byte_limit = 6 * page;
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();

  std::vector<void*> pages;
  for (int i = 0; i < 6; ++i) pages.push_back(arena.allocate(page, stream));
  CHECK(arena.stats().pages_moved == 0);
  CHECK(arena.stats().maps == 6);
  for (int i = 0; i < 6; i += 2) arena.deallocate(pages[static_cast<std::size_t>(i)], page, stream);  // 3 free, scattered
  CHECK(arena.stats().host_waits == 0);
  void* joined = arena.allocate(3 * page, stream);  // no room to create: the 3 pages move
  ArenaStats const s = arena.stats();
  CHECK(s.pages_moved == 3);
  CHECK(s.host_waits == 0);  // the stream's queued work may still use them at their old addresses: a fence, no wait
  CHECK(s.maps == 9);
  CHECK(s.unmaps == 0);  // their old addresses stay mapped (stale) until needed
  CHECK(s.bytes_stale == 3 * page);
  CHECK(s.bytes_mapped.current == 6 * page);
  CHECK(memory->backend().live_counts().bytes_mapped == 9 * page);
  CHECK(s.chunks_created == 6);
  memory->write_pattern(joined, 3 * page, 61, stream);
  for (int i = 1; i < 6; i += 2) memory->write_pattern(pages[static_cast<std::size_t>(i)], page, 62 + i, stream);
  CHECK(memory->mismatches(joined, 3 * page, 61, stream) == 0);
  for (int i = 1; i < 6; i += 2) CHECK(memory->mismatches(pages[static_cast<std::size_t>(i)], page, 62 + i, stream) == 0);
  CHECK(arena.trim() == 0);  // nothing cached or pooled, but trim unmaps the stale addresses
  CHECK(arena.stats().unmaps == 3);
  CHECK(arena.stats().bytes_stale == 0);
  CHECK(memory->backend().live_counts().bytes_mapped == 6 * page);
  CHECK(memory->mismatches(joined, 3 * page, 61, stream) == 0);
  arena.deallocate(joined, 3 * page, stream);
  for (int i = 1; i < 6; i += 2) arena.deallocate(pages[static_cast<std::size_t>(i)], page, stream);
}

TEST_CASE("stale addresses are unmapped when a request needs them, and when their page is released",
          "[arena][battery][churn]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  options.large_page_bytes = 0;
  std::size_t const page = Arena(memory->backend(), options).page_bytes();
  options.address_space_bytes = 4 * page;
  options.byte_limit = 4 * page;
  Arena arena(memory->backend(), options);
  Stream const stream = memory->new_stream();
  void* a = arena.allocate(page, stream);
  void* b = arena.allocate(page, stream);
  REQUIRE(b == static_cast<std::byte*>(a) + page);
  arena.deallocate(a, page, stream);
  // Two pages: a's page moves behind b (its old address stays mapped, stale), one is created.
  void* joined = arena.allocate(2 * page, stream);
  CHECK(joined == static_cast<std::byte*>(a) + 2 * page);
  CHECK(arena.stats().pages_moved == 1);
  CHECK(arena.stats().bytes_stale == page);
  CHECK(arena.stats().unmaps == 0);
  arena.deallocate(b, page, stream);
  arena.deallocate(joined, 2 * page, stream);
  // Four pages: no free run is left, so the cache and the stale address are unmapped, and the
  // four pages are mapped from the start of the range.
  void* all = arena.allocate(4 * page, stream);
  CHECK(all == a);
  CHECK(arena.stats().bytes_stale == 0);
  CHECK(arena.stats().unmaps == 4);
  CHECK(arena.stats().chunks_created == 4);
  CHECK(memory->backend().live_counts().bytes_mapped == 4 * page);
  memory->write_pattern(all, 4 * page, 71, stream);
  CHECK(memory->mismatches(all, 4 * page, 71, stream) == 0);
  arena.deallocate(all, 4 * page, stream);
  // Released pages take their stale addresses with them: after trim nothing is mapped.
  CHECK(arena.trim() == 4 * page);
  CHECK(arena.stats().bytes_stale == 0);
  CHECK(memory->backend().live_counts().bytes_mapped == 0);
  CHECK(memory->backend().live_counts().chunks == 0);
}

TEST_CASE("a failure while growing or cutting a cached run keeps what stays mapped cached and creates nothing",
          "[arena][battery][churn][failure]") {
  auto memory = make_battery_memory();
  FaultInjectingBackend faulty(memory->backend());
  Arena arena(faulty, small_tail_layout(*memory));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  std::size_t const large = arena.large_page_bytes();
  REQUIRE(large >= 4 * page);

  SECTION("a small run grown in place") {
    void* p = arena.allocate(2 * page, stream);
    arena.deallocate(p, 2 * page, stream);
    faulty.fail_nth(1, {BackendOp::map});
    CHECK_THROWS_AS(arena.allocate(3 * page, stream), Error);
    CHECK(faulty.fired());
    faulty.disarm();
    CHECK(arena.stats().bytes_physical.current == 2 * page);  // the page created for it was released
    CHECK(memory->backend().live_counts().bytes_physical == 2 * page);
    ArenaStats const before = arena.stats();
    void* q = arena.allocate(2 * page, stream);  // the run is still cached, still mapped
    CHECK(q == p);
    CHECK(arena.stats().maps == before.maps);
    arena.deallocate(q, 2 * page, stream);
  }
  SECTION("a large span cut inside a large page") {
    void* p = arena.allocate(2 * large, stream);  // no small tail: the cut unmaps the second large page
    arena.deallocate(p, 2 * large, stream);
    faulty.fail_nth(1, {BackendOp::map});
    CHECK_THROWS_AS(arena.allocate(large + page, stream), Error);
    CHECK(faulty.fired());
    faulty.disarm();
    ArenaStats const failed = arena.stats();
    CHECK(failed.chunks_created == 3);
    CHECK(failed.chunks_released == 2);  // the idle second large page, then the small page created for the request
    CHECK(failed.bytes_physical.current == large);
    CHECK(failed.bytes_mapped.current == large);
    CHECK(memory->backend().live_counts().bytes_mapped == large);
    void* q = arena.allocate(large, stream);  // the front is still cached, still mapped
    CHECK(q == p);
    CHECK(arena.stats().maps == failed.maps);
    arena.deallocate(q, large, stream);
  }
  std::size_t const held = arena.stats().bytes_physical.current;
  CHECK(arena.trim() == held);
  CHECK(memory->backend().live_counts().bytes_physical == 0);
}

// --- lent slots and where the bytes are ------------------------------------------------------------

TEST_CASE("a whole-page request that only another stream's lent slots can back takes them, ordered after that "
          "stream's work",
          "[arena][battery][tails]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  std::size_t const large = options.large_page_bytes;
  options.share_large_page_tails = true;
  options.byte_limit = 2 * large;  // the owner's two large pages, nothing more
  options.max_lent_bytes = large;
  options.max_lent_tail_bytes = 0;  // the owner's whole tail is lent
  Arena arena(memory->backend(), options);
  std::size_t const page = arena.page_bytes();
  if (arena.large_page_bytes() == 0) SKIP("no large pages");
  Stream const a = memory->new_stream();
  Stream const b = memory->new_stream();
  std::size_t const owner_bytes = large + page;  // two large pages; large - page lent on a
  auto* owner = static_cast<std::byte*>(arena.allocate(owner_bytes, a));
  memory->write_pattern(owner, owner_bytes, 11, a);
  ArenaStats const before = arena.stats();
  REQUIRE(before.bytes_lent == large - page);
  auto* borrowed = static_cast<std::byte*>(arena.allocate(3 * page, b));  // no page can be created
  CHECK(borrowed == owner + owner_bytes);
  ArenaStats const after = arena.stats();
  CHECK(after.chunks_created == before.chunks_created);
  CHECK(after.cross_stream_reuses == before.cross_stream_reuses + 1);
  CHECK(after.bytes_lent == large - 4 * page);
  memory->write_pattern(borrowed, 3 * page, 12, b);
  CHECK(memory->mismatches(owner, owner_bytes, 11, a) == 0);
  CHECK(memory->mismatches(borrowed, 3 * page, 12, b) == 0);
  arena.deallocate(borrowed, 3 * page, b);
  arena.deallocate(owner, owner_bytes, a);
  CHECK(arena.trim() == 2 * large);
  CHECK(arena.stats().bytes_physical.current == 0);
}

TEST_CASE("the bytes held split into live, pinned, lent, cached and pooled after every operation of a random run",
          "[arena][battery][stats]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  std::size_t const page = Arena(memory->backend(), options).page_bytes();
  options.whole_chunk_bytes = GENERATE_COPY(std::size_t{0}, 3 * page);  // with whole chunks from 3 pages on too
  CAPTURE(options.whole_chunk_bytes);
  Arena arena(memory->backend(), options);
  Stream const streams[2] = {memory->new_stream(), memory->new_stream()};
  std::mt19937_64 rng(7);
  std::vector<Allocation> live;
  auto const check_sum = [&] {
    ArenaStats const s = arena.stats();
    REQUIRE(s.bytes_live + s.bytes_pinned + s.bytes_lent + s.bytes_cached + s.bytes_pooled == s.bytes_physical.current);
    REQUIRE(s.bytes_live >= s.bytes_requested.current);
  };
  for (int step = 0; step < 300; ++step) {
    Stream const stream = streams[rng() % 2];
    if (!live.empty() && rng() % 3 == 0) {
      std::size_t const victim = rng() % live.size();
      arena.deallocate(live[victim].p, live[victim].bytes, stream);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    } else {
      std::size_t const bytes = random_size(rng, arena.page_bytes(), 40.0);
      live.push_back({static_cast<std::byte*>(arena.allocate(bytes, stream)), bytes, 0, stream});
    }
    check_sum();
    if (step % 100 == 99) {
      arena.release_stream(streams[1]);
      check_sum();
    }
  }
  for (auto const& a : live) arena.deallocate(a.p, a.bytes, a.stream);
  ArenaStats const idle = arena.stats();
  CHECK(idle.bytes_live == 0);
  CHECK(idle.bytes_pinned == 0);
  CHECK(idle.bytes_lent + idle.bytes_cached + idle.bytes_pooled == idle.bytes_physical.current);
  arena.trim();
  CHECK(arena.stats().bytes_physical.current == 0);
}

TEST_CASE("the statistics keep where the bytes held were when they reached their peak", "[arena][battery][stats]") {
  auto memory = make_battery_memory();
  ArenaOptions options = memory->options();
  options.max_idle_percent = 100;     // stream b creates its pages below rather than move a's cached ones
  options.stream_cache_run_bytes = 0;  // a's freed run is cached, not parked in its front (counted live)
  Arena arena(memory->backend(), options);
  Stream const a = memory->new_stream();
  Stream const b = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* block = arena.allocate(1000, a);  // one slab page: its block live, the rest pinned
  std::size_t const block_bytes = arena.stats().bytes_live;
  REQUIRE(block_bytes >= 1000);
  void* run = arena.allocate(2 * page, a);
  ArenaHeld h = arena.stats().at_physical_peak;
  CHECK(h.bytes_requested == 2 * page + 1000);
  CHECK(h.bytes_live == 2 * page + block_bytes);
  CHECK(h.bytes_pinned == page - block_bytes);
  CHECK(h.bytes_lent + h.bytes_cached + h.bytes_pooled == 0);
  arena.deallocate(run, 2 * page, a);  // cached on a: no new peak
  CHECK(arena.stats().at_physical_peak.bytes_live == 2 * page + block_bytes);
  void* wide = arena.allocate(4 * page, b);
  ArenaStats s = arena.stats();
  h = s.at_physical_peak;
  CHECK(s.bytes_physical.peak == 7 * page);
  CHECK(h.bytes_requested == 4 * page + 1000);
  CHECK(h.bytes_live == 4 * page + block_bytes);
  CHECK(h.bytes_pinned == page - block_bytes);
  CHECK(h.bytes_cached == 2 * page);
  CHECK(h.bytes_live + h.bytes_pinned + h.bytes_lent + h.bytes_cached + h.bytes_pooled == s.bytes_physical.peak);
  arena.deallocate(wide, 4 * page, b);
  arena.deallocate(block, 1000, a);
  arena.trim();
  s = arena.stats();
  CHECK(s.bytes_physical.current == 0);
  CHECK(s.at_physical_peak.bytes_cached == 2 * page);  // the peak's, not the end's
  CHECK(s.at_physical_peak.bytes_live == 4 * page + block_bytes);
}

// --- whole chunks (ArenaOptions::whole_chunk_bytes) ----------------------------------------------

namespace {

/// The battery's options with whole chunks from `pages` pages on.
ArenaOptions whole_chunk_options(BatteryMemory& memory, std::size_t pages, std::size_t limit_pages = 0) {
  ArenaOptions options = memory.options();
  std::size_t const page = Arena(memory.backend(), options).page_bytes();
  options.whole_chunk_bytes = pages * page;
  options.byte_limit = limit_pages * page;
  return options;
}

void require_bytes_add_up(const Arena& arena) {
  ArenaStats const s = arena.stats();
  REQUIRE(s.bytes_live + s.bytes_pinned + s.bytes_lent + s.bytes_cached + s.bytes_pooled == s.bytes_physical.current);
  REQUIRE(s.bytes_whole_idle <= s.bytes_cached);
}

}  // namespace

TEST_CASE("with whole chunks a request takes one chunk of its own, kept mapped when freed for a request of its "
          "size or up to a sixteenth smaller",
          "[arena][battery][whole]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), whole_chunk_options(*memory, 4));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  ArenaStats const start = arena.stats();

  void* p = arena.allocate(32 * page - 100, stream);
  ArenaStats const made = arena.stats();
  CHECK(made.chunks_created == start.chunks_created + 1);  // one chunk, one map, whatever its size
  CHECK(made.maps == start.maps + 1);
  CHECK(made.whole_chunks_created == 1);
  CHECK(made.bytes_live == 32 * page);
  CHECK(made.bytes_physical.current == 32 * page);
  memory->write_pattern(p, 32 * page - 100, 11, stream);
  CHECK(memory->mismatches(p, 32 * page - 100, 11, stream) == 0);
  arena.deallocate(p, 32 * page - 100, stream);
  CHECK(arena.stats().bytes_whole_idle == 32 * page);
  CHECK(arena.stats().bytes_live == 0);
  require_bytes_add_up(arena);

  // A request of 31 pages (and a byte) fits a 32-page chunk (31 + 31/16 = 32): reused as it lies.
  void* q = arena.allocate(30 * page + 1, stream);
  ArenaStats const reused = arena.stats();
  CHECK(q == p);
  CHECK(reused.chunks_created == made.chunks_created);
  CHECK(reused.maps == made.maps);
  CHECK(reused.whole_chunk_reuses == 1);
  CHECK(reused.bytes_whole_idle == 0);
  CHECK(reused.bytes_live == 32 * page);
  memory->write_pattern(q, 30 * page + 1, 12, stream);
  CHECK(memory->mismatches(q, 30 * page + 1, 12, stream) == 0);
  arena.deallocate(q, 30 * page + 1, stream);

  // 30 pages would waste more than a sixteenth of the request: a chunk of its own.
  void* r = arena.allocate(30 * page, stream);
  ArenaStats const other = arena.stats();
  CHECK(r != p);
  CHECK(other.whole_chunks_created == 2);
  CHECK(other.whole_chunk_reuses == 1);
  CHECK(other.bytes_whole_idle == 32 * page);
  CHECK(other.bytes_live == 30 * page);
  require_bytes_add_up(arena);
  // Below whole_chunk_bytes, requests take pages as before.
  void* small = arena.allocate(3 * page, stream);
  CHECK(arena.stats().whole_chunks_created == 2);
  arena.deallocate(small, 3 * page, stream);
  arena.deallocate(r, 30 * page, stream);
  CHECK(arena.trim() == 32 * page + 30 * page + 3 * page);
  CHECK(arena.stats().whole_chunks_released == 2);
  CHECK(arena.stats().bytes_physical.current == 0);
}

TEST_CASE("with whole chunks a chunk freed on one stream serves another only through an event wait",
          "[arena][battery][whole]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), whole_chunk_options(*memory, 4));
  Stream const one = memory->new_stream();
  Stream const two = memory->new_stream();
  std::size_t const bytes = 6 * arena.page_bytes();
  void* p = arena.allocate(bytes, one);
  memory->write_pattern(p, bytes, 1, one);
  arena.deallocate(p, bytes, one);
  std::size_t const waits = arena.stats().cross_stream_reuses;
  void* q = arena.allocate(bytes, two);
  CHECK(q == p);
  CHECK(arena.stats().whole_chunks_created == 1);
  CHECK(arena.stats().cross_stream_reuses == waits + 1);
  memory->write_pattern(q, bytes, 2, two);
  CHECK(memory->mismatches(q, bytes, 2, two) == 0);
  arena.deallocate(q, bytes, two);
  // A stream released hands its idle chunks on: they still serve requests.
  arena.release_stream(two);
  void* again = arena.allocate(bytes, one);
  CHECK(again == p);
  CHECK(arena.stats().whole_chunks_created == 1);
  arena.deallocate(again, bytes, one);
}

TEST_CASE("with whole chunks a request the device has no room for gets the idle chunk that makes room, the smallest "
          "that does",
          "[arena][battery][whole]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), whole_chunk_options(*memory, 2, 14));  // 14 pages in all
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* a = arena.allocate(2 * page, stream);
  void* b = arena.allocate(7 * page, stream);
  void* c = arena.allocate(4 * page, stream);
  for (auto [p, pages] : {std::pair{a, 2}, std::pair{b, 7}, std::pair{c, 4}}) arena.deallocate(p, pages * page, stream);
  REQUIRE(arena.stats().bytes_whole_idle == 13 * page);

  // 1 page is free: giving back the 4-page chunk makes room for 5 (none fits it as it lies); the
  // 2- and 7-page ones stay.
  void* d = arena.allocate(5 * page, stream);
  memory->write_pattern(d, 5 * page, 3, stream);
  ArenaStats const made = arena.stats();
  CHECK(made.whole_chunks_released == 1);
  CHECK(made.bytes_whole_idle == 9 * page);
  CHECK(made.bytes_physical.current == 14 * page);
  require_bytes_add_up(arena);

  // More than the limit: every idle chunk goes back before the request fails, and nothing else changes.
  ArenaStats const before = arena.stats();
  try {
    (void)arena.allocate(15 * page, stream);
    FAIL("a request over the byte limit succeeded");
  } catch (const OutOfMemory& e) {
    CHECK_THAT(e.context(), ContainsSubstring("after giving back every idle page and chunk"));
    CHECK_THAT(e.context(), ContainsSubstring("byte_limit"));
  }
  ArenaStats const after = arena.stats();
  CHECK(after.whole_chunks_released == 3);
  CHECK(after.bytes_whole_idle == 0);
  CHECK(after.bytes_physical.current == 5 * page);
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  CHECK(after.allocations.current == 1);
  CHECK(memory->mismatches(d, 5 * page, 3, stream) == 0);
  arena.deallocate(d, 5 * page, stream);
}

TEST_CASE("with whole chunks a smaller request the device has no room for gets the memory of idle chunks",
          "[arena][battery][whole]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), whole_chunk_options(*memory, 2, 6));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* a = arena.allocate(3 * page, stream);
  void* b = arena.allocate(3 * page, stream);
  arena.deallocate(a, 3 * page, stream);
  arena.deallocate(b, 3 * page, stream);
  REQUIRE(arena.stats().bytes_whole_idle == 6 * page);
  for (std::size_t bytes : {page, std::size_t{256}}) {  // a page, then a block of a new slab
    INFO(bytes << " bytes");
    void* p = arena.allocate(bytes, stream);
    memory->write_pattern(p, bytes, 4, stream);
    CHECK(memory->mismatches(p, bytes, 4, stream) == 0);
    arena.deallocate(p, bytes, stream);
  }
  CHECK(arena.stats().whole_chunks_released == 2);
  CHECK(arena.stats().bytes_whole_idle == 0);
  require_bytes_add_up(arena);
}

TEST_CASE("with whole chunks a bad free of a chunk is refused and changes nothing", "[arena][battery][whole]") {
  auto memory = make_battery_memory();
  Arena arena(memory->backend(), whole_chunk_options(*memory, 2));
  Stream const stream = memory->new_stream();
  std::size_t const page = arena.page_bytes();
  void* p = arena.allocate(3 * page, stream);
  ArenaStats const before = arena.stats();
  CHECK_THROWS_AS(arena.deallocate(p, 3 * page - 1, stream), Error);  // within the same page count
  CHECK_THROWS_AS(arena.deallocate(static_cast<std::byte*>(p) + page, 2 * page, stream), Error);
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_requested.current == before.bytes_requested.current);
  CHECK(after.bytes_whole_idle == 0);
  arena.deallocate(p, 3 * page, stream);
  CHECK(arena.stats().bytes_whole_idle == 3 * page);
  CHECK_THROWS_AS(arena.deallocate(p, 3 * page, stream), Error);  // a second free
  CHECK(arena.stats().bytes_whole_idle == 3 * page);
  void* q = arena.allocate(3 * page, stream);  // the chunk was idled once, not twice
  void* r = arena.allocate(3 * page, stream);
  CHECK(q == p);
  CHECK(r != p);
  arena.deallocate(q, 3 * page, stream);
  arena.deallocate(r, 3 * page, stream);
}
