// cuvmm/rmm_arena_resource.hpp: the Arena as a memory resource that RAPIDS (RMM) code uses as it is.
//
// Owns: nothing; RmmArenaResource is a copyable, non-owning view of an Arena (the Arena outlives
//   it), like ArenaResource (cuvmm/arena_resource.hpp), whose cuda::mr interface it has.
// Invariants: every allocation that the Arena refuses for want of memory (cuvmm::OutOfMemory)
//   throws rmm::out_of_memory instead, carrying the Arena's message: RAPIDS libraries catch it
//   (or its base rmm::bad_alloc) to spill or retry, and RMM's own resource tests expect it. Other
//   errors (an alignment that is not a power of two up to the page size, a bad free) stay
//   cuvmm::Error. Two views of one Arena compare equal; memory is freed to the Arena it came from.
// Never does: order work itself (the Arena's stream contract applies), or need RMM anywhere but
//   in the translation units that include it (libcuvmm does not link RMM).
#pragma once

#include <cstddef>

#include <cuvmm/arena.hpp>
#include <cuvmm/arena_resource.hpp>
#include <cuvmm/error.hpp>

#include <rmm/error.hpp>

namespace cuvmm {

class RmmArenaResource {
 public:
  explicit RmmArenaResource(Arena& arena) noexcept : resource_(arena) {}

  // Newer CCCL (3.1 on, the CCCL that RMM 26 brings): allocate_sync / allocate(stream, ...).
  void* allocate_sync(std::size_t bytes, std::size_t alignment) {
    return rethrown([&] { return resource_.allocate_sync(bytes, alignment); });
  }
  void deallocate_sync(void* p, std::size_t bytes, std::size_t alignment) { resource_.deallocate_sync(p, bytes, alignment); }
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment) {
    return rethrown([&] { return resource_.allocate(stream, bytes, alignment); });
  }
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t alignment) {
    resource_.deallocate(stream, p, bytes, alignment);
  }

  // CCCL 3.0: allocate(bytes, align) / allocate_async(..., stream).
  void* allocate(std::size_t bytes, std::size_t alignment) { return allocate_sync(bytes, alignment); }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) { deallocate_sync(p, bytes, alignment); }
  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream) {
    return allocate(stream, bytes, alignment);
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t alignment, cuda::stream_ref stream) {
    deallocate(stream, p, bytes, alignment);
  }

  [[nodiscard]] Arena& arena() const noexcept { return resource_.arena(); }
  bool operator==(const RmmArenaResource& other) const noexcept { return resource_ == other.resource_; }
  bool operator!=(const RmmArenaResource& other) const noexcept { return resource_ != other.resource_; }
  friend void get_property(const RmmArenaResource&, cuda::mr::device_accessible) noexcept {}

 private:
  /// `allocate()`, with cuvmm::OutOfMemory thrown again as rmm::out_of_memory.
  template <class Allocate>
  static void* rethrown(Allocate&& allocate) {
    try {
      return allocate();
    } catch (const OutOfMemory& e) {
      throw rmm::out_of_memory(e.what());
    }
  }

  ArenaResource resource_;
};

static_assert(cccl::stream_resource_with<RmmArenaResource, cuda::mr::device_accessible>,
              "RmmArenaResource must be a device-accessible, stream-ordered cuda::mr resource");
static_assert(cccl::sync_resource_with<RmmArenaResource, cuda::mr::device_accessible>,
              "RmmArenaResource must be a device-accessible cuda::mr resource without a stream too");

}  // namespace cuvmm
