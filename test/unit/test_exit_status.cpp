// The exit status of cuvmm's test programs (support/catch_main.cpp), as Meson reads it: a failure
// fails, a run of only skips is 77 (SKIP), a pass is 0. Each case runs this program again on one
// hidden probe case.
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "child_process.hpp"

namespace {

int run_probe(const std::string& name) {
  return cuvmm::test::run_program({cuvmm::test::own_executable(), name, "--durations", "no"}).exit_status;
}

}  // namespace

TEST_CASE("exit status probe: four failed checks", "[.][exit_status_probe]") {
  // Catch2 before 3.5 exits with the count of failed assertions, so 4 here, and with 4 for a run
  // of only skips too (later versions exit 42 on a failure): mapping 4 to 77 turned four failed
  // checks into a SKIP on a machine with Catch2 3.4.
  for (int i = 0; i < 4; ++i) CHECK(i < 0);
}

TEST_CASE("exit status probe: only skips", "[.][exit_status_probe]") { SKIP("the probe skips"); }

TEST_CASE("exit status probe: passes", "[.][exit_status_probe]") { CHECK(1 + 1 == 2); }

TEST_CASE("a test program with four failed checks fails; it is not reported as skipped", "[exit_status]") {
  int const status = run_probe("exit status probe: four failed checks");
  CHECK(status != 0);
  CHECK(status != 77);
}

TEST_CASE("a test program whose cases all skipped exits 77, Meson's SKIP", "[exit_status]") {
  CHECK(run_probe("exit status probe: only skips") == 77);
}

TEST_CASE("a test program whose cases passed exits 0", "[exit_status]") {
  CHECK(run_probe("exit status probe: passes") == 0);
}
