// cuvmm/growth_observer.hpp: listeners told of every range that becomes backed or stops being so.
//
// Libraries that register memory once (NCCL's ncclCommRegister, an RDMA NIC's memory region, a
// dmabuf export) assume the range does not change. A growable buffer changes exactly that: it maps
// new chunks behind its end and unmaps tail chunks when it shrinks. A GrowthObserver attached to a
// GrowableStorage (or a GrowableBuffer) is told of each chunk as it joins the buffer's backed range
// and again before it leaves, so that it can keep such registrations right.
//
// Contract, for one storage:
//  1. Every range is one whole chunk: `on_mapped` and `on_unmapping` come in pairs with the same
//     address and size. An observer never hears of an unmapping it was not told was mapped, and
//     every range it was told of is withdrawn exactly once (by a shrink, a failed growth, its
//     removal, a move assignment over the storage, or the storage's destruction).
//  2. `on_mapped(r)` runs after r is mapped and accessible to the storage's access list, before the
//     growth that mapped it returns: before any work the caller queues afterwards, on any stream, can
//     use r. It runs on the host and does not wait for any stream; work it queues itself is its own
//     to order. Chunks are reported in address order.
//  3. `on_unmapping(r)` runs on the host before r is unmapped, while it is still mapped. A
//     GrowableBuffer first waits for the work queued on its stream (shrink_to_fit, destruction,
//     move assignment), so no work on that stream still uses r; other streams are the caller's, as
//     for the unmap itself. Chunks are withdrawn in reverse address order.
//  4. An `on_mapped` that throws undoes the growth that called it: the observers already told of
//     this growth's chunks are told of their unmapping (in reverse), the new chunks are unmapped and
//     released, and size, capacity and statistics are as before the call (strong guarantee).
//     Attaching an observer that throws while it is told of the chunks mapped now attaches nothing.
//  5. Calls for one storage are never concurrent: they run on the thread that calls the storage's
//     growth, shrink, attach/detach, move or destructor. A step that the mapping thread prepares
//     ahead (GrowableOptions::map_ahead) is reported only when a growth takes it into capacity(),
//     on that growth's thread; a prepared step given back unused is never reported.
//  6. An observer must not call back into the storage that calls it. One observer attached to
//     several storages used from several threads must itself be thread-safe. A copy of a buffer
//     (the (other, stream) constructor) has no observers; swap and moves carry them along.
#pragma once

#include <cstddef>

#include <cuvmm/types.hpp>

namespace cuvmm {

/// One chunk of a buffer's backed range, as observers see it.
struct BackedRange {
  Address address = 0;     ///< where the chunk is mapped
  std::size_t bytes = 0;   ///< the chunk's size
  std::size_t offset = 0;  ///< address - the buffer's data(): where it lies in the buffer
  int device = 0;          ///< the device that holds the chunk
  ChunkHandle chunk{};     ///< the backend's handle of the chunk (valid until on_unmapping returns)
  friend constexpr bool operator==(const BackedRange&, const BackedRange&) = default;
};

/// A listener of a buffer's backed range (see the contract above).
class GrowthObserver {
 public:
  virtual ~GrowthObserver() = default;
  GrowthObserver() = default;
  GrowthObserver(const GrowthObserver&) = delete;
  GrowthObserver& operator=(const GrowthObserver&) = delete;

  /// `range` is backed and accessible. Throwing undoes the growth (contract 4).
  virtual void on_mapped(const BackedRange& range) = 0;
  /// `range` is about to be unmapped, or the observer is detached: drop what refers to it.
  virtual void on_unmapping(const BackedRange& range) noexcept = 0;
};

}  // namespace cuvmm
