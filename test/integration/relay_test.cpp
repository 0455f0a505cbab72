// The proxy relays real responses from the real simulator byte for byte, streamed as they arrive.
#include <gtest/gtest.h>

#include <sys/socket.h>

#include <cstdio>
#include <thread>

#include <boost/asio/write.hpp>

#include "test/support/http_client.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

request_options stream_request(int tokens, int ttft_ms = 20, int itl_ms = 5) {
  return sim_stream(tokens, ttft_ms, itl_ms, "relay me", 7);
}

TEST(Relay, StreamedResponseIsByteExactAndUnbuffered) {
  stack s;
  const auto opts = stream_request(40, 50, 25);
  const auto direct = fetch(s.sim_ep(), opts);
  const auto proxied = fetch(s.proxy_ep(), opts);
  ASSERT_TRUE(direct.complete);
  ASSERT_TRUE(proxied.complete) << proxied.error.message();
  EXPECT_EQ(proxied.status, 200);
  EXPECT_EQ(proxied.body, direct.body);
  EXPECT_EQ(sse_data(proxied.body).back(), "[DONE]");
  EXPECT_EQ(proxied.header("x-accel-buffering"), "no");
  EXPECT_EQ(proxied.header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(proxied.header("x-sim-content-fnv"), direct.header("x-sim-content-fnv"));
  // Unbuffered: 47 tokens 25 ms apart arrive as many separate reads spread over the stream,
  // not in one lump at the end.
  ASSERT_GE(proxied.chunk_ms.size(), 20u);
  EXPECT_GT(proxied.chunk_ms.back() - proxied.chunk_ms.front(), 46 * 25 * 0.8);
}

TEST(Relay, PlainJsonResponsesKeepContentLength) {
  stack s;
  request_options o;
  o.body = chat_body(false);
  o.headers = {{"x-sim-tokens", "30"}, {"x-sim-ttft-ms", "5"}, {"x-sim-itl-ms", "0"}};
  const auto direct = fetch(s.sim_ep(), o);
  const auto proxied = fetch(s.proxy_ep(), o);
  ASSERT_TRUE(proxied.complete);
  EXPECT_EQ(proxied.status, 200);
  EXPECT_EQ(proxied.body, direct.body);
  EXPECT_EQ(proxied.header("content-length"), std::to_string(direct.body.size()));
  EXPECT_EQ(proxied.header("transfer-encoding"), "");
  EXPECT_EQ(proxied.header("x-accel-buffering"), "");
}

TEST(Relay, AnthropicMessagesStream) {
  stack s;
  request_options o;
  o.target = "/v1/messages";
  o.body =
      R"({"model":"claude-sim","max_tokens":500,"stream":true,"thinking":{"type":"enabled","budget_tokens":100},"messages":[{"role":"user","content":"hi"}]})";
  o.headers = {{"x-sim-tokens", "12"}, {"x-sim-reasoning-tokens", "6"}, {"x-sim-itl-ms", "2"}};
  const auto direct = fetch(s.sim_ep(), o);
  const auto proxied = fetch(s.proxy_ep(), o);
  ASSERT_TRUE(proxied.complete);
  EXPECT_EQ(proxied.body, direct.body);
  EXPECT_NE(proxied.body.find("event: message_stop"), std::string::npos);
}

TEST(Relay, RequestHeadersFollowProxyRules) {
  stack s;
  request_options o;
  o.method = "GET";
  o.target = "/sim/echo?x=1";
  o.headers = {{"Connection", "keep-alive, X-Hop"}, {"X-Hop", "drop me"},
               {"Keep-Alive", "timeout=5"},         {"TE", "trailers"},
               {"Accept-Encoding", "gzip, br"},     {"X-Forwarded-For", "203.0.113.9"},
               {"Authorization", "Bearer sk-test"}};
  const auto r = fetch(s.proxy_ep(), o);
  ASSERT_EQ(r.status, 200);
  const auto& head = r.body;
  EXPECT_NE(head.find("request-target: /sim/echo?x=1\n"), std::string::npos) << head;
  EXPECT_NE(head.find("Host: 127.0.0.1:" + std::to_string(s.sim_ep().port())), std::string::npos);
  EXPECT_NE(head.find("X-Forwarded-For: 203.0.113.9, 127.0.0.1\n"), std::string::npos) << head;
  EXPECT_NE(head.find("X-Forwarded-Proto: http\n"), std::string::npos);
  EXPECT_NE(head.find("Accept-Encoding: identity\n"), std::string::npos);
  EXPECT_NE(head.find("Authorization: Bearer sk-test\n"), std::string::npos);
  EXPECT_EQ(head.find("X-Hop"), std::string::npos) << head;
  EXPECT_EQ(head.find("Keep-Alive"), std::string::npos);
  EXPECT_EQ(head.find("TE:"), std::string::npos);
}

TEST(Relay, BasePathOfTheUpstreamIsPrepended) {
  stack s([](config::config& cfg) { cfg.upstreams[0].endpoints.at(0).base_path = "/sim"; });
  request_options o;
  o.method = "GET";
  o.target = "/echo";
  const auto r = fetch(s.proxy_ep(), o);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("request-target: /sim/echo\n"), std::string::npos) << r.body;
}

TEST(Relay, ChunkedRequestBodyIsForwarded) {
  stack s;
  connection c(s.proxy_ep());
  const std::string body = chat_body(false, "chunked upload");
  std::string raw =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "x-sim-tokens: 3\r\nx-sim-ttft-ms: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const auto half = body.size() / 2;
  char size_line[32];
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", half);
  raw += size_line + body.substr(0, half) + "\r\n";
  std::snprintf(size_line, sizeof size_line, "%zx\r\n", body.size() - half);
  raw += size_line + body.substr(half) + "\r\n0\r\n\r\n";
  c.send_raw(raw);
  const auto r = c.read_response();
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  request_options o;
  o.body = body;
  o.headers = {{"x-sim-tokens", "3"}, {"x-sim-ttft-ms", "1"}};
  EXPECT_EQ(r.body, fetch(s.sim_ep(), o).body);  // same body hash -> same generated answer
}

TEST(Relay, KeepAliveOnBothSides) {
  stack s;
  connection c(s.proxy_ep());
  for (int i = 0; i < 5; ++i) {
    auto o = stream_request(5, 1, 1);
    const auto r = c.request(o);
    ASSERT_TRUE(r.complete) << i << ": " << r.error.message();
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(s.sim->stats().connections.load(), 1u);
  EXPECT_EQ(s.proxy->stats().upstream_connects.value(), 1u);
  EXPECT_EQ(s.proxy->stats().upstream_reuses.value(), 4u);
}

TEST(Relay, UpstreamRestartBetweenRequestsIsInvisible) {
  // A pooled connection whose upstream went away is detected (or retried) and replaced.
  stack s;
  const auto port = s.sim_ep().port();
  ASSERT_EQ(fetch(s.proxy_ep(), stream_request(3, 1, 1)).status, 200);
  s.sim.reset();
  sim::server_options so;
  so.host = "127.0.0.1";
  so.port = port;
  s.sim = std::make_unique<sim::server>(so);
  s.sim->start();
  const auto r = fetch(s.proxy_ep(), stream_request(3, 1, 1));
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(s.proxy->stats().upstream_connects.value(), 2u);
}

TEST(Relay, HeadResponseHasNoBodyAndTheConnectionStaysUsable) {
  stack s;
  connection c(s.proxy_ep());
  c.send_raw("HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto head = c.read_response(std::chrono::milliseconds(5000), /*head=*/true);
  ASSERT_TRUE(head.complete) << head.error.message();
  EXPECT_EQ(head.status, 404);  // the simulator serves GET only
  EXPECT_FALSE(head.header("content-length").empty());
  EXPECT_TRUE(head.body.empty());
  request_options o;
  o.method = "GET";
  o.target = "/v1/models";
  const auto next = c.request(o);
  ASSERT_TRUE(next.complete);
  EXPECT_EQ(next.status, 200);
  EXPECT_NE(next.body.find("sim-small"), std::string::npos);
}

TEST(Relay, SlowClientPausesTheUpstream) {
  // Backpressure, not buffering: while the client does not read, the proxy stops reading the
  // upstream, so what the simulator manages to send plateaus far below the stream's size.
  stack s;
  connection c(s.proxy_ep());
  const int small = 64 * 1024;
  ::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  request_options o;
  o.body = chat_body(true, "flood");
  o.headers = {{"x-sim-tokens", "200000"}, {"x-sim-ttft-ms", "0"}, {"x-sim-itl-ms", "0"}};
  c.send_raw(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "x-sim-tokens: 200000\r\nx-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\nContent-Length: " +
      std::to_string(o.body.size()) + "\r\n\r\n" + o.body);
  // Wait for the plateau (the socket buffers on the way filling up), however slow the build is
  // (sanitizers): what was sent stops changing.
  std::uint64_t sent_a = 0;
  for (int i = 0, stable = 0; i < 150 && stable < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto now = s.sim->stats().bytes_sent.load();
    stable = now > 0 && now == sent_a ? stable + 1 : 0;
    sent_a = now;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto sent_b = s.sim->stats().bytes_sent.load();
  EXPECT_GT(sent_a, 0u);
  EXPECT_EQ(sent_a, sent_b) << "the upstream kept sending while the client read nothing";
  EXPECT_EQ(s.sim->stats().streams_completed.load(), 0u);

  const auto r = c.read_response(std::chrono::milliseconds(30000));
  ASSERT_TRUE(r.complete) << r.error.message();
  EXPECT_GT(r.body.size(), 2 * sent_a) << "the stream must be larger than what the buffers hold";
  EXPECT_EQ(r.body, fetch(s.sim_ep(), o).body);
}

}  // namespace
}  // namespace tokentap::test
