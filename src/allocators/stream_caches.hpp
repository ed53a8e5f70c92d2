// stream_caches.hpp: what each stream freed into the Arena, and how to find it from another stream.
//
// Owns: one StreamCache per stream the Arena has seen (its ordering marker, its mapped free page
//   extents, its freed large-layout spans (a span of whole large pages merged with the one cached
//   right behind it), its lent slots (kept here, decided by the Arena), its free blocks and the
//   slabs it opened, per size class),
//   a hash map from stream handle to cache, and three indexes so that no operation scans streams:
//   streams by their largest free extent, freed large-layout spans by size, and per size class the
//   streams with free blocks. Streams are kept in registration order (an id) for the few whole-arena
//   passes (waiting for every stream, reclaiming everything).
// Invariants: a slot range is in at most one cache; an index entry exists for every non-empty
//   cache part (the indexes are updated after each change; an index insert that fails for want
//   of memory only hides that cache from other streams, never misleads: lookups check the cache).
//   The per-class block index may also hold streams whose list ran empty since: taking the last
//   block leaves the entry (so a stream that frees and reuses one block costs no index node per
//   pair), and the lookup that meets such an entry drops it. A cache's in_class_index[k] says
//   whether the class index holds it, so that a free into a list that runs empty and fills again
//   costs no index lookup. The last stream looked up is remembered (the common case: one stream
//   allocates and frees many times in a row), and forgotten with its cache.
// Never does: map or unmap pages, wait for a stream, or create a marker's event itself (the
//   StreamOrder does); decide policy (the Arena's ladder does). Not thread-safe: the Arena's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <cuvmm/types.hpp>

#include "allocators/extent_set.hpp"
#include "allocators/stream_order.hpp"
#include "support/node_spares.hpp"

namespace cuvmm::detail {

struct StreamCache {
  Stream stream = nullptr;
  StreamOrder::Marker marker = nullptr;                   // marks the stream's work for others to wait on
  std::uint64_t id = 0;                                   // registration order
  ExtentSet pages;                                        // mapped free small-layout slots freed here
  std::multimap<std::size_t, std::size_t> large_spans;    // freed large-layout spans: slots → first slot
  std::map<std::size_t, std::size_t> span_at;            // the same spans: first slot → slots
  ExtentSet lent;                                         // free slots of large pages that a live allocation still uses
  // Per size class, made on the stream's first small request or free (empty until then, so that
  // thousands of streams that never touch a slab cost a few bytes each):
  std::vector<std::vector<Address>> free_blocks;          // per size class: blocks freed here
  std::vector<std::vector<std::size_t>> fresh_slabs;      // per size class: slabs opened here with unused blocks
  std::vector<std::uint8_t> in_class_index;               // per size class: 1 when StreamCaches' class index holds this stream

  [[nodiscard]] bool holds_pages() const noexcept { return !pages.empty() || !large_spans.empty(); }
};

class StreamCaches {
 public:
  /// `slots_per_large` (L): a cached large-layout span whose length is a multiple of L merges with
  /// the span of the same stream that starts right behind it (0: spans never merge).
  StreamCaches(StreamOrder& order, std::size_t size_classes, std::size_t slots_per_large = 0)
      : order_(&order), classes_(size_classes), slots_per_large_(slots_per_large), by_class_(size_classes) {}
  ~StreamCaches();
  StreamCaches(const StreamCaches&) = delete;
  StreamCaches& operator=(const StreamCaches&) = delete;

  /// The cache of `stream`, or null when the arena has not registered it.
  [[nodiscard]] StreamCache* find(Stream stream) const noexcept {
    if (last_cache_ != nullptr && last_stream_ == stream) return last_cache_;  // inline: the allocation path
    return find_remembering(stream);
  }
  /// The cache of `stream`, registered (with a new marker) if need be.
  StreamCache& get(Stream stream) {
    if (last_cache_ != nullptr && last_stream_ == stream) return *last_cache_;
    return get_remembering(stream);
  }
  /// Unregisters `cache`, which must hold no pages (its blocks and slabs were handed on).
  void forget(StreamCache& cache) noexcept;
  [[nodiscard]] std::size_t size() const noexcept { return by_id_.size(); }
  /// Calls f(StreamCache&) for every stream, in registration order.
  template <class F>
  void for_each(F&& f) {
    for (auto& [id, cache] : by_id_) f(*cache);
  }

  // Mapped free pages ----------------------------------------------------------------------------
  /// Caches [first, first + slots) on `c`: an extent of small pages, or a whole large-layout span.
  /// A span merges with `c`'s span that ends right before it when that one's length is a multiple
  /// of L, and with the one that starts right behind it when its own length is (so a merged span
  /// is still whole large pages, or runs of L small pages, then small pages). Throws only
  /// std::bad_alloc, and then nothing changed.
  void put_pages(StreamCache& c, std::size_t first, std::size_t slots, bool large_layout);
  /// Takes `slots` from `c`'s small extents (best fit); nothing when no extent is that long.
  std::optional<std::size_t> take_pages(StreamCache& c, std::size_t slots);
  /// Removes and returns `c`'s smallest large-layout span of at least `slots` as (first, slots).
  std::optional<std::pair<std::size_t, std::size_t>> take_large_span(StreamCache& c, std::size_t slots);
  /// Among `c`'s cached large-layout spans of at least `slots` (the smallest first, at most
  /// `tries` of them) the first for which `fits(first, held)` holds, as (first, held), left in
  /// place; nothing when none of them does.
  template <class Fits>
  [[nodiscard]] std::optional<std::pair<std::size_t, std::size_t>> find_large_span(const StreamCache& c, std::size_t slots,
                                                                                   int tries, Fits&& fits) const {
    for (auto it = c.large_spans.lower_bound(slots); it != c.large_spans.end() && tries > 0; ++it, --tries) {
      if (fits(it->second, it->first)) return std::pair{it->second, it->first};
    }
    return std::nullopt;
  }
  /// Removes `c`'s cached large-layout span at `first` of `slots`, which must be there.
  void remove_large_span(StreamCache& c, std::size_t first, std::size_t slots) noexcept;
  /// Removes [first, first + slots), which lies inside one of `c`'s small extents.
  void remove_pages(StreamCache& c, std::size_t first, std::size_t slots);
  /// Another stream than `not_this`, one that can be marked now, whose cache can serve `slots`: an
  /// extent that long, or for a large layout a span at least that long; null when there is none.
  [[nodiscard]] StreamCache* other_with_pages(const StreamCache& not_this, std::size_t slots, bool large_layout) const;
  /// Removes and returns up to `max_slots` of `c`'s small extents (the lowest first) as (first, count).
  std::optional<std::pair<std::size_t, std::size_t>> pop_extent(StreamCache& c, std::size_t max_slots);
  /// Removes and returns `c`'s smallest large-layout span as (first, slots).
  std::optional<std::pair<std::size_t, std::size_t>> pop_large_span(StreamCache& c);
  /// Pages in every stream's small extents, and the largest such extent (fragmentation statistic).
  [[nodiscard]] std::size_t cached_pages() const noexcept { return cached_pages_; }
  [[nodiscard]] std::size_t largest_extent() const noexcept;
  /// Slots in every stream's cached large-layout spans. O(spans cached).
  [[nodiscard]] std::size_t cached_span_slots() const noexcept;
  /// Slots in every stream's lent slots. O(streams).
  [[nodiscard]] std::size_t lent_slots() const noexcept;

  // Free blocks and open slabs -------------------------------------------------------------------
  /// Gives `c` its per-class lists if it has none yet. Throws only std::bad_alloc, changing nothing.
  void prepare_blocks(StreamCache& c) const;
  /// Records a block of class `size_class` freed on `c`. Throws only std::bad_alloc, changing nothing.
  void put_block(StreamCache& c, std::size_t size_class, Address block);
  /// A block of the class freed on `c`, removed; nothing when there is none.
  std::optional<Address> take_block(StreamCache& c, std::size_t size_class);
  /// Another stream than `not_this`, one that can be marked now, with free blocks of the class (the
  /// oldest), or null.
  /// Drops the index entries of streams whose list for the class ran empty as it meets them.
  [[nodiscard]] StreamCache* other_with_blocks(const StreamCache& not_this, std::size_t size_class);
  /// Moves every free block of the class from `from` to `to` (O(1) when `to` has none).
  void move_blocks(StreamCache& from, StreamCache& to, std::size_t size_class);
  /// Hands all of `from`'s free blocks and open slabs to `to`.
  void hand_on(StreamCache& from, StreamCache& to);
  /// Forgets, in every stream, the free blocks and open slabs of the slab pages `slots` (being unmapped).
  void forget_slabs(const std::vector<std::pair<std::size_t, std::size_t>>& slots_and_classes,
                    Address base, std::size_t page);

 private:
  [[nodiscard]] StreamCache* find_remembering(Stream stream) const noexcept;  // find() through the hash map
  StreamCache& get_remembering(Stream stream);                                // get() through the hash map
  void index_largest(StreamCache& c, std::size_t before) noexcept;  // after c.pages changed
  void index_blocks(StreamCache& c, std::size_t size_class) noexcept;  // after c.free_blocks[size_class] changed
  void put_large_span(StreamCache& c, std::size_t first, std::size_t slots);
  /// Removes `c`'s span at `first` of `slots` (which must be there) from the indexes, and from
  /// span_at too when `by_first`.
  void erase_large_span(StreamCache& c, std::size_t first, std::size_t slots, bool by_first) noexcept;

  StreamOrder* order_;
  std::size_t classes_;
  std::size_t slots_per_large_ = 0;                                      // L; 0: spans never merge
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, std::unique_ptr<StreamCache>> by_id_;        // owner, registration order
  std::unordered_map<Stream, StreamCache*> by_stream_;                  // lookup by handle
  std::set<std::pair<std::size_t, std::uint64_t>> by_largest_;          // (largest free extent, id), non-empty only
  std::multiset<std::pair<std::size_t, std::uint64_t>> large_spans_;    // (slots, id), one per cached span
  std::vector<std::set<std::uint64_t>> by_class_;                       // per class: ids with free blocks
  std::size_t cached_pages_ = 0;                                        // sum of every cache's pages.pages()
  // Nodes of erased large-span entries, for the next spans cached (a put merges at most two spans
  // into one, a take erases one: two of each keep a cached pair free of heap calls):
  NodeSpares<decltype(StreamCache::large_spans)> span_by_size_spares_{2};
  NodeSpares<decltype(StreamCache::span_at)> span_at_spares_{2};
  NodeSpares<decltype(large_spans_)> span_index_spares_{2};
  mutable Stream last_stream_ = nullptr;                                // the last stream find() or get() met,
  mutable StreamCache* last_cache_ = nullptr;                           // and its cache (null: none remembered)
};

}  // namespace cuvmm::detail
