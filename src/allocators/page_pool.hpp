// page_pool.hpp: the Arena's address slots and physical pages; knows nothing of streams.
//
// Owns: one AddressRange cut into slots of `page` bytes (new runs spaced apart: take_slots);
//   every physical page the Arena holds, of two sizes (small: one slot; large: L = large_page /
//   page slots), each either mapped at a slot (keyed by its first slot) or pooled; whole chunks,
//   one request's own page of any number of slots, mapped once (map_whole) and released from
//   where they are mapped (release_whole), never pooled or moved; the set of slots with nothing
//   mapped and not in use; the byte limit; and the stale mappings.
// Stale mappings (deferred unmapping): a page retired from its slots goes to the pool still mapped
//   there, and the slots stay out of the free set. Moving it costs a map and an access grant at its
//   new slots, not also an unmap at the old ones (an unmap is ~16-23 µs per page on the H200, half
//   as much again as the map and grant, `bench_driver_calls --benchmark_filter=driver_calls/`); a driver handle may be mapped at several addresses at once. The stale mappings are
//   unmapped, and their slots freed, only when the addresses are needed (take_slots finds no free
//   run), when the page is released (so that its memory really goes back), by unmap_stale(), and
//   with the pool. Address space is cheap; unmapping is not.
// Retire fences: work queued before a retire may still use the page at its old addresses (the
//   Arena retires a stream's cached pages without waiting for that stream). retire() takes a fence
//   for that work; the pool passes it (RetireFence::pass) before it unmaps the stale mapping, which
//   also comes before the page is released, and a Span lists the fences of the pages it took from
//   the pools (Span::fences) so that their new user can order its work after them. A span releases
//   idle pooled pages only where their fences are done (release_pooled), unless the device is full.
// Invariants: physical_bytes() is the size of every page created and not yet released (mapped,
//   pooled, or held by a Span being put together), and never exceeds the byte limit; a slot is
//   either in the free set, or covered by exactly one page's live or stale mapping, or by a Span's
//   reservation.
// Observers (growth_observer.hpp): each page is reported after Span::map() mapped and granted it,
//   before the commit, and withdrawn when it leaves its slots (unmap(), retire(): a stale mapping
//   is no longer memory in use, so it is withdrawn when retired, not when later unmapped) and
//   before the pool's destruction unmaps it. An observer that throws fails the Span (withdrawn,
//   unmapped, given back).
// Never does: decide who may reuse mapped memory (streams, caches, slabs are above it), wait for
//   a stream (it passes the fences it was given), or keep a page it created for a request that
//   then failed: a Span that is not committed releases the pages it created and returns the pooled
//   ones. Not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/growth_observer.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>
#include <cuvmm/types.hpp>

#include "allocators/extent_set.hpp"

namespace cuvmm::detail {

/// Work that may still use a page at the addresses it was retired from (PagePool::retire). The
/// Arena's marks a stream's queued work (arena.cpp: StreamFence).
class RetireFence {
 public:
  virtual ~RetireFence() = default;
  /// Returns once that work is done (at once when it is): the pool calls it before unmapping.
  virtual void pass() = 0;
  /// Whether that work is done, asked without waiting (then pass() returns at once).
  [[nodiscard]] virtual bool done() = 0;
  /// Orders work that `next_user` queues from now on after that work: for the user of a page a Span
  /// took from the pools (Span::fences), where that is another stream. The pool never calls it.
  virtual void order_before(Stream next_user) = 0;
};
using Fence = std::shared_ptr<RetireFence>;

struct PagePoolOptions {
  std::size_t page = 0;           ///< small page, a multiple of the granularity
  std::size_t large_page = 0;     ///< 0: no large pages; else a power-of-two multiple of `page`
  std::size_t address_space = 0;  ///< reserved once, a multiple of max(page, large_page)
  std::size_t byte_limit = 0;     ///< most bytes of pages held at once; 0: no limit
  std::size_t growth_room = 0;    ///< free address space left behind a new run (see take_slots); 0: none
  std::size_t kept_free = 0;      ///< address space the largest free run keeps for any request
  ChunkProperties props;          ///< for every page created
  Compression compression = Compression::none;
  std::vector<AccessGrant> grants;  ///< granted on every run of pages mapped
};

class PagePool {
 public:
  PagePool(Backend& backend, PagePoolOptions options);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  enum class Size { small, large };

  [[nodiscard]] std::size_t page_bytes() const noexcept { return options_.page; }
  [[nodiscard]] std::size_t large_page_bytes() const noexcept { return options_.large_page; }
  [[nodiscard]] std::size_t slots_per_large() const noexcept { return slots_per_large_; }
  /// Whether a run of `slots` starts with large pages (at an address aligned to them).
  [[nodiscard]] bool large_layout(std::size_t slots) const noexcept {
    return slots_per_large_ != 0 && slots >= slots_per_large_;
  }
  [[nodiscard]] const AddressRange& range() const noexcept { return range_; }
  [[nodiscard]] Address slot_address(std::size_t slot) const noexcept { return range_.base() + slot * options_.page; }
  [[nodiscard]] std::size_t slot_of(Address a) const noexcept { return (a - range_.base()) / options_.page; }
  [[nodiscard]] std::size_t byte_limit() const noexcept { return options_.byte_limit; }

  [[nodiscard]] std::size_t physical_bytes() const noexcept { return physical_bytes_; }
  [[nodiscard]] std::size_t mapped_bytes() const noexcept { return mapped_bytes_; }
  [[nodiscard]] std::size_t pooled_bytes() const noexcept;
  [[nodiscard]] std::size_t pooled_pages(Size size) const noexcept { return pool(size).size(); }
  /// The longest run of free slots.
  [[nodiscard]] std::size_t largest_free_run() const noexcept { return free_slots_.largest(); }
  /// Free slots from `slot` on (0 when `slot` is not the first of a free run).
  [[nodiscard]] std::size_t free_from(std::size_t slot) const noexcept { return free_slots_.count_from(slot); }
  /// Free slots right before `slot` (0 when no free run ends there).
  [[nodiscard]] std::size_t free_before(std::size_t slot) const noexcept { return free_slots_.count_before(slot); }
  /// Whether a small page is mapped with its start at `slot`.
  [[nodiscard]] bool small_page_at(std::size_t slot) const noexcept {
    auto const it = mapped_.find(slot);
    return it != mapped_.end() && it->second.page.chunk.size() == options_.page;
  }
  /// Pages mapped again after having been unmapped (moved between addresses), ever. A page
  /// created and mapped for the first time is not counted.
  [[nodiscard]] std::size_t pages_moved() const noexcept { return pages_moved_; }

  class Span;
  /// Reserves a run of `slots` free slots (aligned to L for a large layout); nothing when there is
  /// none. The Span then gathers pages and maps them, or gives everything back when destroyed.
  /// Spaced placement: the run goes at the end of the largest free run with `growth_room` free
  /// behind it, so that it can grow in place later (a cached run lacking a few pages then maps
  /// only those, instead of moving all of its pages to a new run), while the largest free run
  /// keeps `kept_free`; once that would no longer hold, the best-fitting free run (packed).
  std::optional<Span> take_slots(std::size_t slots);
  /// Reserves the free slots [first, first + slots), which must all be free (and `first` aligned to
  /// L for a large layout): to grow a mapped run in place.
  Span take_slots_at(std::size_t first, std::size_t slots);

  /// Creates one chunk of `slots` slots, maps it at free slots (placed as take_slots places a run)
  /// and grants access: a whole chunk, the one page of one request. Returns its first slot, or
  /// nothing when no free run of addresses is long enough. Throws OutOfMemory when the device or
  /// the byte limit refuses the chunk; on any failure nothing is held (the chunk released, the
  /// slots free, observers told nothing).
  std::optional<std::size_t> map_whole(std::size_t slots);
  /// Unmaps the whole chunk mapped at `first` (map_whole), frees its slots and releases it.
  void release_whole(std::size_t first) noexcept;

  /// Unmaps the pages over [first, first + count) (whole pages this pool mapped) into the pools
  /// and frees the slots: for a caller that maps other pages there next.
  void unmap(std::size_t first, std::size_t count);
  /// Moves the pages over [first, first + count) (whole pages this pool mapped) into the pools,
  /// still mapped there as stale mappings (no driver call): the slots stay taken until the
  /// addresses are needed. The caller must no longer use the memory at those addresses, but work
  /// it queued may: `fence` (null: none may) is passed before a stale mapping is unmapped, and
  /// listed by the Span that takes the page (Span::fences).
  void retire(std::size_t first, std::size_t count, Fence fence = nullptr);
  /// Unmaps every stale mapping and frees its slots.
  void unmap_stale() noexcept;
  /// Bytes of address space held by stale mappings.
  [[nodiscard]] std::size_t stale_bytes() const noexcept { return stale_bytes_; }
  /// Releases pooled pages of `size` until `bytes` were given back or none is left; returns the
  /// bytes. Pages whose fences are done (RetireFence::done) go first; without `may_wait` it passes
  /// over the others, releasing only what it can without waiting, and with it it passes their
  /// fences (a wait) only for the bytes the done ones do not cover.
  std::size_t release_pooled(Size size, std::size_t bytes, bool may_wait) noexcept;
  /// Releases every pooled page; returns the bytes.
  std::size_t release_all_pooled() noexcept;

  /// Attaches `observer` (not null, not attached: cuvmm::Error) and tells it of every page mapped
  /// now, in slot order; if it throws, what it was told is withdrawn and it is not attached.
  void add_observer(std::shared_ptr<GrowthObserver> observer);
  /// Withdraws every mapped page from `observer` and detaches it; false if it was not attached.
  bool remove_observer(const GrowthObserver& observer) noexcept;

 private:
  /// A mapping kept after its page left its slots (retire()), and what may still use it.
  struct StaleMapping {
    Mapping mapping;
    Fence fence;  // passed before the mapping is unmapped (null: nothing to wait for)
  };
  /// A physical page and the slots where it is still mapped without backing them.
  struct Page {
    PhysicalChunk chunk;              // released after its mappings are gone (members die in reverse order)
    std::vector<StaleMapping> stale;  // see retire()
  };
  struct MappedPage {
    // Constructors, not an aggregate: try_emplace builds it in the map's node from references, so a
    // node allocation that throws leaves the page and its mapping with the caller (and clang 14 has
    // no parenthesized aggregate initialization); Span::map makes its nodes empty, ahead.
    MappedPage() noexcept = default;
    MappedPage(Page&& p, Mapping&& m) noexcept : page(std::move(p)), mapping(std::move(m)) {}
    Page page;
    Mapping mapping;  // where it backs memory in use or cached
  };
  /// Reserves free slots for a run of `slots` as take_slots does; nothing when there is none.
  std::optional<std::size_t> take_free_run(std::size_t slots);
  std::vector<Page>& pool(Size size) noexcept { return size == Size::small ? small_pool_ : large_pool_; }
  const std::vector<Page>& pool(Size size) const noexcept { return size == Size::small ? small_pool_ : large_pool_; }
  /// Puts a page that backs no slot in its pool (or releases it when the pool cannot grow).
  void park(Page page) noexcept;
  /// Unmaps `page`'s stale mappings, frees their slots, releases it and takes its bytes off
  /// physical_bytes_.
  void release(Page page) noexcept;
  /// Passes the fences of `page`'s stale mappings, unmaps them and frees their slots.
  void unmap_stale(Page& page) noexcept;
  /// Whether every fence of `page`'s stale mappings is done (a device that cannot say: no).
  static bool fences_done(const Page& page) noexcept;
  /// Moves the pages over [first, first + count) into the pools, their mappings unmapped or, with
  /// `keep_stale`, kept as stale ones behind `fence` (unmap() and retire(); neither frees the slots here).
  void park_mapped(std::size_t first, std::size_t count, bool keep_stale, const Fence& fence);
  /// The page mapped at `slot` as observers see it.
  BackedRange backed_range(std::size_t slot, const PhysicalChunk& chunk) const noexcept;
  /// Tells every observer (last attached first) that the page at `slot` leaves its slots.
  void withdraw(std::size_t slot, const PhysicalChunk& chunk) noexcept;

  Backend* backend_;
  PagePoolOptions options_;
  std::size_t slots_per_large_ = 0;                    // L; 0: no large pages
  std::size_t room_slots_ = 0;                         // options_.growth_room in slots
  std::size_t kept_free_slots_ = 0;                    // options_.kept_free in slots (rounded up)
  AddressRange range_;                                 // freed last: everything below maps into it
  std::vector<Page> small_pool_;                       // small pages created and backing no slot
  std::vector<Page> large_pool_;                       // large pages created and backing no slot
  std::unordered_map<std::size_t, MappedPage> mapped_;  // first slot of a page → the page mapped there
  ExtentSet free_slots_;                               // slots with nothing mapped, not in use
  std::size_t mapped_bytes_ = 0;                       // sum of the mapped pages' sizes
  std::size_t physical_bytes_ = 0;                     // every page created and not released
  std::size_t pages_moved_ = 0;                        // pooled pages mapped again, ever
  std::size_t stale_bytes_ = 0;                        // address space of the stale mappings
  std::vector<std::shared_ptr<GrowthObserver>> observers_;  // told of every page mapped at a slot
};

/// A run of slots being backed by pages: large pages first (at the L-aligned start), small pages
/// behind them. Each step moves pages in; map() commits. Destroyed uncommitted, it frees the
/// slots, returns pages it took from the pools and releases the pages it created.
class PagePool::Span {
 public:
  Span(PagePool& pool, std::size_t first, std::size_t slots) noexcept;
  Span(Span&& other) noexcept;
  Span& operator=(Span&&) = delete;
  ~Span();

  [[nodiscard]] std::size_t first() const noexcept { return first_; }
  [[nodiscard]] std::size_t slots() const noexcept { return slots_; }
  [[nodiscard]] std::size_t large_missing() const noexcept { return large_wanted_ - large_.size(); }
  [[nodiscard]] std::size_t small_missing() const noexcept { return small_wanted_ - small_.size(); }
  /// Bytes of pages still wanted.
  [[nodiscard]] std::size_t missing_bytes() const noexcept;
  [[nodiscard]] bool complete() const noexcept { return large_missing() == 0 && small_missing() == 0; }

  /// Moves pooled pages of both sizes in, as many as are wanted.
  void take_pooled();
  /// The fences of the stale mappings of the pages this span took from the pools (retire()): work
  /// that may still use those pages at other addresses. Its user orders its work after them.
  [[nodiscard]] const std::vector<Fence>& fences() const noexcept { return fences_; }
  /// Releases pooled pages of a size this span wants no more of, up to the bytes it still misses
  /// of the other size: idle memory goes back to the device before new pages are asked for. A
  /// page whose fence is not done stays pooled (releasing it would wait for that work), unless
  /// `may_wait` (the device is full: the page's memory is needed now).
  void release_idle_other_size(bool may_wait = false) noexcept;
  /// Creates pages until complete or the device (OutOfMemory) or the byte limit refuses. Large
  /// pages refused are replaced by small ones. Other errors (Unsupported compression) propagate.
  void create();
  /// Maps every page side by side, grants access with one call, and commits; returns first().
  std::size_t map();

 private:
  struct Entry {
    PagePool::Page page;
    bool created = false;  // made for this span (released on failure) or taken from a pool
  };
  bool create_one(PagePool::Size size);

  PagePool* pool_;
  std::size_t first_ = 0;
  std::size_t slots_ = 0;
  std::size_t large_wanted_ = 0;
  std::size_t small_wanted_ = 0;
  std::vector<Entry> large_;
  std::vector<Entry> small_;
  std::vector<Fence> fences_;  // of the pages taken from the pools (take_pooled)
  bool committed_ = false;  // (or moved from)
};

}  // namespace cuvmm::detail
