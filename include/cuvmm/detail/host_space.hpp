// cuvmm/detail/host_space.hpp: the host memory space of the containers, free of CUDA and Thrust.
//
// Owns: HostSpace (how a host container names its iterators and moves its bytes) and the check that
// a backend serves a container's memory space.
// Invariants: including this header pulls in no Thrust and no CUDA header, so HostGrowableBuffer
// compiles with any C++20 compiler and costs what the standard headers cost.
// Never does: device work; DeviceSpace lives in memory_spaces.hpp.
#pragma once

#include <cstddef>
#include <cstring>
#include <iterator>
#include <string>

#include <cuvmm/backend.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/growable_storage.hpp>
#include <cuvmm/host_backend.hpp>

namespace cuvmm::detail {

/// The process-wide HostBackend with default options (2 MiB granularity), never destroyed.
HostBackend& default_host_backend();

struct HostSpace {
  static constexpr MemorySpace memory_space = MemorySpace::host;
  template <class T>
  using iterator = T*;
  template <class T>
  using reverse_iterator = std::reverse_iterator<T*>;
  template <class T>
  static iterator<T> make_iterator(T* p) noexcept {
    return p;
  }
  /// Iterators that wrap a raw pointer to this space's memory (none on the host: T* is contiguous).
  template <class It>
  static constexpr bool wraps_pointer = false;
  /// Host iterators that can be read only once are staged before the buffer changes.
  template <class It>
  static constexpr bool single_pass = !std::forward_iterator<It>;

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
