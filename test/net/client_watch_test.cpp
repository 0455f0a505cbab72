// The client watch on real loopback sockets: a client that closes (or resets) is noticed while it
// waits for its response; a pipelined request is not a departure, and its bytes stay readable;
// a stopped watch calls nothing.
#include "net/client_watch.hpp"

#include <gtest/gtest.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace tokentap::net {
namespace {

// A connected pair: `server` (the proxy's side, watched) and `client`.
struct connected {
  asio::io_context ioc;
  tcp_socket server{ioc};
  tcp::socket client{ioc};
  client_watch watch;
  int gone = 0;

  connected() {
    tcp::acceptor acc(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    client.connect(acc.local_endpoint());
    acc.accept(server);
  }
  void start() {
    watch.start(server, [this] { ++gone; });
  }
  void run_for(std::chrono::milliseconds d) {
    ioc.restart();
    ioc.run_for(d);
  }
};

TEST(ClientWatch, AClientThatClosesIsNoticedAtOnce) {
  connected c;
  c.start();
  c.run_for(std::chrono::milliseconds(20));
  EXPECT_EQ(c.gone, 0);  // waiting for its response: nothing to notice
  EXPECT_TRUE(c.watch.watching());
  c.client.close();
  c.run_for(std::chrono::milliseconds(200));
  EXPECT_EQ(c.gone, 1);
  EXPECT_FALSE(c.watch.watching());
}

TEST(ClientWatch, AResetClientIsNoticed) {
  connected c;
  c.start();
  c.client.set_option(asio::socket_base::linger(true, 0));  // close sends RST
  c.client.close();
  c.run_for(std::chrono::milliseconds(200));
  EXPECT_EQ(c.gone, 1);
}

TEST(ClientWatch, APipelinedRequestIsNoDepartureAndStaysInTheSocket) {
  connected c;
  c.start();
  const std::string next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
  asio::write(c.client, asio::buffer(next));
  c.run_for(std::chrono::milliseconds(200));
  EXPECT_EQ(c.gone, 0);
  EXPECT_FALSE(c.watch.watching());  // the watch ends: the next exchange reads those bytes
  std::string got(next.size(), '\0');
  asio::read(c.server, asio::buffer(got));
  EXPECT_EQ(got, next);
}

TEST(ClientWatch, AStoppedWatchCallsNothing) {
  connected c;
  c.start();
  c.run_for(std::chrono::milliseconds(10));
  c.watch.stop(c.server);
  EXPECT_FALSE(c.watch.watching());
  c.client.close();
  c.run_for(std::chrono::milliseconds(100));
  EXPECT_EQ(c.gone, 0);
  // Watched again (the next exchange), the departure is noticed once.
  c.start();
  c.run_for(std::chrono::milliseconds(200));
  EXPECT_EQ(c.gone, 1);
}

}  // namespace
}  // namespace tokentap::net
