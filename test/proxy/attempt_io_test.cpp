// One attempt's request and response head on Beast's test streams, the exchange's attempts on
// real clusters deciding where it goes next: a head is taken (interim answers skipped, its
// outcome reported), a 502/503/429 moves the request while another endpoint can take it and is
// forwarded when none can, a reset or a timeout before the head moves it or fails it when every
// endpoint is out, a stale kept-alive connection is tried again, a client that left ends it.
#include "proxy/attempt_io.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include <string>

#include "test/proxy/upstreams.hpp"

namespace tokentap::proxy {
namespace {

using test_stream = beast::test::stream;

using test::upstream_of;

const std::string body = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})";

// An exchange on the cluster's first pick, its request ready, and one attempt of it on a test
// stream whose far end sends `answer` (then closes, when `close`).
struct attempt {
  explicit attempt(cluster& c) {
    ex.upstream_cluster = &c;
    ex.upstream_endpoint = c.pick({});
    ex.in_flight.reset(ex.upstream_endpoint);
    http::request_header<> h;
    h.method(http::verb::post);
    h.target("/v1/chat/completions");
    h.version(11);
    h.set(http::field::content_type, "application/json");
    ex.request_body = body;
    ex.tries.begin(ex, c, std::move(h), body.size(), "10.0.0.9", true, nullptr);
  }

  head_outcome run(std::string_view answer, bool close = true, bool may_retry = false,
                   beast::test::fail_count* fails = nullptr) {
    asio::io_context ioc;
    test_stream up = fails ? test_stream(ioc, *fails) : test_stream(ioc);
    test_stream far(ioc);
    up.connect(far);
    up.append(answer);  // what the upstream answers, for `up` to read
    if (close) far.close();
    sent = ex.request_head + ex.request_body;  // what this attempt is to send
    std::optional<head_outcome> out;
    beast::flat_buffer buffer;
    asio::co_spawn(
        ioc,
        [&]() -> awaitable<void> {
          out = co_await request_and_head(up, buffer, parser, ex, 8192, may_retry, client_gone,
                                          [&] { ++armed; });
        },
        asio::detached);
    ioc.run();
    received = far.str();
    return out.value_or(head_outcome{head_outcome::failed});
  }

  exchange ex;
  std::optional<response_head_parser> parser;
  bool client_gone = false;
  int armed = 0;
  std::string sent, received;
};

TEST(AttemptIo, AHeadIsTakenAfterInterimAnswersAndTheRequestWentWhole) {
  const auto up = upstream_of("fleet", {"http://a:1/base"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  const auto r = a.run(
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\ndata:\r\n",
      false);
  ASSERT_EQ(r.verdict, head_outcome::head);
  EXPECT_EQ(a.parser->get().result_int(), 200u);
  EXPECT_EQ(a.parser->get()[http::field::content_type], "text/event-stream");
  EXPECT_EQ(a.received, a.sent);
  EXPECT_TRUE(a.received.starts_with("POST /base/v1/chat/completions HTTP/1.1\r\n")) << a.received;
  EXPECT_TRUE(a.received.ends_with(body));
  EXPECT_EQ(a.armed, 4) << "the write and every head read are timed";
  EXPECT_EQ(a.ex.tries.made(), 1u);
  EXPECT_EQ(a.ex.upstream_endpoint->consecutive_failures.load(), 0u);
}

TEST(AttemptIo, AGatewayFailureMovesTheRequestWhileAnotherEndpointCanTakeIt) {
  for (const char* status : {"502 Bad Gateway", "503 Service Unavailable", "429 Too Many"}) {
    SCOPED_TRACE(status);
    const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
    cluster c(up, 0, nullptr);
    attempt a(c);
    const auto* first = a.ex.upstream_endpoint;
    auto r = a.run(std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 2\r\n\r\n{}");
    ASSERT_EQ(r.verdict, head_outcome::moved);
    EXPECT_NE(a.ex.upstream_endpoint, first);
    EXPECT_EQ(first->consecutive_failures.load(), std::string(status).starts_with("429") ? 0u : 1u)
        << "429 is no gateway failure";
    // The next endpoint answers the same: nowhere left, so its answer is the client's.
    r = a.run(std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 2\r\n\r\n{}");
    ASSERT_EQ(r.verdict, head_outcome::head);
    EXPECT_EQ(a.parser->get().result_int(), std::stoul(status));
    EXPECT_NE(a.received.find("\r\nHost: b:2\r\n"), std::string::npos) << a.received;
  }
  // A 500 or a 504 is the upstream's answer: no move.
  for (const char* status : {"500 Internal Server Error", "504 Gateway Timeout"}) {
    const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
    cluster c(up, 0, nullptr);
    attempt a(c);
    EXPECT_EQ(a.run(std::string("HTTP/1.1 ") + status + "\r\nContent-Length: 0\r\n\r\n").verdict,
              head_outcome::head)
        << status;
    EXPECT_EQ(c.retries(retry_reason::status_503), 0u);
  }
}

TEST(AttemptIo, AResetBeforeTheHeadMovesTheRequestOrFailsWhenEveryEndpointIsOut) {
  const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 3);
  cluster c(up, 0, nullptr);
  attempt a(c);
  auto r = a.run("");  // closed without a byte
  ASSERT_EQ(r.verdict, head_outcome::moved);
  EXPECT_EQ(c.retries(retry_reason::reset), 1u);
  r = a.run("HTTP/1.1 200 O");  // closed mid-head
  ASSERT_EQ(r.verdict, head_outcome::failed);
  EXPECT_EQ(std::string(r.what), "reading the response head");
  EXPECT_TRUE(r.ec);
  for (const auto& e : c.endpoints()) EXPECT_EQ(e->consecutive_failures.load(), 1u) << e->label;
}

TEST(AttemptIo, ATimeoutIsItsOwnReasonWhereverItStrikes) {
  // The write times out: nothing reached the upstream.
  {
    const auto up = upstream_of("fleet", {"http://a:1"}, 1);
    cluster c(up, 0, nullptr);
    attempt a(c);
    beast::test::fail_count fails(0, beast::error::timeout);
    const auto r = a.run("", false, false, &fails);
    ASSERT_EQ(r.verdict, head_outcome::failed);
    EXPECT_EQ(r.ec, beast::error::timeout);
    EXPECT_EQ(std::string(r.what), "sending the request");
  }
  // The head read times out, with another endpoint to go to.
  {
    const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
    cluster c(up, 0, nullptr);
    attempt a(c);
    beast::test::fail_count fails(1, beast::error::timeout);
    ASSERT_EQ(a.run("", false, false, &fails).verdict, head_outcome::moved);
    EXPECT_EQ(c.retries(retry_reason::timeout), 1u);
  }
}

TEST(AttemptIo, AStaleKeptAliveConnectionIsTriedAgainOnlyWhenAllowed) {
  const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  const auto* first = a.ex.upstream_endpoint;
  EXPECT_EQ(a.run("", true, true).verdict, head_outcome::stale);
  EXPECT_EQ(a.ex.upstream_endpoint, first) << "the same endpoint, on a new connection";
  EXPECT_EQ(first->consecutive_failures.load(), 0u) << "a closed idle connection is no failure";
  EXPECT_EQ(a.run("", true, false).verdict, head_outcome::moved);
}

TEST(AttemptIo, AClientThatLeftEndsTheAttemptsWithoutBlamingTheEndpoint) {
  const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  a.client_gone = true;
  const auto r = a.run("");
  EXPECT_EQ(r.verdict, head_outcome::failed);
  EXPECT_EQ(a.ex.tries.made(), 1u);
  for (const auto& e : c.endpoints()) EXPECT_EQ(e->consecutive_failures.load(), 0u);
}

}  // namespace
}  // namespace tokentap::proxy
