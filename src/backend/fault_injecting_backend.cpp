// FaultInjectingBackend: forwards every call to an inner backend, and fails one chosen call.
//
// What it owns: nothing but its arming state (CountingBackend, its base, counts and forwards). The inner backend owns every object; this wrapper never
// holds a handle, so a failure it injects cannot leak anything by itself: it throws before the
// inner backend is reached, exactly as a driver call that failed without side effects.
//
// Arming: fail_nth(k, ops) fails the k-th call, counted from arming, of the operations in `ops`
// (all acquiring operations when empty). It fires once, then the wrapper only forwards again.
// Releasing operations (free_range, release_chunk, unmap) are noexcept by the Backend contract:
// they are counted and forwarded, never failed. granularity() and memory_info() are queries, not
// BackendOps: they are forwarded uncounted.
//
// Thread-safety: one mutex guards the arming state; the counters are atomic; the inner call runs
// outside the lock.
#include <cuvmm/fault_injecting_backend.hpp>

#include <string>

#include <cuvmm/error.hpp>

namespace cuvmm {
namespace {

constexpr std::size_t index_of(BackendOp op) noexcept { return static_cast<std::size_t>(op); }

constexpr bool is_releasing(BackendOp op) noexcept {
  return op == BackendOp::free_range || op == BackendOp::release_chunk || op == BackendOp::unmap;
}

}  // namespace

void FaultInjectingBackend::fail_nth(std::size_t k, std::initializer_list<BackendOp> ops, Failure failure) {
  if (k == 0) throw_invalid_argument("FaultInjectingBackend::fail_nth", "k counts from 1; 0 names no call");
  std::array<bool, backend_op_count> targets{};
  if (ops.size() == 0) {
    for (std::size_t i = 0; i < backend_op_count; ++i) targets[i] = !is_releasing(static_cast<BackendOp>(i));
  }
  for (BackendOp op : ops) {
    if (index_of(op) >= backend_op_count) {
      throw_invalid_argument("FaultInjectingBackend::fail_nth",
                             "unknown operation " + std::to_string(index_of(op)));
    }
    if (is_releasing(op)) {
      throw_invalid_argument("FaultInjectingBackend::fail_nth",
                             std::string(to_string(op)) + " releases and is noexcept: it cannot be failed");
    }
    targets[index_of(op)] = true;
  }
  std::lock_guard lock(mutex_);
  armed_ops_ = targets;
  fail_at_ = k;
  calls_since_arming_ = 0;
  fired_ = false;
  failure_ = failure;
}

void FaultInjectingBackend::disarm() noexcept {
  std::lock_guard lock(mutex_);
  fail_at_ = 0;
  armed_ops_ = {};
}

bool FaultInjectingBackend::fired() const noexcept {
  std::lock_guard lock(mutex_);
  return fired_;
}

void FaultInjectingBackend::before_call(BackendOp op) const {
  Failure failure{};
  {
    std::lock_guard lock(mutex_);
    if (fail_at_ == 0 || !armed_ops_[index_of(op)]) return;
    // One shot: the counter moves past fail_at_ and never meets it again.
    if (++calls_since_arming_ != fail_at_) return;
    fired_ = true;
    failure = failure_;
  }
  // Failure::out_of_memory is thrown as OutOfMemory (what allocators catch) but keeps its code,
  // injected_fault, so a test can tell it from a real exhaustion.
  ErrorDetails details = cuvmm_error_details(ErrorCode::injected_fault, to_string(op), "injected fault");
  if (failure == Failure::out_of_memory) throw OutOfMemory(std::move(details));
  throw Error(std::move(details));
}

}  // namespace cuvmm
