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

namespace {

double mean_of(std::span<const double> xs) noexcept {
  if (xs.empty()) return 0;
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

}  // namespace

double statistic::of_sorted(std::span<const double> sorted) const noexcept {
  return q_ < 0 ? mean_of(sorted) : bench::percentile(sorted, q_);
}

double statistic::of_counts(std::span<const double> values, std::span<const std::uint32_t> order,
                            std::span<const std::uint32_t> counts, std::size_t m) const noexcept {
  if (m == 0) return 0;
  if (q_ < 0) {
    double sum = 0;
    for (std::size_t i = 0; i < values.size(); ++i) sum += counts[i] * values[i];
    return sum / static_cast<double>(m);
  }
  // The values at ranks lo and lo + 1 of the resample, sorted: walk the sample in order, each
  // value as many times as it was drawn.
  const double pos = std::clamp(q_, 0.0, 100.0) / 100.0 * static_cast<double>(m - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, m - 1);
  double at_lo = 0, at_hi = 0;
  std::size_t seen = 0;
  for (const auto i : order) {
    const std::size_t next = seen + counts[i];
    if (seen <= lo && lo < next) at_lo = values[i];
    if (seen <= hi && hi < next) {
      at_hi = values[i];
      break;
    }
    seen = next;
  }
  return at_lo + (at_hi - at_lo) * (pos - static_cast<double>(lo));
}

summary summarize(std::vector<double> xs) {
  summary s;
  s.n = xs.size();
  if (xs.empty()) return s;
  std::sort(xs.begin(), xs.end());
  s.mean = mean_of(xs);
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

// The indices of `v` in ascending order of value.
std::vector<std::uint32_t> order_of(std::span<const double> v) {
  std::vector<std::uint32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t x, std::uint32_t y) { return v[x] < v[y]; });
  return order;
}

double whole(std::span<const double> v, const statistic& stat) {
  std::vector<double> sorted(v.begin(), v.end());
  std::sort(sorted.begin(), sorted.end());
  return stat.of_sorted(sorted);
}

change finish(std::span<const double> a, std::span<const double> b, const statistic& stat,
              std::vector<double>& deltas) {
  change c;
  c.a = whole(a, stat);
  c.b = whole(b, stat);
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

// A bootstrap resample of n values: how many times each was drawn.
void draw_counts(std::mt19937_64& g, std::vector<std::uint32_t>& counts) {
  std::fill(counts.begin(), counts.end(), 0u);
  for (std::size_t i = 0; i < counts.size(); ++i) ++counts[draw(g, counts.size())];
}

}  // namespace

change paired_change(std::span<const double> a, std::span<const double> b, const statistic& stat,
                     std::uint64_t seed, std::size_t resamples) {
  const std::size_t n = std::min(a.size(), b.size());
  a = a.first(n);
  b = b.first(n);
  std::vector<double> deltas;
  if (n > 0) {
    deltas.reserve(resamples);
    const auto oa = order_of(a), ob = order_of(b);
    std::vector<std::uint32_t> counts(n);
    std::mt19937_64 g(seed);
    for (std::size_t r = 0; r < resamples; ++r) {
      draw_counts(g, counts);  // request ids: both runs' values of one request go together
      deltas.push_back(pct(stat.of_counts(a, oa, counts, n), stat.of_counts(b, ob, counts, n)));
    }
  }
  return finish(a, b, stat, deltas);
}

change unpaired_change(std::span<const double> a, std::span<const double> b, const statistic& stat,
                       std::uint64_t seed, std::size_t resamples) {
  std::vector<double> deltas;
  if (!a.empty() && !b.empty()) {
    deltas.reserve(resamples);
    const auto oa = order_of(a), ob = order_of(b);
    std::vector<std::uint32_t> ca(a.size()), cb(b.size());
    std::mt19937_64 g(seed);
    for (std::size_t r = 0; r < resamples; ++r) {
      draw_counts(g, ca);
      draw_counts(g, cb);
      deltas.push_back(
          pct(stat.of_counts(a, oa, ca, a.size()), stat.of_counts(b, ob, cb, b.size())));
    }
  }
  return finish(a, b, stat, deltas);
}

}  // namespace tokentap::bench
