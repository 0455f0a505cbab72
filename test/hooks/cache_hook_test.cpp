#include "hooks/cache_hook.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <random>
#include <vector>

namespace tokentap::hooks {
namespace {

// The rolling median the plain way, as the oracle: the window copied, the element at size / 2
// selected.
struct reference_window {
  std::deque<double> q;
  std::pair<double, std::size_t> sample(double ms) {
    std::pair<double, std::size_t> before{0, q.size()};
    if (!q.empty()) {
      std::vector<double> v(q.begin(), q.end());
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      before.first = v[v.size() / 2];
    }
    q.push_back(ms);
    if (q.size() > 200) q.pop_front();
    return before;
  }
};

// prefill_sample keeps each model's window sorted as samples come and go: the medians and counts
// it returns are the ones selecting from a copy gave, sample by sample — through the window
// filling, sliding past 200, with repeated values (exact duplicates leave one copy each), and for
// two models side by side.
TEST(PrefixTracker, RollingPrefillMedianIsTheSelectedOne) {
  config::cache_config cfg;
  prefix_tracker t(cfg);
  std::mt19937_64 rng(26);
  std::uniform_real_distribution<double> d(0.01, 5.0);
  std::uniform_int_distribution<int> few(0, 9);
  reference_window a, b;
  for (int i = 0; i < 1500; ++i) {
    // Every third sample from a small set of values: duplicates in the window.
    const double x = i % 3 == 0 ? 0.5 * few(rng) : d(rng);
    const double y = d(rng) * 10;
    ASSERT_EQ(t.prefill_sample(1, x), a.sample(x)) << "sample " << i;
    ASSERT_EQ(t.prefill_sample(2, y), b.sample(y)) << "sample " << i;
  }
  EXPECT_EQ(t.prefill_sample(1, 1.0).second, 200u);
  EXPECT_EQ(t.prefill_sample(3, 1.0), (std::pair<double, std::size_t>{0.0, 0}));  // a new model
}

// A sample that is not a number (no TTFT to divide) does not enter the window.
TEST(PrefixTracker, NonFiniteSamplesStayOut) {
  config::cache_config cfg;
  prefix_tracker t(cfg);
  t.prefill_sample(1, 2.0);
  t.prefill_sample(1, std::numeric_limits<double>::quiet_NaN());
  t.prefill_sample(1, std::numeric_limits<double>::infinity());
  EXPECT_EQ(t.prefill_sample(1, 3.0), (std::pair<double, std::size_t>{2.0, 1}));
  EXPECT_EQ(t.prefill_sample(1, 1.0), (std::pair<double, std::size_t>{3.0, 2}));
}

}  // namespace
}  // namespace tokentap::hooks
