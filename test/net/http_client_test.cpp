// The clients of net/http_client.hpp against the shared server connection, on real sockets: the
// keep-alive client (streamed bodies read whole, the kernel's arrival time of each piece, a
// refused connection), and one-shot requests, plain and over TLS, failing as they should.
#include "net/http_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/beast/http/empty_body.hpp>

#include "net/http_server.hpp"
#include "net/tls.hpp"
#include "test/net/serving.hpp"
#include "test/support/http_client.hpp"
#include "test/support/tls_cert.hpp"

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

// Answers a POST with what it got: the body back, the content type as a header of its own.
template <class Stream>
awaitable<bool> echo(http_connection<Stream>& c, http_request& req) {
  http::response<http::string_body> res{http::status::accepted, req.version()};
  res.set("x-got-type", req[http::field::content_type]);
  res.set(http::field::retry_after, "7");
  res.body() = req.body();
  co_return co_await c.reply(req, std::move(res));
}

http_client_request post(std::string body) {
  http_client_request req{http::verb::post, "/v1/logs", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::content_type, "application/x-protobuf");
  req.body() = std::move(body);
  req.prepare_payload();
  return req;
}

TEST(RequestOnce, APlainRequestGetsItsWholeAnswer) {
  testing::serving s(echo<tcp_stream>);
  http_client_response res;
  const auto ec =
      request_once({"127.0.0.1", s.ep.port(), nullptr}, post("spans"), 2000ms, 1024, res);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 202u);
  EXPECT_EQ(res["x-got-type"], "application/x-protobuf");
  EXPECT_EQ(res[http::field::retry_after], "7");
  EXPECT_EQ(res.body(), "spans");
}

// A TLS server with a certificate made here for "localhost".
struct tls_serving {
  tls_serving() : runtime(1) {
    const auto dir = test::temp_dir();
    const auto cert = test::make_self_signed(dir, "localhost");
    cert_path = cert.cert_path;
    server_ctx = tls_server_context(cert.cert_path, cert.key_path);
    ep = runtime.listen("127.0.0.1", 0, [this](tcp_socket sock, worker& w) {
      serve_https(std::move(sock), w, *server_ctx, {}, echo<tls_stream>);
    });
    runtime.start();
  }
  ~tls_serving() {
    runtime.shutdown(std::chrono::milliseconds(0));
    runtime.join();
  }
  std::string cert_path;
  std::shared_ptr<asio::ssl::context> server_ctx;
  server_runtime runtime;
  tcp::endpoint ep;
};

TEST(RequestOnce, OverTlsTheServersCertificateIsVerifiedForItsName) {
  tls_serving s;
  http_client_response res;
  // Trusted (its certificate as the CA) and named as in it: answered.
  const auto trusted = tls_client_context(true, s.cert_path);
  auto ec = request_once({"localhost", s.ep.port(), trusted}, post("over tls"), 5000ms, 1024, res);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(res.result_int(), 202u);
  EXPECT_EQ(res.body(), "over tls");
  // The system's trust store does not know it: refused in the handshake.
  http_client_response none;
  ec = request_once({"localhost", s.ep.port(), tls_client_context(true, "")}, post("x"), 5000ms,
                    1024, none);
  EXPECT_TRUE(ec);
  EXPECT_EQ(none.result_int(), 200u) << "(untouched)";
}

TEST(RequestOnce, RefusedTimedOutAndTooLargeAreErrors) {
  http_client_response res;
  EXPECT_EQ(request_once({"127.0.0.1", test::closed_port(), nullptr}, post("x"), 2000ms, 1024, res),
            asio::error::connection_refused);
  // A server that never answers: the timeout bounds the whole exchange.
  testing::serving silent([](http_connection<tcp_stream>& c, http_request&) -> awaitable<bool> {
    steady_timer t(c.stream().get_executor());
    t.expires_after(std::chrono::seconds(5));
    c.waiting_on(&t);
    error_code ec;
    co_await t.async_wait(use_ec(ec));
    c.waiting_on(nullptr);
    co_return false;
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(request_once({"127.0.0.1", silent.ep.port(), nullptr}, post("x"), 200ms, 1024, res),
            asio::error::timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  // An answer past the body limit is not taken.
  testing::serving s(echo<tcp_stream>);
  EXPECT_EQ(request_once({"127.0.0.1", s.ep.port(), nullptr}, post(std::string(2000, 'x')), 2000ms,
                         1024, res),
            http::error::body_limit);
}

}  // namespace
}  // namespace tokentap::net
