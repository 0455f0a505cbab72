#pragma once
// The statistics `tokentap bench` reports and compares runs with (DESIGN.md §14): a sample's
// mean and percentiles, a binomial 95 % interval for an accuracy, and bootstrap 95 % intervals
// for how much a statistic moved between two runs — over pairs of requests when both ran the
// same workload, over independent resamples otherwise.  Pure functions of their inputs: the
// resampling draws from a generator seeded by the caller, so a report is reproducible.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tokentap::bench {

/// A closed interval; for a 95 % interval, [lo, hi].
struct interval {
  double lo = 0, hi = 0;
  bool contains(double x) const noexcept { return lo <= x && x <= hi; }
};

/// The q-th percentile (0–100) of `sorted` (ascending, not empty), interpolated linearly between
/// the two closest ranks: numpy's default (`np.percentile`), which vLLM's and AIPerf's reports
/// use, so the same samples give the same figure in ours.
double percentile(std::span<const double> sorted, double q) noexcept;

/// What summary.json writes for one metric of one level.
struct summary {
  std::size_t n = 0;
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
};
/// The summary of `xs` (any order; empty: n = 0 and zeros).
summary summarize(std::vector<double> xs);

/// The Wilson score interval of a binomial proportion (`successes` of `n`) at 95 %: unlike the
/// normal approximation it stays inside [0, 1] and is not empty at 0 or n successes, which
/// graded tasks with a few dozen questions per category reach.  n = 0: [0, 1].
interval wilson(std::uint64_t successes, std::uint64_t n) noexcept;

/// A statistic of a sample (its median, P99, mean, an accuracy as a mean of 0/1 ...), given the
/// sample sorted ascending.
using statistic = std::function<double(std::span<const double> sorted)>;

/// How a statistic moved from run `a` to run `b`, in percent of a's: the observed change and its
/// bootstrap 95 % interval (percentile method).
struct change {
  double a = 0, b = 0;        ///< the statistic on each whole sample
  double delta_pct = 0;       ///< (b − a) / |a| × 100; 0 when both are 0, NaN when only a is
  interval ci95;              ///< of delta_pct, over the resamples where it is a number (else NaN)
  std::size_t resamples = 0;  ///< that many
};

/// Both samples of the same requests, in the same order (`a[i]` and `b[i]` one request id):
/// each resample draws request ids, so what the requests share (a long prompt is slow in both
/// runs) cancels out and the interval is narrower than the unpaired one.
change paired_change(std::span<const double> a, std::span<const double> b, const statistic& stat,
                     std::uint64_t seed, std::size_t resamples = 2000);
/// Independent samples (different workloads, or requests not matched by id): each resample
/// draws from each run on its own.
change unpaired_change(std::span<const double> a, std::span<const double> b, const statistic& stat,
                       std::uint64_t seed, std::size_t resamples = 2000);

/// The statistics a comparison uses, on a sorted sample.
namespace stat {
double mean(std::span<const double> sorted) noexcept;
inline statistic percentile(double q) {
  return [q](std::span<const double> s) { return bench::percentile(s, q); };
}
}  // namespace stat

}  // namespace tokentap::bench
