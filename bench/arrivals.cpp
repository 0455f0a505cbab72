#include "bench/arrivals.hpp"

#include <random>

namespace tokentap::bench {

std::optional<arrival> arrival_of(std::string_view name) noexcept {
  if (name == "constant") return arrival::constant;
  if (name == "poisson") return arrival::poisson;
  if (name == "gamma") return arrival::gamma;
  return std::nullopt;
}

std::vector<double> schedule(std::size_t n, double rate, arrival kind, double burstiness,
                             std::uint64_t seed) {
  std::vector<double> gaps(n, 1.0 / rate);
  if (kind != arrival::constant && n > 0) {
    const double shape = kind == arrival::poisson ? 1.0 : burstiness;
    std::mt19937_64 g(seed);
    std::gamma_distribution<double> gap(shape, 1.0 / (rate * shape));
    double sum = 0;
    for (auto& x : gaps) sum += x = gap(g);
    const double scale = sum > 0 ? static_cast<double>(n) / rate / sum : 1.0;
    for (auto& x : gaps) x *= scale;
  }
  // Request i goes after the first i gaps; the last gap ends the level.
  std::vector<double> at(n);
  double t = 0;
  for (std::size_t i = 0; i < n; ++i) {
    at[i] = t;
    t += gaps[i];
  }
  return at;
}

std::vector<double> recorded_schedule(const std::vector<double>& at, double speed,
                                      std::size_t max_requests, double until_s) {
  std::vector<double> out;
  if (at.empty() || !(speed > 0)) return out;
  const std::size_t n = at.size();
  const double span = at.back() - at.front();
  const double period = span + (n > 1 ? span / static_cast<double>(n - 1) : 1.0);
  const bool unbounded = max_requests == 0 && until_s <= 0;
  for (std::size_t i = 0;; ++i) {
    if (unbounded ? i == n : max_requests > 0 && i == max_requests) break;
    const double t =
        (at[i % n] - at.front() + static_cast<double>(i / n) * (period > 0 ? period : 1.0)) / speed;
    if (until_s > 0 && t >= until_s) break;
    out.push_back(t);
  }
  return out;
}

}  // namespace tokentap::bench
