// The /api/stats JSON the dashboard draws: per (route, model) the window's counts and quantiles,
// the whole window, the per-second timeline, and the slowest requests with their steps — valid
// JSON, read back with simdjson.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

#include "hooks/observe/metrics.hpp"
#include "test/hooks/observe/one_stream.hpp"

namespace tokentap::hooks {
namespace {

namespace od = simdjson::ondemand;

TEST(StatsJson, OneStreamIsCountedInItsSeriesTheWindowTheTimelineAndTheSlowest) {
  const auto reg = chain_test::one_stream();
  const simdjson::padded_string json(reg->stats_json());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  ASSERT_FALSE(parser.parse(json).get(doc)) << json;
  EXPECT_EQ(doc["window_s"].get_int64().value(), 60);
  EXPECT_TRUE(doc["trace_dir"].is_null());

  const auto series = doc["series"].get_array().value();
  ASSERT_EQ(series.size(), 1u);
  const auto one = series.at(0).value();
  EXPECT_EQ(one["route"].get_string().value(), "chat");
  EXPECT_EQ(one["model"].get_string().value(), "llama-3");
  for (const char* span : {"window", "since_start"}) {
    SCOPED_TRACE(span);
    const auto w = one[span];
    EXPECT_EQ(w["requests"].get_uint64().value(), 1u);
    EXPECT_EQ(w["errors"].get_uint64().value(), 0u);
    EXPECT_EQ(w["active"].get_int64().value(), 0);
    EXPECT_DOUBLE_EQ(w["steps_per_response"].get_double().value(), 2.0);
    EXPECT_TRUE(w["cache_hit_ratio"].is_null());  // no usage reported: no ratio, not 0
    // The quantiles are the sketch's, within its relative error.
    EXPECT_NEAR(w["ttft_ms"]["p50"].get_double().value(), 100, 2);
    EXPECT_EQ(w["ttft_ms"]["n"].get_uint64().value(), 1u);
    EXPECT_NEAR(w["itl_ms"]["p99"].get_double().value(), 50, 1);
    EXPECT_NEAR(w["e2e_ms"]["p50"].get_double().value(), 160, 3.2);
  }
  EXPECT_EQ(doc["all"]["requests"].get_uint64().value(), 1u);

  // The timeline: one entry per second of the window, oldest first, the stream in the last.
  const auto timeline = doc["timeline"].get_array().value();
  ASSERT_EQ(timeline.size(), 60u);
  std::uint64_t requests = 0;
  for (const auto second : timeline) requests += second["requests"].get_uint64().value();
  EXPECT_EQ(requests, 1u);
  EXPECT_EQ(timeline.at(59)["t"].get_int64().value(), 0);

  const auto slowest = doc["slowest"].get_array().value();
  ASSERT_EQ(slowest.size(), 1u);
  const auto row = slowest.at(0).value();
  EXPECT_EQ(row["outcome"].get_string().value(), "ok");
  EXPECT_EQ(row["status"].get_uint64().value(), 200u);
  EXPECT_DOUBLE_EQ(row["ttft_ms"].get_double().value(), 100);
  EXPECT_DOUBLE_EQ(row["e2e_ms"].get_double().value(), 160);
  const auto steps = row["steps"].get_array().value();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps.at(0)["kind"].get_string().value(), "step");
  EXPECT_EQ(steps.at(1)["kind"].get_string().value(), "conclusion");
  EXPECT_DOUBLE_EQ(steps.at(1)["start_ms"].get_double().value(), 150);
}

}  // namespace
}  // namespace tokentap::hooks
