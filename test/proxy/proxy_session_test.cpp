// The client connection on a real proxy_server and sockets: one connection carries exchange
// after exchange until the client ends it (Connection: close, HTTP/1.0) or stays idle past the
// keep-alive timeout; an answer of the proxy's own keeps it when the stream position is known
// (no route) and ends it when not (a target that is not a path); a client too slow with its head
// is cut off; a shutdown closes a kept-alive idle connection at once.
#include "proxy/proxy_session.hpp"

#include <gtest/gtest.h>

#include "test/proxy/loopback_proxy.hpp"
#include "test/proxy/scripted_http.hpp"
#include "test/support/http_client.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;
using test::scripted_http;

test::request_options get(const std::string& target,
                          std::vector<std::pair<std::string, std::string>> headers = {}) {
  test::request_options o;
  o.method = "GET";
  o.target = target;
  o.headers = std::move(headers);
  o.timeout = 5s;
  return o;
}

// What arrives until the proxy closes the connection, and after how long (3 s: it did not).
struct closing {
  std::string bytes;
  std::chrono::steady_clock::duration after;
};
closing until_closed(test::connection& c) {
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = c.read_raw_until_close(3s);
  return {std::move(bytes), std::chrono::steady_clock::now() - t0};
}

// Sends `bytes` as they are, then reads until the proxy closes the connection.
closing answer_to(test::connection& c, const std::string& bytes) {
  c.send_raw(bytes);
  return until_closed(c);
}

config::config routed(const scripted_http& up, const std::string& prefix,
                      std::chrono::milliseconds keepalive) {
  auto cfg = test::loopback_config(up.url());
  cfg.routes.front().prefix = prefix;
  cfg.timeouts.keepalive = keepalive;
  cfg.timeouts.client_header = 300ms;
  return cfg;
}

// A scripted upstream, the proxy in front of it and one client connection to the proxy.
struct one_client {
  explicit one_client(const std::string& prefix = "/", std::chrono::milliseconds keepalive = 300ms)
      : p(routed(up, prefix, keepalive)), c(p.server->endpoint()) {}
  scripted_http up;
  test::loopback_proxy p;
  test::connection c;
};

TEST(ProxySession, OneConnectionCarriesExchangesUntilTheClientEndsIt) {
  one_client s;
  auto& [up, p, c] = s;
  up.body([] { return std::string("{\"ok\":true}"); });
  for (int i = 0; i < 3; ++i) {
    const auto r = c.request(get("/v1/models?n=" + std::to_string(i)));
    ASSERT_EQ(r.status, 200u) << i;
    EXPECT_EQ(r.body, "{\"ok\":true}");
    // The upstream's own `Connection: close` is hop-by-hop: it does not end this connection.
    EXPECT_EQ(r.headers.count("connection") ? r.headers.at("connection") : "", "") << i;
  }
  EXPECT_EQ(up.heads().size(), 3u);  // every exchange reached the upstream
  const auto last = c.request(get("/v1/models", {{"Connection", "close"}}));
  EXPECT_EQ(last.status, 200u);
  EXPECT_EQ(last.headers.at("connection"), "close");
  const auto end = until_closed(c);  // the proxy closes it
  EXPECT_EQ(end.bytes, "");
  EXPECT_LT(end.after, 1s);
}

TEST(ProxySession, AnHttp10RequestEndsItsConnection) {
  one_client s;
  const auto end = answer_to(s.c, "GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n");
  EXPECT_EQ(end.bytes.rfind("HTTP/1.0 200", 0), 0u) << end.bytes;
  EXPECT_LT(end.after, 1s);
}

TEST(ProxySession, NoRouteIsA404ThatKeepsTheConnection) {
  one_client s("/v1/");
  auto& [up, p, c] = s;
  const auto miss = c.request(get("/other"));
  EXPECT_EQ(miss.status, 404u);
  EXPECT_NE(miss.body.find("\"no_route\""), std::string::npos) << miss.body;
  EXPECT_TRUE(up.heads().empty());
  EXPECT_EQ(c.request(get("/v1/models")).status, 200u);  // the same connection
}

TEST(ProxySession, ATargetThatIsNotAPathIsA400ThatEndsTheConnection) {
  one_client s;
  const auto end = answer_to(s.c, "GET http://elsewhere/v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(end.bytes.rfind("HTTP/1.1 400", 0), 0u) << end.bytes;
  EXPECT_NE(end.bytes.find("origin-form"), std::string::npos) << end.bytes;
  EXPECT_LT(end.after, 1s);
  EXPECT_TRUE(s.up.heads().empty());
}

TEST(ProxySession, AnIdleConnectionEndsAtTheKeepaliveTimeout) {
  one_client s;
  auto& [up, p, c] = s;
  ASSERT_EQ(c.request(get("/v1/models")).status, 200u);
  const auto end = until_closed(c);
  EXPECT_EQ(end.bytes, "");
  EXPECT_GE(end.after, 250ms);
  EXPECT_LT(end.after, 2s);
}

TEST(ProxySession, AClientTooSlowWithItsHeadIsCutOff) {
  one_client s;
  auto& [up, p, c] = s;
  c.send_raw("GET /v1/models HTTP/1.1\r\nHost: x\r\n");  // and nothing more
  const auto end = until_closed(c);
  EXPECT_EQ(end.bytes, "");
  EXPECT_LT(end.after, 2s);
  EXPECT_TRUE(up.heads().empty());
}

TEST(ProxySession, AShutdownClosesAKeptAliveIdleConnectionAtOnce) {
  one_client s("/", 60s);
  auto& [up, p, c] = s;
  ASSERT_EQ(c.request(get("/v1/models")).status, 200u);
  p.server->shutdown(30s);  // a grace period for streams; an idle connection has none
  const auto end = until_closed(c);
  EXPECT_EQ(end.bytes, "");
  EXPECT_LT(end.after, 1s);
}

}  // namespace
}  // namespace tokentap::proxy
