// tools/cuvmm-plan/torch_trace.py run against a fake `torch` module (no GPU, no PyTorch): with
// --plugin PATH it replays the trace a third time, as pytorch_cuvmm_plugin, in a process of its own
// that makes cuvmm's plug-in PyTorch's allocator before any allocation, and reports as "held" the
// device memory in use less what was in use before the replay. Without --plugin there are two
// configurations, as before; a missing plug-in file is refused with exit status 2, and a plug-in
// that fails to load costs only its own replay.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "temp_files.hpp"

using Catch::Matchers::ContainsSubstring;
using cuvmm::test::read_file;
using cuvmm::test::run_program;

namespace {

/// A stand-in for PyTorch: a 1 GiB device whose context uses 100 MiB; each tensor holds its size
/// rounded up to 2 MiB while it lives (reserved memory for the caching allocator, device memory in
/// use for the plug-in). Every call that matters is logged to $FAKE_TORCH_LOG with the process id.
constexpr const char* fake_torch = R"PY(
import os, types
MiB = 1 << 20
_live = [0]
_peak = [0]
_plugin = [None]
uint8 = "uint8"

def _log(*words):
    with open(os.environ["FAKE_TORCH_LOG"], "a") as f:
        f.write(" ".join([str(os.getpid())] + [str(w) for w in words]) + "\n")

class _Tensor:
    def __init__(self, size):
        self.held = -(-size // (2 * MiB)) * 2 * MiB
        _live[0] += self.held
        _peak[0] = max(_peak[0], _live[0])
    def __del__(self):
        _live[0] -= self.held

def empty(size, dtype=None, device=None):
    _log("empty", size, "plugin" if _plugin[0] else "caching", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "-"))
    if size > 512 * MiB:
        raise (RuntimeError if _plugin[0] else cuda.OutOfMemoryError)("out of memory")
    return _Tensor(size)

class _OutOfMemoryError(RuntimeError):
    pass

def _pluggable(path, malloc, free):
    _log("CUDAPluggableAllocator", path, malloc, free, os.environ.get("CUVMM_ARENA_CONF", "-"))
    if "broken" in path:
        raise RuntimeError("undefined symbol: cuvmm_torch_malloc")
    return ("allocator", path)

def _change(allocator):
    _log("change_current_allocator", allocator[1])
    _plugin[0] = allocator[1]

def _mem_get_info():
    in_use = 100 * MiB + _live[0]
    return (1024 * MiB - in_use, 1024 * MiB)

def _reserved():
    return 0 if _plugin[0] else _live[0]

def _max_reserved():
    return 0 if _plugin[0] else _peak[0]

def _reset_peak():
    _peak[0] = _live[0]

cuda = types.SimpleNamespace(
    OutOfMemoryError=_OutOfMemoryError, is_available=lambda: True, init=lambda: None,
    synchronize=lambda: None, mem_get_info=_mem_get_info, memory_reserved=_reserved,
    max_memory_reserved=_max_reserved, reset_peak_memory_stats=_reset_peak,
    memory=types.SimpleNamespace(CUDAPluggableAllocator=_pluggable, change_current_allocator=_change))
)PY";

/// A scratch directory with the fake torch package, a trace and two plug-in files.
struct TempDir : cuvmm::test::TempDir {
  TempDir() : cuvmm::test::TempDir("cuvmm-torch-trace-test-") {
    std::filesystem::create_directories(path / "fake" / "torch");
    std::ofstream(path / "fake" / "torch" / "__init__.py") << fake_torch;
    // 1000 B, then 3000000 B, both freed: 2 MiB and 4 MiB held by the fake.
    std::ofstream(path / "trace.csv") << "op,id,bytes\na,0,1000\na,1,3000000\nf,0,1000\nf,1,3000000\n";
    std::ofstream(path / "libcuvmm_torch.so") << "not loaded by the fake";
    std::ofstream(path / "broken.so") << "the fake fails to load it";
  }
};

}  // namespace

TEST_CASE("torch_trace.py --plugin replays the trace a third time through cuvmm's plug-in, held = device memory in use",
          "[plan][torch_trace]") {
  TempDir dir;
  std::string const plugin = (dir.path / "libcuvmm_torch.so").string();
  auto const run = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plan", "4", "--plugin", plugin},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log").string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  // The caching allocator's two configurations first, unchanged, then the plug-in's.
  std::size_t const caching = run.output.find("replay pytorch 4 0 ");
  std::size_t const expandable = run.output.find("replay pytorch_expandable_segments 4 0 ");
  std::size_t const with_plugin = run.output.find("replay pytorch_cuvmm_plugin 4 0 ");
  REQUIRE(caching != std::string::npos);
  REQUIRE(expandable != std::string::npos);
  REQUIRE(with_plugin != std::string::npos);
  CHECK(caching < expandable);
  CHECK(expandable < with_plugin);
  std::string const plugin_lines = run.output.substr(with_plugin);
  // Peak requested 3001000, peak held 6 MiB (device memory in use less the 100 MiB before), and
  // a held column of device memory, not memory_reserved() (0 for a pluggable allocator).
  CHECK_THAT(plugin_lines, ContainsSubstring(" 3001000 6291456 "));
  CHECK_THAT(plugin_lines, ContainsSubstring("\npoint 0 1000 2097152\npoint 1 3001000 6291456\n"
                                             "point 2 3000000 4194304\npoint 3 0 0"));

  // Its own process made the plug-in (the absolute path) PyTorch's allocator before any allocation;
  // the other two processes never did.
  std::string const log = read_file(dir.path / "log");
  INFO(log);
  std::size_t const made = log.find("CUDAPluggableAllocator " + plugin + " cuvmm_torch_malloc cuvmm_torch_free -\n");
  REQUIRE(made != std::string::npos);
  std::size_t const line_start = log.rfind('\n', made) + 1;
  std::string const pid = log.substr(line_start, made - line_start);  // "PID "
  CHECK_THAT(log, ContainsSubstring(pid + "CUDAPluggableAllocator " + plugin + " cuvmm_torch_malloc cuvmm_torch_free -\n" +
                                    pid + "change_current_allocator " + plugin + "\n" + pid + "empty 1000 plugin -\n"));
  CHECK(log.find("CUDAPluggableAllocator", made + 1) == std::string::npos);
  CHECK_THAT(log, ContainsSubstring("empty 1000 caching -\n"));
  CHECK_THAT(log, ContainsSubstring("empty 1000 caching expandable_segments:True\n"));
}

TEST_CASE("torch_trace.py --plugin-conf adds plug-in replays with CUVMM_ARENA_CONF set in their processes only",
          "[plan][torch_trace]") {
  TempDir dir;
  std::string const plugin = (dir.path / "libcuvmm_torch.so").string();
  auto const run = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plugin-conf", "large_page_bytes:128MiB", "--plan", "4", "--plugin", plugin,
                                "--plugin-conf", "page_bytes:4MiB,byte_limit:1GiB"},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log").string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  std::size_t const expandable = run.output.find("replay pytorch_expandable_segments 4 0 ");
  std::size_t const plain = run.output.find("replay pytorch_cuvmm_plugin 4 0 ");
  std::size_t const large = run.output.find("replay pytorch_cuvmm_plugin:large_page_bytes:128MiB 4 0 ");
  std::size_t const two = run.output.find("replay pytorch_cuvmm_plugin:page_bytes:4MiB,byte_limit:1GiB 4 0 ");
  REQUIRE(expandable != std::string::npos);
  REQUIRE(plain != std::string::npos);
  REQUIRE(large != std::string::npos);
  REQUIRE(two != std::string::npos);
  CHECK(expandable < plain);
  CHECK(plain < large);
  CHECK(large < two);
  std::string const log = read_file(dir.path / "log");
  INFO(log);
  std::string const made = "CUDAPluggableAllocator " + plugin + " cuvmm_torch_malloc cuvmm_torch_free ";
  CHECK_THAT(log, ContainsSubstring(made + "-\n"));
  CHECK_THAT(log, ContainsSubstring(made + "large_page_bytes:128MiB\n"));
  CHECK_THAT(log, ContainsSubstring(made + "page_bytes:4MiB,byte_limit:1GiB\n"));

  // A CUVMM_ARENA_CONF in the caller's environment is the plain plug-in replay's, and named.
  auto const set = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plan", "4", "--plugin", plugin},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log2").string(), "CUVMM_ARENA_CONF=byte_limit:2GiB"});
  INFO(set.output);
  REQUIRE(set.exit_status == 0);
  CHECK_THAT(set.output, ContainsSubstring("replay pytorch_cuvmm_plugin:byte_limit:2GiB 4 0 "));
  CHECK_THAT(set.output, !ContainsSubstring("replay pytorch_cuvmm_plugin 4 0 "));
  CHECK_THAT(read_file(dir.path / "log2"), ContainsSubstring(made + "byte_limit:2GiB\n"));
}

TEST_CASE("torch_trace.py refuses a bad --plugin-conf with exit status 2, before replaying anything", "[plan][torch_trace]") {
  TempDir dir;
  std::string const trace = (dir.path / "trace.csv").string();
  std::string const plugin = (dir.path / "libcuvmm_torch.so").string();
  std::vector<std::string> const environment{"PYTHONPATH=" + (dir.path / "fake").string(),
                                             "FAKE_TORCH_LOG=" + (dir.path / "log").string()};
  auto const alone = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, trace, "--plugin-conf", "page_bytes:4MiB"},
                                 environment);
  CHECK(alone.exit_status == 2);
  CHECK(alone.output == "torch_trace.py: --plugin-conf needs --plugin\n");
  auto const spaced = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, trace, "--plugin", plugin,
                                   "--plugin-conf", "page_bytes: 4MiB"},
                                  environment);
  CHECK(spaced.exit_status == 2);
  CHECK(spaced.output == "torch_trace.py: --plugin-conf wants a CUVMM_ARENA_CONF text without spaces, not 'page_bytes: 4MiB'\n");
  auto const missing = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, trace, "--plugin", plugin, "--plugin-conf"},
                                   environment);
  CHECK(missing.exit_status == 2);
  CHECK(missing.output == "torch_trace.py: --plugin-conf wants a CUVMM_ARENA_CONF text without spaces, not ''\n");
  CHECK_FALSE(std::filesystem::exists(dir.path / "log"));  // nothing replayed
}

TEST_CASE("torch_trace.py without --plugin replays two configurations and no plug-in", "[plan][torch_trace]") {
  TempDir dir;
  auto const run = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plan", "4"},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log").string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring("replay pytorch 4 0 "));
  CHECK_THAT(run.output, ContainsSubstring("replay pytorch_expandable_segments 4 0 "));
  CHECK_THAT(run.output, !ContainsSubstring("pytorch_cuvmm_plugin"));
  CHECK_THAT(read_file(dir.path / "log"), !ContainsSubstring("CUDAPluggableAllocator"));
}

TEST_CASE("torch_trace.py --plugin in JSON mode adds a cuvmm_plugin line whose reserved memory is device memory in use",
          "[plan][torch_trace]") {
  TempDir dir;
  auto const run = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plugin", (dir.path / "libcuvmm_torch.so").string()},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log").string()});
  INFO(run.output);
  REQUIRE(run.exit_status == 0);
  // peak live 3001000 B over 6 MiB held at peak.
  CHECK_THAT(run.output, ContainsSubstring("{\"allocator\": \"cuvmm_plugin\", \"peak_live_GiB\": " +
                                           std::to_string(3001000.0 / (1 << 30)).substr(0, 6)));
  CHECK_THAT(run.output, ContainsSubstring("\"peak_reserved_GiB\": 0.005859375, \"utilization\": "));
}

TEST_CASE("torch_trace.py refuses a --plugin that is not a file with exit status 2", "[plan][torch_trace]") {
  TempDir dir;
  std::string const missing = (dir.path / "no-plugin.so").string();
  auto const run = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plan", "4", "--plugin", missing},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log").string()});
  CHECK(run.exit_status == 2);
  CHECK(run.output == "torch_trace.py: --plugin wants the path of libcuvmm_torch.so, not '" + missing + "'\n");
  CHECK_FALSE(std::filesystem::exists(dir.path / "log"));  // nothing replayed
}

TEST_CASE("torch_trace.py: a plug-in that fails costs only its own replay; the other two print, exit status 1",
          "[plan][torch_trace]") {
  TempDir dir;
  auto const run = run_program({"/usr/bin/env", "python3", TORCH_TRACE_SCRIPT, (dir.path / "trace.csv").string(),
                                "--plan", "4", "--plugin", (dir.path / "broken.so").string()},
                               {"PYTHONPATH=" + (dir.path / "fake").string(),
                                "FAKE_TORCH_LOG=" + (dir.path / "log").string()});
  INFO(run.output);
  CHECK(run.exit_status == 1);
  CHECK_THAT(run.output, ContainsSubstring("replay pytorch 4 0 "));
  CHECK_THAT(run.output, ContainsSubstring("replay pytorch_expandable_segments 4 0 "));
  CHECK_THAT(run.output, !ContainsSubstring("replay pytorch_cuvmm_plugin"));
  CHECK_THAT(run.output, ContainsSubstring("torch_trace.py: the pytorch_cuvmm_plugin replay failed with exit status 1\n"));
}

TEST_CASE("a test's PYTHONPATH replaces the one its environment sets (with both, Python may take either)",
          "[plan][torch_trace]") {
  char const* const inherited = std::getenv("PYTHONPATH");
  std::string const saved = inherited != nullptr ? inherited : "";
  ::setenv("PYTHONPATH", "/nonexistent-inherited-path", 1);
  auto const run = run_program({"/usr/bin/env"}, {"PYTHONPATH=/the-test-s-own-path"});
  if (inherited != nullptr) {
    ::setenv("PYTHONPATH", saved.c_str(), 1);
  } else {
    ::unsetenv("PYTHONPATH");
  }
  INFO(run.output);
  CHECK(run.exit_status == 0);
  CHECK_THAT(run.output, ContainsSubstring("\nPYTHONPATH=/the-test-s-own-path\n"));
  CHECK_THAT(run.output, !ContainsSubstring("nonexistent-inherited-path"));
}
