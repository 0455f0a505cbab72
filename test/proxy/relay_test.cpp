// The relay of a response body on Beast's test streams: every read size and write size the
// kernel could hand out (down to one byte), failures injected at every operation (fail_count),
// an upstream that breaks, goes quiet or sends bad framing, a client that fails — the paths the
// real-socket tests (test/integration/relay_test.cpp) reach only by luck of timing.
#include "proxy/relay.hpp"

#include <gtest/gtest.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace tokentap::proxy {
namespace {

using hooks::stream_outcome;
using test_stream = beast::test::stream;

// An SSE body long enough to need many reads at small read sizes.
std::string sse_body(int events) {
  std::string s;
  for (int i = 0; i < events; ++i)
    s += "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token " + std::to_string(i) +
         "\"}}]}\n\n";
  return s;
}

// `payload` framed as chunks of the given sizes (cycled), with the terminating chunk.
std::string chunked(std::string_view payload, std::vector<std::size_t> sizes) {
  std::string out;
  std::size_t at = 0;
  for (std::size_t i = 0; at < payload.size(); ++i) {
    const auto n = std::min(sizes[i % sizes.size()], payload.size() - at);
    char hex[24];
    std::snprintf(hex, sizeof hex, "%zx", n);
    out += hex;
    out += i % 3 == 1 ? ";ext=1\r\n" : "\r\n";  // a chunk extension now and then
    out.append(payload.substr(at, n));
    out += "\r\n";
    at += n;
  }
  return out + "0\r\n\r\n";
}

// The payload of a chunked body (what a client's HTTP parser would deliver).
std::string dechunk(std::string_view framed) {
  auto d = parsers::http_body_decoder::chunked();
  std::string raw(framed), out;
  const auto p = d.decode(raw.data(), raw.size());
  EXPECT_EQ(d.failed(), parsers::http_body_decoder::error::none);
  out.append(raw.data() + p.offset, p.size);
  return out;
}

// Records what the tap is given: every read's bytes and times.
struct recording_tap final : hooks::stream_tap {
  void on_body(std::span<const char> bytes, const hooks::body_times& t) noexcept override {
    body.append(bytes.data(), bytes.size());
    times.push_back(t);
  }
  std::string body;
  std::vector<hooks::body_times> times;
};

// The relay's host as the session is to it, recording what the relay asks of it.
template <class Stream>
class basic_test_host final : public relay_host {
 public:
  basic_test_host(asio::io_context& ioc, const config::timeouts_config& t, Stream& client,
                  Stream& up)
      : relay_host(ioc.get_executor(), t), client_(client), up_(up) {}

  void client_lost(exchange& ex) override {
    ex.outcome = stream_outcome::client_disconnect;
    client_gone_ = true;
    ++lost;
    up_.close();
    close_client();
  }
  void close_client() noexcept override {
    client_closed = true;
    client_.close();
  }
  std::string_view peer() const noexcept override { return "test"; }

  void set_client_gone() { client_gone_ = true; }
  void set_forced() { forced_ = true; }
  std::size_t buffer_size() const { return relay_size_; }
  bool holds_buffer() const { return relay_buf_ != nullptr; }

  int lost = 0;
  bool client_closed = false;

 private:
  void cancel_client_io() noexcept override { client_.close(); }
  void cancel_upstream_io() noexcept override { up_.close(); }

  Stream& client_;
  Stream& up_;
};
using test_host = basic_test_host<test_stream>;

// One relay: an upstream stream to read, a client stream (and the peer reading what it is sent).
struct relay_run {
  explicit relay_run(std::string upstream_bytes, beast::test::fail_count* up_fails = nullptr,
                     beast::test::fail_count* client_fails = nullptr)
      : up(up_fails ? test_stream(ioc, *up_fails, upstream_bytes)
                    : test_stream(ioc, upstream_bytes)),
        client(client_fails ? test_stream(ioc, *client_fails) : test_stream(ioc)),
        client_peer(ioc) {
    client.connect(client_peer);
  }

  // Runs the relay to its end; the upstream closes after its bytes unless told otherwise.
  // `prepare` sets the host up as the session would have it (a client gone, a forced close).
  bool run(parsers::http_body_decoder body, bool chunked_out, bool upstream_closes = true,
           void (*prepare)(test_host&) = nullptr) {
    if (upstream_closes) up.close_remote();
    auto host = std::make_shared<test_host>(ioc, timeouts, client, up);
    if (prepare != nullptr) prepare(*host);
    host_ = host;
    decoder = body;
    bool completed = false, result = false;
    async_relay(*host, client, up, {early}, ex, decoder, chunked_out, [&](bool r) {
      completed = true;
      result = r;
    });
    ioc.run();
    EXPECT_TRUE(completed) << "the relay never completed";
    return result;
  }

  test_host& host() { return *host_; }
  std::string sent() { return std::string(client_peer.str()); }

  asio::io_context ioc;
  config::timeouts_config timeouts;
  test_stream up, client, client_peer;
  beast::flat_buffer early;
  exchange ex;
  parsers::http_body_decoder decoder = parsers::http_body_decoder::until_close();
  std::shared_ptr<test_host> host_;
};

TEST(Relay, AContentLengthBodyArrivesWholeWhateverTheReadAndWriteSizes) {
  const auto body = sse_body(12);
  for (std::size_t rs : {1u, 2u, 3u, 7u, 64u, 511u, 512u, 100000u}) {
    for (std::size_t ws : {1u, 5u, 100000u}) {
      SCOPED_TRACE("read_size " + std::to_string(rs) + " write_size " + std::to_string(ws));
      relay_run r(body);
      r.up.read_size(rs);
      r.client.write_size(ws);
      auto tap = std::make_unique<recording_tap>();
      auto* seen = tap.get();
      r.ex.tap = std::move(tap);
      EXPECT_TRUE(r.run(parsers::http_body_decoder::length(body.size()), false));
      EXPECT_EQ(r.sent(), body);
      EXPECT_EQ(r.ex.body_bytes, body.size());
      EXPECT_EQ(r.ex.outcome, stream_outcome::ok);
      EXPECT_TRUE(r.ex.first_byte.has_value());
      // The tap saw the same bytes, each read once, after it was written.
      EXPECT_EQ(seen->body, body);
      for (const auto& t : seen->times) {
        EXPECT_LE(t.arrived, t.read);
        EXPECT_LE(t.read, t.written);
      }
      if (rs == 1) {
        EXPECT_EQ(seen->times.size(), body.size());
      }
    }
  }
}

TEST(Relay, AChunkedUpstreamIsReframedForTheClientAtEveryReadSize) {
  const auto payload = sse_body(6);
  const auto framed = chunked(payload, {1, 17, 200, 3});
  for (std::size_t rs = 1; rs <= framed.size(); rs += rs < 40 ? 1 : 37) {
    SCOPED_TRACE("read_size " + std::to_string(rs));
    {
      relay_run r(framed);
      r.up.read_size(rs);
      ASSERT_TRUE(r.run(parsers::http_body_decoder::chunked(), true));
      EXPECT_EQ(dechunk(r.sent() + "0\r\n\r\n"), payload);  // the last chunk is the caller's
      EXPECT_EQ(r.ex.body_bytes, payload.size());
    }
    {
      // An HTTP/1.0 client: the payload as it is, ended by the close.
      relay_run r(framed);
      r.up.read_size(rs);
      ASSERT_TRUE(r.run(parsers::http_body_decoder::chunked(), false));
      EXPECT_EQ(r.sent(), payload);
    }
  }
}

TEST(Relay, BodyBytesThatCameWithTheHeadGoFirst) {
  const auto body = sse_body(5);
  for (std::size_t split : {1u, 10u, 300u}) {
    relay_run r(body.substr(split));
    const auto head_part = body.substr(0, split);
    r.early.commit(asio::buffer_copy(r.early.prepare(split), asio::buffer(head_part)));
    r.up.read_size(13);
    EXPECT_TRUE(r.run(parsers::http_body_decoder::length(body.size()), false));
    EXPECT_EQ(r.sent(), body);
    EXPECT_EQ(r.early.size(), 0u);
  }
}

TEST(Relay, ABodyEndedByTheCloseEndsCleanlyAtEof) {
  const auto body = sse_body(4);
  relay_run r(body);
  r.up.read_size(9);
  EXPECT_TRUE(r.run(parsers::http_body_decoder::until_close(), false));
  EXPECT_EQ(r.sent(), body);
  EXPECT_EQ(r.ex.outcome, stream_outcome::ok);
  EXPECT_FALSE(r.host().client_closed);
}

TEST(Relay, AnUpstreamThatClosesBeforeItsContentLengthTruncatesTheClient) {
  const auto body = sse_body(4);
  relay_run r(body.substr(0, body.size() / 2));
  EXPECT_FALSE(r.run(parsers::http_body_decoder::length(body.size()), false));
  EXPECT_EQ(r.sent(), body.substr(0, body.size() / 2));
  EXPECT_EQ(r.ex.outcome, stream_outcome::upstream_reset);
  EXPECT_TRUE(r.host().client_closed);  // a cut response must not look complete
}

TEST(Relay, AFailedUpstreamReadAtAnyPointTruncatesTheClientWithWhatCameBefore) {
  const auto body = sse_body(3);
  constexpr std::size_t read_size = 16;
  const auto reads = (body.size() + read_size - 1) / read_size;
  for (std::size_t n = 1; n <= reads; ++n) {
    SCOPED_TRACE("failing read " + std::to_string(n));
    beast::test::fail_count fails(n);  // the nth operation fails
    relay_run r(body, &fails);
    r.up.read_size(read_size);
    EXPECT_FALSE(r.run(parsers::http_body_decoder::length(body.size()), true));
    EXPECT_EQ(dechunk(r.sent() + "0\r\n\r\n"), body.substr(0, (n - 1) * read_size));
    EXPECT_EQ(r.ex.outcome, stream_outcome::upstream_reset);
    EXPECT_TRUE(r.host().client_closed);
  }
}

TEST(Relay, AFailedClientWriteAtAnyPointEndsTheExchangeAsTheClientsDisconnect) {
  const auto body = sse_body(3);
  for (std::size_t n = 1; n <= 12; ++n) {
    SCOPED_TRACE("failing write " + std::to_string(n));
    beast::test::fail_count fails(n);
    relay_run r(body, nullptr, &fails);
    r.up.read_size(50);
    r.client.write_size(7);  // partial writes: the rest of each read goes asynchronously
    EXPECT_FALSE(r.run(parsers::http_body_decoder::length(body.size()), false));
    EXPECT_EQ(r.ex.outcome, stream_outcome::client_disconnect);
    EXPECT_EQ(r.host().lost, 1);
    EXPECT_LT(r.ex.body_bytes, body.size());
    EXPECT_EQ(r.sent().substr(0, r.ex.body_bytes), body.substr(0, r.ex.body_bytes));
  }
}

// A read that fails is the upstream's fault only when nothing else explains it: a client the
// watcher saw leave (it closed the upstream), or our own shutdown grace period ending.
TEST(Relay, AReadErrorIsNotTheUpstreamsWhenTheClientLeftOrTheGracePeriodEnded) {
  struct test_case {
    void (*prepare)(test_host&);
    stream_outcome outcome;
  };
  for (const auto& [prepare, outcome] :
       {test_case{[](test_host& h) { h.set_client_gone(); }, stream_outcome::client_disconnect},
        test_case{[](test_host& h) { h.set_forced(); }, stream_outcome::timeout}}) {
    const auto body = sse_body(2);
    beast::test::fail_count fails(2);  // the second read fails
    relay_run r(body, &fails);
    r.up.read_size(30);
    EXPECT_FALSE(r.run(parsers::http_body_decoder::length(body.size()), false, true, prepare));
    EXPECT_EQ(r.ex.outcome, outcome);
  }
}

TEST(Relay, ASilentUpstreamTimesOutAfterTheIdleTimeout) {
  const auto body = sse_body(2);
  relay_run r(body);  // its bytes, then nothing: it never closes
  r.timeouts.idle = config::ms(30);
  const auto start = clock::now();
  EXPECT_FALSE(r.run(parsers::http_body_decoder::length(body.size() + 100), false, false));
  EXPECT_GE(clock::now() - start, std::chrono::milliseconds(30));
  EXPECT_EQ(r.sent(), body);
  EXPECT_EQ(r.ex.outcome, stream_outcome::timeout);
  EXPECT_TRUE(r.host().client_closed);
}

TEST(Relay, TheTotalDeadlineBoundsTheIdleTimeout) {
  relay_run r("");
  r.timeouts.idle = config::ms(60000);
  r.ex.deadline = clock::now() + std::chrono::milliseconds(20);
  EXPECT_FALSE(r.run(parsers::http_body_decoder::until_close(), false, false));
  EXPECT_EQ(r.ex.outcome, stream_outcome::timeout);
}

TEST(Relay, BadChunkFramingFromTheUpstreamIsAnUpstreamError) {
  for (const std::string& framed :
       {std::string("5\r\nhello\r\nzz\r\n"), std::string("5\r\nhelloXX3\r\nabc\r\n0\r\n\r\n")}) {
    relay_run r(framed);
    r.up.read_size(4);
    EXPECT_FALSE(r.run(parsers::http_body_decoder::chunked(), false));
    EXPECT_EQ(r.sent(), "hello");
    EXPECT_EQ(r.ex.outcome, stream_outcome::upstream_reset);
    EXPECT_TRUE(r.host().client_closed);
  }
}

TEST(Relay, AnEmptyBodyCompletesWithoutAReadOrAWrite) {
  relay_run r("never read");
  EXPECT_TRUE(r.run(parsers::http_body_decoder::length(0), false, false));
  EXPECT_EQ(r.sent(), "");
  EXPECT_FALSE(r.ex.first_byte.has_value());
}

TEST(Relay, ReadsThatFillTheBufferGrowItToTheMaximum) {
  const std::string body(relay_buffer_max * 3, 'x');
  relay_run r(body);
  EXPECT_TRUE(r.run(parsers::http_body_decoder::length(body.size()), false));
  EXPECT_EQ(r.sent(), body);
  EXPECT_EQ(r.host().buffer_size(), relay_buffer_max);
}

TEST(Relay, ReadsThatDoNotFillTheBufferLeaveItAsItIs) {
  const auto body = sse_body(40);
  relay_run r(body);
  r.up.read_size(relay_buffer_min - 1);
  EXPECT_TRUE(r.run(parsers::http_body_decoder::length(body.size()), false));
  EXPECT_EQ(r.host().buffer_size(), relay_buffer_min);
}

// Between two events a stream whose upstream reads are stamped (plain TCP, SO_TIMESTAMPNS) holds
// no relay buffer: the relay waits for the socket to be readable without one.  On real sockets,
// since only they are read that way.
TEST(Relay, AStampedStreamHoldsNoBufferBetweenItsEvents) {
  asio::io_context ioc;
  tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  tcp_socket up_server(ioc), up(ioc), client(ioc), client_peer(ioc);
  up.connect(acceptor.local_endpoint());
  acceptor.accept(up_server);
  client_peer.connect(acceptor.local_endpoint());
  acceptor.accept(client);
  ASSERT_TRUE(net::enable_rx_stamps(up.native_handle()));

  config::timeouts_config timeouts;
  exchange ex;
  auto tap = std::make_unique<recording_tap>();
  auto& seen = *tap;
  ex.tap = std::move(tap);
  beast::flat_buffer early;
  auto host = std::make_shared<basic_test_host<tcp_socket>>(ioc, timeouts, client, up);
  const std::string first = sse_body(1), second = sse_body(3).substr(first.size());
  auto body = parsers::http_body_decoder::length(first.size() + second.size());
  bool done = false, result = false;
  async_relay(*host, client, up, {early, true}, ex, body, false, [&](bool r) {
    done = true;
    result = r;
  });
  // Runs the relay until `until` holds (or two seconds pass).
  const auto run_until = [&](auto until) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (!until() && std::chrono::steady_clock::now() < give_up)
      ioc.run_one_for(std::chrono::milliseconds(10));
    return until();
  };

  asio::write(up_server, asio::buffer(first));
  ASSERT_TRUE(run_until([&] { return seen.body.size() == first.size() && !host->holds_buffer(); }))
      << "the relay still holds its buffer after the first event (" << seen.body.size()
      << " bytes tapped)";
  EXPECT_EQ(client_peer.available(), first.size());

  asio::write(up_server, asio::buffer(second));
  ASSERT_TRUE(run_until([&] { return done; }));
  EXPECT_TRUE(result);
  EXPECT_FALSE(host->holds_buffer());
  EXPECT_EQ(seen.body, first + second);
  std::string sent(first.size() + second.size(), '\0');
  asio::read(client_peer, asio::buffer(sent));
  EXPECT_EQ(sent, first + second);
  ASSERT_EQ(seen.times.size(), 2u);
  for (const auto& t : seen.times) EXPECT_LE(t.arrived, t.read);
}

}  // namespace
}  // namespace tokentap::proxy
