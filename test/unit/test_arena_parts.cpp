// The Arena's parts on the host backend, each on its own: the size-class slabs, the page pool
// (addresses and pages, no streams), the per-stream caches and their indexes, and the counting
// backend the Arena's statistics read.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include <cuvmm/counting_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>

#include "allocators/page_pool.hpp"
#include "allocators/slabs.hpp"
#include "allocators/stream_caches.hpp"
#include "allocators/stream_order.hpp"
#include "support/node_spares.hpp"
#include "support/room_for_one.hpp"

using namespace cuvmm;
using namespace cuvmm::detail;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr std::size_t page = 64 * KiB;

PagePoolOptions pool_options(std::size_t large_pages_of = 4, std::size_t byte_limit = 0) {
  PagePoolOptions o;
  o.page = page;
  o.large_page = large_pages_of * page;
  o.address_space = 64 * page;
  o.byte_limit = byte_limit;
  o.grants = {{0, Access::read_write}};
  return o;
}

Stream fake_stream(std::uintptr_t n) { return reinterpret_cast<Stream>(n * 64); }

/// Host ordering in which the streams of `capturing` cannot be marked, as a stream capturing a
/// CUDA graph cannot.
class CapturingStreamOrder final : public StreamOrder {
 public:
  std::set<Stream> capturing;
  Marker create_marker() override { return nullptr; }
  void destroy_marker(Marker) noexcept override {}
  void mark(Marker, Stream) override {}
  void order_after(Stream, Marker) override {}
  void wait(Marker) override {}
  bool done(Marker) override { return true; }
  bool can_mark(Stream stream) override { return !capturing.contains(stream); }
};

}  // namespace

// --- slabs ---------------------------------------------------------------------------------------

TEST_CASE("size classes are multiples of 256 B below 1 KiB, then four per doubling up to half a page",
          "[arena][slabs]") {
  Slabs const slabs(page);
  CHECK(slabs.small_max() == page / 2);
  REQUIRE(slabs.class_count() == 24);
  std::vector<std::size_t> first_eight;
  for (std::size_t c = 0; c < 8; ++c) first_eight.push_back(slabs.block_bytes(c));
  CHECK(first_eight == std::vector<std::size_t>{256, 512, 768, 1024, 1280, 1536, 1792, 2048});
  CHECK(slabs.block_bytes(23) == page / 2);
  CHECK(Slabs(256).small_max() == 0);  // a page smaller than two blocks has no classes
  CHECK(Slabs(256).class_count() == 0);
}

TEST_CASE("a slab class is the smallest that holds the request and is a multiple of its alignment",
          "[arena][slabs]") {
  Slabs const slabs(page);
  auto const size_of = [&](std::size_t bytes, std::size_t alignment) -> std::size_t {
    auto const c = slabs.class_for(bytes, alignment);
    return c ? slabs.block_bytes(*c) : 0;
  };
  CHECK(size_of(1, 256) == 256);
  CHECK(size_of(300, 256) == 512);
  CHECK(size_of(1, 4096) == 4096);
  CHECK(size_of(5000, 4096) == 8192);  // 5120, 6144 and 7168 are not multiples of 4096
  CHECK(size_of(100, page / 4) == page / 4);
  CHECK(size_of(page / 2, 256) == page / 2);
  CHECK(size_of(page / 2 + 1, 256) == 0);  // whole pages
  CHECK(size_of(1, page) == 0);            // an alignment above small_max: whole pages
}

TEST_CASE("a slab hands out fresh blocks in order and frees only a live block at its exact size",
          "[arena][slabs]") {
  Slabs slabs(page);
  std::size_t const c512 = *slabs.class_for(300, 256);
  slabs.open(3, c512);
  CHECK(slabs.contains(3));
  auto const a = slabs.hand_out_fresh(3, 300);
  auto const b = slabs.hand_out_fresh(3, 512);
  CHECK(a.offset == 0);
  CHECK(b.offset == 512);
  CHECK_FALSE(b.last);
  CHECK(slabs.check_free(3, 0, 300, 1000) == c512);
  CHECK_THROWS_WITH(slabs.check_free(3, 0, 512, 1000), ContainsSubstring("not the size that was allocated"));
  CHECK_THROWS_WITH(slabs.check_free(3, 512, 300, 1000), ContainsSubstring("not the size that was allocated"));
  CHECK_THROWS_WITH(slabs.check_free(3, 1024, 512, 1000), ContainsSubstring("freed twice"));  // never handed out
  CHECK_THROWS_WITH(slabs.check_free(3, 100, 300, 1000), ContainsSubstring("not a live allocation"));
  CHECK_THROWS_WITH(slabs.check_free(4, 0, 300, 1000), ContainsSubstring("not allocated by this arena"));
  slabs.mark_free(3, 0);
  CHECK_THROWS_WITH(slabs.check_free(3, 0, 300, 1000), ContainsSubstring("freed twice"));
  CHECK(slabs.remove_empty().empty());  // one block still live
  slabs.hand_out(3, 0, 7);              // the freed block again, for 7 bytes
  CHECK(slabs.check_free(3, 0, 7, 1000) == c512);
  slabs.mark_free(3, 0);
  slabs.mark_free(3, 512);
  CHECK(slabs.remove_empty() == std::vector<std::pair<std::size_t, std::size_t>>{{3, c512}});
  CHECK_FALSE(slabs.contains(3));
  // The last block of a slab says so.
  slabs.open(5, slabs.class_count() - 1);  // page/2 blocks: two
  CHECK_FALSE(slabs.hand_out_fresh(5, 1).last);
  CHECK(slabs.hand_out_fresh(5, 1).last);
}

// --- the page pool -------------------------------------------------------------------------------

TEST_CASE("a span is backed by large pages at an aligned start, then small ones, mapped with one grant",
          "[arena][pool]") {
  HostBackend host({.granularity = page});
  CountingBackend counting(host);
  {
    PagePool pool(counting, pool_options());
    auto span = pool.take_slots(6);  // a large layout: one large page (4 slots), two small
    REQUIRE(span);
    CHECK(span->first() % 4 == 0);
    CHECK(span->large_missing() == 1);
    CHECK(span->small_missing() == 2);
    span->take_pooled();  // nothing pooled yet
    CHECK(span->missing_bytes() == 6 * page);
    span->create();
    REQUIRE(span->complete());
    std::size_t const first = span->map();
    CHECK(pool.physical_bytes() == 6 * page);
    CHECK(pool.mapped_bytes() == 6 * page);
    CHECK(counting.calls(BackendOp::create_chunk) == 3);
    CHECK(counting.calls(BackendOp::map) == 3);
    CHECK(counting.calls(BackendOp::set_access) == 1);
    CHECK(host.live_counts().bytes_mapped == 6 * page);
    CHECK(pool.largest_free_run() == 64 - 6 - first);  // the span took the lowest aligned run

    pool.unmap(first, 6);
    CHECK(pool.mapped_bytes() == 0);
    CHECK(pool.physical_bytes() == 6 * page);
    CHECK(pool.pooled_pages(PagePool::Size::large) == 1);
    CHECK(pool.pooled_pages(PagePool::Size::small) == 2);
    CHECK(pool.largest_free_run() == 64);
    CHECK(pool.release_all_pooled() == 6 * page);
    CHECK(pool.physical_bytes() == 0);
  }
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("a span dropped before it is mapped releases the pages it created and pools the ones it took",
          "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options());
  {
    auto span = pool.take_slots(2);
    span->create();
    pool.unmap(span->map(), 2);  // two small pages pooled
  }
  REQUIRE(pool.pooled_pages(PagePool::Size::small) == 2);
  {
    auto span = pool.take_slots(3);
    span->take_pooled();
    CHECK(span->small_missing() == 1);
    span->create();
    CHECK(span->complete());
    CHECK(pool.physical_bytes() == 3 * page);
    CHECK(host.live_counts().chunks == 3);
  }  // dropped: a failure between gathering and mapping
  CHECK(pool.physical_bytes() == 2 * page);
  CHECK(host.live_counts().chunks == 2);
  CHECK(pool.pooled_pages(PagePool::Size::small) == 2);
  CHECK(pool.largest_free_run() == 64);  // the slots are free again
}

TEST_CASE("the byte limit stops creation and large pages refused are replaced by small ones", "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options(4, 3 * page));
  {
    auto span = pool.take_slots(4);  // one large page wanted; the limit (3 pages) refuses it
    span->create();
    CHECK(span->large_missing() == 0);
    CHECK(span->small_missing() == 1);  // four small pages wanted instead; three fit
    CHECK(pool.physical_bytes() == 3 * page);
    CHECK_FALSE(span->complete());
  }
  CHECK(pool.physical_bytes() == 0);
  CHECK(host.live_counts().chunks == 0);
}

TEST_CASE("idle pooled pages of the other size are released up to what a span misses", "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options());
  {
    auto span = pool.take_slots(8);  // two large pages
    span->create();
    pool.unmap(span->map(), 8);
  }
  REQUIRE(pool.pooled_pages(PagePool::Size::large) == 2);
  auto span = pool.take_slots(3);  // three small pages: one large page's worth of idle memory goes
  span->take_pooled();
  span->release_idle_other_size();
  CHECK(pool.pooled_pages(PagePool::Size::large) == 1);
  CHECK(pool.physical_bytes() == 4 * page);
}

/// A retire fence that records when it is passed: the bytes the backend had mapped at that moment
/// (the stale mapping must still be there), and the streams it was asked to order.
class RecordingFence final : public RetireFence {
 public:
  explicit RecordingFence(HostBackend& host) : host_(host) {}
  void pass() override { mapped_when_passed.push_back(host_.live_counts().bytes_mapped); }
  bool done() override { return work_done; }
  void order_before(Stream next_user) override { ordered.push_back(next_user); }
  std::vector<std::size_t> mapped_when_passed;
  std::vector<Stream> ordered;
  bool work_done = true;

 private:
  HostBackend& host_;
};

namespace {

/// Maps `count` new small pages side by side and retires them behind `fence`: pooled, still mapped
/// where they were.
void retire_new_pages(PagePool& pool, std::size_t count, const Fence& fence) {
  std::size_t first = 0;
  {
    auto span = pool.take_slots(count);
    span->create();
    first = span->map();
  }
  pool.retire(first, count, fence);
}

}  // namespace

TEST_CASE("a page retired behind a fence keeps its old mapping until the fence is passed, and its taker sees the "
          "fence", "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options());
  auto const fence = std::make_shared<RecordingFence>(host);
  retire_new_pages(pool, 3, fence);  // three small pages pooled, still mapped where they were
  CHECK(pool.stale_bytes() == 3 * page);
  CHECK(fence->mapped_when_passed.empty());
  {
    auto span = pool.take_slots(2);  // two of them move: the span lists the fence once
    span->take_pooled();
    REQUIRE(span->fences().size() == 1);
    CHECK(span->fences().front() == fence);
    span->map();
  }
  CHECK(host.live_counts().bytes_mapped == 5 * page);  // 2 at the new run, 3 stale
  CHECK(fence->ordered.empty());  // the pool never orders: the span's user does
  // The page left in the pool goes back: its stale mapping is unmapped after the fence is passed.
  CHECK(pool.release_all_pooled() == page);
  REQUIRE(fence->mapped_when_passed.size() == 1);
  CHECK(fence->mapped_when_passed[0] == 5 * page);
  CHECK(host.live_counts().bytes_mapped == 4 * page);
  // The moved pages' stale mappings go when the addresses are wanted: after the fence, each.
  pool.unmap_stale();
  CHECK(fence->mapped_when_passed == std::vector<std::size_t>{5 * page, 4 * page, 3 * page});
  CHECK(host.live_counts().bytes_mapped == 2 * page);
  CHECK(pool.stale_bytes() == 0);
}

TEST_CASE("a span releases idle pooled pages of the other size only where their fences are done", "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options());  // large pages of 4 small ones
  auto const fence = std::make_shared<RecordingFence>(host);
  fence->work_done = false;
  retire_new_pages(pool, 2, fence);  // two small pages pooled behind work still running
  REQUIRE(pool.pooled_pages(PagePool::Size::small) == 2);
  {
    auto span = pool.take_slots(4);  // one large page: the small ones are idle memory of the other size
    REQUIRE(span->large_missing() == 1);
    span->release_idle_other_size();  // would wait for the fence to release them: kept instead
    CHECK(pool.pooled_pages(PagePool::Size::small) == 2);
    CHECK(fence->mapped_when_passed.empty());
    CHECK(pool.physical_bytes() == 2 * page);
    fence->work_done = true;
    span->release_idle_other_size();  // the work is done: they go, with no wait
    CHECK(pool.pooled_pages(PagePool::Size::small) == 0);
    CHECK(fence->mapped_when_passed.size() == 2);
    CHECK(pool.physical_bytes() == 0);
  }
  CHECK(host.live_counts().bytes_mapped == 0);
}

TEST_CASE("a span on a full device releases idle pooled pages of the other size after their fences", "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options());
  auto const fence = std::make_shared<RecordingFence>(host);
  fence->work_done = false;
  retire_new_pages(pool, 2, fence);
  auto span = pool.take_slots(4);
  span->release_idle_other_size(/*may_wait=*/true);  // the memory is needed: the fence is passed first
  CHECK(pool.pooled_pages(PagePool::Size::small) == 0);
  CHECK(fence->mapped_when_passed == std::vector<std::size_t>{2 * page, page});
  CHECK(pool.physical_bytes() == 0);
}

TEST_CASE("a span that may wait releases the pooled pages whose fences are done first, and waits only for the rest",
          "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePool pool(host, pool_options());  // large pages of 4 small ones
  auto const done = std::make_shared<RecordingFence>(host);
  auto const busy = std::make_shared<RecordingFence>(host);
  busy->work_done = false;
  retire_new_pages(pool, 3, done);
  retire_new_pages(pool, 3, busy);  // pooled last, so first in the order the pool releases in
  REQUIRE(pool.pooled_pages(PagePool::Size::small) == 6);
  auto span = pool.take_slots(4);  // misses one large page: four small pages' worth of idle memory
  REQUIRE(span->large_missing() == 1);
  span->release_idle_other_size(/*may_wait=*/true);
  CHECK(done->mapped_when_passed.size() == 3);  // all three done pages, with no wait
  CHECK(busy->mapped_when_passed.size() == 1);  // one wait, for the fourth page only
  CHECK(pool.pooled_pages(PagePool::Size::small) == 2);
  CHECK(pool.physical_bytes() == 2 * page);
}

TEST_CASE("spaced placement puts a run at the end of the largest free extent, room behind it, while the extent keeps "
          "the amount asked for",
          "[arena][pool]") {
  ExtentSet free;
  free.insert(0, 1000);
  // 10 pages aligned to 4, 100 free behind them, 500 kept: (1000 - 100 - 10) / 4 * 4 = 888.
  CHECK(free.take_spaced(10, 4, 100, 500) == 888);
  CHECK(free.count_from(0) == 888);
  CHECK(free.count_from(898) == 102);  // the room behind, and what alignment left
  CHECK(free.take_spaced(10, 4, 100, 500) == 776);  // the next run, in front of the room of the first
  CHECK(free.count_from(786) == 102);
  CHECK(free.largest() == 776);
  CHECK_FALSE(free.take_spaced(200, 4, 100, 500));  // 776 < 500 + 200 + 100: nothing, nothing taken
  CHECK(free.take_spaced(160, 8, 100, 500) == 512);   // (776 - 260) / 8 * 8 = 512 >= 500
  CHECK(free.largest() == 512);
  CHECK_FALSE(free.take_spaced(4, 8, 100, 500));      // the largest extent would fall below 500
  CHECK(free.pages() == 1000 - 180);
}

TEST_CASE("the pool spaces runs of several slots apart, packs runs of one slot, and packs everything once spacing "
          "would cut into the address space it keeps free",
          "[arena][pool]") {
  HostBackend host({.granularity = page});
  PagePoolOptions options = pool_options();
  options.growth_room = 8 * page;
  options.kept_free = 20 * page;
  PagePool pool(host, options);  // 64 slots, large pages of 4
  auto a = pool.take_slots(6);   // large layout: (64 - 8 - 6) / 4 * 4 = 48
  REQUIRE(a);
  CHECK(a->first() == 48);
  CHECK(pool.free_from(54) == 10);  // 8 of room and 2 to the end
  auto b = pool.take_slots(1);      // one slot: packed, best fit (the smallest extent that holds it)
  REQUIRE(b);
  CHECK(b->first() == 54);
  auto c = pool.take_slots(3);  // small layout, 47 free in front: (48 - 8 - 3) = 37 >= 20
  REQUIRE(c);
  CHECK(c->first() == 37);
  auto d = pool.take_slots(5);  // large layout, 37 free in front: (37 - 8 - 5) / 4 * 4 = 24 >= 20
  REQUIRE(d);
  CHECK(d->first() == 24);
  auto e = pool.take_slots(2);  // spacing would leave 24 - 8 - 2 = 14 < 20 free: packed, best fit
  REQUIRE(e);
  CHECK(e->first() == 29);  // the smallest extents are d's room [29, 37) and c's [40, 48): the lower
  CHECK(pool.largest_free_run() == 24);
}

// --- the per-stream caches -----------------------------------------------------------------------

TEST_CASE("a stream is registered once, found through the hash map, and forgotten", "[arena][streams]") {
  auto order = make_stream_order(MemorySpace::host, 0);
  StreamCaches caches(*order, 4);
  StreamCache& a = caches.get(fake_stream(1));
  CHECK(&caches.get(fake_stream(1)) == &a);
  CHECK(caches.find(fake_stream(2)) == nullptr);
  CHECK(caches.size() == 1);
  StreamCache& b = caches.get(fake_stream(2));
  CHECK(b.id == a.id + 1);
  CHECK(b.free_blocks.empty());  // no per-class lists until the stream frees or asks for a block
  caches.put_block(b, 3, 4096);
  CHECK(b.free_blocks.size() == 4);
  CHECK(b.fresh_slabs.size() == 4);
  caches.forget(a);
  CHECK(caches.find(fake_stream(1)) == nullptr);
  CHECK(caches.size() == 1);
}

TEST_CASE("the stream remembered from the last lookup is forgotten with its cache", "[arena][streams]") {
  auto order = make_stream_order(MemorySpace::host, 0);
  StreamCaches caches(*order, 4);
  StreamCache& a = caches.get(fake_stream(1));
  std::uint64_t const first_id = a.id;
  CHECK(caches.find(fake_stream(1)) == &a);  // remembered now
  caches.forget(a);
  CHECK(caches.find(fake_stream(1)) == nullptr);
  CHECK(caches.size() == 0);
  StreamCache& again = caches.get(fake_stream(1));
  CHECK(again.id == first_id + 1);  // registered anew
  CHECK(caches.size() == 1);
}

TEST_CASE("a stream whose stale class index entry was dropped is indexed again by its next free", "[arena][streams]") {
  auto order = make_stream_order(MemorySpace::host, 0);
  StreamCaches caches(*order, 4);
  StreamCache& a = caches.get(fake_stream(1));
  StreamCache& b = caches.get(fake_stream(2));
  caches.put_block(a, 2, 4096);
  CHECK(caches.take_block(a, 2) == 4096);             // the list runs empty; its index entry stays
  caches.put_block(a, 2, 8192);                        // refills: no second entry needed
  CHECK(caches.other_with_blocks(b, 2) == &a);
  CHECK(caches.take_block(a, 2) == 8192);
  CHECK(caches.other_with_blocks(b, 2) == nullptr);   // meets the stale entry and drops it
  caches.put_block(a, 2, 12288);                       // must be indexed again
  CHECK(caches.other_with_blocks(b, 2) == &a);
  CHECK(caches.other_with_blocks(a, 2) == nullptr);   // never the asking stream
}

TEST_CASE("another stream's cached pages are found through the index, best fit first", "[arena][streams]") {
  auto order = make_stream_order(MemorySpace::host, 0);
  StreamCaches caches(*order, 4);
  StreamCache& a = caches.get(fake_stream(1));
  StreamCache& b = caches.get(fake_stream(2));
  StreamCache& c = caches.get(fake_stream(3));
  caches.put_pages(a, 0, 2, false);
  caches.put_pages(b, 10, 5, false);
  caches.put_pages(b, 20, 1, false);
  CHECK(caches.cached_pages() == 8);
  CHECK(caches.largest_extent() == 5);
  CHECK(caches.other_with_pages(c, 2, false) == &a);  // the smallest largest extent that fits
  CHECK(caches.other_with_pages(c, 3, false) == &b);
  CHECK(caches.other_with_pages(c, 6, false) == nullptr);
  CHECK(caches.other_with_pages(a, 2, false) == &b);  // never the asking stream
  CHECK(caches.take_pages(b, 5) == 10);
  CHECK(caches.other_with_pages(c, 3, false) == nullptr);  // the index follows the change
  CHECK(caches.largest_extent() == 2);
  // Large-layout spans serve any request up to their size; the smallest that holds it first.
  caches.put_pages(a, 32, 8, true);
  caches.put_pages(b, 64, 12, true);
  CHECK(caches.other_with_pages(c, 8, true) == &a);
  CHECK(caches.other_with_pages(c, 6, true) == &a);
  CHECK(caches.other_with_pages(c, 9, true) == &b);
  CHECK(caches.other_with_pages(c, 13, true) == nullptr);
  CHECK(caches.take_large_span(a, 9) == std::nullopt);
  CHECK(caches.take_large_span(a, 6) == std::pair<std::size_t, std::size_t>{32, 8});
  CHECK(caches.other_with_pages(c, 8, true) == &b);
  caches.remove_large_span(b, 64, 12);
  CHECK(caches.other_with_pages(c, 8, true) == nullptr);
  // Popping for unmapping: the lowest extent first, cut to what is wanted.
  CHECK(caches.pop_extent(a, 1) == std::pair<std::size_t, std::size_t>{0, 1});
  CHECK(caches.pop_extent(a, 5) == std::pair<std::size_t, std::size_t>{1, 1});
  CHECK(caches.pop_extent(a, 5) == std::nullopt);
  CHECK(caches.cached_pages() == 1);
}

TEST_CASE("a cached span of whole large pages merges with the span of its stream that starts right behind it",
          "[arena][streams]") {
  auto order = make_stream_order(MemorySpace::host, 0);
  StreamCaches caches(*order, 4, 8);  // L = 8 slots
  StreamCache& a = caches.get(fake_stream(1));
  StreamCache& b = caches.get(fake_stream(2));
  caches.put_pages(a, 16, 8, true);
  caches.put_pages(a, 24, 11, true);  // behind a span of whole large pages: merged into [16, 35)
  CHECK(a.large_spans.size() == 1);
  CHECK(caches.other_with_pages(b, 19, true) == &a);
  caches.put_pages(a, 0, 16, true);  // before it, itself whole large pages: merged into [0, 35)
  CHECK(a.large_spans.size() == 1);
  CHECK(caches.other_with_pages(b, 35, true) == &a);
  caches.put_pages(a, 40, 8, true);  // not touching [0, 35)
  caches.put_pages(b, 48, 8, true);  // touching, but another stream's
  CHECK(a.large_spans.size() == 2);
  caches.put_pages(a, 56, 9, true);  // a span of 9 does not merge with the one behind it
  caches.put_pages(a, 65, 8, true);
  CHECK(a.large_spans.size() == 4);
  CHECK(caches.take_large_span(a, 35) == std::pair<std::size_t, std::size_t>{0, 35});
  CHECK(caches.take_large_span(a, 9) == std::pair<std::size_t, std::size_t>{56, 9});
  CHECK(caches.take_large_span(a, 8) == std::pair<std::size_t, std::size_t>{40, 8});
  CHECK(caches.take_large_span(a, 8) == std::pair<std::size_t, std::size_t>{65, 8});
  CHECK(caches.other_with_pages(a, 8, true) == &b);
  StreamCaches never(*order, 4);  // L = 0: spans never merge
  StreamCache& c = never.get(fake_stream(3));
  never.put_pages(c, 0, 8, true);
  never.put_pages(c, 8, 8, true);
  CHECK(c.large_spans.size() == 2);
}

TEST_CASE("free blocks move between streams in one step and vanish with their slab", "[arena][streams]") {
  auto order = make_stream_order(MemorySpace::host, 0);
  StreamCaches caches(*order, 4);
  StreamCache& a = caches.get(fake_stream(1));
  StreamCache& b = caches.get(fake_stream(2));
  Address const base = 1 << 30;
  caches.put_block(a, 2, base + 5 * page + 512);
  caches.put_block(a, 2, base + 6 * page);
  CHECK(caches.other_with_blocks(b, 2) == &a);
  CHECK(caches.other_with_blocks(b, 1) == nullptr);
  caches.move_blocks(a, b, 2);
  CHECK(caches.other_with_blocks(b, 2) == nullptr);
  CHECK(caches.other_with_blocks(a, 2) == &b);
  b.fresh_slabs[2].push_back(5);
  caches.forget_slabs({{5, 2}}, base, page);  // slab 5 is unmapped: its block and its open entry go
  CHECK(b.free_blocks[2] == std::vector<Address>{base + 6 * page});
  CHECK(b.fresh_slabs[2].empty());
  CHECK(caches.take_block(b, 2) == base + 6 * page);
  CHECK(caches.take_block(b, 2) == std::nullopt);
  CHECK(caches.other_with_blocks(a, 2) == nullptr);
}

TEST_CASE("a stream that cannot be marked (capturing a CUDA graph) lends neither pages nor blocks until it can",
          "[arena][streams]") {
  CapturingStreamOrder order;
  StreamCaches caches(order, 4);
  StreamCache& a = caches.get(fake_stream(1));
  StreamCache& b = caches.get(fake_stream(2));
  StreamCache& c = caches.get(fake_stream(3));
  caches.put_pages(a, 0, 4, false);    // a holds the best fit for 2 slots, b a longer extent
  caches.put_pages(b, 10, 6, false);
  caches.put_pages(a, 32, 8, true);
  caches.put_block(a, 2, 4096);
  order.capturing.insert(fake_stream(1));
  CHECK(caches.other_with_pages(c, 2, false) == &b);   // past a, to the next that fits
  CHECK(caches.other_with_pages(c, 8, false) == nullptr);
  CHECK(caches.other_with_pages(c, 4, true) == nullptr);
  CHECK(caches.other_with_blocks(c, 2) == nullptr);
  order.capturing.clear();             // the capture ended
  CHECK(caches.other_with_pages(c, 2, false) == &a);
  CHECK(caches.other_with_pages(c, 4, true) == &a);
  CHECK(caches.other_with_blocks(c, 2) == &a);
}

// --- the counting backend ------------------------------------------------------------------------

TEST_CASE("the counting backend counts every forwarded call, failed ones included", "[arena][backend]") {
  HostBackend host({.granularity = page, .physical_limit = page});
  CountingBackend counting(host);
  CHECK(counting.name() == "counting");
  CHECK(&counting.inner() == &host);
  Address const range = counting.reserve(4 * page, 0);
  ChunkHandle const chunk = counting.create_chunk(page, {});
  CHECK_THROWS_AS(counting.create_chunk(page, {}), OutOfMemory);  // past the host's limit
  counting.map(range, page, chunk);
  counting.set_access(range, page, std::vector<AccessGrant>{{0, Access::read_write}});
  counting.unmap(range, page);
  counting.release_chunk(chunk);
  counting.free_range(range, 4 * page);
  CHECK(counting.calls(BackendOp::create_chunk) == 2);
  CHECK(counting.calls(BackendOp::map) == 1);
  CHECK(counting.calls(BackendOp::set_access) == 1);
  CHECK(counting.calls(BackendOp::unmap) == 1);
  CHECK(counting.calls(BackendOp::release_chunk) == 1);
  CHECK(counting.total_calls() == 8);
  CHECK(host.live_counts() == LiveCounts{});
}

TEST_CASE("node spares keep at most their number of erased nodes and hand them back holding the new element",
          "[arena][nodes]") {
  std::map<int, int> m{{1, 10}, {2, 20}, {3, 30}};
  NodeSpares<std::map<int, int>> spares(2);
  int const* const second = &m.at(2);
  spares.erase(m, m.find(1));
  spares.erase(m, m.find(2));
  spares.erase(m, m.find(3));  // no room: freed
  CHECK(m.empty());
  CHECK(spares.size() == 2);
  m.insert(spares.make(7, 70));  // the last kept first
  CHECK(&m.at(7) == second);
  CHECK(spares.size() == 1);
  auto kept = m.extract(7);
  spares.keep(std::move(kept));
  m.insert(spares.make(8, 80));
  CHECK(&m.at(8) == second);
  CHECK(m == std::map<int, int>{{8, 80}});
  m.insert(spares.make(9, 90));
  m.insert(spares.make(5, 50));  // none kept: a new node
  CHECK(spares.size() == 0);
  CHECK(m == std::map<int, int>{{5, 50}, {8, 80}, {9, 90}});

  std::multiset<std::pair<std::size_t, int>> set{{4, 1}, {4, 1}};
  NodeSpares<decltype(set)> set_spares(1);
  auto const* const first = &*set.begin();
  set_spares.erase(set, set.begin());
  set.insert(set_spares.make(std::size_t{2}, 5));
  CHECK(&*set.begin() == first);
  CHECK(set == std::multiset<std::pair<std::size_t, int>>{{2, 5}, {4, 1}});
}

namespace {

long heap_calls = 0;  // allocations made through CountingAllocator

template <class T>
struct CountingAllocator {
  using value_type = T;
  CountingAllocator() = default;
  template <class U>
  CountingAllocator(const CountingAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    ++heap_calls;
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
  friend bool operator==(const CountingAllocator&, const CountingAllocator&) noexcept { return true; }
};

}  // namespace

TEST_CASE("room_for_one leaves room for an insert that allocates nothing, growing geometrically", "[arena][nodes]") {
  using Table = std::unordered_map<std::size_t, int, std::hash<std::size_t>, std::equal_to<>,
                                   CountingAllocator<std::pair<const std::size_t, int>>>;
  Table table;
  std::vector<std::size_t, CountingAllocator<std::size_t>> list;
  heap_calls = 0;
  long growths = 0;
  for (std::size_t k = 0; k < 10000; ++k) {
    auto node = node_ahead<Table>(k * 4096, 1);  // (a table of its own, its node moved out)
    long const before = heap_calls;
    room_for_one(table);
    room_for_one(list);
    growths += heap_calls - before;
    long const made = heap_calls;
    table.insert(std::move(node));
    list.push_back(k);
    INFO("insert " << k);
    REQUIRE(heap_calls == made);
  }
  CHECK(table.size() == 10000);
  CHECK(growths <= 2 * 15);  // doubling: at most 15 growths each to 10000, not one per insert
  // Emptied, the table keeps its buckets: no rehash, no allocation for the next insert.
  table.clear();
  long const cleared = heap_calls;
  room_for_one(table);
  CHECK(heap_calls == cleared);
}
