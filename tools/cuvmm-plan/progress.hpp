// progress.hpp: cuvmm-plan's progress on stderr. A bar redrawn in place when stderr is a
// terminal; otherwise one plain line per step (logs and CI keep every line readable).
#pragma once

#include <cstddef>
#include <string>

namespace cuvmm::plan {

class Progress {
 public:
  /// `total` steps; `terminal` chooses the bar (pass isatty(2)).
  Progress(std::size_t total, bool terminal) : total_(total), terminal_(terminal) {}
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
  std::size_t done_ = 0;
  std::string label_;
  bool finished_ = false;
};

}  // namespace cuvmm::plan
