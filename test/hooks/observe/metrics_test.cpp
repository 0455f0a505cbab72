// The metrics hook: one stream's figures, measured by the timing and steps hooks before it,
// folded into the registry's Prometheus families under DESIGN.md §4's names and labels.
#include "hooks/observe/metrics.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "test/hooks/observe/one_stream.hpp"
#include "test/support/metrics_text.hpp"

namespace tokentap::hooks {
namespace {

using chain_test::one_stream;

TEST(MetricsHook, AStreamsFiguresAreFoldedIntoTheFamiliesWithTheirLabels) {
  const auto reg = one_stream();
  const auto text = reg->prometheus_text();
  const auto s = test::parse_metrics(text);
  const std::map<std::string, std::string> base = {
      {"route", "chat"}, {"model", "llama-3"}, {"provider", "openai-chat"}};
  auto with = [&](std::map<std::string, std::string> more) {
    more.insert(base.begin(), base.end());
    return more;
  };
  EXPECT_EQ(test::metric_sum(s, "tokentap_requests_total", with({{"code", "200"}})), 1) << text;
  // TTFT: request start to the first token, 100 ms; its cache class unknown (no usage).
  EXPECT_EQ(test::metric_sum(s, "tokentap_time_to_first_token_seconds_count",
                             with({{"cache", "unknown"}})),
            1);
  EXPECT_NEAR(test::metric_sum(s, "tokentap_time_to_first_token_seconds_sum", base), 0.100, 1e-9);
  EXPECT_NEAR(test::metric_sum(s, "tokentap_time_to_first_answer_token_seconds_sum", base), 0.100,
              1e-9);
  // One gap between the two tokens, 50 ms, on the content channel.
  EXPECT_EQ(test::metric_sum(s, "tokentap_inter_token_latency_seconds_count",
                             with({{"channel", "content"}})),
            1);
  EXPECT_NEAR(test::metric_sum(s, "tokentap_inter_token_latency_seconds_sum", base), 0.050, 1e-9);
  EXPECT_NEAR(test::metric_sum(s, "tokentap_request_duration_seconds_sum", base), 0.160, 1e-9);
  // No usage reported: the output is the counted token events, all of them answer.
  EXPECT_EQ(test::metric_sum(s, "tokentap_tokens_total", with({{"type", "output_answer"}})), 2);
  EXPECT_EQ(test::metric_sum(s, "tokentap_tokens_total", with({{"type", "reasoning"}})), 0);
  EXPECT_EQ(test::metric_sum(s, "tokentap_reasoning_steps_total",
                             with({{"kind", "step"}, {"redundant", "false"}})),
            1);
  EXPECT_EQ(test::metric_sum(s, "tokentap_reasoning_steps_total",
                             with({{"kind", "conclusion"}, {"redundant", "false"}})),
            1);
  EXPECT_EQ(test::metric_sum(s, "tokentap_active_streams", base), 0);
  // Two forwarded reads, each 0.1 ms from upstream read to client write.
  EXPECT_EQ(test::metric_sum(s, "tokentap_proxy_overhead_seconds_count", base), 2);
  const auto [status, out] = test::promtool_check(text);
  EXPECT_EQ(status, 0) << out;
}

TEST(MetricsHook, AFailedStreamCountsItsStatusAndItsUpstreamError) {
  const auto reg = one_stream(stream_outcome::upstream_reset);
  const auto s = test::parse_metrics(reg->prometheus_text());
  EXPECT_EQ(test::metric_sum(s, "tokentap_requests_total", {{"code", "200"}}), 1);
  EXPECT_EQ(test::metric_sum(s, "tokentap_upstream_errors_total", {{"reason", "reset"}}), 1);
}

}  // namespace
}  // namespace tokentap::hooks
