#include "parsers/request_inspector.hpp"

#include <gtest/gtest.h>

namespace tokentap::parsers {
namespace {

TEST(RequestInspector, OpenAIChat) {
  request_inspector in;
  const auto info = in.inspect(
      R"({"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":77,)"
      R"("messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"x"}}]}]})");
  EXPECT_TRUE(info.error.empty()) << info.error;
  EXPECT_EQ(info.model, "gpt-4o");
  EXPECT_TRUE(info.stream);
  EXPECT_TRUE(info.include_usage);
  EXPECT_EQ(info.max_tokens, 77);
  EXPECT_EQ(info.messages, 2u);
  EXPECT_EQ(info.prompt_chars, 8u + 5u);
  EXPECT_FALSE(info.reasoning);
}

TEST(RequestInspector, AnthropicWithSystemAndThinking) {
  request_inspector in;
  const auto info = in.inspect(
      R"({"messages":[{"role":"user","content":"abc"}],"system":[{"type":"text","text":"sys"}],)"
      R"("thinking":{"type":"enabled","budget_tokens":1024},"model":"claude-x","max_tokens":4096})");
  EXPECT_TRUE(info.error.empty());
  EXPECT_EQ(info.model, "claude-x");
  EXPECT_FALSE(info.stream);
  EXPECT_TRUE(info.reasoning);
  EXPECT_EQ(info.messages, 2u);
  EXPECT_EQ(info.prompt_chars, 6u);
  EXPECT_EQ(info.max_tokens, 4096);
}

TEST(RequestInspector, KeyOrderAndEscapesDoNotMatter) {
  request_inspector in;
  const auto a = in.inspect(R"({"stream":true,"model":"m\u0031"})");
  EXPECT_EQ(a.model, "m1");
  EXPECT_TRUE(a.stream);
  const auto b = in.inspect(R"(  {"model" : "m1" , "stream" : false}  )");
  EXPECT_EQ(b.model, "m1");
  EXPECT_FALSE(b.stream);
}

TEST(RequestInspector, BadInputIsReportedNotThrown) {
  request_inspector in(64);
  EXPECT_EQ(in.inspect("").error, "empty body");
  EXPECT_EQ(in.inspect("{\"model\":").error, "invalid JSON");
  EXPECT_EQ(in.inspect("[1,2]").error, "body is not a JSON object");
  EXPECT_EQ(in.inspect(std::string(100, ' ')).error, "body too large to inspect");
  // The parser is reusable after errors.
  EXPECT_EQ(in.inspect(R"({"model":"ok"})").model, "ok");
}

}  // namespace
}  // namespace tokentap::parsers
