// cuvmm/nccl_observer.hpp: NCCL user-buffer registrations that follow a buffer's growth
// (libcuvmm_nccl, built where NCCL is found; pkg-config cuvmm-nccl).
//
// NCCL registers a buffer once (ncclCommRegister; ncclCommWindowRegister for symmetric windows) and
// looks registrations up by address. A growable buffer maps new chunks behind its end and unmaps
// tail chunks when it shrinks, so NcclObserver, a GrowthObserver (growth_observer.hpp), registers
// each chunk with the communicator after it is mapped, before the growth returns, and deregisters it
// before it is unmapped. One registration per chunk: every registered range is backed by exactly
// one physical allocation, which every NCCL version handles (a range over several allocations was
// registered only in part by some). A collective on a span that covers several chunks finds one
// registration per chunk.
//
// Windows (NcclObserverOptions::windows, where the NCCL in use has ncclCommWindowRegister): window
// registration is a collective over the communicator, so every rank must grow its buffer by the
// same chunks in the same order (same options, same sizes); a rank that does not blocks the others.
// Without windows, registration is local to the rank.
//
// Errors: an NCCL call that fails throws cuvmm::Error (ErrorDomain::nccl, the ncclResult_t and
// NCCL's text), which undoes the growth (growth_observer.hpp contract 4). The communicator must
// outlive every buffer the observer is attached to, or the observer must be detached first.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include <cuvmm/growth_observer.hpp>

// NCCL's communicator type, declared here so that this header needs no nccl.h.
struct ncclComm;

namespace cuvmm {

struct NcclObserverOptions {
  /// Also register each chunk as an NCCL window (ncclCommWindowRegister, a collective); refused with
  /// cuvmm::Unsupported at construction where the NCCL in use has no windows.
  bool windows = false;
  /// The window flags (NCCL_WIN_DEFAULT 0, NCCL_WIN_COLL_SYMMETRIC 1).
  int window_flags = 0;
};

class NcclObserver final : public GrowthObserver {
 public:
  explicit NcclObserver(ncclComm* comm, NcclObserverOptions options = {});

  /// One chunk registered now.
  struct Registration {
    BackedRange range;
    void* handle = nullptr;  ///< ncclCommRegister's handle
    void* window = nullptr;  ///< ncclWindow_t, or null without windows
  };
  /// The registrations held now, in the order they were made.
  [[nodiscard]] std::vector<Registration> registrations() const;
  /// ncclCommRegister calls that succeeded, and ncclCommDeregister calls made, ever.
  [[nodiscard]] std::size_t registered_total() const noexcept;
  [[nodiscard]] std::size_t deregistered_total() const noexcept;
  /// Whether the NCCL this library was built against has windows (ncclCommWindowRegister).
  [[nodiscard]] static bool has_windows() noexcept;

  void on_mapped(const BackedRange& range) override;
  void on_unmapping(const BackedRange& range) noexcept override;

 private:
  ncclComm* comm_;
  NcclObserverOptions options_;
  mutable std::mutex mutex_;  // one observer may serve several buffers on several threads
  std::vector<Registration> held_;
  std::size_t registered_ = 0;
  std::size_t deregistered_ = 0;
};

}  // namespace cuvmm
