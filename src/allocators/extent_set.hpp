// extent_set.hpp: a set of free extents of page slots, coalesced, handed out best fit.
//
// The Arena keeps one for address space with nothing mapped, and one per stream for memory that
// is mapped and free ("cached"). An extent is [first, first + count) in units of pages. Invariants:
//  - extents never overlap and never touch: inserting an extent merges it with its neighbours;
//  - by_first_ and by_size_ hold the same extents; pages_ is the sum of their counts.
// take() returns the smallest extent that fits (the lowest address among equals) and keeps the
// rest, so large extents survive for large requests; take_spaced() places a run at the end of the
// largest extent with room behind it, for runs that may grow in place. Not thread-safe: the
// Arena's lock covers it.
#pragma once

#include <cassert>
#include <cstddef>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace cuvmm::detail {

class ExtentSet {
 public:
  struct Extent {
    std::size_t first = 0;
    std::size_t count = 0;
  };

  [[nodiscard]] bool empty() const noexcept { return by_first_.empty(); }
  [[nodiscard]] std::size_t pages() const noexcept { return pages_; }
  [[nodiscard]] std::size_t extent_count() const noexcept { return by_first_.size(); }
  [[nodiscard]] std::size_t largest() const noexcept { return by_size_.empty() ? 0 : by_size_.rbegin()->first; }
  /// The extents in address order.
  [[nodiscard]] const std::map<std::size_t, std::size_t>& extents() const noexcept { return by_first_; }

  /// Pages of the extent that starts at `first` (0 when none starts there).
  [[nodiscard]] std::size_t count_from(std::size_t first) const noexcept {
    auto const it = by_first_.find(first);
    return it == by_first_.end() ? 0 : it->second;
  }
  /// Pages of the extent that ends right before `end` (0 when none ends there).
  [[nodiscard]] std::size_t count_before(std::size_t end) const noexcept {
    auto it = by_first_.lower_bound(end);
    if (it == by_first_.begin()) return 0;
    --it;
    return it->first + it->second == end ? it->second : 0;
  }
  /// Whether [first, first + count) lies inside one extent of the set.
  [[nodiscard]] bool covers(std::size_t first, std::size_t count) const noexcept {
    auto it = by_first_.upper_bound(first);
    if (it == by_first_.begin()) return false;
    --it;
    return it->first + it->second >= first + count;
  }
  /// The largest extent, then the next largest, ... (at most `tries` of them) for which
  /// `fits(first, count)` holds; nothing when none of them does. O(tries + log n).
  template <class Fits>
  [[nodiscard]] std::optional<Extent> largest_where(int tries, Fits&& fits) const {
    for (auto it = by_size_.rbegin(); it != by_size_.rend() && tries > 0; ++it, --tries) {
      if (fits(it->second, it->first)) return Extent{it->second, it->first};
    }
    return std::nullopt;
  }

  /// Adds [first, first + count), which must overlap nothing in the set; merges with neighbours.
  void insert(std::size_t first, std::size_t count) {
    assert(count > 0);
    auto const next = by_first_.lower_bound(first);
    assert(next == by_first_.end() || next->first >= first + count);
    if (next != by_first_.end() && next->first == first + count) {
      Extent const after{next->first, next->second};
      remove_whole(after);
      count += after.count;
    }
    auto const after_first = by_first_.lower_bound(first);
    if (after_first != by_first_.begin()) {
      auto const previous = std::prev(after_first);
      assert(previous->first + previous->second <= first);
      if (previous->first + previous->second == first) {
        Extent const before{previous->first, previous->second};
        remove_whole(before);
        first = before.first;
        count += before.count;
      }
    }
    add_whole({first, count});
  }

  /// Removes the best-fitting extent of at least `count` pages, keeps its tail, and returns the
  /// first page of the `count` pages taken; nothing when no extent is large enough.
  std::optional<std::size_t> take(std::size_t count) {
    auto const fit = by_size_.lower_bound({count, 0});
    if (fit == by_size_.end()) return std::nullopt;
    Extent const found{fit->second, fit->first};
    remove_whole(found);
    if (found.count > count) add_whole({found.first + count, found.count - count});
    return found.first;
  }

  /// As take(), for a run whose first page is a multiple of `alignment` (> 0): among the few
  /// best-fitting extents one that holds such a run, else the smallest extent that surely does
  /// (count + alignment - 1 pages); its pages before and after the run stay in the set. O(log n).
  std::optional<std::size_t> take_aligned(std::size_t count, std::size_t alignment) {
    constexpr int best_fits_tried = 8;
    auto const aligned_in = [&](std::size_t first, std::size_t pages) -> std::optional<std::size_t> {
      std::size_t const start = (first + alignment - 1) / alignment * alignment;
      if (start + count <= first + pages) return start;
      return std::nullopt;
    };
    auto fit = by_size_.lower_bound({count, 0});
    for (int tried = 0; fit != by_size_.end() && tried < best_fits_tried; ++fit, ++tried) {
      if (auto const start = aligned_in(fit->second, fit->first)) {
        erase(*start, count);
        return start;
      }
    }
    fit = by_size_.lower_bound({count + alignment - 1, 0});
    if (fit == by_size_.end()) return std::nullopt;
    std::size_t const start = *aligned_in(fit->second, fit->first);
    erase(start, count);
    return start;
  }

  /// Spaced placement: the run of `count` pages at the end of the largest extent that leaves
  /// `room_behind` pages free behind it (for the run to grow into), its first page a multiple of
  /// `alignment` (> 0), provided at least `kept` pages of the extent stay free before it (so that
  /// the largest extent never falls below `kept` this way); nothing otherwise. O(log n).
  std::optional<std::size_t> take_spaced(std::size_t count, std::size_t alignment, std::size_t room_behind,
                                         std::size_t kept) {
    if (by_size_.empty()) return std::nullopt;
    auto const [pages, first] = *by_size_.rbegin();
    if (pages < kept + count + room_behind) return std::nullopt;
    std::size_t const start = (first + pages - room_behind - count) / alignment * alignment;
    if (start < first + kept) return std::nullopt;
    erase(start, count);
    return start;
  }

  /// Removes [first, first + count), which must lie inside one extent of the set.
  void erase(std::size_t first, std::size_t count) {
    auto it = by_first_.upper_bound(first);
    assert(it != by_first_.begin());
    --it;
    Extent const whole{it->first, it->second};
    assert(whole.first <= first && first + count <= whole.first + whole.count);
    remove_whole(whole);
    if (whole.first < first) add_whole({whole.first, first - whole.first});
    if (first + count < whole.first + whole.count) add_whole({first + count, whole.first + whole.count - first - count});
  }

  void clear() noexcept {
    by_first_.clear();
    by_size_.clear();
    pages_ = 0;
  }

 private:
  void remove_whole(Extent e) {
    by_size_.erase({e.count, e.first});
    by_first_.erase(e.first);
    pages_ -= e.count;
  }
  void add_whole(Extent e) {
    by_first_.emplace(e.first, e.count);
    by_size_.emplace(e.count, e.first);
    pages_ += e.count;
  }

  std::map<std::size_t, std::size_t> by_first_;            // first page → page count
  std::set<std::pair<std::size_t, std::size_t>> by_size_;  // (page count, first page)
  std::size_t pages_ = 0;                                  // pages in all extents
};

}  // namespace cuvmm::detail
