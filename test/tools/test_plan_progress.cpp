// cuvmm-plan's progress times: elapsed time and the estimate of what is left, exact on given
// numbers; and the plain (non-terminal) progress line of a Progress on a clock the test sets.
#include <catch2/catch_test_macros.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

#include "progress.hpp"

using cuvmm::plan::format_duration;
using cuvmm::plan::format_progress_time;
using cuvmm::plan::Progress;

TEST_CASE("durations print as m:ss below an hour and h:mm:ss from there", "[plan][progress]") {
  CHECK(format_duration(0) == "0:00");
  CHECK(format_duration(7.4) == "0:07");
  CHECK(format_duration(7.6) == "0:08");
  CHECK(format_duration(59.5) == "1:00");
  CHECK(format_duration(754) == "12:34");
  CHECK(format_duration(3599) == "59:59");
  CHECK(format_duration(3600) == "1:00:00");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(-5) == "0:00");
}

TEST_CASE("the estimate left is the mean time of the finished steps times the steps to do", "[plan][progress]") {
  CHECK(format_progress_time(12, 0, 16) == "0:12 elapsed");  // nothing finished: no estimate
  CHECK(format_progress_time(12, 4, 16) == "0:12 elapsed, about 0:36 left");
  CHECK(format_progress_time(90, 3, 4) == "1:30 elapsed, about 0:30 left");
  CHECK(format_progress_time(100, 16, 16) == "1:40 elapsed, about 0:00 left");
  CHECK(format_progress_time(1800, 1, 3) == "30:00 elapsed, about 1:00:00 left");
  CHECK(format_progress_time(5, 17, 16) == "0:05 elapsed");  // more finished than planned: no estimate
}

TEST_CASE("each plain progress line shows the step, the time elapsed and the estimate", "[plan][progress]") {
  char path[] = "/tmp/cuvmm-plan-progress-XXXXXX";
  int const fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  std::fflush(stderr);
  int const saved = ::dup(STDERR_FILENO);
  ::dup2(fd, STDERR_FILENO);
  {
    double now = 100;  // the clock the test moves
    Progress progress(4, false, [&] { return now; });
    now = 102;
    progress.step("first");
    now = 110;
    progress.step("second");
    now = 130;
    progress.step("third");
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string text(4096, '\0');
  auto const n = ::pread(fd, text.data(), text.size(), 0);
  ::close(fd);
  ::unlink(path);
  REQUIRE(n > 0);
  text.resize(static_cast<std::size_t>(n));
  CHECK(text == "cuvmm-plan: [1/4] first (0:02 elapsed)\n"
                "cuvmm-plan: [2/4] second (0:10 elapsed, about 0:30 left)\n"
                "cuvmm-plan: [3/4] third (0:30 elapsed, about 0:30 left)\n");
}
