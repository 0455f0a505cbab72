// The cache hints hook in the request phase: an OpenAI-compatible request gets its
// conversation's prompt_cache_key (the same for every turn of one conversation), an Anthropic
// request a cache breakpoint on its last system block, and a request that already says what to
// cache, or is neither, is forwarded as the client sent it.
#include "hooks/govern/cache_hints_hook.hpp"

#include <gtest/gtest.h>

#include <string>

#include "hooks/hook_chain.hpp"
#include "parsers/request_inspector.hpp"
#include "test/hooks/chain_helpers.hpp"

namespace tokentap::hooks {
namespace {

// The body the chain would forward for `body` sent to `target` (none: the client's).
std::optional<std::string> forwarded(const std::string& target, const std::string& body) {
  config::config cfg;
  hook_chain_factory f(cfg, {std::make_shared<cache_hints_hook_factory>()});
  auto tap = f.create();
  parsers::request_inspector inspector;
  const auto info = inspector.inspect(body, {.digests = true});
  auto r = chain_test::request(0);
  r.target = target;
  r.body = body;
  r.conversation = info.digests;
  request_decision d;
  tap->decide(r, d);
  EXPECT_FALSE(d.stop);
  return d.body;
}

const std::string first_turn =
    R"({"model":"m","messages":[{"role":"system","content":"You are terse."},)"
    R"({"role":"user","content":"Hi"}]})";
const std::string second_turn =
    R"({"model":"m","messages":[{"role":"system","content":"You are terse."},)"
    R"({"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},)"
    R"({"role":"user","content":"And?"}]})";

TEST(CacheHintsHook, EveryTurnOfAConversationGetsItsOnePromptCacheKey) {
  const auto first = forwarded("/v1/chat/completions", first_turn);
  const auto second = forwarded("/v1/chat/completions?x=1", second_turn);
  ASSERT_TRUE(first && second);
  const auto key_of = [](const std::string& body) {
    const auto at = body.find("\"prompt_cache_key\":\"");
    return at == std::string::npos ? std::string() : body.substr(at + 20, 25);
  };
  EXPECT_TRUE(key_of(*first).starts_with("tokentap-")) << *first;
  EXPECT_EQ(key_of(*first), key_of(*second));
  // Everything else stays byte for byte: the key is the one thing added.
  EXPECT_EQ(first->size(), first_turn.size() + std::string(",\"prompt_cache_key\":\"\"").size() +
                               key_of(*first).size());
  EXPECT_NE(key_of(*first), key_of(*forwarded("/v1/responses", R"({"input":[{"role":"user",)"
                                                               R"("content":"Other"}]})")));
}

TEST(CacheHintsHook, AnAnthropicRequestGetsABreakpointOnItsLastSystemBlock) {
  const auto body = forwarded(
      "/v1/messages",
      R"({"model":"c","system":[{"type":"text","text":"rules"}],"messages":[{"role":"user","content":"Hi"}]})");
  ASSERT_TRUE(body);
  EXPECT_NE(body->find(R"({"type":"text","text":"rules","cache_control":{"type":"ephemeral"}})"),
            std::string::npos)
      << *body;
}

TEST(CacheHintsHook, WhatAlreadySaysWhatToCacheOrIsNoChatIsForwardedAsSent) {
  EXPECT_FALSE(
      forwarded("/v1/chat/completions",
                R"({"prompt_cache_key":"mine","messages":[{"role":"user","content":"Hi"}]})")
          .has_value());
  EXPECT_FALSE(forwarded("/v1/embeddings", first_turn).has_value());
  EXPECT_FALSE(forwarded("/v1/chat/completions", "{}").has_value());  // no conversation
}

}  // namespace
}  // namespace tokentap::hooks
