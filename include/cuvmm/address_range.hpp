// cuvmm/address_range.hpp: sole owner of one reserved address range.
//
// Reserving takes address space only; physical chunks are mapped into it with cuvmm::Mapping.
// The one hard ordering rule of VMM (every mapping is unmapped before its range is freed) is kept by
// ownership: composite objects declare their AddressRange before their Mappings, so the mappings are
// destroyed first. Each range counts its live mappings; destroying a range that still has some is a
// bug, caught by an assertion in debug builds.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include <cuvmm/backend.hpp>

namespace cuvmm {

class AddressRange {
 public:
  AddressRange() noexcept = default;
  /// Reserves `size` bytes (a positive multiple of the backend's granularity), aligned to
  /// `alignment` (0: the granularity). Throws cuvmm::Error on invalid sizes or when refused.
  AddressRange(Backend& backend, std::size_t size, std::size_t alignment = 0);
  AddressRange(const AddressRange&) = delete;
  AddressRange& operator=(const AddressRange&) = delete;
  AddressRange(AddressRange&& other) noexcept;
  AddressRange& operator=(AddressRange&& other) noexcept;
  ~AddressRange();

  [[nodiscard]] Address base() const noexcept { return base_; }
  [[nodiscard]] Address end() const noexcept { return base_ + size_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] Backend* backend() const noexcept { return backend_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  explicit operator bool() const noexcept { return !empty(); }
  /// Whether [base() + offset, + bytes) lies inside the range.
  [[nodiscard]] bool contains(std::size_t offset, std::size_t bytes) const noexcept {
    return offset <= size_ && bytes <= size_ - offset;
  }
  /// Mappings into this range that are still alive.
  [[nodiscard]] std::size_t live_mappings() const noexcept;

  /// Frees the range now (it must hold no live mappings).
  void reset() noexcept;

 private:
  friend class Mapping;
  Backend* backend_ = nullptr;
  Address base_ = 0;
  std::size_t size_ = 0;
  std::unique_ptr<std::atomic<std::size_t>> live_mappings_;  // stays put when the range moves
};

}  // namespace cuvmm
