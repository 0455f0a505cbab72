// The OpenTelemetry GenAI semantic-convention histograms: one answered stream recorded under the
// conventions' names and labels with the usage the server reported; an exchange whose client
// left is no operation of the upstream and is not recorded.
#include "hooks/observe/gen_ai_metrics.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "hooks/observe/metrics.hpp"
#include "test/hooks/observe/one_stream.hpp"
#include "test/support/metrics_text.hpp"

namespace tokentap::hooks {
namespace {

const std::string usage_chunk =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":2}}\n\n";

std::string recorded(stream_outcome outcome) {
  auto reg = std::make_shared<metrics_registry>(config::config{});
  chain_test::stream_one_answer({std::make_shared<gen_ai_metrics_factory>(reg)}, outcome, 200,
                                usage_chunk);
  return reg->prometheus_text();
}

TEST(GenAiMetrics, AnAnsweredStreamIsRecordedUnderTheConventionsNamesAndLabels) {
  const auto text = recorded(stream_outcome::ok);
  const auto s = test::parse_metrics(text);
  const std::map<std::string, std::string> op = {{"gen_ai_operation_name", "chat"},
                                                 {"gen_ai_provider_name", "openai"},
                                                 {"gen_ai_request_model", "llama-3"}};
  auto with = [&](std::map<std::string, std::string> more) {
    more.insert(op.begin(), op.end());
    return more;
  };
  EXPECT_EQ(test::metric_sum(s, "gen_ai_client_operation_duration_seconds_count", op), 1) << text;
  EXPECT_NEAR(test::metric_sum(s, "gen_ai_client_operation_duration_seconds_sum", op), 0.160, 1e-9);
  EXPECT_EQ(
      test::metric_sum(s, "gen_ai_client_token_usage_sum", with({{"gen_ai_token_type", "input"}})),
      10);
  EXPECT_EQ(
      test::metric_sum(s, "gen_ai_client_token_usage_sum", with({{"gen_ai_token_type", "output"}})),
      2);
  EXPECT_EQ(test::metric_sum(s, "gen_ai_server_time_to_first_token_seconds_count", op), 1);
  EXPECT_NEAR(test::metric_sum(s, "gen_ai_server_time_to_first_token_seconds_sum", op), 0.100,
              1e-9);
  // (last - first token) / (output tokens - 1) = 50 ms / 1.
  EXPECT_NEAR(test::metric_sum(s, "gen_ai_server_time_per_output_token_seconds_sum", op), 0.050,
              1e-9);
  // A success carries no error.type.
  for (const auto& x : s) EXPECT_EQ(x.labels.count("error_type"), 0u) << x.name;
  const auto [status, out] = test::promtool_check(text);
  EXPECT_EQ(status, 0) << out;
}

TEST(GenAiMetrics, AFailureCarriesItsErrorTypeAndAClientThatLeftIsNotRecorded) {
  const auto s = test::parse_metrics(recorded(stream_outcome::upstream_reset));
  EXPECT_EQ(test::metric_sum(s, "gen_ai_client_operation_duration_seconds_count",
                             {{"error_type", "upstream_reset"}}),
            1);
  EXPECT_EQ(test::metric_sum(s, "gen_ai_server_time_to_first_token_seconds_count"), 0);
  const auto gone = test::parse_metrics(recorded(stream_outcome::client_disconnect));
  EXPECT_EQ(test::metric_sum(gone, "gen_ai_client_operation_duration_seconds_count"), 0);
}

}  // namespace
}  // namespace tokentap::hooks
