// svg_chart.cpp: line and bar charts as SVG text (see svg_chart.hpp).
#include "svg_chart.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

#include <cuvmm/error.hpp>  // format_bytes

namespace cuvmm::plan {
namespace {

/// Eight colours that stay distinct on white and for the common colour-vision deficiencies.
constexpr std::array<const char*, 8> palette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/// Legend entries longer than this are cut (the whole name stays in the entry's tooltip).
constexpr std::size_t legend_chars = 30;

/// Series with more points than this are drawn as a line without a mark per point (a trace's
/// timeline has thousands), which keeps the report small.
constexpr std::size_t max_marked_points = 60;

/// The most ticks a logarithmic byte axis shows; powers of 2 are skipped evenly beyond it.
constexpr int max_log_ticks = 8;

std::string fixed1(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", value);
  return text;
}

bool placeable(double value, bool logarithmic) { return std::isfinite(value) && (!logarithmic || value > 0); }

/// An axis's span and ticks, from the values to be drawn on it.
struct Scale {
  double lo = 0;
  double hi = 1;
  bool logarithmic = false;
  std::vector<double> ticks;
};

/// 1, 2 or 5 times a power of ten: the smallest at or above `raw`.
double nice_step(double raw) {
  double const magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double const f : {1.0, 2.0, 5.0}) {
    if (f * magnitude >= raw * (1 - 1e-12)) return f * magnitude;
  }
  return 10 * magnitude;
}

Scale make_scale(const std::vector<double>& values, const Axis& axis) {
  Scale s;
  s.logarithmic = axis.logarithmic;
  if (values.empty()) {
    s.ticks = {0, 1};
    s.logarithmic = false;
    return s;
  }
  auto const [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  double lo = *min_it;
  double hi = *max_it;
  if (axis.logarithmic) {
    double const base = axis.format == AxisFormat::bytes ? 2 : 10;
    double const l = std::log(base);
    int lo_exp = static_cast<int>(std::floor(std::log(lo) / l + 1e-9));
    int hi_exp = static_cast<int>(std::ceil(std::log(hi) / l - 1e-9));
    if (hi_exp == lo_exp) ++hi_exp;
    int const stride = std::max(1, (hi_exp - lo_exp + max_log_ticks - 1) / max_log_ticks);
    s.lo = std::pow(base, lo_exp);
    s.hi = std::pow(base, hi_exp);
    for (int e = lo_exp; e <= hi_exp; e += stride) s.ticks.push_back(std::pow(base, e));
    return s;
  }
  lo = std::min(lo, 0.0);  // linear axes start at 0 (or below, for negative values)
  if (hi <= lo) hi = lo + 1;
  // Byte counts step by powers of 2 (64 MiB, 128 MiB), numbers by 1, 2 or 5 times a power of 10.
  double const raw = (hi - lo) / 5;
  double const step = axis.format == AxisFormat::bytes ? std::exp2(std::ceil(std::log2(raw))) : nice_step(raw);
  s.lo = std::floor(lo / step + 1e-9) * step;
  s.hi = std::ceil(hi / step - 1e-9) * step;
  auto const count = static_cast<int>(std::lround((s.hi - s.lo) / step));
  for (int i = 0; i <= count; ++i) s.ticks.push_back(s.lo + i * step);
  return s;
}

double place(const Scale& s, double value, double from, double to) {
  return axis_position(value, s.lo, s.hi, from, to, s.logarithmic);
}

std::string svg_open(const std::string& title) {
  std::string const t = escape_html(title);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 " + fixed1(chart_width) + " " +
         fixed1(chart_height) + "\" width=\"" + fixed1(chart_width) + "\" height=\"" + fixed1(chart_height) +
         "\" role=\"img\" aria-label=\"" + t + "\">\n<title>" + t + "</title>\n" +
         "<text class=\"chart-title\" x=\"" + fixed1((plot_left + plot_right) / 2) +
         "\" y=\"24.0\" text-anchor=\"middle\">" + t + "</text>\n";
}

std::string no_data(const std::string& title) {
  return svg_open(title) + "<text class=\"no-data\" x=\"" + fixed1((plot_left + plot_right) / 2) + "\" y=\"" +
         fixed1((plot_top + plot_bottom) / 2) + "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
}

/// The y axis: grid lines, tick labels and the axis label, for a plot area ending at `right`.
std::string y_axis(const Scale& y, const Axis& axis, double right) {
  std::string out;
  for (double const tick : y.ticks) {
    std::string const at = fixed1(place(y, tick, plot_bottom, plot_top));
    out += "<line class=\"grid\" x1=\"" + fixed1(plot_left) + "\" y1=\"" + at + "\" x2=\"" + fixed1(right) +
           "\" y2=\"" + at + "\"/>\n";
    out += "<text class=\"tick\" x=\"" + fixed1(plot_left - 6) + "\" y=\"" + at +
           "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + escape_html(tick_label(tick, axis.format)) +
           "</text>\n";
  }
  std::string const mid = fixed1((plot_top + plot_bottom) / 2);
  out += "<text class=\"axis-label\" x=\"16.0\" y=\"" + mid + "\" text-anchor=\"middle\" transform=\"rotate(-90 16.0 " +
         mid + ")\">" + escape_html(axis.label) + "</text>\n";
  out += "<rect class=\"frame\" x=\"" + fixed1(plot_left) + "\" y=\"" + fixed1(plot_top) + "\" width=\"" +
         fixed1(right - plot_left) + "\" height=\"" + fixed1(plot_bottom - plot_top) + "\" fill=\"none\"/>\n";
  return out;
}

std::string legend_text(const std::string& name) {
  if (name.size() <= legend_chars) return escape_html(name);
  return escape_html(name.substr(0, legend_chars - 1)) + "&#8230;";
}

}  // namespace

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char const c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

double axis_position(double value, double lo, double hi, double from, double to, bool logarithmic) {
  double fraction = 0;
  if (logarithmic) {
    fraction = (std::log(value) - std::log(lo)) / (std::log(hi) - std::log(lo));
  } else {
    fraction = (value - lo) / (hi - lo);
  }
  return from + fraction * (to - from);
}

std::string tick_label(double value, AxisFormat format) {
  if (format == AxisFormat::bytes) {
    if (value < 0) return "-" + format_bytes(static_cast<std::size_t>(std::llround(-value)));
    return format_bytes(static_cast<std::size_t>(std::llround(value)));
  }
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string line_chart_svg(const LineChart& chart) {
  std::vector<double> xs;
  std::vector<double> ys;
  std::vector<std::vector<ChartPoint>> kept(chart.series.size());
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    for (auto const& p : chart.series[i].points) {
      if (!placeable(p.x, chart.x.logarithmic) || !placeable(p.y, chart.y.logarithmic)) continue;
      kept[i].push_back(p);
      xs.push_back(p.x);
      ys.push_back(p.y);
    }
  }
  if (xs.empty()) return no_data(chart.title);
  Scale const x = make_scale(xs, chart.x);
  Scale const y = make_scale(ys, chart.y);
  std::string out = svg_open(chart.title);
  out += y_axis(y, chart.y, plot_right);
  for (double const tick : x.ticks) {
    std::string const at = fixed1(place(x, tick, plot_left, plot_right));
    out += "<line class=\"grid\" x1=\"" + at + "\" y1=\"" + fixed1(plot_top) + "\" x2=\"" + at + "\" y2=\"" +
           fixed1(plot_bottom) + "\"/>\n";
    out += "<text class=\"tick\" x=\"" + at + "\" y=\"" + fixed1(plot_bottom + 16) + "\" text-anchor=\"middle\">" +
           escape_html(tick_label(tick, chart.x.format)) + "</text>\n";
  }
  out += "<text class=\"axis-label\" x=\"" + fixed1((plot_left + plot_right) / 2) + "\" y=\"" +
         fixed1(plot_bottom + 40) + "\" text-anchor=\"middle\">" + escape_html(chart.x.label) + "</text>\n";
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const char* const colour = palette[i % palette.size()];
    std::string const name = escape_html(chart.series[i].name);
    std::string points;
    std::string marks;
    for (auto const& p : kept[i]) {
      std::string const px = fixed1(place(x, p.x, plot_left, plot_right));
      std::string const py = fixed1(place(y, p.y, plot_bottom, plot_top));
      points += (points.empty() ? "" : " ") + px + "," + py;
      if (kept[i].size() <= max_marked_points) {
        marks += "<circle cx=\"" + px + "\" cy=\"" + py + "\" r=\"3\" fill=\"" + colour + "\"/>";
      }
    }
    out += "<g class=\"series\" data-name=\"" + name + "\">";
    if (kept[i].size() > 1) {
      out += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"2\" points=\"" + points +
             "\"/>";
    }
    out += marks + "</g>\n";
    double const ly = plot_top + 8 + 18 * static_cast<double>(i);
    out += "<g class=\"legend\"><title>" + name + "</title><rect x=\"" + fixed1(plot_right + 16) + "\" y=\"" +
           fixed1(ly - 5) + "\" width=\"10.0\" height=\"10.0\" fill=\"" + colour + "\"/><text x=\"" +
           fixed1(plot_right + 32) + "\" y=\"" + fixed1(ly) + "\" dominant-baseline=\"middle\">" +
           legend_text(chart.series[i].name) + "</text></g>\n";
  }
  return out + "</svg>\n";
}

std::string bar_chart_svg(const BarChart& chart) {
  std::vector<double> values;
  std::vector<const Bar*> kept;
  for (auto const& bar : chart.bars) {
    if (!std::isfinite(bar.value)) continue;
    kept.push_back(&bar);
    values.push_back(bar.value);
  }
  if (kept.empty()) return no_data(chart.title);
  Axis axis = chart.y;
  axis.logarithmic = false;
  Scale const y = make_scale(values, axis);
  double const right = chart_width - 20;
  std::string out = svg_open(chart.title);
  out += y_axis(y, axis, right);
  double const slot = (right - plot_left) / static_cast<double>(kept.size());
  double const zero = place(y, 0, plot_bottom, plot_top);
  auto const label_chars = static_cast<std::size_t>(std::max(4.0, slot / 6.5));
  for (std::size_t i = 0; i < kept.size(); ++i) {
    double const left = plot_left + slot * static_cast<double>(i) + slot * 0.15;
    double const top = place(y, kept[i]->value, plot_bottom, plot_top);
    double const centre = left + slot * 0.35;
    std::string label = kept[i]->label;
    if (label.size() > label_chars) label = label.substr(0, label_chars - 1) + "\xE2\x80\xA6";  // an ellipsis
    char value[32];
    std::snprintf(value, sizeof value, "%.3g", kept[i]->value);
    out += "<g class=\"bar\"><title>" + escape_html(kept[i]->label) + ": " + value + "</title><rect x=\"" +
           fixed1(left) + "\" y=\"" + fixed1(std::min(top, zero)) + "\" width=\"" + fixed1(slot * 0.7) +
           "\" height=\"" + fixed1(std::fabs(zero - top)) + "\" fill=\"" + palette[i % palette.size()] +
           "\"/><text class=\"value\" x=\"" + fixed1(centre) + "\" y=\"" + fixed1(std::min(top, zero) - 4) +
           "\" text-anchor=\"middle\">" + value + "</text><text class=\"tick\" x=\"" + fixed1(centre) + "\" y=\"" +
           fixed1(plot_bottom + 16) + "\" text-anchor=\"middle\">" + escape_html(label) + "</text></g>\n";
  }
  return out + "</svg>\n";
}

}  // namespace cuvmm::plan
