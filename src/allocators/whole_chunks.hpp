// whole_chunks.hpp: the Arena's idle whole chunks (ArenaOptions::whole_chunk_bytes), by size.
//
// Owns: the index of the whole chunks that were freed and stay mapped where they are, each with
//   the stream that freed it, by size (slots), so that a request finds the smallest that fits.
//   A whole chunk is one request's own page (PagePool::map_whole): it is reused only as it lies,
//   by a request of its size or a little less, so it never moves and a reuse calls no driver.
// Invariants: a chunk is idle here or live in the Arena's books, never both; idle_slots() is the
//   sum of the sizes indexed.
// Never does: call the driver, wait for a stream or decide when to give a chunk back (the Arena
//   makes a requester wait for the freeing stream's event before it takes another stream's chunk,
//   and waits on the host before it releases one). Not thread-safe: the Arena's lock.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <vector>

#include "allocators/stream_caches.hpp"

namespace cuvmm::detail {

class WholeChunks {
  struct Entry {
    std::size_t first;
    StreamCache* freed_on;
  };

 public:
  struct Idle {
    std::size_t first = 0;  // first slot
    std::size_t slots = 0;
    StreamCache* freed_on = nullptr;
  };

  /// Most idle chunks of a fitting size a request looks at for one its own stream freed, before it
  /// takes the first that another stream freed: so that a lookup costs the same with many streams.
  static constexpr int own_searched = 16;

  /// An idle chunk found, not yet taken: stays valid until the index changes.
  class Found {
   public:
    [[nodiscard]] StreamCache& freed_on() const noexcept { return *it_->second.freed_on; }

   private:
    friend class WholeChunks;
    explicit Found(std::multimap<std::size_t, Entry>::iterator it) noexcept : it_(it) {}
    std::multimap<std::size_t, Entry>::iterator it_;
  };

  /// The smallest idle chunk of `slots` to `most` slots: the first that `requester` freed among
  /// the own_searched smallest, else the smallest whose freeing stream `usable` accepts.
  template <class Usable>
  std::optional<Found> find(std::size_t slots, std::size_t most, const StreamCache& requester, Usable&& usable) {
    auto other = by_size_.end();
    int looked = 0;
    for (auto it = by_size_.lower_bound(slots); it != by_size_.end() && it->first <= most; ++it) {
      if (it->second.freed_on == &requester) return Found(it);
      if (other == by_size_.end() && usable(*it->second.freed_on)) other = it;
      if (++looked == own_searched && other != by_size_.end()) break;
    }
    if (other == by_size_.end()) return std::nullopt;
    return Found(other);
  }
  /// Takes the chunk `found` out of the index.
  Idle take(Found found) noexcept { return take(found.it_); }

  /// Keeps the chunk at `first` of `slots` slots idle, freed on `freed_on`. Throws only
  /// std::bad_alloc, and then nothing changed.
  void put(std::size_t first, std::size_t slots, StreamCache& freed_on) {
    by_size_.emplace(slots, Entry{first, &freed_on});
    idle_slots_ += slots;
  }

  /// The idle chunk to give back for a request that lacks `slots`: the smallest of at least that
  /// size, else the largest (more follow if it is not enough), among those whose freeing stream
  /// `usable` accepts; nothing when there is none.
  template <class Usable>
  std::optional<Found> find_to_release(std::size_t slots, Usable&& usable) {
    for (auto it = by_size_.lower_bound(slots); it != by_size_.end(); ++it) {
      if (usable(*it->second.freed_on)) return Found(it);
    }
    for (auto it = by_size_.rbegin(); it != by_size_.rend(); ++it) {
      if (usable(*it->second.freed_on)) return Found(std::prev(it.base()));
    }
    return std::nullopt;
  }

  /// Takes every idle chunk whose freeing stream `usable` accepts.
  template <class Usable>
  std::vector<Idle> take_all(Usable&& usable) {
    std::vector<Idle> taken;
    taken.reserve(by_size_.size());  // first: a chunk taken out is never lost
    for (auto it = by_size_.begin(); it != by_size_.end();) {
      auto const here = it++;
      if (usable(*here->second.freed_on)) taken.push_back(take(here));
    }
    return taken;
  }

  /// The chunks `gone` freed count as freed on `heir` from now on (`gone`'s work is done).
  void hand_on(const StreamCache& gone, StreamCache& heir) noexcept {
    for (auto& [slots, entry] : by_size_) {
      if (entry.freed_on == &gone) entry.freed_on = &heir;
    }
  }

  [[nodiscard]] std::size_t idle_slots() const noexcept { return idle_slots_; }

 private:
  Idle take(std::multimap<std::size_t, Entry>::iterator it) noexcept {
    Idle const idle{it->second.first, it->first, it->second.freed_on};
    idle_slots_ -= it->first;
    by_size_.erase(it);
    return idle;
  }

  std::multimap<std::size_t, Entry> by_size_;  // slots → the chunk
  std::size_t idle_slots_ = 0;
};

}  // namespace cuvmm::detail
