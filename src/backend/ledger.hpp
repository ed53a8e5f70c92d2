// src/backend/ledger.hpp: the one book of what a backend handed out, and the precondition checks
// every backend applies before it touches the driver or the kernel.
//
// Owns: the records of reserved ranges, chunk handles (size, references, mappings, what was
// created) and mappings (a whole chunk at one address), and the LiveCounts they add up to.
// Invariants: a check never changes the book; a record is added only after the driver (or the
// kernel) succeeded and removed only after the release succeeded; LiveCounts always equal the sums
// over the records. A chunk released while still mapped leaves `chunks` but keeps its bytes in
// bytes_physical until its last mapping goes (cuMemRelease frees the memory only then).
// Never does: lock (its owner guards it with one mutex), call the driver or the kernel, round.
//
// The rules follow the CUDA driver as measured on the H200 (docs/H200.md); test/gpu/test_driver.cpp
// asks the driver itself for them again:
//  - map: whole chunks only (cuMemMap with a non-zero offset or a size smaller than
//    the handle returns CUDA_ERROR_NOT_SUPPORTED); the span may cross the boundary of two (or
//    more) adjacent reservations; never over a mapped slot (the driver's documented rule).
//  - unmap: a run of whole mappings side by side, or any sub-run of whole mappings (one
//    cuMemUnmap may cover a run of whole handles, a sub-run too; a range that cuts a handle is
//    CUDA_ERROR_INVALID_VALUE).
//  - set_access: a run of whole mappings side by side, which may span adjacent reservations
//    (one cuMemSetAccess may span both). Over part of a mapping was NOT measured:
//    the stricter rule is kept, so that nothing the host backend accepts can be refused on the GPU.
//  - free_range: exactly one reservation (base and size as reserved), with no mapping in it
//    (each reservation must be freed by its own cuMemAddressFree; two at once:
//    CUDA_ERROR_INVALID_VALUE). A mapping that crosses into a neighbour blocks both.
// Errors name the driver call the check stands for (call_name below), on every backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include <cuvmm/backend.hpp>
#include <cuvmm/types.hpp>

namespace cuvmm::detail {

/// The driver call each BackendOp stands for: the `call` of every precondition error.
std::string_view call_name(BackendOp op) noexcept;

class BackendLedger {
 public:
  /// What the book knows of one chunk handle.
  struct Chunk {
    std::size_t size = 0;           // bytes of the handle (what map must be given)
    std::size_t references = 0;     // times the handle was handed out and not yet released
    std::size_t mappings = 0;       // live mappings of this chunk
    std::optional<ChunkInfo> info;  // what was created, when known without asking the driver
  };

  /// `address_granularity`: the unit of range sizes and map/set_access addresses.
  explicit BackendLedger(std::size_t address_granularity) noexcept : granularity_(address_granularity) {}

  std::size_t address_granularity() const noexcept { return granularity_; }

  // ---- checks of acquiring calls: throw Error (ErrorCode::invalid_argument), change nothing ----
  void check_reserve(std::size_t size, std::size_t alignment) const;
  /// A chunk of `size` bytes for chunks whose granularity is `granularity`.
  void check_create(std::size_t size, std::size_t granularity) const;
  /// The live chunk behind `handle`; unknown handles are refused naming `op`'s call.
  const Chunk& chunk(ChunkHandle handle, BackendOp op) const;
  void check_map(Address address, std::size_t size, ChunkHandle handle) const;
  void check_set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) const;

  // ---- checks of releasing calls (noexcept): nullptr when allowed, else why not ----
  const char* free_range_refusal(Address base, std::size_t size) const noexcept;
  const char* release_refusal(ChunkHandle handle) const noexcept;
  const char* unmap_refusal(Address address, std::size_t size) const noexcept;

  // ---- records, after the driver (or the kernel) succeeded ----
  void add_range(Address base, std::size_t size);
  void remove_range(Address base) noexcept;
  /// One more reference to `handle` (a new one, or a handle value the driver handed out again).
  void add_chunk(ChunkHandle handle, std::size_t size, std::optional<ChunkInfo> info = {});
  void remove_chunk(ChunkHandle handle) noexcept;
  /// The record of a live handle, or null.
  Chunk* find_chunk(ChunkHandle handle) noexcept;
  const Chunk* find_chunk(ChunkHandle handle) const noexcept;
  void add_mapping(Address address, std::size_t size, ChunkHandle handle);
  void remove_mappings(Address address, std::size_t size) noexcept;

  LiveCounts counts() const noexcept { return live_; }
  /// Base and size of every live range (for a backend that frees them all at destruction).
  const std::map<Address, std::size_t>& ranges() const noexcept { return ranges_; }

 private:
  struct Mapping {
    std::size_t size = 0;
    std::shared_ptr<Chunk> chunk;  // keeps a released chunk's record until it is unmapped
  };

  bool span_reserved(Address address, std::size_t size) const noexcept;
  bool span_touches_mapping(Address address, std::size_t size) const noexcept;
  bool span_is_whole_mappings(Address address, std::size_t size) const noexcept;

  std::size_t granularity_;                                  // unit of range sizes and addresses
  std::map<Address, std::size_t> ranges_;                    // base -> size of each reservation
  std::map<std::uint64_t, std::shared_ptr<Chunk>> chunks_;   // handle value -> live handle
  std::map<Address, Mapping> mappings_;                      // address -> whole chunk mapped there
  LiveCounts live_;                                          // the sums over the records above
};

}  // namespace cuvmm::detail
