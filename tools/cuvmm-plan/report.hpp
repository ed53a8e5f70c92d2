// report.hpp: what one cuvmm-plan run measured, the recommendation drawn from it, and the files
// it is written to (JSON for everything, CSV per table, for plot.py and spreadsheets; the HTML
// report for people is html_report.hpp).
//
// The recommendation is a pure function of the measurements, so it is tested on given numbers:
//  - chunk size: the smallest measured chunk size whose driver calls (create + map + set access +
//    unmap + release, medians) cost at most `chunk_cost_tolerance` times the cheapest measured cost
//    per GiB. Larger chunks only amortize calls further, and cost slack and release time.
//  - largest buffer: what the reach run mapped (a growable buffer, real policy) when there was one;
//    otherwise the largest size a growable strategy reached in the growth runs.
//  - growth cost per GiB: total time over GiB reached of the growable buffer's (real policy) largest
//    growth run that completed, with the same for copy-and-grow (2x) beside it when measured.
//  - thread scaling: driver-call cycles per second with the most threads measured over one thread,
//    read in each repeat of the thread measurement (the counts run one after another in a repeat):
//    the median of those ratios, with their lowest and highest as the spread.
//  - hide size (GrowableOptions::hide_bytes): the bytes the device fills in twice the time one
//    growth step takes, 2 x fill bandwidth x step time (growth_policy.hpp says why). Fill bandwidth: the preallocated baseline's largest
//    completed growth (bytes over its time: fills only). Step time: create + map + set access
//    (medians) of the smallest measured chunk size whose own fill takes at least that long (the
//    largest measured when none does). Rounded up to the granularity. Not measured without both.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <cuvmm/error.hpp>  // format_bytes: "2 MiB", "1.5 GiB", "512 bytes"

#include "measure.hpp"
#include "text_format.hpp"

namespace cuvmm::plan {

/// The machine and the software a run measured with.
struct MachineInfo {
  int cuda_driver_version = 0;   ///< as cuDriverGetVersion gives it (13000: 13.0); 0 without a driver
  int cuda_runtime_version = 0;  ///< cudaRuntimeGetVersion's number; 0 when not known
  std::string os;                ///< kernel name, release and machine (uname)
  std::string cpu;               ///< the CPU's model name
  unsigned cpus = 0;             ///< hardware threads
  std::string compiler;          ///< the compiler that built cuvmm-plan
};

/// "13.0" for 13000: a CUDA version number as NVIDIA writes it; "none" for 0.
std::string cuda_version_text(int version);

struct Measurements {
  std::string profile;       ///< "quick" or "full"
  std::string backend;       ///< "cuda" or "host"
  std::string device_name;   ///< the GPU's name, or what the host backend stands for
  std::size_t total_bytes = 0;
  std::size_t free_bytes = 0;
  std::size_t granularity = 0;
  std::vector<DriverCallRow> driver_calls;
  std::vector<DriverThreadsRow> driver_threads;
  std::vector<GrowthRow> growth;
  std::optional<Reach> reach;
  std::string trace_source;  ///< a file, or "generated (...)"
  std::size_t trace_ops = 0;
  std::vector<ReplayResult> replays;
  std::vector<std::string> notes;  ///< what was left out and why
  double seconds = 0;              ///< the whole run, measurements and replays
  MachineInfo machine;
};

struct Recommendation {
  std::size_t chunk_bytes = 0;              ///< 0 when no driver calls were measured
  double chunk_ms_per_gib = 0;
  std::size_t largest_buffer_bytes = 0;     ///< 0 when unknown
  std::string largest_buffer_source;        ///< "reach run" or "growth runs"
  std::optional<double> growth_ms_per_gib;  ///< growable buffer, real policy
  std::optional<double> copy_grow_ms_per_gib;
  /// Driver-call cycles per second with the most threads measured over those with one, at the
  /// smallest chunk size measured by thread count (how much growing from several threads helps).
  std::optional<double> thread_scaling;  ///< the median over the repeats
  double thread_scaling_min = 0;          ///< the lowest and highest ratio of one repeat
  double thread_scaling_max = 0;
  std::size_t thread_scaling_repeats = 0;
  std::size_t thread_scaling_threads = 0;
  std::size_t thread_scaling_chunk_bytes = 0;
  /// The hide size measured on this device: the value for GrowableOptions::hide_bytes.
  std::optional<std::size_t> hide_bytes;
  double hide_fill_bytes_per_second = 0;  ///< the fill bandwidth it was computed from
  double hide_step_us = 0;                ///< the step time it was computed from
  std::size_t hide_step_chunk_bytes = 0;  ///< the chunk size whose step time was taken
  /// GrowableOptions' default hide size on this device (its memory / 256), for comparison.
  std::size_t default_hide_bytes = 0;
  /// The Arena's default page sizes on this device (the granularity; ArenaOptions' large page
  /// size) and the driver-call cost per GiB measured at each, when that chunk size was measured.
  std::size_t arena_page_bytes = 0;
  std::optional<double> arena_page_ms_per_gib;
  std::size_t arena_large_page_bytes = 0;
  std::optional<double> arena_large_page_ms_per_gib;
};

/// The options each recommended figure maps to, as the recommendation names them.
inline constexpr const char* hide_bytes_option = "GrowableOptions::hide_bytes";
inline constexpr const char* chunk_bytes_option = "GrowableOptions::max_chunk_bytes";
inline constexpr const char* arena_page_option = "ArenaOptions::page_bytes";
inline constexpr const char* arena_large_page_option = "ArenaOptions::large_page_bytes";

inline constexpr double chunk_cost_tolerance = 1.25;

/// A completed growth against the baselines of the same case (target and append size): its total
/// time over the preallocated buffer's and over cudaMalloc copy-and-grow 2x's, each when that
/// baseline was measured and completed.
struct GrowthRatio {
  std::string strategy;
  std::size_t target_bytes = 0;
  std::size_t append_bytes = 0;
  std::optional<double> over_preallocated;
  std::optional<double> over_copy_grow_2x;
};

/// One ratio per completed growth row, in the rows' order.
std::vector<GrowthRatio> growth_ratios(const Measurements& measurements);

/// The growable buffer's (real policy) ratios as a small table, one line per case; empty when no
/// growable run has a baseline beside it.
std::string format_growth_ratios(const Measurements& measurements);

Recommendation recommend(const Measurements& measurements);

/// One member of ArenaStats, by its name in the struct, for the report's table and the JSON.
struct ArenaStatField {
  enum class Kind { counter, count, ratio, seconds };
  std::string name;
  Kind kind = Kind::count;
  ArenaCounter counter;    ///< Kind::counter: current, peak and total
  std::size_t count = 0;   ///< Kind::count
  double ratio = 0;        ///< Kind::ratio
  double seconds = 0;      ///< Kind::seconds
  std::string meaning;   ///< what it counts, in a few words
};

/// Every member of ArenaStats, in the struct's order. test_plan_html checks that the count matches
/// the struct's, so a member added to ArenaStats must be added here.
std::vector<ArenaStatField> arena_stats_fields(const ArenaStats& stats);

/// The recommendation as a few lines of text for the terminal.
std::string format_recommendation(const Recommendation& recommendation, const Measurements& measurements);

void write_json(std::ostream& out, const Measurements& measurements, const Recommendation& recommendation);
void write_driver_calls_csv(std::ostream& out, const Measurements& measurements);
void write_driver_threads_csv(std::ostream& out, const Measurements& measurements);
void write_growth_csv(std::ostream& out, const Measurements& measurements);
void write_trace_memory_csv(std::ostream& out, const Measurements& measurements);

}  // namespace cuvmm::plan
