// cuvmm/thrust_allocator.hpp: Thrust adapters for the Arena.
//
// ThrustArenaResource is a thrust::mr memory resource of memory drawn from an Arena and ordered on
// one stream; ThrustAllocator<T> is the allocator over it, for
//   thrust::device_vector<T, cuvmm::ThrustAllocator<T>> v(n, alloc);
//   thrust::sort(thrust::cuda::par(alloc).on(stream), ...);   // temporary storage from the arena
// Owns: nothing; both are views: the Arena and the resource must outlive every allocator and
//   container using them.
// Invariants: memory is freed to the resource object it came from (do_is_equal is identity).
// Never does: allocate anywhere but the Arena, or order work on any stream but its own (the
//   Arena's stream contract applies).
// Compilers: nvcc for CUDA device code (the usual case, CUDA backend). A C++ compiler works too with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP and an Arena on the HostBackend, as in
// test/consumer/thrust_arena.cpp. Not in the umbrella header cuvmm.hpp: include it by name.
#pragma once

#include <algorithm>
#include <cstddef>

#include <thrust/device_ptr.h>
#include <thrust/mr/allocator.h>
#include <thrust/mr/memory_resource.h>

#include <cuvmm/arena.hpp>

namespace cuvmm {

class ThrustArenaResource final : public thrust::mr::memory_resource<thrust::device_ptr<void>> {
 public:
  explicit ThrustArenaResource(Arena& arena, Stream stream = nullptr) noexcept : arena_(&arena), stream_(stream) {}

  [[nodiscard]] Arena& arena() const noexcept { return *arena_; }
  [[nodiscard]] Stream stream() const noexcept { return stream_; }

  // Public: thrust::mr::allocator calls these on the resource type directly.
  pointer do_allocate(std::size_t bytes, std::size_t alignment) override {
    return pointer(arena_->allocate(bytes, stream_, std::max(alignment, Arena::default_alignment)));
  }
  void do_deallocate(pointer p, std::size_t bytes, std::size_t) override {
    arena_->deallocate(p.get(), bytes, stream_);
  }
  // Thrust declares this __host__ __device__; memory from one resource object is freed to it.
  _CCCL_HOST_DEVICE bool do_is_equal(const memory_resource& other) const noexcept override { return this == &other; }

 private:
  Arena* arena_;
  Stream stream_;
};

template <class T>
class ThrustAllocator : public thrust::mr::allocator<T, ThrustArenaResource> {
  using base = thrust::mr::allocator<T, ThrustArenaResource>;

 public:
  template <class U>
  struct rebind {
    using other = ThrustAllocator<U>;
  };

  explicit ThrustAllocator(ThrustArenaResource& resource) noexcept : base(&resource) {}
  template <class U>
  ThrustAllocator(const ThrustAllocator<U>& other) noexcept : base(other.resource()) {}
};

}  // namespace cuvmm
