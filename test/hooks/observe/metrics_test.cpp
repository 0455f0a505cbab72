// The /api/stats quantile sketch: every quantile within its relative error of the exact one,
// merge equals adding everything to one sketch, and values at the edges stay bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "hooks/observe/metrics.hpp"

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

namespace tokentap::hooks {
namespace {

double value_of(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// Sources registered again (a reload's new generation) replace the old ones without the counter
// going back or counting twice; a source whose owner is gone leaves with its series.
TEST(MetricsRegistry, SourcesFollowTheirOwnersAndCountersNeverGoBack) {
  config::config cfg;
  metrics_registry m(cfg);
  std::uint64_t old_count = 0, new_count = 0;
  auto first = std::make_shared<int>(1);
  m.add_counter_source(
      "t_retries_total", "help", [&] { return old_count; }, {{"up", "a"}}, first);
  m.add_gauge_source(
      "t_active", "help", [] { return 3.0; }, {{"up", "a"}}, first);
  m.add_stats_section(
      "sec", [](std::string& out) { out += "\"old\""; }, first);
  old_count = 5;
  EXPECT_EQ(value_of(m.prometheus_text(), "t_retries_total{up=\"a\"}"), 5);
  old_count = 7;  // counted since the last scrape, then replaced
  auto second = std::make_shared<int>(2);
  m.add_counter_source(
      "t_retries_total", "help", [&] { return new_count; }, {{"up", "a"}}, second);
  m.add_stats_section(
      "sec", [](std::string& out) { out += "\"new\""; }, second);
  new_count = 4;
  auto text = m.prometheus_text();
  EXPECT_EQ(value_of(text, "t_retries_total{up=\"a\"}"), 11);  // 7 of the old + 4 of the new
  EXPECT_EQ(value_of(text, "t_active{up=\"a\"}"), 3);
  auto stats = m.stats_json();
  EXPECT_NE(stats.find("\"sec\":\"new\""), std::string::npos) << stats;
  EXPECT_EQ(stats.find("\"old\""), std::string::npos) << stats;
  // The first owner goes: its gauge (not replaced) leaves; the replaced counter stays.
  first.reset();
  text = m.prometheus_text();
  EXPECT_EQ(value_of(text, "t_active{up=\"a\"}"), -1) << text;
  EXPECT_EQ(value_of(text, "t_retries_total{up=\"a\"}"), 11);
  second.reset();
  text = m.prometheus_text();
  EXPECT_EQ(value_of(text, "t_retries_total{up=\"a\"}"), -1) << text;
  EXPECT_EQ(m.stats_json().find("\"sec\""), std::string::npos);
  // Without an owner: for the registry's lifetime.
  m.add_counter_source("t_forever_total", "help", [] { return std::uint64_t{2}; });
  EXPECT_EQ(value_of(m.prometheus_text(), "t_forever_total"), 2);
}

}  // namespace
}  // namespace tokentap::hooks
