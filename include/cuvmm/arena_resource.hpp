// cuvmm/arena_resource.hpp: the Arena as a cuda::mr (libcu++) stream-ordered memory resource.
//
// ArenaResource is a copyable, non-owning view of an Arena that models
// cuda::mr::async_resource_with<ArenaResource, cuda::mr::device_accessible> (checked below), so it
// fits cuda::mr::async_resource_ref and the CCCL containers that take one. allocate/deallocate
// without a stream use the legacy default stream, which every blocking stream waits for.
#pragma once

#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <cstddef>

#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cuvmm/arena.hpp>

namespace cuvmm {

class ArenaResource {
 public:
  explicit ArenaResource(Arena& arena) noexcept : arena_(&arena) {}

  void* allocate(std::size_t bytes, std::size_t alignment) { return arena_->allocate(bytes, nullptr, alignment); }
  void deallocate(void* p, std::size_t bytes, std::size_t) { arena_->deallocate(p, bytes, nullptr); }
  void* allocate_async(std::size_t bytes, std::size_t alignment, cuda::stream_ref stream) {
    return arena_->allocate(bytes, stream.get(), alignment);
  }
  void deallocate_async(void* p, std::size_t bytes, std::size_t, cuda::stream_ref stream) {
    arena_->deallocate(p, bytes, stream.get());
  }

  [[nodiscard]] Arena& arena() const noexcept { return *arena_; }
  bool operator==(const ArenaResource& other) const noexcept { return arena_ == other.arena_; }
  bool operator!=(const ArenaResource& other) const noexcept { return arena_ != other.arena_; }
  friend void get_property(const ArenaResource&, cuda::mr::device_accessible) noexcept {}

 private:
  Arena* arena_;
};

static_assert(cuda::mr::async_resource_with<ArenaResource, cuda::mr::device_accessible>,
              "ArenaResource must be a device-accessible cuda::mr async resource");

}  // namespace cuvmm
