// mapping_worker.hpp: growth steps prepared ahead of need, off the caller's thread (DESIGN.md invariant 6).
//
// A growable buffer under the fast policy may prepare its next growth step before an append needs
// it, so that the step's driver calls (create, map, grant access: ~60-90 µs on an H200) overlap the
// GPU's work instead of delaying the next append. StepAhead is the handoff of one such step between
// its owner (the GrowableStorage) and the process's one MappingWorker thread:
//
//   queued -> preparing -> ready          the worker made the whole step
//                       -> handed_over    the owner asked for it midway: it gets what exists
//                       -> failed         a driver call failed: the worker gave back what it made
//   any of these -> taken                 the owner took it (take()); the worker never touches it again
//
// Invariants:
//  1. One thread at a time works on the prepared objects: the worker while the state is preparing,
//     the owner once it has taken the step. The handoff happens under the mutex, between two
//     driver calls, so an owner that needs the step waits at most for the worker's current call.
//  2. The worker touches the owner's address range only while preparing. Every owner operation
//     that changes or frees the range (growth, shrinking, moves, destruction) takes the step first.
//  3. A failed preparation leaves nothing behind and is not reported: the growth that needs the
//     step makes it itself, and fails (or not) exactly as it would have without mapping ahead.
// Never does: throw from the worker, call the driver under the mutex, make more than one step.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <cuvmm/address_range.hpp>
#include <cuvmm/backend.hpp>
#include <cuvmm/mapping.hpp>
#include <cuvmm/physical_chunk.hpp>

namespace cuvmm::detail {

/// What one step ahead is to make: a chunk of `bytes` mapped at `offset` in `range`, with `access`.
struct StepPlan {
  Backend* backend = nullptr;
  AddressRange* range = nullptr;  // the owner's range: stays put until the owner has taken the step
  std::size_t offset = 0;         // where the mapped prefix ends now
  std::size_t bytes = 0;          // step_ahead_bytes(), within the range
  ChunkProperties props{};
  Compression compression = Compression::none;
  std::vector<AccessGrant> access{};
};

/// The objects of a step prepared ahead, complete or not. Destroying it unmaps, then releases.
struct PreparedStep {
  PhysicalChunk chunk;       // declared first: released after the mapping
  Mapping mapping;           // empty until mapped
  bool accessible = false;   // access granted on the mapping
  std::size_t access_calls = 0;
};

/// What the owner gets from take().
struct TakenStep {
  PreparedStep step;               // empty when the step failed or was never started
  bool failed = false;             // the preparation failed (and gave back what it made)
  std::size_t chunks_created = 0;  // chunks the worker created for this step (0 or 1)
  std::size_t planned_bytes = 0;   // StepPlan::bytes: a growth that takes the step makes it whole
  int device = 0;                  // StepPlan::props.device
};

class StepAhead {
 public:
  explicit StepAhead(StepPlan plan) : plan_(std::move(plan)) {}
  StepAhead(const StepAhead&) = delete;
  StepAhead& operator=(const StepAhead&) = delete;

  /// The worker's side: creates, maps and grants access, and after each driver call hands the step
  /// over if the owner asked for it. Does nothing for a step already taken.
  void prepare() noexcept;
  /// The worker stopped (process exit) before it started this step: it fails, leaving nothing.
  void abandon() noexcept;

  /// The owner's side: the whole step if ready; what exists after the worker's current driver call
  /// if it is being prepared; nothing if it never started or failed. The worker is done with it,
  /// and a growth that takes it finishes the planned step (unless it failed).
  [[nodiscard]] TakenStep take() noexcept;
  /// Waits until the worker is done with the step: ready, handed over, failed or taken.
  void settle() const noexcept;
  /// What the step holds and has cost so far, for the owner's statistics.
  struct Counts {
    std::size_t bytes_held = 0;      // the chunk, created (mapped or not): the slack it adds
    std::size_t chunks_created = 0;  // 0 or 1
    std::size_t access_calls = 0;    // 0 or 1
    bool failed = false;             // the preparation failed (and holds nothing)
  };
  [[nodiscard]] Counts counts() const noexcept;

 private:
  enum class State : std::uint8_t { queued, preparing, ready, handed_over, failed, taken };

  /// After a driver call: whether the worker may go on (false: the step was handed over).
  bool may_continue() noexcept;
  /// A driver call failed: gives back what the step made so far.
  void give_back() noexcept;
  /// Ends preparation in `state` and wakes the owner.
  void finish(State state) noexcept;

  const StepPlan plan_;  // fixed at construction: read by both sides without the mutex
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;  // signalled whenever state_ leaves preparing
  State state_ = State::queued;
  bool wanted_ = false;           // the owner is waiting in take() for the worker to stop
  PreparedStep step_;             // the worker's while preparing, the owner's once taken
  std::size_t chunks_created_ = 0;
};

/// The process's one mapping thread, started on the first submission, stopped (and joined) at
/// process exit; steps still queued then are abandoned.
class MappingWorker {
 public:
  /// Queues `step` for preparation. False when no worker can take it (it stopped, or its thread
  /// could not be started): the step is then not prepared, and growth maps on demand.
  static bool submit(const std::shared_ptr<StepAhead>& step) noexcept;
};

}  // namespace cuvmm::detail
