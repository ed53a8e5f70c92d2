// html_report.cpp: cuvmm-plan's HTML report (see html_report.hpp).
#include "html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <cuvmm/version.hpp>

#include "svg_chart.hpp"

namespace cuvmm::plan {
namespace {

constexpr const char* style = R"(
body { font-family: sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child, table.facts td { text-align: left; } th { background: #f3f3f3; }
table.facts td:first-child { font-weight: bold; } table.described td:last-child { text-align: left; }
.warning { background: #fff4d6; border-left: 4px solid #e0a800; padding: 0.5em 1em; }
.missing { color: #666; font-style: italic; }
svg.chart { display: block; margin: 1em 0; max-width: 100%; height: auto; font-size: 11px; }
svg.chart .grid { stroke: #e4e4e4; } svg.chart .frame { stroke: #888; }
svg.chart .chart-title { font-size: 14px; font-weight: bold; } svg.chart .axis-label { font-size: 12px; }
svg.chart .no-data { fill: #888; font-size: 14px; }
nav a { margin-right: 0.8em; }
)";

std::string text_of(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string ms_text(double ms) { return ms < 1000 ? text_of("%.3g ms", ms) : text_of("%.3g s", ms / 1000); }
std::string seconds_text(double s) { return s < 1 ? text_of("%.3g ms", s * 1e3) : text_of("%.3g s", s); }
std::string us_text(double us) { return text_of("%.3g", us); }
std::string ratio_text(double r) { return text_of("%.3g", r); }

/// A table of text cells (escaped here); the first column is the row's name. No header row when
/// `headers` is empty.
std::string table(const std::vector<std::string>& headers, const std::vector<std::vector<std::string>>& rows,
                  const char* cls = "numbers") {
  std::string out = std::string("<table class=\"") + cls + "\">\n";
  if (!headers.empty()) {
    out += "<tr>";
    for (auto const& h : headers) out += "<th>" + escape_html(h) + "</th>";
    out += "</tr>\n";
  }
  for (auto const& row : rows) {
    out += "<tr>";
    for (auto const& cell : row) out += "<td>" + escape_html(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string paragraph(const std::string& text, const char* cls = nullptr) {
  return std::string("<p") + (cls ? std::string(" class=\"") + cls + "\"" : "") + ">" + escape_html(text) + "</p>\n";
}

std::string missing(const std::string& text) { return paragraph(text, "missing"); }

std::string section(const char* id, const std::string& title, const std::string& body) {
  return std::string("<section id=\"") + id + "\">\n<h2>" + escape_html(title) + "</h2>\n" + body + "</section>\n";
}

std::string machine_section(const Measurements& m) {
  std::vector<std::vector<std::string>> rows = {
      {"Device", m.device_name},
      {"Backend", m.backend == "host" ? "host (no GPU measured)" : m.backend},
      {"Profile", m.profile},
      {"Memory", format_bytes(m.total_bytes) + " total, " + format_bytes(m.free_bytes) + " free at the start"},
      {"Granularity", format_bytes(m.granularity)},
      {"CUDA driver", cuda_version_text(m.machine.cuda_driver_version)},
      {"CUDA runtime", cuda_version_text(m.machine.cuda_runtime_version)},
      {"cuvmm", version_string},
      {"Operating system", m.machine.os.empty() ? "unknown" : m.machine.os},
      {"CPU", (m.machine.cpu.empty() ? std::string("unknown") : m.machine.cpu) +
                  (m.machine.cpus != 0 ? ", " + std::to_string(m.machine.cpus) + " hardware threads" : "")},
      {"Compiler", m.machine.compiler.empty() ? "unknown" : m.machine.compiler},
      {"Run time", text_of("%.0f s", m.seconds)},
  };
  return section("machine", "Machine and versions", table({}, rows, "facts"));
}

std::string driver_calls_section(const Measurements& m) {
  if (m.driver_calls.empty()) return section("driver-calls", "Driver-call costs", missing("Not measured."));
  std::vector<std::vector<std::string>> rows;
  LineChart per_gib{"Five driver calls per GiB of chunks",
                    {"chunk size", AxisFormat::bytes, true},
                    {"ms per GiB (medians)", AxisFormat::number, true},
                    {{"all five calls", {}}}};
  LineChart per_call{"Each driver call (median)",
                     {"chunk size", AxisFormat::bytes, true},
                     {"microseconds", AxisFormat::number, true},
                     {{"create", {}}, {"map", {}}, {"set access", {}}, {"unmap", {}}, {"release", {}}}};
  for (auto const& row : m.driver_calls) {
    rows.push_back({format_bytes(row.chunk_bytes), us_text(row.create.median_us), us_text(row.map.median_us),
                    us_text(row.set_access.median_us), us_text(row.unmap.median_us), us_text(row.release.median_us),
                    tail_text(row.create), text_of("%.3g", row.ms_per_gib())});
    auto const x = static_cast<double>(row.chunk_bytes);
    per_gib.series[0].points.push_back({x, row.ms_per_gib()});
    LatencyStats const* calls[] = {&row.create, &row.map, &row.set_access, &row.unmap, &row.release};
    for (std::size_t i = 0; i < 5; ++i) per_call.series[i].points.push_back({x, calls[i]->median_us});
  }
  std::string body = paragraph("One call of each kind per chunk, timed by the host clock; medians in microseconds.");
  body += table({"chunk", "create", "map", "set access", "unmap", "release", "create tail", "ms per GiB"}, rows);
  body += line_chart_svg(per_gib) + line_chart_svg(per_call);
  return section("driver-calls", "Driver-call costs", body);
}

std::string thread_section(const Measurements& m, const Recommendation& r) {
  if (m.driver_threads.empty()) return section("thread-scaling", "Thread scaling", missing("Not measured."));
  std::map<std::pair<std::size_t, std::size_t>, std::vector<double>> cycles;  // (chunk, threads) -> per repeat
  for (auto const& row : m.driver_threads) cycles[{row.chunk_bytes, row.threads}].push_back(row.cycles_per_second);
  std::map<std::size_t, Series> by_chunk;
  std::vector<std::vector<std::string>> rows;
  for (auto& [key, values] : cycles) {
    std::sort(values.begin(), values.end());
    double const median = values[(values.size() - 1) / 2];
    rows.push_back({format_bytes(key.first), std::to_string(key.second), text_of("%.4g", median),
                    text_of("%.4g", values.front()) + " .. " + text_of("%.4g", values.back()),
                    std::to_string(values.size())});
    Series& s = by_chunk[key.first];
    s.name = format_bytes(key.first) + " chunks";
    s.points.push_back({static_cast<double>(key.second), median});
  }
  LineChart chart{"Driver-call cycles per second, all threads together",
                  {"threads", AxisFormat::number, false},
                  {"cycles per second", AxisFormat::number, false},
                  {}};
  for (auto& [chunk, s] : by_chunk) chart.series.push_back(std::move(s));
  std::string body;
  if (r.thread_scaling) {
    body += paragraph(std::to_string(r.thread_scaling_threads) + " threads make " + ratio_text(*r.thread_scaling) +
                      "x the cycles per second of one thread (" + format_bytes(r.thread_scaling_chunk_bytes) +
                      " chunks).");
  }
  body += table({"chunk", "threads", "cycles per second (median)", "range over repeats", "repeats"}, rows);
  body += line_chart_svg(chart);
  return section("thread-scaling", "Thread scaling", body);
}

std::string growth_section(const Measurements& m) {
  if (m.growth.empty()) return section("growth", "Growth", missing("Not measured."));
  std::vector<std::vector<std::string>> rows;
  auto const ratios = growth_ratios(m);
  for (auto const& row : m.growth) {
    std::string over_pre = "-";
    std::string over_copy = "-";
    for (auto const& ratio : ratios) {
      if (ratio.strategy == row.strategy && ratio.target_bytes == row.target_bytes &&
          ratio.append_bytes == row.append_bytes) {
        if (ratio.over_preallocated) over_pre = ratio_text(*ratio.over_preallocated);
        if (ratio.over_copy_grow_2x) over_copy = ratio_text(*ratio.over_copy_grow_2x);
      }
    }
    rows.push_back({row.strategy, format_bytes(row.target_bytes), format_bytes(row.append_bytes), row.status,
                    format_bytes(row.reached_bytes), seconds_text(row.total_seconds), over_pre, over_copy,
                    format_bytes(row.peak_bytes), format_bytes(row.bytes_copied), std::to_string(row.runs)});
  }
  // Time against size, one line per strategy; of the growths to one size, the one in the largest
  // appends (the fewest per-append costs) stands for it.
  std::map<std::string, std::map<std::size_t, const GrowthRow*>> best;
  std::vector<std::string> order;
  for (auto const& row : m.growth) {
    if (best.find(row.strategy) == best.end()) order.push_back(row.strategy);
    auto& slot = best[row.strategy][row.reached_bytes];
    if (row.status != "ok" || row.reached_bytes == 0) continue;
    if (slot == nullptr || row.append_bytes > slot->append_bytes) slot = &row;
  }
  LineChart chart{"Time to grow to a size (appends and fills)",
                  {"size reached", AxisFormat::bytes, true},
                  {"seconds", AxisFormat::number, true},
                  {}};
  for (auto const& strategy : order) {
    Series s{strategy, {}};
    for (auto const& [size, row] : best[strategy]) {
      if (row != nullptr) s.points.push_back({static_cast<double>(size), row->total_seconds});
    }
    chart.series.push_back(std::move(s));
  }
  BarChart against{"GrowableBuffer's time over cudaMalloc copy-and-grow 2x (below 1: faster)",
                   {"time ratio", AxisFormat::number, false},
                   {}};
  for (auto const& ratio : ratios) {
    if (ratio.strategy == growable_policy_name && ratio.over_copy_grow_2x) {
      against.bars.push_back(
          {format_bytes(ratio.target_bytes) + " / " + format_bytes(ratio.append_bytes), *ratio.over_copy_grow_2x});
    }
  }
  std::string body = paragraph(
      "A buffer grows to the target size in appends of a fixed size, each append filled; each growth runs in a "
      "process of its own, and the median run is shown.");
  body += table({"strategy", "target", "appends", "status", "reached", "time", "/ preallocated",
                 "/ copy-and-grow 2x", "peak held", "copied", "runs"},
                rows);
  body += line_chart_svg(chart);
  body += paragraph("In the chart, a size grown in several append sizes shows its largest appends; the table has "
                    "every case.");
  if (against.bars.empty()) {
    body += missing("No cudaMalloc copy-and-grow baseline was measured (it needs a GPU).");
  } else {
    body += bar_chart_svg(against);
  }
  return section("growth", "Growth", body);
}

std::string reach_section(const Measurements& m) {
  if (!m.reach) return section("reach", "Reach", missing("Not measured."));
  auto const& reach = *m.reach;
  std::string body = paragraph("One growable buffer (real policy) reserved " + format_bytes(reach.reached_bytes) +
                               " of the " + format_bytes(reach.free_at_start) + " free at the start, and stopped " +
                               (reach.stopped_by == "out_of_memory"        ? "when the device ran out of memory"
                                : reach.stopped_by == "address_range_full" ? "when its address range was full"
                                                                           : "by " + reach.stopped_by) +
                               ".");
  body += table({"free at the start", "reached", "stopped by", "time"},
                {{format_bytes(reach.free_at_start), format_bytes(reach.reached_bytes), reach.stopped_by,
                  seconds_text(reach.seconds)}});
  return section("reach", "Reach", body);
}

std::string trace_section(const Measurements& m) {
  if (m.replays.empty()) return section("trace-replay", "Trace replay", missing("No trace was replayed."));
  std::vector<std::vector<std::string>> rows;
  LineChart timeline{"Memory held while the trace runs",
                     {"operation", AxisFormat::number, false},
                     {"bytes", AxisFormat::bytes, false},
                     {{"requested (live)", {}}}};
  BarChart utilization{"Mean utilization (requested / held)", {"utilization", AxisFormat::number, false}, {}};
  for (auto const& p : m.replays.front().timeline) {
    timeline.series[0].points.push_back({static_cast<double>(p.op_index), static_cast<double>(p.requested_bytes)});
  }
  for (auto const& replay : m.replays) {
    double const peak_utilization = replay.peak_held_bytes == 0 ? 0
                                                                : static_cast<double>(replay.peak_requested_bytes) /
                                                                      static_cast<double>(replay.peak_held_bytes);
    rows.push_back({replay.allocator, std::to_string(replay.ops), std::to_string(replay.failed_allocations),
                    seconds_text(replay.seconds), format_bytes(replay.peak_requested_bytes),
                    format_bytes(replay.peak_held_bytes), text_of("%.3f", peak_utilization),
                    text_of("%.3f", replay.mean_utilization)});
    Series s{replay.allocator + " held", {}};
    for (auto const& p : replay.timeline) {
      s.points.push_back({static_cast<double>(p.op_index), static_cast<double>(p.held_bytes)});
    }
    timeline.series.push_back(std::move(s));
    utilization.bars.push_back({replay.allocator, replay.mean_utilization});
  }
  std::string body = paragraph("Trace: " + (m.trace_source.empty() ? std::string("unknown") : m.trace_source) + ", " +
                               std::to_string(m.trace_ops) + " operations.");
  body += table({"allocator", "operations", "failed", "time in calls", "peak requested", "peak held",
                 "peak requested / peak held", "mean utilization"},
                rows);
  body += line_chart_svg(timeline) + bar_chart_svg(utilization);
  return section("trace-replay", "Trace replay", body);
}

/// Where a replay's time in the Arena's calls went: the driver's calls, by kind, and the rest (the
/// Arena's own bookkeeping and lock).
std::string arena_time_text(const ReplayResult& replay) {
  ArenaStats const& s = *replay.arena_stats;
  double const driver = s.create_seconds + s.release_seconds + s.map_seconds + s.unmap_seconds + s.access_seconds;
  auto const ms = [](double seconds) { return text_of("%.1f", 1e3 * seconds); };
  return "Where the time went: of " + ms(replay.seconds) + " ms in allocate and deallocate calls, " + ms(driver) +
         " ms in the driver's calls (access grants " + ms(s.access_seconds) + ", maps " + ms(s.map_seconds) +
         ", creates " + ms(s.create_seconds) + ", unmaps " + ms(s.unmap_seconds) + ", releases " +
         ms(s.release_seconds) + ") and " + ms(std::max(0.0, replay.seconds - driver)) +
         " ms in the Arena's own bookkeeping and lock; " + std::to_string(s.pages_moved) +
         " pages moved to new addresses, " + std::to_string(s.chunks_created) + " created.";
}

std::string arena_section(const Measurements& m) {
  std::string body;
  for (auto const& replay : m.replays) {
    if (!replay.arena_stats) continue;
    std::vector<std::vector<std::string>> counters;
    std::vector<std::vector<std::string>> counts;
    for (auto const& field : arena_stats_fields(*replay.arena_stats)) {
      bool const bytes = field.name.rfind("bytes_", 0) == 0;
      auto const show = [&](std::size_t n) { return bytes ? format_bytes(n) : std::to_string(n); };
      switch (field.kind) {
        case ArenaStatField::Kind::counter:
          counters.push_back({field.name, show(field.counter.current), show(field.counter.peak),
                              show(field.counter.total), field.meaning});
          break;
        case ArenaStatField::Kind::count: counts.push_back({field.name, show(field.count), field.meaning}); break;
        case ArenaStatField::Kind::ratio:
          counts.push_back({field.name, text_of("%.3f", field.ratio), field.meaning});
          break;
        case ArenaStatField::Kind::seconds:
          counts.push_back({field.name, text_of("%.1f ms", 1e3 * field.seconds), field.meaning});
          break;
      }
    }
    body += "<h3>" + escape_html(replay.allocator) + "</h3>\n";
    body += paragraph(arena_time_text(replay));
    body += paragraph("After the replay, every allocation freed; peaks and totals cover the whole replay.");
    body += table({"counter", "current", "peak", "total", "meaning"}, counters, "described");
    body += table({"statistic", "value", "meaning"}, counts, "described");
  }
  if (body.empty()) body = missing("No Arena replay was measured.");
  return section("arena-stats", "Arena statistics", body);
}

std::string notes_section(const Measurements& m) {
  if (m.notes.empty()) return section("notes", "Notes", paragraph("Nothing was left out."));
  std::string body = "<ul>\n";
  for (auto const& note : m.notes) body += "<li>" + escape_html(note) + "</li>\n";
  return section("notes", "Notes", body + "</ul>\n");
}

std::string files_section(const std::vector<std::string>& files) {
  if (files.empty()) return section("files", "Files", missing("No other files were written."));
  std::string body = paragraph("Written beside this report:") + "<ul>\n";
  for (auto const& file : files) {
    body += "<li><a href=\"" + escape_html(file) + "\">" + escape_html(file) + "</a></li>\n";
  }
  return section("files", "Files", body + "</ul>\n");
}

}  // namespace

std::vector<std::string> recommendation_sentences(const Recommendation& r, const Measurements& m) {
  std::vector<std::string> out;
  if (r.chunk_bytes != 0) {
    out.push_back("Keep " + std::string(chunk_bytes_option) + " at or above " + format_bytes(r.chunk_bytes) +
                  ": there the five driver calls of a growth step cost " + ms_text(r.chunk_ms_per_gib) +
                  " per GiB, within " + text_of("%.3g", chunk_cost_tolerance) +
                  "x of the cheapest chunk size measured.");
  } else {
    out.push_back("The chunk size was not measured (no driver calls were timed).");
  }
  if (r.largest_buffer_bytes != 0) {
    out.push_back("One buffer grew to " + format_bytes(r.largest_buffer_bytes) + " here (" +
                  r.largest_buffer_source + "), with " + format_bytes(m.free_bytes) + " free at the start.");
  } else {
    out.push_back("The largest buffer was not measured.");
  }
  if (r.growth_ms_per_gib) {
    std::string s = "Growing a GrowableBuffer costs " + ms_text(*r.growth_ms_per_gib) + " per GiB, appends and fills";
    if (r.copy_grow_ms_per_gib) {
      s += "; cudaMalloc copy-and-grow 2x costs " + ms_text(*r.copy_grow_ms_per_gib) + " per GiB";
      if (*r.growth_ms_per_gib > 0) s += ", " + ratio_text(*r.copy_grow_ms_per_gib / *r.growth_ms_per_gib) + "x as much";
    }
    out.push_back(s + ".");
  } else {
    out.push_back("The growth cost was not measured.");
  }
  if (r.hide_bytes) {
    out.push_back("Set " + std::string(hide_bytes_option) + " = " + std::to_string(*r.hide_bytes) + " (" +
                  format_bytes(*r.hide_bytes) + "): the device fills that much in two growth steps (fills at " +
                  text_of("%.3g", r.hide_fill_bytes_per_second / 1e9) + " GB/s, a step of " +
                  text_of("%.3g", r.hide_step_us) + " us with " + format_bytes(r.hide_step_chunk_bytes) +
                  " chunks); the default here is memory / 256 = " + format_bytes(r.default_hide_bytes) + ".");
  } else {
    out.push_back("The hide size was not measured (it needs the driver calls and the preallocated baseline); " +
                  std::string(hide_bytes_option) + " defaults to memory / 256 = " +
                  format_bytes(r.default_hide_bytes) + ".");
  }
  if (r.arena_page_bytes != 0) {
    auto const cost = [](std::optional<double> ms) {
      return ms ? ms_text(*ms) + " per GiB in driver calls" : std::string("not measured at this size");
    };
    out.push_back("The Arena's default pages: " + std::string(arena_page_option) + " " +
                  format_bytes(r.arena_page_bytes) + " (" + cost(r.arena_page_ms_per_gib) + "), " +
                  arena_large_page_option + " " + format_bytes(r.arena_large_page_bytes) + " (" +
                  cost(r.arena_large_page_ms_per_gib) + ").");
  }
  if (r.thread_scaling) {
    out.push_back("Growing from several threads: " + std::to_string(r.thread_scaling_threads) + " threads make " +
                  ratio_text(*r.thread_scaling) + "x the driver-call cycles per second of one (" +
                  format_bytes(r.thread_scaling_chunk_bytes) + " chunks" +
                  (r.thread_scaling_repeats > 1
                       ? "; median of " + std::to_string(r.thread_scaling_repeats) + " repeats, spread " +
                             text_of("%.2f", r.thread_scaling_min) + "x.." + text_of("%.2f", r.thread_scaling_max) + "x)."
                       : "; one repeat, spread not measured)."));
  }
  return out;
}

void write_html_report(std::ostream& out, const Measurements& m, const Recommendation& r,
                       const std::vector<std::string>& files) {
  std::string const title = "cuvmm-plan report";
  out << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
      << escape_html(title) << "</title>\n<style>" << style << "</style>\n</head>\n<body>\n<h1>" << escape_html(title)
      << "</h1>\n"
      << paragraph("What growing GPU memory costs with cuvmm " + std::string(version_string) + ", and how to set it up, on " +
                   m.device_name + " (" + m.backend + " backend, " + m.profile + " profile).");
  out << "<nav>";
  for (const char* id : report_section_ids) out << "<a href=\"#" << id << "\">" << id << "</a>";
  out << "</nav>\n";
  std::string body;
  if (m.backend == "host") {
    body += paragraph(
        "Measured on the host backend (Linux virtual memory standing in for a GPU): these numbers describe this "
        "machine's kernel, not a GPU. Run cuvmm-plan on a machine with a GPU for the recommendation that counts.",
        "warning");
  }
  for (auto const& sentence : recommendation_sentences(r, m)) body += paragraph(sentence);
  out << section("recommendation", "Recommendation", body);
  out << machine_section(m) << driver_calls_section(m) << thread_section(m, r) << growth_section(m)
      << reach_section(m) << trace_section(m) << arena_section(m) << notes_section(m) << files_section(files);
  out << "</body>\n</html>\n";
}

}  // namespace cuvmm::plan
