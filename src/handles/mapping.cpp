// Mapping: map on construction, unmap on destruction.
//
// Owns: one chunk mapped at one address (not the chunk itself: a chunk may be mapped many times,
// and CUDA keeps its memory alive while it is mapped). Records the access granted per device.
// The delegating constructor maps first; once it returns the object is fully constructed, so if
// granting access then throws, the destructor unmaps: no hand-written unwinding.
#include <cuvmm/mapping.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm {
namespace {

void check_mappable(const AddressRange& range, std::size_t offset, const PhysicalChunk& chunk) {
  if (range.empty()) throw_invalid_argument("Mapping", "the address range is empty");
  if (chunk.empty()) throw_invalid_argument("Mapping", "the physical chunk is empty");
  if (range.backend() != chunk.backend()) {
    throw_invalid_argument("Mapping", "the range and the chunk come from different backends");
  }
  if (!range.contains(offset, chunk.size())) {
    throw_invalid_argument("Mapping", "a chunk of " + std::to_string(chunk.size()) + " bytes at offset " +
                                          std::to_string(offset) + " does not fit a range of " +
                                          std::to_string(range.size()) + " bytes");
  }
}

}  // namespace

Mapping::Mapping(AddressRange& range, std::size_t offset, const PhysicalChunk& chunk,
                 std::span<const AccessGrant> grants)
    : Mapping() {
  check_mappable(range, offset, chunk);
  range.backend()->map(range.base() + offset, chunk.size(), chunk.handle());
  backend_ = range.backend();
  address_ = range.base() + offset;
  size_ = chunk.size();
  range_live_mappings_ = range.live_mappings_.get();
  range_live_mappings_->fetch_add(1, std::memory_order_relaxed);
  // From here on this object owns the mapping: if granting access throws, ~Mapping unmaps.
  if (!grants.empty()) set_access(grants);
}

Mapping::Mapping(Mapping&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      address_(std::exchange(other.address_, 0)),
      size_(std::exchange(other.size_, 0)),
      access_(std::move(other.access_)),
      range_live_mappings_(std::exchange(other.range_live_mappings_, nullptr)) {
  other.access_.clear();
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = std::exchange(other.backend_, nullptr);
    address_ = std::exchange(other.address_, 0);
    size_ = std::exchange(other.size_, 0);
    access_ = std::move(other.access_);
    other.access_.clear();
    range_live_mappings_ = std::exchange(other.range_live_mappings_, nullptr);
  }
  return *this;
}

Mapping::~Mapping() { reset(); }

Access Mapping::access(int device) const noexcept {
  auto const it = std::find_if(access_.begin(), access_.end(),
                               [device](const AccessGrant& g) { return g.device == device; });
  return it == access_.end() ? Access::none : it->access;
}

void Mapping::record_access(std::span<const AccessGrant> grants) {
  for (const AccessGrant& grant : grants) {
    auto it = std::find_if(access_.begin(), access_.end(),
                           [&](const AccessGrant& g) { return g.device == grant.device; });
    if (it == access_.end()) {
      access_.push_back(grant);
    } else {
      it->access = grant.access;
    }
  }
}

void Mapping::set_access(std::span<const AccessGrant> grants) {
  if (empty()) throw_invalid_argument("Mapping::set_access", "the mapping is empty");
  if (grants.empty()) return;
  access_.reserve(access_.size() + grants.size());  // so recording below cannot throw
  backend_->set_access(address_, size_, grants);
  record_access(grants);
}

void Mapping::reset() noexcept {
  if (size_ == 0) return;
  backend_->unmap(address_, size_);
  range_live_mappings_->fetch_sub(1, std::memory_order_relaxed);
  backend_ = nullptr;
  address_ = 0;
  size_ = 0;
  access_.clear();
  range_live_mappings_ = nullptr;
}

void set_access(std::span<Mapping> mappings, std::span<const AccessGrant> grants) {
  if (grants.empty()) return;
  std::size_t run_begin = 0;
  while (run_begin < mappings.size()) {
    Mapping& first = mappings[run_begin];
    if (first.empty()) throw_invalid_argument("set_access", "a mapping in the span is empty");
    // Extend the run while the next mapping starts where this one ends, on the same backend.
    std::size_t run_end = run_begin + 1;
    Address run_limit = first.address() + first.size();
    while (run_end < mappings.size() && !mappings[run_end].empty() &&
           mappings[run_end].backend() == first.backend() && mappings[run_end].address() == run_limit) {
      run_limit += mappings[run_end].size();
      ++run_end;
    }
    for (std::size_t i = run_begin; i < run_end; ++i) {
      mappings[i].access_.reserve(mappings[i].access_.size() + grants.size());
    }
    first.backend()->set_access(first.address(), run_limit - first.address(), grants);
    for (std::size_t i = run_begin; i < run_end; ++i) mappings[i].record_access(grants);
    run_begin = run_end;
  }
}

}  // namespace cuvmm
