#include "bench/svg.hpp"

#include <algorithm>
#include <cmath>

namespace tokentap::bench::svg {

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string fmt(double v, int decimals) {
  if (v < 0) return "–";
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

std::vector<double> ticks(double lo, double hi, int want) {
  std::vector<double> out;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / want;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (const double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push_back(t);
  return out;
}

std::string tick_label(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string polyline(const chart& c, const series& s, bool markers) {
  std::string pts;
  char b[64];
  for (const auto& [x, y] : s.points) {
    std::snprintf(b, sizeof b, "%.1f,%.1f ", c.x(x), c.y(y));
    pts += b;
  }
  std::snprintf(b, sizeof b, "%.2f", s.opacity);
  std::string out = "<polyline class=\"series\" data-series=\"" + esc(s.name) + "\" data-n=\"" +
                    std::to_string(s.points.size()) + "\" fill=\"none\" stroke=\"" + s.colour +
                    "\" stroke-opacity=\"" + b + "\" stroke-width=\"2\" points=\"" + pts +
                    "\"><title>" + esc(s.name) + "</title></polyline>";
  if (markers)
    for (const auto& [x, y] : s.points) {
      std::snprintf(b, sizeof b, "%.1f", c.x(x));
      out += "<circle cx=\"" + std::string(b);
      std::snprintf(b, sizeof b, "%.1f", c.y(y));
      out += "\" cy=\"" + std::string(b) + "\" r=\"3\" fill=\"" + s.colour + "\"/>";
    }
  return out;
}

std::string legend(const std::vector<series>& all) {
  std::string out = "<div class=\"legend\">";
  for (const auto& s : all) {
    char b[16];
    std::snprintf(b, sizeof b, "%.2f", s.opacity);
    out += "<span><i style=\"background:" + std::string(s.colour) + ";opacity:" + b + "\"></i>" +
           esc(s.name) + "</span>";
  }
  return out + "</div>";
}

std::string line_chart(const std::string& id, std::string_view x_title, std::string_view y_title,
                       const std::vector<series>& all, bool markers, double y_floor) {
  double x_lo = 1e300, x_hi = -1e300, y_hi = y_floor;
  for (const auto& s : all)
    for (const auto& [x, y] : s.points) {
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      y_hi = std::max(y_hi, y);
    }
  if (x_lo > x_hi) return "<p class=\"none\">no samples</p>";
  if (markers) {  // some room around the load levels
    const double pad = x_hi > x_lo ? (x_hi - x_lo) * 0.05 : std::max(1.0, x_lo * 0.5);
    x_lo = std::max(0.0, x_lo - pad);
    x_hi += pad;
  }
  const chart c(id, x_lo, x_hi, 0, y_hi * 1.05);
  std::string out = c.open(x_title, y_title);
  for (const auto& s : all) out += polyline(c, s, markers);
  return out + "</svg>" + legend(all);
}

std::string bar_chart(const std::string& id, const std::vector<bar>& bars, double max_value,
                      std::string_view unit) {
  constexpr double width = 560, label_w = 200, row = 22, right = 70;
  const double height = row * static_cast<double>(bars.size()) + 8;
  if (max_value <= 0) max_value = 1;
  const auto x = [&](double v) { return label_w + v / max_value * (width - label_w - right); };
  char b[256];
  std::snprintf(b, sizeof b,
                "<svg id=\"%s\" class=\"chart bars\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
                "height=\"%.0f\" role=\"img\">",
                id.c_str(), width, height, width, height);
  std::string out = b;
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const auto& r = bars[i];
    const double y = 4 + row * static_cast<double>(i);
    out += chart::text(label_w - 6, y + 14, r.label, "end");
    std::snprintf(b, sizeof b,
                  "<rect class=\"bar\" data-value=\"%g\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\" fill=\"%s\"/>",
                  r.value, label_w, y + 3, std::max(0.0, x(r.value) - label_w), row - 8, r.colour);
    out += b;
    if (r.lo >= 0 && r.hi >= 0) {
      out += chart::line(x(r.lo), y + row / 2, x(r.hi), y + row / 2, "whisker");
      out += chart::line(x(r.lo), y + 5, x(r.lo), y + row - 5, "whisker");
      out += chart::line(x(r.hi), y + 5, x(r.hi), y + row - 5, "whisker");
    }
    out +=
        chart::text(x(std::max(r.value, r.hi)) + 6, y + 14,
                    (r.note.empty() ? tick_label(r.value) + std::string(unit) : r.note), "start");
  }
  return out + "</svg>";
}

}  // namespace tokentap::bench::svg
