// Every failure the proxy must handle, caused for real against the simulator and real sockets.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>

#include "hooks/observe/metrics.hpp"
#include "parsers/request_inspector.hpp"
#include "test/support/http_client.hpp"
#include "test/support/metrics_text.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

namespace asio = boost::asio;

std::string error_type(const response& r) {
  // {"error":{"type":"…", …}}
  const auto k = r.body.find(R"("type":")");
  if (k == std::string::npos) return {};
  const auto start = k + 8;
  return r.body.substr(start, r.body.find('"', start) - start);
}

void expect_json_error(const response& r, unsigned status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(error_type(r), type) << r.body;
  parsers::request_inspector in;
  EXPECT_TRUE(in.inspect(r.body).error.empty()) << r.body;
}

request_options streaming(std::vector<std::pair<std::string, std::string>> extra) {
  request_options o;
  o.body = chat_body(true, "fail me");
  o.headers = {{"x-sim-ttft-ms", "10"}, {"x-sim-itl-ms", "10"}, {"x-sim-tokens", "30"}};
  for (auto& h : extra) o.headers.push_back(std::move(h));
  return o;
}

// tokentap_upstream_errors_total{reason} on the proxy's /metrics, once the exchange's end was
// recorded (the hooks see it after the client's response was written).
double upstream_errors(const proxy::proxy_server& p, const std::string& reason) {
  double n = 0;
  for (int i = 0; i < 200 && n == 0; ++i) {
    n = metric_sum(parse_metrics(p.metrics().prometheus_text()), "tokentap_upstream_errors_total",
                   {{"reason", reason}});
    if (n == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return n;
}

TEST(Failure, RefusedUpstreamIs502WithinTheConnectTimeout) {
  auto cfg = test_config("http://127.0.0.1:" + std::to_string(closed_port()));
  cfg.timeouts.connect = std::chrono::milliseconds(1000);
  proxy::proxy_server p(cfg);
  p.start();
  const double t0 = now_ms();
  const auto r = fetch(p.endpoint(), streaming({}));
  EXPECT_LT(now_ms() - t0, 1000);
  expect_json_error(r, 502, "upstream_connect_error");
  EXPECT_NE(r.body.find("refused"), std::string::npos) << r.body;
  EXPECT_EQ(upstream_errors(p, "connect"), 1);
}

TEST(Failure, UnreachableUpstreamIs502AfterTheConnectTimeout) {
  // A listener whose accept queue is full and never drained: further SYNs are dropped, so the
  // connect hangs exactly like an unreachable host's would.
  asio::io_context ioc;
  tcp::acceptor blackhole(ioc, tcp::v4());
  blackhole.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  blackhole.listen(0);
  // Raw non-blocking connects: they fill the queue without waiting for it.
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(blackhole.local_endpoint().port());
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(fd);
  }
  struct closer {
    std::vector<int>& fds;
    ~closer() {
      for (int fd : fds) ::close(fd);
    }
  } close_fillers{fillers};
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto cfg = test_config("http://127.0.0.1:" + std::to_string(blackhole.local_endpoint().port()));
  cfg.timeouts.connect = std::chrono::milliseconds(400);
  cfg.timeouts.upstream_header = std::chrono::milliseconds(5000);
  proxy::proxy_server p(cfg);
  p.start();
  const double t0 = now_ms();
  const auto r = fetch(p.endpoint(), streaming({}));
  const double took = now_ms() - t0;
  expect_json_error(r, 502, "upstream_connect_error");
  EXPECT_NE(r.body.find("timeout"), std::string::npos) << r.body;
  EXPECT_GE(took, 380);
  EXPECT_LT(took, 2000);
}

TEST(Failure, SilentUpstreamIs504AfterTheHeaderTimeout) {
  stack s(
      [](config::config& cfg) { cfg.timeouts.upstream_header = std::chrono::milliseconds(300); });
  const double t0 = now_ms();
  const auto r = fetch(s.proxy_ep(), streaming({{"x-sim-hang", "1"}}));
  const double took = now_ms() - t0;
  expect_json_error(r, 504, "upstream_timeout");
  EXPECT_GE(took, 290);
  EXPECT_LT(took, 1500);
  // The proxy dropped the silent connection: the simulator saw its client leave.
  for (int i = 0; i < 100 && s.sim->stats().disconnects.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s.sim->stats().disconnects.load(), 1u);
}

TEST(Failure, UpstreamResetMidStreamTruncatesTheClientResponse) {
  stack s;
  const auto r = fetch(s.proxy_ep(), streaming({{"x-sim-reset-after", "5"}}));
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.complete) << "the client must not see a clean end of a broken stream";
  EXPECT_TRUE(r.error) << "expected a read error";
  const auto events = sse_data(r.body);
  ASSERT_EQ(events.size(), 6u);  // role chunk + 5 tokens, then nothing
  EXPECT_EQ(upstream_errors(*s.proxy, "reset"), 1);
  // The proxy still serves normally afterwards.
  const auto ok = fetch(s.proxy_ep(), streaming({}));
  EXPECT_TRUE(ok.complete);
}

TEST(Failure, UpstreamErrorStatusAndErrorEventsPassThrough) {
  stack s;
  const auto r = fetch(s.proxy_ep(), streaming({{"x-sim-status", "529"}}));
  EXPECT_EQ(r.status, 529);
  EXPECT_NE(r.body.find("simulated 529"), std::string::npos);
  const auto e = fetch(s.proxy_ep(), streaming({{"x-sim-error-after", "3"}}));
  EXPECT_TRUE(e.complete);
  EXPECT_EQ(sse_data(e.body).back().rfind(R"({"error":)", 0), 0u) << e.body;
}

TEST(Failure, IdleTimeoutMidStreamTruncates) {
  stack s([](config::config& cfg) { cfg.timeouts.idle = std::chrono::milliseconds(300); });
  const double t0 = now_ms();
  const auto r =
      fetch(s.proxy_ep(), streaming({{"x-sim-stall-after", "4"}, {"x-sim-stall-ms", "0"}}));
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(sse_data(r.body).size(), 5u);
  EXPECT_LT(now_ms() - t0, 2000);
}

TEST(Failure, TotalTimeoutBoundsTheExchange) {
  stack s([](config::config& cfg) { cfg.timeouts.total = std::chrono::milliseconds(400); });
  const double t0 = now_ms();
  const auto r = fetch(s.proxy_ep(), streaming({{"x-sim-tokens", "100"}, {"x-sim-itl-ms", "20"}}));
  EXPECT_FALSE(r.complete);
  EXPECT_LT(now_ms() - t0, 1500);
}

// Waits until the simulator has noticed a client disconnect; returns its monotonic time in ms.
double wait_for_sim_disconnect(const sim::server& sim) {
  for (int i = 0; i < 300 && sim.stats().disconnects.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return static_cast<double>(sim.stats().last_disconnect_ns.load()) / 1e6;
}

TEST(Failure, ClientDisconnectMidStreamClosesTheUpstreamWithin100ms) {
  stack s;
  connection c(s.proxy_ep());
  request_options o = streaming({{"x-sim-tokens", "500"}, {"x-sim-itl-ms", "300"}});
  const std::string raw =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "x-sim-tokens: 500\r\nx-sim-itl-ms: 300\r\nx-sim-ttft-ms: 10\r\nContent-Length: " +
      std::to_string(o.body.size()) + "\r\n\r\n" + o.body;
  c.send_raw(raw);
  char buf[512];
  boost::system::error_code ec;
  c.socket().read_some(asio::buffer(buf), ec);  // the head (and maybe the first event) arrived
  ASSERT_FALSE(ec);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double closed_at = now_ms();
  c.close();
  const double noticed_at = wait_for_sim_disconnect(*s.sim);
  ASSERT_GT(noticed_at, 0) << "the upstream connection was never closed";
  EXPECT_LT(noticed_at - closed_at, 100);
  EXPECT_EQ(s.sim->stats().streams_completed.load(), 0u);
}

TEST(Failure, ClientDisconnectWhileUpstreamIsSilentClosesTheUpstream) {
  // No bytes flow in either direction, so only the watcher can notice the client leaving.
  stack s;
  connection c(s.proxy_ep());
  request_options o = streaming({});
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-sim-hang: 1\r\nContent-Length: " +
             std::to_string(o.body.size()) + "\r\n\r\n" + o.body);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double closed_at = now_ms();
  c.close();
  const double noticed_at = wait_for_sim_disconnect(*s.sim);
  ASSERT_GT(noticed_at, 0);
  EXPECT_LT(noticed_at - closed_at, 100);
}

TEST(Failure, ClientThatStopsReadingIsCutAtTheWriteTimeout) {
  // The client reads the head, then nothing: once the socket buffers are full, the proxy's write
  // waits, and after client_write it ends the exchange and closes the upstream — not before
  // (the deadline covers one write, however long the stream has been running).
  stack s([](config::config& cfg) { cfg.timeouts.client_write = std::chrono::milliseconds(400); });
  connection c(s.proxy_ep());
  const int small = 16 * 1024;
  ::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  request_options o = streaming({});
  c.send_raw(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "x-sim-tokens: 200000\r\nx-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\nContent-Length: " +
      std::to_string(o.body.size()) + "\r\n\r\n" + o.body);
  const double sent_at = now_ms();
  for (int i = 0; i < 1000 && s.proxy->stats().client_disconnects.value() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double cut_at = now_ms();
  ASSERT_EQ(s.proxy->stats().client_disconnects.value(), 1u) << "the stalled write never ended";
  EXPECT_GE(cut_at - sent_at, 400);
  EXPECT_LT(cut_at - sent_at, 3000);
  const double noticed_at = wait_for_sim_disconnect(*s.sim);
  EXPECT_GT(noticed_at, 0) << "the upstream connection was never closed";
  EXPECT_EQ(s.sim->stats().streams_completed.load(), 0u);
  // What the client got is a truncated response, never a clean end.  (Up to the proxy's whole
  // socket send buffer — megabytes, now that a read is one write — is still queued for the
  // client: a large receive window lets it arrive in milliseconds instead of 16 KiB at a time.)
  const int large = 8 * 1024 * 1024;
  ::setsockopt(c.socket().native_handle(), SOL_SOCKET, SO_RCVBUF, &large, sizeof large);
  const auto r = c.read_response(std::chrono::milliseconds(5000));
  EXPECT_FALSE(r.complete);
}

TEST(Failure, OversizedRequestHeadIs431) {
  stack s([](config::config& cfg) { cfg.limits.max_request_header_bytes = 4096; });
  request_options o = streaming({{"x-big", std::string(8000, 'a')}});
  const auto r = fetch(s.proxy_ep(), o);
  expect_json_error(r, 431, "request_header_too_large");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(s.sim->stats().requests.load(), 0u);
}

TEST(Failure, OversizedRequestBodyIs413WithoutReadingIt) {
  stack s([](config::config& cfg) { cfg.limits.max_request_body_bytes = 1024; });
  connection c(s.proxy_ep());
  // Announce 10 MB but send none of it: the answer must come from the header alone.
  c.send_raw("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n");
  const auto r = c.read_response(std::chrono::milliseconds(3000));
  expect_json_error(r, 413, "request_body_too_large");
  // A chunked body that grows past the limit is cut off too.
  connection c2(s.proxy_ep());
  c2.send_raw(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "800\r\n" +
      std::string(0x800, 'x') + "\r\n");
  expect_json_error(c2.read_response(std::chrono::milliseconds(3000)), 413,
                    "request_body_too_large");
  EXPECT_EQ(s.sim->stats().requests.load(), 0u);
}

TEST(Failure, MalformedRequestsAre400) {
  stack s;
  for (const std::string& raw : {
           std::string("GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n"),
           std::string("GARBAGE\r\n\r\n"),
           std::string("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 12abc\r\n\r\n"),
           // Content-Length and Transfer-Encoding together: a smuggling vector, never forwarded.
           std::string("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
           std::string("GET http://evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n"),
       }) {
    connection c(s.proxy_ep());
    c.send_raw(raw);
    const auto r = c.read_response(std::chrono::milliseconds(3000));
    EXPECT_EQ(r.status, 400) << raw;
    EXPECT_EQ(error_type(r), "bad_request") << raw;
  }
  EXPECT_EQ(s.sim->stats().requests.load(), 0u);
}

TEST(Failure, SlowlorisIsCutOffAtTheHeaderTimeout) {
  stack s([](config::config& cfg) { cfg.timeouts.client_header = std::chrono::milliseconds(500); });
  connection c(s.proxy_ep());
  const std::string head =
      "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  const double t0 = now_ms();
  double cut_at = 0;
  for (char ch : head) {  // ~2.4 s at one byte per 40 ms: far longer than the 500 ms allowed
    boost::system::error_code ec;
    asio::write(c.socket(), asio::buffer(&ch, 1), ec);
    if (ec) {
      cut_at = now_ms() - t0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  EXPECT_GT(cut_at, 400) << "the proxy must close a client that sends its head too slowly";
  EXPECT_LT(cut_at, 1500);
  EXPECT_EQ(s.sim->stats().requests.load(), 0u);
}

TEST(Failure, NoRouteIs404AndKeepsTheConnection) {
  stack s([](config::config& cfg) { cfg.routes = {{"chat", "/v1/", "default", 0}}; });
  connection c(s.proxy_ep());
  request_options o;
  o.method = "GET";
  o.target = "/admin/secret";
  const auto r = c.request(o);
  expect_json_error(r, 404, "no_route");
  o.target = "/v1/models";
  EXPECT_EQ(c.request(o).status, 200);
}

}  // namespace
}  // namespace tokentap::test
