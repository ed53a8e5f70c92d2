// cuvmm/growable_buffer.hpp: a vector that grows in place and never moves.
//
// GrowableBuffer<T> (device memory, thrust::device_ptr<T> iterators so Thrust algorithms dispatch to
// the device) and HostGrowableBuffer<T> (host memory, T* iterators) are one template over an untyped
// GrowableStorage: the address range is reserved once, growth maps more physical chunks behind the
// end, so data() and every iterator stay valid for the buffer's whole life and nothing is copied
// when it grows. Growth past max_capacity() throws CapacityExceeded and changes nothing.
//
// Elements are trivially copyable (they are moved as bytes). resize(n) leaves new elements
// uninitialized, like rmm::device_uvector; resize(n, value) fills them. Data movement is ordered on
// a CUDA stream: the buffer's own (set at construction, nullptr = the legacy default stream) or
// the one passed to an overload. Growth itself needs no stream: mapping new chunks does not wait
// for kernels that use the mapped prefix. Shrinking, destruction and move assignment unmap memory,
// and cuMemUnmap does not wait for kernels that still use it: each first waits (on the host) for the
// work queued on the buffer's own stream (or, for shrink_to_fit(stream), on that stream). Work on
// other streams that still uses the memory is the caller's to finish first, as with cudaFreeAsync.
//
// Copying needs a stream, so there is no implicit copy: use the (other, stream) constructor.
// Moves are noexcept and leave the source empty, with no address range.
#pragma once

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <iterator>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <thrust/device_ptr.h>
#include <thrust/iterator/iterator_traits.h>

#include <cuvmm/detail/memory_spaces.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>

#if defined(__CUDACC__)
#include <thrust/copy.h>
#include <thrust/distance.h>
#include <thrust/execution_policy.h>
#endif

namespace cuvmm {

namespace detail {
template <class>
inline constexpr bool always_false = false;

template <class It>
struct is_device_ptr : std::false_type {};
template <class U>
struct is_device_ptr<thrust::device_ptr<U>> : std::true_type {};

/// A host iterator that can be read only once (its category is not forward): its length is
/// unknown until it has been read, so it is staged in host memory before the buffer changes.
/// Thrust's device iterators carry categories of their own and are never staged on the host.
template <class It>
consteval bool single_pass_host_iterator() {
  if constexpr (std::forward_iterator<It>) {
    return false;
  } else if constexpr (requires { typename thrust::iterator_system<It>::type; }) {
    // Thrust knows it: stage it only if it is a host iterator whose category is not forward (a
    // Thrust fancy iterator can fail std::forward_iterator only for want of a default constructor).
    return std::is_same_v<typename thrust::iterator_system<It>::type, thrust::host_system_tag> &&
           !std::is_base_of_v<std::forward_iterator_tag, typename std::iterator_traits<It>::iterator_category>;
  } else {
    return true;  // a C++20 input iterator Thrust cannot classify: a host iterator
  }
}
template <class It>
inline constexpr bool is_single_pass_host_iterator = single_pass_host_iterator<It>();
}  // namespace detail

template <class T, class Space>
class BasicGrowableBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "cuvmm buffers hold trivially copyable types (moved as bytes)");
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>, "cuvmm buffers hold unqualified types");

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = typename Space::template iterator<T>;
  using const_iterator = typename Space::template iterator<const T>;

  /// An empty buffer on the default backend of its memory space (device 0 for device memory),
  /// with an address range as large as that device's memory.
  BasicGrowableBuffer() : BasicGrowableBuffer(GrowableOptions{}) {}
  explicit BasicGrowableBuffer(GrowableOptions options, Stream stream = nullptr)
      : BasicGrowableBuffer(Space::default_backend(options), std::move(options), stream) {}
  /// An empty buffer on `backend` (which must serve this buffer's memory space).
  explicit BasicGrowableBuffer(Backend& backend, GrowableOptions options = {}, Stream stream = nullptr)
      : storage_(detail::backend_of_space<Space>(backend, "GrowableBuffer"), std::move(options)), stream_(stream) {}

  /// A copy of `other`'s elements in a new buffer with the same backend and options, ordered on `stream`.
  BasicGrowableBuffer(const BasicGrowableBuffer& other, Stream stream)
      : BasicGrowableBuffer(other.storage_.backend(), other.storage_.options(), stream) {
    append(std::span<const T>(other.data(), other.size()), stream);
  }
  BasicGrowableBuffer(const BasicGrowableBuffer&) = delete;
  BasicGrowableBuffer& operator=(const BasicGrowableBuffer&) = delete;
  BasicGrowableBuffer(BasicGrowableBuffer&& other) noexcept
      : storage_(std::move(other.storage_)), size_(std::exchange(other.size_, 0)), stream_(other.stream_) {}
  /// Waits for the work queued on this buffer's stream before its memory is unmapped.
  BasicGrowableBuffer& operator=(BasicGrowableBuffer&& other) noexcept {
    if (this == &other) return *this;
    wait_before_unmap();
    storage_ = std::move(other.storage_);
    size_ = std::exchange(other.size_, 0);
    stream_ = other.stream_;
    return *this;
  }
  /// Waits for the work queued on the buffer's stream, then unmaps and releases its memory.
  ~BasicGrowableBuffer() { wait_before_unmap(); }

  void swap(BasicGrowableBuffer& other) noexcept {
    std::swap(storage_, other.storage_);
    std::swap(size_, other.size_);
    std::swap(stream_, other.stream_);
  }
  friend void swap(BasicGrowableBuffer& a, BasicGrowableBuffer& b) noexcept { a.swap(b); }

  // --- size and capacity (in elements) -------------------------------------------------------

  [[nodiscard]] size_type size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Elements that fit in the memory mapped now.
  [[nodiscard]] size_type capacity() const noexcept { return storage_.capacity() / sizeof(T); }
  /// Elements that fit in the address range: the buffer can never hold more.
  [[nodiscard]] size_type max_capacity() const noexcept { return storage_.max_capacity() / sizeof(T); }
  [[nodiscard]] size_type size_bytes() const noexcept { return size_ * sizeof(T); }

  // --- access -------------------------------------------------------------------------------

  /// Fixed for the buffer's life (null only after it was moved from).
  [[nodiscard]] pointer data() noexcept { return reinterpret_cast<pointer>(storage_.data()); }
  [[nodiscard]] const_pointer data() const noexcept { return reinterpret_cast<const_pointer>(storage_.data()); }
  [[nodiscard]] iterator begin() noexcept { return Space::make_iterator(data()); }
  [[nodiscard]] iterator end() noexcept { return Space::make_iterator(data() + size_); }
  [[nodiscard]] const_iterator begin() const noexcept { return cbegin(); }
  [[nodiscard]] const_iterator end() const noexcept { return cend(); }
  [[nodiscard]] const_iterator cbegin() const noexcept { return Space::make_iterator(data()); }
  [[nodiscard]] const_iterator cend() const noexcept { return Space::make_iterator(data() + size_); }

  /// Copies element `i` to the host (waits for `stream`). Throws cuvmm::Error if i >= size().
  [[nodiscard]] T element(size_type i) const { return element(i, stream_); }
  [[nodiscard]] T element(size_type i, Stream stream) const {
    check_index(i, "element");
    std::array<std::byte, sizeof(T)> bytes;  // T need not be default-constructible
    Space::copy(bytes.data(), data() + i, sizeof(T), stream);
    Space::wait(stream);
    return std::bit_cast<T>(bytes);
  }
  /// Writes element `i` from the host, ordered on `stream`.
  void set_element(size_type i, const T& value) { set_element(i, value, stream_); }
  void set_element(size_type i, const T& value, Stream stream) {
    check_index(i, "set_element");
    Space::copy(data() + i, &value, sizeof(T), stream);
  }

  // --- growth -------------------------------------------------------------------------------

  /// Makes capacity() >= n by mapping more memory. Never moves data.
  void reserve(size_type n) { storage_.reserve(bytes_for(n)); }

  /// Sets size() to n; new elements are uninitialized.
  void resize(size_type n) {
    reserve(n);
    size_ = n;
  }
  /// Sets size() to n; new elements are copies of `value`.
  void resize(size_type n, const T& value) { resize(n, value, stream_); }
  void resize(size_type n, const T& value, Stream stream) {
    reserve(n);
    if (n > size_) Space::fill(data() + size_, &value, sizeof(T), n - size_, stream);
    size_ = n;
  }

  /// Appends elements from memory the runtime can read: host memory (pageable or pinned) or
  /// device memory, including this buffer's own elements.
  void append(std::span<const T> elements) { append(elements, stream_); }
  void append(std::span<const T> elements, Stream stream) {
    if (elements.empty()) return;
    size_type const old_size = size_;
    reserve(checked_sum(old_size, elements.size()));
    Space::copy(data() + old_size, elements.data(), elements.size_bytes(), stream);
    size_ = old_size + elements.size();
  }

  /// Appends [first, last): contiguous ranges of T (host containers, thrust::device_ptr) are
  /// copied as bytes; a single-pass host iterator (std::istream_iterator) is read into host memory
  /// first and then copied once; other iterators (Thrust fancy iterators, conversions) of a device
  /// buffer run thrust::copy on `stream` and need this translation unit to be compiled by nvcc.
  /// Strong guarantee: if it throws (CapacityExceeded, OutOfMemory, the iterator itself), size and
  /// contents are unchanged and nothing was mapped for it. A single-pass source longer than
  /// max_capacity() allows throws CapacityExceeded at the first element that does not fit.
  template <std::input_iterator InputIt>
  void append(InputIt first, InputIt last) {
    append(first, last, stream_);
  }
  template <std::input_iterator InputIt>
  void append(InputIt first, InputIt last, Stream stream) {
    using Value = std::remove_cv_t<std::iter_value_t<InputIt>>;
    if constexpr (std::contiguous_iterator<InputIt> && std::is_same_v<Value, T>) {
      append(std::span<const T>(std::to_address(first), static_cast<size_type>(last - first)), stream);
    } else if constexpr (detail::is_device_ptr<InputIt>::value && std::is_same_v<Value, T>) {
      append(std::span<const T>(first.get(), static_cast<size_type>(last - first)), stream);
    } else if constexpr (detail::is_single_pass_host_iterator<InputIt>) {
      append_single_pass(first, last, stream);
    } else if constexpr (Space::memory_space == MemorySpace::host) {
      append_host_elements(first, last);
    } else {
#if defined(__CUDACC__)
      auto const count = static_cast<size_type>(thrust::distance(first, last));
      size_type const old_size = size_;
      reserve(checked_sum(old_size, count));
      thrust::copy(thrust::cuda::par_nosync.on(stream), first, last, begin() + old_size);
      size_ = old_size + count;
#else
      static_assert(detail::always_false<InputIt>,
                    "appending from this iterator runs a Thrust kernel: compile this file with nvcc, "
                    "or append a contiguous range of T");
#endif
    }
  }

  void push_back(const T& value) { push_back(value, stream_); }
  void push_back(const T& value, Stream stream) { append(std::span<const T>(&value, 1), stream); }

  /// Removes the last element. Throws cuvmm::Error on an empty buffer.
  void pop_back() {
    if (empty()) throw_invalid_argument("GrowableBuffer::pop_back", "the buffer is empty");
    --size_;
  }

  /// size() becomes 0; the memory stays mapped (shrink_to_fit() gives it back).
  void clear() noexcept { size_ = 0; }

  /// Unmaps and releases the chunks not needed for size() elements, once the work queued on
  /// `stream` is done (a wait on that stream only, never the whole device). Other streams still using that memory
  /// are the caller's responsibility.
  void shrink_to_fit() { shrink_to_fit(stream_); }
  void shrink_to_fit(Stream stream) {
    if (!storage_.can_shrink_to(size_bytes())) return;
    Space::wait(stream);  // queued work may still use the tail, and unmapping does not wait for it
    storage_.shrink_to(size_bytes());
  }

  // --- configuration and introspection ------------------------------------------------------

  /// Grants, changes or revokes the access of the devices in `grants` (e.g. a peer GPU) on all
  /// the memory mapped now and on later growth; see GrowableStorage::grant_access.
  void grant_access(std::span<const AccessGrant> grants) { storage_.grant_access(grants); }

  [[nodiscard]] Stream stream() const noexcept { return stream_; }
  void set_stream(Stream stream) noexcept { stream_ = stream; }
  [[nodiscard]] GrowableStats stats() const noexcept { return storage_.stats(); }
  [[nodiscard]] const GrowableStorage& storage() const noexcept { return storage_; }
  [[nodiscard]] Backend& backend() const noexcept { return storage_.backend(); }

 private:
  /// Unmapping does not wait for kernels: let the work queued on the buffer's stream finish first.
  /// Never throws (destructors call it; a driver already shut down has no work left to wait for).
  void wait_before_unmap() noexcept {
    if (storage_.capacity() != 0) Space::wait_no_throw(stream_);
  }

  /// Bytes for n elements; n too large for size_t is a capacity error, like any other n too large.
  size_type bytes_for(size_type n) const {
    if (n > std::numeric_limits<size_type>::max() / sizeof(T)) {
      throw CapacityExceeded(std::numeric_limits<size_type>::max(), storage_.max_capacity());
    }
    return n * sizeof(T);
  }
  size_type checked_sum(size_type a, size_type b) const {
    if (b > std::numeric_limits<size_type>::max() - a) {
      throw CapacityExceeded(std::numeric_limits<size_type>::max(), storage_.max_capacity());
    }
    return a + b;
  }

  void check_index(size_type i, const char* call) const {
    if (i >= size_) {
      throw_invalid_argument(std::string("GrowableBuffer::") + call,
                             "index " + std::to_string(i) + " is not below size " + std::to_string(size_));
    }
  }

  /// Multi-pass host iterators of a host buffer: counted, reserved at once, converted in place.
  template <class InputIt>
  void append_host_elements(InputIt first, InputIt last) {
    size_type const count = static_cast<size_type>(std::distance(first, last));
    size_type const old_size = size_;
    reserve(checked_sum(old_size, count));
    T* out = data() + old_size;
    for (; first != last; ++first, ++out) *out = static_cast<T>(*first);
    size_ = old_size + count;  // only now: a conversion that throws leaves size() as it was
  }

  /// Single-pass host iterators: read into a host staging vector (never more elements than the
  /// room left below max_capacity()), then appended in one step. The buffer is touched only by
  /// that last step, which is itself all-or-nothing: the strong guarantee of append.
  template <class InputIt>
  void append_single_pass(InputIt first, InputIt last, Stream stream) {
    size_type const room = max_capacity() - size_;
    std::vector<T> staged;
    for (; first != last; ++first) {
      if (staged.size() == room) {
        // The first element that does not fit: the request is at least one element too many.
        throw CapacityExceeded(bytes_for(checked_sum(size_, room) + 1), storage_.max_capacity());
      }
      staged.push_back(static_cast<T>(*first));
    }
    append(std::span<const T>(staged), stream);
  }

  GrowableStorage storage_;
  size_type size_ = 0;
  Stream stream_ = nullptr;
};

/// A device vector that grows in place: pointers never move, growth never copies.
template <class T>
using GrowableBuffer = BasicGrowableBuffer<T, detail::DeviceSpace>;

/// The same container in host memory (HostBackend), e.g. for machines without a GPU.
template <class T>
using HostGrowableBuffer = BasicGrowableBuffer<T, detail::HostSpace>;

}  // namespace cuvmm
