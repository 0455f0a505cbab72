// The metrics registry: counters a component counts into, sources that follow their owners,
// counters that never go back.
#include "hooks/observe/metrics.hpp"

#include <gtest/gtest.h>

#include <string>

namespace tokentap::hooks {
namespace {

double value_of(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// A component's own counters and gauges are series of the registry: counted into directly, the
// same series for the same name and labels, on /metrics with everything else.
TEST(MetricsRegistry, CountersAComponentCountsIntoAreItsSeries) {
  config::config cfg;
  metrics_registry m(cfg);
  const auto a = m.counter("t_connects_total", "help", {{"kind", "new"}});
  const auto b = m.counter("t_connects_total", "help", {{"kind", "reused"}});
  const auto a_again = m.counter("t_connects_total", "help", {{"kind", "new"}});
  a.add();
  a.add(4);
  b.add(2);
  a_again.add();
  EXPECT_EQ(a.value(), 6u);
  EXPECT_EQ(a_again.value(), 6u);  // one series
  EXPECT_EQ(b.value(), 2u);
  const auto g = m.gauge("t_in_flight", "help");
  g.add();
  g.add(2);
  g.sub();
  EXPECT_EQ(g.value(), 2);
  const auto text = m.prometheus_text();
  EXPECT_EQ(value_of(text, "t_connects_total{kind=\"new\"}"), 6);
  EXPECT_EQ(value_of(text, "t_connects_total{kind=\"reused\"}"), 2);
  EXPECT_EQ(value_of(text, "t_in_flight"), 2);
  g.set(0);
  EXPECT_EQ(value_of(m.prometheus_text(), "t_in_flight"), 0);
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
      "sec", [](base::json::writer& w) { w.string("old"); }, first);
  old_count = 5;
  EXPECT_EQ(value_of(m.prometheus_text(), "t_retries_total{up=\"a\"}"), 5);
  old_count = 7;  // counted since the last scrape, then replaced
  auto second = std::make_shared<int>(2);
  m.add_counter_source(
      "t_retries_total", "help", [&] { return new_count; }, {{"up", "a"}}, second);
  m.add_stats_section(
      "sec", [](base::json::writer& w) { w.string("new"); }, second);
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
