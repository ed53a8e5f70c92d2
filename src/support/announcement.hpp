// support/announcement.hpp: the observer side of a transaction that maps memory.
//
// An Announcement tells growth observers (growth_observer.hpp) of a set of new ranges, observer by
// observer and range by range, and withdraws what it told, in reverse order, unless committed: on
// destruction, or earlier with withdraw() where the caller must withdraw before it unmaps. A
// growth step (GrowableStorage::reserve) and the Arena's page mapping (PagePool::Span::map)
// declare one after their mappings, so that an observer that throws, or a later failure, leaves
// every observer knowing what it knew before, and nothing it was told of unmapped unannounced.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

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

}  // namespace cuvmm::detail
