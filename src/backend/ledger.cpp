// src/backend/ledger.cpp: the book of ranges, chunks and mappings, and the checks on it.
//
// Owns: nothing but the records (see ledger.hpp for the rules and which measurement each follows).
// Invariants: checks are const and throw before anything changes; the LiveCounts move only in the
// add_/remove_ functions, always together with the record they sum.
// Never does: lock, call the driver or the kernel.
#include "backend/ledger.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>
#include <utility>

#include <cuvmm/error.hpp>

namespace cuvmm::detail {
namespace {

std::string hex(Address address) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, address);
  return text;
}

std::string span_text(Address address, std::size_t size) {
  return "[" + hex(address) + ", +" + std::to_string(size) + ")";
}

/// Whether [address, address + size) wraps around the end of the address space.
bool wraps(Address address, std::size_t size) noexcept { return address + size < address; }

}  // namespace

std::string_view call_name(BackendOp op) noexcept {
  switch (op) {
    case BackendOp::reserve: return "cuMemAddressReserve";
    case BackendOp::free_range: return "cuMemAddressFree";
    case BackendOp::create_chunk: return "cuMemCreate";
    case BackendOp::release_chunk: return "cuMemRelease";
    case BackendOp::map: return "cuMemMap";
    case BackendOp::unmap: return "cuMemUnmap";
    case BackendOp::set_access: return "cuMemSetAccess";
    case BackendOp::export_posix_fd:
    case BackendOp::export_fabric: return "cuMemExportToShareableHandle";
    case BackendOp::import_posix_fd:
    case BackendOp::import_fabric: return "cuMemImportFromShareableHandle";
    case BackendOp::chunk_info: return "cuMemGetAllocationPropertiesFromHandle";
  }
  return "?";
}

// ---- queries over the book ----

bool BackendLedger::span_reserved(Address address, std::size_t size) const noexcept {
  Address const end = address + size;
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return false;
  --it;
  Address covered = it->first;  // ranges side by side extend the covered span
  while (it != ranges_.end() && it->first == covered) {
    covered += it->second;
    if (covered > address && covered >= end) return true;
    ++it;
  }
  return false;
}

bool BackendLedger::span_touches_mapping(Address address, std::size_t size) const noexcept {
  Address const end = address + size;
  auto it = mappings_.lower_bound(address);
  if (it != mappings_.end() && it->first < end) return true;
  if (it == mappings_.begin()) return false;
  --it;
  return it->first + it->second.size > address;
}

bool BackendLedger::span_is_whole_mappings(Address address, std::size_t size) const noexcept {
  if (size == 0 || wraps(address, size)) return false;
  Address const end = address + size;
  Address next = address;
  for (auto it = mappings_.find(address); it != mappings_.end() && it->first == next; ++it) {
    next += it->second.size;
    if (next == end) return true;
    if (next > end) return false;
  }
  return false;
}

// ---- checks of acquiring calls ----

void BackendLedger::check_reserve(std::size_t size, std::size_t alignment) const {
  std::string_view const call = call_name(BackendOp::reserve);
  if (size == 0 || size % granularity_ != 0)
    throw_invalid_argument(call, "size " + std::to_string(size) + " is not a positive multiple of the granularity " +
                                     std::to_string(granularity_));
  if ((alignment & (alignment - 1)) != 0)
    throw_invalid_argument(call, "alignment " + std::to_string(alignment) + " is not a power of two (nor 0)");
}

void BackendLedger::check_create(std::size_t size, std::size_t granularity) const {
  if (size == 0 || granularity == 0 || size % granularity != 0)
    throw_invalid_argument(call_name(BackendOp::create_chunk),
                           "size " + std::to_string(size) + " is not a positive multiple of the granularity " +
                               std::to_string(granularity));
}

const BackendLedger::Chunk& BackendLedger::chunk(ChunkHandle handle, BackendOp op) const {
  const Chunk* const found = find_chunk(handle);
  if (found == nullptr)
    throw_invalid_argument(call_name(op), "unknown chunk handle " + std::to_string(handle.value) +
                                              " (never created here, or already released)");
  return *found;
}

void BackendLedger::check_map(Address address, std::size_t size, ChunkHandle handle) const {
  std::string_view const call = call_name(BackendOp::map);
  const Chunk& mapped = chunk(handle, BackendOp::map);
  if (size != mapped.size)
    throw_invalid_argument(call, "size " + std::to_string(size) + " is not the chunk's size " +
                                     std::to_string(mapped.size) + ": only whole chunks are mapped (cuMemMap takes the whole chunk)");
  if (address == 0 || address % granularity_ != 0 || wraps(address, size))
    throw_invalid_argument(call, "address " + hex(address) + " is not a multiple of the granularity " +
                                     std::to_string(granularity_) + " (or is 0)");
  if (!span_reserved(address, size))
    throw_invalid_argument(call, span_text(address, size) +
                                     " is not inside a range reserved by this backend (or ranges side by side)");
  if (span_touches_mapping(address, size))
    throw_invalid_argument(call, span_text(address, size) + " overlaps a chunk already mapped there");
}

void BackendLedger::check_set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) const {
  std::string_view const call = call_name(BackendOp::set_access);
  if (grants.empty()) throw_invalid_argument(call, "setting access on " + span_text(address, size) + ": no access grant was given");
  for (const AccessGrant& grant : grants) {
    if (grant.access != Access::none && grant.access != Access::read && grant.access != Access::read_write)
      throw_invalid_argument(call, "unknown access value " + std::to_string(static_cast<int>(grant.access)));
  }
  if (!span_is_whole_mappings(address, size))
    throw_invalid_argument(call, span_text(address, size) + " is not a run of whole mappings side by side");
}

// ---- checks of releasing calls ----

const char* BackendLedger::free_range_refusal(Address base, std::size_t size) const noexcept {
  auto const found = ranges_.find(base);
  if (found == ranges_.end() || found->second != size)
    return "not one range reserved here (base and size must be one reservation's)";
  if (span_touches_mapping(base, size)) return "the range still has mappings; unmap them first";
  return nullptr;
}

const char* BackendLedger::release_refusal(ChunkHandle handle) const noexcept {
  return find_chunk(handle) == nullptr ? "not a live chunk handle of this backend" : nullptr;
}

const char* BackendLedger::unmap_refusal(Address address, std::size_t size) const noexcept {
  return span_is_whole_mappings(address, size) ? nullptr : "the span is not a run of whole mappings side by side";
}

// ---- records ----

void BackendLedger::add_range(Address base, std::size_t size) {
  ranges_.emplace(base, size);
  ++live_.ranges;
  live_.bytes_reserved += size;
}

void BackendLedger::remove_range(Address base) noexcept {
  auto const found = ranges_.find(base);
  if (found == ranges_.end()) return;
  --live_.ranges;
  live_.bytes_reserved -= found->second;
  ranges_.erase(found);
}

void BackendLedger::add_chunk(ChunkHandle handle, std::size_t size, std::optional<ChunkInfo> info) {
  std::shared_ptr<Chunk>& slot = chunks_[handle.value];
  if (!slot) {
    try {
      slot = std::make_shared<Chunk>();
    } catch (...) {
      chunks_.erase(handle.value);
      throw;
    }
    slot->size = size;
    slot->info = info;
  }
  ++slot->references;
  ++live_.chunks;
  live_.bytes_physical += size;
}

void BackendLedger::remove_chunk(ChunkHandle handle) noexcept {
  auto const found = chunks_.find(handle.value);
  if (found == chunks_.end()) return;
  Chunk& record = *found->second;
  --record.references;
  --live_.chunks;
  // The last reference of a mapped chunk keeps its bytes until the last mapping goes.
  if (record.references > 0 || record.mappings == 0) live_.bytes_physical -= record.size;
  if (record.references == 0) chunks_.erase(found);
}

BackendLedger::Chunk* BackendLedger::find_chunk(ChunkHandle handle) noexcept {
  auto const found = chunks_.find(handle.value);
  return found == chunks_.end() ? nullptr : found->second.get();
}

const BackendLedger::Chunk* BackendLedger::find_chunk(ChunkHandle handle) const noexcept {
  auto const found = chunks_.find(handle.value);
  return found == chunks_.end() ? nullptr : found->second.get();
}

void BackendLedger::add_mapping(Address address, std::size_t size, ChunkHandle handle) {
  auto const found = chunks_.find(handle.value);
  if (found == chunks_.end()) return;  // checked by check_map under the same lock
  mappings_.emplace(address, Mapping{size, found->second});
  ++found->second->mappings;
  ++live_.mappings;
  live_.bytes_mapped += size;
}

void BackendLedger::remove_mappings(Address address, std::size_t size) noexcept {
  auto it = mappings_.lower_bound(address);
  while (it != mappings_.end() && it->first < address + size) {
    Chunk& record = *it->second.chunk;
    --record.mappings;
    --live_.mappings;
    live_.bytes_mapped -= it->second.size;
    if (record.mappings == 0 && record.references == 0) live_.bytes_physical -= record.size;
    it = mappings_.erase(it);
  }
}

}  // namespace cuvmm::detail
