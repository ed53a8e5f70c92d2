// svg_chart.hpp: the charts of cuvmm-plan's HTML report, as inline SVG text (no script, no fonts or
// files to load), so that the report is one self-contained file.
//
// A chart is drawn in a fixed frame (chart_width x chart_height, the plot area inside the margins,
// the legend to its right). Every piece of text from the caller is escaped; points whose value
// cannot be placed (not finite, or not above 0 on a logarithmic axis) are left out, and a chart
// with nothing to draw says "no data" in its frame. Coordinates are written with one decimal. A
// series of a few points marks each one; a long one (a timeline) is a line only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cuvmm::plan {

/// `text` with &, <, >, " and ' replaced by entities: safe in HTML and SVG text and attributes.
std::string escape_html(std::string_view text);

/// How an axis labels its ticks: plain numbers ("0.5", "20", "1e+06") or byte counts ("64 MiB").
enum class AxisFormat { number, bytes };

struct Axis {
  std::string label;
  AxisFormat format = AxisFormat::number;
  bool logarithmic = false;  ///< ticks at powers of 10 (numbers) or of 2 (bytes)
};

struct ChartPoint {
  double x = 0;
  double y = 0;
};

struct Series {
  std::string name;
  std::vector<ChartPoint> points;  ///< drawn in this order, joined by a line
};

struct LineChart {
  std::string title;
  Axis x;
  Axis y;
  std::vector<Series> series;
};

struct Bar {
  std::string label;
  double value = 0;
};

struct BarChart {
  std::string title;
  Axis y;  ///< the value axis (linear, from 0)
  std::vector<Bar> bars;
};

/// The frame every chart is drawn in (SVG user units), and the plot area inside it.
inline constexpr double chart_width = 760;
inline constexpr double chart_height = 360;
inline constexpr double plot_left = 80;
inline constexpr double plot_right = 540;  ///< the legend starts to the right of it
inline constexpr double plot_top = 40;
inline constexpr double plot_bottom = 300;

/// Where `value` lands on an axis spanning [lo, hi] drawn from `from` to `to` (either direction).
double axis_position(double value, double lo, double hi, double from, double to, bool logarithmic);

/// "1e+06", "0.5", "20": a tick label of `value` in `format`.
std::string tick_label(double value, AxisFormat format);

/// The chart as one <svg> element.
std::string line_chart_svg(const LineChart& chart);
std::string bar_chart_svg(const BarChart& chart);

}  // namespace cuvmm::plan
