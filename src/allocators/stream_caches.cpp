// StreamCaches: per-stream free memory and the indexes that find it (see stream_caches.hpp).
//
// Owns: the caches and their indexes. Invariants: as in stream_caches.hpp; cached_pages_ is the sum
// of every cache's small-extent pages. Never does: scan streams on a per-request path: lookups go
// through the hash map and the ordered indexes (O(log n)); only forget_slabs and the Arena's
// whole-arena passes visit every stream.
#include "allocators/stream_caches.hpp"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <new>
#include <optional>
#include <utility>

#include "support/node_ahead.hpp"
#include "support/room_for_one.hpp"

namespace cuvmm::detail {

StreamCaches::~StreamCaches() {
  for (auto& [id, cache] : by_id_) order_->destroy_marker(cache->marker);
}

StreamCache* StreamCaches::find_remembering(Stream stream) const noexcept {
  auto const it = by_stream_.find(stream);
  if (it == by_stream_.end()) return nullptr;
  last_stream_ = stream;
  last_cache_ = it->second;
  return last_cache_;
}

StreamCache& StreamCaches::get_remembering(Stream stream) {
  if (StreamCache* known = find_remembering(stream)) return *known;
  // Everything that can fail first (nothing changed then), the marker last: nothing after it throws.
  std::uint64_t const id = next_id_;
  auto owner = node_ahead<decltype(by_id_)>(id, std::make_unique<StreamCache>());
  StreamCache& cache = *owner.mapped();
  auto lookup = node_ahead<decltype(by_stream_)>(stream, &cache);
  room_for_one(by_stream_);
  cache.stream = stream;
  cache.id = id;
  cache.marker = order_->create_marker();
  by_id_.insert(std::move(owner));
  by_stream_.insert(std::move(lookup));
  ++next_id_;
  last_stream_ = stream;
  last_cache_ = &cache;
  return cache;
}

void StreamCaches::forget(StreamCache& c) noexcept {
  by_largest_.erase({c.pages.largest(), c.id});
  cached_pages_ -= c.pages.pages();
  for (auto const& [slots, first] : c.large_spans) large_spans_.erase(large_spans_.find({slots, c.id}));
  for (std::size_t k = 0; k < classes_; ++k) by_class_[k].erase(c.id);
  order_->destroy_marker(c.marker);
  if (last_cache_ == &c) last_cache_ = nullptr;
  by_stream_.erase(c.stream);
  by_id_.erase(c.id);
}

void StreamCaches::index_largest(StreamCache& c, std::size_t before) noexcept {
  std::size_t const after = c.pages.largest();
  if (after == before) return;
  if (before != 0) by_largest_.erase({before, c.id});
  try {
    if (after != 0) by_largest_.emplace(after, c.id);
  } catch (const std::bad_alloc&) {  // only hides this cache from other streams
  }
}

void StreamCaches::prepare_blocks(StreamCache& c) const {
  if (!c.free_blocks.empty()) return;
  std::vector<std::vector<Address>> blocks(classes_);
  std::vector<std::vector<std::size_t>> fresh(classes_);
  std::vector<std::uint8_t> indexed(classes_, 0);
  c.free_blocks.swap(blocks);
  c.fresh_slabs.swap(fresh);
  c.in_class_index.swap(indexed);
}

void StreamCaches::index_blocks(StreamCache& c, std::size_t k) noexcept {
  if (c.free_blocks.empty()) return;  // never had blocks: never indexed
  if (c.free_blocks[k].empty()) {
    if (c.in_class_index[k] != 0) by_class_[k].erase(c.id);
    c.in_class_index[k] = 0;
    return;
  }
  if (c.in_class_index[k] != 0) return;
  try {
    by_class_[k].insert(c.id);
    c.in_class_index[k] = 1;
  } catch (const std::bad_alloc&) {  // only hides these blocks from other streams
  }
}

void StreamCaches::put_pages(StreamCache& c, std::size_t first, std::size_t slots, bool large_layout) {
  if (large_layout) return put_large_span(c, first, slots);
  std::size_t const before = c.pages.largest();
  c.pages.insert(first, slots);
  cached_pages_ += slots;
  index_largest(c, before);
}

void StreamCaches::put_large_span(StreamCache& c, std::size_t first, std::size_t slots) {
  std::size_t const large = slots_per_large_;
  std::optional<std::pair<std::size_t, std::size_t>> before;  // (first, slots) of the spans it merges with
  std::optional<std::pair<std::size_t, std::size_t>> after;
  if (large != 0) {
    auto const next = c.span_at.lower_bound(first);
    if (next != c.span_at.end() && next->first == first + slots && slots % large == 0) after = *next;
    if (next != c.span_at.begin()) {
      auto const previous = std::prev(next);
      if (previous->first + previous->second == first && previous->second % large == 0) before = *previous;
    }
  }
  std::size_t const merged_first = before ? before->first : first;
  std::size_t const merged_slots = (before ? before->second : 0) + slots + (after ? after->second : 0);
  // Every node is made first (strong guarantee); then they go in and the merged spans' entries go
  // (noexcept), the span_at node of the one before standing for the merged span.
  auto by_size = span_by_size_spares_.make(merged_slots, merged_first);
  auto index = span_index_spares_.make(merged_slots, c.id);
  decltype(c.span_at)::node_type at;
  if (!before) at = span_at_spares_.make(merged_first, merged_slots);
  c.large_spans.insert(std::move(by_size));
  large_spans_.insert(std::move(index));
  if (!before) c.span_at.insert(std::move(at));
  if (before) {
    erase_large_span(c, before->first, before->second, false);
    c.span_at.find(merged_first)->second = merged_slots;
  }
  if (after) erase_large_span(c, after->first, after->second, true);
}

void StreamCaches::erase_large_span(StreamCache& c, std::size_t first, std::size_t slots, bool by_first) noexcept {
  auto it = c.large_spans.equal_range(slots).first;
  while (it->second != first) ++it;
  span_by_size_spares_.erase(c.large_spans, it);
  if (by_first) {
    auto const at = c.span_at.find(first);
    assert(at != c.span_at.end());
    span_at_spares_.erase(c.span_at, at);
  }
  span_index_spares_.erase(large_spans_, large_spans_.find({slots, c.id}));
}

std::optional<std::size_t> StreamCaches::take_pages(StreamCache& c, std::size_t slots) {
  std::size_t const before = c.pages.largest();
  auto const first = c.pages.take(slots);
  if (first) {
    cached_pages_ -= slots;
    index_largest(c, before);
  }
  return first;
}

std::optional<std::pair<std::size_t, std::size_t>> StreamCaches::take_large_span(StreamCache& c, std::size_t slots) {
  auto const it = c.large_spans.lower_bound(slots);
  if (it == c.large_spans.end()) return std::nullopt;
  auto const [held, first] = *it;
  erase_large_span(c, first, held, true);
  return std::pair{first, held};
}

void StreamCaches::remove_large_span(StreamCache& c, std::size_t first, std::size_t slots) noexcept {
  erase_large_span(c, first, slots, true);
}

void StreamCaches::remove_pages(StreamCache& c, std::size_t first, std::size_t slots) {
  std::size_t const before = c.pages.largest();
  c.pages.erase(first, slots);
  cached_pages_ -= slots;
  index_largest(c, before);
}

StreamCache* StreamCaches::other_with_pages(const StreamCache& not_this, std::size_t slots, bool large_layout) const {
  auto const usable = [&](std::uint64_t id) { return id != not_this.id && order_->can_mark(by_id_.at(id)->stream); };
  if (large_layout) {
    for (auto it = large_spans_.lower_bound({slots, 0}); it != large_spans_.end(); ++it) {
      if (usable(it->second)) return by_id_.at(it->second).get();
    }
  } else {
    for (auto it = by_largest_.lower_bound({slots, 0}); it != by_largest_.end(); ++it) {
      if (usable(it->second)) return by_id_.at(it->second).get();
    }
  }
  return nullptr;
}

std::optional<std::pair<std::size_t, std::size_t>> StreamCaches::pop_extent(StreamCache& c, std::size_t max_slots) {
  if (c.pages.empty() || max_slots == 0) return std::nullopt;
  auto const [first, count] = *c.pages.extents().begin();
  std::size_t const n = std::min(count, max_slots);
  std::size_t const before = c.pages.largest();
  c.pages.erase(first, n);
  cached_pages_ -= n;
  index_largest(c, before);
  return std::pair{first, n};
}

std::optional<std::pair<std::size_t, std::size_t>> StreamCaches::pop_large_span(StreamCache& c) {
  if (c.large_spans.empty()) return std::nullopt;
  auto const it = c.large_spans.begin();  // the smallest: its small pages are the most use
  auto const [slots, first] = *it;
  erase_large_span(c, first, slots, true);
  return std::pair{first, slots};
}

std::size_t StreamCaches::largest_extent() const noexcept {
  return by_largest_.empty() ? 0 : by_largest_.rbegin()->first;
}

std::size_t StreamCaches::cached_span_slots() const noexcept {
  std::size_t slots = 0;
  for (auto const& [id, cache] : by_id_) {
    for (auto const& [span_slots, first] : cache->large_spans) slots += span_slots;
  }
  return slots;
}

std::size_t StreamCaches::lent_slots() const noexcept {
  std::size_t slots = 0;
  for (auto const& [id, cache] : by_id_) slots += cache->lent.pages();
  return slots;
}

void StreamCaches::put_block(StreamCache& c, std::size_t k, Address block) {
  prepare_blocks(c);
  c.free_blocks[k].push_back(block);  // amortized O(1): the list grows geometrically
  if (c.in_class_index[k] == 0) index_blocks(c, k);  // no index lookup when it is there already
}

std::optional<Address> StreamCaches::take_block(StreamCache& c, std::size_t k) {
  if (c.free_blocks.empty() || c.free_blocks[k].empty()) return std::nullopt;
  auto& blocks = c.free_blocks[k];
  Address const block = blocks.back();
  blocks.pop_back();
  // The class's index entry stays when the list runs empty (other_with_blocks() drops it when it
  // meets it): a stream that frees and reuses one block at a time then costs no index node per
  // pair (an insert and an erase were half of a cached pair's time).
  return block;
}

StreamCache* StreamCaches::other_with_blocks(const StreamCache& not_this, std::size_t k) {
  auto& index = by_class_[k];
  for (auto it = index.begin(); it != index.end();) {
    StreamCache* const c = by_id_.at(*it).get();
    if (c->free_blocks.empty() || c->free_blocks[k].empty()) {
      if (!c->in_class_index.empty()) c->in_class_index[k] = 0;
      it = index.erase(it);  // a stale entry: each is dropped once, so this stays amortized O(log n)
    } else if (c->id != not_this.id && order_->can_mark(c->stream)) {
      return c;
    } else {
      ++it;
    }
  }
  return nullptr;
}

void StreamCaches::move_blocks(StreamCache& from, StreamCache& to, std::size_t k) {
  if (from.free_blocks.empty()) return;
  prepare_blocks(to);
  auto& source = from.free_blocks[k];
  auto& target = to.free_blocks[k];
  if (target.empty()) {
    target.swap(source);
  } else {
    target.insert(target.end(), source.begin(), source.end());
    source.clear();
  }
  index_blocks(from, k);
  index_blocks(to, k);
}

void StreamCaches::hand_on(StreamCache& from, StreamCache& to) {
  if (from.free_blocks.empty()) return;
  prepare_blocks(to);
  for (std::size_t k = 0; k < classes_; ++k) {
    move_blocks(from, to, k);
    auto& fresh = to.fresh_slabs[k];
    fresh.insert(fresh.end(), from.fresh_slabs[k].begin(), from.fresh_slabs[k].end());
    from.fresh_slabs[k].clear();
  }
}

void StreamCaches::forget_slabs(const std::vector<std::pair<std::size_t, std::size_t>>& slots_and_classes,
                                Address base, std::size_t page) {
  if (slots_and_classes.empty()) return;
  std::unordered_set<std::size_t> slots;
  std::vector<bool> touched(classes_, false);
  for (auto const& [slot, k] : slots_and_classes) {
    slots.insert(slot);
    touched[k] = true;
  }
  for (auto& [id, c] : by_id_) {
    if (c->free_blocks.empty()) continue;
    for (std::size_t k = 0; k < classes_; ++k) {
      if (!touched[k]) continue;
      std::erase_if(c->free_blocks[k], [&](Address a) { return slots.contains((a - base) / page); });
      std::erase_if(c->fresh_slabs[k], [&](std::size_t slot) { return slots.contains(slot); });
      index_blocks(*c, k);
    }
  }
}

}  // namespace cuvmm::detail
