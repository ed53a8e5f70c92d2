// cuvmm/fault_injecting_backend.hpp: a backend that forwards to another and fails the k-th call.
//
// For cuvmm's own tests and for users' failure testing: arm it to fail the k-th call (1-based,
// counted from arming) of a chosen set of operations; that call throws without reaching the inner
// backend, every other call is forwarded. It counts calls per operation. Releasing operations
// (free_range, release_chunk, unmap) are always forwarded: they are noexcept by contract.
// Leak checks should read the *inner* backend's live_counts(), the real tally.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <mutex>

#include <cuvmm/backend.hpp>

namespace cuvmm {

class FaultInjectingBackend final : public Backend {
 public:
  /// What an injected failure throws.
  enum class Failure {
    error,          ///< cuvmm::Error whose call() is the operation's name, context "injected fault"
    out_of_memory,  ///< cuvmm::OutOfMemory, as if the device were full
  };

  explicit FaultInjectingBackend(Backend& inner) noexcept : inner_(&inner) {}

  /// Fails the k-th call (k >= 1) from now of any operation in `ops`; an empty list means every
  /// operation that can fail. Resets the counters of calls since arming.
  void fail_nth(std::size_t k, std::initializer_list<BackendOp> ops = {}, Failure failure = Failure::error);
  /// Stops injecting.
  void disarm() noexcept;
  /// Whether the armed failure was thrown.
  bool fired() const noexcept;

  /// Calls of `op` since construction, failed ones included.
  std::size_t calls(BackendOp op) const noexcept;
  /// Calls of every operation since construction.
  std::size_t total_calls() const noexcept;

  Backend& inner() const noexcept { return *inner_; }

  std::string_view name() const noexcept override { return "fault-injecting"; }
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

 private:
  /// Counts a call of `op` and throws if it is the armed one.
  void on_call(BackendOp op) const;

  Backend* inner_;
  mutable std::mutex mutex_;                                       // guards the arming state below
  mutable std::array<std::size_t, backend_op_count> calls_{};      // calls per operation, ever
  std::array<bool, backend_op_count> armed_ops_{};                 // operations the armed failure targets
  std::size_t fail_at_ = 0;                                        // 1-based call to fail; 0: disarmed
  mutable std::size_t calls_since_arming_ = 0;                     // targeted calls since fail_nth()
  mutable bool fired_ = false;                                     // the armed failure was thrown
  Failure failure_ = Failure::error;                               // what to throw
};

}  // namespace cuvmm
