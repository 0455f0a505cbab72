// The statistics of `tokentap bench` (DESIGN.md §14): percentiles as numpy computes them (so our
// figures and vLLM's or AIPerf's agree on the same samples), the Wilson interval at its edges,
// and bootstrap intervals that find a real change, find none between two draws of one
// distribution, and are narrower when requests are paired.
#include "bench/stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tokentap::bench {
namespace {

TEST(Stats, PercentilesInterpolateBetweenRanksAsNumpyDoes) {
  const std::vector<double> four{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(four, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(four, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(four, 95), 3.85);
  EXPECT_DOUBLE_EQ(percentile(four, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile(four, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(four, 100), 4);
  const std::vector<double> one{7};
  EXPECT_DOUBLE_EQ(percentile(one, 99), 7);
  EXPECT_DOUBLE_EQ(percentile(std::vector<double>{}, 50), 0);
  // summarize sorts what it is given.
  const auto s = summarize({10, 3, 1, 5, 2});
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 4.2);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_DOUBLE_EQ(s.p90, 8);
  EXPECT_DOUBLE_EQ(s.p95, 9);
  EXPECT_DOUBLE_EQ(s.p99, 9.8);
  EXPECT_EQ(summarize({}).n, 0u);
}

TEST(Stats, WilsonStaysInsideZeroAndOneAndIsNeverEmpty) {
  const auto none = wilson(0, 10);
  EXPECT_DOUBLE_EQ(none.lo, 0);
  EXPECT_NEAR(none.hi, 0.2775328, 1e-6);
  const auto half = wilson(5, 10);
  EXPECT_NEAR(half.lo, 0.2365931, 1e-6);
  EXPECT_NEAR(half.hi, 0.7634069, 1e-6);
  const auto all = wilson(10, 10);
  EXPECT_NEAR(all.lo, 0.7224672, 1e-6);
  EXPECT_DOUBLE_EQ(all.hi, 1);
  const auto most = wilson(81, 100);
  EXPECT_NEAR(most.lo, 0.7222115, 1e-6);
  EXPECT_NEAR(most.hi, 0.8748525, 1e-6);
  const auto one = wilson(1, 1);
  EXPECT_NEAR(one.lo, 0.2065493, 1e-6);
  const auto unknown = wilson(0, 0);
  EXPECT_EQ(unknown.lo, 0);
  EXPECT_EQ(unknown.hi, 1);
}

// A bootstrap resample is drawn as counts, not copies: its statistic must be the one of the
// resample written out and sorted, ties and values drawn 0 times included.
TEST(Stats, AStatisticOfDrawCountsIsThatOfTheResampleItDescribes) {
  std::mt19937_64 g(5);
  std::uniform_int_distribution<int> value(0, 20), count(0, 3);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> values(1 + round % 37);
    std::vector<std::uint32_t> counts(values.size());
    for (auto& v : values) v = value(g);  // small integers: many ties
    std::vector<double> expanded;
    for (std::size_t i = 0; i < values.size(); ++i) {
      counts[i] = static_cast<std::uint32_t>(count(g));
      expanded.insert(expanded.end(), counts[i], values[i]);
    }
    if (expanded.empty()) continue;
    std::vector<std::uint32_t> order(values.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return values[a] < values[b]; });
    std::sort(expanded.begin(), expanded.end());
    for (const auto& s : {stat::mean, stat::percentile(0), stat::percentile(50),
                          stat::percentile(90), stat::percentile(99), stat::percentile(100)})
      EXPECT_NEAR(s.of_counts(values, order, counts, expanded.size()), s.of_sorted(expanded), 1e-9)
          << "round " << round;
  }
}

// Latencies as a request population gives them: each request its own base (prompt length),
// times noise; `scale` slows a whole run.
std::vector<double> run_of(const std::vector<double>& base, double scale, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::lognormal_distribution<double> noise(0, 0.05);
  std::vector<double> out;
  for (const double b : base) out.push_back(b * scale * noise(g));
  return out;
}

std::vector<double> bases(std::size_t n) {
  std::mt19937_64 g(7);
  std::lognormal_distribution<double> prompt(std::log(200.0), 0.8);
  std::vector<double> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back(prompt(g));
  return out;
}

TEST(Stats, APairedChangeFindsAFivePercentSlowdownThatIsThere) {
  const auto base = bases(300);
  const auto a = run_of(base, 1.0, 1), b = run_of(base, 1.05, 2);
  const auto c = paired_change(a, b, stat::mean, 42);
  EXPECT_EQ(c.resamples, 2000u);
  EXPECT_GT(c.ci95.lo, 0) << c.ci95.lo << " .. " << c.ci95.hi;
  EXPECT_TRUE(c.ci95.contains(5.0)) << c.ci95.lo << " .. " << c.ci95.hi;
  EXPECT_TRUE(c.ci95.contains(c.delta_pct));
  // A percentile of each run is of different requests in each resample: its interval is wider,
  // and still holds the change.
  const auto p50 = paired_change(a, b, stat::percentile(50), 42);
  EXPECT_TRUE(p50.ci95.contains(5.0)) << p50.ci95.lo << " .. " << p50.ci95.hi;
  EXPECT_GT(p50.ci95.hi - p50.ci95.lo, c.ci95.hi - c.ci95.lo);
  // The same seed gives the same interval: a report can be made again.
  const auto again = paired_change(a, b, stat::mean, 42);
  EXPECT_EQ(again.ci95.lo, c.ci95.lo);
  EXPECT_EQ(again.ci95.hi, c.ci95.hi);
}

TEST(Stats, TwoRunsOfTheSameTargetDoNotDiffer) {
  const auto base = bases(300);
  const auto a = run_of(base, 1.0, 3), b = run_of(base, 1.0, 4);
  for (const double q : {50.0, 90.0, 99.0}) {
    const auto c = paired_change(a, b, stat::percentile(q), 9);
    EXPECT_TRUE(c.ci95.contains(0)) << "P" << q << ": " << c.ci95.lo << " .. " << c.ci95.hi;
  }
  const auto m = unpaired_change(a, b, stat::mean, 9);
  EXPECT_TRUE(m.ci95.contains(0)) << m.ci95.lo << " .. " << m.ci95.hi;
}

TEST(Stats, PairingByRequestNarrowsTheInterval) {
  // Requests differ far more from each other than the two runs do: pairing removes that spread,
  // so the paired interval is much narrower and finds the 5 % the unpaired one cannot.
  const auto base = bases(200);
  const auto a = run_of(base, 1.0, 5), b = run_of(base, 1.05, 6);
  const auto paired = paired_change(a, b, stat::mean, 11);
  const auto unpaired = unpaired_change(a, b, stat::mean, 11);
  EXPECT_NEAR(paired.delta_pct, unpaired.delta_pct, 1e-9);
  EXPECT_LT((paired.ci95.hi - paired.ci95.lo) * 4, unpaired.ci95.hi - unpaired.ci95.lo);
  EXPECT_GT(paired.ci95.lo, 0);
  EXPECT_TRUE(unpaired.ci95.contains(0));
}

TEST(Stats, AChangeFromZeroHasNoPercentage) {
  // An accuracy of 0 in run a: no percentage says how far b moved from it.
  const std::vector<double> a{0, 0, 0, 0}, b{1, 0, 1, 1};
  const auto c = paired_change(a, b, stat::mean, 1, 200);
  EXPECT_TRUE(std::isnan(c.delta_pct));
  EXPECT_EQ(c.resamples, 0u);
  EXPECT_TRUE(std::isnan(c.ci95.lo));
  const std::vector<double> zeros{0, 0};
  EXPECT_EQ(paired_change(zeros, zeros, stat::mean, 1, 50).delta_pct, 0);
  EXPECT_EQ(unpaired_change({}, b, stat::mean, 1, 50).resamples, 0u);
}

}  // namespace
}  // namespace tokentap::bench
