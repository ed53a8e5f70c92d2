// stream_order.hpp: how the Arena orders the reuse of freed memory between streams.
//
// One reusable marker per stream (a CUDA event without timing on the device; nothing at all on the
// host, where every operation is finished when it returns). The Arena marks a stream's work so far
// when another stream takes memory that stream freed, makes the taker wait for the mark on the
// device (no host wait, no device-wide sync), and waits on the host only before it unmaps memory
// (for pages it moved, only once their old addresses are unmapped: done() tells whether it must).
//
// A stream that is capturing a CUDA graph cannot be marked: the mark would be captured into the
// graph instead of recorded, a stream made to wait for it would join the capture, and a host wait
// for it fails and invalidates the capture. So the Arena lends no memory freed on such a stream to
// another stream, and reclaims none of it, until the capture ends (can_mark()). Nor may a capturing
// stream wait for a mark recorded outside its capture (CUDA refuses it): the Arena waits on the
// host instead before such a stream takes memory another stream freed. wait() and done() relax the
// calling thread's capture mode for their call, so that they work while any stream captures.
// Internal to the library; the CUDA runtime calls it makes live in stream_order.cpp.
#pragma once

#include <memory>

#include <cuvmm/types.hpp>

namespace cuvmm::detail {

class StreamOrder {
 public:
  using Marker = void*;  // a cudaEvent_t on the device; null on the host
  virtual ~StreamOrder() = default;
  virtual Marker create_marker() = 0;
  virtual void destroy_marker(Marker marker) noexcept = 0;
  /// Marks the work queued on `stream` so far.
  virtual void mark(Marker marker, Stream stream) = 0;
  /// Work queued on `waiter` from now on runs after the marked work.
  virtual void order_after(Stream waiter, Marker marker) = 0;
  /// Blocks the calling thread until the marked work is done.
  virtual void wait(Marker marker) = 0;
  /// Whether the marked work is done (without waiting).
  [[nodiscard]] virtual bool done(Marker marker) = 0;
  /// Whether mark() may be called for `stream` now: false while it captures a CUDA graph (or the
  /// driver cannot say, as for the legacy default stream while a blocking stream captures).
  [[nodiscard]] virtual bool can_mark(Stream stream) = 0;
};

/// The ordering for memory of `space` on `device` (events are made on that device).
std::unique_ptr<StreamOrder> make_stream_order(MemorySpace space, int device);

}  // namespace cuvmm::detail
