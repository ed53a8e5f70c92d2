// Arena: how it works. The contract is in include/cuvmm/arena.hpp; the measurements behind each
// choice below, and the options that trade along the frontier, are in docs/DESIGN.md ("Arena: what
// it may lose, and the frontier it trades along"; "Arena: throughput under threads").
//
// Rationale. A request is served from pages already mapped wherever they lie, because moving a
// page to a new address costs a map and an access grant (the grant is most of it; the unmap at the
// old address is deferred, below), and creating one costs about as much (create, map, grant:
// `bench_driver_calls --benchmark_filter=driver_calls/`). Stitching scattered pages behind new
// addresses is the fallback that defeats fragmentation, not the common path.
//
// Parts. Four parts under one lock, a front per stream before them, and the policy that joins them:
//  - PagePool (page_pool.hpp): the address range cut into slots of page_bytes, and every physical
//    page, small (one slot) or large (L slots), mapped at a slot or pooled unmapped. Knows no streams.
//  - StreamCaches (stream_caches.hpp): per stream, what it freed and may reuse at once: mapped free
//    extents of small pages, whole freed large-layout spans, free blocks and open slabs per size
//    class, lent slots; with indexes that find another stream's memory without scanning streams.
//  - Slabs (slabs.hpp): size classes and, per slab page, which blocks are live and at what size.
//  - WholeChunks (whole_chunks.hpp): ArenaOptions::whole_chunk_bytes, off by default (below).
//  - StreamFronts (stream_fronts.hpp): per stream, freed small blocks and short runs "parked" for
//    that stream alone, each front under its own mutex (below).
// This file keeps the lock, the statistics and the policy: the reclaim ladder (obtain_pages, one
// line per attempt) and the small-block ladder (allocate_block).
//
// Slot states. Every slot is in exactly one: free (PagePool's free set); stale (a pooled page still
// mapped there, PagePool's deferred unmap); reserved by a PagePool::Span during one request;
// cached (mapped, free, in one stream's cache); a live span (mapped, backing one allocation of
// whole pages, `live_spans`); a slab (mapped, split into blocks); lent (mapped, free, in a large
// page that a live span or another lent slot still uses, in one stream's `lent` set: a shared
// tail, or a borrowed cached large page); a whole chunk (one request's own page of any number of
// slots: live in `live_spans`, or idle in `whole` with the stream that freed it, mapped where it
// lies). ArenaStats reports the physical bytes by state: live (live spans and chunks, live
// blocks), pinned (free blocks of slabs with a live block), lent, cached (cached slots, empty
// slabs and idle whole chunks), pooled; the five add up to bytes_physical.
//
// Layouts. A request of up to half a page is a block of a size-class slab. A request of n slots is
// a small layout (n < L: all small pages) or a large layout (n >= L: n / L large pages at an
// L-aligned address, small pages behind). A cached large-layout span is large pages then a small
// tail, and any whole pages of it serve a request as they lie: a small request takes small pages
// of its tail; a large request whose small pages its tail holds takes its last large pages and the
// front of its tail; else a large request takes the span's front (when the request ends inside a
// large page, that page alone is swapped for small ones). A small request that no cached small
// page serves borrows the last large page of a cached span of whole large pages where it is mapped
// (its slots become lent slots) rather than unmapping the span. What a request leaves of a span
// stays cached; a cached span of whole large pages merges with the span of its stream cached right
// behind it.
//
// Shared tails (ArenaOptions::share_large_page_tails, on by default): a large request takes whole
// large pages, and the slots of its last one behind the request are lent to later small-page
// requests of its stream (never to slabs, whose empty pages are unmapped one slot at a time). A
// large page whose every slot is free again on one stream leaves the lent slots as a cached span;
// reclaim_everything gathers every stream's lent slots to find the pages freed on several. Freed
// memory then stays in runs of whole large pages that later requests reuse where they lie, so far
// fewer pages move, but a lent tail that nothing borrows is held for nothing. Two bounds keep that
// loss within the first rule of DESIGN.md: ArenaOptions::max_lent_bytes (in all; past it a large
// request takes small pages for its remainder and no cached large page is lent) and
// ArenaOptions::max_lent_tail_bytes (per request, 16 MiB by default, half the default large page:
// a request that would lend more of its last large page takes small pages for its remainder).
//
// The reclaim ladder (obtain_pages), cheapest first: (1) the stream's own cache as it lies, (2)
// another stream's, after an event wait, (3) an own cached run grown in place where the addresses
// next to it are free, mapping only what it lacks (while the device's size of addresses stays free
// in one piece, new runs are spaced apart, growth_room_bytes, so that they usually are), (3b) what
// the stream's front parks, then 1-3 again, (4) free addresses, then the pages behind them: (5)
// pooled pages, (5b) new pages while the memory held stays within ArenaOptions::max_idle_percent
// above the bytes live (a page created costs what a page moved does, and the cached runs it spares
// serve later requests where they lie), (6) the stream's own cached pages, retired behind a fence,
// (7) the pooled pages of the other size, (8) new pages. When the device gives none: (3c) one run
// of the request's length that another stream's front parks, and all again; else (9) every stream
// waited for, everything unmapped, and 5-8 again; (11) an allocation of whole pages that lends no
// tail takes any stream's lent slots, after an event wait; (10) OutOfMemory. A request that fails gives back every
// page it created (PagePool::Span), so a failure never leaves the process holding memory it could
// not use.
//
// Moves never make the device idle. Pages given up for a move are retired (PagePool::retire), still
// mapped, and unmapped only when their addresses are needed, their page is released, or by trim()
// (bytes_stale). A move does not wait for the stream whose cache gave the pages up (step 6): the
// work it queued may still use them at the old addresses, so they are retired behind an event
// recorded there (StreamFence), which is passed before those addresses are unmapped (a host wait
// only if that work is not done by then) and which a request of another stream that takes such a
// pooled page waits for on the device (back_and_map). A host wait in the middle of a training step
// would drain the device's queue, and the moves' driver calls would then hold it idle instead of
// overlapping its work (ArenaStats::host_waits counts the waits left). remap_behind alone unmaps
// at once, as it maps other pages at the same slots: it is taken only once the stream whose cache
// gives the pages up has no queued work left (queued_work_done, an event query), else the request
// is served as if that span were not cached. Nor does a request release pooled pages of the other
// size whose fence is not done (PagePool::release_pooled) until the device is full (step 9), unless
// ArenaOptions::wait_before_create asks it to once the idle share is spent (step 7).
//
// What is held beyond what is live. Pages are created only when no pooled or cached page on the
// requesting stream can serve, or within the idle share (5b). So pages held exceed pages in use
// only by that share, by cached memory of other streams (given back by trim() or when the device
// is full), partly used slabs (bytes_pinned: at most one page per live small block; empty ones are
// cached memory), less than one small page per allocation, lent slots (at most max_lent_bytes plus
// one large page; step 11 lends them before a request fails) and pooled pages of the
// other size. Only pinned and lent bytes cannot be given back while their neighbours live. Address
// space can fragment, but it is reserved eight times the device's size, and exhaustion unmaps stale
// mappings, then cached extents, back into it.
//
// Stream fronts (the cached path). A request whose size class its stream's front parks, and the
// free of a block that front handed out, take only that front's mutex, so threads on their own
// streams do not meet on the arena's lock. A parked block is still live in the books above, held
// by its front (`held`), so nothing else takes it; a front keeps at most stream_front_bytes, and
// records at most front_records_kept of the allocations made under the lock (their frees park
// without it; the frees of the others take the lock and park there). What
// is parked goes back, freed into the stream caches on the front's stream as if freed then, when a
// request would otherwise map pages anew: its own stream's front gives back its largest parked
// allocations, as many as the request needs (3b); only when the device then gives no page is one
// allocation of the request's key taken from the other fronts (3c), so one thread's miss leaves
// the fronts of the threads beside it as they are while the device has room. Every front is drained
// before a reclaim (step 9), by trim(), and for one stream by release_stream(). So parked memory
// never makes a request move pages or fail; it can make a request create pages, by at most what
// the other fronts park. bytes_requested and allocations are atomic counters (LiveCounter) that
// the cached path writes only when a stream allocates more than it freed through its front since
// (frees are owed, paid by the next allocations, settled under the lock); stats() reads each front
// under its lock, subtracts what the fronts owe, and counts parked blocks as freed ones.
//
// Whole chunks (ArenaOptions::whole_chunk_bytes): a request at or above it takes an idle chunk of
// its size or up to a sixteenth larger (its own stream's first, another's after an event wait),
// else a new chunk (PagePool::map_whole): one create, map and grant whatever its size, never moved
// or stitched. Idle chunks are given back when a chunk cannot be made (the smallest that makes
// room first, give_back_for_whole) and by reclaim_everything(), so before any request fails; step
// 5b does not count them as idle memory (they serve only their sizes).
//
// Failures. Each multi-step change of the books is one transaction object that restores what it
// changed unless committed, as PagePool::Span does for pages: UncachedRun, a mapped run out of
// every cache while a request takes it (a cached span or extent cut, grown or partly unmapped, or
// the page of a new slab), put back into its stream's cache as it was taken; LentChange, the
// change a free makes to a stream's lent slots before it caches pages beside them, undone;
// Handout, a run recorded as a live allocation, taken off the books and given back where it came
// from. A call that fails thus leaves the books as they were, but for what a reclaim step did
// before the failure. The `catch` blocks left are decisions, each with its reason: step 11 of the
// reclaim ladder and a large request without its whole last large page (OutOfMemory: try the next
// way), caching a lent page (best effort: it stays lent), a destructor that cannot throw (an undo
// that runs out of host memory leaves the run mapped, out of every cache), and the driver shut
// down at process exit.
//
// test/unit/test_arena_trace.cpp replays cuvmm-plan's traces on a bookkeeping backend of the
// H200's size and bounds the pages moved and the driver calls; `unit_arena_trace "[.profile_csv]"`
// prints where the time and the bytes go for any trace.
#include <cuvmm/arena.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cuvmm/counting_backend.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/error.hpp>

#include "allocators/arena_options.hpp"
#include "allocators/page_pool.hpp"
#include "allocators/slabs.hpp"
#include "allocators/stream_caches.hpp"
#include "allocators/stream_fronts.hpp"
#include "allocators/stream_order.hpp"
#include "allocators/whole_chunks.hpp"
#include "support/node_spares.hpp"
#include "support/room_for_one.hpp"

namespace cuvmm {
namespace {

using detail::PagePool;
using detail::StreamCache;
using detail::StreamFront;
using detail::WholeChunks;

void set_current(ArenaCounter& c, std::size_t now) noexcept {
  if (now > c.current) c.total += now - c.current;
  c.current = now;
  c.peak = std::max(c.peak, now);
}

/// Free address space left behind each new run of pages, for it to grow into once cached: a
/// cached run shorter than a request then maps only the pages it lacks, where it lies, instead of
/// all of them moving to a new run (PagePool::take_slots). On cuvmm-plan's H200 traces
/// (bookkeeping replay, default options, requests up to 1 GiB), pages moved (quick / full) with
/// runs packed best fit: 1536 / 7680; with 512 MiB of room: 1213 / 6180; 1 GiB: 1076 / 5323;
/// 2 GiB: 1075 / 5256; 4 GiB: 1055 / 5745 (the full trace then runs short of address space and
/// packs sooner). Mean utilization moved from 0.890 / 0.918 packed to 0.886 / 0.915 with 2 GiB.
/// (Measured by setting this constant and running `unit_arena_trace "[.profile]"`.)
constexpr std::size_t growth_room_bytes = 2 * GiB;

/// Most bytes (of the pages or blocks behind them) that one stream's front keeps parked: the
/// memory a stream may hold idle beyond the reach of the other streams' requests until trim(),
/// release_stream() or an out-of-memory reclaim drains it. Enough for the sizes of
/// `bench_arena --benchmark_filter=threads/` (4 KiB to 4 MiB, 16 live per thread) to be served
/// from the front almost always.
constexpr std::size_t stream_front_bytes = 64 * MiB;

/// Most allocations made under the lock that one stream's front records as handed out (so that
/// their frees park without the lock); the frees of the others take the lock and park there. The
/// records are hash tables (the front's and `held`): at a million live small blocks on a stream
/// they missed the caches at every lookup and an allocation took 0.9 us, and a free as long, on
/// the host backend; bounded here, 0.23 us each (a 2-core host, blocks of 1 B to 4 KiB freed in
/// random order). As many as a thread on its own stream keeps live in far more than
/// `bench_arena --benchmark_filter=threads/` (16).
constexpr std::size_t front_records_kept = 4096;

/// Most fronts of other streams that a miss looks through for one allocation parked under its key
/// (step 3c), so that its cost does not grow with the streams an Arena has met. As many as the
/// threads of `bench_arena --benchmark_filter=threads/`.
constexpr std::size_t fronts_searched = 16;

/// The current and peak of an ArenaCounter, shared by every thread (the total is kept apart, per
/// front and under the arena's lock, as only the peak needs the sum at each moment). The cached
/// path does not write it for each operation, which would make every thread's allocations meet on
/// its cache line: a free parked by a front is owed (StreamFront::owed_bytes, owed_allocations),
/// still counted here, and that front's next allocations are counted against what it owes first;
/// only what exceeds it is added here. So `current` is the live amount plus every front's owed
/// frees, and stats() subtracts them. The peak is recorded when `current` rises: exact when the
/// fronts of other streams owe nothing at that moment (one stream, or streams that reuse what they
/// free, as the lock path settles the requester's debt first); else higher by at most what they owe.
struct LiveCounter {
  std::atomic<std::size_t> current{0};
  std::atomic<std::size_t> peak{0};

  void add(std::size_t n) noexcept {
    std::size_t const now = current.fetch_add(n, std::memory_order_relaxed) + n;
    std::size_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void remove(std::size_t n) noexcept {
    if (n != 0) current.fetch_sub(n, std::memory_order_relaxed);
  }
  /// An allocation of `n` on a front that owes `owed`: paid from the debt first, only the rest added.
  void add_against(std::size_t n, std::size_t& owed) noexcept {
    if (owed >= n) {
      owed -= n;
      return;
    }
    add(n - std::exchange(owed, 0));
  }
  /// With `total`, the sum of every increase, and `owed`, what the fronts owe (read before `current`:
  /// with threads on their fronts meanwhile, the result may be a few operations off).
  [[nodiscard]] ArenaCounter load(std::size_t total, std::size_t owed) const noexcept {
    std::size_t const now = current.load(std::memory_order_relaxed);
    return {now > owed ? now - owed : 0, peak.load(std::memory_order_relaxed), total};
  }
};

/// The page geometry and pool options from the user's options, checked.
detail::PagePoolOptions pool_options(Backend& backend, const ArenaOptions& options) {
  detail::PagePoolOptions o;
  o.props = ChunkProperties{.device = options.device,
                            .shareable = options.shareable,
                            .compression = options.compression != Compression::none,
                            .gpu_direct_rdma = options.gpu_direct_rdma};
  std::size_t const device_bytes = backend.memory_info(options.device).total;
  detail::ArenaGeometry const geometry =
      detail::check_arena_geometry(options, backend.granularity(o.props, GranularityKind::minimum), device_bytes);
  o.page = geometry.page;
  o.large_page = geometry.large_page;
  o.address_space = geometry.address_space;
  std::size_t const alignment = o.large_page != 0 ? o.large_page : o.page;
  o.byte_limit = options.byte_limit;
  // The largest request that can succeed always finds its addresses: spacing stops short of it.
  o.kept_free = o.byte_limit != 0 ? std::min(o.byte_limit, device_bytes) : device_bytes;
  o.growth_room = round_up(growth_room_bytes, alignment);
  o.compression = options.compression;
  o.grants = options.access.empty() ? std::vector<AccessGrant>{{options.device, Access::read_write}} : options.access;
  return o;
}

}  // namespace

struct Arena::State {
  struct LiveSpan {
    std::size_t first = 0;      // first slot
    std::size_t pages = 0;      // slots
    std::size_t bytes = 0;      // as requested
    std::uint32_t tail = 0;     // slots of its last large page behind it, lent (shared tails)
    bool large_layout = false;  // starts with large pages: cached whole, never split
    bool lent = false;          // in lent slots: freed back into them
    bool whole = false;         // a whole chunk: `pages` slots of one page, idle in `whole` once freed
  };

  State(Backend& user_backend, ArenaOptions opts);
  ~State();

  /// A mapped run of slots that now belongs to a request: at least the slots it asked for.
  struct Run {
    std::size_t first = 0;
    std::size_t slots = 0;
    bool lent = false;  // lent slots of a large page that another allocation holds
  };

  class Handout;
  class UncachedRun;
  class LentChange;

  // The policy; all run under `lock` -------------------------------------------------------------
  Run obtain_pages(std::size_t slots, StreamCache& s, bool may_borrow = false, std::size_t released = 0,
                   bool may_reclaim = true);
  std::optional<Run> take_cached(StreamCache& c, std::size_t slots, StreamCache& requester, bool may_borrow = false);
  void give_back_lent(StreamCache& c, std::size_t first, std::size_t slots);
  bool lend_cached_large_page(StreamCache& c);
  void free_span(StreamCache& c, const LiveSpan& live);
  void return_lent_pages(StreamCache& c, std::size_t first, std::size_t slots) noexcept;
  std::optional<Run> take_span_end(StreamCache& c, std::size_t slots);
  std::optional<Run> take_span_tail(StreamCache& c, std::size_t slots);
  [[nodiscard]] std::size_t small_tail(std::size_t first, std::size_t held) const noexcept;
  std::optional<Run> take_from_other_stream(StreamCache& s, std::size_t slots);
  std::optional<Run> take_lent_anywhere(StreamCache& s, std::size_t slots);
  [[nodiscard]] bool may_lend(std::size_t slots) const noexcept;
  std::optional<Run> extend_cached_run(StreamCache& s, std::size_t slots);
  std::optional<Run> extend_cached_span(StreamCache& s, std::size_t slots);
  Run remap_behind(UncachedRun& taken, std::size_t kept, std::size_t slots, StreamCache& requester);
  std::size_t back_and_map(PagePool::Span& span, StreamCache& s, bool may_reclaim = true);
  std::optional<PagePool::Span> take_slots(std::size_t slots);
  void unmap_own_cache(StreamCache& s, const PagePool::Span& span);
  [[nodiscard]] bool may_create(const PagePool::Span& span) const noexcept;
  void reclaim_everything();
  Address allocate_block(std::size_t size_class, std::size_t bytes, StreamCache& s, std::size_t released = 0);
  [[nodiscard]] bool takes_whole_chunk(std::size_t bytes) const noexcept;
  Address allocate_whole(std::size_t bytes, StreamCache& s);
  std::size_t create_whole(std::size_t slots);
  bool give_back_for_whole(std::size_t slots);
  void release_idle_whole(const WholeChunks::Idle& idle) noexcept;
  void deallocate_block(Address address, std::size_t bytes, Stream stream);
  void free_checked(Address address, std::size_t bytes, Stream stream);

  // Stream fronts: the cached path without the lock (stream_fronts.hpp) ----------------------------
  [[nodiscard]] std::optional<std::size_t> front_key(std::size_t bytes, std::size_t alignment) const noexcept;
  [[nodiscard]] std::size_t key_bytes(std::size_t key) const noexcept;
  std::optional<std::size_t> checked_key(Address address, std::size_t bytes) const;
  void free_held(Address address, std::size_t bytes, Stream stream);
  void park(StreamFront& f, Address address, std::size_t key);
  void release_parked(StreamFront& f, std::size_t key);
  bool drain(StreamFront& f);
  bool drain_fronts();
  std::size_t release_own_parked(const StreamCache& s, std::size_t bytes);
  [[nodiscard]] StreamFront* front_parking(std::size_t key, const StreamCache& s);
  bool release_parked_elsewhere(std::size_t key, const StreamCache& s);
  void hand_out_from_front(StreamCache& s, Address address, std::size_t bytes, std::size_t key) noexcept;
  void retire_front(Stream stream);
  /// Takes what `f` owes off the live counters (LiveCounter). Under the lock and `f`'s.
  void settle(StreamFront& f) noexcept;
  /// settle() for `stream`'s front, if it has one. Under the lock.
  void settle_front(Stream stream);

  // Helpers --------------------------------------------------------------------------------------
  class StreamFence;
  void wait_for(StreamCache& s);  // blocks until the work queued on `s` so far is done
  bool queued_work_done(StreamCache& s);  // whether it is done now, asked without waiting (marks `s`)
  void block_on(detail::StreamOrder::Marker marker);  // waits for a marked stream's work, counted (host_waits)
  /// A fence for the work queued on `s` so far, before its cached pages are retired (null when `s`
  /// captures a CUDA graph: then it is waited for at once, as wait_for does).
  detail::Fence retire_fence(StreamCache& s);
  void make_stream_wait(StreamCache& waiter, StreamCache& freer);
  /// Orders the work `user` queues from now on after the marked work: on the device, or on the host
  /// (block_on, unless that work is done) while `user` captures a CUDA graph, which may wait for no
  /// event recorded outside its capture.
  void order_use_after(Stream user, detail::StreamOrder::Marker marker);
  std::size_t unmap_cached(StreamCache& s, std::size_t slots_wanted, const detail::Fence& fence = nullptr);  // small extents first, then large spans
  void unmap_large_spans(StreamCache& s);
  [[noreturn]] void throw_no_addresses(std::size_t slots) const;
  [[noreturn]] void throw_out_of_memory(const PagePool::Span& span) const;
  void update_peaks() noexcept;  // bytes_mapped and bytes_physical from the pages held now
  /// What fronts park, counted free by held_by_kind: slots of parked runs, bytes of parked blocks,
  /// and the slabs whose every live block is parked.
  struct Parked {
    std::size_t slots = 0;
    std::size_t block_bytes = 0;
    std::size_t slabs = 0;
  };
  [[nodiscard]] ArenaHeld held_by_kind(const Parked& parked) const noexcept;  // bytes_requested left 0

  CountingBackend calls;  // forwards to the user's backend; counts the driver calls for stats()
  ArenaOptions options;
  std::unique_ptr<detail::StreamOrder> order;
  PagePool pool;
  detail::Slabs slabs;
  detail::StreamCaches caches;
  WholeChunks whole;                                 // idle whole chunks (ArenaOptions::whole_chunk_bytes)
  std::unordered_map<Address, LiveSpan> live_spans;  // allocations of whole pages, by address
  std::size_t live_span_slots = 0;                   // sum of live_spans' pages
  detail::NodeSpares<decltype(live_spans)> live_span_spares{2};  // nodes of freed spans, for the next ones
  std::size_t max_lent_slots = 0;                    // options.max_lent_bytes (or its default) in slots
  std::size_t max_tail_slots = 0;                    // options.max_lent_tail_bytes in slots (no bound: SIZE_MAX)
  std::size_t front_pages = 0;                       // longest run of small pages a front keeps
  mutable detail::StreamFronts fronts;               // per stream: freed allocations served without `lock`
  std::unordered_map<Address, StreamFront*> held;    // allocations parked or handed out by a front, and which
  std::vector<StreamFront*> listed_fronts;           // the fronts with `listed` set: all that may park anything
  LiveCounter requested;                             // ArenaStats::bytes_requested
  LiveCounter allocated;                             // ArenaStats::allocations
  std::atomic<std::size_t> physical_now{0};          // pool.physical_bytes() as update_peaks() last saw it
  std::size_t requested_total = 0;                   // bytes_requested.total but the fronts' (StreamFront::served_bytes)
  std::size_t allocated_total = 0;                   // allocations.total but the fronts' (StreamFront::served)
  std::size_t front_frees_retired = 0;               // ArenaStats::front_frees of fronts retired since

  ArenaStats counters;  // bytes_requested, allocations, bytes_reserved, at_physical_peak, cross_stream_reuses, host_wait*, reclaims, whole_chunk_*
  mutable std::mutex lock;
};

Arena::State::State(Backend& user_backend, ArenaOptions opts)
    : calls(user_backend),
      options(std::move(opts)),
      order(detail::make_stream_order(calls.space(), options.device)),
      pool(calls, pool_options(calls, options)),
      slabs(pool.page_bytes()),
      caches(*order, slabs.class_count(), pool.slots_per_large()),
      front_pages(std::min(options.stream_cache_run_bytes / pool.page_bytes(),
                           pool.large_page_bytes() != 0 ? pool.slots_per_large() - 1 : options.stream_cache_run_bytes)),
      fronts(slabs.class_count() + front_pages) {
  set_current(counters.bytes_reserved, pool.range().size());
  std::size_t max_lent = options.max_lent_bytes;
  if (max_lent == 0) {
    std::size_t const device_bytes = calls.memory_info(options.device).total;
    std::size_t const basis = options.byte_limit != 0 ? std::min(options.byte_limit, device_bytes) : device_bytes;
    max_lent = basis / default_max_lent_share;
  }
  max_lent_slots = max_lent / pool.page_bytes();
  max_tail_slots = options.max_lent_tail_bytes != 0 ? options.max_lent_tail_bytes / pool.page_bytes() : SIZE_MAX;
}

/// A run of whole pages being handed to one request: recorded as a live span, its tail lent. Each
/// step is undone when a later one throws (std::bad_alloc), and the run goes back where it came
/// from (the stream's cache, or the lent slots), unless commit() was called. Should giving it back
/// run out of memory too, the run stays mapped, out of every cache, until the arena goes.
class Arena::State::Handout {
 public:
  Handout(State& st, StreamCache& s, Run run, std::size_t pages, bool large_layout) noexcept
      : st_(st), s_(s), run_(run), pages_(pages), large_layout_(large_layout) {}
  Handout(const Handout&) = delete;
  Handout& operator=(const Handout&) = delete;
  ~Handout() {
    if (committed_) return;
    if (recorded_) {
      st_.live_span_spares.erase(st_.live_spans, st_.live_spans.find(st_.pool.slot_address(run_.first)));
      st_.live_span_slots -= pages_;
    }
    try {
      if (run_.lent) {
        st_.give_back_lent(s_, run_.first, run_.slots);
      } else {
        st_.caches.put_pages(s_, run_.first, run_.slots, large_layout_);
      }
    } catch (const std::bad_alloc&) {  // a destructor cannot throw: the run stays mapped, out of every cache
    }
  }

  /// Records the run as the live allocation of `bytes` and lends the slots behind its pages.
  /// Returns its address. Throws only std::bad_alloc.
  Address record(std::size_t bytes) {
    Address const address = st_.pool.slot_address(run_.first);
    LiveSpan const live{run_.first, pages_, bytes, static_cast<std::uint32_t>(run_.slots - pages_), large_layout_, run_.lent};
    auto node = st_.live_span_spares.make(address, live);
    detail::room_for_one(st_.live_spans);
    st_.live_spans.insert(std::move(node));  // buckets reserved: allocates nothing
    st_.live_span_slots += pages_;
    recorded_ = true;
    if (run_.slots > pages_) s_.lent.insert(run_.first + pages_, run_.slots - pages_);
    return address;
  }
  void commit() noexcept { committed_ = true; }

 private:
  State& st_;
  StreamCache& s_;
  Run run_;
  std::size_t pages_;
  bool large_layout_;
  bool recorded_ = false;   // live_spans holds it
  bool committed_ = false;
};

/// A mapped run of slots out of every cache while one request makes it its own: a span or extent
/// taken out of stream `c`'s cache, or the page of a new slab on `c`. What the request leaves of it
/// goes back to the cache through it (cache_front, cache_back), what it gives up is unmapped through
/// it (unmap_behind). Destroyed unless commit() was called, it puts the slots it still holds back
/// into `c`'s cache, first taking back out a front part it cached apart, so that the cache holds
/// the run as it was taken: one span, or one extent. Should putting it back run out of memory, the
/// run stays mapped, out of every cache, until the arena goes.
class Arena::State::UncachedRun {
 public:
  UncachedRun(State& st, StreamCache& c, std::size_t first, std::size_t slots, bool large_layout) noexcept
      : st_(st), c_(c), first_(first), slots_(slots), large_layout_(large_layout) {}
  /// Takes the large-layout span [first, first + slots) out of `c`'s cache.
  static UncachedRun large_span(State& st, StreamCache& c, std::size_t first, std::size_t slots) noexcept {
    st.caches.remove_large_span(c, first, slots);
    return UncachedRun(st, c, first, slots, true);
  }
  /// Takes the whole extent [first, first + slots) of small pages out of `c`'s cache.
  static UncachedRun extent(State& st, StreamCache& c, std::size_t first, std::size_t slots) {
    st.caches.remove_pages(c, first, slots);  // a whole extent: frees, never allocates
    return UncachedRun(st, c, first, slots, false);
  }
  UncachedRun(const UncachedRun&) = delete;
  UncachedRun& operator=(const UncachedRun&) = delete;
  ~UncachedRun() {
    if (committed_) return;
    try {
      if (front_ != 0) st_.caches.remove_large_span(c_, first_ - front_, front_);
      if (front_ + slots_ != 0) st_.caches.put_pages(c_, first_ - front_, front_ + slots_, large_layout_);
    } catch (const std::bad_alloc&) {  // a destructor cannot throw: the run stays mapped, out of every cache
    }
  }

  [[nodiscard]] StreamCache& cache() const noexcept { return c_; }
  [[nodiscard]] std::size_t first() const noexcept { return first_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
  /// Caches its first `slots` again, as a large-layout span apart; it holds the rest. Throws only
  /// std::bad_alloc, and then nothing changed.
  void cache_front(std::size_t slots) {
    st_.caches.put_pages(c_, first_, slots, true);
    front_ += slots;
    first_ += slots;
    slots_ -= slots;
  }
  /// Caches its last `slots` again (for good: they stay cached should the request fail). Throws only
  /// std::bad_alloc, and then nothing changed.
  void cache_back(std::size_t slots, bool large_layout) {
    st_.caches.put_pages(c_, first_ + slots_ - slots, slots, large_layout);
    slots_ -= slots;
  }
  /// Unmaps its slots behind the first `kept` into the pool; it holds the first `kept`.
  void unmap_behind(std::size_t kept) {
    std::size_t const gone = slots_ - kept;
    slots_ = kept;  // first: should unmap throw, the pages behind are no longer mapped there
    st_.pool.unmap(first_ + kept, gone);
  }
  void commit() noexcept { committed_ = true; }

 private:
  State& st_;
  StreamCache& c_;
  std::size_t first_;      // the slots it holds: [first_, first_ + slots_)
  std::size_t slots_;
  bool large_layout_;      // taken as a large-layout span (else a small extent)
  std::size_t front_ = 0;  // slots right before first_ cached apart by cache_front
  bool committed_ = false;
};

/// The change a free makes to stream `c`'s lent slots before it caches pages beside them: slots
/// lent (insert) or no longer lent (erase), at most one run. Destroyed unless commit() was called,
/// it undoes that change, so that the lent slots are as they were. Should undoing it run out of
/// memory, the slots stay as the change left them (free and mapped either way).
class Arena::State::LentChange {
 public:
  explicit LentChange(StreamCache& c) noexcept : c_(c) {}
  LentChange(const LentChange&) = delete;
  LentChange& operator=(const LentChange&) = delete;
  ~LentChange() {
    if (committed_ || slots_ == 0) return;
    try {
      if (inserted_) {
        c_.lent.erase(first_, slots_);
      } else {
        c_.lent.insert(first_, slots_);
      }
    } catch (const std::bad_alloc&) {  // a destructor cannot throw: the slots stay as the change left them
    }
  }

  /// Lends [first, first + slots). Throws only std::bad_alloc, and then nothing changed.
  void insert(std::size_t first, std::size_t slots) {
    c_.lent.insert(first, slots);
    record(first, slots, true);
  }
  /// Takes [first, first + slots), which lies inside one lent extent, out of the lent slots. Throws
  /// only std::bad_alloc, and then nothing changed.
  void erase(std::size_t first, std::size_t slots) {
    c_.lent.erase(first, slots);
    record(first, slots, false);
  }
  void commit() noexcept { committed_ = true; }

 private:
  void record(std::size_t first, std::size_t slots, bool inserted) noexcept {
    first_ = first;
    slots_ = slots;
    inserted_ = inserted;
  }

  StreamCache& c_;
  std::size_t first_ = 0;  // the run changed: [first_, first_ + slots_)
  std::size_t slots_ = 0;
  bool inserted_ = false;  // lent by insert (else no longer lent, by erase)
  bool committed_ = false;
};

Arena::State::~State() {
  try {
    caches.for_each([&](StreamCache& s) { wait_for(s); });
  } catch (...) {  // the driver may be shut down at process exit: nothing left to wait for
  }
}

// The reclaim ladder -----------------------------------------------------------------------------

/// Where the `slots` pages of a request on stream `s` come from, cheapest first. Returns a mapped
/// run that now belongs to the caller. Moving a page costs a map and a grant (~30 µs on the H200,
/// see "Churn" above) and creating one about as much; reusing mapped memory costs none, so the first two
/// attempts map nothing and the third maps only the pages a cached run lacks. A failure after the span was
/// taken gives back every page it created.
Arena::State::Run Arena::State::obtain_pages(std::size_t slots, StreamCache& s, bool may_borrow,
                                             std::size_t released, bool may_reclaim) {
  if (auto const run = take_cached(s, slots, s, may_borrow)) return *run;       // 1. own cache (and lent slots), as it lies
  if (auto const run = take_from_other_stream(s, slots)) return *run;       // 2. another stream's cache, after an event wait
  if (auto const run = extend_cached_run(s, slots)) return *run;            // 3. own cached run, grown in place (steps 5-10 for what it lacks)
  if (std::size_t const more = release_own_parked(s, std::max(slots * pool.page_bytes(), released))) {
    return obtain_pages(slots, s, may_borrow, released + more, may_reclaim);  // 3b. what the stream's front parks, then 1-3 again
  }
  // Another stream's front parking a run of this length is drained of it only when the device
  // gives no page (3c, below step 8): drained at once, that front would miss on its next request of
  // the length, take one from another front in turn, and so on, each miss a turn of the lock.
  std::size_t const key = slabs.class_count() + slots - 1;
  bool const parked_elsewhere = slots <= front_pages && front_parking(key, s) != nullptr;
  try {
    auto span = take_slots(slots);                                          // 4. addresses (none free: reclaim, then OutOfMemory)
    return {back_and_map(*span, s, may_reclaim && !parked_elsewhere), slots};  // 5-10 (9 once nothing of the length is parked elsewhere)
  } catch (const OutOfMemory&) {  // steps 4-10 found no memory (the span gave back what it created)
    if (parked_elsewhere) {
      release_parked_elsewhere(key, s);                                     // 3c. one run another stream's front parks,
      return obtain_pages(slots, s, may_borrow, released, may_reclaim);     //     then 1-10 again
    }
    if (!may_borrow) throw;                                                 // 11.
    if (auto const run = take_lent_anywhere(s, slots)) return *run;       // 11. any stream's lent slots, after an event wait
    throw;
  }
}

/// `slots` of any stream's lent slots (the last resort of a small-layout request of whole pages: step
/// 9 waited for every stream and gathered their lent slots), after an event wait when they were
/// freed on another stream than `s`; nothing when no stream has that many side by side.
std::optional<Arena::State::Run> Arena::State::take_lent_anywhere(StreamCache& s, std::size_t slots) {
  StreamCache* found = nullptr;
  caches.for_each([&](StreamCache& c) {
    if (found == nullptr && c.lent.largest() >= slots && (&c == &s || order->can_mark(c.stream))) found = &c;
  });
  if (found == nullptr) return std::nullopt;
  if (found != &s) make_stream_wait(s, *found);  // first: should it fail, nothing was taken
  return Run{*found->lent.take(slots), slots, true};
}

/// Whether `slots` more lent slots stay within ArenaOptions::max_lent_bytes. O(streams): asked
/// only by requests of large pages and by a small request about to borrow a cached large page.
bool Arena::State::may_lend(std::size_t slots) const noexcept { return caches.lent_slots() + slots <= max_lent_slots; }

/// Whether `span` may create the pages it lacks before its stream's cached pages are moved to it
/// (step 5b, ArenaOptions::max_idle_percent): whether the memory held with them stays within that
/// share above the bytes live, the request's own counted. (What other streams' fronts owe counts
/// as live here: LiveCounter.)
bool Arena::State::may_create(const PagePool::Span& span) const noexcept {
  // Idle whole chunks are held apart: they serve requests of their own sizes, given back on demand.
  std::size_t const held = pool.physical_bytes() - whole.idle_slots() * pool.page_bytes() + span.missing_bytes();
  std::size_t const live = requested.current.load(std::memory_order_relaxed) + span.slots() * pool.page_bytes();
  if (held <= live) return true;
  return static_cast<double>(held - live) * 100.0 <= static_cast<double>(live) * static_cast<double>(options.max_idle_percent);
}

/// Gathers the pages `span` lacks and maps them: pooled pages, new ones while the memory idle allows
/// (5b), the stream's own cached pages, new ones, then (`may_reclaim`) everything cached.
std::size_t Arena::State::back_and_map(PagePool::Span& span, StreamCache& s, bool may_reclaim) {
  span.take_pooled();                                                                // 5. pooled pages
  if (!span.complete() && may_create(span)) (span.release_idle_other_size(), span.create());  // 5b. new pages, while the memory idle stays within its share
  if (!span.complete() && s.holds_pages()) (unmap_own_cache(s, span), span.take_pooled());  // 6. own cache, retired behind a fence (no host wait)
  if (!span.complete()) span.release_idle_other_size(options.wait_before_create && !may_create(span));  // 7. release the other page size's pool (waiting for its fences past the idle share, if asked)
  if (!span.complete()) span.create();                                              // 8. create
  if (!span.complete() && may_reclaim) (reclaim_everything(), span.release_idle_other_size(/*may_wait=*/true), span.take_pooled(), span.create());  // 9. wait for all, unmap all, retry
  if (!span.complete()) throw_out_of_memory(span);                                  // 10. OutOfMemory (the span gives back what it created)
  for (detail::Fence const& fence : span.fences()) fence->order_before(s.stream);  // pages another stream retired
  return span.map();
}

/// `slots` for `requester` from `c`'s cache (c is the requester's or, after an event wait, another
/// stream's), as it lies whenever it can be: for a small layout the best-fitting small extent, else
/// the small pages at the end of a cached large-layout span; for a large layout the end of a span
/// whose small tail holds the request's small pages, else the front of the smallest span that
/// holds the request. The rest of a span stays cached on `c`. Only in that last case, when the
/// request ends inside a large page of the span, is that one page unmapped and the request's small
/// pages mapped in its place (steps 5-10 for them), and only once the work `c` queued is done:
/// until then the span stays cached and the request is served by the later steps (no host wait).
std::optional<Arena::State::Run> Arena::State::take_cached(StreamCache& c, std::size_t slots, StreamCache& requester,
                                                           bool may_borrow) {
  if (!pool.large_layout(slots)) {
    if (auto const first = caches.take_pages(c, slots)) return Run{*first, slots};
    if (may_borrow && &c == &requester) {
      if (auto const first = c.lent.take(slots)) return Run{*first, slots, true};
      if (lend_cached_large_page(c)) {
        if (auto const first = c.lent.take(slots)) return Run{*first, slots, true};
      }
    }
    return take_span_tail(c, slots);
  }
  if (auto const run = take_span_end(c, slots)) return run;
  auto const span = caches.take_large_span(c, slots);
  if (!span) return std::nullopt;
  auto const [first, held] = *span;
  std::size_t const large = pool.slots_per_large();
  bool const ends_in_large_page = slots % large != 0 && held / large > slots / large;
  std::size_t const kept = ends_in_large_page ? slots / large * large : slots;  // mapped slots the request keeps
  std::size_t const rest = ends_in_large_page ? kept + large : slots;           // where the span's rest starts
  UncachedRun taken(*this, c, first, held, true);
  // Splitting its last large page unmaps it there: not while work `c` queued may still use it. The
  // span goes back (taken's destructor), and later steps serve the request without a host wait.
  if (ends_in_large_page && !queued_work_done(c)) return std::nullopt;
  if (held > rest) taken.cache_back(held - rest, pool.large_layout(held - rest));  // stays cached apart
  Run const run = ends_in_large_page ? remap_behind(taken, kept, slots, requester) : Run{first, slots};
  taken.commit();
  return run;
}

/// Makes [first, first + slots) a run for `requester` out of the run that `taken` holds (from
/// `first`), just taken out of a stream's cache whose queued work is done (queued_work_done: the
/// caller asked): its first `kept` slots stay mapped where they are, the slots behind them are
/// unmapped into the pool, and the request's remaining slots are mapped from there (steps 5-10).
/// Should anything fail, `taken` puts what is still mapped back into that cache.
Arena::State::Run Arena::State::remap_behind(UncachedRun& taken, std::size_t kept, std::size_t slots,
                                             StreamCache& requester) {
  std::size_t const first = taken.first();
  if (taken.slots() > kept) {
    taken.unmap_behind(kept);
    ++counters.reclaims;
  }
  auto behind = pool.take_slots_at(first + kept, slots - kept);
  back_and_map(behind, requester);
  return Run{first, slots};
}

/// Slots of small pages at the end of the cached large-layout span [first, first + held): the part
/// behind its last whole large page, when a small page starts there (0 when that part is empty).
std::size_t Arena::State::small_tail(std::size_t first, std::size_t held) const noexcept {
  std::size_t const tail = held % pool.slots_per_large();
  return tail != 0 && pool.small_page_at(first + held - tail) ? tail : 0;
}

/// A large-layout request of a large pages and r small ones (r > 0) from the end of one of `c`'s
/// cached spans (the smallest of the few that fit) with at least a large pages and r small ones
/// behind them: the request takes its last a large pages and the first r of its small tail, all
/// mapped where they are. The span's large pages before stay cached as a span, its small pages
/// after as a small extent. Nothing when no span has such an end.
std::optional<Arena::State::Run> Arena::State::take_span_end(StreamCache& c, std::size_t slots) {
  constexpr int spans_tried = 8;
  std::size_t const large = pool.slots_per_large();
  std::size_t const bulk = slots / large * large;  // slots of the request's large pages
  std::size_t const small = slots - bulk;
  if (small == 0) return std::nullopt;  // the front of a span serves it with nothing moved
  auto const found = caches.find_large_span(c, slots, spans_tried, [&](std::size_t first, std::size_t held) {
    std::size_t const tail = small_tail(first, held);
    return tail >= small && held - tail >= bulk;
  });
  if (!found) return std::nullopt;
  auto const [first, held] = *found;
  std::size_t const tail = small_tail(first, held);
  std::size_t const start = first + held - tail - bulk;  // a multiple of L past `first`
  auto taken = UncachedRun::large_span(*this, c, first, held);
  if (start > first) taken.cache_front(start - first);
  if (tail > small) taken.cache_back(tail - small, false);
  taken.commit();
  return Run{start, slots};
}

/// A small-layout request from the small pages at the end of one of `c`'s cached large-layout spans
/// (the smallest of the few whose tail holds it): mapped where they are; the span, shorter by the
/// request, stays cached. Nothing when no span has such a tail.
std::optional<Arena::State::Run> Arena::State::take_span_tail(StreamCache& c, std::size_t slots) {
  constexpr int spans_tried = 8;
  if (c.large_spans.empty()) return std::nullopt;
  auto const found = caches.find_large_span(c, pool.slots_per_large() + slots, spans_tried,
                                            [&](std::size_t first, std::size_t held) { return small_tail(first, held) >= slots; });
  if (!found) return std::nullopt;
  auto const [first, held] = *found;
  auto taken = UncachedRun::large_span(*this, c, first, held);
  taken.cache_front(held - slots);  // at least one large page stays
  taken.commit();
  return Run{first + held - slots, slots};
}

// Lent slots ---------------------------------------------------------------------------------------
//
// A request of large pages takes whole ones; the slots of its last large page behind the request
// are lent to later small-page requests of its stream (`StreamCache::lent`). A large page whose
// slots are all free again (its owner freed, every borrower freed, on one stream) leaves the lent
// slots and is cached as a span of its own; one whose slots were freed on several streams waits
// for reclaim_everything, which sees every stream's lent slots at once.

/// Caches the large pages of [first, first + slots) whose every slot is now lent on `c` as spans.
/// Best effort: should memory run out, the slots stay lent (still free, still mapped).
void Arena::State::return_lent_pages(StreamCache& c, std::size_t first, std::size_t slots) noexcept {
  std::size_t const large = pool.slots_per_large();
  for (std::size_t page = first / large * large; page < first + slots; page += large) {
    if (!c.lent.covers(page, large)) continue;
    try {
      LentChange unlent(c);
      unlent.erase(page, large);
      caches.put_pages(c, page, large, true);  // may merge with the spans beside it
      unlent.commit();
    } catch (const std::bad_alloc&) {  // best effort: the page stays lent (LentChange), and is cached later
    }
  }
}

/// Lends the last large page of `c`'s smallest cached span of whole large pages to small-page
/// requests of `c` (it stays mapped where it is); the rest of the span stays cached. False when
/// there is no such span. Throws only std::bad_alloc, and then nothing changed.
bool Arena::State::lend_cached_large_page(StreamCache& c) {
  std::size_t const large = pool.slots_per_large();
  constexpr int spans_tried = 8;
  if (c.large_spans.empty() || !may_lend(large)) return false;
  auto const found =
      caches.find_large_span(c, large, spans_tried, [&](std::size_t, std::size_t held) { return held % large == 0; });
  if (!found) return false;
  auto const [first, held] = *found;
  auto taken = UncachedRun::large_span(*this, c, first, held);
  if (held > large) taken.cache_front(held - large);
  c.lent.insert(first + held - large, large);
  taken.commit();
  return true;
}

/// A request in lent slots, freed on `c`: the slots go back to `c`'s lent slots. Throws only
/// std::bad_alloc, and then nothing changed.
void Arena::State::give_back_lent(StreamCache& c, std::size_t first, std::size_t slots) {
  c.lent.insert(first, slots);
  return_lent_pages(c, first, slots);
}

/// A request of whole pages freed on `c`. When its tail is lent, its last large page is cached
/// with the others if every lent slot of it is free on `c`, else the request's part of it is lent
/// too. Throws only std::bad_alloc, and then nothing changed.
void Arena::State::free_span(StreamCache& c, const LiveSpan& live) {
  if (live.lent) return give_back_lent(c, live.first, live.pages);
  if (live.tail == 0) return caches.put_pages(c, live.first, live.pages, live.large_layout);
  std::size_t const tail = live.tail;
  std::size_t const held = live.pages + tail;
  std::size_t const last = live.first + held - pool.slots_per_large();  // the last large page
  if (c.lent.count_from(live.first + live.pages) >= tail) {  // the whole tail is free here
    LentChange unlent(c);
    unlent.erase(live.first + live.pages, tail);
    caches.put_pages(c, live.first, held, true);
    unlent.commit();
    return;
  }
  LentChange lent(c);
  lent.insert(last, live.first + live.pages - last);
  if (last != live.first) caches.put_pages(c, live.first, last - live.first, true);
  lent.commit();
}

/// A free run of addresses; when there is none, cached memory holds them: reclaim it and look again.
std::optional<PagePool::Span> Arena::State::take_slots(std::size_t slots) {
  if (auto span = pool.take_slots(slots)) return span;
  reclaim_everything();
  if (auto span = pool.take_slots(slots)) return span;
  throw_no_addresses(slots);
}

std::optional<Arena::State::Run> Arena::State::take_from_other_stream(StreamCache& s, std::size_t slots) {
  bool const large = pool.large_layout(slots);
  StreamCache* other = caches.other_with_pages(s, slots, large);
  if (other == nullptr) return std::nullopt;
  make_stream_wait(s, *other);  // first: should it fail, nothing was taken
  return take_cached(*other, slots, s);  // what the request leaves of a span stays cached on `other`
}

/// A small-layout request that no cached extent holds: the longest of `s`'s extents (among the few
/// longest) with free addresses right behind it (or before it) for the pages it lacks. Only those
/// pages are mapped there; the cached ones stay where they are. Nothing when there is no such extent.
std::optional<Arena::State::Run> Arena::State::extend_cached_run(StreamCache& s, std::size_t slots) {
  constexpr int extents_tried = 8;
  if (pool.large_layout(slots)) return extend_cached_span(s, slots);
  if (s.pages.empty()) return std::nullopt;
  auto const fits = [&](std::size_t first, std::size_t count) {
    return count < slots && (pool.free_from(first + count) >= slots - count || pool.free_before(first) >= slots - count);
  };
  auto const run = s.pages.largest_where(extents_tried, fits);
  if (!run) return std::nullopt;
  std::size_t const missing = slots - run->count;
  bool const behind = pool.free_from(run->first + run->count) >= missing;
  std::size_t const start = behind ? run->first + run->count : run->first - missing;
  auto span = pool.take_slots_at(start, missing);
  auto cached = UncachedRun::extent(*this, s, run->first, run->count);
  back_and_map(span, s);
  cached.commit();
  return Run{behind ? run->first : start, slots};
}

/// A large-layout request that no cached span holds: the longest of `s`'s shorter spans (among the
/// few longest) with free addresses right behind it for the slots it lacks. Its large pages stay
/// mapped; when the request needs more large pages, its small tail is unmapped first (the new large
/// pages must start where the tail was), else small pages are mapped behind the tail.
std::optional<Arena::State::Run> Arena::State::extend_cached_span(StreamCache& s, std::size_t slots) {
  constexpr int spans_tried = 8;
  std::size_t const large = pool.slots_per_large();
  std::optional<std::pair<std::size_t, std::size_t>> found;  // (first, held)
  int tried = 0;
  for (auto it = s.large_spans.lower_bound(slots); it != s.large_spans.begin() && tried < spans_tried; ++tried) {
    --it;
    auto const [held, first] = *it;
    if (pool.free_from(first + held) >= slots - held) {
      found = std::pair{first, held};
      break;
    }
  }
  if (!found) return std::nullopt;
  auto const [first, held] = *found;
  auto taken = UncachedRun::large_span(*this, s, first, held);
  std::size_t const kept = slots / large > held / large ? held / large * large : held;  // slots that stay mapped
  if (kept < held && !queued_work_done(s)) return std::nullopt;  // the tail is unmapped there: as in take_cached
  Run const run = remap_behind(taken, kept, slots, s);  // the small tail goes when large pages follow
  taken.commit();
  return run;
}

/// Retires what of `s`'s cache the span can use into the pools, behind a fence for the work `s` has
/// queued (no host wait: the span maps the pages for `s`, whose later work runs after it, and their
/// old addresses stay mapped until the fence is passed): its large-layout spans when large pages
/// are missing, then small extents (and spans) for the small pages the pools cannot give.
void Arena::State::unmap_own_cache(StreamCache& s, const PagePool::Span& span) {
  detail::Fence const fence = retire_fence(s);
  while (pool.pooled_pages(PagePool::Size::large) < span.large_missing()) {  // the smallest spans, as few as will do
    auto const cached = caches.pop_large_span(s);
    if (!cached) break;
    pool.retire(cached->first, cached->second, fence);
    ++counters.reclaims;
  }
  std::size_t const pooled = pool.pooled_pages(PagePool::Size::small);
  if (span.small_missing() > pooled) unmap_cached(s, span.small_missing() - pooled, fence);
}

/// Waits for every stream, unmaps the slabs with no live block and all cached memory into the pools.
/// A stream capturing a CUDA graph cannot be waited for: its cache stays, and so do the slabs and
/// lent slots (which may hold blocks it freed) until no stream captures.
void Arena::State::reclaim_everything() {
  drain_fronts();
  std::vector<StreamCache*> waited;
  waited.reserve(caches.size());
  caches.for_each([&](StreamCache& s) {
    if (!order->can_mark(s.stream)) return;
    wait_for(s);
    waited.push_back(&s);
  });
  for (WholeChunks::Idle const& idle : whole.take_all([&](StreamCache& c) { return order->can_mark(c.stream); })) {
    release_idle_whole(idle);  // (its stream was waited for above)
  }
  if (waited.size() < caches.size()) {
    for (StreamCache* s : waited) {
      unmap_cached(*s, static_cast<std::size_t>(-1));
      unmap_large_spans(*s);
    }
    return;
  }
  auto const empty = slabs.remove_empty();
  caches.forget_slabs(empty, pool.range().base(), pool.page_bytes());
  for (auto const& [slot, size_class] : empty) pool.retire(slot, 1);
  // Every stream's work is done: the lent slots of all streams meet in the first stream's, so a
  // large page whose slots were freed on several streams is found whole.
  StreamCache* gathered = nullptr;
  caches.for_each([&](StreamCache& s) {
    if (gathered == nullptr) {
      gathered = &s;
      return;
    }
    while (!s.lent.empty()) {
      auto const [first, slots] = *s.lent.extents().begin();
      gathered->lent.insert(first, slots);  // (std::bad_alloc: these slots stay lent where they were)
      s.lent.erase(first, slots);
    }
  });
  if (gathered != nullptr) {
    std::vector<std::pair<std::size_t, std::size_t>> const lent(gathered->lent.extents().begin(), gathered->lent.extents().end());
    for (auto const& [first, slots] : lent) return_lent_pages(*gathered, first, slots);
  }
  caches.for_each([&](StreamCache& s) {
    unmap_cached(s, static_cast<std::size_t>(-1));
    unmap_large_spans(s);
  });
}

// Small requests: the block ladder -----------------------------------------------------------------

Address Arena::State::allocate_block(std::size_t c, std::size_t bytes, StreamCache& s, std::size_t released) {
  auto const reuse = [&](Address a) {
    std::size_t const slot = pool.slot_of(a);
    slabs.hand_out(slot, a - pool.slot_address(slot), bytes);
    return a;
  };
  auto const fresh = [&] {
    std::size_t const slot = s.fresh_slabs[c].back();
    auto const block = slabs.hand_out_fresh(slot, bytes);
    if (block.last) s.fresh_slabs[c].pop_back();
    return pool.slot_address(slot) + block.offset;
  };
  caches.prepare_blocks(s);
  if (auto const a = caches.take_block(s, c)) return reuse(*a);                        // 1. freed on this stream
  if (!s.fresh_slabs[c].empty()) return fresh();                                        // 2. never used, in a slab this stream opened
  if (StreamCache* other = caches.other_with_blocks(s, c)) {                            // 3. freed on another stream, after an event wait
    make_stream_wait(s, *other);
    caches.move_blocks(*other, s, c);
    return reuse(*caches.take_block(s, c));
  }
  if (std::size_t const more = release_own_parked(s, std::max(pool.page_bytes(), released))) {
    return allocate_block(c, bytes, s, released + more);                               // 3b. what the stream's front parks, then 1-3 again
  }
  detail::room_for_one(s.fresh_slabs[c]);
  // As for runs (obtain_pages): another stream's front gives up a block of this class only when
  // the device gives no page for a new slab.
  bool const parked_elsewhere = front_parking(c, s) != nullptr;
  std::size_t slot = 0;
  try {
    slot = obtain_pages(1, s, false, 0, !parked_elsewhere).first;                       // 4. a new slab of one page
  } catch (const OutOfMemory&) {
    if (!parked_elsewhere) throw;
    release_parked_elsewhere(c, s);                                                     // 3c. one block another stream's front parks,
    return allocate_block(c, bytes, s, released);                                       //     then 1-4 again
  }
  UncachedRun page(*this, s, slot, 1, false);  // cached on `s` should the slab not open
  slabs.open(slot, c);
  page.commit();
  s.fresh_slabs[c].push_back(slot);  // capacity reserved above
  return fresh();
}

// Whole chunks (ArenaOptions::whole_chunk_bytes) ------------------------------------------------------

/// An idle whole chunk serves a request of its size or up to this share of it smaller, as it lies:
/// a live chunk then holds at most 1/16 more than its request, so that the largest request after
/// PyTorch's random traces and cuvmm-plan's stays above 0.99 of the memory free (1/8: 0.985-0.992,
/// 1/4: 0.979-0.996; the estimated driver time on the random traces is 18-28 ms for any of them:
/// `unit_arena_trace "[.profile_csv]"` with CUVMM_PROFILE_CONF=whole_chunk_bytes:2MiB, docs/DESIGN.md).
constexpr std::size_t whole_reuse_share = 16;

bool Arena::State::takes_whole_chunk(std::size_t bytes) const noexcept {
  return options.whole_chunk_bytes != 0 && bytes >= options.whole_chunk_bytes;
}

/// A request that takes a whole chunk: an idle one of its size (or a little larger) as it lies,
/// its own stream's first, another stream's after an event wait; else a new one (create_whole).
Address Arena::State::allocate_whole(std::size_t bytes, StreamCache& s) {
  std::size_t const slots = (bytes + pool.page_bytes() - 1) / pool.page_bytes();
  // What can fail for want of host memory first, while nothing is taken: the record's node.
  auto node = live_span_spares.make(Address{0}, LiveSpan{});
  detail::room_for_one(live_spans);
  std::size_t first = 0;
  auto const found =
      whole.find(slots, slots + slots / whole_reuse_share, s, [&](StreamCache& c) { return order->can_mark(c.stream); });
  if (found) {
    if (&found->freed_on() != &s) make_stream_wait(s, found->freed_on());  // first: should it fail, nothing was taken
    WholeChunks::Idle const idle = whole.take(*found);
    first = idle.first;
    node.mapped().pages = idle.slots;
    ++counters.whole_chunk_reuses;
  } else {
    first = create_whole(slots);
    node.mapped().pages = slots;
  }
  node.key() = pool.slot_address(first);
  node.mapped().first = first;
  node.mapped().bytes = bytes;
  node.mapped().whole = true;
  live_span_slots += node.mapped().pages;
  live_spans.insert(std::move(node));  // buckets reserved: allocates nothing
  return pool.slot_address(first);
}

/// A new whole chunk of `slots` slots, mapped; its first slot. When the device (or byte_limit)
/// refuses it, or no run of addresses is long enough, memory held idle is given back
/// (give_back_for_whole) and the chunk asked for again, until nothing idle is left: then
/// OutOfMemory, and the arena holds no more than before.
std::size_t Arena::State::create_whole(std::size_t slots) {
  for (;;) {
    bool no_memory = false;
    try {
      if (auto const first = pool.map_whole(slots)) {
        ++counters.whole_chunks_created;
        return *first;
      }
    } catch (const OutOfMemory&) {
      no_memory = true;
    }
    if (give_back_for_whole(slots)) continue;
    if (!no_memory) throw_no_addresses(slots);
    cuvmm::throw_out_of_memory(
        "Arena::allocate",
        "no physical memory for a chunk of " + std::to_string(slots * pool.page_bytes()) + " bytes on device " +
            std::to_string(options.device) + " after giving back every idle page and chunk (the arena holds " +
            std::to_string(pool.physical_bytes()) + " bytes" +
            (options.byte_limit != 0 ? ", byte_limit " + std::to_string(options.byte_limit) : std::string()) + ")");
  }
}

/// Gives back idle memory for a whole chunk of `slots` that could not be made, cheapest first:
/// pooled pages; idle whole chunks, the smallest that makes room for the request (with what the
/// device, or byte_limit, has left), else the largest first, until there is room (each after a host
/// wait for the stream that freed it); else everything cached (reclaim_everything). Whether memory
/// or addresses went back: the caller asks for the chunk again, and calls this again while it fails.
bool Arena::State::give_back_for_whole(std::size_t slots) {
  std::size_t const held = pool.physical_bytes();
  std::size_t const run = pool.largest_free_run();
  pool.release_all_pooled();
  std::size_t room = calls.memory_info(options.device).free;  // (the pooled pages' bytes included now)
  if (options.byte_limit != 0) room = std::min(room, options.byte_limit - std::min(options.byte_limit, pool.physical_bytes()));
  // (A device that says it has room but refused the chunk still gets one idle chunk back.)
  std::size_t released = std::min(room / pool.page_bytes(), slots - 1);
  while (released < slots) {
    auto const found = whole.find_to_release(slots - released, [&](StreamCache& c) { return order->can_mark(c.stream); });
    if (!found) break;
    wait_for(found->freed_on());  // first: should it fail, nothing was taken
    WholeChunks::Idle const idle = whole.take(*found);
    release_idle_whole(idle);
    released += idle.slots;
  }
  if (pool.physical_bytes() == held) {  // no idle chunk or pooled page: everything cached
    reclaim_everything();
    pool.unmap_stale();
    pool.release_all_pooled();
  }
  return pool.physical_bytes() < held || pool.largest_free_run() > run;
}

/// Releases an idle whole chunk taken out of `whole`, whose freeing stream's work was waited for.
void Arena::State::release_idle_whole(const WholeChunks::Idle& idle) noexcept {
  pool.release_whole(idle.first);
  ++counters.whole_chunks_released;
}

void Arena::State::deallocate_block(Address a, std::size_t bytes, Stream stream) {
  std::size_t const slot = pool.slot_of(a);
  std::size_t const offset = a - pool.slot_address(slot);
  // Checked first (a bad free throws, changing nothing); the stream is registered and the block
  // cached only for a free that is accepted; the block is marked free last (nothing to undo).
  slabs.free_block(slot, offset, bytes, a, [&](std::size_t c) { caches.put_block(caches.get(stream), c, a); });
}

/// Frees the live allocation at `address` of `bytes` on `stream` into the stream caches; a bad free
/// throws cuvmm::Error and changes nothing (nor does it register `stream`).
void Arena::State::free_checked(Address address, std::size_t bytes, Stream stream) {
  auto const span = live_spans.find(address);
  if (span == live_spans.end()) {
    deallocate_block(address, bytes, stream);
    return;
  }
  LiveSpan const live = span->second;
  if (live.bytes != bytes) {
    detail::throw_wrong_free_size(address, bytes, live.bytes);
  }
  StreamCache& s = caches.get(stream);  // registered only once the free is known to be right
  if (live.whole) {
    whole.put(live.first, live.pages, s);  // idle where it lies
  } else if (live.tail == 0 && !live.lent) {  // (the common case, inline)
    caches.put_pages(s, live.first, live.pages, live.large_layout);
  } else {
    free_span(s, live);
  }
  live_span_spares.erase(live_spans, span);
  live_span_slots -= live.pages;
}

// Stream fronts ----------------------------------------------------------------------------------
//
// Keys: a size class c is key c; a run of p small pages (p <= front_pages) is key classes + p - 1.
// A front's parked allocation stays a live allocation in the books above (live_spans, slabs), held
// by the front (`held`), so nothing else can take it; drained, it is freed into the stream caches
// on the front's stream with the size recorded there, as if freed then, and every rule of the stream
// caches applies from there on.

/// The key of a request that a front may serve, or nothing. Reads only what never changes.
inline std::optional<std::size_t> Arena::State::front_key(std::size_t bytes, std::size_t alignment) const noexcept {
  if (auto const c = slabs.class_for(bytes, alignment)) return *c;
  if (takes_whole_chunk(bytes)) return std::nullopt;
  std::size_t const pages = (bytes + pool.page_bytes() - 1) / pool.page_bytes();
  if (pages > front_pages) return std::nullopt;
  return slabs.class_count() + pages - 1;
}

std::size_t Arena::State::key_bytes(std::size_t key) const noexcept {
  std::size_t const classes = slabs.class_count();
  return key < classes ? slabs.block_bytes(key) : (key - classes + 1) * pool.page_bytes();
}

/// The key of the live allocation at `address` freed with `bytes`, or nothing when no front keeps
/// it (large layouts, shared tails, lent slots, long runs). A bad free throws, changing nothing.
std::optional<std::size_t> Arena::State::checked_key(Address address, std::size_t bytes) const {
  if (auto const span = live_spans.find(address); span != live_spans.end()) {
    LiveSpan const& live = span->second;
    if (live.bytes != bytes || live.large_layout || live.tail != 0 || live.lent || live.whole || live.pages > front_pages) {
      return std::nullopt;  // (free_checked refuses a wrong size)
    }
    return slabs.class_count() + live.pages - 1;
  }
  std::size_t const slot = pool.slot_of(address);
  return slabs.check_free(slot, address - pool.slot_address(slot), bytes, address);
}

/// Frees `address`, which a front holds, with `bytes` on `stream`: checked against the front's
/// record (a free of a parked allocation is a second free), then parked in `stream`'s front.
void Arena::State::free_held(Address address, std::size_t bytes, Stream stream) {
  StreamFront& owner = *held.find(address)->second;
  std::size_t key = 0;
  {
    std::lock_guard const owner_held(owner.lock);
    auto const handed = owner.handed.find(address);
    if (handed == owner.handed.end()) {
      throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(address) +
                                                      " was not allocated by this arena or was freed twice");
    }
    if (handed->second.bytes != bytes) {
      detail::throw_wrong_free_size(address, bytes, handed->second.bytes);
    }
    key = handed->second.key;
  }
  // The free is right: now its stream is registered, as for any free (a refused one changes nothing).
  caches.get(stream);
  // (Who a front serves changes only under `lock`, held here.) One front lock at a time, and none
  // while the registry's is taken (fronts.get), as everywhere: the registry's, then a front's.
  StreamFront& f = owner.serves(stream) ? owner : fronts.get(stream);
  {
    std::lock_guard const f_held(f.lock);
    park(f, address, key);  // (std::bad_alloc: still handed out by its owner, as before the call)
    if (&f == &owner) {
      owner.handed.erase(address);
      return;
    }
  }
  // Only a holder of `lock` takes a handed-out block from a front's books, so it is still there.
  std::lock_guard const owner_held(owner.lock);
  owner.handed.erase(address);
}

/// Parks `address` (key `key`, held by no front or handed by one) in `f` (locked), releasing
/// `f`'s largest parked allocations first while the bound would be passed. Throws only
/// std::bad_alloc, and then `address` is where it was (what was released stays released).
void Arena::State::park(StreamFront& f, Address address, std::size_t key) {
  std::size_t const bytes = key_bytes(key);
  for (std::size_t k = f.parked.size(); k > 0 && f.parked_bytes + bytes > stream_front_bytes; --k) {
    while (!f.parked[k - 1].empty() && f.parked_bytes + bytes > stream_front_bytes) release_parked(f, k - 1);
  }
  auto& bin = f.parked[key];
  detail::room_for_one(bin);
  if (!f.listed) detail::room_for_one(listed_fronts);
  held.insert_or_assign(address, &f);
  bin.push_back(address);  // capacity reserved
  f.parked_bytes += bytes;
  if (!f.listed) {
    f.listed_at = listed_fronts.size();
    listed_fronts.push_back(&f);  // capacity reserved
    f.listed = true;
  }
}

/// Frees the last allocation parked under `key` in `f` (locked) into the stream caches, on `f`'s
/// stream, with the size recorded in the books. Throws only std::bad_alloc, changing nothing.
void Arena::State::release_parked(StreamFront& f, std::size_t key) {
  Address const address = f.parked[key].back();
  std::size_t recorded = 0;
  if (auto const span = live_spans.find(address); span != live_spans.end()) {
    recorded = span->second.bytes;
  } else {
    std::size_t const slot = pool.slot_of(address);
    recorded = slabs.recorded_bytes(slot, address - pool.slot_address(slot));
  }
  free_checked(address, recorded, f.stream);
  held.erase(address);
  f.parked[key].pop_back();
  f.parked_bytes -= key_bytes(key);
}

/// Frees everything parked in `f` into the stream caches; whether there was anything.
bool Arena::State::drain(StreamFront& f) {
  std::lock_guard const f_held(f.lock);
  bool const any = f.parked_bytes != 0;
  for (std::size_t k = 0; k < f.parked.size(); ++k) {
    while (!f.parked[k].empty()) release_parked(f, k);
  }
  if (f.listed) {  // off the list: the last listed front takes its place
    StreamFront* const last = listed_fronts.back();
    listed_fronts[f.listed_at] = last;
    last->listed_at = f.listed_at;
    listed_fronts.pop_back();
    f.listed = false;
  }
  return any;
}

/// Drains every front; whether any parked anything. Before a reclaim (step 9, addresses running
/// out), so that parked memory is never what makes a request move pages or fail. Visits only the
/// listed fronts (those that parked something since they were last drained), so its cost does not
/// grow with the streams an Arena has met.
bool Arena::State::drain_fronts() {
  bool any = false;
  while (!listed_fronts.empty()) any = drain(*listed_fronts.back()) || any;  // (each drain takes its front off the list)
  return any;
}

/// Frees what the front of `s`'s stream parks into its cache, its largest allocations first, until
/// at least `bytes` are freed or nothing is left; the bytes freed. Step 3b of a request about to
/// create pages: what its own stream parks serves it first. Not all of it at once: the small
/// blocks a front parks are what its stream's next requests take without the arena's lock, and
/// emptying the front at every such miss made the misses that followed take the lock too. Each
/// retry of the ladder frees at least as much again as all before it, so a request that nothing
/// parked can serve frees the whole front in a few retries before it creates a page.
std::size_t Arena::State::release_own_parked(const StreamCache& s, std::size_t bytes) {
  StreamFront* const f = fronts.registered(s.stream);
  if (f == nullptr || !f->listed) return 0;
  std::lock_guard const f_held(f->lock);
  std::size_t freed = 0;
  for (std::size_t k = f->parked.size(); k > 0 && freed < bytes; --k) {
    while (!f->parked[k - 1].empty() && freed < bytes) {
      release_parked(*f, k - 1);
      freed += key_bytes(k - 1);
    }
  }
  return freed;
}

/// A front of another stream than `s`'s that parks an allocation under `key` now, or null. Looks
/// at no more than fronts_searched fronts, the last listed, so that a miss costs the same with 40k
/// streams known.
StreamFront* Arena::State::front_parking(std::size_t key, const StreamCache& s) {
  std::size_t const searched = std::min(listed_fronts.size(), fronts_searched);
  for (std::size_t i = listed_fronts.size() - searched; i < listed_fronts.size(); ++i) {
    StreamFront* const f = listed_fronts[i];
    if (f->stream == s.stream) continue;
    std::lock_guard const f_held(f->lock);
    if (!f->parked[key].empty()) return f;
  }
  return nullptr;
}

/// Frees one allocation that another stream's front parks under `key` into that stream's cache,
/// where step 2 or 3 of the request on `s` takes it after an event wait; whether there was one.
/// Step 3c, once the device gives no page: a miss takes what it needs from the other fronts, not
/// all they park, so that one thread's miss does not empty the fronts of the threads beside it.
bool Arena::State::release_parked_elsewhere(std::size_t key, const StreamCache& s) {
  StreamFront* const f = front_parking(key, s);
  if (f == nullptr) return false;
  std::lock_guard const f_held(f->lock);
  if (f->parked[key].empty()) return false;  // its stream took it meanwhile, on the cached path
  release_parked(*f, key);
  return true;
}

/// Records the allocation of `bytes` at `address` (key `key`), just made under the lock on `s`'s
/// stream, as handed out by that stream's front when a front may keep it, so that its free on the
/// stream parks it there without the lock, as the free of one the front served does. Best effort:
/// when host memory runs out for the record, the allocation stays in the books alone and its free
/// takes the lock.
void Arena::State::hand_out_from_front(StreamCache& s, Address address, std::size_t bytes, std::size_t key) noexcept {
  // A block of the key's class always is; a run may not be (a shared tail, lent slots).
  if (key >= slabs.class_count() && checked_key(address, bytes) != key) return;
  try {  // what can fail first, changing nothing; the last insert cannot
    StreamFront& f = fronts.get(s.stream);
    std::lock_guard const f_held(f.lock);
    if (f.handed.size() >= front_records_kept) return;  // its free takes the lock
    auto node = f.spare_nodes.make(address, StreamFront::Handed{bytes, key});
    detail::room_for_one(f.handed);
    held.insert_or_assign(address, &f);
    f.handed.insert(std::move(node));  // buckets reserved: allocates nothing
  } catch (const std::bad_alloc&) {  // best effort: the allocation stays in the books alone
  }
}

void Arena::State::settle(StreamFront& f) noexcept {
  requested.remove(std::exchange(f.owed_bytes, 0));
  allocated.remove(std::exchange(f.owed_allocations, 0));
}

void Arena::State::settle_front(Stream stream) {
  if (StreamFront* const f = fronts.registered(stream)) {
    std::lock_guard const f_held(f->lock);
    if (f->serves(stream)) settle(*f);
  }
}

/// Drains `stream`'s front, gives the live allocations it handed out back to the books (their
/// exact sizes recorded there again) and keeps the front for another stream.
void Arena::State::retire_front(Stream stream) {
  StreamFront* const f = fronts.registered(stream);
  if (f == nullptr) return;
  drain(*f);
  std::unique_lock f_held(f->lock);
  for (auto const& [address, handed] : f->handed) {
    if (auto const span = live_spans.find(address); span != live_spans.end()) {
      span->second.bytes = handed.bytes;
    } else {
      std::size_t const slot = pool.slot_of(address);
      slabs.rerecord(slot, address - pool.slot_address(slot), handed.bytes);
    }
    held.erase(address);
  }
  f->handed.clear();
  settle(*f);
  requested_total += std::exchange(f->served_bytes, 0);  // stats() counts active fronts only
  allocated_total += std::exchange(f->served, 0);
  front_frees_retired += std::exchange(f->freed, 0);
  f_held.unlock();  // the registry's lock comes first
  fronts.retire(*f);
}

// Helpers ----------------------------------------------------------------------------------------

void Arena::State::make_stream_wait(StreamCache& waiter, StreamCache& freer) {
  order->mark(freer.marker, freer.stream);
  order_use_after(waiter.stream, freer.marker);
  ++counters.cross_stream_reuses;
}

void Arena::State::order_use_after(Stream user, detail::StreamOrder::Marker marker) {
  if (order->can_mark(user)) return order->order_after(user, marker);
  if (!order->done(marker)) block_on(marker);
}

void Arena::State::wait_for(StreamCache& s) {
  if (!order->can_mark(s.stream)) {  // a mark would be captured, and waiting for it fail
    throw_unsupported_capability("waiting for the work of a stream that is capturing a CUDA graph",
                                 "end the capture, or allocate on a stream that is not capturing", "Arena",
                                 "memory freed on the capturing stream would have to be unmapped");
  }
  order->mark(s.marker, s.stream);
  block_on(s.marker);
}

bool Arena::State::queued_work_done(StreamCache& s) {
  if (!order->can_mark(s.stream)) return false;
  order->mark(s.marker, s.stream);
  return order->done(s.marker);
}

void Arena::State::block_on(detail::StreamOrder::Marker marker) {
  auto const started = std::chrono::steady_clock::now();
  order->wait(marker);
  ++counters.host_waits;
  counters.host_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

/// The work a stream had queued when its cached pages were retired (PagePool::retire), which may
/// still use them at their old addresses: its own marker, made for it. Passed (a host wait, unless
/// the work is done by then) before those addresses are unmapped; the stream's later work needs no
/// order; another stream that takes the pages waits for it on the device, or on the host while that
/// stream captures a CUDA graph (order_before).
class Arena::State::StreamFence final : public detail::RetireFence {
 public:
  StreamFence(State& st, Stream stream) : st_(st), stream_(stream), marker_(st.order->create_marker()) {
    try {
      st_.order->mark(marker_, stream_);
    } catch (...) {
      st_.order->destroy_marker(marker_);
      throw;
    }
  }
  ~StreamFence() override { st_.order->destroy_marker(marker_); }
  StreamFence(const StreamFence&) = delete;
  StreamFence& operator=(const StreamFence&) = delete;

  void pass() override {
    if (!done()) st_.block_on(marker_);
    passed_ = true;
  }
  bool done() override {
    if (!passed_ && st_.order->done(marker_)) passed_ = true;
    return passed_;
  }
  void order_before(Stream next_user) override {
    if (next_user == stream_ || passed_) return;
    st_.order_use_after(next_user, marker_);
    ++st_.counters.cross_stream_reuses;
  }

 private:
  State& st_;  // the fence lives in st_.pool, which dies before st_.order (declared before it)
  Stream stream_;
  detail::StreamOrder::Marker marker_;
  bool passed_ = false;
};

detail::Fence Arena::State::retire_fence(StreamCache& s) {
  if (!order->can_mark(s.stream)) {
    wait_for(s);  // throws Unsupported: a capturing stream's work cannot be waited for
    return nullptr;
  }
  return std::make_shared<StreamFence>(*this, s.stream);
}

std::size_t Arena::State::unmap_cached(StreamCache& s, std::size_t slots_wanted, const detail::Fence& fence) {
  std::size_t done = 0;
  while (done < slots_wanted) {
    auto const extent = caches.pop_extent(s, slots_wanted - done);
    if (!extent) break;
    pool.retire(extent->first, extent->second, fence);
    done += extent->second;
    ++counters.reclaims;
  }
  while (done < slots_wanted) {
    auto const span = caches.pop_large_span(s);
    if (!span) break;
    pool.retire(span->first, span->second, fence);
    done += span->second;
    ++counters.reclaims;
  }
  return done;
}

void Arena::State::unmap_large_spans(StreamCache& s) {
  while (auto const span = caches.pop_large_span(s)) {
    pool.retire(span->first, span->second);
    ++counters.reclaims;
  }
}

void Arena::State::throw_no_addresses(std::size_t slots) const {
  cuvmm::throw_out_of_memory("Arena::allocate",
                             "no free run of " + std::to_string(slots * pool.page_bytes()) + " bytes in the arena's " +
                                 std::to_string(pool.range().size()) + " bytes of address space (largest free run " +
                                 std::to_string(pool.largest_free_run() * pool.page_bytes()) +
                                 " bytes); raise ArenaOptions::address_space_bytes");
}

void Arena::State::throw_out_of_memory(const PagePool::Span& span) const {
  cuvmm::throw_out_of_memory(
      "Arena::allocate",
      "no physical memory for " + std::to_string(span.missing_bytes()) + " more bytes on device " +
          std::to_string(options.device) + " after reclaiming every cached page (the arena holds " +
          std::to_string(pool.physical_bytes()) + " bytes" +
          (options.byte_limit != 0 ? ", byte_limit " + std::to_string(options.byte_limit) : std::string()) +
          "; the pages created for this request were released)");
}

void Arena::State::update_peaks() noexcept {
  std::size_t const physical = pool.physical_bytes();
  if (physical > counters.bytes_physical.peak) {  // a new peak: where its bytes are (ArenaStats::at_physical_peak)
    counters.at_physical_peak = held_by_kind({});
    counters.at_physical_peak.bytes_requested = requested.current.load(std::memory_order_relaxed);
  }
  set_current(counters.bytes_mapped, pool.mapped_bytes());
  set_current(counters.bytes_physical, physical);
  physical_now.store(physical, std::memory_order_relaxed);
}

/// The books' physical bytes by kind (their sum is pool.physical_bytes()), what `parked` names counted
/// free: live spans and blocks; free blocks of slabs with a live block; lent slots; cached pages,
/// spans, empty slabs and idle whole chunks; pooled pages. O(streams + cached spans).
ArenaHeld Arena::State::held_by_kind(const Parked& parked) const noexcept {
  std::size_t const page = pool.page_bytes();
  std::size_t const used_slabs = slabs.slabs_in_use() - parked.slabs;
  std::size_t const live_blocks = slabs.live_block_bytes() - parked.block_bytes;
  ArenaHeld h;
  h.bytes_live = (live_span_slots - parked.slots) * page + live_blocks;
  h.bytes_pinned = used_slabs * page - live_blocks;
  h.bytes_lent = caches.lent_slots() * page;
  h.bytes_cached = (caches.cached_pages() + caches.cached_span_slots() + parked.slots + slabs.slab_count() - used_slabs +
                    whole.idle_slots()) *
                   page;
  h.bytes_pooled = pool.pooled_bytes();
  return h;
}

// The public face ------------------------------------------------------------------------------

Arena::Arena(ArenaOptions options) : Arena(cuda_backend(options.device), std::move(options)) {}

Arena::Arena(Backend& backend, ArenaOptions options) : state_(std::make_unique<State>(backend, std::move(options))) {}

Arena::~Arena() = default;

void* Arena::allocate(std::size_t bytes, Stream stream, std::size_t alignment) {
  State& st = *state_;
  // (alignment & (alignment - 1)) rather than std::has_single_bit: without -mpopcnt that is a
  // libgcc call on every allocation.
  if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > st.pool.page_bytes()) {
    throw_invalid_argument("Arena::allocate", "alignment " + std::to_string(alignment) +
                                                  " is not a power of two up to the page size " +
                                                  std::to_string(st.pool.page_bytes()));
  }
  if (bytes == 0) return nullptr;
  if (bytes > st.pool.range().size()) {
    cuvmm::throw_out_of_memory("Arena::allocate", std::to_string(bytes) +
                                                      " bytes is more than the arena's whole address space (" +
                                                      std::to_string(st.pool.range().size()) + " bytes)");
  }
  std::optional<std::size_t> const key = st.front_key(bytes, alignment);
  if (key) {  // the cached path: the stream's front, without the arena's lock
    if (StreamFront* const f = st.fronts.find(stream)) {
      std::unique_lock front_held(f->lock);
      if (!f->serves(stream)) {
        front_held.unlock();
        st.fronts.forget_last();
      } else if (auto& bin = f->parked[*key]; !bin.empty()) {
        Address const address = bin.back();
        // First: std::bad_alloc changes nothing (but that a spare node may be gone).
        f->handed.insert(f->spare_nodes.make(address, StreamFront::Handed{bytes, *key}));
        bin.pop_back();
        f->parked_bytes -= st.key_bytes(*key);
        f->served_bytes += bytes;
        ++f->served;
        st.requested.add_against(bytes, f->owed_bytes);
        st.allocated.add_against(1, f->owed_allocations);
        return reinterpret_cast<void*>(address);
      }
    }
  }
  std::lock_guard const held(st.lock);
  struct RefreshMappedBytes {  // on success and failure alike: pages may have moved either way
    State& st;
    ~RefreshMappedBytes() { st.update_peaks(); }
  } const refresh{st};
  st.settle_front(stream);  // first: the peak below counts nothing this stream freed (LiveCounter)
  StreamCache& s = st.caches.get(stream);
  Address address = 0;
  if (auto const c = st.slabs.class_for(bytes, alignment)) {
    address = st.allocate_block(*c, bytes, s);
  } else if (st.takes_whole_chunk(bytes)) {
    address = st.allocate_whole(bytes, s);
  } else {
    std::size_t const pages = (bytes + st.pool.page_bytes() - 1) / st.pool.page_bytes();
    bool const large = st.pool.large_layout(pages);
    std::size_t const per_large = st.pool.slots_per_large();
    std::size_t whole = large && st.options.share_large_page_tails ? (pages + per_large - 1) / per_large * per_large : pages;
    if (whole - pages > st.max_tail_slots || (whole != pages && !st.may_lend(whole - pages))) {
      whole = pages;  // ArenaOptions::max_lent_tail_bytes, max_lent_bytes
    }
    State::Run run;
    if (whole == pages) {
      run = st.obtain_pages(pages, s, true);
    } else {
      try {
        run = st.obtain_pages(whole, s);
      } catch (const OutOfMemory&) {  // no room for the whole last large page: without it
        run = st.obtain_pages(pages, s);
      }
    }
    State::Handout handout(st, s, run, pages, large);
    address = handout.record(bytes);
    handout.commit();
  }
  if (key) st.hand_out_from_front(s, address, bytes, *key);
  st.requested.add(bytes);
  st.allocated.add(1);
  st.requested_total += bytes;
  ++st.allocated_total;
  return reinterpret_cast<void*>(address);
}

void Arena::deallocate(void* p, std::size_t bytes, Stream stream) {
  if (p == nullptr) return;
  State& st = *state_;
  auto const address = reinterpret_cast<Address>(p);
  if (address < st.pool.range().base() || address >= st.pool.range().end()) {
    throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(address) + " is outside the arena");
  }
  if (StreamFront* const f = st.fronts.find(stream)) {  // the cached path: an allocation the stream's front handed out
    std::unique_lock front_held(f->lock);
    if (!f->serves(stream)) {
      front_held.unlock();
      st.fronts.forget_last();
    } else if (auto const handed = f->handed.find(address); handed != f->handed.end()) {
      if (handed->second.bytes != bytes) {
        detail::throw_wrong_free_size(address, bytes, handed->second.bytes);
      }
      std::size_t const key = handed->second.key;
      std::size_t const key_bytes = st.key_bytes(key);
      // Unlisted (drained since it last parked) or full: the lock is needed to list it or make room.
      if (f->listed && f->parked_bytes + key_bytes <= stream_front_bytes) {
        auto& bin = f->parked[key];
        bin.push_back(address);  // first: std::bad_alloc changes nothing
        f->spare_nodes.erase(f->handed, handed);
        f->parked_bytes += key_bytes;
        ++f->freed;
        f->owed_bytes += bytes;  // the live counters are settled later (LiveCounter)
        ++f->owed_allocations;
        return;
      }
    }
  }
  std::lock_guard const held(st.lock);
  if (st.held.contains(address)) {
    st.free_held(address, bytes, stream);
  } else if (auto const key = st.checked_key(address, bytes)) {
    st.caches.get(stream);  // registered, as for any free that is accepted
    StreamFront& f = st.fronts.get(stream);
    std::lock_guard const f_held(f.lock);
    st.park(f, address, *key);
  } else {
    st.free_checked(address, bytes, stream);
  }
  st.requested.remove(bytes);
  st.allocated.remove(1);
}

void Arena::add_observer(std::shared_ptr<GrowthObserver> observer) {
  State& st = *state_;
  std::lock_guard const held(st.lock);
  st.pool.add_observer(std::move(observer));
}

bool Arena::remove_observer(const GrowthObserver& observer) noexcept {
  State& st = *state_;
  std::lock_guard const held(st.lock);
  return st.pool.remove_observer(observer);
}

std::size_t Arena::trim() {
  State& st = *state_;
  std::lock_guard const held(st.lock);
  std::size_t const before = st.pool.physical_bytes();
  st.reclaim_everything();  // (idle whole chunks are released there)
  st.pool.unmap_stale();
  st.pool.release_all_pooled();
  st.update_peaks();
  return before - st.pool.physical_bytes();
}

void Arena::release_stream(Stream stream) {
  State& st = *state_;
  std::lock_guard const held(st.lock);
  st.retire_front(stream);
  StreamCache* const gone = st.caches.find(stream);
  if (gone == nullptr) return;
  // The default stream never goes away; what other streams leave behind goes to it.
  StreamCache& heir = st.caches.get(nullptr);
  st.wait_for(*gone);
  // Its work is done, so what it freed is safe for any stream: cached extents are unmapped (any
  // stream may stitch their pages), free blocks and open slabs pass to the heir.
  st.unmap_cached(*gone, static_cast<std::size_t>(-1));
  st.unmap_large_spans(*gone);
  if (gone != &heir) {
    st.whole.hand_on(*gone, heir);
    while (!gone->lent.empty()) {  // its work is done: the heir lends them now
      auto const [first, slots] = *gone->lent.extents().begin();
      st.give_back_lent(heir, first, slots);
      gone->lent.erase(first, slots);
    }
    st.caches.hand_on(*gone, heir);
    st.caches.forget(*gone);
  }
  st.update_peaks();
}

ArenaStats Arena::stats() const {
  State const& st = *state_;
  std::lock_guard const held(st.lock);
  ArenaStats s = st.counters;
  // Each front read under its own lock, one at a time: none is seen with a cached-path operation
  // half done. The cached path changes one front and no books, so the fronts read at different
  // moments still describe one possible state of the books: the bytes add up. (The counters are
  // read after the fronts: with threads allocating meanwhile they may be a few operations ahead.)
  // What fronts park is free (cached), though the books count it live: a slab whose live blocks
  // are all parked is an empty slab.
  std::size_t parked_slots = 0;
  std::size_t largest_parked = 0;  // slots of the longest run parked (an extent of its own)
  std::size_t parked_block_bytes = 0;
  std::unordered_map<std::size_t, std::size_t> parked_blocks;  // slab slot → blocks parked there
  std::size_t requested_total = st.requested_total;
  std::size_t allocated_total = st.allocated_total;
  std::size_t owed_bytes = 0;
  std::size_t owed_allocations = 0;
  s.front_frees = st.front_frees_retired;
  st.fronts.for_each([&](StreamFront& f) {
    std::lock_guard const f_held(f.lock);
    requested_total += f.served_bytes;
    allocated_total += f.served;
    owed_bytes += f.owed_bytes;
    owed_allocations += f.owed_allocations;
    s.front_frees += f.freed;
    for (std::size_t k = 0; k < f.parked.size(); ++k) {
      for (Address const a : f.parked[k]) {
        if (k >= st.slabs.class_count()) {
          parked_slots += st.key_bytes(k) / st.pool.page_bytes();
          largest_parked = std::max(largest_parked, st.key_bytes(k) / st.pool.page_bytes());
        } else {
          ++parked_blocks[st.pool.slot_of(a)];
          parked_block_bytes += st.slabs.block_bytes(k);
        }
      }
    }
  });
  std::size_t parked_slabs = 0;  // slabs whose every live block is parked
  for (auto const& [slot, blocks] : parked_blocks) parked_slabs += blocks == st.slabs.in_use(slot) ? 1 : 0;
  ArenaHeld const held_now = st.held_by_kind({parked_slots, parked_block_bytes, parked_slabs});
  s.front_allocations = allocated_total - st.allocated_total;
  s.bytes_requested = st.requested.load(requested_total, owed_bytes);
  s.allocations = st.allocated.load(allocated_total, owed_allocations);
  s.chunks_created = st.calls.calls(BackendOp::create_chunk);
  s.chunks_released = st.calls.calls(BackendOp::release_chunk);
  s.maps = st.calls.calls(BackendOp::map);
  s.unmaps = st.calls.calls(BackendOp::unmap);
  s.access_calls = st.calls.calls(BackendOp::set_access);
  auto const seconds = [&](BackendOp op) { return std::chrono::duration<double>(st.calls.time_in(op)).count(); };
  s.create_seconds = seconds(BackendOp::create_chunk);
  s.release_seconds = seconds(BackendOp::release_chunk);
  s.map_seconds = seconds(BackendOp::map);
  s.unmap_seconds = seconds(BackendOp::unmap);
  s.access_seconds = seconds(BackendOp::set_access);
  s.pages_moved = st.pool.pages_moved();
  s.bytes_stale = st.pool.stale_bytes();
  s.streams = st.caches.size();
  s.bytes_live = held_now.bytes_live;
  s.bytes_pinned = held_now.bytes_pinned;
  s.bytes_lent = held_now.bytes_lent;
  s.bytes_cached = held_now.bytes_cached;
  s.bytes_pooled = held_now.bytes_pooled;
  s.bytes_whole_idle = st.whole.idle_slots() * st.pool.page_bytes();
  std::size_t const cached = st.caches.cached_pages() + parked_slots;
  std::size_t const largest = std::max(st.caches.largest_extent(), largest_parked);
  s.fragmentation = cached == 0 ? 0.0 : 1.0 - static_cast<double>(largest) / static_cast<double>(cached);
  return s;
}

ArenaPhysical Arena::physical() const noexcept {
  State const& st = *state_;
  return {st.physical_now.load(std::memory_order_relaxed), st.calls.calls(BackendOp::create_chunk),
          st.calls.calls(BackendOp::release_chunk)};
}

Backend& Arena::backend() const noexcept { return state_->calls.inner(); }
int Arena::device() const noexcept { return state_->options.device; }
std::size_t Arena::page_bytes() const noexcept { return state_->pool.page_bytes(); }
std::size_t Arena::large_page_bytes() const noexcept { return state_->pool.large_page_bytes(); }
std::size_t Arena::small_max_bytes() const noexcept { return state_->slabs.small_max(); }
std::size_t Arena::address_space_bytes() const noexcept { return state_->pool.range().size(); }

}  // namespace cuvmm
