#include "sim/generator.hpp"

#include <gtest/gtest.h>

#include "base/json.hpp"
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

// Ollama's native API: one NDJSON line per token, the text in `message.content` (/api/chat) or
// `response` (/api/generate), reasoning in `thinking`, then a `done` line with the counts; its
// durations (ns) only with --engine ollama, and only on Ollama's own API.
TEST(Generator, OllamaLinesAndTheirDurations) {
  params p;
  p.output_tokens = 3;
  p.reasoning_tokens = 2;
  p.ttft_ms = 100;
  p.itl_ms = 10;
  parsers::request_inspector in;
  for (const auto kind : {api::ollama_chat, api::ollama_generate}) {
    auto shape = openai_stream();
    shape.kind = kind;
    auto pl = make_plan(p, shape);
    ASSERT_EQ(pl.events.size(), 6u);  // 2 thinking + 3 content + done
    for (const auto& e : pl.events) {
      ASSERT_TRUE(e.bytes.ends_with("}\n")) << e.bytes;
      EXPECT_EQ(e.bytes.find('\n'), e.bytes.size() - 1) << e.bytes;  // one line each
      EXPECT_TRUE(in.inspect(e.bytes).error.empty()) << e.bytes;
      EXPECT_NE(e.bytes.find(R"("model":"m","created_at":"2025-11-29T07:06:40.000000000Z")"),
                std::string::npos);
    }
    const std::string text_key = kind == api::ollama_chat ? R"("message":{)" : R"("response":)";
    EXPECT_NE(pl.events[0].bytes.find(text_key), std::string::npos);
    EXPECT_NE(pl.events[0].bytes.find(R"("thinking":")"), std::string::npos);
    EXPECT_NE(pl.events[0].bytes.find(R"("done":false)"), std::string::npos);
    EXPECT_EQ(pl.events[2].bytes.find(R"("thinking")"), std::string::npos);
    EXPECT_DOUBLE_EQ(pl.events[0].at_ms, 100);
    EXPECT_DOUBLE_EQ(pl.events[4].at_ms, 140);
    const auto& done = pl.events.back().bytes;
    EXPECT_NE(done.find(R"("done_reason":"stop","done":true)"), std::string::npos) << done;
    EXPECT_NE(done.find(R"("eval_count":5)"), std::string::npos) << done;
    EXPECT_EQ(done.find("duration"), std::string::npos);
    EXPECT_DOUBLE_EQ(pl.events.back().at_ms, 140);

    // Other engines' reports never land on Ollama's API, nor Ollama's on OpenAI's.
    for (const auto e : {engine_shape::vllm, engine_shape::llamacpp, engine_shape::tgi}) {
      auto copy = pl;
      add_engine_report(copy, kind, e, {1, 2, 3});
      EXPECT_EQ(all_bytes(copy), all_bytes(pl));
    }
    auto openai = make_plan(p, openai_stream());
    const auto before = all_bytes(openai);
    add_engine_report(openai, api::openai_chat, engine_shape::ollama, {1, 2, 3});
    EXPECT_EQ(all_bytes(openai), before);

    add_engine_report(pl, kind, engine_shape::ollama, {12.5, 30, 40.25});
    EXPECT_TRUE(pl.events.back().bytes.ends_with(
        R"("total_duration":82750000,"load_duration":12500000,"prompt_eval_duration":30000000,)"
        R"("eval_duration":40250000}
)")) << pl.events.back().bytes;
    EXPECT_TRUE(in.inspect(pl.events.back().bytes).error.empty());

    // Not streamed: one object with the whole text, the reasoning in `thinking`.
    shape.stream = false;
    p.output_tokens = 60;
    shape.max_tokens = 7;
    pl = make_plan(p, shape);
    EXPECT_TRUE(pl.events.empty());
    EXPECT_TRUE(in.inspect(pl.body).error.empty()) << pl.body;
    EXPECT_NE(pl.body.find(R"("done_reason":"length","done":true)"), std::string::npos);
    EXPECT_NE(pl.body.find(R"("thinking":")" + base::json::escaped(pl.reasoning_text)),
              std::string::npos);
    add_engine_report(pl, kind, engine_shape::ollama, {0, 30, 50});
    EXPECT_NE(pl.body.find(R"("eval_duration":50000000})"), std::string::npos) << pl.body;
    p.output_tokens = 3;
  }
  EXPECT_EQ(error_body(api::ollama_chat, 503), R"({"error":"simulated 503"})");
  EXPECT_EQ(engine_shape_of("ollama"), engine_shape::ollama);
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
