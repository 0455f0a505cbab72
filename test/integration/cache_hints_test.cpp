// The cache hints hook through the real proxy, against an upstream that records what it
// received: opt-in, every turn of a conversation carries one prompt_cache_key, an Anthropic
// system prompt gets a breakpoint, and the rest of the body arrives byte for byte.
#include <gtest/gtest.h>

#include <string>

#include "test/support/canned_upstream.hpp"
#include "test/support/http_client.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

const std::string chunk =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";

canned_upstream recorder() {
  return canned_upstream({{"/v1/chat/completions", {"text/event-stream", {chunk}}},
                          {"/v1/messages", {"text/event-stream", {"event: ping\ndata: {}\n\n"}}}});
}

std::function<void(config::config&)> to(const canned_upstream& u, bool hints) {
  return [&u, hints](config::config& cfg) {
    config::set_single_upstream(cfg, "http://127.0.0.1:" + std::to_string(u.port()));
    if (hints) cfg.hooks = {"timing", "cache_hints"};
  };
}

request_options chat(const std::string& body, const std::string& target = "/v1/chat/completions") {
  request_options o;
  o.target = target;
  o.body = body;
  o.headers = {{"content-type", "application/json"}};
  return o;
}

std::string key_in(const std::string& body) {
  const std::string k = "{\"prompt_cache_key\":\"";
  if (body.rfind(k, 0) != 0) return {};
  return body.substr(k.size(), body.find('"', k.size()) - k.size());
}

std::string content_length(const std::string& head) {
  const auto k = head.find("Content-Length: ");
  return k == std::string::npos ? "" : head.substr(k + 16, head.find('\r', k) - k - 16);
}

TEST(CacheHintsHook, EveryTurnOfAConversationCarriesOneKeyAndTheRestIsUntouched) {
  auto up = recorder();
  stack s(to(up, true));
  const std::string first =
      R"({"model":"m", "stream":true,"messages":[{"role":"system","content":"Be terse."},)"
      R"({"role":"user","content":"caf\u00e9?"}]})";
  const std::string second =
      R"({"model":"m","stream":true,"messages":[{"role":"system","content":"Be terse."},)"
      R"({"role":"user","content":"caf\u00e9?"},{"role":"assistant","content":"yes"},)"
      R"({"role":"user","content":"more"}]})";
  const std::string other =
      R"({"model":"m","stream":true,"messages":[{"role":"user","content":"other"}]})";
  for (const auto& b : {first, second, other}) ASSERT_EQ(fetch(s.proxy_ep(), chat(b)).status, 200);
  const auto got = up.received();
  ASSERT_EQ(got.size(), 3u);
  const auto k1 = key_in(got[0].body), k2 = key_in(got[1].body), k3 = key_in(got[2].body);
  EXPECT_EQ(k1.rfind("tokentap-", 0), 0u) << got[0].body;
  EXPECT_EQ(k1, k2);  // one conversation, one key
  EXPECT_NE(k1, k3);
  const std::string inserted = "\"prompt_cache_key\":\"" + k1 + "\",";
  EXPECT_EQ(got[0].body, "{" + inserted + first.substr(1));
  EXPECT_EQ(content_length(got[0].head), std::to_string(got[0].body.size()));
  // A client's own key is kept, and the body is exactly the client's.
  const std::string own = R"({"prompt_cache_key":"mine","model":"m","messages":[]})";
  ASSERT_EQ(fetch(s.proxy_ep(), chat(own)).status, 200);
  EXPECT_EQ(up.received().back().body, own);
}

TEST(CacheHintsHook, AnAnthropicSystemPromptGetsABreakpoint) {
  auto up = recorder();
  stack s(to(up, true));
  const std::string body =
      R"({"model":"claude","max_tokens":64,"system":[{"type":"text","text":"long rules"}],)"
      R"("messages":[{"role":"user","content":"hi"}]})";
  ASSERT_EQ(fetch(s.proxy_ep(), chat(body, "/v1/messages")).status, 200);
  const auto got = up.received().back();
  EXPECT_EQ(
      got.body,
      R"({"model":"claude","max_tokens":64,"system":[{"type":"text","text":"long rules",)"
      R"("cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]})");
  EXPECT_EQ(content_length(got.head), std::to_string(got.body.size()));
}

TEST(CacheHintsHook, OffByDefault) {
  auto up = recorder();
  stack s(to(up, false));
  const std::string body =
      R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]})";
  ASSERT_EQ(fetch(s.proxy_ep(), chat(body)).status, 200);
  EXPECT_EQ(up.received().back().body, body);
}

}  // namespace
}  // namespace tokentap::test
