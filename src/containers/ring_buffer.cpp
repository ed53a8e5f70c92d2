// RingStorage: one chunk mapped twice, back to back, in a range of twice its size.
//
// Owns: the range, the chunk and its two mappings. Built in member order (range, chunk, first
// mapping, second mapping, one access call over both), so when any step throws, what was built
// is undone by the members' destructors in reverse order: nothing leaks, nothing is left mapped.
// Invariant: range_.size() == 2 * capacity_ and byte i of the second copy is byte i of the first.
// Never does: track positions (the caller's job) or wait for device work.
#include <cuvmm/ring_buffer.hpp>

#include <cstdint>
#include <numeric>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm {
namespace {

ChunkProperties ring_chunk_properties(const RingOptions& options) {
  return ChunkProperties{.device = options.device, .shareable = options.shareable, .compression = false};
}

/// Bytes of one copy: at least `min_bytes`, a multiple of both the granularity and the element size.
std::size_t ring_bytes(Backend& backend, std::size_t min_bytes, std::size_t element_bytes, const RingOptions& options) {
  if (min_bytes == 0 || element_bytes == 0) {
    throw_invalid_argument("RingStorage", "the capacity (" + std::to_string(min_bytes) + " bytes) and the element size (" +
                                              std::to_string(element_bytes) + " bytes) must be positive");
  }
  std::size_t const granularity = backend.granularity(ring_chunk_properties(options));
  // The least common multiple of the two, so granules and elements both fit a copy whole.
  std::size_t const factor = element_bytes / std::gcd(granularity, element_bytes);
  std::size_t const unit = granularity <= SIZE_MAX / factor ? granularity * factor : 0;
  std::size_t const bytes = unit == 0 ? 0 : round_up(min_bytes, unit);
  if (bytes == 0 || bytes > SIZE_MAX / 2) throw CapacityExceeded(min_bytes, SIZE_MAX / 2);
  return bytes;
}

std::vector<AccessGrant> ring_access(const RingOptions& options) {
  if (!options.access.empty()) return options.access;
  return {AccessGrant{options.device, Access::read_write}};
}

}  // namespace

RingStorage::RingStorage(Backend& backend, std::size_t min_bytes, std::size_t element_bytes, RingOptions options)
    : options_(std::move(options)),
      capacity_(ring_bytes(backend, min_bytes, element_bytes, options_)),
      range_(backend, 2 * capacity_),
      chunk_(backend, capacity_, ring_chunk_properties(options_)) {
  if (options_.access.empty()) options_.access = ring_access(options_);
  mappings_[0] = Mapping(range_, 0, chunk_);
  mappings_[1] = Mapping(range_, capacity_, chunk_);
  set_access(mappings_, options_.access);  // one call: the copies lie side by side
}

RingStorage::RingStorage(RingStorage&& other) noexcept
    : options_(std::move(other.options_)),
      capacity_(std::exchange(other.capacity_, 0)),
      range_(std::move(other.range_)),
      chunk_(std::move(other.chunk_)),
      mappings_(std::move(other.mappings_)) {}

RingStorage& RingStorage::operator=(RingStorage&& other) noexcept {
  if (this != &other) {
    for (Mapping& mapping : mappings_) mapping.reset();  // ours go in the destructor's order
    chunk_.reset();
    range_ = std::move(other.range_);
    chunk_ = std::move(other.chunk_);
    mappings_ = std::move(other.mappings_);
    options_ = std::move(other.options_);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

}  // namespace cuvmm
