#pragma once
// The report's drawing kit: inline SVG charts (lines with axes and ticks, horizontal bars with
// intervals) and HTML escaping, for a page that opens offline — no script, nothing fetched.
// bench/report.cpp lays the page out with them.
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokentap::bench::svg {

/// `s` escaped for HTML text and attribute values.
std::string esc(std::string_view s);
/// `v` with `decimals` decimals; "–" for a negative value (not measured).
std::string fmt(double v, int decimals = 1);
/// Round numbers for an axis from lo to hi, about `want` of them.
std::vector<double> ticks(double lo, double hi, int want);
std::string tick_label(double v);

// A chart's frame: the plot area inside margins, its scales, the axes with their ticks.
class chart {
 public:
  static constexpr double width = 560, height = 300, left = 64, right = 16, top = 16, bottom = 44;

  chart(std::string id, double x_lo, double x_hi, double y_lo, double y_hi)
      : id_(std::move(id)),
        x_lo_(x_lo),
        x_hi_(x_hi > x_lo ? x_hi : x_lo + 1),
        y_lo_(y_lo),
        y_hi_(y_hi > y_lo ? y_hi : y_lo + 1) {}

  double x(double v) const { return left + (v - x_lo_) / (x_hi_ - x_lo_) * (width - left - right); }
  double y(double v) const {
    return height - bottom - (v - y_lo_) / (y_hi_ - y_lo_) * (height - top - bottom);
  }

  std::string open(std::string_view x_title, std::string_view y_title) const {
    std::string s = "<svg id=\"" + id_ + "\" class=\"chart\" viewBox=\"0 0 " + tick_label(width) +
                    " " + tick_label(height) + "\" width=\"" + tick_label(width) + "\" height=\"" +
                    tick_label(height) + "\" role=\"img\">";
    for (const double t : ticks(x_lo_, x_hi_, 6)) {
      s += line(x(t), top, x(t), height - bottom, "grid");
      s += text(x(t), height - bottom + 16, tick_label(t), "middle");
    }
    for (const double t : ticks(y_lo_, y_hi_, 5)) {
      s += line(left, y(t), width - right, y(t), "grid");
      s += text(left - 6, y(t) + 4, tick_label(t), "end");
    }
    s += line(left, height - bottom, width - right, height - bottom, "axis");
    s += line(left, top, left, height - bottom, "axis");
    s += text((left + width - right) / 2, height - 6, x_title, "middle");
    s += "<text class=\"title\" x=\"12\" y=\"" + tick_label((top + height - bottom) / 2) +
         "\" transform=\"rotate(-90 12 " + tick_label((top + height - bottom) / 2) +
         ")\" text-anchor=\"middle\">" + esc(y_title) + "</text>";
    return s;
  }

  static std::string line(double x1, double y1, double x2, double y2, const char* cls) {
    char b[160];
    std::snprintf(b, sizeof b,
                  "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", cls, x1,
                  y1, x2, y2);
    return b;
  }
  static std::string text(double x, double y, std::string_view t, const char* anchor) {
    char b[96];
    std::snprintf(b, sizeof b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
    return b + esc(t) + "</text>";
  }

 private:
  std::string id_;
  double x_lo_, x_hi_, y_lo_, y_hi_;
};

// One line of a chart: its points, colour, opacity and name.
struct series {
  std::string name;
  const char* colour;
  double opacity = 1;
  std::vector<std::pair<double, double>> points;
};

/// One series as an SVG polyline in `c` (with a marker on each point when `markers`).
std::string polyline(const chart& c, const series& s, bool markers);
/// The series' names with their colours.
std::string legend(const std::vector<series>& all);
/// A chart of lines; markers on each point (few points: load levels).
std::string line_chart(const std::string& id, std::string_view x_title, std::string_view y_title,
                       const std::vector<series>& all, bool markers, double y_floor = 0);

// Horizontal bars with an optional interval each (accuracy's Wilson interval).
struct bar {
  std::string label;
  const char* colour;
  double value = 0, lo = -1, hi = -1;
  std::string note;
};

std::string bar_chart(const std::string& id, const std::vector<bar>& bars, double max_value,
                      std::string_view unit);

}  // namespace tokentap::bench::svg
