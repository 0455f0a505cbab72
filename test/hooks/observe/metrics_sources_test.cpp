// The metrics registry's sources: series read from their owners at each scrape, replaced by a
// reload's without a counter going back, gone with their owner.
#include "hooks/observe/metrics.hpp"

#include <gtest/gtest.h>

#include <string>

#include "test/support/metrics_text.hpp"

namespace tokentap::hooks {
namespace {

using test::series_value;

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
  EXPECT_EQ(series_value(m.prometheus_text(), "t_retries_total{up=\"a\"}"), 5);
  old_count = 7;  // counted since the last scrape, then replaced
  auto second = std::make_shared<int>(2);
  m.add_counter_source(
      "t_retries_total", "help", [&] { return new_count; }, {{"up", "a"}}, second);
  m.add_stats_section(
      "sec", [](base::json::writer& w) { w.string("new"); }, second);
  new_count = 4;
  auto text = m.prometheus_text();
  EXPECT_EQ(series_value(text, "t_retries_total{up=\"a\"}"), 11);  // 7 of the old + 4 of the new
  EXPECT_EQ(series_value(text, "t_active{up=\"a\"}"), 3);
  auto stats = m.stats_json();
  EXPECT_NE(stats.find("\"sec\":\"new\""), std::string::npos) << stats;
  EXPECT_EQ(stats.find("\"old\""), std::string::npos) << stats;
  // The first owner goes: its gauge (not replaced) leaves; the replaced counter stays.
  first.reset();
  text = m.prometheus_text();
  EXPECT_EQ(series_value(text, "t_active{up=\"a\"}"), -1) << text;
  EXPECT_EQ(series_value(text, "t_retries_total{up=\"a\"}"), 11);
  second.reset();
  text = m.prometheus_text();
  EXPECT_EQ(series_value(text, "t_retries_total{up=\"a\"}"), -1) << text;
  EXPECT_EQ(m.stats_json().find("\"sec\""), std::string::npos);
  // Without an owner: for the registry's lifetime.
  m.add_counter_source("t_forever_total", "help", [] { return std::uint64_t{2}; });
  EXPECT_EQ(series_value(m.prometheus_text(), "t_forever_total"), 2);
}

}  // namespace
}  // namespace tokentap::hooks
