// The Catch2 main of every cuvmm test program.
//
// Catch2 exits with 4 when every test case it ran was skipped (e.g. the gpu suite on a machine
// without a GPU). Meson's exit-code protocol reads 77 as "skipped", so 4 becomes 77: a run of only
// skips shows up as SKIP, neither as a failure nor as a pass.
//
// When CUVMM_TEST_RESULTS_DIR is set (Meson sets it), the run also writes Catch2's XML report to
// DIR/<program>.xml, from which scripts/test-summary.py counts passed, failed and skipped cases
// (under mpirun, rank 0 only).
#include <catch2/catch_session.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {
constexpr int catch_all_skipped = 4;
constexpr int meson_skipped = 77;
}  // namespace

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
  return result == catch_all_skipped ? meson_skipped : result;
}
