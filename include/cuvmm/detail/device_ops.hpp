// cuvmm/detail/device_ops.hpp: the library's device data movement, declared for any C++ compiler.
//
// Owns: nothing; declares the functions src/containers/device_ops.cu defines (runtime-API copies,
// fills and stream waits on memory the containers own). Code compiled by g++ that never links the
// CUDA runtime itself moves device data through these.
// Never does: include a CUDA or Thrust header.
#pragma once

#include <cstddef>

#include <cuvmm/types.hpp>

namespace cuvmm::detail {

/// Copies `bytes` between any addresses (host, device, mapped) in order on `stream`.
void device_copy(void* dst, const void* src, std::size_t bytes, Stream stream);
/// Writes `count` copies of a `pattern_bytes`-byte pattern at `dst`, in order on `stream`.
void device_fill(void* dst, const void* pattern, std::size_t pattern_bytes, std::size_t count, Stream stream);
/// Blocks until the work queued on `stream` is done.
void device_wait(Stream stream);
/// The same, for destructors: errors (a driver already shut down at exit) are ignored.
void device_wait_no_throw(Stream stream) noexcept;

}  // namespace cuvmm::detail
