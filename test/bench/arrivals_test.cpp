// Open-loop schedules (DESIGN.md §14): the rate asked for is the rate planned, exactly; Poisson
// and gamma gaps vary as their shape says; a seed repeats a schedule.
#include "bench/arrivals.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tokentap::bench {
namespace {

// The coefficient of variation of a schedule's gaps (the last one ends at n / rate).
double gap_cv(const std::vector<double>& at, double rate) {
  std::vector<double> gaps;
  for (std::size_t i = 1; i < at.size(); ++i) gaps.push_back(at[i] - at[i - 1]);
  gaps.push_back(static_cast<double>(at.size()) / rate - at.back());
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / double(gaps.size());
  double var = 0;
  for (const double g : gaps) var += (g - mean) * (g - mean);
  return std::sqrt(var / double(gaps.size())) / mean;
}

TEST(Arrivals, ConstantSendsEveryOneOverRate) {
  const auto at = schedule(5, 4.0, arrival::constant, 1, 0);
  ASSERT_EQ(at.size(), 5u);
  for (std::size_t i = 0; i < at.size(); ++i) EXPECT_DOUBLE_EQ(at[i], 0.25 * double(i));
  EXPECT_TRUE(schedule(0, 4.0, arrival::poisson, 1, 0).empty());
}

TEST(Arrivals, DrawnGapsKeepTheRateAskedForAndVaryAsTheirShapeSays) {
  const double rate = 50;
  const std::size_t n = 20000;
  struct {
    arrival kind;
    double burstiness, cv;
  } const cases[] = {{arrival::poisson, 1, 1.0},
                     {arrival::gamma, 1, 1.0},
                     {arrival::gamma, 0.25, 2.0},
                     {arrival::gamma, 4, 0.5}};
  for (const auto& c : cases) {
    const auto at = schedule(n, rate, c.kind, c.burstiness, 17);
    ASSERT_EQ(at.size(), n);
    EXPECT_EQ(at.front(), 0);
    EXPECT_TRUE(std::is_sorted(at.begin(), at.end()));
    // Planned to span n / rate (the last gap ends the level): the rate is the one asked for.
    EXPECT_LT(at.back(), double(n) / rate);
    EXPECT_NEAR(at.back() / double(n - 1), 1 / rate, 0.05 / rate);
    EXPECT_NEAR(gap_cv(at, rate), c.cv, 0.05 * c.cv) << c.burstiness;
  }
  // A seed repeats a schedule; another draws another.
  const auto small = schedule(10, 2.0, arrival::poisson, 1, 3);
  const auto again = schedule(10, 2.0, arrival::poisson, 1, 3);
  EXPECT_EQ(small, again);
  EXPECT_NE(small, schedule(10, 2.0, arrival::poisson, 1, 4));
  EXPECT_EQ(arrival_of("gamma"), arrival::gamma);
  EXPECT_FALSE(arrival_of("uniform").has_value());
}

TEST(Arrivals, ARecordedScheduleKeepsItsOffsetsAtItsSpeedAndRepeatsAfterASpanAndAGap) {
  const std::vector<double> at{0, 1, 3};
  EXPECT_EQ(recorded_schedule(at, 1, 0, 0), (std::vector<double>{0, 1, 3}));  // one pass
  EXPECT_EQ(recorded_schedule(at, 2, 0, 0), (std::vector<double>{0, 0.5, 1.5}));
  // Longer than the recording: the next pass starts one span (3 s) and one mean gap (1.5 s)
  // after the first.
  EXPECT_EQ(recorded_schedule(at, 2, 5, 0), (std::vector<double>{0, 0.5, 1.5, 2.25, 2.75}));
  EXPECT_EQ(recorded_schedule(at, 1, 0, 6), (std::vector<double>{0, 1, 3, 4.5, 5.5}));
  EXPECT_EQ(recorded_schedule(at, 1, 2, 6), (std::vector<double>{0, 1}));  // the nearer bound
  // Offsets from the first record, whenever it was; one record repeats every second.
  EXPECT_EQ(recorded_schedule({10, 12}, 1, 0, 0), (std::vector<double>{0, 2}));
  EXPECT_EQ(recorded_schedule({0}, 4, 3, 0), (std::vector<double>{0, 0.25, 0.5}));
  EXPECT_TRUE(recorded_schedule({}, 1, 3, 0).empty());
  EXPECT_TRUE(recorded_schedule(at, 0, 3, 0).empty());
}

}  // namespace
}  // namespace tokentap::bench
