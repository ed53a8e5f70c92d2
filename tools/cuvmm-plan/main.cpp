// cuvmm-plan: capacity planning for cuvmm on this machine's GPU (or, without one, on the host
// backend, which it says plainly). It measures, through cuvmm's public API and the CUDA runtime:
// driver-call latency by chunk size and by thread count; growth of a GrowableBuffer (its real
// policy and fixed chunks of one granule) against copy-and-grow with cudaMalloc (2x, 1.5x) and
// cudaMallocAsync (2x), thrust::device_vector and a preallocated buffer, each growth in a fresh
// process and repeated (the median run is reported); how far a buffer can grow; and a trace
// replayed against cuvmm::Arena, cudaMallocAsync, cudaMalloc and, where python3 has PyTorch with
// CUDA, PyTorch's caching allocator (tools/cuvmm-plan/torch_trace.py, with and without expandable segments)
// and PyTorch with cuvmm's plug-in (libcuvmm_torch.so, found beside the loaded libcuvmm or given).
// It prints a short recommendation and, with --out, writes JSON, CSV, a self-contained HTML report
// (report.html: the recommendation in words, tables and inline charts, the machine and versions)
// and (through plot.py and matplotlib) PNG plots.
//
// Exit status: 0 when the run finished (also on the host backend, and when plots could not be made,
// which it says), 1 when a measurement or an output file failed, 2 on a bad command line or trace.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <cuvmm/cuda_backend.hpp>
#include <cuvmm/device_caps.hpp>
#include <cuvmm/error.hpp>
#include <cuvmm/host_backend.hpp>

#include "command_line.hpp"
#include "device_runtime.hpp"
#include "html_report.hpp"
#include "measure.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "rmm_replay.hpp"
#include "trace_csv.hpp"

extern char** environ;

namespace {

using namespace cuvmm::plan;
using cuvmm::format_bytes;
using cuvmm::GiB;
using cuvmm::KiB;
using cuvmm::MiB;

constexpr std::string_view usage =
    "usage: cuvmm-plan [--profile quick|full] [--out DIR] [--trace FILE] [--backend auto|cuda|host]\n"
    "                  [--runs N] [--no-plots] [--no-torch] [--torch-plugin FILE] [--help]\n"
    "                  [--version]\n"
    "\n"
    "Measures what growing GPU memory costs on this machine and prints a recommendation: chunk size,\n"
    "largest buffer, growth cost per GiB, and the hide size (the value for\n"
    "GrowableOptions::hide_bytes: bytes the GPU fills in the time of one growth step).\n"
    "\n"
    "  --profile quick|full  quick (default): meant to take about a minute on a GPU, seconds on\n"
    "                        the host.\n"
    "                        full: chunk sizes 2 MiB..4 GiB, growth to 1, 8, 64 and 120 GiB,\n"
    "                        3 runs of each growth.\n"
    "  --out DIR             write report.html (the report to read: one self-contained file),\n"
    "                        plan.json, driver_calls.csv, driver_threads.csv, growth.csv,\n"
    "                        trace_memory.csv, the replayed trace (trace.csv when generated)\n"
    "                        and PNG plots (plot.py, needs python3 with matplotlib) into DIR\n"
    "  --trace FILE          replay this trace: cuvmm's CSV (op,id,bytes) or RMM's allocation log\n"
    "                        (Thread,Time,Action,Pointer,Size,Stream); default: a generated one\n"
    "  --backend B           auto (default): the GPU when there is one, else the host backend;\n"
    "                        host: the host backend even with a GPU; cuda: fail without a GPU\n"
    "  --runs N              run each growth N times (each in a fresh process) and report the\n"
    "                        median run (default: 1 for quick, 3 for full)\n"
    "  --no-plots            do not run plot.py\n"
    "  --no-torch            do not replay the trace through PyTorch (done by default where\n"
    "                        python3 has PyTorch with CUDA; tools/cuvmm-plan/torch_trace.py)\n"
    "  --torch-plugin FILE   cuvmm's PyTorch plug-in (libcuvmm_torch.so) for the replay through\n"
    "                        PyTorch with cuvmm (pytorch_cuvmm_plugin); default: libcuvmm_torch.so\n"
    "                        in the directory of the libcuvmm this program loaded\n"
    "  --help, --version     print this help, or cuvmm-plan's version\n"
    "\n"
    "Options take their value as `--out DIR` or `--out=DIR`. Everything a run needs (the output\n"
    "directory, the trace, the plot script) is checked before anything is measured.\n"
    "\n"
    "Exit status: 0 when the run finished, 1 when a measurement or output failed, 2 on a bad\n"
    "command line, trace or output directory.\n";

struct Options {
  std::string profile = "quick";
  std::string out_dir;
  std::string trace_path;
  std::string backend = "auto";
  bool plots = true;
  bool torch = true;
  std::string torch_plugin;  ///< --torch-plugin; empty: beside the loaded libcuvmm
  std::size_t runs = 0;  ///< growth runs per case; 0: the profile's
  /// Internal (--growth-case STRATEGY:TARGET:APPEND): measure only this growth and print its row.
  /// cuvmm-plan runs every growth this way, each in a fresh process of its own: the driver finishes
  /// large frees lazily, at later allocations, so a growth measured after others in one process
  /// would pay for their teardown.
  std::string growth_strategy;
  GrowthCase growth_case{};
  /// Internal (--driver-status): print the driver's status for the parent and exit (see
  /// driver_status_from_child).
  bool driver_status_child = false;
};

/// What one profile measures on one backend.
struct Profile {
  std::vector<std::size_t> chunk_sizes;
  std::size_t driver_iterations = 0;
  std::vector<std::size_t> thread_chunk_sizes;  ///< driver calls by thread count, at these chunk sizes
  std::vector<std::size_t> thread_counts;
  std::size_t thread_iterations = 0;            ///< cycles per thread
  std::size_t thread_repeats = 3;               ///< repeats of the thread counts (the scaling's spread)
  std::vector<GrowthCase> growth_cases;
  std::size_t growth_runs = 1;
  std::size_t reach_step = 0;
  std::size_t trace_allocations = 0;
  std::size_t trace_live_bytes = 0;             ///< at most; a quarter of the free memory where that is less
  double trace_max_log2_bytes = 30;
};

/// The simulated device of the host profile: small enough for any CI machine.
constexpr std::size_t host_device_bytes = 1 * GiB;

Profile make_profile(bool full, bool device) {
  Profile p;
  if (device) {
    std::size_t const largest_chunk = full ? 4 * GiB : 1 * GiB;
    for (std::size_t s = 2 * MiB; s <= largest_chunk; s *= full ? 2 : 4) p.chunk_sizes.push_back(s);
    if (p.chunk_sizes.back() != largest_chunk) p.chunk_sizes.push_back(largest_chunk);
    p.driver_iterations = full ? 20 : 5;
    p.thread_chunk_sizes = full ? std::vector<std::size_t>{2 * MiB, 64 * MiB, 1 * GiB} : std::vector<std::size_t>{2 * MiB};
    p.thread_counts = {1, 2, 4, 8};
    p.thread_iterations = full ? 20 : 10;
    p.thread_repeats = full ? 5 : 3;
    p.growth_runs = full ? 3 : 1;
    if (full) {
      p.growth_cases = device_growth_cases();
    } else {
      p.growth_cases = {{256 * MiB, 4 * KiB}, {1 * GiB, 1 * MiB}, {4 * GiB, 64 * MiB}};
    }
    p.reach_step = 1 * GiB;
    p.trace_allocations = full ? 10000 : 2000;
    p.trace_live_bytes = full ? 40 * GiB : 8 * GiB;
    p.trace_max_log2_bytes = 30;
  } else {
    std::size_t const largest_chunk = full ? 512 * MiB : 128 * MiB;
    for (std::size_t s = 2 * MiB; s <= largest_chunk; s *= 4) p.chunk_sizes.push_back(s);
    p.driver_iterations = full ? 10 : 5;
    p.thread_chunk_sizes = {2 * MiB};
    p.thread_counts = {1, 2, 4, 8};
    p.thread_iterations = 5;
    p.growth_runs = full ? 3 : 1;
    if (full) {
      p.growth_cases = {{256 * MiB, 4 * KiB}, {1 * GiB, 1 * MiB}, {1 * GiB, 64 * MiB}};
    } else {
      p.growth_cases = {{64 * MiB, 4 * KiB}, {256 * MiB, 1 * MiB}, {512 * MiB, 64 * MiB}};
    }
    p.reach_step = 64 * MiB;
    p.trace_allocations = full ? 4000 : 1000;
    p.trace_live_bytes = 256 * MiB;
    p.trace_max_log2_bytes = 24;  // up to 16 MiB per allocation
  }
  return p;
}

/// Reads the command line (tools/command_line.hpp: --opt value and --opt=value, --help, --version,
/// a short error and a hint on a bad one, exit status 2).
Options parse_options(int argc, char** argv) {
  Options o;
  std::string runs;
  std::string growth_case;
  CLI::App app("", "cuvmm-plan");
  app.add_option("--profile", o.profile)->type_name("quick|full")->check(cuvmm::tools::one_of("profile", {"quick", "full"}));
  app.add_option("--out", o.out_dir)->type_name("DIR");
  app.add_option("--trace", o.trace_path)->type_name("FILE");
  app.add_option("--backend", o.backend)->type_name("auto|cuda|host")->check(cuvmm::tools::one_of("backend", {"auto", "cuda", "host"}));
  app.add_option("--runs", runs)->type_name("N")->check(CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        unsigned long const n = std::strtoul(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || n == 0 || n > 100) return "wants a count from 1 to 100, not '" + text + "'";
        return {};
      },
      ""));
  app.add_flag("--no-plots", [&](std::int64_t) { o.plots = false; });
  app.add_flag("--no-torch", [&](std::int64_t) { o.torch = false; });
  app.add_option("--torch-plugin", o.torch_plugin)->type_name("FILE");
  // Internal: not in the usage text, nor in any generated help (group "").
  app.add_option("--growth-case", growth_case)->group("");
  app.add_flag("--driver-status", o.driver_status_child)->group("");
  cuvmm::tools::parse_command_line(app, argc, argv, usage);
  if (!runs.empty()) o.runs = std::strtoul(runs.c_str(), nullptr, 10);
  if (!growth_case.empty()) {
    char strategy[64] = {};
    unsigned long long target = 0, append = 0;
    if (std::sscanf(growth_case.c_str(), "%63[^:]:%llu:%llu", strategy, &target, &append) != 3 || append == 0) {
      cuvmm::tools::refuse_command_line("cuvmm-plan",
                                        "--growth-case wants STRATEGY:TARGET_BYTES:APPEND_BYTES, not '" + growth_case + "'");
    }
    o.growth_strategy = strategy;
    o.growth_case = {static_cast<std::size_t>(target), static_cast<std::size_t>(append)};
  }
  return o;
}

/// memset fills on the host backend (its memory is this process's).
class HostFills final : public MemoryOps {
 public:
  void fill(void* data, std::size_t bytes) override { std::memset(data, 0x5A, bytes); }
  void finish() override {}
};

std::string case_label(const char* strategy, const GrowthCase& c) {
  return std::string("growth ") + strategy + " to " + format_bytes(c.target_bytes) + " in " +
         format_bytes(c.append_bytes) + " appends";
}

/// One line that carries a GrowthRow from a --growth-case child to its parent.
std::string encode_growth_row(const GrowthRow& r) {
  char line[512];
  std::snprintf(line, sizeof line, "growth-row %s %zu %zu %s %zu %zu %.9g %.9g %zu %zu %zu %.9g %zu\n",
                r.strategy.c_str(), r.target_bytes, r.append_bytes, r.status.c_str(), r.reached_bytes, r.appends,
                r.total_seconds, r.p99_append_us, r.peak_bytes, r.bytes_copied, r.chunks, r.growth_seconds,
                r.peak_in_use_bytes);
  return line;
}

std::optional<GrowthRow> decode_growth_row(const std::string& text) {
  auto const at = text.find("growth-row ");
  if (at == std::string::npos) return std::nullopt;
  char strategy[64] = {}, status[32] = {};
  GrowthRow r;
  int const fields = std::sscanf(text.c_str() + at, "growth-row %63s %zu %zu %31s %zu %zu %lg %lg %zu %zu %zu %lg %zu",
                                 strategy, &r.target_bytes, &r.append_bytes, status, &r.reached_bytes, &r.appends,
                                 &r.total_seconds, &r.p99_append_us, &r.peak_bytes, &r.bytes_copied, &r.chunks,
                                 &r.growth_seconds, &r.peak_in_use_bytes);
  if (fields != 13) return std::nullopt;
  r.strategy = strategy;
  r.status = status;
  return r;
}

/// Two lines that carry a DriverStatus from a --driver-status child to its parent.
std::string encode_driver_status(const cuvmm::DriverStatus& s) {
  return "driver-status " + std::to_string(s.available ? 1 : 0) + " " + std::to_string(s.driver_version) + " " +
         std::to_string(s.device_count) + "\n" + s.reason + "\n";
}

std::optional<cuvmm::DriverStatus> decode_driver_status(const std::string& text) {
  int available = 0;
  cuvmm::DriverStatus s;
  if (std::sscanf(text.c_str(), "driver-status %d %d %d", &available, &s.driver_version, &s.device_count) != 3) {
    return std::nullopt;
  }
  auto const reason = text.find('\n');
  if (reason == std::string::npos) return std::nullopt;
  s.available = available != 0;
  s.reason = text.substr(reason + 1);
  while (!s.reason.empty() && s.reason.back() == '\n') s.reason.pop_back();
  return s;
}

/// Writes `path` through `writer`; throws std::runtime_error if the file cannot be written.
void write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& writer) {
  std::ofstream out(path);
  writer(out);
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

/// What a child process wrote to stdout, and how it ended.
struct ChildResult {
  int status = 0;       ///< exit status; 127 when it could not be started, -1 when it did not exit
  std::string output;   ///< its stdout (stderr is this program's)
};

/// Runs `args` (args[0] searched on PATH when it has no slash) and collects its stdout.
ChildResult run_child(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  pid_t pid = 0;
  int const spawned = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  ChildResult result;
  if (spawned == 0) {
    char buffer[4096];
    for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) != 0;) {
      if (n > 0) result.output.append(buffer, static_cast<std::size_t>(n));
      else if (errno != EINTR) break;
    }
  }
  close(out[0]);
  if (spawned != 0) {
    result.status = 127;
    return result;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

/// Runs this program again with `args` and returns what it wrote to stdout; throws
/// std::runtime_error when it cannot be started or does not exit with 0.
std::string run_self(std::vector<std::string> args) {
  args.insert(args.begin(), "/proc/self/exe");
  ChildResult const child = run_child(args);
  if (child.status == 127) throw std::runtime_error("cannot start " + args[1] + " " + args[2] + " in a new process");
  if (child.status != 0) throw std::runtime_error("the growth measurement " + args.back() + " failed in its own process");
  return child.output;
}

/// The driver's status as a child process finds it, so that this process has not initialized the
/// driver when the growth phase starts (measure_growth_phase says why); asked here when no child
/// could say.
cuvmm::DriverStatus driver_status_from_child() {
  try {
    ChildResult const child = run_child({"/proc/self/exe", "--driver-status"});
    if (child.status == 0) {
      if (auto status = decode_driver_status(child.output)) return *status;
    }
  } catch (const std::exception&) {  // no pipe: ask here
  }
  return cuvmm::driver_status();
}

/// A run that cannot start as asked (a bad output directory, trace or script): exit status 2,
/// before anything is measured.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The script that $`environment_variable` names (it must exist), else the first of the source
/// tree's copy and the installed copy that exists. Throws Refused when none does.
std::string find_script(const char* environment_variable, const char* source, const char* installed) {
  if (const char* chosen = std::getenv(environment_variable)) {
    if (std::filesystem::is_regular_file(chosen)) return chosen;
    throw Refused(std::string(environment_variable) + " names '" + chosen + "', which is not a file");
  }
  for (const char* candidate : {source, installed}) {
    if (std::filesystem::is_regular_file(candidate)) return candidate;
  }
  throw Refused(std::filesystem::path(installed).filename().string() + " was found neither at " + installed +
                " nor at " + source + " (set " + environment_variable + ")");
}

/// Makes `dir` if it is missing and proves that a file can be written in it; throws Refused saying
/// what is wrong otherwise.
void check_out_dir(const std::filesystem::path& dir) {
  std::string const said = "--out '" + dir.string() + "': ";
  std::error_code error;
  if (std::filesystem::exists(dir, error) && !std::filesystem::is_directory(dir, error)) {
    throw Refused(said + "exists and is not a directory");
  }
  std::filesystem::create_directories(dir, error);
  if (error) throw Refused(said + "cannot be made: " + error.message());
  std::filesystem::path const probe = dir / (".cuvmm-plan-probe-" + std::to_string(getpid()));
  int const fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw Refused(said + "cannot write in it: " + std::strerror(errno));
  ::close(fd);
  std::filesystem::remove(probe, error);
}

/// The first Python that runs `script --check` with exit status 0: $CUVMM_PLAN_PYTHON, python3 on
/// PATH, then the system's /usr/bin/python3 (where Debian's packages are, when PATH starts with
/// another Python). `found_python` says whether any Python could be started at all.
std::optional<std::string> python_for(const std::string& script, bool& found_python) {
  std::vector<std::string> pythons;
  if (const char* chosen = std::getenv("CUVMM_PLAN_PYTHON")) pythons.emplace_back(chosen);
  pythons.emplace_back("python3");
  pythons.emplace_back("/usr/bin/python3");
  found_python = false;
  for (auto const& python : pythons) {
    int const status = run_child({python, script, "--check"}).status;
    if (status == 127) continue;
    found_python = true;
    if (status == 0) return python;
  }
  return std::nullopt;
}

/// Runs `script` (plot.py) on DIR with the first Python that has matplotlib. Returns a sentence
/// saying what happened.
std::string run_plots(const std::string& script, const std::string& out_dir) {
  bool found_python = false;
  std::optional<std::string> const python = python_for(script, found_python);
  if (!found_python) return "plots not made: python3 was not found (Debian: apt-get install python3 python3-matplotlib)";
  if (!python) return "plots not made: python3 has no matplotlib (Debian: apt-get install python3-matplotlib)";
  if (run_child({*python, script, out_dir}).status == 0) return "plots written by " + script + " (" + *python + ")";
  return "plots not made: " + script + " failed (see its message above)";
}

/// libcuvmm_torch.so in the directory of the libcuvmm this program loaded (found with dladdr on one
/// of its functions), or nullopt with `why` saying why there is none.
std::optional<std::string> plugin_beside_libcuvmm(std::string& why) {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cuvmm::driver_status), &info) == 0 || info.dli_fname == nullptr) {
    why = "the loaded libcuvmm could not be found (dladdr)";
    return std::nullopt;
  }
  std::filesystem::path const library = info.dli_fname;
  if (library.filename().string().rfind("libcuvmm", 0) != 0) {
    why = "cuvmm is not loaded as a shared library here (" + library.string() + ")";
    return std::nullopt;
  }
  std::error_code error;
  std::filesystem::path const plugin = (std::filesystem::absolute(library, error).lexically_normal().parent_path() / "libcuvmm_torch.so");
  if (!std::filesystem::is_regular_file(plugin, error)) {
    why = "no " + plugin.string() + " beside the loaded libcuvmm";
    return std::nullopt;
  }
  return plugin.string();
}

/// The plug-in's second replay: its arena options for speed over memory. On an H200, on the full
/// profile's trace, the plug-in took 1.76x PyTorch's time with the default 32 MiB large pages and
/// 0.92x with these, at a mean utilization of 0.82 against 0.92 and PyTorch's 0.68: the
/// pytorch_cuvmm_plugin rows of `cuvmm-plan --profile full` reproduce it.
constexpr const char* plugin_speed_conf = "large_page_bytes:128MiB";

/// Replays `trace` through PyTorch's caching allocator (torch_trace.py, default and expandable
/// segments, and with `plugin` through cuvmm's plug-in, with its options from CUVMM_ARENA_CONF and
/// with plugin_speed_conf, each in a process of its own) when a Python with PyTorch and CUDA is
/// found. Adds its replays to `m`, or a note saying why there are none.
void replay_on_torch(const std::string& script, const std::string& plugin, const Trace& trace,
                     std::size_t timeline_points, Measurements& m) {
  bool found_python = false;
  std::optional<std::string> const python = python_for(script, found_python);
  if (!python) {
    m.notes.push_back("PyTorch not replayed: no python3 here has PyTorch with CUDA (or set CUVMM_PLAN_PYTHON)");
    return;
  }
  std::filesystem::path const csv =
      std::filesystem::temp_directory_path() / ("cuvmm-plan-trace-" + std::to_string(getpid()) + ".csv");
  write_file(csv, [&](std::ostream& out) { write_trace_csv(out, trace.ops); });
  std::vector<std::string> command{*python, script, csv.string(), "--plan", std::to_string(timeline_points)};
  if (!plugin.empty()) {
    command.emplace_back("--plugin");
    command.push_back(plugin);
    command.emplace_back("--plugin-conf");
    command.emplace_back(plugin_speed_conf);
  }
  ChildResult const child = run_child(command);
  std::filesystem::remove(csv);
  std::vector<ReplayResult> replays;
  if (child.status != 0) {
    m.notes.push_back("PyTorch replay failed: " + script + " exited with " + std::to_string(child.status) +
                      " (its message is above)");
    try {  // what the configurations that did not fail printed (torch_trace.py runs each one)
      replays = decode_replays(child.output);
    } catch (const cuvmm::Error&) {
      replays.clear();
    }
  } else {
    replays = decode_replays(child.output);
    if (replays.empty()) throw std::runtime_error(script + " --plan printed no replay");
  }
  for (auto& replay : replays) m.replays.push_back(std::move(replay));
}

/// The backend the run measures, and what fills its memory.
struct Machine {
  bool on_device = false;
  std::optional<cuvmm::HostBackend> host_backend;
  cuvmm::Backend* backend = nullptr;
  std::optional<DeviceRuntimeSession> device;
  HostFills host_fills;
  MemoryOps& fills() { return device ? device->memory_ops() : static_cast<MemoryOps&>(host_fills); }
};

/// Everything a run needs that can be checked before measuring: checked, found or read here.
struct Prepared {
  std::optional<Trace> file_trace;  ///< the --trace file, read
  std::string plot_script;          ///< when plots will be made
  std::string torch_script;         ///< when the trace will be replayed through PyTorch
  bool torch = false;
  std::string torch_plugin;         ///< cuvmm's PyTorch plug-in; empty: no replay through it
  std::string torch_plugin_note;    ///< why there is no plug-in replay, when PyTorch replays without it
};

/// Phase 0: the output directory, the trace file and the scripts. Throws Refused.
Prepared prepare(const Options& options, bool on_device) {
  Prepared p;
  if (!options.out_dir.empty()) check_out_dir(options.out_dir);
  if (!options.trace_path.empty()) {
    try {
      p.file_trace = read_trace_file(options.trace_path);
    } catch (const cuvmm::Error& error) {
      throw Refused(error.context());
    }
  }
  if (!options.out_dir.empty() && options.plots) {
    p.plot_script = find_script("CUVMM_PLAN_PLOT_SCRIPT", CUVMM_PLAN_PLOT_SOURCE, CUVMM_PLAN_PLOT_INSTALLED);
  }
  if (!options.torch_plugin.empty()) {  // checked on every backend: a bad path is a bad command line
    std::error_code error;
    if (!std::filesystem::is_regular_file(options.torch_plugin, error)) {
      throw Refused("--torch-plugin '" + options.torch_plugin + "': " +
                    (std::filesystem::exists(options.torch_plugin, error) ? "is not a file" : "no such file"));
    }
  }
  p.torch = on_device && options.torch;
  if (p.torch) {
    p.torch_script = find_script("CUVMM_PLAN_TORCH_SCRIPT", CUVMM_PLAN_TORCH_SOURCE, CUVMM_PLAN_TORCH_INSTALLED);
    if (!options.torch_plugin.empty()) {
      p.torch_plugin = options.torch_plugin;
    } else if (auto found = plugin_beside_libcuvmm(p.torch_plugin_note)) {
      p.torch_plugin = *found;
    } else {
      p.torch_plugin_note = "PyTorch with cuvmm's plug-in not replayed: " + p.torch_plugin_note +
                            " (give --torch-plugin FILE)";
    }
  }
  return p;
}

/// Says, before anything is measured, that this run is the host-backend profile and why.
void announce_host_profile(bool gpu, const cuvmm::DriverStatus& driver) {
  std::printf("cuvmm-plan: %s, so this is the HOST-BACKEND profile.\n"
              "HostBackend (memfd chunks mapped with mmap) stands in for a GPU with %s of memory: its\n"
              "numbers describe this machine's kernel, not a GPU, and no cudaMalloc baselines are measured.\n"
              "Run cuvmm-plan on a machine with a GPU for those.\n\n",
              gpu ? "--backend host was given" : (driver.available ? "no CUDA device found" : driver.reason.c_str()),
              format_bytes(host_device_bytes).c_str());
  std::fflush(stdout);  // before the progress lines on stderr
}

/// The first "model name" line of /proc/cpuinfo; empty where there is none.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    auto const colon = line.find(':');
    if (colon == std::string::npos) break;
    auto const start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return {};
}

/// This machine and the software it runs, for the report. The CUDA runtime's version needs no GPU.
MachineInfo machine_info(const cuvmm::DriverStatus& driver) {
  MachineInfo info;
  info.cuda_driver_version = driver.available ? driver.driver_version : 0;
  info.cuda_runtime_version = cuda_runtime_version();
  utsname names{};
  if (::uname(&names) == 0) info.os = std::string(names.sysname) + " " + names.release + " " + names.machine;
  info.cpu = cpu_model();
  info.cpus = std::thread::hardware_concurrency();
#if defined(__clang__)
  info.compiler = "clang++ " __clang_version__;
#elif defined(__GNUC__)
  info.compiler = "g++ " __VERSION__;
#endif
  return info;
}

/// Chooses the GPU or the host backend and records what it is in `m`.
void open_machine(Machine& machine, bool on_device, Measurements& m) {
  machine.on_device = on_device;
  if (on_device) {
    machine.backend = &cuvmm::cuda_backend(0);
    cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
    m.backend = "cuda";
    m.device_name = caps.name;
    machine.device.emplace();
  } else {
    machine.host_backend.emplace(cuvmm::HostBackend::Options{2 * MiB, host_device_bytes});
    machine.backend = &*machine.host_backend;
    m.backend = "host";
    m.device_name = "host backend (Linux virtual memory, a simulated " + format_bytes(host_device_bytes) + " device)";
  }
  auto const memory = machine.backend->memory_info(0);
  m.total_bytes = memory.total;
  m.free_bytes = memory.free;
  m.granularity = machine.backend->granularity({}, cuvmm::GranularityKind::minimum);
}

/// One growth, timed, then (on a device) again for its peak device memory in use, untimed.
GrowthRow grow_once(Machine& machine, const std::string& name, GrowthCase c) {
  DeviceRuntimeSession* const session = machine.device ? &*machine.device : nullptr;
  auto const make = [&] { return make_growth_strategy(name, *machine.backend, session, c.target_bytes); };
  GrowthRow row{name, c.target_bytes, c.append_bytes, "out_of_memory"};
  try {
    auto strategy = make();
    row = measure_growth(name, *strategy, c.target_bytes, c.append_bytes, machine.fills());
  } catch (const std::bad_alloc&) {  // a preallocated buffer that does not fit
  }
  if (machine.device) {
    machine.device->synchronize_device();
    row.peak_in_use_bytes = measure_peak_in_use(make, c.target_bytes, c.append_bytes, machine.fills());
    machine.device->synchronize_device();
  }
  return row;
}

/// The trace to replay: the --trace file, or one generated for the profile.
Trace choose_trace(const Options& options, Prepared& prepared, const Profile& profile, Measurements& m) {
  Trace trace;
  if (prepared.file_trace) {
    trace = std::move(*prepared.file_trace);
    m.trace_source = options.trace_path + " (" + std::string(to_string(trace.format)) + " format)";
  } else {
    std::size_t const live_bytes = std::min(profile.trace_live_bytes, m.free_bytes / 4);
    trace.ops = make_trace(profile.trace_allocations, live_bytes, 1234, profile.trace_max_log2_bytes);
    m.trace_source = "generated: " + std::to_string(profile.trace_allocations) + " allocations, log-uniform 1 B.." +
                     format_bytes(std::size_t{1} << static_cast<int>(profile.trace_max_log2_bytes)) + ", live <= " +
                     format_bytes(live_bytes) + ", seed 1234";
  }
  m.trace_ops = trace.ops.size();
  if (trace.failed_allocations_skipped != 0) {
    m.notes.push_back(std::to_string(trace.failed_allocations_skipped) +
                      " 'allocate failure' lines of the RMM log were skipped");
  }
  if (trace.frees_before_log_skipped != 0) {
    m.notes.push_back(std::to_string(trace.frees_before_log_skipped) +
                      " frees in the RMM log were of memory allocated before logging began, and were skipped");
  }
  return trace;
}

/// Phase 1: every strategy on every case, `runs` times, each in a fresh process (see
/// Options::growth_strategy), before this process has initialized the CUDA driver: on an H200
/// (persistence mode on), while any other process had the driver initialized (a CUDA context, or
/// only cuInit), the first chunks a process made shortly after a large process had exited took
/// tens of milliseconds longer; with no other process they did not. The preallocated baseline
/// makes its one allocation before its timing starts, so such a wait would be charged to the
/// growing buffers alone. The runs of a case are spread over the whole phase, not back to back,
/// so that a slow spell of the machine does not fall on one case's every run.
void measure_growth_phase(bool on_device, const Profile& profile, const std::vector<std::string>& strategies,
                          std::size_t runs, Progress& progress, Measurements& m) {
  std::vector<std::vector<GrowthRow>> case_runs(profile.growth_cases.size() * strategies.size());
  for (std::size_t run = 1; run <= runs; ++run) {
    for (std::size_t c = 0; c < profile.growth_cases.size(); ++c) {
      for (std::size_t s = 0; s < strategies.size(); ++s) {
        GrowthCase const& growth = profile.growth_cases[c];
        std::string label = case_label(strategies[s].c_str(), growth);
        if (runs > 1) label += ", run " + std::to_string(run) + " of " + std::to_string(runs);
        progress.step(label);
        std::string const spec = strategies[s] + ":" + std::to_string(growth.target_bytes) + ":" +
                                 std::to_string(growth.append_bytes);
        std::string const said = run_self({"--backend", on_device ? "cuda" : "host", "--growth-case", spec});
        std::optional<GrowthRow> row = decode_growth_row(said);
        if (!row) throw std::runtime_error("the growth measurement " + spec + " printed no result");
        case_runs[c * strategies.size() + s].push_back(std::move(*row));
      }
    }
  }
  for (auto& rows : case_runs) m.growth.push_back(median_run(std::move(rows)));
}

/// Phase 2: driver calls by chunk size, then by thread count.
void measure_driver_phase(Machine& machine, const Profile& profile, Progress& progress, Measurements& m) {
  m.driver_calls = measure_driver_calls(*machine.backend, profile.chunk_sizes, profile.driver_iterations,
                                        [&](std::size_t bytes) { progress.step("driver calls, " + format_bytes(bytes) + " chunks"); });
  // Each repeat measures every thread count once, one after another, so that the scaling is read
  // within a repeat and the repeats give its spread.
  for (std::size_t repeat = 1; repeat <= profile.thread_repeats; ++repeat) {
    for (std::size_t const chunk : profile.thread_chunk_sizes) {
      auto rows = measure_driver_threads(*machine.backend, chunk, profile.thread_counts, profile.thread_iterations,
                                         [&](std::size_t threads) {
                                           progress.step("driver calls, " + format_bytes(chunk) + " chunks, " +
                                                         std::to_string(threads) + " threads, repeat " +
                                                         std::to_string(repeat) + " of " +
                                                         std::to_string(profile.thread_repeats));
                                         });
      for (auto& row : rows) row.repeat = repeat;
      m.driver_threads.insert(m.driver_threads.end(), rows.begin(), rows.end());
    }
  }
}

/// Phase 3: how far one buffer grows.
void measure_reach_phase(Machine& machine, const Profile& profile, Progress& progress, Measurements& m) {
  progress.step("reach: growing one buffer until the " +
                std::string(machine.on_device ? "device" : "simulated device") + " is full");
  m.reach = measure_reach(*machine.backend, profile.reach_step);
}

/// Phase 4: the trace replayed on the Arena and, on a device, the CUDA runtime and PyTorch.
void measure_trace_phase(Machine& machine, const Trace& trace, const Prepared& prepared, Progress& progress,
                         Measurements& m) {
  constexpr std::size_t timeline_points = 2000;
  progress.step("trace replay on cuvmm::Arena (" + std::to_string(trace.ops.size()) + " operations)");
  {
    auto arena = make_arena_allocator(*machine.backend);
    m.replays.push_back(replay_trace("cuvmm_arena", *arena, trace, timeline_points));
  }
  if (!machine.device) {
    m.notes.push_back("host backend: no GPU, so no cudaMalloc, cudaMallocAsync, RMM, thrust, copy-and-grow or "
                      "PyTorch baselines");
    return;
  }
  progress.step("trace replay on cudaMallocAsync");
  {
    auto async = machine.device->cuda_malloc_async();
    m.replays.push_back(replay_trace("cudaMallocAsync", *async, trace, timeline_points));
  }
  progress.step("trace replay on cudaMalloc");
  {
    auto plain = machine.device->cuda_malloc();
    m.replays.push_back(replay_trace("cudaMalloc", *plain, trace, timeline_points));
  }
  if (rmm_replay_built()) {
    for (RmmResource const which : rmm_resources) {
      std::string const name(rmm_replay_name(which));
      progress.step("trace replay on " + name);
      auto rmm = make_rmm_allocator(which, machine.device->stream());
      m.replays.push_back(replay_trace(name, *rmm, trace, timeline_points));
    }
  } else {
    m.notes.push_back("RMM's pool and arena resources: not replayed, as cuvmm-plan was built without RMM "
                      "(configure with -Drmm_root=DIR, DIR holding `pip install --target DIR librmm-cu13`)");
  }
  if (prepared.torch) {
    progress.step(prepared.torch_plugin.empty()
                      ? "trace replay on PyTorch's caching allocator (python3, torch_trace.py)"
                      : "trace replay on PyTorch's caching allocator and cuvmm's plug-in (python3, torch_trace.py)");
    if (!prepared.torch_plugin_note.empty()) m.notes.push_back(prepared.torch_plugin_note);
    replay_on_torch(prepared.torch_script, prepared.torch_plugin, trace, timeline_points, m);
  }
}

/// The PNGs plot.py writes, linked from the report when they were made.
constexpr const char* plot_files[] = {"growth_time.png", "driver_latency.png", "driver_threads.png",
                                      "trace_memory.png"};

/// What phase 5 wrote.
struct Written {
  std::string plots_said;  ///< what the plotting said (empty when no plots were asked for)
  std::filesystem::path report;
};

/// Phase 5: plan.json, the CSV tables, a generated trace, the plots and, last, report.html (which
/// links the others) into --out.
Written write_outputs(const Options& options, const Prepared& prepared, const Measurements& m,
                      const Recommendation& recommendation, const Trace& trace, Progress& progress) {
  std::filesystem::path const dir = options.out_dir;
  std::vector<std::string> files = {"plan.json", "driver_calls.csv", "driver_threads.csv", "growth.csv",
                                    "trace_memory.csv"};
  write_file(dir / "plan.json", [&](std::ostream& out) { write_json(out, m, recommendation); });
  write_file(dir / "driver_calls.csv", [&](std::ostream& out) { write_driver_calls_csv(out, m); });
  write_file(dir / "driver_threads.csv", [&](std::ostream& out) { write_driver_threads_csv(out, m); });
  write_file(dir / "growth.csv", [&](std::ostream& out) { write_growth_csv(out, m); });
  write_file(dir / "trace_memory.csv", [&](std::ostream& out) { write_trace_memory_csv(out, m); });
  if (options.trace_path.empty()) {
    write_file(dir / "trace.csv", [&](std::ostream& out) { write_trace_csv(out, trace.ops); });
    files.emplace_back("trace.csv");
  }
  Written written;
  if (!prepared.plot_script.empty()) {
    progress.note("making plots");
    written.plots_said = run_plots(prepared.plot_script, dir.string());
    // Linked only when this run made them: a failed plot.py may leave an earlier run's PNGs.
    std::error_code error;
    bool const plotted = written.plots_said.rfind("plots written by ", 0) == 0;
    for (const char* png : plot_files) {
      if (plotted && std::filesystem::is_regular_file(dir / png, error)) files.emplace_back(png);
    }
  }
  written.report = dir / "report.html";
  write_file(written.report, [&](std::ostream& out) { write_html_report(out, m, recommendation, files); });
  return written;
}

/// Phase 6: the recommendation and the replays on stdout.
void print_report(const Options& options, const Measurements& m, const Recommendation& recommendation,
                  const Written& written) {
  std::printf("%s", format_recommendation(recommendation, m).c_str());
  std::printf("%s", format_growth_ratios(m).c_str());
  for (auto const& replay : m.replays) {
    std::printf("  trace on %-29s peak held %s for %s requested at peak; mean utilization %.2f; %zu failed\n",
                replay.allocator.c_str(), format_bytes(replay.peak_held_bytes).c_str(),
                format_bytes(replay.peak_requested_bytes).c_str(), replay.mean_utilization, replay.failed_allocations);
  }
  for (auto const& note : m.notes) std::printf("  note: %s\n", note.c_str());
  std::printf("Measured in %.0f s.\n", m.seconds);
  if (!options.out_dir.empty()) {
    std::printf("Results: %s (plan.json, driver_calls.csv, driver_threads.csv, growth.csv, trace_memory.csv)\n",
                options.out_dir.c_str());
    if (!written.plots_said.empty()) std::printf("%s\n", written.plots_said.c_str());
    std::error_code error;
    std::filesystem::path const report = std::filesystem::absolute(written.report, error).lexically_normal();
    std::printf("Report: %s\n", (error ? written.report : report).c_str());
  }
}

int run(const Options& options) {
  auto const started = std::chrono::steady_clock::now();
  if (options.driver_status_child) {
    std::fputs(encode_driver_status(cuvmm::driver_status()).c_str(), stdout);
    return 0;
  }
  bool const growth_child = !options.growth_strategy.empty();
  cuvmm::DriverStatus const driver = growth_child ? cuvmm::driver_status() : driver_status_from_child();
  bool const gpu = driver.available && driver.device_count > 0;
  if (options.backend == "cuda" && !gpu) {
    std::fprintf(stderr, "cuvmm-plan: --backend cuda, but there is no GPU: %s\n",
                 driver.available ? "no CUDA device" : driver.reason.c_str());
    return 1;
  }
  bool const on_device = gpu && options.backend != "host";

  // Everything the run needs is checked before anything is measured.
  Prepared prepared;
  if (!growth_child) {
    try {
      prepared = prepare(options, on_device);
    } catch (const Refused& refused) {
      std::fprintf(stderr, "cuvmm-plan: %s\n", refused.what());
      return 2;
    }
  }

  Measurements m;
  m.profile = options.profile;
  Machine machine;
  if (growth_child) {  // a child: this one growth, printed for the parent
    open_machine(machine, on_device, m);
    // Half a second for the driver to finish freeing what the previous child's exit gave back, as
    // bench_growth's settle() does. On an H200, growth to 120 GiB in 64 MiB appends took 1.99x the
    // preallocated time without the pause and 1.06x with it (bench_growth, that case).
    if (machine.device) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::fputs(encode_growth_row(grow_once(machine, options.growth_strategy, options.growth_case)).c_str(), stdout);
    return 0;
  }

  Profile const profile = make_profile(options.profile == "full", on_device);
  std::vector<std::string> const strategies = growth_strategy_names(on_device);
  std::size_t const runs = options.runs != 0 ? options.runs : profile.growth_runs;
  std::size_t const total_steps = profile.chunk_sizes.size() +
                                  profile.thread_repeats * profile.thread_chunk_sizes.size() * profile.thread_counts.size() +
                                  runs * profile.growth_cases.size() * strategies.size() + 1 + (on_device ? 3 : 1) +
                                  (prepared.torch ? 1 : 0);
  Progress progress(total_steps, isatty(STDERR_FILENO) == 1);

  if (!on_device) announce_host_profile(gpu, driver);
  // The growth children first, while this process has not initialized the driver (measure_growth_phase).
  measure_growth_phase(on_device, profile, strategies, runs, progress, m);
  open_machine(machine, on_device, m);
  m.machine = machine_info(driver);
  Trace const trace = choose_trace(options, prepared, profile, m);
  measure_driver_phase(machine, profile, progress, m);
  measure_reach_phase(machine, profile, progress, m);
  measure_trace_phase(machine, trace, prepared, progress, m);

  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Recommendation const recommendation = recommend(m);
  Written const written =
      options.out_dir.empty() ? Written{} : write_outputs(options, prepared, m, recommendation, trace, progress);
  progress.finish();  // the bar's line is cleared before the report
  print_report(options, m, recommendation, written);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options const options = parse_options(argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "\ncuvmm-plan: %s\n", error.what());
    return 1;
  }
}
