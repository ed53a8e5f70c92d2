// cuvmm-plan run as a child process on the host-backend profile (--backend host, so the result is
// the same with or without a GPU): it says it is the host profile, prints a recommendation, and
// writes valid JSON and CSV with the expected fields and row counts. Bad command lines and bad
// traces exit 2 with a clear message.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include <cuvmm/device_caps.hpp>
#include <cuvmm/version.hpp>

#include "child_process.hpp"
#include "temp_files.hpp"

using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using cuvmm::test::read_file;
using cuvmm::test::run_program;

namespace {

/// The build tree's tool, unless CUVMM_PLAN names another copy (a build carried to a GPU machine).
const char* plan_tool() {
  const char* const from_environment = std::getenv("CUVMM_PLAN");
  return from_environment != nullptr ? from_environment : CUVMM_PLAN_PATH;
}

/// A scratch directory for one test.
struct TempDir : cuvmm::test::TempDir {
  TempDir() : cuvmm::test::TempDir("cuvmm-plan-test-") {}
};

std::size_t line_count(const std::string& text) {
  std::size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

/// Checks plan.json with Python's json module; prints "valid" when every assertion holds.
constexpr const char* json_check = R"PY(
import json, sys
d = json.load(open(sys.argv[1]))
assert d["tool"] == "cuvmm-plan", d["tool"]
assert d["backend"] == "host" and d["profile"] == "quick", (d["backend"], d["profile"])
assert d["seconds"] > 0, d["seconds"]
assert d["device"]["granularity"] == 2 << 20 and d["device"]["total_bytes"] == 1 << 30, d["device"]
assert [r["chunk_bytes"] for r in d["driver_calls"]] == [2 << 20, 8 << 20, 32 << 20, 128 << 20], d["driver_calls"]
for r in d["driver_calls"]:
    for call in ("create", "map", "set_access", "unmap", "release"):
        assert r[call]["samples"] == 5 and r[call]["median_us"] > 0, (call, r)
        assert r[call]["p99_us"] is None and r[call]["max_us"] >= r[call]["median_us"], (call, r)  # 5 samples: no p99
t = d["driver_threads"]
assert [(r["threads"], r["chunk_bytes"], r["repeat"]) for r in t] == [(n, 2 << 20, k) for k in (1, 2, 3) for n in (1, 2, 4, 8)], t
for r in t:
    for call in ("create", "map", "set_access", "unmap", "release"):
        assert r[call]["samples"] == 5 * r["threads"] and r[call]["median_us"] > 0, (call, r)
    assert r["cycles_per_second"] > 0, r
g = d["growth"]
assert len(g) == 6, len(g)
assert sorted({r["strategy"] for r in g}) == ["growable", "growable_fixed_chunks"], g
for r in g:
    assert r["status"] == "ok" and r["reached_bytes"] == r["target_bytes"], r
    assert r["peak_bytes"] >= r["target_bytes"] and r["bytes_copied"] == 0 and r["total_seconds"] > 0, r
    assert r["runs"] == int(sys.argv[3]), r
    assert r["min_total_seconds"] <= r["total_seconds"] <= r["max_total_seconds"], r
    if r["runs"] == 1:
        assert r["min_total_seconds"] == r["total_seconds"] == r["max_total_seconds"], r
    if r["strategy"] == "growable_fixed_chunks":
        assert r["chunks"] == r["target_bytes"] // (2 << 20), r
assert d["reach"]["reached_bytes"] == 1 << 30 and d["reach"]["stopped_by"] == "address_range_full", d["reach"]
t = d["trace"]
assert t["ops"] == int(sys.argv[2]), (t["ops"], sys.argv[2])
assert [r["allocator"] for r in t["replays"]] == ["cuvmm_arena"], t
assert t["replays"][0]["peak_held_bytes"] >= t["replays"][0]["peak_requested_bytes"] > 0, t
a = t["replays"][0]["arena_stats"]
# The Arena's own counts agree with the replay's: the same peak held, the same peak asked for,
# and nothing live once the replay has freed everything.
assert a["bytes_physical"]["peak"] == t["replays"][0]["peak_held_bytes"], a
assert a["bytes_requested"]["peak"] == t["replays"][0]["peak_requested_bytes"], a
assert a["bytes_requested"]["current"] == 0 and a["allocations"]["current"] == 0, a
assert d["cuda_runtime_version"] >= 12000, d["cuda_runtime_version"]
assert d["host"]["cpus"] >= 1 and d["host"]["os"].startswith("Linux "), d["host"]
rec = d["recommendation"]
assert rec["chunk_bytes"] in [2 << 20, 8 << 20, 32 << 20, 128 << 20] and rec["largest_buffer_bytes"] == 1 << 30, rec
assert rec["growth_ms_per_gib"] > 0 and rec["copy_grow_ms_per_gib"] is None, rec
assert rec["thread_scaling"] > 0 and rec["thread_scaling_threads"] == 8, rec
assert rec["thread_scaling_repeats"] == 3, rec
assert rec["thread_scaling_min"] <= rec["thread_scaling"] <= rec["thread_scaling_max"], rec
assert rec["thread_scaling_chunk_bytes"] == 2 << 20, rec
print("valid")
)PY";

/// Checks that report.html's body (every table, chart and link) is well-formed XML, as it is
/// written to be: a tag left open or a '&' or '<' left unescaped fails; prints "well-formed".
constexpr const char* html_check = R"PY(
import sys, xml.etree.ElementTree as ET
html = open(sys.argv[1], encoding="utf-8").read()
body = ET.fromstring(html[html.index("<body>"):html.index("</html>")])
charts = body.findall(".//{http://www.w3.org/2000/svg}svg")
assert len(charts) == 6, len(charts)  # driver calls 2, threads 1, growth 1, trace 2
ids = [s.get("id") for s in body.iter("section")]
assert ids == ["recommendation", "machine", "driver-calls", "thread-scaling", "growth", "reach", "trace-replay",
               "arena-stats", "notes", "files"], ids
print("well-formed")
)PY";

}  // namespace

TEST_CASE("cuvmm-plan's host profile says so and writes valid JSON and CSV with the expected fields",
          "[plan][program]") {
  TempDir dir;
  auto const run = run_program({plan_tool(), "--backend", "host", "--profile", "quick", "--out",
                                dir.path.string(), "--no-plots"});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring(", so this is the HOST-BACKEND profile"));
  CHECK_THAT(run.output, ContainsSubstring("cuvmm-plan: [1/"));  // plain progress lines: stderr is no terminal
  // The growth children run first, before the program makes a context of its own (main.cpp,
  // measure_growth_phase); nothing has finished at the first step.
  // Progress lines say the elapsed time as m:ss; how much has elapsed depends on the machine, not checked.
  CHECK(std::regex_search(run.output, std::regex(R"(cuvmm-plan: \[1/24\] growth growable to 64 MiB in 4 KiB appends \(\d+:\d\d elapsed\)\n)")));
  CHECK(std::regex_search(run.output, std::regex(R"(\] growth growable_fixed_chunks to 512 MiB in 64 MiB appends \(\d+:\d\d elapsed)")));
  CHECK(std::regex_search(run.output, std::regex(R"(\] driver calls, 8 MiB chunks \(\d+:\d\d elapsed)")));
  CHECK(run.output.find("] growth growable_fixed_chunks to 512 MiB") < run.output.find("] driver calls, 2 MiB chunks"));
  CHECK(run.output.find("HOST-BACKEND profile") < run.output.find("cuvmm-plan: [1/"));
  CHECK_THAT(run.output, ContainsSubstring(" elapsed, about "));
  CHECK_THAT(run.output, ContainsSubstring("Recommendation for host backend"));
  CHECK_THAT(run.output, ContainsSubstring("largest buffer:    1 GiB (reach run"));
  CHECK_THAT(run.output, ContainsSubstring("keep GrowableOptions::max_chunk_bytes at or above it"));
  CHECK_THAT(run.output, ContainsSubstring("arena pages:       ArenaOptions::page_bytes 2 MiB (default): driver calls "));
  CHECK_THAT(run.output, ContainsSubstring("(2 MiB chunks; median of 3 repeats, spread "));
  CHECK_THAT(run.output, ContainsSubstring("trace on cuvmm_arena"));
  CHECK_THAT(run.output, ContainsSubstring("Measured in "));
  // The report, last, with its absolute path.
  std::filesystem::path const report = std::filesystem::absolute(dir.path / "report.html").lexically_normal();
  CHECK_THAT(run.output, EndsWith("Report: " + report.string() + "\n"));
  std::string const html = read_file(report);
  CHECK_THAT(html, StartsWith("<!DOCTYPE html>\n"));
  CHECK_THAT(html, ContainsSubstring("<section id=\"recommendation\">"));
  CHECK_THAT(html, ContainsSubstring("<p class=\"warning\">Measured on the host backend"));
  CHECK_THAT(html, ContainsSubstring("<h3>cuvmm_arena</h3>"));
  for (const char* file : {"plan.json", "driver_calls.csv", "driver_threads.csv", "growth.csv", "trace_memory.csv",
                           "trace.csv"}) {
    CHECK_THAT(html, ContainsSubstring("<a href=\"" + std::string(file) + "\">"));
  }
  CHECK_THAT(html, !ContainsSubstring(".png\">"));  // --no-plots: none made, none linked
  auto const well_formed = run_program({"/usr/bin/env", "python3", "-c", html_check, report.string()});
  INFO(well_formed.output);
  CHECK(well_formed.exit_status == 0);
  CHECK_THAT(well_formed.output, StartsWith("well-formed"));

  std::string const trace = read_file(dir.path / "trace.csv");
  REQUIRE_THAT(trace, StartsWith("op,id,bytes\n"));
  std::size_t const trace_ops = line_count(trace) - 1;
  CHECK(trace_ops >= 1000);  // 1000 allocations and the frees the live limit forced

  auto const check = run_program({"/usr/bin/env", "python3", "-c", json_check, (dir.path / "plan.json").string(),
                                  std::to_string(trace_ops), "1"});
  INFO(check.output);
  CHECK(check.exit_status == 0);
  CHECK_THAT(check.output, StartsWith("valid"));

  std::string const driver = read_file(dir.path / "driver_calls.csv");
  CHECK_THAT(driver, StartsWith("chunk_bytes,call,median_us,p99_us,samples,max_us\n2097152,create,"));
  CHECK(line_count(driver) == 1 + 4 * 5);
  std::string const threads = read_file(dir.path / "driver_threads.csv");
  CHECK_THAT(threads, StartsWith("threads,chunk_bytes,call,median_us,p99_us,samples,cycles_per_second,repeat,max_us\n"
                                 "1,2097152,create,"));
  CHECK(line_count(threads) == 1 + 3 * 4 * 5);  // 3 repeats of 4 thread counts, 5 calls each
  std::string const growth = read_file(dir.path / "growth.csv");
  CHECK_THAT(growth, StartsWith("strategy,target_bytes,append_bytes,status,reached_bytes,appends,total_seconds,"
                                "p99_append_us,peak_bytes,bytes_copied,chunks,growth_seconds,peak_in_use_bytes,runs,"
                                "min_total_seconds,max_total_seconds\ngrowable,67108864,4096,ok,67108864,16384,"));
  CHECK(line_count(growth) == 1 + 6);
  std::string const memory = read_file(dir.path / "trace_memory.csv");
  CHECK_THAT(memory, StartsWith("allocator,op_index,requested_bytes,held_bytes\ncuvmm_arena,0,"));
  CHECK(line_count(memory) > 100);
}

TEST_CASE("cuvmm-plan --runs 3 measures every growth three times and reports the median run", "[plan][program]") {
  TempDir dir;
  auto const run = run_program({plan_tool(), "--backend", "host", "--runs", "3", "--out", dir.path.string(),
                                "--no-plots"});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring("growth growable to 64 MiB in 4 KiB appends, run 3 of 3"));
  std::size_t const trace_ops = line_count(read_file(dir.path / "trace.csv")) - 1;
  auto const check = run_program({"/usr/bin/env", "python3", "-c", json_check, (dir.path / "plan.json").string(),
                                  std::to_string(trace_ops), "3"});
  INFO(check.output);
  CHECK(check.exit_status == 0);
  CHECK_THAT(check.output, StartsWith("valid"));
}

TEST_CASE("cuvmm-plan replays an RMM log given with --trace", "[plan][program]") {
  TempDir dir;
  std::ofstream(dir.path / "rmm.csv") << "Thread,Time,Action,Pointer,Size,Stream\n"
                                         "1,0.05,deallocate,0x7000,64,0x0\n"  // allocated before the log
                                         "1,0.1,allocate,0x1000,3000000,0x0\n"
                                         "1,0.2,allocate,0x2000,5000000,0x0\n"
                                         "1,0.3,deallocate,0x1000,3000000,0x0\n";
  auto const out = dir.path / "out";
  auto const run = run_program({plan_tool(), "--backend", "host", "--out", out.string(), "--no-plots", "--trace",
                                (dir.path / "rmm.csv").string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  std::string const json = read_file(out / "plan.json");
  CHECK_THAT(json, ContainsSubstring("rmm.csv (rmm_log format)\", \"ops\": 3,"));
  CHECK_THAT(json, ContainsSubstring("\"peak_requested_bytes\": 8000000"));
  CHECK_FALSE(std::filesystem::exists(out / "trace.csv"));  // only a generated trace is written out
  CHECK_THAT(run.output, ContainsSubstring("note: 1 frees in the RMM log were of memory allocated before logging "
                                           "began, and were skipped"));
}

TEST_CASE("cuvmm-plan refuses a malformed trace and a bad command line with exit status 2", "[plan][program]") {
  TempDir dir;
  std::ofstream(dir.path / "bad.csv") << "op,id,bytes\na,0,10\nq,1,10\n";
  auto const bad_trace = run_program({plan_tool(), "--backend", "host", "--trace", (dir.path / "bad.csv").string()});
  CHECK(bad_trace.exit_status == 2);
  CHECK_THAT(bad_trace.output, ContainsSubstring("bad.csv:3: column 'op' must be 'a' or 'f', not 'q'"));
  CHECK_THAT(bad_trace.output, !ContainsSubstring("[1/"));  // refused before anything was measured

  auto const bad_profile = run_program({plan_tool(), "--profile", "huge"});
  CHECK(bad_profile.exit_status == 2);
  CHECK(bad_profile.output == "cuvmm-plan: --profile: unknown profile 'huge' (quick, full)\n"
                              "Try 'cuvmm-plan --help' for more information.\n");

  auto const missing_value = run_program({plan_tool(), "--out"});
  CHECK(missing_value.exit_status == 2);
  CHECK(missing_value.output == "cuvmm-plan: --out: 1 required DIR missing\nTry 'cuvmm-plan --help' for more information.\n");
  auto const missing_plugin = run_program({plan_tool(), "--torch-plugin"});
  CHECK(missing_plugin.exit_status == 2);
  CHECK(missing_plugin.output ==
        "cuvmm-plan: --torch-plugin: 1 required FILE missing\nTry 'cuvmm-plan --help' for more information.\n");

  for (const char* runs : {"0", "101", "three", ""}) {
    INFO("--runs '" << runs << "'");
    auto const bad_runs = run_program({plan_tool(), "--runs", runs});
    CHECK(bad_runs.exit_status == 2);
    CHECK_THAT(bad_runs.output, ContainsSubstring("--runs: wants a count from 1 to 100, not '" + std::string(runs) + "'"));
  }
}

TEST_CASE("a bad flag gets one short error and a hint, not the whole usage", "[plan][program][cli]") {
  for (std::vector<std::string> args : {std::vector<std::string>{"--bogus"}, {"--backend", "host", "stray"},
                                         {"--backend=gpu"}}) {
    args.insert(args.begin(), plan_tool());
    INFO(args.back());
    auto const bad = run_program(args);
    CHECK(bad.exit_status == 2);
    CHECK_THAT(bad.output, EndsWith("\nTry 'cuvmm-plan --help' for more information.\n"));
    CHECK_THAT(bad.output, !ContainsSubstring("usage:"));
    CHECK(line_count(bad.output) == 2);
  }
  CHECK(run_program({plan_tool(), "--bogus"}).output == "cuvmm-plan: unknown argument '--bogus'\n"
                                                        "Try 'cuvmm-plan --help' for more information.\n");
  CHECK_THAT(run_program({plan_tool(), "--backend=gpu"}).output,
             StartsWith("cuvmm-plan: --backend: unknown backend 'gpu' (auto, cuda, host)\n"));
}

TEST_CASE("cuvmm-plan --help lists the options but not the internal ones; --version prints the version",
          "[plan][program][cli]") {
  auto const help = run_program({plan_tool(), "--help"});
  CHECK(help.exit_status == 0);
  CHECK_THAT(help.output, StartsWith("usage: cuvmm-plan"));
  CHECK_THAT(help.output, ContainsSubstring("--out=DIR"));
  CHECK_THAT(help.output, ContainsSubstring("[--torch-plugin FILE]"));
  CHECK_THAT(help.output, ContainsSubstring("\n  --torch-plugin FILE   cuvmm's PyTorch plug-in (libcuvmm_torch.so)"));
  CHECK_THAT(help.output, !ContainsSubstring("growth-case"));
  CHECK_THAT(help.output, !ContainsSubstring("driver-status"));
  CHECK(run_program({plan_tool(), "-h"}).output == help.output);
  auto const version = run_program({plan_tool(), "--version"});
  CHECK(version.exit_status == 0);
  CHECK(version.output == std::string("cuvmm-plan ") + cuvmm::version_string + "\n");
}

TEST_CASE("cuvmm-plan takes --opt=value as it takes --opt value", "[plan][program][cli]") {
  auto const one = run_program({plan_tool(), "--backend=host", "--growth-case=growable:8388608:1048576"});
  INFO(one.output);
  CHECK(one.exit_status == 0);
  CHECK_THAT(one.output, StartsWith("growth-row growable 8388608 1048576 ok 8388608 8 "));
}

TEST_CASE("cuvmm-plan checks its output directory, trace, plot script and PyTorch plug-in before measuring anything",
          "[plan][program][preflight]") {
  TempDir dir;
  std::ofstream(dir.path / "a-file") << "x";
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> environment;
    std::string said;
  };
  std::string const file = (dir.path / "a-file").string();
  std::vector<Case> const cases = {
      {{"--out", file}, {}, "cuvmm-plan: --out '" + file + "': exists and is not a directory\n"},
      {{"--out=" + file + "/sub"}, {}, "cuvmm-plan: --out '" + file + "/sub': cannot be made: Not a directory\n"},
      {{"--trace", (dir.path / "missing.csv").string()}, {},
       "cuvmm-plan: cannot open trace file '" + (dir.path / "missing.csv").string() + "': No such file or directory\n"},
      {{"--trace", dir.path.string()}, {}, "cuvmm-plan: trace file '" + dir.path.string() + "' is a directory\n"},
      {{"--out", (dir.path / "out").string()}, {"CUVMM_PLAN_PLOT_SCRIPT=" + (dir.path / "no-plot.py").string()},
       "cuvmm-plan: CUVMM_PLAN_PLOT_SCRIPT names '" + (dir.path / "no-plot.py").string() + "', which is not a file\n"},
      // Checked on the host backend too, where nothing is replayed through PyTorch: a bad path is a bad
      // command line wherever it is given.
      {{"--torch-plugin", (dir.path / "no-plugin.so").string()}, {},
       "cuvmm-plan: --torch-plugin '" + (dir.path / "no-plugin.so").string() + "': no such file\n"},
      {{"--torch-plugin=" + dir.path.string()}, {},
       "cuvmm-plan: --torch-plugin '" + dir.path.string() + "': is not a file\n"},
      {{"--no-torch", "--torch-plugin", (dir.path / "no-plugin.so").string()}, {},
       "cuvmm-plan: --torch-plugin '" + (dir.path / "no-plugin.so").string() + "': no such file\n"},
  };
  for (Case const& c : cases) {
    std::vector<std::string> args{plan_tool(), "--backend", "host"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    INFO(c.said);
    auto const refused = run_program(args, c.environment);
    CHECK(refused.exit_status == 2);
    CHECK(refused.output == c.said);  // nothing measured: no progress line, no host-profile banner
  }
  // A directory that cannot be written in: made read-only for a user; root writes anywhere, but not
  // in sysfs.
  std::filesystem::path unwritable = dir.path / "read-only";
  if (::geteuid() == 0) {
    unwritable = "/sys/kernel";
  } else {
    std::filesystem::create_directory(unwritable);
    std::filesystem::permissions(unwritable, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  }
  REQUIRE(std::filesystem::is_directory(unwritable));
  auto const read_only = run_program({plan_tool(), "--backend", "host", "--out", unwritable.string()});
  CHECK(read_only.exit_status == 2);
  CHECK(read_only.output == "cuvmm-plan: --out '" + unwritable.string() + "': cannot write in it: Permission denied\n");
  if (::geteuid() != 0) std::filesystem::permissions(unwritable, std::filesystem::perms::owner_all);

  // Plots not asked for: the missing script does not matter.
  auto const no_plots = run_program({plan_tool(), "--backend", "host", "--no-plots", "--growth-case",
                                     "growable:8388608:1048576"},
                                    {"CUVMM_PLAN_PLOT_SCRIPT=" + (dir.path / "no-plot.py").string()});
  CHECK(no_plots.exit_status == 0);
}

TEST_CASE("plan.json stays valid JSON for a trace path that is not UTF-8", "[plan][program]") {
  TempDir dir;
  std::string const name = "trace-\xff\xfe-\"quoted\".csv";
  std::ofstream(dir.path / name) << "op,id,bytes\na,0,4096\nf,0,4096\n";
  auto const out = dir.path / "out";
  auto const run = run_program({plan_tool(), "--backend", "host", "--no-plots", "--out", out.string(), "--trace",
                                (dir.path / name).string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  auto const check = run_program({"/usr/bin/env", "python3", "-c",
                                  "import json, sys; d = json.load(open(sys.argv[1], 'rb'));"
                                  "print(d['trace']['source'].encode('ascii', 'backslashreplace').decode())",
                                  (out / "plan.json").string()});
  INFO(check.output);
  CHECK(check.exit_status == 0);
  CHECK_THAT(check.output, ContainsSubstring("trace-\\ufffd\\ufffd-\"quoted\".csv (cuvmm format)"));
}

TEST_CASE("cuvmm-plan asks a child process for the driver's status; --backend cuda without a GPU says why",
          "[plan][program]") {
  // The parent leaves the driver uninitialized until its growth children have run (main.cpp,
  // measure_growth_phase), so a child reports what the driver says: the same as this process sees.
  cuvmm::DriverStatus const here = cuvmm::driver_status();
  auto const status = run_program({plan_tool(), "--driver-status"});
  CHECK(status.exit_status == 0);
  CHECK(status.output == "driver-status " + std::to_string(here.available ? 1 : 0) + " " +
                             std::to_string(here.driver_version) + " " + std::to_string(here.device_count) + "\n" +
                             here.reason + "\n");
  if (here.available && here.device_count > 0) SKIP("a GPU is here: --backend cuda would run the device profile");
  auto const refused = run_program({plan_tool(), "--backend", "cuda", "--no-plots"});
  CHECK(refused.exit_status == 1);
  CHECK(refused.output == "cuvmm-plan: --backend cuda, but there is no GPU: " +
                              (here.available ? std::string("no CUDA device") : here.reason) + "\n");
}

TEST_CASE("one growth measured on its own prints its row; a bad case is refused", "[plan][program]") {
  // cuvmm-plan runs each growth this way, in a fresh process (the driver finishes frees lazily).
  auto const one = run_program({plan_tool(), "--backend", "host", "--growth-case", "growable:8388608:1048576"});
  CHECK(one.exit_status == 0);
  // 8 MiB in 1 MiB appends on 2 MiB granules: 8 appends; chunks of 2, 2 and 4 MiB (geometric below
  // the hide size, 4 MiB: the simulated device's 1 GiB / 256), exactly full.
  CHECK_THAT(one.output, StartsWith("growth-row growable 8388608 1048576 ok 8388608 8 "));
  std::istringstream fields(one.output);
  std::vector<std::string> row{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
  REQUIRE(row.size() == 14);
  CHECK(row[9] == "8388608");  // peak bytes held: exactly the target
  CHECK(row[10] == "0");       // bytes copied
  CHECK(row[11] == "3");       // chunks
  CHECK_THAT(one.output, !ContainsSubstring("HOST-BACKEND profile"));  // the child prints its row only

  auto const unknown = run_program({plan_tool(), "--backend", "host", "--growth-case", "no_such_strategy:1:1"});
  CHECK(unknown.exit_status == 1);
  CHECK_THAT(unknown.output, ContainsSubstring("no growth strategy 'no_such_strategy' without a GPU"));
  auto const baseline = run_program({plan_tool(), "--backend", "host", "--growth-case", "thrust_device_vector:1:1"});
  CHECK(baseline.exit_status == 1);
  CHECK_THAT(baseline.output, ContainsSubstring("no growth strategy 'thrust_device_vector' without a GPU"));
  // The experiment strategy: the real policy with another hide size (2 MiB: one granule, so every
  // step is one granule after the first).
  auto const hide = run_program({plan_tool(), "--backend", "host", "--growth-case", "growable_hide_MiB_2:8388608:1048576"});
  CHECK(hide.exit_status == 0);
  CHECK_THAT(hide.output, StartsWith("growth-row growable_hide_MiB_2 8388608 1048576 ok 8388608 8 "));
  std::istringstream hide_fields(hide.output);
  std::vector<std::string> hide_row{std::istream_iterator<std::string>(hide_fields), std::istream_iterator<std::string>()};
  REQUIRE(hide_row.size() == 14);
  CHECK(hide_row[11] == "4");  // chunks: 2 MiB each
  for (const char* bad : {"growable_hide_MiB_:1:1", "growable_hide_MiB_0:1:1", "growable_hide_MiB_x2:1:1",
                          "growable_hide_MiB_2x:1:1", "growable_hide_MiB_-1:1:1"}) {
    INFO(bad);
    auto const refused = run_program({plan_tool(), "--backend", "host", "--growth-case", bad});
    CHECK(refused.exit_status == 1);
    CHECK_THAT(refused.output, ContainsSubstring("wants growable_hide_MiB_MIB, a positive whole number of MiB"));
  }
  auto const malformed = run_program({plan_tool(), "--growth-case", "growable:lots"});
  CHECK(malformed.exit_status == 2);
  CHECK_THAT(malformed.output, StartsWith("cuvmm-plan: --growth-case wants STRATEGY:TARGET_BYTES:APPEND_BYTES, not "
                                          "'growable:lots'\nTry 'cuvmm-plan --help'"));
}

TEST_CASE("cuvmm-plan makes its four PNG plots with matplotlib", "[plan][program][plots]") {
  bool matplotlib = false;
  for (const char* python : {"python3", "/usr/bin/python3"}) {
    matplotlib = matplotlib || run_program({"/usr/bin/env", python, "-c", "import matplotlib"}).exit_status == 0;
  }
  if (!matplotlib) SKIP("no python3 with matplotlib here (Debian: python3-matplotlib)");
  TempDir dir;
  auto const run = run_program({plan_tool(), "--backend", "host", "--out", dir.path.string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring("plots written by "));
  std::string const html = read_file(dir.path / "report.html");
  for (const char* png : {"growth_time.png", "driver_latency.png", "driver_threads.png", "trace_memory.png"}) {
    INFO(png);
    std::string const image = read_file(dir.path / png);
    CHECK(image.size() > 10000);
    CHECK_THAT(image, StartsWith("\x89PNG\r\n\x1a\n"));
    CHECK_THAT(html, ContainsSubstring("<a href=\"" + std::string(png) + "\">"));  // linked from the report
  }
}

TEST_CASE("cuvmm-plan says so when no python3 with matplotlib can make its plots", "[plan][program][plots]") {
  TempDir dir;
  // A stand-in plot script that answers the matplotlib check as a Python without it would.
  std::ofstream(dir.path / "plot.py") << "import sys\nsys.exit(3 if sys.argv[1] == '--check' else 0)\n";
  // Set here, not as an extra variable: the caller's environment may name its own, which would come first.
  const char* const inherited = std::getenv("CUVMM_PLAN_PLOT_SCRIPT");
  std::string const saved = inherited != nullptr ? inherited : "";
  ::setenv("CUVMM_PLAN_PLOT_SCRIPT", (dir.path / "plot.py").c_str(), 1);
  auto const run = run_program({plan_tool(), "--backend", "host", "--out", (dir.path / "out").string()});
  if (inherited != nullptr) {
    ::setenv("CUVMM_PLAN_PLOT_SCRIPT", saved.c_str(), 1);
  } else {
    ::unsetenv("CUVMM_PLAN_PLOT_SCRIPT");
  }
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  CHECK_THAT(run.output,
             ContainsSubstring("plots not made: python3 has no matplotlib (Debian: apt-get install python3-matplotlib)"));
  CHECK(std::filesystem::exists(dir.path / "out" / "plan.json"));
  CHECK_FALSE(std::filesystem::exists(dir.path / "out" / "growth_time.png"));
  // The report is written all the same, and links no plot.
  std::string const html = read_file(dir.path / "out" / "report.html");
  CHECK_THAT(html, ContainsSubstring("<a href=\"plan.json\">"));
  CHECK_THAT(html, !ContainsSubstring(".png\">"));

  // Nor a plot an earlier run left in the directory: it does not show this run's numbers.
  std::ofstream(dir.path / "out" / "growth_time.png") << "an earlier run's plot";
  ::setenv("CUVMM_PLAN_PLOT_SCRIPT", (dir.path / "plot.py").c_str(), 1);
  auto const again = run_program({plan_tool(), "--backend", "host", "--out", (dir.path / "out").string()});
  if (inherited != nullptr) {
    ::setenv("CUVMM_PLAN_PLOT_SCRIPT", saved.c_str(), 1);
  } else {
    ::unsetenv("CUVMM_PLAN_PLOT_SCRIPT");
  }
  REQUIRE(again.exit_status == 0);
  CHECK_THAT(read_file(dir.path / "out" / "report.html"), !ContainsSubstring("growth_time.png"));
}
