#include "net/http_rules.hpp"

#include <gtest/gtest.h>

#include <string>

#include "parsers/request_inspector.hpp"

namespace tokentap::net {
namespace {

TEST(HttpRules, HopByHopFields) {
  for (const char* h :
       {"Connection", "keep-alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
        "Upgrade", "proxy-authenticate", "Proxy-Authorization"})
    EXPECT_TRUE(is_hop_by_hop(h)) << h;
  for (const char* h : {"content-type", "x-request-id", "connectionx", "t", ""})
    EXPECT_FALSE(is_hop_by_hop(h)) << h;
}

TEST(HttpRules, RedactsKeysInQueries) {
  EXPECT_EQ(redact_target("/v1/models?key=AIzaSECRET&alt=sse"),
            "/v1/models?key=[redacted]&alt=sse");
  EXPECT_EQ(redact_target("/x?API_KEY=s1&api-key=s2&access_token=s3&keys=ok"),
            "/x?API_KEY=[redacted]&api-key=[redacted]&access_token=[redacted]&keys=ok");
  EXPECT_EQ(redact_target("/plain"), "/plain");
  EXPECT_EQ(redact_target("/x?flag&key="), "/x?flag&key=[redacted]");
}

TEST(HttpRules, SecretHeaders) {
  for (const char* h : {"Authorization", "x-api-key", "API-Key", "Cookie", "set-cookie",
                        "Proxy-Authorization", "X-Goog-Api-Key"})
    EXPECT_TRUE(is_secret_header(h)) << h;
  EXPECT_FALSE(is_secret_header("x-request-id"));
}

TEST(HttpRules, StreamingContentTypes) {
  EXPECT_TRUE(is_streaming_content_type("text/event-stream; charset=utf-8"));
  EXPECT_TRUE(is_streaming_content_type("Application/X-NDJSON"));
  EXPECT_FALSE(is_streaming_content_type("application/json"));
  EXPECT_FALSE(is_streaming_content_type(""));
}

TEST(HttpRules, ErrorBodyIsValidJsonWithEscapes) {
  const auto body = error_body(502, "upstream_connect_error", "can't \"reach\"\n\x01 it");
  parsers::request_inspector in;
  const auto info = in.inspect(body);
  EXPECT_TRUE(info.error.empty()) << body;
  EXPECT_NE(body.find(R"("code":502)"), std::string::npos);
  EXPECT_NE(body.find(R"(can't \"reach\"\n\u0001 it)"), std::string::npos) << body;
}

// Each provider's SDK finds type and message where it looks for them.
TEST(HttpRules, ErrorBodiesAreShapedLikeTheProvidersOfThePath) {
  const auto anthropic = error_body(429, "rate_limit_error", "slow down", "/v1/messages");
  EXPECT_EQ(anthropic,
            R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down",)"
            R"("source":"tokentap"}})"
            "\n");
  const auto ollama = error_body(503, "overloaded", "busy", "/api/chat");
  EXPECT_EQ(ollama, R"({"error":"busy","error_type":"overloaded","source":"tokentap"})"
                    "\n");
  EXPECT_EQ(error_body(503, "overloaded", "busy", "/generate_stream"), ollama);
  const auto openai = error_body(404, "no_route", "none", "/v1/chat/completions");
  EXPECT_EQ(openai, R"({"error":{"type":"no_route","message":"none","code":404,)"
                    R"("source":"tokentap"}})"
                    "\n");
  EXPECT_EQ(error_body(404, "no_route", "none", "/somewhere"), openai);
  EXPECT_EQ(error_body(404, "no_route", "none"), openai);
}

}  // namespace
}  // namespace tokentap::net
