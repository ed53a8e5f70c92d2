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
// Mapping ahead: from its second growth step on and while it is smaller than the hide size, a
// device buffer under the fast policy has its next step made by a process-wide mapping thread while
// the GPU works (GrowableOptions::map_ahead), so that the driver calls of a step overlap the work on
// the previous one (larger steps are hidden behind the GPU's fills without it). Nothing observable
// changes but the memory held: stats().bytes_prepared, at most one step, given back by
// shrink_to_fit().
//
// Copying needs a stream, so there is no implicit copy: use the (other, stream) constructor.
// Moves are noexcept and leave the source empty, with no address range.
//
// Construction: a default-constructed buffer reserves nothing until it first grows, so it can be
// constructed anywhere (a member, a global, a machine without a driver); its first growth reserves
// on the default backend (device 0) and reports a missing driver there. (n), (n, value),
// (first, last) and {elements} take an optional stream last, as rmm does; (n) leaves the elements
// uninitialized like resize(n). Options are only ever taken explicitly: `x({1, 2})` holds 1 and 2.
//
// Errors: growth past max_capacity() throws CapacityExceeded, a std::length_error (what
// std::vector throws past max_size()); physical memory running out throws OutOfMemory, a
// std::bad_alloc; both carry cuvmm's error details and change nothing. Other misuse (an index past
// size(), insert/erase anywhere but the end) throws cuvmm::Error; at() throws std::out_of_range.
//
// Reservation: by default a buffer reserves as much address space as its devices have memory
// (reserved_bytes() says how much) while the process's budget for such ranges lasts (64 TiB, half
// a process's address space), then 4 GiB (DefaultReservationLimits, growable_storage.hpp): 468
// device-sized buffers on an H200, then ~16,000 of 4 GiB. Programs that know their sizes set
// GrowableOptions::max_capacity_bytes, or give buffers a ReservationPool (reservation_pool.hpp):
// each takes a fixed slot (1 GiB by default) of a few shared reservations.
//
// HostGrowableBuffer<T> is in host_growable_buffer.hpp, which includes no Thrust; this header adds
// the device container and includes Thrust's iterator headers (and, under nvcc, its algorithms).
#pragma once

#include <cstddef>
#include <iterator>

#include <thrust/device_ptr.h>

#include <cuvmm/detail/basic_growable_buffer.hpp>
#include <cuvmm/detail/memory_spaces.hpp>
#include <cuvmm/host_growable_buffer.hpp>

#if defined(__CUDACC__)
#include <thrust/copy.h>
#include <thrust/distance.h>
#include <thrust/execution_policy.h>
#endif

namespace cuvmm {

namespace detail {
template <class>
inline constexpr bool always_false = false;
}  // namespace detail

/// Iterators of other types (Thrust fancy iterators, conversions): counted and copied by Thrust.
template <class It>
std::size_t detail::DeviceSpace::distance(It first, It last) {
#if defined(__CUDACC__)
  return static_cast<std::size_t>(thrust::distance(first, last));
#else
  static_assert(detail::always_false<It>,
                "appending from this iterator runs a Thrust kernel: compile this file with nvcc, "
                "or append a contiguous range of T");
  (void)first;
  (void)last;
  return 0;
#endif
}
template <class It, class Out>
void detail::DeviceSpace::copy_converted(It first, It last, Out out, Stream stream) {
#if defined(__CUDACC__)
  thrust::copy(thrust::cuda::par_nosync.on(stream), first, last, out);
#else
  static_assert(detail::always_false<It>,
                "appending from this iterator runs a Thrust kernel: compile this file with nvcc, "
                "or append a contiguous range of T");
  (void)first;
  (void)last;
  (void)out;
  (void)stream;
#endif
}

/// A device vector that grows in place: pointers never move, growth never copies.
template <class T>
using GrowableBuffer = BasicGrowableBuffer<T, detail::DeviceSpace>;

}  // namespace cuvmm
