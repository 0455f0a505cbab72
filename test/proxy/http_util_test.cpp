#include "proxy/http_util.hpp"

#include <gtest/gtest.h>

#include "parsers/request_inspector.hpp"

namespace tokentap::proxy {
namespace {

TEST(HttpUtil, CopyDropsHopByHopAndConnectionNamedFields) {
  http::fields src;
  src.set("Connection", "keep-alive, X-Hop");
  src.set("Keep-Alive", "timeout=5");
  src.set("X-Hop", "1");
  src.set("TE", "trailers");
  src.set("Transfer-Encoding", "chunked");
  src.set("Proxy-Authorization", "Basic abc");
  src.set("Upgrade", "websocket");
  src.set("Authorization", "Bearer sk-x");
  src.set("Content-Type", "application/json");
  src.set("Host", "client.example");
  http::fields dst;
  copy_end_to_end(src, dst, {"host"});
  EXPECT_EQ(dst["Authorization"], "Bearer sk-x");
  EXPECT_EQ(dst["Content-Type"], "application/json");
  for (const char* gone : {"Connection", "Keep-Alive", "X-Hop", "TE", "Transfer-Encoding",
                           "Proxy-Authorization", "Upgrade", "Host"})
    EXPECT_EQ(dst.find(gone), dst.end()) << gone;
}

TEST(HttpUtil, RedactsKeysInQueries) {
  EXPECT_EQ(redact_target("/v1/models?key=AIzaSECRET&alt=sse"),
            "/v1/models?key=[redacted]&alt=sse");
  EXPECT_EQ(redact_target("/x?API_KEY=s1&api-key=s2&access_token=s3&keys=ok"),
            "/x?API_KEY=[redacted]&api-key=[redacted]&access_token=[redacted]&keys=ok");
  EXPECT_EQ(redact_target("/plain"), "/plain");
  EXPECT_EQ(redact_target("/x?flag&key="), "/x?flag&key=[redacted]");
}

TEST(HttpUtil, SecretHeaders) {
  for (const char* h : {"Authorization", "x-api-key", "API-Key", "Cookie", "set-cookie",
                        "Proxy-Authorization", "X-Goog-Api-Key"})
    EXPECT_TRUE(is_secret_header(h)) << h;
  EXPECT_FALSE(is_secret_header("x-request-id"));
}

TEST(HttpUtil, StreamingContentTypes) {
  EXPECT_TRUE(is_streaming_content_type("text/event-stream; charset=utf-8"));
  EXPECT_TRUE(is_streaming_content_type("Application/X-NDJSON"));
  EXPECT_FALSE(is_streaming_content_type("application/json"));
  EXPECT_FALSE(is_streaming_content_type(""));
}

TEST(HttpUtil, ErrorBodyIsValidJsonWithEscapes) {
  const auto body = error_body(502, "upstream_connect_error", "can't \"reach\"\n\x01 it");
  parsers::request_inspector in;
  const auto info = in.inspect(body);
  EXPECT_TRUE(info.error.empty()) << body;
  EXPECT_NE(body.find(R"("code":502)"), std::string::npos);
  EXPECT_NE(body.find(R"(can't \"reach\"\n\u0001 it)"), std::string::npos) << body;
}

}  // namespace
}  // namespace tokentap::proxy
