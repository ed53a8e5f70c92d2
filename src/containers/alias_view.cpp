// AliasView: one reservation, the given chunks mapped side by side in it, access granted per run.
//
// Owns: its AddressRange and its Mappings (never the chunks: the mappings keep their memory alive).
// Built from members in declaration order, so if a map or the access call throws, the mappings
// made so far are unmapped and then the range is freed: no hand-written unwinding.
// Never does: create or release chunks, follow the owner's growth, or wait for device work.
#include <cuvmm/alias_view.hpp>

#include <algorithm>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm {
namespace {

/// The chunks' one backend; throws on an empty list, no grants, empty chunks or mixed backends.
Backend& checked_backend(std::span<const PhysicalChunk> chunks, std::span<const AccessGrant> grants) {
  if (chunks.empty()) throw_invalid_argument("AliasView", "no chunks were given");
  if (grants.empty()) throw_invalid_argument("AliasView", "no access grant was given");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].empty()) throw_invalid_argument("AliasView", "chunk " + std::to_string(i) + " is empty");
    if (chunks[i].backend() != chunks.front().backend()) {
      throw_invalid_argument("AliasView", "chunk " + std::to_string(i) + " comes from another backend than chunk 0");
    }
  }
  return *chunks.front().backend();
}

std::size_t total_bytes(std::span<const PhysicalChunk> chunks) noexcept {
  std::size_t total = 0;
  for (const PhysicalChunk& chunk : chunks) total += chunk.size();
  return total;
}

std::vector<AccessGrant> grants_like(const GrowableStorage& storage, Access access) {
  std::vector<AccessGrant> grants = storage.options().access;
  for (AccessGrant& grant : grants) grant.access = access;
  return grants;
}

}  // namespace

AliasView::AliasView(std::span<const PhysicalChunk> chunks, std::span<const AccessGrant> grants)
    : range_(checked_backend(chunks, grants), total_bytes(chunks)) {
  mappings_.reserve(chunks.size());
  std::size_t offset = 0;
  for (const PhysicalChunk& chunk : chunks) {
    mappings_.emplace_back(range_, offset, chunk);
    offset += chunk.size();
  }
  set_access(mappings_, grants);
}

AliasView::AliasView(const GrowableStorage& storage, Access access)
    : AliasView(std::span<const PhysicalChunk>(storage.chunks()), grants_like(storage, access)) {}

AliasView& AliasView::operator=(AliasView&& other) noexcept {
  if (this != &other) {
    reset();
    range_ = std::move(other.range_);
    mappings_ = std::move(other.mappings_);
    other.mappings_.clear();
  }
  return *this;
}

Access AliasView::access(int device) const noexcept {
  return mappings_.empty() ? Access::none : mappings_.front().access(device);
}

void AliasView::reset() noexcept {
  mappings_.clear();  // unmap first
  range_.reset();
}

}  // namespace cuvmm
