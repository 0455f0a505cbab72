#include "parsers/request_inspector.hpp"

#include <gtest/gtest.h>

#include "test/support/alloc_count.hpp"
#include "test/support/json_keys.hpp"

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

// ---- key order: a request reads the same whatever the order of its keys

std::string describe(const request_info& i) {
  std::string out = "model=" + i.model + " stream=" + std::to_string(i.stream) +
                    " stream_given=" + std::to_string(i.stream_given) +
                    " usage=" + std::to_string(i.include_usage) +
                    " reasoning=" + std::to_string(i.reasoning) +
                    " max=" + (i.max_tokens ? std::to_string(*i.max_tokens) : "-") +
                    " messages=" + std::to_string(i.messages) +
                    " chars=" + std::to_string(i.prompt_chars) + " error=" + std::string(i.error);
  for (const auto& d : i.digests)
    out += " [" + std::string(d.role) + " " + std::to_string(d.hash) + " " +
           std::to_string(d.chain) + " " + std::to_string(d.chars) + " " +
           std::to_string(d.chars_before) + "]";
  return out + " canonical=" + i.canonical;
}

const char* const key_order_bodies[] = {
    // OpenAI chat with tools (nested definitions), parts, usage option and both max fields.
    R"({"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"max_tokens":10,"max_completion_tokens":77,)"
    R"("tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}}],)"
    R"("messages":[{"role":"system","content":"be brief"},{"content":[{"text":"hello","type":"text"},{"type":"image_url","image_url":{"url":"x"}}],"role":"user"},)"
    R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"sunny"}]})",
    // Anthropic with system blocks, thinking, a thinking block in history.
    R"({"model":"claude-x","max_tokens":4096,"thinking":{"budget_tokens":1024,"type":"enabled"},"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],)"
    R"("messages":[{"role":"user","content":"abc"},{"role":"assistant","content":[{"signature":"s","thinking":"hmm","type":"thinking"},{"type":"text","text":"ok"}]}]})",
    // Responses API: input items and instructions-like fields.
    R"({"model":"o4","reasoning":{"effort":"low"},"max_output_tokens":50,"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":false})",
    // Ollama's /api/chat: no `stream` key (it streams), its budget in options.num_predict.
    R"({"model":"llama3.2","options":{"temperature":0,"num_predict":12},"messages":[{"role":"system","content":"sys"},{"role":"user","content":"why"}],"keep_alive":"5m"})",
};

TEST(RequestInspectorKeyOrder, EveryFieldAndDigestIsTheSameInAnyKeyOrder) {
  for (const char* body : key_order_bodies) {
    for (const auto opts :
         {inspect_options{}, inspect_options{.digests = true, .canonical = true}}) {
      request_inspector in;
      const auto want = describe(in.inspect(body, opts));
      EXPECT_EQ(want.find("error= "), want.find("error=")) << want;  // no error
      for (const auto order :
           {test::key_order::sorted, test::key_order::reversed, test::key_order::shuffled}) {
        for (std::uint64_t seed = 1; seed <= (order == test::key_order::shuffled ? 5u : 1u);
             ++seed) {
          const auto reordered = test::reorder_keys(body, order, seed);
          ASSERT_EQ(reordered.size(), std::string_view(body).size());
          EXPECT_EQ(describe(in.inspect(reordered, opts)), want) << reordered;
        }
      }
    }
  }
}

// Which max_tokens field counts does not depend on which comes first; `messages` and Responses'
// `input` keep one order in the digests.
TEST(RequestInspectorKeyOrder, PrecedenceBetweenFieldsThatSayTheSame) {
  request_inspector in;
  EXPECT_EQ(in.inspect(R"({"max_tokens":5,"max_completion_tokens":7})").max_tokens, 7);
  EXPECT_EQ(in.inspect(R"({"max_completion_tokens":7,"max_tokens":5})").max_tokens, 7);
  EXPECT_EQ(in.inspect(R"({"max_output_tokens":9,"max_tokens":5})").max_tokens, 5);
  // Ollama's options.num_predict counts when no top-level field says it; -1 (no limit) is none.
  EXPECT_EQ(in.inspect(R"({"options":{"num_predict":12},"max_tokens":5})").max_tokens, 5);
  EXPECT_EQ(in.inspect(R"({"max_tokens":5,"options":{"num_predict":12}})").max_tokens, 5);
  EXPECT_EQ(in.inspect(R"({"options":{"num_predict":12}})").max_tokens, 12);
  EXPECT_FALSE(in.inspect(R"({"options":{"num_predict":-1}})").max_tokens);
  EXPECT_FALSE(in.inspect(R"({"options":{"num_predict":12}})").stream_given);
  EXPECT_TRUE(in.inspect(R"({"stream":false})").stream_given);
  const auto a = in.inspect(R"({"messages":[{"role":"user","content":"m"}],"input":"i"})",
                            {.digests = true, .canonical = true});
  const auto b = in.inspect(R"({"input":"i","messages":[{"role":"user","content":"m"}]})",
                            {.digests = true, .canonical = true});
  EXPECT_EQ(a.canonical, b.canonical);
  EXPECT_EQ(a.canonical, "user\x1fm\x1euser\x1fi\x1e");
}

// Found by fuzz_request_inspector (regressions/request_inspector-whitespace-after-number-in-tools):
// a number's raw token carries the whitespace after it, so reordered tool definitions hashed
// differently.  The canonical form has none, whatever the spacing or the order.
TEST(RequestInspectorKeyOrder, ToolDefinitionsHashTheSameWhateverTheirSpacingAndOrder) {
  request_inspector in;
  const auto a = in.inspect(R"({"tools":[{"a":1 , "b":true , "c":null }]})", {.digests = true});
  const auto b = in.inspect(R"({"tools":[{"c":null,"b":true,"a":1}]})", {.digests = true});
  ASSERT_EQ(a.digests.size(), 1u);
  ASSERT_EQ(b.digests.size(), 1u);
  EXPECT_EQ(a.digests[0].hash, b.digests[0].hash);
  EXPECT_EQ(a.digests[0].chars, b.digests[0].chars);
}

// ---- long conversations

std::string conversation(std::size_t messages, std::size_t chars_each) {
  std::string body = R"({"model":"m","stream":true,"messages":[{"role":"system","content":"sys"})";
  const std::string text(chars_each, 'w');
  for (std::size_t i = 0; i < messages; ++i)
    body += std::string(R"(,{"role":")") + (i % 2 ? "assistant" : "user") + R"(","content":")" +
            text + R"("})";
  return body + "]}";
}

// A conversation past 1 MiB (~250 k tokens: where context truncation and prefix-cache misses
// happen) is inspected whole, up to the inspector's limit.
TEST(RequestInspectorLongConversations, SixteenMebibytesAreInspected) {
  const auto body = conversation(4096, 4100);
  ASSERT_GT(body.size(), 16u << 20);
  request_inspector in(32u << 20);
  const auto info = in.inspect(body, {.digests = true});
  EXPECT_TRUE(info.error.empty()) << info.error;
  EXPECT_EQ(info.model, "m");
  EXPECT_EQ(info.messages, 4097u);
  EXPECT_EQ(info.digests.size(), 4097u);
  request_inspector small(body.size() - 1);
  EXPECT_EQ(small.inspect(body).error, "body too large to inspect");
}

// Inspecting allocates nothing per message without digests, and with them only the digest rows
// (vectors that double: a few more allocations for 16x the messages, not 15x more).
TEST(RequestInspectorPerf, NoAllocationPerMessageBeyondTheDigests) {
  if (!test::allocations_counted()) GTEST_SKIP() << "allocations are not counted in this build";
  const auto small = conversation(256, 64), large = conversation(4096, 64);
  request_inspector in;
  const auto count = [&](const std::string& body, inspect_options opts) {
    in.inspect(body, opts);  // the thread's parser grows once
    const auto before = test::thread_allocations();
    const auto info = in.inspect(body, opts);
    EXPECT_TRUE(info.error.empty());
    return test::thread_allocations() - before;
  };
  EXPECT_EQ(count(large, {}), count(small, {}));
  const auto with_small = count(small, {.digests = true});
  const auto with_large = count(large, {.digests = true});
  EXPECT_LE(with_large, with_small + 2 * 5) << with_small;  // log2(16) more doublings, 2 vectors
}

}  // namespace
}  // namespace tokentap::parsers
