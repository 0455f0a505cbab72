// Reads that believe a short read (proxy/drain_read.hpp) and the watch that tells them of a
// hangup that came with the last data (proxy/hangup_watch.hpp), on real loopback sockets.
#include "proxy/hangup_watch.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <string_view>
#include <thread>

#include "proxy/drain_read.hpp"
#include "proxy/rx_stamp.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {
namespace {

using namespace std::chrono_literals;

// An upstream connection in `ioc` and the peer's end of it (a bare descriptor).
struct connected {
  net::io_context ioc{1};
  upstream_connection conn{ioc.get_executor()};
  int peer = -1;

  connected() {
    tcp::acceptor acc(ioc, {net::ip::make_address("127.0.0.1"), 0});
    sock().connect(acc.local_endpoint());
    peer = acc.accept().release();
  }
  ~connected() {
    if (peer >= 0) ::close(peer);
  }
  tcp_socket& sock() { return conn.lowest().socket(); }
  void send(std::string_view s) const {
    ASSERT_EQ(::send(peer, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  void fin() const { ::shutdown(peer, SHUT_WR); }
  void reset() {
    const linger abort{1, 0};  // close() sends RST
    ::setsockopt(peer, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    ::close(peer);
    peer = -1;
  }
  // Until the kernel holds the peer's FIN or RST on our side (asked with poll(2), which leaves
  // the reactor's epoll edges alone).
  void await_hangup() {
    pollfd p{sock().native_handle(), POLLRDHUP, 0};
    ASSERT_EQ(::poll(&p, 1, 2000), 1);
  }
};

struct read_result {
  error_code ec;
  std::size_t n = 0;
};

// The shape that loses a hangup: a read waits (nothing sent yet, and the reactor has collected
// every edge), then the peer sends data and hangs up while nobody runs the loop, so the kernel
// reports both as one edge.  The first read gets the data (a short read); a second read follows
// from its handler.  Returns the two reads as they are when the second one completed or `wait`
// is over.
template <class Buffer>
std::pair<std::optional<read_result>, std::optional<read_result>> data_then_hangup(
    connected& c, bool rst, std::chrono::milliseconds wait) {
  static char buf[4096];
  std::optional<read_result> first, second;
  c.sock().async_read_some(Buffer(buf, sizeof buf), [&](error_code ec, std::size_t n) {
    first = read_result{ec, n};
    c.sock().async_read_some(Buffer(buf, sizeof buf), [&](error_code ec2, std::size_t n2) {
      second = read_result{ec2, n2};
    });
  });
  c.ioc.poll();
  EXPECT_FALSE(first) << "nothing was sent yet";
  c.send("data: last\n\n");
  if (rst) {
    c.reset();
  } else {
    c.fin();
  }
  c.await_hangup();
  const auto deadline = clock::now() + wait;
  while (!second && !c.ioc.stopped() && clock::now() < deadline) c.ioc.run_one_until(deadline);
  return {first, second};
}

#ifdef TOKENTAP_DRAIN_READS

// The receive operation itself, performed the way the reactor does; with `rx`, a read that
// also stores the receive stamp of its bytes there.
net::detail::reactor_op::status perform(connected& c, std::size_t size, read_result& r,
                                        std::int64_t* rx = nullptr) {
  static char buf[64];
  net::detail::reactive_socket_recv_op_base<drain_buffer> op(
      error_code{}, c.sock().native_handle(), net::detail::socket_ops::stream_oriented,
      drain_buffer(buf, size, rx), 0, nullptr);
  const auto status = op.perform();
  r = {op.ec_, op.bytes_transferred_};
  return status;
}

// Both ways of reading (recv; recvmsg for the stamp) report the same statuses.
class DrainReadStatus : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(RecvAndStamped, DrainReadStatus, ::testing::Bool());

TEST_P(DrainReadStatus, AShortReadOrTheEndDrainedTheSocketAFullReadOrAnErrorDidNot) {
  using op = net::detail::reactor_op;
  connected c;
  c.sock().non_blocking(true);
  std::int64_t stamp = 0;
  const auto perform = [&, stamped = GetParam()](connected& on, std::size_t size,
                                                 read_result& out) {
    return proxy::perform(on, size, out, stamped ? &stamp : nullptr);
  };
  read_result r;
  EXPECT_EQ(perform(c, 8, r), op::not_done) << "nothing to read: wait for the reactor";
  c.send("abc");
  EXPECT_EQ(perform(c, 8, r), op::done_and_exhausted);
  EXPECT_EQ(r.n, 3u);
  EXPECT_FALSE(r.ec);
  c.send("0123456789");
  EXPECT_EQ(perform(c, 8, r), op::done) << "a full buffer: more may be waiting";
  EXPECT_EQ(r.n, 8u);
  EXPECT_EQ(perform(c, 8, r), op::done_and_exhausted);
  EXPECT_EQ(r.n, 2u);
  c.send("xy");
  c.reset();
  c.await_hangup();
  EXPECT_EQ(perform(c, 8, r), op::done_and_exhausted) << "data before the reset comes first";
  EXPECT_EQ(r.n, 2u);
  EXPECT_EQ(perform(c, 8, r), op::done) << "an error: the next read reports it again";
  EXPECT_EQ(r.ec, net::error::connection_reset);
  EXPECT_EQ(perform(c, 8, r), op::done_and_exhausted) << "the end, as Asio's own rule has it";
  EXPECT_EQ(r.ec, net::error::eof);
}

// The stamp is when the kernel received the bytes, not when they were read; none (-1) from a
// socket that did not ask for stamps.
TEST(DrainReadStamp, AReadWithASlotGetsTheKernelsReceiveTimeOfItsBytes) {
  using namespace std::chrono;
  read_result r;
  {
    connected c;
    c.sock().non_blocking(true);
    std::int64_t stamp = 0;
    c.send("abc");
    ASSERT_EQ(perform(c, 8, r, &stamp), net::detail::reactor_op::done_and_exhausted);
    EXPECT_EQ(r.n, 3u);
    EXPECT_EQ(stamp, -1) << "stamps were not asked for";
  }
  connected c;
  c.sock().non_blocking(true);
  ASSERT_TRUE(enable_rx_stamps(c.sock().native_handle()));
  std::int64_t stamp = -1;
  // Linux turns stamping on from a work item after the first socket asks: until it is on.
  for (int i = 0; i < 200 && stamp < 0; ++i) {
    c.send("x");
    ASSERT_NE(perform(c, 8, r, &stamp), net::detail::reactor_op::not_done);
    if (stamp < 0) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GE(stamp, 0) << "the kernel never stamped";
  const auto sent = realtime_ns();
  c.send("abc");
  std::this_thread::sleep_for(30ms);
  ASSERT_EQ(perform(c, 8, r, &stamp), net::detail::reactor_op::done_and_exhausted);
  const auto read = realtime_ns();
  EXPECT_EQ(r.n, 3u);
  EXPECT_GE(stamp, sent - 1'000'000) << "an older stamp";
  EXPECT_LE(stamp, read - 25'000'000) << "the read's time, not the bytes' arrival";
}

// What the watch is for, shown without it: after a short read the next read waits for an edge
// without trying, and a FIN that came with the data raises none.  (A plain buffer's read tries
// first and sees the end at once.)
TEST(DrainRead, WithoutTheWatchAReadAfterTheLastDataMissesAHangupThatCameWithIt) {
  {
    connected c;
    const auto [first, second] = data_then_hangup<drain_buffer>(c, false, 300ms);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->n, 12u);
    EXPECT_FALSE(second) << "the second read tried first after all";
  }
  {
    connected c;
    const auto [first, second] = data_then_hangup<net::mutable_buffer>(c, false, 300ms);
    ASSERT_TRUE(first);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->ec, net::error::eof);
  }
}

#endif  // TOKENTAP_DRAIN_READS

TEST(HangupWatch, AFinOrResetThatCameWithTheLastDataEndsTheReadWaitingAfterIt) {
  for (const bool rst : {false, true}) {
    SCOPED_TRACE(rst ? "RST" : "FIN");
    connected c;
    auto& watch = net::use_service<hangup_watch>(c.ioc);
    ASSERT_TRUE(watch.watch(c.conn));
    const auto [first, second] = data_then_hangup<drain_buffer>(c, rst, 2s);
    ASSERT_TRUE(first);
    EXPECT_EQ(first->n, 12u);
    ASSERT_TRUE(second) << "the read after the last data never saw the hangup";
    EXPECT_EQ(second->ec,
              rst ? error_code(net::error::connection_reset) : error_code(net::error::eof));
    EXPECT_TRUE(c.conn.peer_closed);
    EXPECT_EQ(watch.hangups(), 1u);
  }
}

TEST(HangupWatch, DataAloneNeverWakesTheWatch) {
  connected c;
  auto& watch = net::use_service<hangup_watch>(c.ioc);
  ASSERT_TRUE(watch.watch(c.conn));
  static char buf[64];
  std::size_t got = 0;
  for (int i = 0; i < 20; ++i) {
    c.sock().async_read_some(drain_buffer(buf, sizeof buf),
                             [&](error_code ec, std::size_t n) { got += ec ? 0 : n; });
    c.send("data: x\n\n");
    c.ioc.run_for(100ms);
    c.ioc.restart();
  }
  EXPECT_EQ(got, 20u * 9);
  EXPECT_EQ(watch.hangups(), 0u);
  EXPECT_FALSE(c.conn.peer_closed);
}

// An idle pooled connection the peer closed is closed at once (the pool drops it when it next
// looks), and the watch's own wait never keeps the loop running: the worker's loop ends with its
// sessions.
TEST(HangupWatch, AnIdleConnectionIsClosedAndTheWatchDoesNotKeepTheLoopRunning) {
  connected c;
  auto& watch = net::use_service<hangup_watch>(c.ioc);
  ASSERT_TRUE(watch.watch(c.conn));
  c.conn.idle = true;
  c.fin();
  c.await_hangup();
  // Work of its own (a timer) keeps the loop running long enough for the watch to report.
  steady_timer t(c.ioc.get_executor(), 300ms);
  t.async_wait([](error_code) {});
  const auto t0 = clock::now();
  c.ioc.run();  // returns once the timer is done: the watch is no work
  EXPECT_LT(clock::now() - t0, 2s);
  EXPECT_TRUE(c.conn.peer_closed);
  EXPECT_FALSE(c.sock().is_open()) << "left in CLOSE_WAIT";
  EXPECT_EQ(watch.hangups(), 1u);
}

}  // namespace
}  // namespace tokentap::proxy
