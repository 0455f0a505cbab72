#include "proxy/http_util.hpp"

#include <gtest/gtest.h>

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/serializer.hpp>

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

// What Beast's own serializer writes for the head of a message with these start line and fields.
template <bool IsRequest>
std::string beast_head(const http::header<IsRequest>& h) {
  http::message<IsRequest, http::empty_body> m(h);
  http::serializer<IsRequest, http::empty_body> sr{m};
  sr.split(true);
  std::string out;
  boost::beast::error_code ec;
  while (!sr.is_header_done()) {
    sr.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
      for (const auto b : boost::beast::buffers_range_ref(buffers))
        out.append(static_cast<const char*>(b.data()), b.size());
      sr.consume(boost::beast::buffer_bytes(buffers));
    });
    if (ec) ADD_FAILURE() << ec.message();
  }
  return out;
}

template <bool IsRequest>
std::string our_head(const http::header<IsRequest>& h) {
  std::string out = "kept";  // appended to, not replaced
  append_head(out, h);
  EXPECT_EQ(out.substr(0, 4), "kept");
  return out.substr(4);
}

void add_fields(http::fields& f) {
  f.set(http::field::host, "upstream.example:8000");
  f.insert("X-Custom-Case", "MiXeD");
  f.insert("x-dup", "one");
  f.insert("X-Dup", "two");
  f.insert("X-Empty", "");
  f.set(http::field::content_type, "application/json; charset=utf-8");
  f.insert("X-Long", std::string(3000, 'v'));
  f.set(http::field::content_length, "42");
}

TEST(HttpUtil, RequestHeadsAreTheBytesBeastWrites) {
  for (const char* method : {"POST", "GET", "HEAD", "FROBNICATE", "purge"}) {
    for (unsigned version : {10u, 11u}) {
      for (const char* target : {"/v1/chat/completions", "/x?key=1&a=%20b", "*"}) {
        http::request_header<> h;
        h.method_string(method);
        h.target(target);
        h.version(version);
        add_fields(h);
        const auto want = beast_head(h);
        EXPECT_EQ(our_head(h), want) << method << " " << target << " " << version;
        EXPECT_NE(want.find(std::string(method) + " " + target), std::string::npos);
      }
    }
  }
  http::request_header<> bare;  // no fields at all
  bare.method(http::verb::get);
  bare.target("/");
  EXPECT_EQ(our_head(bare), "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(our_head(bare), beast_head(bare));
}

TEST(HttpUtil, ResponseHeadsAreTheBytesBeastWrites) {
  for (unsigned code : {200u, 101u, 204u, 299u, 404u, 429u, 503u, 599u}) {
    for (const char* reason : {"", "OK", "Custom Reason"}) {
      for (unsigned version : {10u, 11u}) {
        http::response_header<> h;
        h.result(code);
        h.reason(reason);
        h.version(version);
        add_fields(h);
        h.set("X-Accel-Buffering", "no");
        EXPECT_EQ(our_head(h), beast_head(h)) << code << " '" << reason << "' " << version;
      }
    }
  }
  // As the proxy builds a client's head: copied fields, then its framing.
  http::response_header<> up;
  up.result(http::status::ok);
  add_fields(up);
  up.set(http::field::connection, "keep-alive, X-Dup");
  http::response<http::empty_body> h;  // chunked() and keep_alive() are the message's
  h.result(up.result_int());
  h.reason(up.reason());
  copy_end_to_end(up, h, {"content-length"});
  h.chunked(true);
  h.keep_alive(false);
  const http::response_header<>& fields = h;
  const auto head = our_head(fields);
  EXPECT_EQ(head, beast_head(fields));
  EXPECT_EQ(head.substr(0, 17), "HTTP/1.1 200 OK\r\n");
  EXPECT_NE(head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("X-Dup"), std::string::npos) << head;
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
}

}  // namespace
}  // namespace tokentap::proxy
