// The GenAI semantic-convention values the metrics and the spans share: the operation a path
// names, the provider an API is, the error type of a failed exchange, the server of an endpoint.
#include "hooks/export/gen_ai_semconv.hpp"

#include <gtest/gtest.h>

namespace tokentap::hooks {
namespace {

using parsers::provider;

TEST(GenAiSemconv, TheOperationIsTextCompletionOnlyWhereThePathSaysSo) {
  EXPECT_EQ(gen_ai_operation(provider::openai_chat, "/v1/chat/completions"), "chat");
  EXPECT_EQ(gen_ai_operation(provider::openai_chat, "/v1/completions"), "text_completion");
  EXPECT_EQ(gen_ai_operation(provider::ollama, "/api/chat"), "chat");
  EXPECT_EQ(gen_ai_operation(provider::ollama, "/api/generate"), "text_completion");
  EXPECT_EQ(gen_ai_operation(provider::tgi, "/generate_stream"), "text_completion");
  EXPECT_EQ(gen_ai_operation(provider::llamacpp, "/completion"), "text_completion");
  EXPECT_EQ(gen_ai_operation(provider::anthropic, "/v1/messages"), "chat");
  EXPECT_EQ(gen_ai_operation(provider::openai_responses, "/v1/responses"), "chat");
  EXPECT_EQ(gen_ai_operation(provider::unknown, "/anything"), "chat");
}

TEST(GenAiSemconv, AnOpenAiCompatibleServerIsOpenAiAndTheOthersTheirOwnName) {
  EXPECT_EQ(gen_ai_provider(provider::openai_chat), "openai");
  EXPECT_EQ(gen_ai_provider(provider::openai_responses), "openai");
  EXPECT_EQ(gen_ai_provider(provider::anthropic), "anthropic");
  EXPECT_EQ(gen_ai_provider(provider::ollama), "ollama");
  EXPECT_EQ(gen_ai_provider(provider::tgi), "tgi");
  EXPECT_EQ(gen_ai_provider(provider::llamacpp), "llamacpp");
}

TEST(GenAiSemconv, TheErrorTypeIsTheStatusElseHowTheStreamFailedAndNoneForTheClientsOwnEnd) {
  stream_info s;
  EXPECT_EQ(gen_ai_error_type(s), "");
  s.status = 200;
  s.outcome = stream_outcome::upstream_reset;
  EXPECT_EQ(gen_ai_error_type(s), "upstream_reset");
  s.outcome = stream_outcome::timeout;
  EXPECT_EQ(gen_ai_error_type(s), "timeout");
  s.outcome = stream_outcome::client_disconnect;  // the client left: no error of the operation
  EXPECT_EQ(gen_ai_error_type(s), "");
  s.outcome = stream_outcome::rejected;
  s.status = 429;  // any status of 400 or more names the error, whoever answered
  EXPECT_EQ(gen_ai_error_type(s), "429");
  s.status = 503;
  s.outcome = stream_outcome::upstream_error;
  EXPECT_EQ(gen_ai_error_type(s), "503");
}

TEST(GenAiSemconv, TheServerOfAnEndpointLabel) {
  auto s = server_of("10.0.0.7:8000");
  EXPECT_EQ(s.address, "10.0.0.7");
  EXPECT_EQ(s.port, "8000");
  s = server_of("[::1]:443");
  EXPECT_EQ(s.address, "::1");
  EXPECT_EQ(s.port, "443");
  s = server_of("engine.internal");
  EXPECT_EQ(s.address, "engine.internal");
  EXPECT_EQ(s.port, "");
}

}  // namespace
}  // namespace tokentap::hooks
