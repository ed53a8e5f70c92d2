// cuvmm-info's command line, run as a child process: --help, --version, --json, and a bad flag
// answered with one short error and a hint (exit status 2). Works with or without a GPU.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdlib>
#include <string>

#include <cuvmm/version.hpp>

#include "child_process.hpp"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;
using cuvmm::test::run_program;

namespace {

/// The build tree's tool, unless CUVMM_INFO names another copy (a build carried to a GPU machine).
std::string info_tool() {
  const char* const from_environment = std::getenv("CUVMM_INFO");
  return from_environment != nullptr ? from_environment : CUVMM_INFO_PATH;
}

}  // namespace

TEST_CASE("cuvmm-info --version prints its name and cuvmm's version", "[info][program][cli]") {
  auto const version = run_program({info_tool(), "--version"});
  CHECK(version.exit_status == 0);
  CHECK(version.output == std::string("cuvmm-info ") + cuvmm::version_string + "\n");
}

TEST_CASE("cuvmm-info --help prints its usage, which names --json and --version", "[info][program][cli]") {
  auto const help = run_program({info_tool(), "--help"});
  CHECK(help.exit_status == 0);
  CHECK_THAT(help.output, StartsWith("usage: cuvmm-info [--json] [--help] [--version]\n"));
  CHECK(run_program({info_tool(), "-h"}).output == help.output);
}

TEST_CASE("cuvmm-info answers a bad flag with one short error and a hint, exit status 2", "[info][program][cli]") {
  auto const bad = run_program({info_tool(), "--no-such-flag"});
  CHECK(bad.exit_status == 2);
  CHECK(bad.output == "cuvmm-info: unknown argument '--no-such-flag'\nTry 'cuvmm-info --help' for more information.\n");
  auto const valued = run_program({info_tool(), "--json=maybe"});  // a flag takes yes/no, true/false only
  CHECK(valued.exit_status == 2);
  CHECK(valued.output == "cuvmm-info: Could not convert: --json = maybe\nTry 'cuvmm-info --help' for more information.\n");
}

TEST_CASE("cuvmm-info --json prints JSON that Python reads", "[info][program]") {
  auto const json = run_program({info_tool(), "--json"});
  REQUIRE(json.exit_status == 0);
  auto const check = run_program({"/usr/bin/env", "python3", "-c",
                                  "import json, sys; d = json.loads(sys.argv[1]); print(d['cuvmm_version'])",
                                  json.output});
  INFO(json.output << check.output);
  CHECK(check.exit_status == 0);
  CHECK(check.output == std::string(cuvmm::version_string) + "\n");
}
