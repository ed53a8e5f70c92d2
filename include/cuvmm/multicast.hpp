// cuvmm/multicast.hpp: multicast objects (one address that reaches the memory of several GPUs),
// capability-gated.
//
// A MulticastObject owns one driver multicast handle (cuMulticastCreate) with its devices added
// (cuMulticastAddDevice) and the memory bound to it (cuMulticastBindMem, undone with
// cuMulticastUnbind). map() gives a MulticastMapping: the object mapped at an address of its own,
// read-write for every device. A store through that address reaches every device's bound memory;
// the multimem kernels in multimem.hpp reduce across devices through it.
//
// The gate comes first (DESIGN.md invariant 7): before any multicast driver call, the constructor
// checks that the machine has at least two devices, that at least two distinct devices were asked
// for, and that every one of them reports CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED. If not, it
// throws cuvmm::Unsupported saying which, and nothing is created. Constructing one is the caller's
// explicit request; nothing else in cuvmm creates multicast objects.
//
// Teardown order is kept by ownership: a MulticastMapping is unmapped before its object is
// released (declare it after the object), and the object unbinds all memory before it releases
// its handle. Chunks bound to it must outlive it (they are not owned).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <cuvmm/physical_chunk.hpp>
#include <cuvmm/types.hpp>

namespace cuvmm {

/// Whether multicast can be used with a set of devices, and if not, why (in words).
struct MulticastSupport {
  bool supported = false;
  std::string reason;  ///< empty when supported
};

/// The gate, asked without creating anything (reads device attributes only). Never throws.
MulticastSupport multicast_support(std::span<const int> devices) noexcept;

/// The multicast object mapped at an address of its own. Move-only; unmaps and frees on destruction.
class MulticastMapping {
 public:
  MulticastMapping() noexcept = default;
  MulticastMapping(const MulticastMapping&) = delete;
  MulticastMapping& operator=(const MulticastMapping&) = delete;
  MulticastMapping(MulticastMapping&& other) noexcept;
  MulticastMapping& operator=(MulticastMapping&& other) noexcept;
  ~MulticastMapping();

  /// The multicast address: multimem instructions (and ordinary stores) through it reach every device.
  [[nodiscard]] Address address() const noexcept { return address_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  void reset() noexcept;

 private:
  friend class MulticastObject;
  MulticastMapping(Address address, std::size_t size, int device) noexcept
      : address_(address), size_(size), device_(device) {}
  Address address_ = 0;
  std::size_t size_ = 0;
  int device_ = 0;  // whose primary context is current while it is unmapped and freed
};

class MulticastObject {
 public:
  /// Passes the gate (else cuvmm::Unsupported, nothing created), then creates a multicast object of
  /// at least `size` bytes (rounded up to the multicast granularity) and adds every device.
  MulticastObject(std::span<const int> devices, std::size_t size);
  MulticastObject(const MulticastObject&) = delete;
  MulticastObject& operator=(const MulticastObject&) = delete;
  MulticastObject(MulticastObject&& other) noexcept;
  MulticastObject& operator=(MulticastObject&& other) noexcept;
  /// Unbinds every binding, then releases the handle.
  ~MulticastObject();

  [[nodiscard]] std::size_t size() const noexcept;
  [[nodiscard]] std::size_t granularity() const noexcept;
  [[nodiscard]] const std::vector<int>& devices() const noexcept;
  [[nodiscard]] bool empty() const noexcept { return state_ == nullptr; }

  /// Binds all of `chunk` (device memory on one of devices(), created on a CudaBackend) at
  /// `offset` (a multiple of granularity(); chunk and offset inside size()).
  void bind(const PhysicalChunk& chunk, std::size_t offset = 0);
  /// Unbinds every binding of `device`.
  void unbind(int device) noexcept;

  /// Maps the object at a new address, read-write for every device.
  [[nodiscard]] MulticastMapping map() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cuvmm
