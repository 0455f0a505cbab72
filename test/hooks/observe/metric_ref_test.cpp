// Handles on the registry's series: a component's counters and gauges, counted into directly,
// one series for one name and labels, on /metrics with everything else.
#include "hooks/observe/metric_ref.hpp"

#include <gtest/gtest.h>

#include <string>

#include "hooks/observe/metrics.hpp"
#include "test/support/metrics_text.hpp"

namespace tokentap::hooks {
namespace {

using test::series_value;

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
  EXPECT_EQ(series_value(text, "t_connects_total{kind=\"new\"}"), 6);
  EXPECT_EQ(series_value(text, "t_connects_total{kind=\"reused\"}"), 2);
  EXPECT_EQ(series_value(text, "t_in_flight"), 2);
  g.set(0);
  EXPECT_EQ(series_value(m.prometheus_text(), "t_in_flight"), 0);
}

}  // namespace
}  // namespace tokentap::hooks
