// cuvmm/detail/memory_spaces.hpp: what differs between device and host containers.
//
// A typed container knows its memory space at compile time only for its pointer/iterator type and
// for how bytes are moved; everything else is the same code on the same GrowableStorage. Device
// data movement is compiled into the library (src/containers/device_ops.cu, declared in
// device_ops.hpp), so this header has no device code and compiles with any C++20 compiler; it
// includes Thrust only for the device iterator types. HostSpace is in host_space.hpp, which
// includes no Thrust.
#pragma once

#include <concepts>
#include <cstddef>
#include <iterator>
#include <type_traits>

#include <thrust/device_ptr.h>
#include <thrust/iterator/iterator_traits.h>
#include <thrust/iterator/reverse_iterator.h>

#include <cuvmm/backend.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/detail/device_ops.hpp>
#include <cuvmm/detail/host_space.hpp>
#include <cuvmm/growable_storage.hpp>

namespace cuvmm::detail {

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

struct DeviceSpace {
  static constexpr MemorySpace memory_space = MemorySpace::device;
  template <class T>
  using iterator = thrust::device_ptr<T>;
  template <class T>
  using reverse_iterator = thrust::reverse_iterator<thrust::device_ptr<T>>;
  template <class T>
  static iterator<T> make_iterator(T* p) noexcept {
    return thrust::device_ptr<T>(p);
  }
  /// thrust::device_ptr wraps a raw device pointer: appended as bytes, like a contiguous range.
  template <class It>
  static constexpr bool wraps_pointer = is_device_ptr<It>::value;
  template <class It>
  static constexpr bool single_pass = single_pass_host_iterator<It>();

  /// Counts and copies iterators that are neither raw nor wrapped pointers (defined in
  /// growable_buffer.hpp: they need nvcc and Thrust's algorithms).
  template <class It>
  static std::size_t distance(It first, It last);
  template <class It, class Out>
  static void copy_converted(It first, It last, Out out, Stream stream);

  static void copy(void* dst, const void* src, std::size_t bytes, Stream stream) {
    device_copy(dst, src, bytes, stream);
  }
  static void fill(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count, Stream stream) {
    device_fill(dst, pattern, pattern_bytes, count, stream);
  }
  static void wait(Stream stream) { device_wait(stream); }
  static void wait_no_throw(Stream stream) noexcept { device_wait_no_throw(stream); }
  static Backend& default_backend(const GrowableOptions& options) {
    return default_backend(options.devices.empty() ? 0 : options.devices.front());
  }
  static Backend& default_backend(int device) { return cuda_backend(device); }
};

}  // namespace cuvmm::detail
