#pragma once
// The attempts' I/O, up to a response head to relay: on each endpoint the exchange's attempts
// (attempts.hpp) name, a connection (a kept-alive one, else a new one), the request and the
// response head.  Templates on the stream and on the connector, so that the session runs them on
// its sockets and its pool (plain TCP or TLS) and the unit tests on Beast's test streams and on a
// scripted connector (test/proxy/attempt_io_test.cpp: heads, interim responses, gateway failures,
// refused and timed-out connects, resets, timeouts, a stale kept-alive connection, every endpoint
// out, a client gone).  Where the request goes after a failure and what each attempt says of its
// endpoint is decided by the attempts.  Private to the proxy.
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "base/clock.hpp"
#include "net/net.hpp"
#include "proxy/exchange.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

/// Errors on a reused kept-alive connection that mean "the upstream closed it while idle": the
/// request never reached a live server, so one retry on a fresh connection is safe.
inline bool is_stale_connection(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

inline retry_reason reason_of(const error_code& ec) noexcept {
  return ec == beast::error::timeout ? retry_reason::timeout : retry_reason::reset;
}

/// What an attempt's request and response head came to.
struct head_outcome {
  enum verdict_t {
    head,    ///< a response head to forward (its outcome reported): the parser holds it
    stale,   ///< a kept-alive connection the upstream had closed: again on a new connection
    moved,   ///< failed; the exchange now names another endpoint (attempts::fail_over)
    failed,  ///< failed before a head, nowhere left to go: `ec` and `what` say why
  };
  head_outcome(verdict_t v, error_code e = {}, const char* w = "") : verdict(v), ec(e), what(w) {}
  verdict_t verdict;
  error_code ec;
  const char* what;
};

using response_head_parser = http::response_parser<http::buffer_body>;

/// Writes the exchange's request (its head for the endpoint it is on, and its body, in one
/// gathered write) to `up` and reads the response head into `parser`, skipping interim 1xx
/// answers (100 Continue, 103 Early Hints).  A failure before a head, or a 502, 503 or 429 head
/// while another endpoint can take the request, moves it there; `may_retry`: a stale kept-alive
/// connection is worth one more try.  `client_gone` is read after every wait (the session's
/// watcher sets it).  `arm` sets the deadline of the next operation on streams that have one.
template <class Stream, class Arm>
awaitable<head_outcome> request_and_head(Stream& up, beast::flat_buffer& buffer,
                                         std::optional<response_head_parser>& parser, exchange& ex,
                                         std::size_t max_header_bytes, bool may_retry,
                                         const bool& client_gone, Arm arm) {
  error_code ec;
  arm();
  {
    const std::array<asio::const_buffer, 2> request{asio::buffer(ex.request_head),
                                                    asio::buffer(ex.request_body)};
    co_await asio::async_write(up, request, use_ec(ec));
  }
  const char* what = "sending the request";
  if (!ec) {
    what = "reading the response head";
    for (;;) {
      parser.emplace();
      parser->header_limit(static_cast<std::uint32_t>(max_header_bytes));
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // streams are long
      if (ex.head) parser->skip(true);
      arm();
      co_await http::async_read_header(up, buffer, *parser, use_ec(ec));
      if (ec) break;
      const auto code = parser->get().result_int();
      if (code < 100 || code >= 200 || code == 101) break;
    }
  }
  if (ec) {
    if (may_retry && !client_gone && is_stale_connection(ec))
      co_return head_outcome{head_outcome::stale};
    if (!client_gone)
      ex.tries.outcome(ex, *ex.upstream_cluster, *ex.upstream_endpoint, true,
                       to_string(reason_of(ec)));
    if (ex.tries.fail_over(ex, reason_of(ec), !client_gone))
      co_return head_outcome{head_outcome::moved};
    co_return head_outcome{head_outcome::failed, ec, what};
  }
  // An endpoint that cannot take the request now (overloaded, unavailable, its gateway failed):
  // another one may, while nothing has reached the client.  Its body is not read; the
  // connection goes.
  const auto code = parser->get().result_int();
  const bool gateway_failure = code == 502 || code == 503 || code == 504;
  if (code == 502 || code == 503 || code == 429) {
    const auto why = code == 429   ? retry_reason::status_429
                     : code == 502 ? retry_reason::status_502
                                   : retry_reason::status_503;
    auto& answered_by = *ex.upstream_cluster;
    auto& answered = *ex.upstream_endpoint;
    if (ex.tries.fail_over(ex, why, !client_gone)) {
      ex.tries.outcome(ex, answered_by, answered, gateway_failure, to_string(why), code);
      co_return head_outcome{head_outcome::moved};
    }
  }
  ex.tries.outcome(ex, *ex.upstream_cluster, *ex.upstream_endpoint, gateway_failure, {}, code);
  co_return head_outcome{head_outcome::head};
}

/// How an exchange's attempts ended.
template <class Connection>
struct attempts_end {
  enum kind_t {
    head,         ///< a response head to relay, in the parser, that came on `conn`
    client_gone,  ///< the client left while they were under way
    unreachable,  ///< the last endpoint could not be connected to (`why`, `ec`)
    failed,       ///< the last attempt failed before a head (`ec`, `what`)
  };
  kind_t kind = failed;
  std::unique_ptr<Connection> conn;
  error_code ec;
  const char* what = "";
  connect_failure why = connect_failure::none;
  // What they did, for the proxy's counters.
  unsigned connects = 0;          ///< new connections made
  unsigned reuses = 0;            ///< attempts on a kept-alive connection
  unsigned connect_failures = 0;  ///< connections that could not be made
};

/// What bounds the attempts: the response head's size, and each new connection's time.
struct attempt_limits {
  std::size_t max_header_bytes = 0;
  std::chrono::milliseconds connect{};
};

/// The exchange's attempts until a response head came or there is nowhere left to go.  Each
/// attempt goes to the endpoint the exchange names, on a kept-alive connection when `connector`
/// has one (tried once more on a new connection when it turns out stale), else on a new one; a
/// refused or timed-out connect moves the request like a failed attempt does (attempts.hpp).
/// `in_use` names the connection while an attempt is on it (the session closes it when the
/// client leaves); `client_gone` is read after every wait.  `arm(connection)` sets the deadline
/// of its next operation.
///
/// Connector: `take(cluster, endpoint)` -> std::unique_ptr<connection> or nullptr, and
/// `connect(cluster, endpoint, ec, why, within)` -> awaitable of one (nullptr with `ec` and
/// `why` set); a connection has `buffer` and `visit(f)`, which calls f with its stream.
template <class Connector, class Arm>
awaitable<attempts_end<typename Connector::connection>> attempt_until_head(
    Connector& connector, exchange& ex, std::optional<response_head_parser>& parser,
    attempt_limits limits, const bool& client_gone, typename Connector::connection*& in_use,
    Arm arm) {
  using connection = typename Connector::connection;
  attempts_end<connection> end;
  bool stale_retried = false;
  for (;;) {
    auto& c = *ex.upstream_cluster;  // (a fallback's after a move)
    auto& e = *ex.upstream_endpoint;
    ex.marks.attempt = base::mono_now_ns();
    ex.marks.connected = -1;
    auto conn = connector.take(c, e);
    ex.reused_connection = conn != nullptr;
    if (conn) {
      ++end.reuses;
    } else {
      error_code ec;
      connect_failure why{};
      conn = co_await connector.connect(c, e, ec, why, limits.connect);
      if (client_gone) {
        end.kind = end.client_gone;
        co_return end;
      }
      if (!conn) {
        ++end.connect_failures;
        ex.tries.outcome(ex, c, e, true, to_string(why));
        const auto reason =
            why == connect_failure::timeout ? retry_reason::timeout : retry_reason::connect;
        if (ex.tries.fail_over(ex, reason, true)) continue;
        end.kind = end.unreachable;
        end.ec = ec;
        end.why = why;
        co_return end;
      }
      ++end.connects;
    }
    ex.marks.connected = base::mono_now_ns();
    in_use = conn.get();
    const bool may_retry = ex.reused_connection && !stale_retried;
    const auto r = co_await conn->visit([&](auto& s) {
      return request_and_head(s, conn->buffer, parser, ex, limits.max_header_bytes, may_retry,
                              client_gone, [&] { arm(*conn); });
    });
    in_use = nullptr;
    switch (r.verdict) {
      case head_outcome::stale:
        stale_retried = true;
        continue;  // (the stale connection is dropped)
      case head_outcome::moved:
        continue;  // (and the failed one)
      case head_outcome::failed:
        end.kind = client_gone ? end.client_gone : end.failed;
        end.ec = r.ec;
        end.what = r.what;
        co_return end;
      case head_outcome::head:
        end.kind = end.head;
        end.conn = std::move(conn);
        co_return end;
    }
  }
}

/// What the client is answered when the attempts ended without a head (neither `head` nor
/// `client_gone`): the status, the error's type and message, the exchange's outcome, and the
/// reason the hooks are told.  `upstream` names the upstream of the last attempt.
struct failure_reply {
  unsigned status = 502;
  std::string_view type;
  std::string message;
  hooks::stream_outcome outcome = hooks::stream_outcome::upstream_error;
  std::string_view tap_reason;
};

template <class Connection>
failure_reply reply_to(const attempts_end<Connection>& end, std::string_view upstream) {
  using hooks::stream_outcome;
  const std::string name = "upstream '" + std::string(upstream) + "'";
  if (end.kind == end.unreachable) {
    const bool tls = end.why == connect_failure::tls;
    const bool timeout = end.why == connect_failure::timeout;
    return {
        502, tls ? "upstream_tls_error" : "upstream_connect_error",
        "cannot reach " + name + ": " + std::string(to_string(end.why)) + ": " + end.ec.message(),
        timeout ? stream_outcome::timeout : stream_outcome::upstream_error,
        tls       ? "tls"
        : timeout ? "timeout"
                  : "connect"};
  }
  if (end.ec == beast::error::timeout)
    return {504, "upstream_timeout",
            name + " did not respond in time (" + std::string(end.what) + ")",
            stream_outcome::timeout, "timeout"};
  const bool reset = is_stale_connection(end.ec);
  return {502, reset ? "upstream_reset" : "upstream_protocol_error",
          name + " failed " + std::string(end.what) + ": " + end.ec.message(),
          reset ? stream_outcome::upstream_reset : stream_outcome::upstream_error, "reset"};
}

}  // namespace tokentap::proxy
