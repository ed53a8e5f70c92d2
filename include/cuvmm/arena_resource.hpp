// cuvmm/arena_resource.hpp: the Arena as a cuda::mr (CCCL) stream-ordered memory resource.
//
// Owns: nothing; ArenaResource is a copyable, non-owning view of an Arena (the Arena outlives it).
// Invariants: ArenaResource models CCCL's stream-ordered resource concept with the
//   device_accessible property in every CCCL it compiles with (static_assert below), so it fits
//   cuda::mr's resource references, CCCL's containers and RMM 26 (device_uvector, device_buffer).
//   Memory is freed to the resource it came from: two views of one Arena compare equal.
// Never does: order work itself (the Arena's stream contract applies), or pick CCCL names by
//   anything but the feature test below.
//
// CCCL renamed the memory-resource interface after 3.0 (the CUDA 13.0 toolkit's): 3.0 has it under
// LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE as
//   resource (allocate(bytes, align)) and async_resource (allocate_async(bytes, align, stream)),
// newer CCCL (3.1 on: the nvidia-cuda-cccl wheel, RMM 26) without the macro as
//   synchronous_resource (allocate_sync(bytes, align)) and resource (allocate(stream, bytes, align)).
// ArenaResource has the member functions of both (their overloads differ in arity), and the names
// that differ are reached through cuvmm::cccl:
//   cuvmm::cccl::stream_resource_ref<Props...>  cuda::mr::async_resource_ref | cuda::mr::resource_ref
//   cuvmm::cccl::sync_resource_ref<Props...>    cuda::mr::resource_ref       | cuda::mr::synchronous_resource_ref
//   cuvmm::cccl::stream_resource_with<R, Props...>  the stream-ordered concept, as a bool
// Without a stream, allocation is ordered on the legacy default stream, which every blocking stream
// waits for.
#pragma once

#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <cstddef>

#include <cuda/memory_resource>
#include <cuda/std/version>
#include <cuda/stream_ref>

#include <cuvmm/arena.hpp>

// The feature test: CCCL 3.1 brought the synchronous_resource names (CCCL_VERSION is
// major * 1000000 + minor * 1000 + patch).
#if !defined(CCCL_VERSION)
#error "cuvmm/arena_resource.hpp: CCCL_VERSION is not defined; CCCL 3.0 or newer is needed"
#elif CCCL_VERSION >= 3001000
#define CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES 1
#else
#define CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES 0
#endif

namespace cuvmm {

namespace cccl {
#if CUVMM_CCCL_SYNCHRONOUS_RESOURCE_NAMES
template <class... Properties>
using stream_resource_ref = cuda::mr::resource_ref<Properties...>;
template <class... Properties>
using sync_resource_ref = cuda::mr::synchronous_resource_ref<Properties...>;
template <class Resource, class... Properties>
inline constexpr bool stream_resource_with = cuda::mr::resource_with<Resource, Properties...>;
template <class Resource, class... Properties>
inline constexpr bool sync_resource_with = cuda::mr::synchronous_resource_with<Resource, Properties...>;
#else
template <class... Properties>
using stream_resource_ref = cuda::mr::async_resource_ref<Properties...>;
template <class... Properties>
using sync_resource_ref = cuda::mr::resource_ref<Properties...>;
template <class Resource, class... Properties>
inline constexpr bool stream_resource_with = cuda::mr::async_resource_with<Resource, Properties...>;
template <class Resource, class... Properties>
inline constexpr bool sync_resource_with = cuda::mr::resource_with<Resource, Properties...>;
#endif
}  // namespace cccl

class ArenaResource {
 public:
  explicit ArenaResource(Arena& arena) noexcept : arena_(&arena) {}

  // Newer CCCL (3.1 on): allocate_sync / allocate(stream, ...).
  void* allocate_sync(std::size_t bytes, std::size_t alignment) { return arena_->allocate(bytes, nullptr, alignment); }
  void deallocate_sync(void* p, std::size_t bytes, std::size_t) { arena_->deallocate(p, bytes, nullptr); }
  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment) {
    return arena_->allocate(bytes, stream.get(), alignment);
  }
  void deallocate(cuda::stream_ref stream, void* p, std::size_t bytes, std::size_t) {
    arena_->deallocate(p, bytes, stream.get());
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

  [[nodiscard]] Arena& arena() const noexcept { return *arena_; }
  bool operator==(const ArenaResource& other) const noexcept { return arena_ == other.arena_; }
  bool operator!=(const ArenaResource& other) const noexcept { return arena_ != other.arena_; }
  friend void get_property(const ArenaResource&, cuda::mr::device_accessible) noexcept {}

 private:
  Arena* arena_;
};

static_assert(cccl::stream_resource_with<ArenaResource, cuda::mr::device_accessible>,
              "ArenaResource must be a device-accessible, stream-ordered cuda::mr resource");
static_assert(cccl::sync_resource_with<ArenaResource, cuda::mr::device_accessible>,
              "ArenaResource must be a device-accessible cuda::mr resource without a stream too");
static_assert(!cccl::sync_resource_with<ArenaResource, cuda::mr::host_accessible>,
              "Arena memory is device memory: ArenaResource must not claim host access");

}  // namespace cuvmm
