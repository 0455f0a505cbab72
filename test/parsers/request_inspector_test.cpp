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

// Found by fuzz_request_inspector (test/fuzz/regressions/request_inspector-*).
TEST(RequestInspector, PromptCharsDoNotDependOnDigests) {
  const std::string body =
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"ab","content":"c"},)"
      R"({"text":"de"}]}]})";
  request_inspector a, b;
  const auto plain = a.inspect(body);
  const auto digests = b.inspect(body, {.digests = true});
  EXPECT_EQ(plain.prompt_chars, 5u);
  EXPECT_EQ(digests.prompt_chars, 5u);
  ASSERT_EQ(digests.digests.size(), 1u);
  EXPECT_EQ(digests.digests[0].chars, 7u);  // the digest hashes the parts joined by newlines
}

TEST(RequestInspector, MalformedToolsAreInvalidJsonNotASilentStop) {
  request_inspector in;
  const auto info = in.inspect(
      R"({"tools":[{"parameters":{"a":{x:""[1,2]}}}],"max_output_tokens":5})", {.digests = true});
  EXPECT_EQ(info.error, "invalid JSON");
}

// Found by fuzz_request_inspector (regressions/request_inspector-raw-token-not-consumed): the
// hashing fast path peeked at a string without consuming it, so it met a later JSON error
// differently from the unescaping path.
TEST(RequestInspector, FastAndUnescapingPathsAgreeOnErrors) {
  const std::string body = R"({"model":"m","prompt":"a","prompt":"b":"c":5}})";
  request_inspector a, b;
  const auto fast = a.inspect(body, {.digests = true});
  const auto slow = b.inspect(body, {.digests = true, .canonical = true});
  EXPECT_EQ(fast.error, slow.error);
  EXPECT_EQ(fast.error, "invalid JSON");
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

namespace tokentap::parsers {
namespace {

std::vector<message_digest> digests(std::string_view body) {
  request_inspector in;
  return in.inspect(body, {.digests = true}).digests;
}

TEST(RequestInspectorDigests, CanonicalFormIgnoresKeyOrderWhitespaceAndEscapes) {
  const auto a = digests(
      R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi \u00e9"}]})");
  const auto b = digests(
      "{ \"messages\" : [ {\"content\":\"Be brief.\", \"role\":\"system\"},\n "
      "{\"content\":[{\"type\":\"text\",\"text\":\"Hi \xC3\xA9\"}],\"role\":\"user\"} ], "
      "\"model\":\"m\" }");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[0].hash, b[0].hash);
  EXPECT_EQ(a[1].chain, b[1].chain);
  EXPECT_EQ(a[1].role, "user");
  EXPECT_EQ(a[1].chars_before, 9u);
}

TEST(RequestInspectorDigests, PartsHashLikeTheJoinedStringAcrossBlockBoundaries) {
  const std::string a(37, 'a'), b(50, 'b');
  const auto joined =
      digests(R"({"messages":[{"role":"user","content":")" + a + "\\n" + b + R"("}]})");
  const auto parts = digests(R"({"messages":[{"role":"user","content":[{"type":"text","text":")" +
                             a + R"("},{"type":"text","text":")" + b + R"("}]}]})");
  const auto escaped =
      digests(R"({"messages":[{"role":"user","content":")" + a + "\\u000a" + b + R"("}]})");
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].hash, parts[0].hash);
  EXPECT_EQ(joined[0].hash, escaped[0].hash);
  EXPECT_NE(
      joined[0].hash,
      digests(R"({"messages":[{"role":"user","content":")" + b + "\\n" + a + R"("}]})")[0].hash);
}

TEST(RequestInspectorDigests, ChainsShareExactlyTheCommonPrefix) {
  const auto turn1 = digests(
      R"({"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"}]})");
  const auto turn2 = digests(
      R"({"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"q2"}]})");
  const auto edited = digests(
      R"({"messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"A1"},{"role":"user","content":"q2"}]})");
  EXPECT_EQ(turn2[1].chain, turn1[1].chain);
  EXPECT_NE(edited[1].chain, turn1[1].chain);
  EXPECT_EQ(edited[0].chain, turn1[0].chain);
  EXPECT_NE(edited[2].chain, turn2[2].chain);  // everything after a change differs
}

TEST(RequestInspectorDigests, AnthropicSystemAndToolsComeFirstWherever) {
  const auto a = digests(
      R"({"messages":[{"role":"user","content":"x"}],"system":"S","tools":[{"name":"t","input_schema":{"type":"object"}}]})");
  const auto b = digests(
      R"({"tools":[{"name":"t","input_schema":{"type":"object"}}],"system":[{"type":"text","text":"S"}],"messages":[{"role":"user","content":"x"}]})");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].role, "tools");
  EXPECT_EQ(a[1].role, "system");
  EXPECT_EQ(a[2].chain, b[2].chain);
}

}  // namespace
}  // namespace tokentap::parsers
