// extent_set.hpp: a set of free extents of page slots, coalesced, handed out best fit.
//
// The Arena keeps one for address space with nothing mapped, and one per stream for memory that
// is mapped and free ("cached"). An extent is [first, first + count) in units of pages. Invariants:
//  - extents never overlap and never touch: inserting an extent merges it with its neighbours;
//  - by_first_ and by_size_ hold the same extents; pages_ is the sum of their counts;
//  - every change either completes or, when memory runs out (std::bad_alloc), changes nothing: an
//    extent's tree nodes are reused for what replaces it (node handles), and the nodes a change
//    needs beyond those are allocated before anything is changed.
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
    std::optional<Extent> after;
    std::optional<Extent> before;
    if (next != by_first_.end() && next->first == first + count) after = Extent{next->first, next->second};
    if (next != by_first_.begin()) {
      auto const previous = std::prev(next);
      assert(previous->first + previous->second <= first);
      if (previous->first + previous->second == first) before = Extent{previous->first, previous->second};
    }
    if (!after && !before) return put_whole({first, count}, new_nodes());  // may throw: nothing changed yet
    Nodes nodes = after ? remove_whole(*after) : remove_whole(*before);
    if (after) count += after->count;
    if (after && before) (void)remove_whole(*before);
    if (before) {
      first = before->first;
      count += before->count;
    }
    put_whole({first, count}, std::move(nodes));
  }

  /// Removes the best-fitting extent of at least `count` pages, keeps its tail, and returns the
  /// first page of the `count` pages taken; nothing when no extent is large enough.
  std::optional<std::size_t> take(std::size_t count) {
    auto const fit = by_size_.lower_bound({count, 0});
    if (fit == by_size_.end()) return std::nullopt;
    Extent const found{fit->second, fit->first};
    Nodes nodes = remove_whole(found);
    if (found.count > count) put_whole({found.first + count, found.count - count}, std::move(nodes));
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
    bool const keeps_before = whole.first < first;
    bool const keeps_after = first + count < whole.first + whole.count;
    Nodes spare = keeps_before && keeps_after ? new_nodes() : Nodes{};  // may throw: nothing changed yet
    Nodes nodes = remove_whole(whole);
    if (keeps_before) put_whole({whole.first, first - whole.first}, std::move(nodes));
    if (keeps_after) {
      put_whole({first + count, whole.first + whole.count - first - count}, keeps_before ? std::move(spare) : std::move(nodes));
    }
  }

  void clear() noexcept {
    by_first_.clear();
    by_size_.clear();
    pages_ = 0;
  }

 private:
  /// The tree nodes of one extent, out of the trees.
  struct Nodes {
    std::map<std::size_t, std::size_t>::node_type by_first;
    std::set<std::pair<std::size_t, std::size_t>>::node_type by_size;
  };
  /// Nodes for one more extent. Throws only std::bad_alloc.
  static Nodes new_nodes() {
    std::map<std::size_t, std::size_t> first_tree{{0, 0}};
    std::set<std::pair<std::size_t, std::size_t>> size_tree{{0, 0}};
    return {first_tree.extract(first_tree.begin()), size_tree.extract(size_tree.begin())};
  }
  /// Takes extent `e` (which is in the set) out of it; returns its nodes.
  Nodes remove_whole(Extent e) noexcept {
    pages_ -= e.count;
    return {by_first_.extract(e.first), by_size_.extract({e.count, e.first})};
  }
  /// Puts extent `e` in the set in `nodes`.
  void put_whole(Extent e, Nodes nodes) noexcept {
    nodes.by_first.key() = e.first;
    nodes.by_first.mapped() = e.count;
    nodes.by_size.value() = {e.count, e.first};
    by_first_.insert(std::move(nodes.by_first));
    by_size_.insert(std::move(nodes.by_size));
    pages_ += e.count;
  }

  std::map<std::size_t, std::size_t> by_first_;            // first page → page count
  std::set<std::pair<std::size_t, std::size_t>> by_size_;  // (page count, first page)
  std::size_t pages_ = 0;                                  // pages in all extents
};

}  // namespace cuvmm::detail
