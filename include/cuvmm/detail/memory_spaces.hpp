// cuvmm/detail/memory_spaces.hpp: what differs between device and host containers.
//
// A typed container knows its memory space at compile time only for its pointer/iterator type and
// for how bytes are moved; everything else is the same code on the same GrowableStorage. Device
// data movement is compiled into the library (src/containers/device_ops.cu), so this header has no
// device code and compiles with any C++20 compiler.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include <thrust/device_ptr.h>

#include <cuvmm/backend.hpp>
#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/host_backend.hpp>

namespace cuvmm::detail {

/// Copies `bytes` between any addresses (host, device, mapped) in order on `stream`.
void device_copy(void* dst, const void* src, std::size_t bytes, Stream stream);
/// Writes `count` copies of a `pattern_bytes`-byte pattern at `dst`, in order on `stream`.
void device_fill(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count, Stream stream);
/// Blocks until the work queued on `stream` is done.
void device_wait(Stream stream);
/// The same, for destructors: errors (a driver already shut down at exit) are ignored.
void device_wait_no_throw(Stream stream) noexcept;

/// The process-wide HostBackend with default options (2 MiB granularity), never destroyed.
HostBackend& default_host_backend();

struct DeviceSpace {
  static constexpr MemorySpace memory_space = MemorySpace::device;
  template <class T>
  using iterator = thrust::device_ptr<T>;
  template <class T>
  static iterator<T> make_iterator(T* p) noexcept {
    return thrust::device_ptr<T>(p);
  }
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

struct HostSpace {
  static constexpr MemorySpace memory_space = MemorySpace::host;
  template <class T>
  using iterator = T*;
  template <class T>
  static iterator<T> make_iterator(T* p) noexcept {
    return p;
  }
  static void copy(void* dst, const void* src, std::size_t bytes, Stream) {
    if (bytes != 0) std::memmove(dst, src, bytes);
  }
  static void fill(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count, Stream) {
    auto* out = static_cast<unsigned char*>(dst);
    for (std::size_t i = 0; i < count; ++i) std::memcpy(out + i * pattern_bytes, pattern, pattern_bytes);
  }
  static void wait(Stream) noexcept {}
  static void wait_no_throw(Stream) noexcept {}
  static Backend& default_backend(const GrowableOptions&) { return default_host_backend(); }
  static Backend& default_backend(int) { return default_host_backend(); }
};

/// `backend` if it serves `Space`'s memory; otherwise a cuvmm::Error naming the container.
template <class Space>
Backend& backend_of_space(Backend& backend, const char* container) {
  if (backend.space() != Space::memory_space) {
    throw_invalid_argument(container, "a " + std::string(to_string(Space::memory_space)) +
                                          " container needs a backend of that space, got '" +
                                          std::string(backend.name()) + "'");
  }
  return backend;
}

}  // namespace cuvmm::detail
