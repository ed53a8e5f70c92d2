// What a program sees with and without a CUDA driver. Runs on every machine and asserts the branch
// it is on: without a driver, driver_status() says "no CUDA driver found", device_count() is 0,
// constructing a CudaBackend throws that message and cuvmm-info still exits 0 saying so; with a
// driver, the opposite, exactly.

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>

#include "child_process.hpp"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::StartsWith;

namespace {

constexpr const char* no_driver_text = "no CUDA driver found";

}  // namespace

TEST_CASE("driver_status says whether a driver was found, and why not", "[driver][no_driver]") {
  cuvmm::DriverStatus const status = cuvmm::driver_status();
  if (status.available) {
    CHECK(status.reason.empty());
    CHECK(status.driver_version >= 13000);
    CHECK(status.device_count > 0);
    CHECK(cuvmm::device_count() == status.device_count);
  } else {
    CHECK_THAT(status.reason, StartsWith(no_driver_text));
    CHECK(status.driver_version == 0);
    CHECK(status.device_count == 0);
    CHECK(cuvmm::device_count() == 0);
  }
}

TEST_CASE("constructing a CudaBackend without a driver throws cuvmm::Error saying no driver was found",
          "[driver][no_driver]") {
  if (cuvmm::driver_status().available) {
    cuvmm::CudaBackend const backend(0);
    CHECK(backend.device() == 0);
    CHECK(backend.live_counts() == cuvmm::LiveCounts{});
  } else {
    try {
      cuvmm::CudaBackend const backend(0);
      FAIL("a CudaBackend was constructed without a driver");
    } catch (const cuvmm::Unsupported&) {
      FAIL("a missing driver must not be reported as a missing capability");
    } catch (const cuvmm::Error& error) {
      CHECK_THAT(error.what(), ContainsSubstring(no_driver_text));
      CHECK_THAT(error.code_text(), StartsWith(no_driver_text));
      CHECK(error.domain() == cuvmm::ErrorDomain::cuvmm);
    }
    CHECK_THROWS_AS(cuvmm::cuda_backend(0), cuvmm::Error);
    CHECK_THROWS_AS(cuvmm::device_caps(0), cuvmm::Error);
  }
}

TEST_CASE("cuvmm-info exits 0 and reports the driver and devices it found, as a table and as JSON",
          "[driver][no_driver][tools]") {
#ifndef CUVMM_INFO_PATH
  SKIP("cuvmm-info is not built (tools=false)");
#else
  // The build tree's tool, unless CUVMM_INFO names another copy (e.g. a build carried to a GPU machine).
  char const* const from_environment = std::getenv("CUVMM_INFO");
  std::string const tool = from_environment != nullptr ? from_environment : CUVMM_INFO_PATH;
  cuvmm::test::ProgramRun const table = cuvmm::test::run_program({tool});
  cuvmm::test::ProgramRun const json = cuvmm::test::run_program({tool, "--json"});
  INFO("table:\n" << table.output << "\njson:\n" << json.output);
  CHECK(table.exit_status == 0);
  CHECK(json.exit_status == 0);
  if (cuvmm::driver_status().available) {
    CHECK_THAT(table.output, ContainsSubstring("device 0: "));
    CHECK_THAT(table.output, ContainsSubstring("virtual memory management"));
    CHECK_THAT(json.output, ContainsSubstring("\"available\": true"));
    CHECK_THAT(json.output, ContainsSubstring("\"index\": 0"));
  } else {
    CHECK_THAT(table.output, ContainsSubstring(std::string("CUDA driver: not available (") + no_driver_text));
    CHECK_THAT(table.output, ContainsSubstring("devices:     none"));
    CHECK_THAT(json.output, ContainsSubstring(std::string("\"driver\": {\"available\": false, \"reason\": \"") +
                                              no_driver_text));
    CHECK_THAT(json.output, ContainsSubstring("\"devices\": []"));
  }
  cuvmm::test::ProgramRun const help = cuvmm::test::run_program({tool, "--help"});
  CHECK(help.exit_status == 0);
  CHECK_THAT(help.output, StartsWith("usage: cuvmm-info"));
  cuvmm::test::ProgramRun const bad = cuvmm::test::run_program({tool, "--no-such-flag"});
  CHECK(bad.exit_status == 2);
  CHECK_THAT(bad.output, StartsWith("cuvmm-info: unknown argument '--no-such-flag'"));
#endif
}
