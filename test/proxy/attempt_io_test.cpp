// One attempt's request and response head on Beast's test streams, the exchange's attempts on
// real clusters deciding where it goes next: a head is taken (interim answers skipped, its
// outcome reported), a 502/503/429 moves the request while another endpoint can take it and is
// forwarded when none can, a reset or a timeout before the head moves it or fails it when every
// endpoint is out, a stale kept-alive connection is tried again, a client that left ends it.
// Then the attempts' loop over a scripted connector (kept-alive and new connections, refused and
// timed-out connects) and over the proxy's real pool on a port nobody listens on, and the answer
// the client gets when the attempts end without a head.
#include "proxy/attempt_io.hpp"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/_experimental/test/stream.hpp>

#include <deque>
#include <string>
#include <vector>

#include "net/net.hpp"
#include "test/proxy/upstreams.hpp"
#include "test/support/http_client.hpp"

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

// ---------------------------------------------------------------- the attempts' loop

// A connection the scripted connector hands out: a Beast test stream whose far end has answered.
struct scripted_connection {
  scripted_connection(asio::io_context& ioc, std::string_view answer) : s(ioc), far(ioc) {
    s.connect(far);
    s.append(answer);
    far.close();
  }
  template <class F>
  decltype(auto) visit(F&& f) {
    return f(s);
  }
  test_stream s, far;
  beast::flat_buffer buffer;
};

// What the connector does at each attempt, in order.
struct step {
  enum how_t { kept, fresh, refused, timed_out } how;
  std::string answer = {};
};

// Hands out connections as its script says, and notes which endpoint each attempt went to
// ("kept a:1", "new b:2", "refused a:1").
struct scripted_connector {
  using connection = scripted_connection;

  scripted_connector(asio::io_context& c, std::deque<step> s) : ioc(c), script(std::move(s)) {}

  std::unique_ptr<connection> take(const cluster&, const endpoint& e) {
    if (script.empty() || script.front().how != step::kept) return nullptr;
    journal.push_back("kept " + e.label);
    return next();
  }

  awaitable<std::unique_ptr<connection>> connect(const cluster&, const endpoint& e, error_code& ec,
                                                 connect_failure& why,
                                                 std::chrono::milliseconds within) {
    EXPECT_EQ(within.count(), 250);
    if (leaves_during_connect) *leaves_during_connect = true;
    const auto how = script.empty() ? step::refused : script.front().how;
    if (how == step::refused || how == step::timed_out) {
      if (!script.empty()) script.pop_front();
      journal.push_back((how == step::refused ? "refused " : "timed out ") + e.label);
      ec = how == step::refused ? error_code(asio::error::connection_refused)
                                : error_code(beast::error::timeout);
      why = how == step::refused ? connect_failure::connect : connect_failure::timeout;
      co_return nullptr;
    }
    journal.push_back("new " + e.label);
    co_return next();
  }

  std::unique_ptr<connection> next() {
    auto s = std::move(script.front());
    script.pop_front();
    return std::make_unique<connection>(ioc, s.answer);
  }

  asio::io_context& ioc;
  std::deque<step> script;
  std::vector<std::string> journal;
  bool* leaves_during_connect = nullptr;  // the client leaves while a connect is under way
};

const char* const ok_head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";

// The exchange's attempts until a head, on the connector.
template <class Connector>
attempts_end<typename Connector::connection> attempt_all(attempt& a, Connector& connector,
                                                         asio::io_context& ioc) {
  std::optional<attempts_end<typename Connector::connection>> out;
  typename Connector::connection* in_use = nullptr;
  asio::co_spawn(
      ioc,
      [&]() -> awaitable<void> {
        out = co_await attempt_until_head(connector, a.ex, a.parser, {8192, config::ms(250)},
                                          a.client_gone, in_use, [&](auto&) { ++a.armed; });
      },
      asio::detached);
  ioc.run();
  EXPECT_EQ(in_use, nullptr) << "no connection is named in use once they ended";
  return std::move(out.value());
}

TEST(AttemptLoop, ARefusedConnectMovesTheRequestToAnEndpointThatAnswers) {
  const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  asio::io_context ioc;
  scripted_connector conn{ioc, {{step::refused}, {step::fresh, ok_head}}};
  const auto first = a.ex.upstream_endpoint->label;
  const auto end = attempt_all(a, conn, ioc);
  ASSERT_EQ(end.kind, end.head);
  ASSERT_NE(end.conn, nullptr);
  EXPECT_EQ(a.parser->get().result_int(), 200u);
  const auto second = first == "a:1" ? "b:2" : "a:1";
  EXPECT_EQ(conn.journal,
            (std::vector<std::string>{"refused " + first, std::string("new ") + second}));
  EXPECT_EQ(end.connects, 1u);
  EXPECT_EQ(end.connect_failures, 1u);
  EXPECT_EQ(end.reuses, 0u);
  EXPECT_EQ(c.retries(retry_reason::connect), 1u);
  EXPECT_EQ(c.endpoints()[first == "a:1" ? 0 : 1]->consecutive_failures.load(), 1u)
      << "a refused connect is the endpoint's failure";
  EXPECT_FALSE(a.ex.reused_connection);
  EXPECT_GE(a.ex.marks.connected, a.ex.marks.attempt);
}

TEST(AttemptLoop, EveryEndpointRefusingIsUnreachableAndAnsweredAs502) {
  for (const auto how : {step::refused, step::timed_out}) {
    const bool timeout = how == step::timed_out;
    SCOPED_TRACE(timeout ? "timed out" : "refused");
    const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 3);
    cluster c(up, 0, nullptr);
    attempt a(c);
    asio::io_context ioc;
    scripted_connector conn{ioc, {{how}, {how}}};
    const auto end = attempt_all(a, conn, ioc);
    ASSERT_EQ(end.kind, end.unreachable);
    EXPECT_EQ(conn.journal.size(), 2u) << "each endpoint once, whatever the retries allow";
    EXPECT_EQ(end.connect_failures, 2u);
    EXPECT_EQ(end.why, timeout ? connect_failure::timeout : connect_failure::connect);
    EXPECT_EQ(a.ex.marks.connected, -1) << "no connection: no connected mark";
    const auto reply = reply_to(end, "fleet");
    EXPECT_EQ(reply.status, 502u);
    EXPECT_EQ(reply.type, "upstream_connect_error");
    EXPECT_EQ(reply.outcome,
              timeout ? hooks::stream_outcome::timeout : hooks::stream_outcome::upstream_error);
    EXPECT_EQ(reply.tap_reason, timeout ? "timeout" : "connect");
    EXPECT_TRUE(reply.message.starts_with(timeout ? "cannot reach upstream 'fleet': timeout: "
                                                  : "cannot reach upstream 'fleet': connect: "))
        << reply.message;
  }
}

TEST(AttemptLoop, AStaleKeptAliveConnectionIsTriedOnceMoreOnANewOneToTheSameEndpoint) {
  const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  asio::io_context ioc;
  // Kept-alive, closed by the upstream while idle: again on a new connection, which is stale
  // too — a new connection's failure is the endpoint's, and the request moves.
  scripted_connector conn{ioc, {{step::kept, ""}, {step::fresh, ""}, {step::fresh, ok_head}}};
  const auto first = a.ex.upstream_endpoint->label;
  const auto end = attempt_all(a, conn, ioc);
  ASSERT_EQ(end.kind, end.head);
  const auto second = first == "a:1" ? "b:2" : "a:1";
  EXPECT_EQ(conn.journal, (std::vector<std::string>{"kept " + first, "new " + first,
                                                    std::string("new ") + second}));
  EXPECT_EQ(end.reuses, 1u);
  EXPECT_EQ(end.connects, 2u);
  EXPECT_EQ(c.retries(retry_reason::reset), 1u) << "the stale retry is no retry of the budget's";
}

TEST(AttemptLoop, AFailureBeforeTheHeadWithNowhereToGoIsAnsweredAsItFailed) {
  const auto up = upstream_of("fleet", {"http://a:1"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  asio::io_context ioc;
  scripted_connector conn{ioc, {{step::fresh, ""}}};  // closed without a byte
  const auto end = attempt_all(a, conn, ioc);
  ASSERT_EQ(end.kind, end.failed);
  EXPECT_EQ(end.conn, nullptr);
  EXPECT_EQ(std::string(end.what), "reading the response head");
  const auto reply = reply_to(end, "fleet");
  EXPECT_EQ(reply.status, 502u);
  EXPECT_EQ(reply.outcome, hooks::stream_outcome::upstream_reset);
  EXPECT_EQ(reply.type, "upstream_reset");
  EXPECT_EQ(reply.tap_reason, "reset");
  EXPECT_TRUE(reply.message.starts_with("upstream 'fleet' failed reading the response head: "))
      << reply.message;
  // A timeout is answered 504; a head cut short or garbled is a protocol error.
  attempts_end<scripted_connection> timed_out;
  timed_out.ec = beast::error::timeout;
  timed_out.what = "reading the response head";
  const auto r504 = reply_to(timed_out, "fleet");
  EXPECT_EQ(r504.status, 504u);
  EXPECT_EQ(r504.type, "upstream_timeout");
  EXPECT_EQ(r504.outcome, hooks::stream_outcome::timeout);
  EXPECT_EQ(r504.message, "upstream 'fleet' did not respond in time (reading the response head)");
  for (const char* answer : {"HTTP/1.1 200 O", "HTTP/9 200 OK\r\n\r\n"}) {
    attempt b(c);
    scripted_connector cut{ioc, {{step::fresh, answer}}};
    ioc.restart();
    const auto garbled = attempt_all(b, cut, ioc);
    ASSERT_EQ(garbled.kind, garbled.failed) << answer;
    EXPECT_EQ(reply_to(garbled, "fleet").status, 502u);
    EXPECT_EQ(reply_to(garbled, "fleet").type, "upstream_protocol_error");
    EXPECT_EQ(reply_to(garbled, "fleet").outcome, hooks::stream_outcome::upstream_error);
  }
}

TEST(AttemptLoop, AClientThatLeavesDuringAConnectEndsThemThere) {
  const auto up = upstream_of("fleet", {"http://a:1", "http://b:2"}, 1);
  cluster c(up, 0, nullptr);
  attempt a(c);
  asio::io_context ioc;
  scripted_connector conn{ioc, {{step::refused}, {step::fresh, ok_head}}};
  conn.leaves_during_connect = &a.client_gone;
  const auto end = attempt_all(a, conn, ioc);
  EXPECT_EQ(end.kind, end.client_gone);
  EXPECT_EQ(conn.journal.size(), 1u);
  for (const auto& e : c.endpoints()) EXPECT_EQ(e->consecutive_failures.load(), 0u);
}

TEST(AttemptLoop, TheProxysPoolOnAPortNobodyListensOnIsRefused) {
  asio::io_context ioc;
  const auto url = "http://127.0.0.1:" + std::to_string(test::closed_port());
  const auto up = upstream_of("local", {url.c_str()}, 0);
  cluster c(up, 0, nullptr);
  attempt a(c);
  upstream_pool pool(ioc);
  upstream_connection* in_use = nullptr;
  std::optional<attempts_end<upstream_connection>> end;
  asio::co_spawn(
      ioc,
      [&]() -> awaitable<void> {
        end = co_await attempt_until_head(pool, a.ex, a.parser, {8192, config::ms(2000)},
                                          a.client_gone, in_use, [](upstream_connection&) {});
      },
      asio::detached);
  ioc.run();
  ASSERT_TRUE(end);
  ASSERT_EQ(end->kind, end->unreachable);
  EXPECT_EQ(end->why, connect_failure::connect);
  EXPECT_EQ(end->ec, asio::error::connection_refused) << end->ec.message();
  EXPECT_EQ(reply_to(*end, "local").message,
            "cannot reach upstream 'local': connect: " + end->ec.message());
  EXPECT_EQ(c.endpoints()[0]->consecutive_failures.load(), 1u);
}

}  // namespace
}  // namespace tokentap::proxy
