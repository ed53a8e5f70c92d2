// The Catch2 main of every cuvmm test program.
//
// Catch2 exits with 4 when every test case it ran was skipped (e.g. the gpu suite on a machine
// without a GPU), and with the number of failed assertions when some failed: 4 is also four failed
// assertions. So the exit status is decided from the run's totals, which a listener records:
// any failure exits 1 (or Catch2's count), a run of only skips exits 77, which Meson's exit-code
// protocol reads as "skipped" (neither a failure nor a pass), and anything else is Catch2's status.
//
// When CUVMM_TEST_RESULTS_DIR is set (Meson sets it), the run also writes Catch2's XML report to
// DIR/<program>.xml, from which scripts/test-summary.py counts passed, failed and skipped cases
// (under mpirun, rank 0 only).
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_case_info.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

constexpr int meson_skipped = 77;

/// The totals of the last test run (none for runs that only list tests).
struct RunTotals {
  bool ended = false;
  Catch::Totals totals;
};
RunTotals& last_run() {
  static RunTotals run;
  return run;
}

class TotalsListener final : public Catch::EventListenerBase {
 public:
  using Catch::EventListenerBase::EventListenerBase;
  void testRunEnded(Catch::TestRunStats const& stats) override { last_run() = {true, stats.totals}; }
};

}  // namespace

CATCH_REGISTER_LISTENER(TotalsListener)

int main(int argc, char* argv[]) {
  std::vector<std::string> args(argv, argv + argc);
  // Under mpirun every rank runs this program: only rank 0 writes the report.
  if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK"); rank != nullptr && std::string(rank) != "0")
    ::unsetenv("CUVMM_TEST_RESULTS_DIR");
  if (const char* env = std::getenv("CUVMM_TEST_RESULTS_DIR"); env != nullptr && *env != '\0') {
    std::filesystem::path const dir = env;
    // Child processes that a test starts (e.g. to watch a fault) must not write this report.
    ::unsetenv("CUVMM_TEST_RESULTS_DIR");
    std::filesystem::create_directories(dir);
    std::string const program = std::filesystem::path(args.at(0)).filename().string();
    args.insert(args.begin() + 1,
                {"--reporter", "console", "--reporter", "xml::out=" + (dir / (program + ".xml")).string()});
  }
  std::vector<const char*> c_args;
  for (const std::string& arg : args) c_args.push_back(arg.c_str());
  int const result = Catch::Session().run(static_cast<int>(c_args.size()), c_args.data());
  RunTotals const& run = last_run();
  if (!run.ended) return result;
  Catch::Totals const& t = run.totals;
  if (t.assertions.failed > 0 || t.testCases.failed > 0) return result != 0 ? result : 1;
  bool const only_skips = t.testCases.skipped > 0 && t.testCases.passed == 0 && t.testCases.failedButOk == 0;
  return only_skips ? meson_skipped : result;
}
