// progress.cpp: see progress.hpp.
#include "progress.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace cuvmm::plan {

std::string format_duration(double seconds) {
  auto const whole = static_cast<unsigned long long>(std::llround(std::max(seconds, 0.0)));
  char text[40] = {};
  if (whole < 3600) {
    std::snprintf(text, sizeof text, "%llu:%02llu", whole / 60, whole % 60);
  } else {
    std::snprintf(text, sizeof text, "%llu:%02llu:%02llu", whole / 3600, whole / 60 % 60, whole % 60);
  }
  return text;
}

std::string format_progress_time(double elapsed_seconds, std::size_t finished_steps, std::size_t total) {
  std::string out = format_duration(elapsed_seconds) + " elapsed";
  if (finished_steps == 0 || finished_steps > total) return out;
  double const left = elapsed_seconds / static_cast<double>(finished_steps) * static_cast<double>(total - finished_steps);
  return out + ", about " + format_duration(left) + " left";
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

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
  std::string const times = format_progress_time(clock_() - started_, shown == 0 ? 0 : shown - 1, total_);
  if (!terminal_) {
    std::fprintf(stderr, "cuvmm-plan: [%zu/%zu] %s (%s)\n", shown, total_, label.c_str(), times.c_str());
    return;
  }
  constexpr std::size_t width = 30;
  std::size_t const filled = total_ == 0 ? width : width * (shown - 1) / total_;  // steps before this one are done
  std::string bar(filled, '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r\033[K[%s] %zu/%zu %s: %s", bar.c_str(), shown, total_, times.c_str(), label.c_str());
  std::fflush(stderr);
}

}  // namespace cuvmm::plan
