// The /api/stats quantile sketch: every quantile within its relative error of the exact one,
// merge equals adding everything to one sketch, and values at the edges stay bounded.
#include "hooks/observe/quantile_sketch.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace tokentap::hooks {
namespace {

double exact_quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

TEST(QuantileSketch, QuantilesWithinTheRelativeError) {
  std::mt19937 rng(3);
  // Log-normal around 5 ms with a long tail, plus a second mode at 200 ms: values reach both
  // ends of the dense store and force it to grow on either side.
  std::lognormal_distribution<double> fast(std::log(5.0), 0.5), slow(std::log(200.0), 0.3);
  std::vector<double> values;
  quantile_sketch s;
  for (int i = 0; i < 20000; ++i) {
    const double v = (i % 10 == 0) ? slow(rng) : fast(rng);
    values.push_back(v);
    s.add(v);
  }
  EXPECT_EQ(s.count(), values.size());
  for (double q : {0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0}) {
    const double want = exact_quantile(values, q);
    EXPECT_NEAR(s.quantile(q), want, want * quantile_sketch::relative_error * 1.01) << "q=" << q;
  }
}

TEST(QuantileSketch, MergeEqualsOneSketch) {
  std::mt19937 rng(5);
  std::exponential_distribution<double> d(0.1);
  quantile_sketch all, a, b;
  for (int i = 0; i < 5000; ++i) {
    const double v = d(rng);
    all.add(v);
    (i % 3 ? a : b).add(v, 2);
    all.add(v);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  for (double q : {0.1, 0.5, 0.99}) EXPECT_DOUBLE_EQ(a.quantile(q), all.quantile(q));
}

// A batch of packed keys gives both sketches what adding each value would: clustered keys (one
// add per bucket), keys spread past the local histogram, zeros, the range's ends.
TEST(QuantileSketch, PackedBatchesEqualAddingEachValue) {
  std::mt19937 rng(11);
  std::lognormal_distribution<double> near(std::log(20.0), 0.1), wide(std::log(20.0), 3.0);
  for (int round = 0; round < 200; ++round) {
    std::vector<double> values;
    const int n = static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) values.push_back(round % 2 ? wide(rng) : near(rng));
    if (round % 5 == 0) values.insert(values.end(), {0.0, -1.0, 1e-300, 1e300, std::nan("")});
    quantile_sketch each, a, b;
    std::vector<std::int16_t> keys;
    for (double v : values) {
      each.add(v);
      keys.push_back(quantile_sketch::packed_key(v));
    }
    b.add(7.0);  // `also` may hold values already
    a.add_packed(keys, &b);
    ASSERT_EQ(a.count(), each.count());
    ASSERT_EQ(b.count(), each.count() + 1);
    for (double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 1.0}) {
      EXPECT_DOUBLE_EQ(a.quantile(q), each.quantile(q)) << round << " q=" << q;
    }
    quantile_sketch with7 = each;
    with7.add(7.0);
    EXPECT_DOUBLE_EQ(b.quantile(0.5), with7.quantile(0.5)) << round;
  }
}

TEST(QuantileSketch, ZerosNegativesAndExtremes) {
  quantile_sketch s;
  EXPECT_EQ(s.quantile(0.5), -1);  // empty
  s.add(0);
  s.add(-3);  // clock noise counts as zero
  s.add(std::nan(""));
  EXPECT_EQ(s.quantile(0.5), 0);
  s.add(1e300);  // clamped to the top bucket, not a 7,000-bucket array
  s.add(1e-300 + 2e-9);
  EXPECT_EQ(s.count(), 5u);
  EXPECT_GT(s.quantile(1.0), 1e17);
  EXPECT_TRUE(std::isfinite(s.quantile(1.0)));
}

}  // namespace
}  // namespace tokentap::hooks
