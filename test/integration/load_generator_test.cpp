// The load generator's latency measurement: an event's arrival at the client's socket
// (the kernel's receive timestamp) apart from the client's read of it.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include <boost/asio/write.hpp>

#include "base/clock.hpp"
#include "net/rx_stamped_reader.hpp"
#include "sim/load_generator.hpp"
#include "test/support/stack.hpp"

namespace tokentap::test {
namespace {

using namespace std::chrono_literals;

struct socket_pair {
  asio::io_context ioc;
  tcp_socket client{ioc.get_executor()}, server{ioc.get_executor()};
  socket_pair() {
    tcp::acceptor acc(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    client.connect(acc.local_endpoint());
    acc.accept(server);
  }
};

// Reads once through the reader, running the io_context until the read completes.
std::string read_once(socket_pair& p, net::rx_stamped_reader& r, error_code& ec) {
  std::string got(64, '\0');
  std::size_t n = 0;
  bool done = false;
  r.async_read_some(asio::buffer(got), [&](error_code e, std::size_t k) {
    ec = e;
    n = k;
    done = true;
  });
  EXPECT_FALSE(done) << "completed from within the initiating call";
  p.ioc.restart();
  p.ioc.run();
  EXPECT_TRUE(done);
  got.resize(n);
  return got;
}

// Linux turns receive timestamps on lazily (a work item, when the first socket of the system asks
// for them): bytes that arrive before it ran carry no stamp.  Sends probes until one is stamped.
void until_stamping(socket_pair& p, net::rx_stamped_reader& r) {
  for (int i = 0; i < 500; ++i) {
    asio::write(p.server, asio::buffer(std::string("p")));
    error_code ec;
    ASSERT_EQ(read_once(p, r, ec), "p");
    if (r.last_rx_ns() >= 0) return;
    std::this_thread::sleep_for(1ms);
  }
  FAIL() << "no receive timestamps";
}

TEST(RxStampedReader, StampIsWhenTheBytesArrivedNotWhenTheyWereRead) {
  socket_pair p;
  net::rx_stamped_reader r(p.client);
  ASSERT_TRUE(r.stamps());
  until_stamping(p, r);
  const auto before = base::mono_now_ns();
  asio::write(p.server, asio::buffer(std::string("hello")));
  const auto after = base::mono_now_ns();
  std::this_thread::sleep_for(40ms);  // the client is late to read
  error_code ec;
  EXPECT_EQ(read_once(p, r, ec), "hello");
  const auto read_ns = base::mono_now_ns();
  EXPECT_FALSE(ec);
  EXPECT_GE(r.last_rx_ns(), before - 1000000);  // clocks read separately: allow 1 ms
  EXPECT_LE(r.last_rx_ns(), after + 1000000);
  EXPECT_GE(read_ns - r.last_rx_ns(), 39'000'000);
}

TEST(RxStampedReader, WaitsForBytesThenStampsThem) {
  socket_pair p;
  net::rx_stamped_reader r(p.client);
  until_stamping(p, r);
  std::int64_t sent = 0;
  std::thread writer([&] {
    std::this_thread::sleep_for(30ms);  // the read is waiting by then
    sent = base::mono_now_ns();
    asio::write(p.server, asio::buffer(std::string("late")));
  });
  error_code ec;
  const auto got = read_once(p, r, ec);
  writer.join();
  EXPECT_FALSE(ec);
  EXPECT_EQ(got, "late");
  EXPECT_GE(r.last_rx_ns(), sent - 1000000);
  EXPECT_LE(r.last_rx_ns(), sent + 20'000'000);

  p.server.close();  // then the end of the stream
  EXPECT_EQ(read_once(p, r, ec), "");
  EXPECT_EQ(ec, asio::error::eof);
}

TEST(LoadGenerator, ReportsArrivalAndReadLatencyPerStampedEvent) {
  stack s;
  sim::load_options lo;
  lo.host = "127.0.0.1";
  lo.port = s.proxy_ep().port();
  lo.concurrency = 4;
  lo.max_requests = 3;
  lo.next = [](unsigned, std::uint64_t) {
    sim::scenario sc;
    sc.body = R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})";
    sc.headers = {{"x-sim-tokens", "20"},
                  {"x-sim-itl-ms", "5"},
                  {"x-sim-ttft-ms", "10"},
                  {"x-sim-stamp", "1"}};
    return sc;
  };
  sim::load_generator load(lo);
  load.start();
  load.wait();
  auto& t = load.totals();
  EXPECT_EQ(t.ok.load(), 12u);
  EXPECT_EQ(t.failed.load(), 0u);
  std::lock_guard lk(t.mu);
  // Every token event carries a stamp (the role chunk, 20 tokens, the last chunk, [DONE]).
  ASSERT_GE(t.event_latency_us.size(), 12u * 20);
  ASSERT_EQ(t.event_latency_us.size(), t.read_latency_us.size());
  // Each arrived after the simulator wrote it, and was read after it arrived.
  for (std::size_t i = 0; i < t.event_latency_us.size(); ++i) {
    EXPECT_GE(t.event_latency_us[i], 0.0) << i;
    EXPECT_LE(t.event_latency_us[i], t.read_latency_us[i]) << i;
    EXPECT_LT(t.read_latency_us[i], 5e6) << i;
  }
}

}  // namespace
}  // namespace tokentap::test
