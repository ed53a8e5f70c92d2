// cuvmm/alias_view.hpp: physical chunks mapped a second time, at an address range of their own.
//
// Virtual aliasing: the same memory seen at two addresses, e.g. a read-only view of a buffer that
// a kernel must not write, or the doubled mapping under RingBuffer. An AliasView reserves one
// address range, maps the given chunks side by side in it (in the order given) and grants access
// with one backend call per run of mappings.
//
// Ownership (the choice cuvmm makes): a view shares the *memory*, not the chunk handles. The
// driver (and HostBackend) keep a chunk's memory alive while any mapping of it exists, even after
// its handle was released, so a view stays valid when the chunks' owner dies or shrinks first:
// it keeps the memory it mapped until it is destroyed. It is a snapshot: it does not follow the
// owner's later growth (chunks mapped after the view was made are not in it) and, once the owner
// released a chunk, no longer aliases anything the owner can reach. The backend must outlive it.
//
// Ordering rules for writes through one alias and reads through another (device memory):
//  - across operations: a write is seen through another alias once the writing operation (kernel,
//    copy) has completed in stream order: a later operation on the same stream, or one on another
//    stream that waits for an event recorded after the write;
//  - inside one kernel: the writing thread executes cuda::ptx::fence_proxy_alias() (<cuda/ptx>,
//    PTX fence.proxy.alias) after its write; then the usual synchronisation (e.g. __syncthreads())
//    makes it visible to a thread reading through the other alias. Without the fence the read may
//    see stale data even after a barrier.
// On the host backend the CPU's MMU makes aliases coherent: no fence is needed there.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

namespace cuvmm {

class AliasView {
 public:
  AliasView() noexcept = default;
  /// Maps `chunks` (live, non-empty, all of one backend) side by side at a new address range and
  /// grants `grants` (at least one) over all of it. Strong guarantee: on failure nothing is left.
  AliasView(std::span<const PhysicalChunk> chunks, std::span<const AccessGrant> grants);
  /// A view of every chunk `storage` has mapped now (capacity() bytes), granted `access` for every
  /// device the storage grants access to (Access::read: a read-only view).
  AliasView(const GrowableStorage& storage, Access access);

  AliasView(const AliasView&) = delete;
  AliasView& operator=(const AliasView&) = delete;
  AliasView(AliasView&&) noexcept = default;
  AliasView& operator=(AliasView&& other) noexcept;
  ~AliasView() = default;  // mappings (declared last) go before the range

  /// Where the view starts; byte i of the view is byte i of the chunks laid side by side.
  [[nodiscard]] Address data() const noexcept { return range_.base(); }
  [[nodiscard]] std::size_t size() const noexcept { return range_.size(); }
  [[nodiscard]] bool empty() const noexcept { return range_.empty(); }
  [[nodiscard]] std::size_t chunk_count() const noexcept { return mappings_.size(); }
  /// The access granted to `device` (the same on every chunk of the view).
  [[nodiscard]] Access access(int device) const noexcept;
  [[nodiscard]] Backend* backend() const noexcept { return range_.backend(); }

  /// Unmaps everything and frees the range now.
  void reset() noexcept;

 private:
  AddressRange range_;            // declared before the mappings: freed after them
  std::vector<Mapping> mappings_; // mappings_[i] maps the i-th chunk given
};

}  // namespace cuvmm
