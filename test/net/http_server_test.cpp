// The keep-alive server connection that admin, sim and replay share, on real sockets with a real
// runtime: keep-alive, limits answered with their status, chunked answers, a client's hangup
// noticed while a responder waits, and drain.
#include "net/http_server.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <boost/beast/http/empty_body.hpp>

#include "test/net/serving.hpp"
#include "test/support/http_client.hpp"

namespace tokentap::net {
namespace {

using namespace std::chrono_literals;
using test::request_options;

using server = testing::serving;

awaitable<bool> echo(http_connection<tcp_stream>& c, http_request& req) {
  return c.reply(req, 200, std::string(req.target()) + " " + req.body(), "text/plain");
}

TEST(HttpServer, AnswersSeveralRequestsOnOneConnection) {
  server s(echo);
  test::connection conn(s.ep);
  for (int i = 0; i < 3; ++i) {
    const auto r = conn.request({.target = "/n" + std::to_string(i), .body = "b", .headers = {}});
    ASSERT_TRUE(r.complete) << r.error.message();
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "/n" + std::to_string(i) + " b");
    EXPECT_EQ(r.header("connection"), "");  // kept open (HTTP/1.1 default)
  }
}

TEST(HttpServer, ABodyOverTheLimitIsAnswered413AndTheConnectionClosed) {
  server s(echo, {.body_limit = 1024});
  test::connection conn(s.ep);
  const auto r = conn.request({.body = std::string(4096, 'x'), .headers = {}});
  EXPECT_EQ(r.status, 413u);
  EXPECT_NE(r.body.find("request_too_large"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_EQ(conn.read_raw_until_close(2000ms), "");  // closed, nothing more
}

TEST(HttpServer, AHeadOverTheLimitIsAnswered431) {
  server s(echo, {.header_limit = 1024});
  test::connection conn(s.ep);
  const auto r = conn.request({.body = {}, .headers = {{"x-big", std::string(2048, 'h')}}});
  EXPECT_EQ(r.status, 431u);
  EXPECT_NE(r.body.find("request_header_too_large"), std::string::npos) << r.body;
}

TEST(HttpServer, ChunkedAnswersArriveWholeAndTheConnectionIsReused) {
  server s([](http_connection<tcp_stream>& c, http_request& req) -> awaitable<bool> {
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/event-stream");
    if (!co_await c.write_chunked_head(req, res)) co_return false;
    for (int i = 0; i < 3; ++i)
      if (!co_await c.write_chunk("data: " + std::to_string(i) + "\n\n")) co_return false;
    co_return co_await c.write_last_chunk() && res.keep_alive();
  });
  test::connection conn(s.ep);
  for (int round = 0; round < 2; ++round) {
    const auto r = conn.request({});
    ASSERT_TRUE(r.complete) << r.error.message();
    EXPECT_EQ(r.header("transfer-encoding"), "chunked");
    EXPECT_EQ(r.body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  }
}

// A responder waiting on its timer is woken when the client leaves, and hears about it once.
TEST(HttpServer, AClientThatLeavesWakesTheWaitingResponder) {
  std::atomic<int> gone{0}, woken{0};
  server s([&](http_connection<tcp_stream>& c, http_request& req) -> awaitable<bool> {
    http::response<http::empty_body> res{http::status::ok, req.version()};
    if (!co_await c.write_chunked_head(req, res)) co_return false;
    steady_timer t(c.stream().get_executor());
    c.waiting_on(&t);
    c.watch_for_hangup([&] { gone++; });
    t.expires_after(30s);
    error_code ec;
    co_await t.async_wait(use_ec(ec));
    if (ec == asio::error::operation_aborted && c.client_gone()) woken++;
    c.stop_watching();
    c.waiting_on(nullptr);
    co_return false;
  });
  {
    test::connection conn(s.ep);
    conn.send_raw("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    std::string got;
    while (got.find("\r\n\r\n") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      char buf[512];
      boost::system::error_code ec;
      const auto n = conn.socket().read_some(boost::asio::buffer(buf), ec);
      if (ec) break;
      got.append(buf, n);
    }
    ASSERT_NE(got.find("200 OK"), std::string::npos) << got;
  }  // the client closes
  for (int i = 0; i < 500 && woken.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(woken.load(), 1);
  EXPECT_EQ(gone.load(), 1);
}

// Shutdown closes an idle keep-alive connection at once; a request in progress finishes first.
TEST(HttpServer, DrainClosesIdleConnectionsAndLetsAnAnswerInProgressFinish) {
  std::atomic<int> started{0};
  auto s = std::make_unique<server>(
      [&](http_connection<tcp_stream>& c, http_request& req) -> awaitable<bool> {
        started++;
        steady_timer t(c.stream().get_executor());
        t.expires_after(300ms);
        error_code ec;
        co_await t.async_wait(use_ec(ec));
        co_return co_await c.reply(req, 200, "late", "text/plain");
      });
  test::connection idle(s->ep);
  ASSERT_TRUE(idle.request({}).complete);  // now idle, kept alive
  test::connection busy(s->ep);
  busy.send_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  for (int i = 0; i < 500 && started < 2; ++i) std::this_thread::sleep_for(2ms);
  ASSERT_EQ(started.load(), 2);
  s->runtime.shutdown(5000ms);
  const auto r = busy.read_response(5000ms);
  EXPECT_TRUE(r.complete) << r.error.message();
  EXPECT_EQ(r.body, "late");
  EXPECT_EQ(r.header("connection"), "close");  // draining: not kept
  EXPECT_EQ(idle.read_raw_until_close(2000ms), "");
  s->runtime.join();
}

}  // namespace
}  // namespace tokentap::net
