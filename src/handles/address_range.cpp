// AddressRange: reserve on construction, free on destruction.
//
// Owns: one reservation from one backend. Invariant: while a Mapping into it lives, the range is
// not freed (the live-mapping counter sits on the heap so it stays put when the range moves;
// mappings point at it). Never rounds sizes: callers round with cuvmm::round_up first.
#include <cuvmm/address_range.hpp>

#include <cassert>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm {

AddressRange::AddressRange(Backend& backend, std::size_t size, std::size_t alignment) {
  std::size_t const granularity = backend.granularity(ChunkProperties{});
  if (size == 0 || size % granularity != 0) {
    throw_invalid_argument("AddressRange", "size " + std::to_string(size) +
                                               " is not a positive multiple of the granularity " +
                                               std::to_string(granularity));
  }
  auto counter = std::make_unique<std::atomic<std::size_t>>(0);
  Address const base = backend.reserve(size, alignment);
  backend_ = &backend;
  base_ = base;
  size_ = size;
  live_mappings_ = std::move(counter);
}

AddressRange::AddressRange(AddressRange&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      base_(std::exchange(other.base_, 0)),
      size_(std::exchange(other.size_, 0)),
      live_mappings_(std::move(other.live_mappings_)) {}

AddressRange& AddressRange::operator=(AddressRange&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = std::exchange(other.backend_, nullptr);
    base_ = std::exchange(other.base_, 0);
    size_ = std::exchange(other.size_, 0);
    live_mappings_ = std::move(other.live_mappings_);
  }
  return *this;
}

AddressRange::~AddressRange() { reset(); }

std::size_t AddressRange::live_mappings() const noexcept {
  return live_mappings_ ? live_mappings_->load(std::memory_order_relaxed) : 0;
}

void AddressRange::reset() noexcept {
  if (size_ == 0) return;
  // A live mapping here means a composite object declared its members in the wrong order.
  assert(live_mappings() == 0 && "an AddressRange was freed while mappings into it were alive");
  backend_->free_range(base_, size_);
  backend_ = nullptr;
  base_ = 0;
  size_ = 0;
  live_mappings_.reset();
}

}  // namespace cuvmm
