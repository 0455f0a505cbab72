#include "sim/generator.hpp"

#include <gtest/gtest.h>

#include "parsers/request_inspector.hpp"

namespace tokentap::sim {
namespace {

request_shape openai_stream(bool usage = true) {
  request_shape s;
  s.kind = api::openai_chat;
  s.model = "m";
  s.stream = true;
  s.include_usage = usage;
  s.prompt_chars = 40;
  s.messages = 1;
  s.body_hash = 1234;
  return s;
}

std::string all_bytes(const plan& p) {
  std::string s;
  for (const auto& e : p.events) s += e.bytes;
  return s;
}

TEST(Generator, SameInputSameBytesAndTiming) {
  params p;
  p.dist = latency_dist::exponential;
  p.reasoning_tokens = 5;
  const auto a = make_plan(p, openai_stream());
  const auto b = make_plan(p, openai_stream());
  ASSERT_EQ(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) {
    EXPECT_EQ(a.events[i].bytes, b.events[i].bytes);
    EXPECT_EQ(a.events[i].at_ms, b.events[i].at_ms);
  }
  p.seed = 43;
  EXPECT_NE(make_plan(p, openai_stream()).content_text, a.content_text);
  auto other = openai_stream();
  other.body_hash = 99;
  p.seed = 42;
  EXPECT_NE(make_plan(p, other).content_text, a.content_text);
}

TEST(Generator, OpenAIStreamShape) {
  params p;
  p.output_tokens = 4;
  p.reasoning_tokens = 2;
  p.ttft_ms = 100;
  p.itl_ms = 10;
  const auto pl = make_plan(p, openai_stream());
  // role chunk + 2 reasoning + 4 content + finish + usage + [DONE]
  ASSERT_EQ(pl.events.size(), 10u);
  EXPECT_NE(pl.events[0].bytes.find(R"("delta":{"role":"assistant","content":""})"),
            std::string::npos);
  EXPECT_NE(pl.events[1].bytes.find(R"("reasoning_content":)"), std::string::npos);
  EXPECT_NE(pl.events[3].bytes.find(R"("content":)"), std::string::npos);
  EXPECT_NE(pl.events[7].bytes.find(R"("finish_reason":"stop")"), std::string::npos);
  EXPECT_NE(
      pl.events[8].bytes.find(R"("choices":[],"usage":{"prompt_tokens":14,"completion_tokens":6)"),
      std::string::npos)
      << pl.events[8].bytes;
  EXPECT_NE(pl.events[8].bytes.find(R"("reasoning_tokens":2)"), std::string::npos);
  EXPECT_EQ(pl.events[9].bytes, "data: [DONE]\n\n");
  // Token timing: TTFT then one ITL per token, fixed distribution.
  EXPECT_DOUBLE_EQ(pl.events[1].at_ms, 100);
  EXPECT_DOUBLE_EQ(pl.events[6].at_ms, 150);
  for (const auto& e : pl.events) {
    EXPECT_TRUE(e.bytes.starts_with("data: ")) << e.bytes;
    EXPECT_TRUE(e.bytes.ends_with("\n\n"));
  }
  // Every data payload but [DONE] is valid JSON.
  parsers::request_inspector in;
  for (std::size_t i = 0; i + 1 < pl.events.size(); ++i) {
    const auto& b = pl.events[i].bytes;
    EXPECT_TRUE(in.inspect(std::string_view(b).substr(6, b.size() - 8)).error.empty()) << b;
  }
}

TEST(Generator, UsageChunkOnlyWhenAskedAndMaxTokensTruncates) {
  params p;
  p.output_tokens = 10;
  auto shape = openai_stream(false);
  shape.max_tokens = 3;
  const auto pl = make_plan(p, shape);
  EXPECT_TRUE(pl.truncated);
  EXPECT_EQ(pl.completion_tokens, 3);
  const auto bytes = all_bytes(pl);
  EXPECT_EQ(bytes.find("\"usage\""), std::string::npos);
  EXPECT_NE(bytes.find(R"("finish_reason":"length")"), std::string::npos);
}

TEST(Generator, AnthropicStreamWithThinking) {
  params p;
  p.output_tokens = 3;
  p.reasoning_tokens = 2;
  auto shape = openai_stream();
  shape.kind = api::anthropic_messages;
  const auto pl = make_plan(p, shape);
  std::vector<std::string> types;
  for (const auto& e : pl.events) types.push_back(e.bytes.substr(7, e.bytes.find('\n') - 7));
  const std::vector<std::string> expected = {
      "message_start",       "content_block_start", "content_block_delta", "content_block_delta",
      "content_block_delta", "content_block_stop",  "content_block_start", "ping",
      "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
      "message_delta",       "message_stop"};
  EXPECT_EQ(types, expected);
  EXPECT_NE(pl.events[2].bytes.find("thinking_delta"), std::string::npos);
  EXPECT_NE(pl.events[4].bytes.find("signature_delta"), std::string::npos);
  EXPECT_NE(pl.events[12].bytes.find(R"("output_tokens":5)"), std::string::npos);
}

TEST(Generator, FaultsCutTheStreamAfterNTokens) {
  params p;
  p.output_tokens = 10;
  p.error_after = 3;
  auto pl = make_plan(p, openai_stream());
  EXPECT_EQ(pl.ending, plan::end::error_event);
  ASSERT_EQ(pl.events.size(), 5u);  // role + 3 tokens + error
  EXPECT_TRUE(pl.events.back().bytes.starts_with(R"(data: {"error":)"));

  p.error_after = -1;
  p.reset_after = 2;
  pl = make_plan(p, openai_stream());
  EXPECT_EQ(pl.ending, plan::end::reset);
  EXPECT_EQ(pl.events.size(), 3u);

  p.reset_after = -1;
  p.stall_after = 2;
  p.stall_ms = 500;
  pl = make_plan(p, openai_stream());
  EXPECT_EQ(pl.events.size(), 14u);  // nothing lost, only delayed
  EXPECT_DOUBLE_EQ(pl.events[3].at_ms - pl.events[2].at_ms, p.itl_ms + 500);
}

TEST(Generator, NonStreamingBodies) {
  params p;
  p.output_tokens = 5;
  p.reasoning_tokens = 3;
  auto shape = openai_stream();
  shape.stream = false;
  auto pl = make_plan(p, shape);
  EXPECT_TRUE(pl.events.empty());
  parsers::request_inspector in;
  EXPECT_TRUE(in.inspect(pl.body).error.empty()) << pl.body;
  EXPECT_NE(pl.body.find("\"reasoning_content\""), std::string::npos);
  EXPECT_DOUBLE_EQ(pl.body_at_ms, p.ttft_ms + 7 * p.itl_ms);
  shape.kind = api::anthropic_messages;
  pl = make_plan(p, shape);
  EXPECT_TRUE(in.inspect(pl.body).error.empty()) << pl.body;
  EXPECT_NE(pl.body.find(R"("type":"thinking")"), std::string::npos);
}

TEST(Generator, HeaderOverridesAreValidated) {
  params p;
  EXPECT_FALSE(apply_header(p, "ttft-ms", "250"));
  EXPECT_EQ(p.ttft_ms, 250);
  EXPECT_FALSE(apply_header(p, "itl-dist", "normal"));
  EXPECT_EQ(p.dist, latency_dist::normal);
  EXPECT_FALSE(apply_header(p, "hang", "1"));
  EXPECT_TRUE(p.hang);
  EXPECT_TRUE(apply_header(p, "ttft-ms", "-1"));
  EXPECT_TRUE(apply_header(p, "tokens", "many"));
  EXPECT_TRUE(apply_header(p, "itl-dist", "zipf"));
  EXPECT_TRUE(apply_header(p, "nonsense", "1"));
}

}  // namespace
}  // namespace tokentap::sim

namespace tokentap::sim {
namespace {

TEST(Generator, Fnv1aMatchesTheReferenceVectors) {
  // Clients (the Node SDK test) recompute this digest; it must be the standard FNV-1a 64.
  EXPECT_EQ(fnv1a(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a("foobar"), 0x85944171f73967e8ull);
}

}  // namespace
}  // namespace tokentap::sim
