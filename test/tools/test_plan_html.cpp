// cuvmm-plan's HTML report and its SVG charts: escaping, exact chart coordinates for known data,
// every section present (with words, not empty tables, when nothing was measured), the ArenaStats
// listing complete, and the JSON fields the report shares.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "html_report.hpp"
#include "report.hpp"
#include "svg_chart.hpp"

using Catch::Approx;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using namespace cuvmm::plan;
using cuvmm::GiB;
using cuvmm::MiB;

namespace {

/// Converts to any member type: counts an aggregate's members (the most initializers it takes).
struct AnyMember {
  template <class T>
  constexpr operator T() const noexcept {
    return T{};
  }
};

template <class T, class... Given>
consteval std::size_t member_count() {
  if constexpr (requires { T{Given{}..., AnyMember{}}; }) {
    return member_count<T, Given..., AnyMember>();
  } else {
    return sizeof...(Given);
  }
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

DriverCallRow driver_row(std::size_t chunk_bytes, double total_us) {
  DriverCallRow row;
  row.chunk_bytes = chunk_bytes;
  row.create.median_us = 0.4 * total_us;
  row.map.median_us = 0.1 * total_us;
  row.set_access.median_us = 0.2 * total_us;
  row.unmap.median_us = 0.1 * total_us;
  row.release.median_us = 0.2 * total_us;
  row.create.samples = 5;
  return row;
}

GrowthRow growth_row(const char* strategy, std::size_t size, std::size_t append, double seconds) {
  GrowthRow row;
  row.strategy = strategy;
  row.target_bytes = size;
  row.reached_bytes = size;
  row.append_bytes = append;
  row.total_seconds = seconds;
  row.status = "ok";
  return row;
}

/// A run with something in every section, the device's name and a note needing escapes.
Measurements full_measurements() {
  Measurements m;
  m.profile = "full";
  m.backend = "cuda";
  m.device_name = "GPU <b>&\"x\"";
  m.total_bytes = 80 * GiB;
  m.free_bytes = 79 * GiB;
  m.granularity = 2 * MiB;
  m.driver_calls = {driver_row(2 * MiB, 74), driver_row(64 * MiB, 100), driver_row(512 * MiB, 280),
                    driver_row(1 * GiB, 500)};
  for (std::size_t repeat = 1; repeat <= 2; ++repeat) {
    for (std::size_t threads : {1, 8}) {
      DriverThreadsRow row;
      row.threads = threads;
      row.chunk_bytes = 2 * MiB;
      row.cycles_per_second = threads == 1 ? 1000 : 3000;
      row.repeat = repeat;
      m.driver_threads.push_back(row);
    }
  }
  m.growth = {growth_row(growable_policy_name, 1 * GiB, 1 * MiB, 0.2),
              growth_row(copy_grow_2x_name, 1 * GiB, 1 * MiB, 0.5),
              growth_row(preallocated_name, 1 * GiB, 1 * MiB, 0.1)};
  m.reach = Reach{79 * GiB, 78 * GiB, "out_of_memory", 1.5};
  m.trace_source = "trace.csv (cuvmm format)";
  m.trace_ops = 4;
  ReplayResult replay;
  replay.allocator = "cuvmm_arena";
  replay.ops = 4;
  replay.peak_requested_bytes = 3 * MiB;
  replay.peak_held_bytes = 4 * MiB;
  replay.mean_utilization = 0.75;
  replay.seconds = 0.008;
  replay.timeline = {{0, 1 * MiB, 2 * MiB}, {3, 0, 4 * MiB}};
  cuvmm::ArenaStats stats;
  stats.allocations = {0, 2, 2};
  stats.maps = 7;
  stats.chunks_created = 3;
  stats.pages_moved = 5;
  stats.access_seconds = 0.004;
  stats.map_seconds = 0.0005;
  stats.create_seconds = 0.001;
  stats.fragmentation = 0.25;
  replay.arena_stats = stats;
  m.replays.push_back(replay);
  m.notes = {"a note with <angle brackets>"};
  m.machine = {13000, 13000, "Linux 6.1.0 x86_64", "Test CPU", 16, "g++ 12.2.0"};
  return m;
}

std::string report_of(const Measurements& m, const std::vector<std::string>& files = {}) {
  std::ostringstream out;
  write_html_report(out, m, recommend(m), files);
  return out.str();
}

}  // namespace

TEST_CASE("escape_html replaces the five characters that HTML gives a meaning", "[plan][html]") {
  CHECK(escape_html("a<b>&\"c'd") == "a&lt;b&gt;&amp;&quot;c&#39;d");
  CHECK(escape_html("&amp;") == "&amp;amp;");  // escaped again: the text was literal
  CHECK(escape_html("plain 64 MiB") == "plain 64 MiB");
  CHECK(escape_html("") == "");
}

TEST_CASE("axis positions are linear or logarithmic between the axis's ends", "[plan][html][chart]") {
  CHECK(axis_position(5, 0, 10, 80, 540, false) == Approx(310));
  CHECK(axis_position(0, 0, 10, 300, 40, false) == Approx(300));  // a y axis runs upwards
  CHECK(axis_position(100, 10, 1000, 0, 200, true) == Approx(100));
  CHECK(axis_position(8 * MiB, 2 * MiB, 128 * MiB, 80, 540, true) == Approx(80 + 460.0 * 2 / 6));
}

TEST_CASE("tick labels are plain numbers or byte counts", "[plan][html][chart]") {
  CHECK(tick_label(0.5, AxisFormat::number) == "0.5");
  CHECK(tick_label(20, AxisFormat::number) == "20");
  CHECK(tick_label(1e6, AxisFormat::number) == "1e+06");
  CHECK(tick_label(64.0 * MiB, AxisFormat::bytes) == "64 MiB");
  CHECK(tick_label(0, AxisFormat::bytes) == "0 bytes");
}

TEST_CASE("a line chart puts known points at exact coordinates, with its ticks and legend", "[plan][html][chart]") {
  LineChart chart{"Time & size", {"x <axis>", AxisFormat::number, false}, {"y", AxisFormat::number, false},
                  {{"series \"one\"", {{0, 0}, {5, 50}, {10, 100}}}}};
  std::string const svg = line_chart_svg(chart);
  CHECK_THAT(svg, StartsWith("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 760.0 360.0\""));
  CHECK_THAT(svg, EndsWith("</svg>\n"));
  // x 0..10 onto 80..540, y 0..100 onto 300..40.
  CHECK_THAT(svg, ContainsSubstring("points=\"80.0,300.0 310.0,170.0 540.0,40.0\""));
  CHECK(occurrences(svg, "<circle ") == 3);
  // Ticks every 2 on x (0..10) and every 20 on y (0..100).
  CHECK(occurrences(svg, "<line class=\"grid\"") == 6 + 6);
  CHECK_THAT(svg, ContainsSubstring("<text class=\"tick\" x=\"264.0\" y=\"316.0\" text-anchor=\"middle\">4</text>"));
  CHECK_THAT(svg, ContainsSubstring("<text class=\"tick\" x=\"74.0\" y=\"144.0\" text-anchor=\"end\" "
                                    "dominant-baseline=\"middle\">60</text>"));
  CHECK_THAT(svg, ContainsSubstring("<title>Time &amp; size</title>"));
  CHECK_THAT(svg, ContainsSubstring(">x &lt;axis&gt;</text>"));
  CHECK_THAT(svg, ContainsSubstring(">series &quot;one&quot;</text>"));
  CHECK_FALSE(svg.find("<axis>") != std::string::npos);
}

TEST_CASE("logarithmic axes span whole powers: of 2 for bytes, of 10 for numbers", "[plan][html][chart]") {
  LineChart chart{"", {"chunk", AxisFormat::bytes, true}, {"ms", AxisFormat::number, true},
                  {{"s", {{2.0 * MiB, 150}, {8.0 * MiB, 320}, {128.0 * MiB, 100}}}}};
  std::string const svg = line_chart_svg(chart);
  // x: 2 MiB..128 MiB exactly (2^21..2^27); y: 100..1000. 150 lands at 300 - 260 log10(1.5).
  double const y150 = 300 - 260 * std::log10(1.5);
  double const y320 = 300 - 260 * std::log10(3.2);
  char expected[96];
  std::snprintf(expected, sizeof expected, "points=\"80.0,%.1f 233.3,%.1f 540.0,300.0\"", y150, y320);
  CHECK_THAT(svg, ContainsSubstring(expected));
  for (const char* tick : {">2 MiB<", ">4 MiB<", ">8 MiB<", ">16 MiB<", ">32 MiB<", ">64 MiB<", ">128 MiB<", ">100<",
                           ">1000<"}) {
    INFO(tick);
    CHECK_THAT(svg, ContainsSubstring(tick));
  }
}

TEST_CASE("a linear byte axis steps by a power of 2", "[plan][html][chart]") {
  LineChart chart{"", {"op", AxisFormat::number, false}, {"held", AxisFormat::bytes, false},
                  {{"s", {{0, 0}, {10, 200.0 * MiB}}}}};
  std::string const svg = line_chart_svg(chart);
  // 200 MiB / 5 = 40 MiB a step at least: 64 MiB, up to 256 MiB; 200 MiB lands at 300 - 260 * 200 / 256.
  for (const char* tick : {">0 bytes<", ">64 MiB<", ">128 MiB<", ">192 MiB<", ">256 MiB<"}) {
    INFO(tick);
    CHECK_THAT(svg, ContainsSubstring(tick));
  }
  CHECK(svg.find(">320 MiB<") == std::string::npos);
  CHECK_THAT(svg, ContainsSubstring("points=\"80.0,300.0 540.0,96.9\""));
}

TEST_CASE("points a chart cannot place are left out; a chart with none says no data", "[plan][html][chart]") {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  double const inf = std::numeric_limits<double>::infinity();
  LineChart chart{"t", {"x", AxisFormat::number, true}, {"y", AxisFormat::number, false},
                  {{"s", {{1, 1}, {0, 2}, {-1, 3}, {nan, 4}, {2, inf}, {10, 5}}}}};
  std::string const svg = line_chart_svg(chart);
  CHECK(occurrences(svg, "<circle ") == 2);  // (1, 1) and (10, 5): 0 and -1 have no logarithm
  CHECK_THAT(svg, ContainsSubstring("points=\"80.0,248.0 540.0,40.0\""));

  for (LineChart const& empty : {LineChart{"nothing", {}, {}, {}}, LineChart{"nothing", {}, {}, {{"s", {}}}},
                                 LineChart{"nothing", {"x", AxisFormat::number, true}, {}, {{"s", {{0, 1}}}}}}) {
    std::string const none = line_chart_svg(empty);
    CHECK_THAT(none, StartsWith("<svg "));
    CHECK_THAT(none, EndsWith("</svg>\n"));
    CHECK_THAT(none, ContainsSubstring(">no data</text>"));
    CHECK(occurrences(none, "<circle ") == 0);
  }
  std::string const no_bars = bar_chart_svg(BarChart{"bars", {}, {{"a", nan}}});
  CHECK_THAT(no_bars, ContainsSubstring(">no data</text>"));
  CHECK(occurrences(no_bars, "<rect ") == 0);
}

TEST_CASE("a single point is drawn as a mark, not a line; a long series as a line only", "[plan][html][chart]") {
  std::string const svg = line_chart_svg(LineChart{"one", {}, {}, {{"s", {{3, 3}}}}});
  CHECK(occurrences(svg, "<circle ") == 1);
  CHECK(occurrences(svg, "<polyline") == 0);
  Series few{"few", {}};
  Series many{"many", {}};
  for (int i = 0; i < 60; ++i) few.points.push_back({static_cast<double>(i), 1});
  for (int i = 0; i < 61; ++i) many.points.push_back({static_cast<double>(i), 2});
  std::string const both = line_chart_svg(LineChart{"lines", {}, {}, {few, many}});
  CHECK(occurrences(both, "<circle ") == 60);
  CHECK(occurrences(both, "<polyline") == 2);
  CHECK_THAT(both, ContainsSubstring(" 540.0,"));
}

TEST_CASE("a bar chart draws each bar from zero to its value, labelled", "[plan][html][chart]") {
  std::string const svg = bar_chart_svg(BarChart{"ratios", {"ratio", AxisFormat::number, false},
                                                 {{"first", 1}, {"second <2>", 2}}});
  // y 0..2 onto 300..40; two slots of 330 across 80..740, each bar 0.7 of its slot from 0.15 in.
  CHECK_THAT(svg, ContainsSubstring("<rect x=\"129.5\" y=\"170.0\" width=\"231.0\" height=\"130.0\""));
  CHECK_THAT(svg, ContainsSubstring("<rect x=\"459.5\" y=\"40.0\" width=\"231.0\" height=\"260.0\""));
  CHECK_THAT(svg, ContainsSubstring(">second &lt;2&gt;</text>"));
  CHECK_THAT(svg, ContainsSubstring("<title>second &lt;2&gt;: 2</title>"));
}

TEST_CASE("the report has every section in order, the recommendation in words and inline charts only",
          "[plan][html]") {
  Measurements const m = full_measurements();
  std::string const html = report_of(m, {"plan.json", "growth <1>.csv"});
  CHECK_THAT(html, StartsWith("<!DOCTYPE html>\n"));
  CHECK_THAT(html, EndsWith("</html>\n"));
  std::size_t previous = 0;
  for (const char* id : report_section_ids) {
    INFO(id);
    std::size_t const at = html.find("<section id=\"" + std::string(id) + "\">");
    REQUIRE(at != std::string::npos);
    CHECK(at > previous);
    previous = at;
  }
  CHECK(occurrences(html, "<section ") == report_section_ids.size());
  CHECK(occurrences(html, "</section>") == report_section_ids.size());
  // Recommendation, in words, from the same numbers as the terminal's.
  CHECK_THAT(html, ContainsSubstring("<p>Keep GrowableOptions::max_chunk_bytes at or above 512 MiB: there the five "
                                     "driver calls of a growth step cost 0.56 ms per GiB, within 1.25x of the "
                                     "cheapest chunk size measured.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p>One buffer grew to 78 GiB here (reach run), with 79 GiB free at the start.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p>One growable buffer (real policy) reserved 78 GiB of the 79 GiB free at the "
                                     "start, and stopped when the device ran out of memory.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p>Growing a GrowableBuffer costs 200 ms per GiB, appends and fills; cudaMalloc "
                                     "copy-and-grow 2x costs 500 ms per GiB, 2.5x as much.</p>"));
  CHECK_THAT(html, ContainsSubstring("8 threads make 3x the driver-call cycles per second of one (2 MiB chunks; "
                                     "median of 2 repeats, spread 3.00x..3.00x)."));
  // The machine and its versions.
  CHECK_THAT(html, ContainsSubstring("<tr><td>CUDA driver</td><td>13.0</td></tr>"));
  CHECK_THAT(html, ContainsSubstring("<tr><td>CPU</td><td>Test CPU, 16 hardware threads</td></tr>"));
  CHECK_THAT(html, ContainsSubstring("<tr><td>cuvmm</td><td>"));
  // Text from measurements is escaped everywhere it appears.
  CHECK_THAT(html, ContainsSubstring("GPU &lt;b&gt;&amp;&quot;x&quot;"));
  CHECK(html.find("<b>") == std::string::npos);
  CHECK_THAT(html, ContainsSubstring("<li>a note with &lt;angle brackets&gt;</li>"));
  CHECK_THAT(html, ContainsSubstring("<li><a href=\"growth &lt;1&gt;.csv\">growth &lt;1&gt;.csv</a></li>"));
  // Growth against copy-and-grow, as a table row and a bar.
  CHECK_THAT(html, ContainsSubstring("<tr><td>growable</td><td>1 GiB</td><td>1 MiB</td><td>ok</td><td>1 GiB</td>"
                                     "<td>200 ms</td><td>2</td><td>0.4</td>"));
  CHECK_THAT(html, ContainsSubstring("<title>1 GiB / 1 MiB: 0.4</title>"));
  // Self-contained: charts inline, no script, nothing loaded, and a policy that forbids loading.
  CHECK(occurrences(html, "<svg ") == 7);  // 2 driver-call, 1 thread, 2 growth, 2 trace
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find(" src=") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK_THAT(html, ContainsSubstring("content=\"default-src 'none'; style-src 'unsafe-inline'\""));
  // The Arena's statistics.
  CHECK_THAT(html, ContainsSubstring("<tr><td>allocations</td><td>0</td><td>2</td><td>2</td>"));
  CHECK_THAT(html, ContainsSubstring("<tr><td>maps</td><td>7</td>"));
  CHECK_THAT(html, ContainsSubstring("<tr><td>fragmentation</td><td>0.250</td>"));
  CHECK_THAT(html, ContainsSubstring("<tr><td>access_seconds</td><td>4.0 ms</td>"));
  // Where the replay's 8 ms went: 5.5 ms in the driver's calls, the rest the Arena's own.
  CHECK_THAT(html, ContainsSubstring("Where the time went: of 8.0 ms in allocate and deallocate calls, 5.5 ms in the "
                                     "driver&#39;s calls (access grants 4.0, maps 0.5, creates 1.0, unmaps 0.0, "
                                     "releases 0.0) and 2.5 ms in the Arena&#39;s own bookkeeping and lock; 5 pages "
                                     "moved to new addresses, 3 created."));
  CHECK(html.find("class=\"warning\"") == std::string::npos);  // measured on a GPU
}

TEST_CASE("a report of nothing measured keeps every section and says what is missing", "[plan][html]") {
  Measurements m;
  m.backend = "host";
  m.device_name = "host backend";
  std::string const html = report_of(m);
  for (const char* id : report_section_ids) {
    INFO(id);
    CHECK_THAT(html, ContainsSubstring("<section id=\"" + std::string(id) + "\">"));
  }
  CHECK(occurrences(html, "<p class=\"missing\">Not measured.</p>") == 4);  // driver calls, threads, growth, reach
  CHECK_THAT(html, ContainsSubstring("<p class=\"missing\">No trace was replayed.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p class=\"missing\">No Arena replay was measured.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p class=\"missing\">No other files were written.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p>Nothing was left out.</p>"));
  CHECK_THAT(html, ContainsSubstring("<p>The chunk size was not measured (no driver calls were timed).</p>"));
  CHECK_THAT(html, ContainsSubstring("<tr><td>CUDA driver</td><td>none</td></tr>"));
  CHECK_THAT(html, ContainsSubstring("<p class=\"warning\">Measured on the host backend"));
  CHECK(occurrences(html, "<svg ") == 0);
  CHECK(occurrences(html, "<table") == 1);  // the machine's
}

TEST_CASE("a growth measured without a copy-and-grow baseline says so instead of an empty bar chart",
          "[plan][html]") {
  Measurements m = full_measurements();
  m.growth = {growth_row(growable_policy_name, 64 * MiB, 4096, 0.1),
              growth_row(growable_policy_name, 512 * MiB, 64 * MiB, 0.3),
              growth_row(growable_policy_name, 512 * MiB, 1 * MiB, 0.9)};
  std::string const html = report_of(m);
  CHECK_THAT(html, ContainsSubstring("No cudaMalloc copy-and-grow baseline was measured (it needs a GPU)."));
  // Of two growths to 512 MiB, the chart takes the one in the larger appends (0.3 s).
  auto const growth = html.substr(html.find("<section id=\"growth\">"));
  CHECK(occurrences(growth.substr(0, growth.find("</section>")), "<circle ") == 2);
}

TEST_CASE("arena_stats_fields lists every ArenaStats member once, with its value", "[plan][html][arena]") {
  cuvmm::ArenaStats s;
  s.bytes_requested = {1, 2, 3};
  s.allocations = {4, 5, 6};
  s.bytes_mapped = {7, 8, 9};
  s.bytes_physical = {10, 11, 12};
  s.bytes_reserved = {13, 14, 15};
  s.chunks_created = 16;
  s.chunks_released = 17;
  s.maps = 18;
  s.unmaps = 19;
  s.access_calls = 20;
  s.create_seconds = 0.25;
  s.release_seconds = 0.5;
  s.map_seconds = 0.75;
  s.unmap_seconds = 1.0;
  s.access_seconds = 1.25;
  s.cross_stream_reuses = 21;
  s.host_waits = 22;
  s.host_wait_seconds = 1.5;
  s.front_allocations = 23;
  s.front_frees = 24;
  s.reclaims = 25;
  s.pages_moved = 26;
  s.bytes_stale = 27;
  s.streams = 28;
  s.bytes_live = 29;
  s.bytes_pinned = 30;
  s.bytes_lent = 31;
  s.bytes_cached = 32;
  s.bytes_pooled = 33;
  s.at_physical_peak = {34, 35, 36, 37, 38, 39};
  s.bytes_whole_idle = 40;
  s.whole_chunk_reuses = 41;
  s.whole_chunks_created = 42;
  s.whole_chunks_released = 43;
  s.fragmentation = 0.5;
  auto const fields = arena_stats_fields(s);
  // A member added to ArenaStats must be added to arena_stats_fields (report.cpp) and here;
  // at_physical_peak is one field per ArenaHeld member.
  CHECK(fields.size() == member_count<cuvmm::ArenaStats>() - 1 + member_count<cuvmm::ArenaHeld>());
  std::set<std::string> names;
  std::size_t next = 1;
  int seconds_seen = 0;  // the six times, 0.25 s apart in the struct's order
  for (auto const& field : fields) {
    INFO(field.name);
    CHECK(names.insert(field.name).second);
    CHECK_FALSE(field.meaning.empty());
    switch (field.kind) {
      case ArenaStatField::Kind::counter:
        CHECK(field.counter.current == next);
        CHECK(field.counter.peak == next + 1);
        CHECK(field.counter.total == next + 2);
        next += 3;
        break;
      case ArenaStatField::Kind::count: CHECK(field.count == next++); break;
      case ArenaStatField::Kind::ratio: CHECK(field.ratio == 0.5); break;
      case ArenaStatField::Kind::seconds:
        CHECK(field.seconds == 0.25 * static_cast<double>(++seconds_seen));
        break;
    }
  }
  CHECK(seconds_seen == 6);
  CHECK(next == 44);  // every value 1..43 seen, in the struct's order
  CHECK(fields.front().name == "bytes_requested");
  CHECK(fields.back().name == "fragmentation");
}

TEST_CASE("the JSON names the CUDA driver and runtime and carries the Arena's statistics", "[plan][html][report]") {
  CHECK(cuda_version_text(13000) == "13.0");
  CHECK(cuda_version_text(12080) == "12.8");
  CHECK(cuda_version_text(0) == "none");
  Measurements const m = full_measurements();
  std::ostringstream out;
  write_json(out, m, recommend(m));
  std::string const json = out.str();
  CHECK_THAT(json, ContainsSubstring("\"cuda_driver_version\": 13000,\n  \"cuda_runtime_version\": 13000,\n"));
  CHECK_THAT(json, ContainsSubstring("\"host\": {\"os\": \"Linux 6.1.0 x86_64\", \"cpu\": \"Test CPU\", \"cpus\": 16, "
                                     "\"compiler\": \"g++ 12.2.0\"}"));
  CHECK_THAT(json, ContainsSubstring("\"arena_stats\": {\"bytes_requested\": {\"current\": 0, \"peak\": 0, \"total\": 0}, "
                                     "\"allocations\": {\"current\": 0, \"peak\": 2, \"total\": 2}, "));
  CHECK_THAT(json, ContainsSubstring("\"maps\": 7, "));
  CHECK_THAT(json, ContainsSubstring("\"access_calls\": 0, \"create_seconds\": 0.001, \"release_seconds\": 0, "
                                     "\"map_seconds\": 0.0005, \"unmap_seconds\": 0, \"access_seconds\": 0.004, "));
  CHECK_THAT(json, ContainsSubstring("\"fragmentation\": 0.25}}"));
}
