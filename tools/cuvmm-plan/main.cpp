// cuvmm-plan: capacity planning for cuvmm on this machine's GPU (or, without one, on the host
// backend, which it says plainly). It measures, through cuvmm's public API and the CUDA runtime:
// driver-call latency by chunk size, growth of a GrowableBuffer (its real policy and fixed chunks
// of one granule) against cudaMalloc copy-and-grow (2x, 1.5x) and a preallocated buffer, how far a
// buffer can grow, and a trace replayed against cuvmm::Arena, cudaMallocAsync and cudaMalloc. It
// prints a short recommendation and, with --out, writes JSON, CSV and (through plot.py and
// matplotlib) PNG plots.
//
// Exit status: 0 when the run finished (also on the host backend, and when plots could not be made,
// which it says), 1 when a measurement or an output file failed, 2 on a bad command line or trace.
#include <spawn.h>
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

#include "device_runtime.hpp"
#include "measure.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "trace_csv.hpp"

extern char** environ;

namespace {

using namespace cuvmm::plan;
using cuvmm::GiB;
using cuvmm::KiB;
using cuvmm::MiB;

constexpr std::string_view usage =
    "usage: cuvmm-plan [--profile quick|full] [--out DIR] [--trace FILE] [--backend auto|cuda|host]\n"
    "                  [--no-plots] [--help]\n"
    "\n"
    "Measures what growing GPU memory costs on this machine and prints a recommendation: chunk size,\n"
    "largest buffer, growth cost per GiB.\n"
    "\n"
    "  --profile quick|full  quick (default): meant to take about a minute on a GPU, seconds on\n"
    "                        the host.\n"
    "                        full: chunk sizes 2 MiB..4 GiB, growth to 1, 8, 64 and 120 GiB.\n"
    "  --out DIR             write plan.json, driver_calls.csv, growth.csv, trace_memory.csv, the\n"
    "                        replayed trace (trace.csv when generated) and PNG plots (plot.py,\n"
    "                        needs python3 with matplotlib) into DIR\n"
    "  --trace FILE          replay this trace: cuvmm's CSV (op,id,bytes) or RMM's allocation log\n"
    "                        (Thread,Time,Action,Pointer,Size,Stream); default: a generated one\n"
    "  --backend B           auto (default): the GPU when there is one, else the host backend;\n"
    "                        host: the host backend even with a GPU; cuda: fail without a GPU\n"
    "  --no-plots            do not run plot.py\n"
    "  --growth-case S:T:A   internal: measure one growth (strategy S to T bytes in A-byte appends)\n"
    "                        and print its row; cuvmm-plan runs each growth so, in a fresh process\n"
    "\n"
    "Exit status: 0 when the run finished, 1 when a measurement or output failed, 2 on a bad\n"
    "command line or trace.\n";

struct GrowthCase {
  std::size_t target_bytes;
  std::size_t append_bytes;
};

struct Options {
  std::string profile = "quick";
  std::string out_dir;
  std::string trace_path;
  std::string backend = "auto";
  bool plots = true;
  /// Internal (--growth-case STRATEGY:TARGET:APPEND): measure only this growth and print its row.
  /// cuvmm-plan runs every growth this way, each in a fresh process of its own: the driver finishes
  /// large frees lazily, at later allocations, so a growth measured after others in one process
  /// would pay for their teardown.
  std::string growth_strategy;
  GrowthCase growth_case{};
};

/// What one profile measures on one backend.
struct Profile {
  std::vector<std::size_t> chunk_sizes;
  std::size_t driver_iterations = 0;
  std::vector<GrowthCase> growth_cases;
  std::size_t reach_step = 0;
  std::size_t trace_allocations = 0;
  std::size_t trace_live_bytes = 0;
  double trace_max_log2_bytes = 30;
};

/// The simulated device of the host profile: small enough for any CI machine.
constexpr std::size_t host_device_bytes = 1 * GiB;

Profile make_profile(bool full, bool device, std::size_t free_bytes) {
  Profile p;
  if (device) {
    std::size_t const largest_chunk = full ? 4 * GiB : 1 * GiB;
    for (std::size_t s = 2 * MiB; s <= largest_chunk; s *= full ? 2 : 4) p.chunk_sizes.push_back(s);
    if (p.chunk_sizes.back() != largest_chunk) p.chunk_sizes.push_back(largest_chunk);
    p.driver_iterations = full ? 20 : 5;
    if (full) {
      p.growth_cases = {{1 * GiB, 4 * KiB},   {1 * GiB, 1 * MiB},   {8 * GiB, 1 * MiB},  {1 * GiB, 64 * MiB},
                        {8 * GiB, 64 * MiB},  {64 * GiB, 64 * MiB}, {120 * GiB, 64 * MiB}, {8 * GiB, 1 * GiB},
                        {64 * GiB, 1 * GiB},  {120 * GiB, 1 * GiB}};
    } else {
      p.growth_cases = {{256 * MiB, 4 * KiB}, {1 * GiB, 1 * MiB}, {4 * GiB, 64 * MiB}};
    }
    p.reach_step = 1 * GiB;
    p.trace_allocations = full ? 10000 : 2000;
    p.trace_live_bytes = std::min(full ? 40 * GiB : 8 * GiB, free_bytes / 4);
    p.trace_max_log2_bytes = 30;
  } else {
    std::size_t const largest_chunk = full ? 512 * MiB : 128 * MiB;
    for (std::size_t s = 2 * MiB; s <= largest_chunk; s *= 4) p.chunk_sizes.push_back(s);
    p.driver_iterations = full ? 10 : 5;
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

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "cuvmm-plan: %s\n\n%.*s", what.c_str(), static_cast<int>(usage.size()), usage.data());
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view const arg = argv[i];
    auto value = [&](std::string_view name) -> std::string {
      if (i + 1 >= argc) usage_error(std::string(name) + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      std::exit(0);
    } else if (arg == "--profile") {
      o.profile = value(arg);
      if (o.profile != "quick" && o.profile != "full") usage_error("unknown profile '" + o.profile + "'");
    } else if (arg == "--out") {
      o.out_dir = value(arg);
    } else if (arg == "--trace") {
      o.trace_path = value(arg);
    } else if (arg == "--backend") {
      o.backend = value(arg);
      if (o.backend != "auto" && o.backend != "cuda" && o.backend != "host") {
        usage_error("unknown backend '" + o.backend + "'");
      }
    } else if (arg == "--no-plots") {
      o.plots = false;
    } else if (arg == "--growth-case") {
      std::string const spec = value(arg);
      char strategy[64] = {};
      unsigned long long target = 0, append = 0;
      if (std::sscanf(spec.c_str(), "%63[^:]:%llu:%llu", strategy, &target, &append) != 3 || append == 0) {
        usage_error("--growth-case wants STRATEGY:TARGET_BYTES:APPEND_BYTES, not '" + spec + "'");
      }
      o.growth_strategy = strategy;
      o.growth_case = {static_cast<std::size_t>(target), static_cast<std::size_t>(append)};
    } else {
      usage_error("unknown argument '" + std::string(arg) + "'");
    }
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
  return std::string("growth ") + strategy + " to " + human_bytes(c.target_bytes) + " in " +
         human_bytes(c.append_bytes) + " appends";
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

/// Runs this program again with `args` and returns what it wrote to stdout; throws
/// std::runtime_error when it cannot be started or does not exit with 0.
std::string run_self(std::vector<std::string> args) {
  args.insert(args.begin(), "/proc/self/exe");
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
  int const spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  if (spawned == 0) {
    char buffer[4096];
    for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) != 0;) {
      if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
      else if (errno != EINTR) break;
    }
  }
  close(out[0]);
  if (spawned != 0) throw std::runtime_error("cannot start " + args[1] + " " + args[2] + " in a new process");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the growth measurement " + args.back() + " failed in its own process");
  }
  return text;
}

/// Runs `python` (searched on PATH when it has no slash) with `args`; its exit status, 127 when it
/// could not be started, -1 when it did not exit normally.
int run_python(const std::string& python, std::vector<std::string> args) {
  args.insert(args.begin(), python);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// Runs plot.py DIR with the first Python that has matplotlib: $CUVMM_PLAN_PYTHON, python3 on
/// PATH, then the system's /usr/bin/python3 (where Debian's python3-matplotlib is, when PATH
/// starts with another Python). Returns a sentence saying what happened.
std::string run_plots(const std::string& out_dir) {
  std::string script;
  const char* const scripts[] = {std::getenv("CUVMM_PLAN_PLOT_SCRIPT"), CUVMM_PLAN_PLOT_SOURCE,
                                 CUVMM_PLAN_PLOT_INSTALLED};
  for (const char* candidate : scripts) {
    if (candidate != nullptr && std::filesystem::exists(candidate)) {
      script = candidate;
      break;
    }
  }
  if (script.empty()) return "plots not made: plot.py was not found (set CUVMM_PLAN_PLOT_SCRIPT)";
  std::vector<std::string> pythons;
  if (const char* chosen = std::getenv("CUVMM_PLAN_PYTHON")) pythons.emplace_back(chosen);
  pythons.emplace_back("python3");
  pythons.emplace_back("/usr/bin/python3");
  bool any_python = false;
  for (auto const& python : pythons) {
    int const status = run_python(python, {script, "--check"});
    if (status == 127) continue;
    any_python = true;
    if (status != 0) continue;  // no matplotlib in this one
    if (run_python(python, {script, out_dir}) == 0) return "plots written by " + script + " (" + python + ")";
    return "plots not made: " + script + " failed (see its message above)";
  }
  if (!any_python) return "plots not made: python3 was not found (Debian: apt-get install python3 python3-matplotlib)";
  return "plots not made: python3 has no matplotlib (Debian: apt-get install python3-matplotlib)";
}

/// Writes `path` through `writer`; throws std::runtime_error if the file cannot be written.
void write_file(const std::filesystem::path& path, const std::function<void(std::ostream&)>& writer) {
  std::ofstream out(path);
  writer(out);
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

int run(const Options& options) {
  cuvmm::DriverStatus const driver = cuvmm::driver_status();
  bool const gpu = driver.available && driver.device_count > 0;
  if (options.backend == "cuda" && !gpu) {
    std::fprintf(stderr, "cuvmm-plan: --backend cuda, but there is no GPU: %s\n",
                 driver.available ? "no CUDA device" : driver.reason.c_str());
    return 1;
  }
  bool const on_device = gpu && options.backend != "host";

  // The trace first: a bad file is a command-line error, found before anything is measured.
  std::optional<Trace> file_trace;
  if (!options.trace_path.empty()) {
    try {
      file_trace = read_trace_file(options.trace_path);
    } catch (const cuvmm::Error& error) {
      std::fprintf(stderr, "cuvmm-plan: %s\n", error.context().c_str());
      return 2;
    }
  }

  Measurements m;
  m.profile = options.profile;
  std::optional<cuvmm::HostBackend> host_backend;
  cuvmm::Backend* backend = nullptr;
  std::optional<DeviceRuntimeSession> device;
  if (on_device) {
    backend = &cuvmm::cuda_backend(0);
    cuvmm::DeviceCaps const caps = cuvmm::device_caps(0);
    m.backend = "cuda";
    m.device_name = caps.name;
    device.emplace();
  } else {
    host_backend.emplace(cuvmm::HostBackend::Options{2 * MiB, host_device_bytes});
    backend = &*host_backend;
    m.backend = "host";
    m.device_name = "host backend (Linux virtual memory, a simulated " + human_bytes(host_device_bytes) + " device)";
    if (options.growth_strategy.empty()) std::printf("cuvmm-plan: %s, so this is the HOST-BACKEND profile.\n"
                "HostBackend (memfd chunks mapped with mmap) stands in for a GPU with %s of memory: its\n"
                "numbers describe this machine's kernel, not a GPU, and no cudaMalloc baselines are measured.\n"
                "Run cuvmm-plan on a machine with a GPU for those.\n\n",
                gpu ? "--backend host was given"
                    : (driver.available ? "no CUDA device found" : driver.reason.c_str()),
                human_bytes(host_device_bytes).c_str());
    std::fflush(stdout);  // before the progress lines on stderr
  }
  auto const memory = backend->memory_info(0);
  m.total_bytes = memory.total;
  m.free_bytes = memory.free;
  m.granularity = backend->granularity({}, cuvmm::GranularityKind::minimum);

  HostFills host_fills;
  MemoryOps& fills = on_device ? device->memory_ops() : static_cast<MemoryOps&>(host_fills);
  cuvmm::GrowableOptions fixed;
  fixed.max_chunk_bytes = m.granularity;  // the policy's cap at one granule: every chunk is one granule
  // One growth, timed, then (on a device) again for its peak device memory in use, untimed.
  auto const grow = [&](const std::string& name, GrowthCase c) {
    std::function<std::unique_ptr<GrowthStrategy>()> make;
    if (name == growable_policy_name) make = [&] { return make_growable_strategy(*backend); };
    if (name == growable_fixed_name) make = [&] { return make_growable_strategy(*backend, fixed); };
    if (device && name == copy_grow_2x_name) make = [&] { return device->copy_and_grow(2.0); };
    if (device && name == copy_grow_1_5x_name) make = [&] { return device->copy_and_grow(1.5); };
    if (device && name == preallocated_name) make = [&] { return device->preallocated(c.target_bytes); };
    if (!make) throw std::runtime_error("no growth strategy '" + name + "' on this backend");
    GrowthRow row{name, c.target_bytes, c.append_bytes, "out_of_memory"};
    try {
      auto strategy = make();
      row = measure_growth(name, *strategy, c.target_bytes, c.append_bytes, fills);
    } catch (const std::bad_alloc&) {  // a preallocated buffer that does not fit
    }
    if (device) {
      device->synchronize_device();
      row.peak_in_use_bytes = measure_peak_in_use(make, c.target_bytes, c.append_bytes, fills);
      device->synchronize_device();
    }
    return row;
  };
  if (!options.growth_strategy.empty()) {  // a child: this one growth, printed for the parent
    // Half a second for the driver to finish freeing what the previous child's exit gave back, as
    // bench_growth does. On the H200, growth to 120 GiB in 64 MiB appends took 1.99x the
    // preallocated time without the pause and 1.06x with it (one run each, 2026-11-29).
    if (device) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::fputs(encode_growth_row(grow(options.growth_strategy, options.growth_case)).c_str(), stdout);
    return 0;
  }

  Profile const profile = make_profile(options.profile == "full", on_device, memory.free);
  Trace trace;
  if (file_trace) {
    trace = std::move(*file_trace);
    m.trace_source = options.trace_path + " (" + std::string(to_string(trace.format)) + " format)";
  } else {
    trace.ops = cuvmm::bench::make_trace(profile.trace_allocations, profile.trace_live_bytes, 1234,
                                         profile.trace_max_log2_bytes);
    m.trace_source = "generated: " + std::to_string(profile.trace_allocations) + " allocations, log-uniform 1 B.." +
                     human_bytes(std::size_t{1} << static_cast<int>(profile.trace_max_log2_bytes)) + ", live <= " +
                     human_bytes(profile.trace_live_bytes) + ", seed 1234";
  }
  m.trace_ops = trace.ops.size();

  std::size_t const strategies_per_case = on_device ? 5 : 2;
  std::size_t const total_steps = profile.chunk_sizes.size() + profile.growth_cases.size() * strategies_per_case + 1 +
                                  (on_device ? 3 : 1);
  Progress progress(total_steps, isatty(STDERR_FILENO) == 1);

  // 1. Driver calls by chunk size.
  m.driver_calls = measure_driver_calls(*backend, profile.chunk_sizes, profile.driver_iterations,
                                        [&](std::size_t bytes) { progress.step("driver calls, " + human_bytes(bytes) + " chunks"); });

  // 2. Growth: every strategy on every case, each in a fresh process (see Options::growth_strategy).
  std::vector<std::string> strategies{growable_policy_name, growable_fixed_name};
  if (device) strategies.insert(strategies.end(), {copy_grow_2x_name, copy_grow_1_5x_name, preallocated_name});
  for (GrowthCase const& c : profile.growth_cases) {
    for (std::string const& name : strategies) {
      progress.step(case_label(name.c_str(), c));
      std::string const spec = name + ":" + std::to_string(c.target_bytes) + ":" + std::to_string(c.append_bytes);
      std::string const said = run_self({"--backend", on_device ? "cuda" : "host", "--growth-case", spec});
      std::optional<GrowthRow> row = decode_growth_row(said);
      if (!row) throw std::runtime_error("the growth measurement " + spec + " printed no result");
      m.growth.push_back(std::move(*row));
    }
  }

  // 3. Reach.
  progress.step("reach: growing one buffer until the " + std::string(on_device ? "device" : "simulated device") +
                " is full");
  m.reach = measure_reach(*backend, profile.reach_step);

  // 4. Trace replay.
  constexpr std::size_t timeline_points = 2000;
  progress.step("trace replay on cuvmm::Arena (" + std::to_string(trace.ops.size()) + " operations)");
  {
    auto arena = make_arena_allocator(*backend);
    m.replays.push_back(replay_trace("cuvmm_arena", *arena, trace, timeline_points));
  }
  if (device) {
    progress.step("trace replay on cudaMallocAsync");
    {
      auto async = device->cuda_malloc_async();
      m.replays.push_back(replay_trace("cudaMallocAsync", *async, trace, timeline_points));
    }
    progress.step("trace replay on cudaMalloc");
    {
      auto plain = device->cuda_malloc();
      m.replays.push_back(replay_trace("cudaMalloc", *plain, trace, timeline_points));
    }
  } else {
    m.notes.push_back("host backend: no GPU, so no cudaMalloc, cudaMallocAsync or copy-and-grow baselines");
  }
  if (trace.failed_allocations_skipped != 0) {
    m.notes.push_back(std::to_string(trace.failed_allocations_skipped) +
                      " 'allocate failure' lines of the RMM log were skipped");
  }

  Recommendation const recommendation = recommend(m);
  std::string plots_said;
  if (!options.out_dir.empty()) {
    std::filesystem::path const dir = options.out_dir;
    std::filesystem::create_directories(dir);
    write_file(dir / "plan.json", [&](std::ostream& out) { write_json(out, m, recommendation); });
    write_file(dir / "driver_calls.csv", [&](std::ostream& out) { write_driver_calls_csv(out, m); });
    write_file(dir / "growth.csv", [&](std::ostream& out) { write_growth_csv(out, m); });
    write_file(dir / "trace_memory.csv", [&](std::ostream& out) { write_trace_memory_csv(out, m); });
    if (!file_trace) write_file(dir / "trace.csv", [&](std::ostream& out) { cuvmm::bench::write_trace_csv(out, trace.ops); });
    if (options.plots) {
      progress.note("making plots");
      plots_said = run_plots(dir.string());
    }
  }
  progress.finish();  // the bar's line is cleared before the report

  std::printf("%s", format_recommendation(recommendation, m).c_str());
  for (auto const& replay : m.replays) {
    std::printf("  trace on %-16s peak held %s for %s requested at peak; mean utilization %.2f; %zu failed\n",
                replay.allocator.c_str(), human_bytes(replay.peak_held_bytes).c_str(),
                human_bytes(replay.peak_requested_bytes).c_str(), replay.mean_utilization, replay.failed_allocations);
  }
  if (!options.out_dir.empty()) {
    std::printf("Results: %s (plan.json, driver_calls.csv, growth.csv, trace_memory.csv)\n", options.out_dir.c_str());
    if (!plots_said.empty()) std::printf("%s\n", plots_said.c_str());
  }
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
