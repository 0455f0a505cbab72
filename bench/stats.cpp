#include "bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace tokentap::bench {

double percentile(std::span<const double> sorted, double q) noexcept {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

double stat::mean(std::span<const double> sorted) noexcept {
  if (sorted.empty()) return 0;
  return std::accumulate(sorted.begin(), sorted.end(), 0.0) / static_cast<double>(sorted.size());
}

summary summarize(std::vector<double> xs) {
  summary s;
  s.n = xs.size();
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  s.mean = stat::mean(xs);
  s.p50 = percentile(xs, 50);
  s.p90 = percentile(xs, 90);
  s.p95 = percentile(xs, 95);
  s.p99 = percentile(xs, 99);
  return s;
}

interval wilson(std::uint64_t successes, std::uint64_t n) noexcept {
  if (n == 0) return {0, 1};
  constexpr double z = 1.959963984540054;  // the normal distribution's 97.5th percentile
  const double nn = static_cast<double>(n);
  const double p = static_cast<double>(std::min(successes, n)) / nn;
  const double d = 1 + z * z / nn;
  const double centre = (p + z * z / (2 * nn)) / d;
  const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / d;
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

namespace {

// b's change from a in percent of a; NaN when a is 0 and b is not (no percentage says it).
double pct(double a, double b) noexcept {
  if (a == 0) return b == 0 ? 0 : std::numeric_limits<double>::quiet_NaN();
  return (b - a) / std::fabs(a) * 100.0;
}

// An index below n from one draw (Lemire's multiply-shift: no modulo bias worth naming, and the
// same on every standard library, where uniform_int_distribution is not).
std::size_t draw(std::mt19937_64& g, std::size_t n) noexcept {
  return static_cast<std::size_t>((static_cast<unsigned __int128>(g()) * n) >> 64);
}

double sorted_stat(std::vector<double>& v, const statistic& stat) {
  std::sort(v.begin(), v.end());
  return stat(v);
}

change finish(std::vector<double>& a, std::vector<double>& b, const statistic& stat,
              std::vector<double>& deltas) {
  change c;
  c.a = sorted_stat(a, stat);
  c.b = sorted_stat(b, stat);
  c.delta_pct = pct(c.a, c.b);
  // Resamples whose a-statistic was 0 say nothing in percent: the interval is of the others.
  std::erase_if(deltas, [](double d) { return std::isnan(d); });
  c.resamples = deltas.size();
  if (deltas.empty()) {
    c.ci95 = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
  } else {
    std::sort(deltas.begin(), deltas.end());
    c.ci95 = {percentile(deltas, 2.5), percentile(deltas, 97.5)};
  }
  return c;
}

}  // namespace

change paired_change(std::span<const double> a, std::span<const double> b, const statistic& stat,
                     std::uint64_t seed, std::size_t resamples) {
  const std::size_t n = std::min(a.size(), b.size());
  std::vector<double> deltas, ra(n), rb(n);
  if (n > 0) {
    deltas.reserve(resamples);
    std::mt19937_64 g(seed);
    for (std::size_t r = 0; r < resamples; ++r) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto k = draw(g, n);
        ra[i] = a[k];
        rb[i] = b[k];
      }
      deltas.push_back(pct(sorted_stat(ra, stat), sorted_stat(rb, stat)));
    }
  }
  std::vector<double> wa(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n));
  std::vector<double> wb(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
  return finish(wa, wb, stat, deltas);
}

change unpaired_change(std::span<const double> a, std::span<const double> b, const statistic& stat,
                       std::uint64_t seed, std::size_t resamples) {
  std::vector<double> deltas, ra(a.size()), rb(b.size());
  if (!a.empty() && !b.empty()) {
    deltas.reserve(resamples);
    std::mt19937_64 g(seed);
    for (std::size_t r = 0; r < resamples; ++r) {
      for (auto& x : ra) x = a[draw(g, a.size())];
      for (auto& x : rb) x = b[draw(g, b.size())];
      deltas.push_back(pct(sorted_stat(ra, stat), sorted_stat(rb, stat)));
    }
  }
  std::vector<double> wa(a.begin(), a.end()), wb(b.begin(), b.end());
  return finish(wa, wb, stat, deltas);
}

}  // namespace tokentap::bench
