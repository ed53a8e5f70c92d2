// cuvmm/ring_buffer.hpp: a ring buffer whose every window is contiguous, even across the wrap.
//
// One physical chunk of capacity() elements is mapped twice, back to back, in one address range
// of twice that size: element i of the second copy *is* element i of the first. So the
// capacity() elements that start at any index (taken modulo capacity()) lie side by side in
// memory, and a kernel, memcpy or Thrust algorithm can read or write a window that wraps around
// the end as one plain array, with no split and no copy.
//
// RingStorage is the untyped part (src/containers/ring_buffer.cpp); BasicRingBuffer<T, Space> is
// a thin typed layer: RingBuffer<T> in device memory (thrust::device_ptr iterators, CUDA backend
// by default) and HostRingBuffer<T> in host memory (T* iterators, HostBackend), the same code.
// The capacity is rounded up so that the chunk is a whole number of granules *and* of elements
// (the wrap point then falls between two elements).
//
// Ordering: the two copies are two virtual aliases of one memory (see alias_view.hpp). A write
// through one copy is seen through the other once the writing operation has completed in stream
// order; inside one kernel only after cuda::ptx::fence_proxy_alias() in the writing thread
// followed by the usual synchronisation. Writing a window that wraps, then reading the same
// elements at their index modulo capacity() in a later kernel, is such a pair of aliases.
//
// A RingBuffer holds positions only in the caller's hands: it is storage with the wrap taken care
// of, not a queue. Move-only; destruction unmaps both copies, releases the chunk, frees the range.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/detail/memory_spaces.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

#if defined(__CUDACC__)
#define CUVMM_HOST_DEVICE __host__ __device__
#else
#define CUVMM_HOST_DEVICE
#endif

namespace cuvmm {

/// Where a ring buffer lives and who may access it.
struct RingOptions {
  int device = 0;                     ///< device that holds the chunk
  std::vector<AccessGrant> access;    ///< empty: read-write for `device`
  HandleType shareable = HandleType::none;  ///< handle types the chunk must be exportable as
};

/// The untyped ring: one chunk mapped twice back to back.
class RingStorage {
 public:
  RingStorage() noexcept = default;
  /// A ring of at least `min_bytes` (> 0) that holds a whole number of `element_bytes` elements.
  /// Strong guarantee: on failure (OutOfMemory, a driver error) nothing is left behind.
  RingStorage(Backend& backend, std::size_t min_bytes, std::size_t element_bytes, RingOptions options = {});
  RingStorage(const RingStorage&) = delete;
  RingStorage& operator=(const RingStorage&) = delete;
  RingStorage(RingStorage&& other) noexcept;
  RingStorage& operator=(RingStorage&& other) noexcept;
  ~RingStorage() = default;  // the mappings (declared last) go first, then the chunk, then the range

  /// Start of the first copy; the second starts at data() + capacity().
  [[nodiscard]] Address data() const noexcept { return range_.base(); }
  /// Bytes of one copy: any run of up to this many bytes from any offset below it is contiguous.
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] bool empty() const noexcept { return capacity_ == 0; }
  [[nodiscard]] const PhysicalChunk& chunk() const noexcept { return chunk_; }
  [[nodiscard]] const AddressRange& range() const noexcept { return range_; }
  [[nodiscard]] Backend* backend() const noexcept { return range_.backend(); }
  [[nodiscard]] const RingOptions& options() const noexcept { return options_; }

 private:
  RingOptions options_;
  std::size_t capacity_ = 0;         // bytes of one copy (the chunk's size)
  AddressRange range_;               // 2 * capacity_ bytes; freed last
  PhysicalChunk chunk_;              // released after both mappings
  std::array<Mapping, 2> mappings_;  // the chunk at offset 0 and at offset capacity_
};

/// What a kernel needs of a ring: trivially copyable, pass it by value.
template <class T>
struct RingView {
  T* data = nullptr;          ///< first copy; the second follows it
  std::size_t capacity = 0;   ///< elements of one copy
  /// Element `index` (any index: taken modulo capacity).
  CUVMM_HOST_DEVICE T& operator[](std::size_t index) const { return data[index % capacity]; }
  /// Where the window starting at `first` begins: the next `capacity` elements from there are
  /// contiguous, even when they cross the wrap.
  CUVMM_HOST_DEVICE T* window(std::size_t first) const { return data + first % capacity; }
};

template <class T, class Space>
class BasicRingBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "cuvmm ring buffers hold trivially copyable types");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using pointer = T*;
  using iterator = typename Space::template iterator<T>;

  /// A contiguous run of elements of the ring, possibly across the wrap.
  class Window {
   public:
    Window(T* data, size_type size) noexcept : data_(data), size_(size) {}
    [[nodiscard]] T* data() const noexcept { return data_; }
    [[nodiscard]] size_type size() const noexcept { return size_; }
    [[nodiscard]] iterator begin() const noexcept { return Space::make_iterator(data_); }
    [[nodiscard]] iterator end() const noexcept { return Space::make_iterator(data_ + size_); }
    [[nodiscard]] std::span<T> span() const noexcept { return {data_, size_}; }

   private:
    T* data_;
    size_type size_;
  };

  /// A ring of at least `min_capacity` elements on the default backend of its memory space.
  explicit BasicRingBuffer(size_type min_capacity, RingOptions options = {})
      : BasicRingBuffer(Space::default_backend(options.device), min_capacity, std::move(options)) {}
  BasicRingBuffer(Backend& backend, size_type min_capacity, RingOptions options = {})
      : storage_(detail::backend_of_space<Space>(backend, "RingBuffer"), bytes_for(min_capacity), sizeof(T),
                 std::move(options)) {}

  BasicRingBuffer(const BasicRingBuffer&) = delete;
  BasicRingBuffer& operator=(const BasicRingBuffer&) = delete;
  BasicRingBuffer(BasicRingBuffer&&) noexcept = default;
  BasicRingBuffer& operator=(BasicRingBuffer&&) noexcept = default;
  ~BasicRingBuffer() = default;

  /// Elements of one copy.
  [[nodiscard]] size_type capacity() const noexcept { return storage_.capacity() / sizeof(T); }
  /// The first copy; data()[capacity() + i] is data()[i].
  [[nodiscard]] pointer data() const noexcept { return reinterpret_cast<pointer>(storage_.data()); }
  [[nodiscard]] RingView<T> view() const noexcept { return {data(), capacity()}; }
  /// The `count` (<= capacity()) elements from index `first` (taken modulo capacity()), contiguous.
  [[nodiscard]] Window window(size_type first, size_type count) const {
    if (capacity() == 0) throw_invalid_argument("RingBuffer::window", "the ring is empty (moved from)");
    if (count > capacity()) {
      throw_invalid_argument("RingBuffer::window", "a window of " + std::to_string(count) +
                                                       " elements is longer than the capacity " +
                                                       std::to_string(capacity()));
    }
    return Window(view().window(first), count);
  }
  /// The first copy, [0, capacity()).
  [[nodiscard]] iterator begin() const noexcept { return Space::make_iterator(data()); }
  [[nodiscard]] iterator end() const noexcept { return Space::make_iterator(data() + capacity()); }

  [[nodiscard]] const RingStorage& storage() const noexcept { return storage_; }
  [[nodiscard]] Backend& backend() const noexcept { return *storage_.backend(); }

 private:
  static size_type bytes_for(size_type elements) {
    if (elements == 0) throw_invalid_argument("RingBuffer", "the capacity must be at least one element");
    if (elements > SIZE_MAX / 2 / sizeof(T)) throw CapacityExceeded(SIZE_MAX, SIZE_MAX / 2);
    return elements * sizeof(T);
  }

  RingStorage storage_;
};

/// A ring in device memory: kernels take view(), Thrust takes window(...).begin()/end().
template <class T>
using RingBuffer = BasicRingBuffer<T, detail::DeviceSpace>;

/// The same ring in host memory (HostBackend): CI exercises the doubled mapping with it.
template <class T>
using HostRingBuffer = BasicRingBuffer<T, detail::HostSpace>;

}  // namespace cuvmm
