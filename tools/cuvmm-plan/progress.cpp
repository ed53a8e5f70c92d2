// progress.cpp: see progress.hpp.
#include "progress.hpp"

#include <algorithm>
#include <cstdio>

namespace cuvmm::plan {

Progress::~Progress() { finish(); }

void Progress::finish() {
  if (terminal_ && done_ != 0 && !finished_) std::fprintf(stderr, "\r\033[K");
  finished_ = true;
}

void Progress::step(const std::string& label) {
  ++done_;
  finished_ = false;
  label_ = label;
  draw(label);
}

void Progress::note(const std::string& text) {
  if (terminal_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "cuvmm-plan: %s\n", text.c_str());
  if (terminal_ && done_ != 0) draw(label_);
}

void Progress::draw(const std::string& label) {
  std::size_t const shown = std::min(done_, total_);
  if (!terminal_) {
    std::fprintf(stderr, "cuvmm-plan: [%zu/%zu] %s\n", shown, total_, label.c_str());
    return;
  }
  constexpr std::size_t width = 30;
  std::size_t const filled = total_ == 0 ? width : width * (shown - 1) / total_;  // steps before this one are done
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r\033[K[%s] %zu/%zu %s", bar.c_str(), shown, total_, label.c_str());
  std::fflush(stderr);
}

}  // namespace cuvmm::plan
