#pragma once
// One attempt's request and response head on an upstream connection: a template on the stream so
// that the session runs it on its sockets (plain TCP or TLS) and the unit tests on Beast's test
// streams (test/proxy/attempt_io_test.cpp: heads, interim responses, gateway failures, resets,
// timeouts, a stale kept-alive connection, every endpoint out, a client gone).  Where the
// request goes after a failure and what each attempt says of its endpoint is decided by the
// exchange's attempts (attempts.hpp).  Private to the proxy.
#include <array>
#include <cstdint>
#include <limits>
#include <optional>

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>

#include "net/net.hpp"
#include "proxy/exchange.hpp"

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

}  // namespace tokentap::proxy
