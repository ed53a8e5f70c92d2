// support/announcement.hpp: the observer side of a transaction that maps memory.
//
// An Announcement tells growth observers (growth_observer.hpp) of a set of new ranges, observer by
// observer and range by range, and withdraws what it told, in reverse order, unless committed: on
// destruction, or earlier with withdraw() where the caller must withdraw before it unmaps. A
// growth step (GrowableStorage::reserve) and the Arena's page mapping (PagePool::Span::map)
// declare one after their mappings, so that an observer that throws, or a later failure, leaves
// every observer knowing what it knew before, and nothing it was told of unmapped unannounced.
//
// Below it, the list of attached observers that a buffer and the Arena's page pool both keep:
// attaching (told of what is mapped now, all or nothing), detaching, and withdrawing one range from
// every observer, last attached first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include <cuvmm/error.hpp>
#include <cuvmm/growth_observer.hpp>

namespace cuvmm::detail {

class Announcement {
 public:
  explicit Announcement(std::span<const std::shared_ptr<GrowthObserver>> observers) noexcept
      : observers_(observers) {}
  Announcement(const Announcement&) = delete;
  Announcement& operator=(const Announcement&) = delete;
  ~Announcement() { withdraw(); }
  /// Tells every observer of every range (once: an Announcement announces one set).
  void tell(std::span<const BackedRange> ranges) {
    ranges_ = ranges;
    for (const std::shared_ptr<GrowthObserver>& observer : observers_) {
      for (const BackedRange& range : ranges_) {
        observer->on_mapped(range);
        ++told_;
      }
    }
  }
  /// Withdraws what was told, last first (nothing once committed).
  void withdraw() noexcept {
    while (told_ > 0) {
      --told_;
      observers_[told_ / ranges_.size()]->on_unmapping(ranges_[told_ % ranges_.size()]);
    }
  }
  /// The ranges stay told: nothing is withdrawn.
  void commit() noexcept { told_ = 0; }

 private:
  std::span<const std::shared_ptr<GrowthObserver>> observers_;
  std::span<const BackedRange> ranges_;
  std::size_t told_ = 0;  // (observer, range) pairs told, observer-major
};

using Observers = std::vector<std::shared_ptr<GrowthObserver>>;

/// Attaches `observer` to `observers` after telling it of `mapped_now` (in that order). Not null and
/// not attached already, else cuvmm::Error from `call`; if it throws, what it was told is withdrawn
/// and it is not attached.
inline void attach_observer(Observers& observers, std::shared_ptr<GrowthObserver> observer,
                            std::span<const BackedRange> mapped_now, std::string_view call) {
  if (!observer) throw_invalid_argument(call, "the observer is null");
  if (std::find(observers.begin(), observers.end(), observer) != observers.end()) {
    throw_invalid_argument(call, "the observer is attached already");
  }
  observers.reserve(observers.size() + 1);  // may throw: nothing told yet
  std::shared_ptr<GrowthObserver> const one[] = {observer};
  Announcement announcement(one);
  if (!mapped_now.empty()) announcement.tell(mapped_now);
  announcement.commit();
  observers.push_back(std::move(observer));  // noexcept: room was made
}

/// Detaches `observer` and returns it (null: it was not attached), for the caller to withdraw from
/// it what is mapped.
inline std::shared_ptr<GrowthObserver> detach_observer(Observers& observers, const GrowthObserver& observer) noexcept {
  auto const found = std::find_if(observers.begin(), observers.end(), [&](const auto& o) { return o.get() == &observer; });
  if (found == observers.end()) return nullptr;
  std::shared_ptr<GrowthObserver> detached = std::move(*found);
  observers.erase(found);
  return detached;
}

/// Tells every observer, last attached first, that `range` is about to be unmapped.
inline void withdraw_from_all(const Observers& observers, const BackedRange& range) noexcept {
  for (auto observer = observers.rbegin(); observer != observers.rend(); ++observer) (*observer)->on_unmapping(range);
}

}  // namespace cuvmm::detail
