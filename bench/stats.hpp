#pragma once
// The statistics `tokentap bench` reports and compares runs with (DESIGN.md §14): a sample's
// mean and percentiles, a binomial 95 % interval for an accuracy, and bootstrap 95 % intervals
// for how much a statistic moved between two runs — over pairs of requests when both ran the
// same workload, over independent resamples otherwise.  Pure functions of their inputs: the
// resampling draws from a generator seeded by the caller, so a report is reproducible.
#include <cstddef>
#include <cstdint>
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

/// A statistic of a sample: its mean (an accuracy is the mean of 0/1) or a percentile.
class statistic {
 public:
  static statistic mean() noexcept { return statistic(-1); }
  static statistic percentile(double q) noexcept { return statistic(q); }
  /// Of a whole sample, sorted ascending.
  double of_sorted(std::span<const double> sorted) const noexcept;
  /// Of the resample that holds values[i] counts[i] times (m values in all), given `order`:
  /// the indices of `values` in ascending order of value.  O(n), no sort: a bootstrap draws
  /// counts, not copies.
  double of_counts(std::span<const double> values, std::span<const std::uint32_t> order,
                   std::span<const std::uint32_t> counts, std::size_t m) const noexcept;

 private:
  explicit statistic(double q) noexcept : q_(q) {}
  double q_;  // < 0: the mean
};

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

/// The statistics a comparison uses.
namespace stat {
inline const statistic mean = statistic::mean();
inline statistic percentile(double q) noexcept {
  return statistic::percentile(q);
}
}  // namespace stat

}  // namespace tokentap::bench
