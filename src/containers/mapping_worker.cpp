// StepAhead and MappingWorker: see the design note in mapping_worker.hpp.
//
// The worker is one thread for the whole process: steps ahead are short (one chunk each) and the
// driver serializes VMM calls anyway, so more threads would only queue inside the driver. It is a
// function-local static, so it is started on first use and joined at exit; a flag that outlives it
// turns later submissions away (a buffer destroyed after it has nothing queued: its owner took or
// the worker abandoned every step).
#include "mapping_worker.hpp"

#include <atomic>
#include <deque>
#include <span>
#include <thread>
#include <utility>

namespace cuvmm::detail {

void StepAhead::prepare() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (state_ != State::queued) return;  // taken before the worker got to it
    state_ = State::preparing;
  }
  try {
    // Until the step is handed over or finished, step_ is the worker's alone (invariant 1).
    PhysicalChunk chunk(*plan_.backend, plan_.bytes, plan_.props);
    check_compression(chunk, plan_.compression);  // required but refused: the local chunk is released
    {
      std::lock_guard lock(mutex_);
      step_.chunk = std::move(chunk);
      ++chunks_created_;
    }
    if (!may_continue()) return;
    Mapping mapping(*plan_.range, plan_.offset, step_.chunk);
    {
      std::lock_guard lock(mutex_);
      step_.mapping = std::move(mapping);
    }
    if (!may_continue()) return;
    set_access(std::span<Mapping>(&step_.mapping, 1), plan_.access);
    {
      std::lock_guard lock(mutex_);
      step_.accessible = true;
      ++step_.access_calls;
    }
    finish(State::ready);
  } catch (...) {
    give_back();
    finish(State::failed);
  }
}

void StepAhead::give_back() noexcept {
  // Unmapped and released here, on the worker, before the owner may free the range; outside the
  // mutex (driver calls), after taking the objects under it (the owner reads their size).
  PreparedStep made;
  {
    std::lock_guard lock(mutex_);
    made.mapping = std::move(step_.mapping);
    made.chunk = std::move(step_.chunk);
  }
}  // `made` unmaps, then releases

bool StepAhead::may_continue() noexcept {
  std::lock_guard lock(mutex_);
  if (!wanted_) return true;
  state_ = State::handed_over;
  changed_.notify_all();
  return false;
}

void StepAhead::finish(State state) noexcept {
  std::lock_guard lock(mutex_);
  state_ = state;
  changed_.notify_all();
}

void StepAhead::abandon() noexcept {
  std::lock_guard lock(mutex_);
  if (state_ != State::queued) return;
  state_ = State::failed;
  changed_.notify_all();
}

TakenStep StepAhead::take() noexcept {
  std::unique_lock lock(mutex_);
  if (state_ == State::preparing) {
    wanted_ = true;
    changed_.wait(lock, [this] { return state_ != State::preparing; });
  }
  TakenStep taken{std::move(step_), state_ == State::failed, chunks_created_, plan_.bytes, plan_.props.device};
  state_ = State::taken;
  return taken;
}

void StepAhead::settle() const noexcept {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return state_ != State::queued && state_ != State::preparing; });
}

StepAhead::Counts StepAhead::counts() const noexcept {
  std::lock_guard lock(mutex_);
  return {step_.chunk.size(), chunks_created_, step_.access_calls, state_ == State::failed};
}

namespace {

/// Set once the worker has stopped: outlives it (a trivially destructible global).
std::atomic<bool> worker_stopped{false};

class Worker {
 public:
  Worker() : thread_([this] { run(); }) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    std::deque<std::shared_ptr<StepAhead>> left;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      left.swap(queue_);
      worker_stopped.store(true, std::memory_order_release);
    }
    work_.notify_all();
    for (const auto& step : left) step->abandon();
    thread_.join();  // the step in progress, if any, is finished: one step's driver calls at most
  }

  bool submit(const std::shared_ptr<StepAhead>& step) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      queue_.push_back(step);
    }
    work_.notify_one();
    return true;
  }

 private:
  void run() {
    for (;;) {
      std::shared_ptr<StepAhead> step;
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        step = std::move(queue_.front());
        queue_.pop_front();
      }
      step->prepare();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_;                  // signalled on a new step and on stopping
  std::deque<std::shared_ptr<StepAhead>> queue_;  // steps not started, oldest first
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace

bool MappingWorker::submit(const std::shared_ptr<StepAhead>& step) noexcept {
  if (worker_stopped.load(std::memory_order_acquire)) return false;
  try {
    static Worker worker;
    return worker.submit(step);
  } catch (...) {  // the thread could not be started, or the queue could not grow: map on demand
    return false;
  }
}

}  // namespace cuvmm::detail
