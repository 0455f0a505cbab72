// The per-thread pool of keep-alive upstream connections, on real sockets on 127.0.0.1: a
// connection given back is taken again; one the peer closed, wrote to unasked, or that sat past
// its idle TTL is dropped; at most max_idle wait per endpoint; a refused connect says why; and a
// probe's GET reads its answer, refusing a body past its limit.
#include "proxy/upstream_pool.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "proxy/cluster.hpp"
#include "test/proxy/upstreams.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;

// A listener on 127.0.0.1:0 that accepts in a thread of its own and keeps what it accepted.
struct listener {
  listener() : acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0}) {}
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }
  tcp::socket accept() { return acceptor.accept(); }
  asio::io_context ioc;
  tcp::acceptor acceptor;
};

struct pool_fixture {
  explicit pool_fixture(std::uint16_t port, std::size_t max_idle = 64, config::ms idle_ttl = 4000ms)
      : cfg(make(port, max_idle, idle_ttl)), c(cfg, 0, nullptr), e(*c.endpoints().at(0)) {}
  static config::upstream_config make(std::uint16_t port, std::size_t max_idle,
                                      config::ms idle_ttl) {
    auto up = test::upstream_of("up", {"http://127.0.0.1:1"}, 0);
    up.endpoints[0].port = port;
    up.max_idle = max_idle;
    up.idle_ttl = idle_ttl;
    return up;
  }
  // A new connection, or nullptr with `why`.
  std::unique_ptr<upstream_connection> connect(connect_failure* why_out = nullptr) {
    std::unique_ptr<upstream_connection> out;
    asio::co_spawn(
        ioc,
        [&]() -> awaitable<void> {
          error_code ec;
          connect_failure why{};
          out = co_await pool.connect(c, e, ec, why, 2000ms);
          if (why_out) *why_out = why;
        },
        asio::detached);
    ioc.restart();
    ioc.run();
    return out;
  }
  config::upstream_config cfg;
  cluster c;
  endpoint& e;
  asio::io_context ioc;
  upstream_pool pool{ioc};
};

TEST(UpstreamPool, AConnectionGivenBackIsTakenAgainWhileThePeerKeepsItQuiet) {
  listener l;
  pool_fixture f(l.port());
  auto conn = f.connect();
  ASSERT_NE(conn, nullptr);
  auto far = l.accept();
  upstream_connection* const same = conn.get();
  f.pool.give_back(f.c, f.e, std::move(conn));
  EXPECT_TRUE(same->idle);
  auto again = f.pool.take(f.c, f.e);
  EXPECT_EQ(again.get(), same);
  EXPECT_FALSE(again->idle);
  EXPECT_EQ(f.pool.take(f.c, f.e), nullptr);  // taken: the pool is empty
}

TEST(UpstreamPool, OneThePeerClosedOrWroteToUnaskedIsDropped) {
  listener l;
  pool_fixture f(l.port());
  auto closed = f.connect();
  l.accept().close();
  auto spoken = f.connect();
  auto far = l.accept();
  asio::write(far, asio::buffer("HTTP/1.1 408 Request Timeout\r\n\r\n", 32));
  std::this_thread::sleep_for(50ms);  // (the FIN and the bytes reach our sockets)
  f.pool.give_back(f.c, f.e, std::move(closed));
  f.pool.give_back(f.c, f.e, std::move(spoken));
  EXPECT_EQ(f.pool.take(f.c, f.e), nullptr);
}

TEST(UpstreamPool, OnePastItsIdleTtlIsDroppedAndAtMostMaxIdleWait) {
  listener l;
  {
    pool_fixture f(l.port(), 64, 20ms);
    auto conn = f.connect();
    auto far = l.accept();
    f.pool.give_back(f.c, f.e, std::move(conn));
    std::this_thread::sleep_for(40ms);
    EXPECT_EQ(f.pool.take(f.c, f.e), nullptr);
  }
  pool_fixture f(l.port(), 2);
  std::vector<tcp::socket> far;
  for (int i = 0; i < 3; ++i) {
    auto conn = f.connect();
    far.push_back(l.accept());
    f.pool.give_back(f.c, f.e, std::move(conn));
  }
  int taken = 0;
  while (f.pool.take(f.c, f.e)) ++taken;
  EXPECT_EQ(taken, 2);
}

TEST(UpstreamPool, ARefusedConnectSaysWhy) {
  std::uint16_t port = 0;
  {
    listener l;
    port = l.port();
  }  // closed: nothing listens there now
  pool_fixture f(port);
  connect_failure why = connect_failure::none;
  EXPECT_EQ(f.connect(&why), nullptr);
  EXPECT_EQ(why, connect_failure::connect);
  EXPECT_EQ(to_string(why), "connect");
}

// A probe's GET against a server that answers `answer` once.
upstream_pool::get_result probe(const std::string& answer, std::uint64_t body_limit,
                                std::string* request = nullptr) {
  listener l;
  pool_fixture f(l.port());
  std::thread server([&] {
    auto s = l.accept();
    std::string got(4096, '\0');
    got.resize(s.read_some(asio::buffer(got)));
    if (request) *request = got;
    asio::write(s, asio::buffer(answer));
  });
  upstream_pool::get_result out;
  upstream_connection* open = nullptr;
  asio::co_spawn(
      f.ioc,
      [&]() -> awaitable<void> {
        out = co_await f.pool.get_once(f.c, f.e, "/health", "tokentap-test", body_limit,
                                       clock::now() + 2s, open);
      },
      asio::detached);
  f.ioc.run();
  server.join();
  EXPECT_EQ(open, nullptr);  // closed after
  return out;
}

TEST(UpstreamPool, AProbesGetReadsTheAnswerAndRefusesABodyPastItsLimit) {
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
  std::string request;
  const auto r = probe(ok, 100, &request);
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(request.starts_with("GET /health HTTP/1.1\r\n")) << request;
  EXPECT_NE(request.find("User-Agent: tokentap-test\r\n"), std::string::npos) << request;
  EXPECT_NE(request.find("Connection: close\r\n"), std::string::npos) << request;
  // A body past the limit is no answer, even when it came in the same read as the head.
  EXPECT_EQ(probe(ok, 3).status, 0u);
  EXPECT_EQ(probe("garbage\r\n\r\n", 100).status, 0u);
}

}  // namespace
}  // namespace tokentap::proxy
