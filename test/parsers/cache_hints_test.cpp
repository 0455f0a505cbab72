// Cache hints written into request bodies: the hint goes in, every other byte stays as sent, and
// a body that already manages its cache (or is not what the hint needs) is left alone.
#include "parsers/cache_hints.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>

namespace tokentap::parsers {
namespace {

// `out` is `in` with exactly `inserted` added at one place.
void expect_only_inserted(const std::string& in, const std::string& out,
                          const std::string& inserted) {
  const auto at = out.find(inserted);
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_EQ(out.substr(0, at) + out.substr(at + inserted.size()), in) << out;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  EXPECT_EQ(p.parse(out).get(doc), simdjson::SUCCESS) << out;
}

TEST(CacheHints, APromptCacheKeyBecomesTheFirstMember) {
  const std::string in =
      "  {\"model\":\"gpt-4o\" , \"messages\":[{\"role\":\"user\",\"content\":\"caf\\u00e9 "
      "\\\"q\\\"\"}],\n \"stream\":true}\n";
  const auto out = with_prompt_cache_key(in, "tokentap-00ff");
  ASSERT_TRUE(out);
  expect_only_inserted(in, *out, "\"prompt_cache_key\":\"tokentap-00ff\",");
  EXPECT_EQ(out->find("  {\"prompt_cache_key\""), 0u);
  // An empty object gets it without a comma.
  EXPECT_EQ(with_prompt_cache_key("{}", "k"),
            std::optional<std::string>("{\"prompt_cache_key\":\"k\"}"));
}

TEST(CacheHints, AClientsOwnPromptCacheKeyIsKept) {
  EXPECT_FALSE(with_prompt_cache_key(R"({"prompt_cache_key":"mine","model":"m"})", "k"));
  EXPECT_FALSE(with_prompt_cache_key(R"({"model":"m","prompt_cache_key":null})", "k"));
  // Only a top-level member counts: one inside a message is text.
  const std::string nested = R"({"messages":[{"role":"user","content":"x","prompt_cache_key":1}]})";
  ASSERT_TRUE(with_prompt_cache_key(nested, "k"));
}

TEST(CacheHints, WhatIsNotAJsonObjectIsLeftAlone) {
  for (const char* body : {"", "[]", "\"text\"", "{\"model\":", "{\"a\":1} trailing", "null"})
    EXPECT_FALSE(with_prompt_cache_key(body, "k")) << body;
  for (const char* body : {"", "[]", "{\"system\":", "{\"system\":\"s\"} x"})
    EXPECT_FALSE(with_system_cache_breakpoint(body)) << body;
}

TEST(CacheHints, AStringSystemPromptBecomesOneTextBlockWithABreakpoint) {
  const std::string in =
      "{\"model\":\"claude\",\"system\": \"Be brief. caf\\u00e9\\n\\\"x\\\"\" ,\"messages\":[]}";
  const auto out = with_system_cache_breakpoint(in);
  ASSERT_TRUE(out);
  EXPECT_EQ(*out,
            "{\"model\":\"claude\",\"system\": [{\"type\":\"text\",\"text\":\"Be brief. "
            "caf\\u00e9\\n\\\"x\\\"\",\"cache_control\":{\"type\":\"ephemeral\"}}] "
            ",\"messages\":[]}");
}

TEST(CacheHints, TheLastSystemBlockGetsTheBreakpoint) {
  const std::string in =
      "{\"system\":[{\"type\":\"text\",\"text\":\"one\"},\n  {\"type\":\"text\",\"text\":\"two\"}  "
      "\n],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  const auto out = with_system_cache_breakpoint(in);
  ASSERT_TRUE(out);
  expect_only_inserted(in, *out, ",\"cache_control\":{\"type\":\"ephemeral\"}");
  EXPECT_NE(out->find("\"two\",\"cache_control\""), std::string::npos) << *out;
  // An empty block gets it without a comma.
  EXPECT_EQ(with_system_cache_breakpoint(R"({"system":[{ }]})"),
            std::optional<std::string>(R"({"system":[{ "cache_control":{"type":"ephemeral"}}]})"));
}

TEST(CacheHints, AClientsOwnBreakpointsOrNoSystemPromptLeaveTheBodyAlone) {
  EXPECT_FALSE(with_system_cache_breakpoint(
      R"({"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"t","cache_control":{"type":"ephemeral"}}]}]})"));
  EXPECT_FALSE(with_system_cache_breakpoint(
      R"({"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}]})"));
  EXPECT_FALSE(with_system_cache_breakpoint(R"({"messages":[{"role":"user","content":"hi"}]})"));
  EXPECT_FALSE(with_system_cache_breakpoint(R"({"system":[]})"));
  EXPECT_FALSE(with_system_cache_breakpoint(R"({"system":42})"));
  // The word in a text is not a breakpoint.
  EXPECT_TRUE(with_system_cache_breakpoint(R"({"system":"explain \"cache_control\" to me"})"));
}

}  // namespace
}  // namespace tokentap::parsers
