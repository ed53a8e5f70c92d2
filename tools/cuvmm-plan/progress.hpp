// progress.hpp: cuvmm-plan's progress on stderr. A bar redrawn in place when stderr is a
// terminal; otherwise one plain line per step (logs and CI keep every line readable). Each step
// shows the time since the run began and, once a step has finished, an estimate of what is left:
// the mean time of the finished steps times the steps still to do (steps differ in length, so it
// says "about").
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace cuvmm::plan {

/// "0:07" (m:ss) below an hour, "1:02:03" (h:mm:ss) from there; negative times count as 0.
std::string format_duration(double seconds);

/// "0:12 elapsed" when no step has finished yet, else "0:12 elapsed, about 0:36 left": the
/// estimate is elapsed / finished_steps * (total - finished_steps).
std::string format_progress_time(double elapsed_seconds, std::size_t finished_steps, std::size_t total);

/// Seconds on a steady clock (the default clock of Progress).
double steady_seconds();

class Progress {
 public:
  /// `total` steps; `terminal` chooses the bar (pass isatty(2)); `clock` gives seconds (tests pass
  /// their own).
  Progress(std::size_t total, bool terminal, std::function<double()> clock = steady_seconds)
      : total_(total), terminal_(terminal), clock_(std::move(clock)), started_(clock_()) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  /// Calls finish().
  ~Progress();

  /// Announces the step that starts now.
  void step(const std::string& label);
  /// Prints a line of its own (a note) without garbling the bar.
  void note(const std::string& text);
  /// Clears the bar's line; later output starts on a clean line.
  void finish();
  [[nodiscard]] std::size_t steps_done() const noexcept { return done_; }

 private:
  void draw(const std::string& label);
  std::size_t total_;
  bool terminal_;
  std::function<double()> clock_;
  double started_;
  std::size_t done_ = 0;
  std::string label_;
  bool finished_ = false;
};

}  // namespace cuvmm::plan
