// Comparing two runs (DESIGN.md §14): two runs of one target are not a regression, a slower or
// less accurate B is, requests are paired only when both runs ran the same workload, and the
// JSON says what the text says.
#include "bench/compare.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <random>
#include <string>
#include <vector>

namespace tokentap::bench {
namespace {

// A run of n requests: each request's cost (its prompt) is the same in every run; `slower`
// scales its latencies, noise of 5 % per request and run; graded requests answer correctly
// with probability `accuracy`.
std::vector<request_result> run(std::size_t n, double slower, double accuracy, std::uint64_t seed,
                                const std::string& prefix = "q") {
  std::mt19937_64 cost(7), g(seed);
  std::lognormal_distribution<double> prompt(std::log(200.0), 0.7), noise(0, 0.05);
  std::bernoulli_distribution right(accuracy);
  std::vector<request_result> out;
  for (std::size_t i = 0; i < n; ++i) {
    const double base = prompt(cost);
    request_result r;
    r.id = prefix + std::to_string(i);
    r.ok = true;
    r.status = 200;
    r.ttft_ms = base * slower * noise(g);
    r.ttfo_ms = r.ttft_ms * 2;
    r.tpot_ms = 20 * noise(g);
    r.e2e_ms = r.ttft_ms + 100 * r.tpot_ms;
    r.category = i % 2 == 0 ? "math" : "code";
    r.correct = right(g);
    out.push_back(r);
  }
  return out;
}

const metric_change& metric(const comparison& c, std::string_view name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return m;
  ADD_FAILURE() << "no metric " << name;
  static const metric_change none;
  return none;
}

TEST(Compare, TwoRunsOfOneTargetAreNoRegression) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const auto a = run(400, 1.0, 0.8, seed), b = run(400, 1.0, 0.8, seed + 100);
    const auto c = compare_runs(a, b);
    EXPECT_TRUE(c.paired);
    EXPECT_FALSE(c.regressed()) << comparison_text(c);
    EXPECT_EQ(metric(c, "ttft_ms.p50").n_a, 400u);
  }
}

TEST(Compare, ASlowerRunIsARegressionAndAFasterOneIsBetter) {
  const auto a = run(400, 1.0, 0.8, 1), b = run(400, 1.2, 0.8, 2);
  const auto c = compare_runs(a, b);
  const auto& ttft = metric(c, "ttft_ms.p50");
  EXPECT_EQ(ttft.v, metric_change::verdict::worse) << comparison_text(c);
  EXPECT_NEAR(ttft.c.delta_pct, 20, 4);
  EXPECT_EQ(metric(c, "tpot_ms.p50").v, metric_change::verdict::same);  // TPOT did not move
  EXPECT_TRUE(c.regressed());
  const auto text = comparison_text(c);
  EXPECT_NE(text.find("verdict: B is worse"), std::string::npos) << text;
  // The other way round: better, and no regression.
  const auto back = compare_runs(b, a);
  EXPECT_EQ(metric(back, "ttft_ms.p50").v, metric_change::verdict::better);
  EXPECT_FALSE(back.regressed()) << comparison_text(back);
  // A change within the noise threshold is not judged, however significant.
  const auto slight = compare_runs(a, run(400, 1.03, 0.8, 3));
  EXPECT_EQ(metric(slight, "ttft_ms.p50").v, metric_change::verdict::same);
  EXPECT_EQ(metric(compare_runs(a, run(400, 1.03, 0.8, 3), {.min_change_pct = 0}), "ttft_ms.p50").v,
            metric_change::verdict::worse);
}

TEST(Compare, LessAccurateIsARegressionPerCategoryToo) {
  const auto a = run(600, 1.0, 0.9, 1), b = run(600, 1.0, 0.7, 2);
  const auto c = compare_runs(a, b);
  EXPECT_EQ(metric(c, "accuracy").v, metric_change::verdict::worse) << comparison_text(c);
  EXPECT_EQ(metric(c, "accuracy.math").v, metric_change::verdict::worse);
  EXPECT_EQ(metric(c, "accuracy.code").n_a, 300u);
  EXPECT_TRUE(c.regressed());
}

TEST(Compare, RequestsArePairedOnlyWhenBothRunsRanTheSameWorkload) {
  const auto a = run(200, 1.0, 0.8, 1);
  EXPECT_FALSE(compare_runs(a, run(200, 1.0, 0.8, 2, "other")).paired);
  auto fewer = run(200, 1.0, 0.8, 2);
  fewer.pop_back();
  EXPECT_FALSE(compare_runs(a, fewer).paired);
  auto twice = run(200, 1.0, 0.8, 2);
  twice[1].id = twice[0].id;
  EXPECT_FALSE(compare_runs(a, twice).paired);
  // Warm-up requests are in neither side.
  auto warm = run(201, 1.0, 0.8, 2);
  warm.back().warmup = true;
  const auto c = compare_runs(a, warm);
  EXPECT_TRUE(c.paired);
  EXPECT_EQ(metric(c, "e2e_ms.p99").n_b, 200u);
  // Levels send the workload from its start: the same id at two levels is two requests.
  auto a2 = run(200, 1.0, 0.8, 1), b2 = run(200, 1.0, 0.8, 2);
  for (auto* side : {&a2, &b2})
    for (auto& r : *side) r.level = 1;
  auto both_a = a, both_b = run(200, 1.0, 0.8, 2);
  both_a.insert(both_a.end(), a2.begin(), a2.end());
  both_b.insert(both_b.end(), b2.begin(), b2.end());
  EXPECT_TRUE(compare_runs(both_a, both_b).paired);
  // A failed request has no latency: paired, the pair leaves the latency metrics.
  auto failing = run(200, 1.0, 0.8, 2);
  failing[5].ok = false;
  EXPECT_EQ(metric(compare_runs(a, failing), "ttft_ms.p50").n_a, 199u);
}

TEST(Compare, TheJsonSaysWhatTheTextSays) {
  const auto a = run(300, 1.0, 0.8, 1), b = run(300, 1.3, 0.8, 2);
  const auto c = compare_runs(a, b);
  simdjson::dom::parser p;
  const auto doc = p.parse(comparison_json(c));
  ASSERT_FALSE(doc.error());
  EXPECT_TRUE(doc["paired"].get_bool().value());
  bool found = false;
  for (const auto m : doc["metrics"].get_array()) {
    if (std::string_view(m["name"].get_string().value()) != "ttft_ms.p50") continue;
    found = true;
    EXPECT_EQ(std::string_view(m["verdict"].get_string().value()), "worse");
    const double lo = m["ci95"].at(0).get_double().value();
    const double hi = m["ci95"].at(1).get_double().value();
    const double delta = m["delta_pct"].get_double().value();
    EXPECT_LT(lo, delta);
    EXPECT_GT(hi, delta);
    EXPECT_GT(lo, 5);
  }
  EXPECT_TRUE(found);
  // A run whose figure is 0 has no percentage: null, and no verdict on it.
  std::vector<request_result> zero = run(50, 1.0, 0.0, 1), some = run(50, 1.0, 0.5, 2);
  for (auto& r : zero) r.correct = false;
  const auto z = compare_runs(zero, some);
  EXPECT_EQ(metric(z, "accuracy").v, metric_change::verdict::same);
  EXPECT_NE(comparison_json(z).find(R"("name":"accuracy","a":0,"b":)"), std::string::npos)
      << comparison_json(z);
  EXPECT_NE(comparison_json(z).find(R"("delta_pct":null,"ci95":[null,null])"), std::string::npos);
}

}  // namespace
}  // namespace tokentap::bench
