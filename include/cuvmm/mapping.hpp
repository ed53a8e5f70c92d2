// cuvmm/mapping.hpp: one physical chunk mapped at one place in an address range.
//
// A Mapping unmaps when it dies. It never outlives its AddressRange: the range counts live mappings
// and asserts (debug builds) that none is left when it is freed. Access is per device, read-write or
// read-only, and is recorded on the mapping. Granting access is the expensive driver call, so
// set_access(span of mappings) grants a whole run of mappings side by side with one call per run.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/physical_chunk.hpp>

namespace cuvmm {

class Mapping {
 public:
  Mapping() noexcept = default;
  /// Maps all of `chunk` at `range.base() + offset` (a multiple of the granularity, inside the
  /// range, not mapped yet), then grants `grants` (none: the span is mapped but not yet accessible).
  Mapping(AddressRange& range, std::size_t offset, const PhysicalChunk& chunk,
          std::span<const AccessGrant> grants = {});
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  ~Mapping();

  [[nodiscard]] Address address() const noexcept { return address_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] Backend* backend() const noexcept { return backend_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  explicit operator bool() const noexcept { return !empty(); }
  /// The access granted so far, one entry per device.
  [[nodiscard]] std::span<const AccessGrant> access() const noexcept { return access_; }
  /// The access of `device` (Access::none if never granted).
  [[nodiscard]] Access access(int device) const noexcept;

  /// Grants (or changes) access for the devices named in `grants`.
  void set_access(std::span<const AccessGrant> grants);

  /// Unmaps now.
  void reset() noexcept;

 private:
  friend void set_access(std::span<Mapping> mappings, std::span<const AccessGrant> grants);
  void record_access(std::span<const AccessGrant> grants);

  Backend* backend_ = nullptr;
  Address address_ = 0;
  std::size_t size_ = 0;
  std::vector<AccessGrant> access_;
  std::atomic<std::size_t>* range_live_mappings_ = nullptr;  // the owning range's counter
};

/// Grants `grants` on every mapping in `mappings`, with one backend call per run of mappings that
/// lie side by side in the address space (in the order given).
void set_access(std::span<Mapping> mappings, std::span<const AccessGrant> grants);

}  // namespace cuvmm
