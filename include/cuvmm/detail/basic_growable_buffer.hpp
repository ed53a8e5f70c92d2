// cuvmm/detail/basic_growable_buffer.hpp: the one template behind GrowableBuffer and HostGrowableBuffer.
//
// Owns: a GrowableStorage (the address range and its chunks), the element count and the buffer's
// stream. Space (HostSpace, DeviceSpace) says how iterators look and how bytes move.
// Invariants:
//  1. A buffer never moves its data: once data() is non-null it stays the same for the buffer's
//     life (null before the first growth of a default-constructed buffer and after a move).
//  2. Every growth is all-or-nothing (GrowableStorage invariant 2); errors change nothing.
//  3. size() <= capacity() <= max_capacity(); max_capacity() is fixed when the range is reserved.
// Never does: include Thrust or CUDA (the device iterator types come from Space), move data,
// wait for anything but the buffer's own stream (or the stream a call is given).
// See growable_buffer.hpp for the user-facing description.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuvmm/detail/host_space.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>

namespace cuvmm {

template <class T, class Space>
class BasicGrowableBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "cuvmm buffers hold trivially copyable types (moved as bytes)");
  static_assert(!std::is_const_v<T> && !std::is_volatile_v<T>, "cuvmm buffers hold unqualified types");
  static constexpr bool on_host = Space::memory_space == MemorySpace::host;

 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = typename Space::template iterator<T>;
  using const_iterator = typename Space::template iterator<const T>;
  using reverse_iterator = typename Space::template reverse_iterator<T>;
  using const_reverse_iterator = typename Space::template reverse_iterator<const T>;
  /// T& on the host; thrust::device_reference<T> (reads and writes copy one element) on the device.
  using reference = std::iter_reference_t<iterator>;
  using const_reference = std::iter_reference_t<const_iterator>;

  // --- construction ---------------------------------------------------------------------------

  /// An empty buffer that reserves nothing until it first grows (reserve, resize, append, ...):
  /// constructible anywhere, also where no GPU or driver is present. Its first growth reserves an
  /// address range on the default backend of its memory space with default GrowableOptions (device
  /// 0 for device memory; that is where a missing driver is reported) and data() is fixed from then.
  BasicGrowableBuffer() noexcept = default;
  /// An empty buffer on the default backend with these options; reserves its range now. Explicit
  /// and never chosen for a braced list of elements: `HostGrowableBuffer<int> x({1, 2})` holds the
  /// elements 1 and 2 (the initializer-list constructor); say `x(GrowableOptions{...})` for options.
  explicit BasicGrowableBuffer(GrowableOptions options, Stream stream = nullptr)
      : BasicGrowableBuffer(Space::default_backend(options), std::move(options), stream) {}
  /// An empty buffer on `backend` (which must serve this buffer's memory space).
  explicit BasicGrowableBuffer(Backend& backend, GrowableOptions options = {}, Stream stream = nullptr)
      : storage_(detail::backend_of_space<Space>(backend, "GrowableBuffer"), std::move(options)), stream_(stream) {}

  /// `n` elements, uninitialized (like rmm::device_uvector(n, stream) and resize(n)), default backend
  /// and options. The stream orders this buffer's data movement (see stream()).
  explicit BasicGrowableBuffer(size_type n, Stream stream = nullptr) : BasicGrowableBuffer(GrowableOptions{}, stream) {
    resize(n);
  }
  /// `n` copies of `value`, written on `stream`.
  BasicGrowableBuffer(size_type n, const T& value, Stream stream = nullptr)
      : BasicGrowableBuffer(GrowableOptions{}, stream) {
    resize(n, value, stream);
  }
  /// The elements of [first, last) (any iterator append() takes), copied on `stream`.
  template <std::input_iterator InputIt>
  BasicGrowableBuffer(InputIt first, InputIt last, Stream stream = nullptr)
      : BasicGrowableBuffer(GrowableOptions{}, stream) {
    append(first, last, stream);
  }
  /// The listed elements, copied on `stream`.
  BasicGrowableBuffer(std::initializer_list<T> elements, Stream stream = nullptr)
      : BasicGrowableBuffer(GrowableOptions{}, stream) {
    append(std::span<const T>(elements.begin(), elements.size()), stream);
  }

  /// A copy of `other`'s elements in a new buffer with the same backend and options, ordered on `stream`.
  BasicGrowableBuffer(const BasicGrowableBuffer& other, Stream stream) : stream_(stream) {
    if (other.storage_.bound()) storage_ = GrowableStorage(other.storage_.backend(), other.storage_.options());
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
  /// The same as max_capacity(), by std::vector's name (0 before a default-constructed buffer grows).
  [[nodiscard]] size_type max_size() const noexcept { return max_capacity(); }
  [[nodiscard]] size_type size_bytes() const noexcept { return size_ * sizeof(T); }
  /// Bytes of address space this buffer holds reserved (its whole range, mapped or not). By
  /// default as large as its devices' memory: see GrowableOptions::max_capacity_bytes.
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return storage_.max_capacity(); }

  // --- access -------------------------------------------------------------------------------

  /// Fixed for the buffer's life once it has memory (null before then and after a move).
  [[nodiscard]] pointer data() noexcept { return reinterpret_cast<pointer>(storage_.data()); }
  [[nodiscard]] const_pointer data() const noexcept { return reinterpret_cast<const_pointer>(storage_.data()); }
  [[nodiscard]] iterator begin() noexcept { return Space::make_iterator(data()); }
  [[nodiscard]] iterator end() noexcept { return Space::make_iterator(data() + size_); }
  [[nodiscard]] const_iterator begin() const noexcept { return cbegin(); }
  [[nodiscard]] const_iterator end() const noexcept { return cend(); }
  [[nodiscard]] const_iterator cbegin() const noexcept { return Space::make_iterator(data()); }
  [[nodiscard]] const_iterator cend() const noexcept { return Space::make_iterator(data() + size_); }
  [[nodiscard]] reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  [[nodiscard]] reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  [[nodiscard]] const_reverse_iterator rbegin() const noexcept { return crbegin(); }
  [[nodiscard]] const_reverse_iterator rend() const noexcept { return crend(); }
  [[nodiscard]] const_reverse_iterator crbegin() const noexcept { return const_reverse_iterator(cend()); }
  [[nodiscard]] const_reverse_iterator crend() const noexcept { return const_reverse_iterator(cbegin()); }

  /// Host buffers: element i, unchecked (like std::vector::operator[]).
  [[nodiscard]] T& operator[](size_type i) noexcept requires on_host { return data()[i]; }
  [[nodiscard]] const T& operator[](size_type i) const noexcept requires on_host { return data()[i]; }
  /// Host buffers: element i; std::out_of_range if i >= size() (as std::vector::at).
  [[nodiscard]] T& at(size_type i) requires on_host { return data()[checked_at(i)]; }
  [[nodiscard]] const T& at(size_type i) const requires on_host { return data()[checked_at(i)]; }
  /// Host buffers: the first / last element; cuvmm::Error (invalid argument) on an empty buffer.
  [[nodiscard]] T& front() requires on_host { return data()[checked_index(0, "front")]; }
  [[nodiscard]] const T& front() const requires on_host { return data()[checked_index(0, "front")]; }
  [[nodiscard]] T& back() requires on_host { return data()[checked_index(size_ - 1, "back")]; }
  [[nodiscard]] const T& back() const requires on_host { return data()[checked_index(size_ - 1, "back")]; }

  /// The address of element i (rmm's element_ptr), for kernels; cuvmm::Error if i >= size().
  [[nodiscard]] pointer element_ptr(size_type i) { return data() + checked_index(i, "element_ptr"); }
  [[nodiscard]] const_pointer element_ptr(size_type i) const { return data() + checked_index(i, "element_ptr"); }

  /// Copies element `i` to the host (waits for `stream`). Throws cuvmm::Error if i >= size().
  [[nodiscard]] T element(size_type i) const { return element(i, stream_); }
  [[nodiscard]] T element(size_type i, Stream stream) const {
    checked_index(i, "element");
    std::array<std::byte, sizeof(T)> bytes;  // T need not be default-constructible
    Space::copy(bytes.data(), data() + i, sizeof(T), stream);
    Space::wait(stream);
    return std::bit_cast<T>(bytes);
  }
  /// The first / last element copied to the host (rmm's front_element / back_element): waits for
  /// `stream`; cuvmm::Error on an empty buffer.
  [[nodiscard]] T front_element() const { return front_element(stream_); }
  [[nodiscard]] T front_element(Stream stream) const { return element(checked_index(0, "front_element"), stream); }
  [[nodiscard]] T back_element() const { return back_element(stream_); }
  [[nodiscard]] T back_element(Stream stream) const {
    return element(checked_index(size_ - 1, "back_element"), stream);
  }

  /// Writes element `i` from the host, ordered on `stream` (cudaMemcpyAsync: from pageable memory
  /// the value has been read when the call returns). Throws cuvmm::Error if i >= size().
  void set_element(size_type i, const T& value) { set_element(i, value, stream_); }
  void set_element(size_type i, const T& value, Stream stream) {
    checked_index(i, "set_element");
    Space::copy(data() + i, &value, sizeof(T), stream);
  }
  /// rmm's name for set_element(i, value, stream). If `value` lives in pinned memory it must stay
  /// alive until the stream reaches the copy, as with rmm.
  void set_element_async(size_type i, const T& value, Stream stream) { set_element(i, value, stream); }

  /// Copies all size() elements into `out` (host or device memory, out.size() >= size()) and
  /// waits for `stream`: on return `out` holds them. Goes through the library's device_ops, so code
  /// compiled by any C++ compiler can call it without linking the CUDA runtime. Throws
  /// cuvmm::Error (invalid argument) if `out` is too small, writing nothing.
  void copy_to(std::span<T> out) const { copy_to(out, stream_); }
  void copy_to(std::span<T> out, Stream stream) const {
    if (out.size() < size_) {
      throw_invalid_argument("GrowableBuffer::copy_to", "the destination holds " + std::to_string(out.size()) +
                                                            " elements, the buffer " + std::to_string(size_));
    }
    if (size_ == 0) return;  // nothing to copy or wait for (no driver needed)
    Space::copy(out.data(), data(), size_bytes(), stream);
    Space::wait(stream);
  }
  /// The elements in a new std::vector (copy_to on `stream`).
  [[nodiscard]] std::vector<T> to_vector() const { return to_vector(stream_); }
  [[nodiscard]] std::vector<T> to_vector(Stream stream) const {
    std::vector<T> out(size_);
    copy_to(std::span<T>(out), stream);
    return out;
  }

  /// Host buffers: equal sizes and equal elements (T's ==), as std::vector.
  friend bool operator==(const BasicGrowableBuffer& a, const BasicGrowableBuffer& b)
    requires on_host && std::equality_comparable<T>
  {
    return a.size_ == b.size_ && std::equal(a.data(), a.data() + a.size_, b.data());
  }

  // --- growth -------------------------------------------------------------------------------

  /// Makes capacity() >= n by mapping more memory. Never moves data.
  void reserve(size_type n) { reserve_bytes(bytes_for(n)); }

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

  /// Replaces the contents with `n` copies of `value`. Growth errors (CapacityExceeded,
  /// OutOfMemory) are thrown before anything changes.
  void assign(size_type n, const T& value) { assign(n, value, stream_); }
  void assign(size_type n, const T& value, Stream stream) {
    reserve(n);
    size_ = 0;
    resize(n, value, stream);
  }
  /// Replaces the contents with [first, last). If the range can be counted (a forward iterator),
  /// growth errors are thrown before anything changes; if reading the source throws, or a
  /// single-pass source runs past max_capacity(), the buffer is left empty (basic guarantee, as
  /// std::vector::assign), its memory still mapped.
  template <std::input_iterator InputIt>
  void assign(InputIt first, InputIt last) {
    assign(first, last, stream_);
  }
  template <std::input_iterator InputIt>
  void assign(InputIt first, InputIt last, Stream stream) {
    if constexpr (std::forward_iterator<InputIt>) reserve(static_cast<size_type>(std::distance(first, last)));
    size_ = 0;
    append(first, last, stream);
  }
  void assign(std::initializer_list<T> elements) { assign(elements, stream_); }
  void assign(std::initializer_list<T> elements, Stream stream) { assign(elements.begin(), elements.end(), stream); }

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
  void append(std::initializer_list<T> elements) { append(elements, stream_); }
  void append(std::initializer_list<T> elements, Stream stream) {
    append(std::span<const T>(elements.begin(), elements.size()), stream);
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
    } else if constexpr (Space::template wraps_pointer<InputIt> && std::is_same_v<Value, T>) {
      append(std::span<const T>(first.get(), static_cast<size_type>(last - first)), stream);
    } else if constexpr (Space::template single_pass<InputIt>) {
      append_single_pass(first, last, stream);
    } else if constexpr (on_host) {
      append_host_elements(first, last);
    } else {
      size_type const count = Space::distance(first, last);
      size_type const old_size = size_;
      reserve(checked_sum(old_size, count));
      Space::copy_converted(first, last, begin() + static_cast<difference_type>(old_size), stream);
      size_ = old_size + count;
    }
  }

  /// Appends every element of `range` (C++23's append_range): contiguous ranges of T are copied
  /// as bytes; other ranges as append(first, last) does. Same guarantees as append.
  template <std::ranges::input_range Range>
  void append_range(Range&& range) {
    append_range(std::forward<Range>(range), stream_);
  }
  template <std::ranges::input_range Range>
  void append_range(Range&& range, Stream stream) {
    using Value = std::remove_cv_t<std::ranges::range_value_t<Range>>;
    if constexpr (std::ranges::contiguous_range<Range> && std::ranges::sized_range<Range> &&
                  std::is_same_v<Value, T>) {
      append(std::span<const T>(std::ranges::data(range), std::ranges::size(range)), stream);
    } else if constexpr (std::ranges::common_range<Range>) {
      append(std::ranges::begin(range), std::ranges::end(range), stream);
    } else {
      auto common = std::views::common(range);
      append(std::ranges::begin(common), std::ranges::end(common), stream);
    }
  }

  void push_back(const T& value) { push_back(value, stream_); }
  void push_back(const T& value, Stream stream) { append(std::span<const T>(&value, 1), stream); }

  /// Removes the last element. Throws cuvmm::Error on an empty buffer.
  void pop_back() {
    if (empty()) throw_invalid_argument("GrowableBuffer::pop_back", "the buffer is empty");
    --size_;
  }

  /// insert at end() only (where it costs nothing: no element moves); anywhere else throws
  /// cuvmm::Error (invalid argument) and changes nothing. Returns an iterator to the first
  /// inserted element (end() before the call). Use a std::vector to insert in the middle.
  iterator insert(const_iterator pos, const T& value) {
    size_type const at = insertion_point(pos);
    push_back(value);
    return begin() + static_cast<difference_type>(at);
  }
  iterator insert(const_iterator pos, size_type n, const T& value) {
    size_type const at = insertion_point(pos);
    resize(checked_sum(size_, n), value);
    return begin() + static_cast<difference_type>(at);
  }
  template <std::input_iterator InputIt>
  iterator insert(const_iterator pos, InputIt first, InputIt last) {
    size_type const at = insertion_point(pos);
    append(first, last);
    return begin() + static_cast<difference_type>(at);
  }
  iterator insert(const_iterator pos, std::initializer_list<T> elements) {
    return insert(pos, elements.begin(), elements.end());
  }
  /// erase of a suffix only ([first, end()) or the last element; no element moves): the
  /// memory stays mapped, as with pop_back. Any other range throws cuvmm::Error (invalid argument)
  /// and changes nothing. Returns end().
  iterator erase(const_iterator first, const_iterator last) {
    auto const from = first - cbegin();
    if (last != cend() || from < 0 || from > static_cast<difference_type>(size_)) {
      throw_invalid_argument("GrowableBuffer::erase",
                             "only a suffix [first, end()) can be erased: elements never move");
    }
    size_ = static_cast<size_type>(from);
    return end();
  }
  iterator erase(const_iterator pos) {
    if (size_ == 0 || pos != cend() - 1) {
      throw_invalid_argument("GrowableBuffer::erase", "only the last element can be erased: elements never move");
    }
    --size_;
    return end();
  }

  /// size() becomes 0; the memory stays mapped (shrink_to_fit() gives it back).
  void clear() noexcept { size_ = 0; }

  /// Unmaps and releases the chunks not needed for size() elements, once the work queued on
  /// `stream` is done (a wait on that stream only, never the whole device). Other streams still using that memory
  /// are the caller's responsibility.
  void shrink_to_fit() { shrink_to_fit(stream_); }
  void shrink_to_fit(Stream stream) {
    storage_.give_back_step_ahead();  // mapped ahead, so no queued work uses it: nothing to wait for
    if (!storage_.can_shrink_to(size_bytes())) return;
    Space::wait(stream);  // queued work may still use the tail, and unmapping does not wait for it
    storage_.shrink_to(size_bytes());
  }

  // --- configuration and introspection ------------------------------------------------------

  /// Grants, changes or revokes the access of the devices in `grants` (e.g. a peer GPU) on all
  /// the memory mapped now and on later growth; see GrowableStorage::grant_access. A
  /// default-constructed buffer reserves its range first.
  void grant_access(std::span<const AccessGrant> grants) {
    bind();
    storage_.grant_access(grants);
  }

  /// Attaches a growth observer (growth_observer.hpp): told of every chunk mapped now and of each
  /// later one after it is mapped and before the growth that maps it returns, so before this
  /// buffer's copy into it is queued; told before each chunk is unmapped, after the wait for the
  /// buffer's stream that shrink_to_fit(), destruction and move assignment make. An observer that
  /// throws undoes the growth (size, capacity and contents as before). A default-constructed buffer
  /// reserves its range first. See GrowableStorage::add_observer.
  void add_observer(std::shared_ptr<GrowthObserver> observer) {
    bind();
    storage_.add_observer(std::move(observer));
  }
  /// Detaches `observer`, telling it of the unmapping of every chunk mapped now (nothing is unmapped).
  bool remove_observer(const GrowthObserver& observer) noexcept { return storage_.remove_observer(observer); }

  [[nodiscard]] Stream stream() const noexcept { return stream_; }
  void set_stream(Stream stream) noexcept { stream_ = stream; }
  [[nodiscard]] GrowableStats stats() const noexcept { return storage_.stats(); }
  [[nodiscard]] const GrowableStorage& storage() const noexcept { return storage_; }
  /// The backend; for a default-constructed buffer that has not grown yet, the default backend of
  /// its memory space (which may throw where there is no driver).
  [[nodiscard]] Backend& backend() const {
    return storage_.bound() ? storage_.backend() : Space::default_backend(GrowableOptions{});
  }

 private:
  /// A default-constructed buffer reserves its range on first use.
  void bind() {
    if (!storage_.bound()) storage_ = GrowableStorage(Space::default_backend(GrowableOptions{}), GrowableOptions{});
  }
  void reserve_bytes(std::size_t bytes) {
    if (bytes <= storage_.capacity()) return;
    bind();
    storage_.reserve(bytes);
  }

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

  size_type checked_index(size_type i, const char* call) const {
    if (size_ == 0 || i >= size_) {
      throw_invalid_argument(std::string("GrowableBuffer::") + call,
                             "index " + std::to_string(i) + " is not below size " + std::to_string(size_));
    }
    return i;
  }
  size_type checked_at(size_type i) const {
    if (i >= size_) {
      throw std::out_of_range("GrowableBuffer::at: index " + std::to_string(i) + " is not below size " +
                              std::to_string(size_));
    }
    return i;
  }
  size_type insertion_point(const_iterator pos) const {
    if (pos != cend()) {
      throw_invalid_argument("GrowableBuffer::insert", "only end() is an insertion point: elements never move");
    }
    return size_;
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
    bind();  // the room below max_capacity() is known once the range is reserved
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

}  // namespace cuvmm
