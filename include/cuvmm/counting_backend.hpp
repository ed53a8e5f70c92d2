// cuvmm/counting_backend.hpp: a backend that forwards every call to another and counts them.
//
// Production code (the Arena's statistics) and test doubles (FaultInjectingBackend) both build on
// it: it counts each operation, then calls before_call(op), a hook a derived class may override to
// fail an acquiring call before it reaches the inner backend. Releasing operations (free_range,
// release_chunk, unmap) are noexcept by the Backend contract: they are counted and forwarded, never
// passed to the hook. granularity() and memory_info() are queries, not BackendOps: forwarded
// uncounted. It also adds up the time each operation spends in the inner backend (the driver's
// time, for the CUDA backend), so that a caller can tell it from its own. Thread-safe (the counters
// are atomic). Leak checks should read the *inner* backend's
// live_counts(), the real tally (forwarded here).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include <cuvmm/backend.hpp>

namespace cuvmm {

class CountingBackend : public Backend {
 public:
  explicit CountingBackend(Backend& inner) noexcept : inner_(&inner) {}

  /// Calls of `op` since construction, failed ones included.
  std::size_t calls(BackendOp op) const noexcept;
  /// Calls of every operation since construction.
  std::size_t total_calls() const noexcept;
  /// Time spent in the inner backend's `op` calls since construction, failed ones included
  /// (before_call's time not).
  std::chrono::nanoseconds time_in(BackendOp op) const noexcept;

  Backend& inner() const noexcept { return *inner_; }

  std::string_view name() const noexcept override { return "counting"; }
  MemorySpace space() const noexcept override { return inner_->space(); }
  // The default is re-declared: a call through the derived type sees only this declaration's.
  std::size_t granularity(const ChunkProperties& props, GranularityKind kind = GranularityKind::minimum) const override;
  MemoryInfo memory_info(int device) const override;
  Address reserve(std::size_t size, std::size_t alignment) override;
  void free_range(Address base, std::size_t size) noexcept override;
  ChunkHandle create_chunk(std::size_t size, const ChunkProperties& props) override;
  void release_chunk(ChunkHandle chunk) noexcept override;
  ChunkInfo chunk_info(ChunkHandle chunk) const override;
  void map(Address address, std::size_t size, ChunkHandle chunk) override;
  void unmap(Address address, std::size_t size) noexcept override;
  void set_access(Address address, std::size_t size, std::span<const AccessGrant> grants) override;
  UniqueFd export_posix_fd(ChunkHandle chunk) override;
  ChunkHandle import_posix_fd(int fd, std::size_t size) override;
  FabricHandle export_fabric(ChunkHandle chunk) override;
  ChunkHandle import_fabric(const FabricHandle& handle, std::size_t size) override;
  LiveCounts live_counts() const noexcept override { return inner_->live_counts(); }

 protected:
  /// Runs before an acquiring call is forwarded (after it was counted); throwing fails the call.
  virtual void before_call(BackendOp /*op*/) const {}

 private:
  void count(BackendOp op) const noexcept;
  class CallTimer;

  Backend* inner_;
  mutable std::array<std::atomic<std::size_t>, backend_op_count> calls_{};  // calls per operation, ever
  mutable std::array<std::atomic<std::int64_t>, backend_op_count> nanoseconds_{};  // time in them, ever
};

}  // namespace cuvmm
