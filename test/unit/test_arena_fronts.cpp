// The Arena's stream fronts on the host backend: per-stream caches of freed allocations served
// without the arena's lock. Reuse on the freeing stream, no reuse elsewhere but through the stream
// caches' rules, draining (trim, release_stream, before pages are created), exact statistics, bad
// frees, and many threads at once (run under ThreadSanitizer by scripts/test.sh).
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdint>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include <cuvmm/arena.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/fault_injecting_backend.hpp>
#include <cuvmm/host_backend.hpp>

#include "threads_pattern.hpp"

using namespace cuvmm;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr std::size_t page = 64 * KiB;

Stream stream_no(int k) { return reinterpret_cast<Stream>(static_cast<std::uintptr_t>(k) * 64); }

ArenaOptions host_options() {
  ArenaOptions o;
  o.address_space_bytes = 1 * GiB;
  o.large_page_bytes = 8 * page;
  return o;
}

/// host_options() with runs of up to four pages parked in the fronts.
ArenaOptions run_parking_options() {
  ArenaOptions o = host_options();
  o.stream_cache_run_bytes = 4 * page;
  return o;
}

/// Two blocks of 1000 B made on `s` and freed there: the first free lists the stream's front (under
/// the lock), the second is parked without the lock, so the front owes 1000 B to the live counters.
void owe_a_free(Arena& arena, Stream s) {
  void* a = arena.allocate(1000, s);
  void* b = arena.allocate(1000, s);
  arena.deallocate(a, 1000, s);
  arena.deallocate(b, 1000, s);
}

/// live + pinned + lent + cached + pooled == physical, as ArenaStats promises.
bool adds_up(const ArenaStats& s) {
  return s.bytes_live + s.bytes_pinned + s.bytes_lent + s.bytes_cached + s.bytes_pooled == s.bytes_physical.current;
}
void check_adds_up(const ArenaStats& s) {
  INFO("live " << s.bytes_live << ", pinned " << s.bytes_pinned << ", lent " << s.bytes_lent << ", cached "
               << s.bytes_cached << ", pooled " << s.bytes_pooled << ", physical " << s.bytes_physical.current);
  CHECK(adds_up(s));
}

}  // namespace

TEST_CASE("a block freed on a stream is handed out again on that stream, with exact statistics", "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const s = stream_no(1);
  void* a = arena.allocate(1000, s);  // class of 1 KiB blocks
  void* b = arena.allocate(1000, s);
  arena.deallocate(a, 1000, s);
  ArenaStats one_live = arena.stats();
  CHECK(one_live.allocations.current == 1);
  CHECK(one_live.bytes_requested.current == 1000);
  CHECK(one_live.bytes_live == 1024);
  CHECK(one_live.bytes_pinned == page - 1024);  // a parked block beside a live one is pinned, as a freed one
  CHECK(one_live.bytes_cached == 0);
  check_adds_up(one_live);

  arena.deallocate(b, 1000, s);
  ArenaStats const none_live = arena.stats();
  CHECK(none_live.allocations.current == 0);
  CHECK(none_live.bytes_requested.current == 0);
  CHECK(none_live.bytes_live == 0);
  CHECK(none_live.bytes_pinned == 0);
  CHECK(none_live.bytes_cached == page);  // every live block of the slab parked: an empty slab
  check_adds_up(none_live);

  void* again = arena.allocate(900, s);  // the same class: the block freed last
  CHECK(again == b);
  ArenaStats const after = arena.stats();
  CHECK(after.bytes_requested.current == 900);
  CHECK(after.bytes_requested.peak == 2000);
  CHECK(after.bytes_requested.total == 2900);
  CHECK(after.allocations.total == 3);
  CHECK(after.bytes_live == 1024);
  check_adds_up(after);
  CHECK_THROWS_WITH(arena.deallocate(again, 1000, s), ContainsSubstring("not the size that was allocated"));
  arena.deallocate(again, 900, s);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("a free parked by a front is owed to the live counters: paid by the stream's next allocations, settled "
          "under the lock first, so the peak stays exact on one stream",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const s = stream_no(1);
  owe_a_free(arena, s);
  CHECK(arena.stats().front_frees == 1);
  CHECK(arena.stats().bytes_requested.current == 0);
  CHECK(arena.stats().allocations.current == 0);

  // A request the front does not keep takes the lock, which settles what the front owes first:
  // the peak is the bytes live, not those plus the free still owed.
  void* run = arena.allocate(3 * page, s);
  ArenaStats const after_run = arena.stats();
  CHECK(after_run.bytes_requested.current == 3 * page);
  CHECK(after_run.bytes_requested.peak == 3 * page);
  CHECK(after_run.allocations.peak == 2);

  // The run's pages were made after the front gave back what it parked: the next block misses (its
  // free is parked without the lock, the front still listed). Then cached pairs: the second allocation pays from what the
  // free before it owes; the counters stay exact and the peak does not move.
  void* c = arena.allocate(1000, s);
  CHECK(arena.stats().bytes_requested.peak == 3 * page + 1000);
  arena.deallocate(c, 1000, s);
  void* d = arena.allocate(900, s);  // from the front, nothing owed: counted
  arena.deallocate(d, 900, s);       // owed
  void* e = arena.allocate(800, s);  // paid from what is owed
  CHECK(d == c);
  CHECK(e == c);
  ArenaStats const paired = arena.stats();
  CHECK(paired.front_allocations == 2);
  CHECK(paired.front_frees == 3);  // b, c and d
  CHECK(paired.bytes_requested.current == 3 * page + 800);
  CHECK(paired.bytes_requested.peak == 3 * page + 1000);
  CHECK(paired.allocations.current == 2);
  CHECK(paired.allocations.peak == 2);
  CHECK(paired.bytes_requested.total == 2000 + 3 * page + 2700);
  CHECK(paired.allocations.total == 6);
  arena.deallocate(e, 800, s);
  arena.deallocate(run, 3 * page, s);
  CHECK(arena.stats().bytes_requested.current == 0);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("what another stream's front owes can raise the recorded peak by at most that much, and release_stream "
          "settles it",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const s1 = stream_no(1);
  Stream const s2 = stream_no(2);
  owe_a_free(arena, s1);
  void* run = arena.allocate(3 * page, s2);
  ArenaStats const s = arena.stats();
  CHECK(s.bytes_requested.current == 3 * page);
  CHECK(s.bytes_requested.peak >= 3 * page);
  CHECK(s.bytes_requested.peak <= 3 * page + 1000);
  arena.release_stream(s1);
  CHECK(arena.stats().bytes_requested.current == 3 * page);
  arena.deallocate(run, 3 * page, s2);
  CHECK(arena.stats().bytes_requested.current == 0);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("an allocation made under the arena's lock is freed through its stream's front, on that stream only",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, run_parking_options());
  Stream const s = stream_no(1);
  // The first of each kind misses (nothing parked yet): made under the lock, handed out by the front.
  void* block = arena.allocate(1000, s);
  void* run = arena.allocate(2 * page, s);
  void* long_run = arena.allocate(5 * page, s);  // longer than the option: no front keeps it
  void* other = arena.allocate(1000, stream_no(2));
  ArenaStats const made = arena.stats();
  CHECK(made.front_allocations == 0);
  CHECK(made.front_frees == 0);
  CHECK_THROWS_WITH(arena.deallocate(block, 999, s), ContainsSubstring("not the size that was allocated"));
  arena.deallocate(block, 1000, s);
  arena.deallocate(run, 2 * page, s);
  ArenaStats const freed = arena.stats();
  // The first free lists the front (under the lock); the second is parked without it.
  CHECK(freed.front_frees == 1);
  arena.deallocate(long_run, 5 * page, s);
  arena.deallocate(other, 1000, s);  // freed on another stream than its own: under the lock
  ArenaStats const after = arena.stats();
  CHECK(after.front_frees == 1);
  CHECK(after.allocations.current == 0);
  CHECK(after.bytes_live == 0);
  check_adds_up(after);
  CHECK(arena.allocate(1000, s) == other);  // parked last in s's front, as any block freed on s
  CHECK(arena.stats().front_allocations == 1);
  CHECK_THROWS_WITH(arena.deallocate(block, 1000, s), ContainsSubstring("freed twice"));
}

TEST_CASE("a front records at most 4096 of the allocations made under the lock: the frees of the others take the "
          "lock and park there",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const s = stream_no(1);
  std::size_t const recorded = 4096;
  std::vector<void*> blocks;
  for (std::size_t k = 0; k < recorded + 8; ++k) blocks.push_back(arena.allocate(1000, s));
  CHECK(arena.stats().front_allocations == 0);
  for (void* block : blocks) arena.deallocate(block, 1000, s);
  ArenaStats const freed = arena.stats();
  // The first free lists the front (under the lock), the other recorded ones park without it.
  CHECK(freed.front_frees == recorded - 1);
  CHECK(freed.allocations.current == 0);
  CHECK(freed.bytes_live == 0);
  check_adds_up(freed);
  // Every block was parked, the last freed on top: all are served again by the front, and the
  // front records each of those (its free parks without the lock), past the bound.
  std::vector<void*> again;
  for (std::size_t k = 0; k < blocks.size(); ++k) again.push_back(arena.allocate(1000, s));
  CHECK(arena.stats().front_allocations == blocks.size());
  CHECK(std::set<void*>(again.begin(), again.end()) == std::set<void*>(blocks.begin(), blocks.end()));
  CHECK(again.front() == blocks.back());
  for (void* block : again) arena.deallocate(block, 1000, s);
  ArenaStats const after = arena.stats();
  CHECK(after.front_frees == recorded - 1 + blocks.size());
  CHECK(after.allocations.current == 0);
  check_adds_up(after);
}

TEST_CASE("with stream_cache_run_bytes, a run of pages freed on a stream is parked and handed out again where it lies",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, run_parking_options());
  Stream const s = stream_no(1);
  void* p = arena.allocate(3 * page, s);
  arena.deallocate(p, 3 * page, s);
  ArenaStats const parked = arena.stats();
  CHECK(parked.bytes_live == 0);
  CHECK(parked.bytes_cached == 3 * page);
  CHECK(parked.fragmentation == 0.0);
  check_adds_up(parked);
  void* q = arena.allocate(2 * page + 1, s);
  CHECK(q == p);
  void* other = arena.allocate(3 * page, stream_no(2));  // parked for s alone: drained, then after a wait
  CHECK(other != p);
  ArenaStats const reused = arena.stats();
  CHECK(reused.maps == parked.maps + 3);  // the other stream's 3 pages only
  CHECK(reused.chunks_created == 6);
  CHECK(reused.bytes_live == 6 * page);
  CHECK(reused.bytes_cached == 0);
  CHECK(reused.bytes_requested.current == 5 * page + 1);
  arena.deallocate(q, 2 * page + 1, s);
  arena.deallocate(other, 3 * page, stream_no(2));
  arena.deallocate(p = arena.allocate(5 * page, s), 5 * page, s);  // longer than the option: never parked
  CHECK(arena.stats().bytes_cached == 8 * page);
}

TEST_CASE("a miss that the device cannot serve takes one allocation of its size from another stream's front and "
          "leaves the rest parked there",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  ArenaOptions options = host_options();
  options.byte_limit = 2 * page;  // the two slab pages below, no more
  Arena arena(backend, options);
  Stream const a = stream_no(1);
  Stream const b = stream_no(2);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(arena.allocate(4000, a));
  void* small = arena.allocate(100, a);
  for (void* p : blocks) arena.deallocate(p, 4000, a);
  arena.deallocate(small, 100, a);
  ArenaStats const parked = arena.stats();
  CHECK(parked.front_allocations == 0);
  void* taken = arena.allocate(4000, b);  // one of a's blocks, after a wait on a
  CHECK(std::count(blocks.begin(), blocks.end(), taken) == 1);
  ArenaStats const after = arena.stats();
  CHECK(after.cross_stream_reuses == 1);
  CHECK(after.chunks_created == parked.chunks_created);
  CHECK(after.front_allocations == 0);
  // The rest is still parked in a's front, and serves a without the arena's lock.
  void* first = arena.allocate(4000, a);
  void* second = arena.allocate(4000, a);
  void* small_again = arena.allocate(100, a);
  CHECK(arena.stats().front_allocations == 3);
  CHECK(small_again == small);
  CHECK(first != taken);
  CHECK(second != taken);
  CHECK(first != second);
  CHECK(std::count(blocks.begin(), blocks.end(), first) == 1);
  CHECK(std::count(blocks.begin(), blocks.end(), second) == 1);
  arena.deallocate(taken, 4000, b);
  for (void* p : {first, second}) arena.deallocate(p, 4000, a);
  arena.deallocate(small_again, 100, a);
  CHECK(arena.stats().bytes_requested.current == 0);
  CHECK(arena.stats().allocations.total == 8);
}

TEST_CASE("a miss that the device can serve creates memory and leaves another stream's front as it is",
          "[arena][fronts]") {
  // Drained for another stream's miss, a front would miss on its own next request, take from the
  // next front in turn, and so on: with room on the device, the miss creates a page instead.
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const a = stream_no(1);
  Stream const b = stream_no(2);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) blocks.push_back(arena.allocate(4000, a));
  void* run = arena.allocate(2 * page, a);
  for (void* p : blocks) arena.deallocate(p, 4000, a);
  arena.deallocate(run, 2 * page, a);
  ArenaStats const parked = arena.stats();
  void* block = arena.allocate(4000, b);  // a new slab page
  void* other_run = arena.allocate(2 * page, b);  // two new pages
  CHECK(std::count(blocks.begin(), blocks.end(), block) == 0);
  CHECK(other_run != run);
  ArenaStats const after = arena.stats();
  CHECK(after.chunks_created == parked.chunks_created + 3);
  CHECK(after.cross_stream_reuses == 0);
  // Everything a parked still serves a, without the arena's lock.
  std::vector<void*> again;
  for (int i = 0; i < 3; ++i) again.push_back(arena.allocate(4000, a));
  void* run_again = arena.allocate(2 * page, a);
  CHECK(arena.stats().front_allocations == 4);
  CHECK(run_again == run);
  for (void* p : again) CHECK(std::count(blocks.begin(), blocks.end(), p) == 1);
  for (void* p : again) arena.deallocate(p, 4000, a);
  arena.deallocate(run_again, 2 * page, a);
  arena.deallocate(block, 4000, b);
  arena.deallocate(other_run, 2 * page, b);
  CHECK(arena.stats().bytes_requested.current == 0);
  check_adds_up(arena.stats());
}

TEST_CASE("memory a stream's front parks reaches another stream only through the stream caches' event wait",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  ArenaOptions options = host_options();
  options.byte_limit = 3 * page;  // what stream a holds below: b must take it
  Arena arena(backend, options);
  Stream const a = stream_no(1);
  Stream const b = stream_no(2);
  void* p = arena.allocate(2 * page, a);
  void* block = arena.allocate(4000, a);
  arena.deallocate(p, 2 * page, a);
  arena.deallocate(block, 4000, a);
  CHECK(arena.stats().cross_stream_reuses == 0);
  void* q = arena.allocate(2 * page, b);  // drained into a's cache, then taken after a wait on a
  CHECK(q == p);
  CHECK(arena.stats().cross_stream_reuses == 1);
  CHECK(arena.stats().chunks_created == 3);
  void* other_block = arena.allocate(4000, b);
  CHECK(other_block == block);
  CHECK(arena.stats().cross_stream_reuses == 2);
  arena.deallocate(q, 2 * page, b);
  arena.deallocate(other_block, 4000, b);
}

TEST_CASE("an allocation a front handed out may be freed on another stream, which then reuses it at once",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const a = stream_no(1);
  Stream const b = stream_no(2);
  void* p = arena.allocate(5000, a);
  arena.deallocate(p, 5000, a);
  void* handed = arena.allocate(5000, a);  // from a's front
  REQUIRE(handed == p);
  CHECK(arena.stats().streams == 1);
  // A refused free changes nothing, not even the streams known (b is registered by the right one).
  CHECK_THROWS_WITH(arena.deallocate(handed, 4000, b), ContainsSubstring("not the size that was allocated"));
  CHECK(arena.stats().streams == 1);
  arena.deallocate(handed, 5000, b);
  CHECK_THROWS_WITH(arena.deallocate(handed, 5000, b), ContainsSubstring("freed twice"));
  CHECK_THROWS_WITH(arena.deallocate(handed, 5000, a), ContainsSubstring("freed twice"));
  void* on_b = arena.allocate(5000, b);
  CHECK(on_b == p);
  CHECK(arena.stats().cross_stream_reuses == 0);
  CHECK(arena.stats().streams == 2);
  arena.deallocate(on_b, 5000, b);
  CHECK(arena.stats().allocations.current == 0);
}

TEST_CASE("trim gives back what the fronts park", "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const s = stream_no(1);
  void* run = arena.allocate(3 * page, s);
  void* block = arena.allocate(300, s);
  arena.deallocate(run, 3 * page, s);
  arena.deallocate(block, 300, s);
  CHECK(arena.stats().bytes_physical.current == 4 * page);
  CHECK(arena.trim() == 4 * page);
  ArenaStats const s_after = arena.stats();
  CHECK(s_after.bytes_physical.current == 0);
  CHECK(backend.live_counts().chunks == 0);
  check_adds_up(s_after);
}

TEST_CASE("release_stream drains the stream's front, and what the front handed out is freed with its exact size",
          "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  Arena arena(backend, host_options());
  Stream const s = stream_no(1);
  void* p = arena.allocate(1000, s);
  void* run = arena.allocate(2 * page, s);
  arena.deallocate(p, 1000, s);
  void* handed = arena.allocate(900, s);  // the same block, for 900 bytes now
  REQUIRE(handed == p);
  arena.deallocate(run, 2 * page, s);  // parked
  arena.release_stream(s);
  ArenaStats const released = arena.stats();
  CHECK(released.streams == 1);  // the default stream inherits
  CHECK(released.bytes_live == 1024);
  CHECK(released.bytes_cached == 0);  // the run was unmapped into the pool
  CHECK(released.bytes_pooled == 2 * page);
  check_adds_up(released);
  CHECK(released.bytes_requested.total == 1000 + 2 * page + 900);  // the front's count kept
  CHECK(released.allocations.total == 3);
  CHECK_THROWS_WITH(arena.deallocate(handed, 1000, nullptr), ContainsSubstring("not the size that was allocated"));
  arena.deallocate(handed, 900, nullptr);
  CHECK(arena.stats().allocations.current == 0);
  void* reused = arena.allocate(2 * page, s);  // the handle again: a new stream, nothing parked for it
  arena.deallocate(reused, 2 * page, s);
}

TEST_CASE("a request that fits only once the fronts are drained succeeds", "[arena][fronts]") {
  HostBackend backend({.granularity = page, .physical_limit = 64 * MiB});
  ArenaOptions options = host_options();
  options.large_page_bytes = 0;
  options.byte_limit = 8 * page;  // room for exactly 8 pages
  Arena arena(backend, options);
  Stream const a = stream_no(1);
  Stream const b = stream_no(2);
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(arena.allocate(page / 2, a));  // 8 slab pages of 2 blocks
  CHECK(arena.stats().chunks_created == 8);
  for (void* p : blocks) arena.deallocate(p, page / 2, a);  // all parked in a's front
  ArenaStats const parked = arena.stats();
  CHECK(parked.bytes_cached == 8 * page);
  CHECK(parked.bytes_live == 0);
  void* all = arena.allocate(8 * page, b);  // only the parked slabs' pages can back it
  REQUIRE(all != nullptr);
  ArenaStats const s = arena.stats();
  CHECK(s.chunks_created == 8);
  CHECK(s.bytes_physical.current == 8 * page);
  CHECK(s.bytes_live == 8 * page);
  CHECK(s.pages_moved == 8);
  check_adds_up(s);
  arena.deallocate(all, 8 * page, b);
}

TEST_CASE("a request that drains the fronts and meets a failing backend call loses nothing and keeps the stats exact",
          "[arena][fronts][faults]") {
  HostBackend host({.granularity = page, .physical_limit = 64 * MiB});
  std::size_t failures = 0;
  for (std::size_t k = 1;; ++k) {
    INFO("failing backend call " << k);
    bool fired = false;
    {
      FaultInjectingBackend faulty(host);
      ArenaOptions options = host_options();
      options.large_page_bytes = 0;
      options.byte_limit = 8 * page;
      Arena arena(faulty, options);
      std::vector<void*> blocks;
      for (int i = 0; i < 16; ++i) blocks.push_back(arena.allocate(page / 2, stream_no(1)));
      for (void* p : blocks) arena.deallocate(p, page / 2, stream_no(1));  // parked
      faulty.fail_nth(k, {}, k % 2 == 0 ? FaultInjectingBackend::Failure::out_of_memory
                                         : FaultInjectingBackend::Failure::error);
      void* all = nullptr;
      try {
        all = arena.allocate(8 * page, stream_no(2));
      } catch (const std::exception&) {
        REQUIRE(faulty.fired());
        ++failures;
      }
      fired = faulty.fired();
      faulty.disarm();
      ArenaStats const s = arena.stats();
      CHECK(s.allocations.current == (all != nullptr ? 1 : 0));
      CHECK(s.bytes_requested.current == (all != nullptr ? 8 * page : 0));
      CHECK(s.bytes_physical.current == host.live_counts().bytes_physical);
      check_adds_up(s);
      if (all == nullptr) all = arena.allocate(8 * page, stream_no(2));  // the device could serve it: it must succeed now
      REQUIRE(all != nullptr);
      arena.deallocate(all, 8 * page, stream_no(2));
      arena.trim();
      CHECK(host.live_counts().chunks == 0);
    }
    if (!fired) break;
  }
  CHECK(failures > 0);
}

TEST_CASE("16 threads on their own streams, reusing from their fronts, keep their data and the statistics exact",
          "[arena][fronts][threads]") {
  HostBackend backend({.granularity = page, .physical_limit = 256 * MiB});
  Arena arena(backend, host_options());
  constexpr int threads = 16;
  constexpr int rounds = 400;
  std::vector<std::thread> running;
  std::vector<int> wrong(threads, 0);       // bytes that lost their value, per thread
  std::vector<int> unbalanced(threads, 0);  // stats() that did not add up, per thread (Catch2's
                                            // assertions are for the main thread only)
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      Stream const s = stream_no(t + 1);
      std::uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(t + 1);
      std::vector<std::pair<std::uint8_t*, std::size_t>> live(8, {nullptr, 0});
      for (int i = 0; i < rounds; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        auto& [p, bytes] = live[static_cast<std::size_t>(i) % live.size()];
        if (p != nullptr) {
          for (std::size_t k = 0; k < bytes; k += 97) wrong[static_cast<std::size_t>(t)] += p[k] != static_cast<std::uint8_t>(t + k);
          arena.deallocate(p, bytes, s);
        }
        bytes = 256 + x % (5 * page);  // slab blocks and runs of up to 5 pages
        p = static_cast<std::uint8_t*>(arena.allocate(bytes, s));
        for (std::size_t k = 0; k < bytes; k += 97) p[k] = static_cast<std::uint8_t>(t + k);
        if (i % 50 == 0) unbalanced[static_cast<std::size_t>(t)] += !adds_up(arena.stats());
      }
      for (auto& [p, bytes] : live) arena.deallocate(p, bytes, s);
    });
  }
  for (auto& thread : running) thread.join();
  for (int t = 0; t < threads; ++t) {
    CHECK(wrong[static_cast<std::size_t>(t)] == 0);
    CHECK(unbalanced[static_cast<std::size_t>(t)] == 0);
  }
  ArenaStats const s = arena.stats();
  CHECK(s.allocations.current == 0);
  CHECK(s.allocations.total == threads * rounds);
  CHECK(s.bytes_requested.current == 0);
  CHECK(s.bytes_live == 0);
  CHECK(s.bytes_pinned == 0);
  check_adds_up(s);
  arena.trim();
  CHECK(arena.stats().bytes_physical.current == 0);
  CHECK(backend.live_counts().chunks == 0);
}

TEST_CASE("profile: the share of requests that take the Arena's lock, by threads (prints the numbers)",
          "[.profile_misses]") {
  // bench_arena's threads/ pattern (bench/threads_pattern.hpp) on the host backend (the H200's
  // 2 MiB pages, the default options): T threads, each on its own stream, three rounds on one
  // Arena. A request its front does not serve takes the Arena's lock (ArenaStats::front_allocations
  // counts the others), as does a free its stream's front does not park (front_frees counts those
  // parked; every allocation of a round is freed in it).
  for (int const threads : {1, 4, 16}) {
    HostBackend backend({.granularity = 2 * MiB, .physical_limit = 64 * GiB});
    Arena arena(backend);
    std::size_t allocations = 0;
    std::size_t from_fronts = 0;
    ArenaStats before{};
    for (int round = 1; round <= 3; ++round) {
      std::vector<std::thread> running;
      for (int t = 0; t < threads; ++t) {
        running.emplace_back([&arena, t] {
          Stream const s = stream_no(t + 1);
          bench::churn(bench::thread_sizes(t), [&](std::size_t bytes) { return arena.allocate(bytes, s); },
                       [&](void* p, std::size_t bytes) { arena.deallocate(p, bytes, s); });
        });
      }
      for (auto& thread : running) thread.join();
      ArenaStats const st = arena.stats();
      std::size_t const round_allocations = st.allocations.total - allocations;
      std::size_t const round_fronts = st.front_allocations - from_fronts;
      allocations = st.allocations.total;
      from_fronts = st.front_allocations;
      std::printf("%2d threads, round %d: %.4f of the requests took the lock (%.4f over the rounds so far); "
                  "%zu of its frees took it; peak physical %zu MiB; this round's driver calls: %zu creates, %zu maps, "
                  "%zu unmaps, %zu releases, %zu pages moved\n",
                  threads, round, 1.0 - static_cast<double>(round_fronts) / static_cast<double>(round_allocations),
                  1.0 - static_cast<double>(from_fronts) / static_cast<double>(allocations),
                  round_allocations - (st.front_frees - before.front_frees), st.bytes_physical.peak / MiB,
                  st.chunks_created - before.chunks_created, st.maps - before.maps, st.unmaps - before.unmaps,
                  st.chunks_released - before.chunks_released, st.pages_moved - before.pages_moved);
      before = st;
    }
  }
}
