// Slabs: size classes and per-block bookkeeping of slab pages (see slabs.hpp).
//
// Owns: the class table and the slab records. Invariants: as in slabs.hpp. Never does: touch
// memory, the backend, or a stream; every operation is O(1) except remove_empty (O(slabs), run only
// when the Arena reclaims everything) and class_by_search (bounded by the number of classes).
#include "allocators/slabs.hpp"

#include <algorithm>
#include <string>

#include <cuvmm/error.hpp>

namespace cuvmm::detail {

void throw_wrong_free_size(std::uintptr_t address, std::size_t bytes, std::size_t allocated,
                           cuvmm::source_location where) {
  throw_invalid_argument("Arena::deallocate",
                         std::to_string(bytes) + " bytes is not the size that was allocated at " +
                             std::to_string(address) + " (" + std::to_string(allocated) + ")",
                         where);
}

Slabs::Slabs(std::size_t page) : page_(page) {
  std::size_t const half = page / 2;
  small_max_ = half >= min_block_bytes ? std::min(half, max_block_bytes) : 0;
  for (std::size_t size = min_block_bytes; size < 1024 && size <= small_max_; size += min_block_bytes) {
    classes_.push_back(size);
  }
  for (std::size_t base = 1024; base <= small_max_; base *= 2) {
    for (std::size_t quarter = 0; quarter < 4; ++quarter) {
      std::size_t const size = base + quarter * base / 4;
      if (size <= small_max_) classes_.push_back(size);
    }
  }
}

std::optional<std::size_t> Slabs::class_by_search(std::size_t bytes, std::size_t alignment) const noexcept {
  if (alignment > small_max_ || page_ % alignment != 0) return std::nullopt;
  auto it = std::lower_bound(classes_.begin(), classes_.end(), std::max(bytes, alignment));
  while (it != classes_.end() && *it % alignment != 0) ++it;
  if (it == classes_.end()) return std::nullopt;
  return static_cast<std::size_t>(it - classes_.begin());
}

void Slabs::open(std::size_t slot, std::size_t size_class) {
  std::size_t const block = classes_[size_class];
  slabs_.emplace(slot, Slab{size_class, block, 0, 0, std::vector<std::uint32_t>(page_ / block, 0)});
}

Slabs::Fresh Slabs::hand_out_fresh(std::size_t slot, std::size_t bytes) noexcept {
  Slab& slab = slabs_.find(slot)->second;
  std::size_t const block = slab.handed_out++;
  slab.requested[block] = static_cast<std::uint32_t>(bytes);
  count_hand_out(slab);
  return {block * slab.block_bytes, slab.handed_out == slab.requested.size()};
}

void Slabs::hand_out(std::size_t slot, std::size_t offset, std::size_t bytes) noexcept {
  Slab& slab = slabs_.find(slot)->second;
  slab.requested[offset / slab.block_bytes] = static_cast<std::uint32_t>(bytes);
  count_hand_out(slab);
}

void Slabs::count_hand_out(Slab& slab) noexcept {
  if (slab.in_use++ == 0) ++slabs_in_use_;
  live_block_bytes_ += slab.block_bytes;
}

void Slabs::count_free(Slab& slab) noexcept {
  if (--slab.in_use == 0) --slabs_in_use_;
  live_block_bytes_ -= slab.block_bytes;
}

std::size_t Slabs::check_free(std::size_t slot, std::size_t offset, std::size_t bytes, std::uintptr_t address) const {
  return live_block(slot, offset, bytes, address).first->size_class;
}

std::pair<const Slabs::Slab*, std::size_t> Slabs::live_block(std::size_t slot, std::size_t offset, std::size_t bytes,
                                                             std::uintptr_t address) const {
  auto const it = slabs_.find(slot);
  if (it == slabs_.end()) {
    throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(address) + " was not allocated by this arena");
  }
  Slab const& slab = it->second;
  std::size_t const block = offset / slab.block_bytes;
  if (offset % slab.block_bytes != 0 || block >= slab.handed_out || slab.requested[block] == 0) {
    throw_invalid_argument("Arena::deallocate", "pointer " + std::to_string(address) +
                                                    " is not a live allocation of this arena (freed twice?)");
  }
  if (bytes != slab.requested[block]) {
    throw_wrong_free_size(address, bytes, slab.requested[block]);
  }
  return {&slab, block};
}

void Slabs::mark_free(std::size_t slot, std::size_t offset) noexcept {
  Slab& slab = slabs_.find(slot)->second;
  slab.requested[offset / slab.block_bytes] = 0;
  count_free(slab);
}

std::size_t Slabs::recorded_bytes(std::size_t slot, std::size_t offset) const noexcept {
  Slab const& slab = slabs_.find(slot)->second;
  return slab.requested[offset / slab.block_bytes];
}

void Slabs::rerecord(std::size_t slot, std::size_t offset, std::size_t bytes) noexcept {
  Slab& slab = slabs_.find(slot)->second;
  slab.requested[offset / slab.block_bytes] = static_cast<std::uint32_t>(bytes);
}

std::vector<std::pair<std::size_t, std::size_t>> Slabs::remove_empty() {
  std::vector<std::pair<std::size_t, std::size_t>> removed;
  for (auto const& [slot, slab] : slabs_) {
    if (slab.in_use == 0) removed.emplace_back(slot, slab.size_class);
  }
  std::sort(removed.begin(), removed.end());  // unmapped in address order, whatever the hash order
  for (auto const& [slot, size_class] : removed) slabs_.erase(slot);
  return removed;
}

}  // namespace cuvmm::detail
