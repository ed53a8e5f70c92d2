// cuvmm/fault_injecting_backend.hpp: a backend that forwards to another and fails the k-th call.
//
// For cuvmm's own tests and for users' failure testing: arm it to fail the k-th call (1-based,
// counted from arming) of a chosen set of operations; that call throws without reaching the inner
// backend, every other call is forwarded. It counts calls per operation (CountingBackend, which it
// builds on). Releasing operations (free_range, release_chunk, unmap) are always forwarded: they
// are noexcept by contract.
// Leak checks should read the *inner* backend's live_counts(), the real tally.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <mutex>

#include <cuvmm/counting_backend.hpp>

namespace cuvmm {

class FaultInjectingBackend final : public CountingBackend {
 public:
  /// What an injected failure throws.
  enum class Failure {
    error,          ///< cuvmm::Error whose call() is the operation's name, context "injected fault"
    out_of_memory,  ///< cuvmm::OutOfMemory, as if the device were full
  };

  explicit FaultInjectingBackend(Backend& inner) noexcept : CountingBackend(inner) {}

  /// Fails the k-th call (k >= 1) from now of any operation in `ops`; an empty list means every
  /// operation that can fail. Resets the counters of calls since arming.
  void fail_nth(std::size_t k, std::initializer_list<BackendOp> ops = {}, Failure failure = Failure::error);
  /// Stops injecting.
  void disarm() noexcept;
  /// Whether the armed failure was thrown.
  bool fired() const noexcept;

  // calls(op), total_calls() and inner() come from CountingBackend.

  std::string_view name() const noexcept override { return "fault-injecting"; }

 private:
  /// Throws if this call of `op` is the armed one.
  void before_call(BackendOp op) const override;

  mutable std::mutex mutex_;                                       // guards the arming state below
  std::array<bool, backend_op_count> armed_ops_{};                 // operations the armed failure targets
  std::size_t fail_at_ = 0;                                        // 1-based call to fail; 0: disarmed
  mutable std::size_t calls_since_arming_ = 0;                     // targeted calls since fail_nth()
  mutable bool fired_ = false;                                     // the armed failure was thrown
  Failure failure_ = Failure::error;                               // what to throw
};

}  // namespace cuvmm
