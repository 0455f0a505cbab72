// The client of `replay send` and the load generator against the shared server connection, on
// real sockets: keep-alive, streamed bodies read whole, the kernel's arrival time of each piece,
// and a refused connection.
#include "net/http_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/beast/http/empty_body.hpp>

#include "net/http_server.hpp"
#include "test/net/serving.hpp"
#include "test/support/http_client.hpp"

namespace tokentap::net {
namespace {

using namespace std::chrono_literals;

// Three chunks, 30 ms apart.
awaitable<bool> slow_stream(http_connection<tcp_stream>& c, http_request& req) {
  http::response<http::empty_body> res{http::status::ok, req.version()};
  res.set(http::field::content_type, "text/event-stream");
  if (!co_await c.write_chunked_head(req, res)) co_return false;
  steady_timer t(c.stream().get_executor());
  error_code ec;
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {
      t.expires_after(30ms);
      co_await t.async_wait(use_ec(ec));
    }
    if (!co_await c.write_chunk("data: " + std::to_string(i) + "\n\n")) co_return false;
  }
  co_return co_await c.write_last_chunk() && res.keep_alive();
}

struct server : testing::serving {
  server() : serving(slow_stream) {}
};

// Runs `f` (a coroutine) on a fresh io_context until it is done.
template <class F>
void run(F f) {
  asio::io_context ioc;
  asio::co_spawn(ioc.get_executor(), f(ioc.get_executor()), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  ioc.run();
}

struct exchange {
  unsigned status = 0;
  std::string body;
  std::vector<body_piece> pieces;
  error_code ec;
};

awaitable<exchange> one(http_client& c, const std::string& target, bool stall_between = false) {
  exchange x;
  http_client_request req{http::verb::get, target, 11};
  req.set(http::field::host, "127.0.0.1");
  x.ec = co_await c.send(req, 5000ms);
  if (x.ec) co_return x;
  x.status = c.status();
  std::vector<char> buf(4096);
  while (!c.done()) {
    if (stall_between) std::this_thread::sleep_for(50ms);  // the client's thread is busy
    const auto p = co_await c.read_some(buf, x.ec);
    if (p.size > 0) {
      x.body.append(buf.data(), p.size);
      x.pieces.push_back(p);
    }
    if (x.ec) break;
  }
  co_return x;
}

TEST(HttpClient, TwoRequestsOnOneConnectionGetTheirStreamsWhole) {
  server s;
  exchange a, b;
  bool reused = false;
  run([&](io_executor ex) -> awaitable<void> {
    http_client c(ex);
    EXPECT_FALSE(co_await c.connect("127.0.0.1", s.ep.port(), 2000ms));
    a = co_await one(c, "/one");
    reused = c.is_open() && c.keep_alive();
    b = co_await one(c, "/two");
  });
  for (const auto* x : {&a, &b}) {
    EXPECT_FALSE(x->ec) << x->ec.message();
    EXPECT_EQ(x->status, 200u);
    EXPECT_EQ(x->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
    for (const auto& p : x->pieces) EXPECT_LE(p.arrived_ns, p.read_ns);
  }
  EXPECT_TRUE(reused);
}

// Bytes that waited in the socket while the client's thread was busy are timed by their arrival,
// not by the read that found them.
TEST(HttpClient, PiecesCarryWhenTheirBytesArrivedNotWhenTheyWereRead) {
  server s;
  exchange x;
  bool stamps = false;
  run([&](io_executor ex) -> awaitable<void> {
    http_client c(ex);
    EXPECT_FALSE(co_await c.connect("127.0.0.1", s.ep.port(), 2000ms));
    (void)co_await one(c, "/warm-up");  // the kernel turns stamps on a moment after asked
    x = co_await one(c, "/timed", /*stall_between=*/true);
    stamps = true;
  });
  ASSERT_TRUE(stamps);
  ASSERT_FALSE(x.ec) << x.ec.message();
  ASSERT_FALSE(x.pieces.empty());
  std::int64_t waited_most = 0;
  for (const auto& p : x.pieces) waited_most = std::max(waited_most, p.read_ns - p.arrived_ns);
  EXPECT_GT(waited_most, 10'000'000) << "no piece waited 10 ms in the socket";
}

TEST(HttpClient, ARefusedConnectionIsAnError) {
  error_code ec;
  bool open = true;
  run([&](io_executor ex) -> awaitable<void> {
    http_client c(ex);
    ec = co_await c.connect("127.0.0.1", test::closed_port(), 2000ms);
    open = c.is_open();
  });
  EXPECT_EQ(ec, asio::error::connection_refused);
  EXPECT_FALSE(open);
}

}  // namespace
}  // namespace tokentap::net
