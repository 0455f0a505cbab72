#pragma once
// Reading a client's requests, one at a time, off a keep-alive connection: a template on the
// stream so that the session runs it on its socket and the unit tests on Beast's test streams
// (test/proxy/request_reader_test.cpp: every read size, pipelining, 100-continue, limits,
// failures at every operation).  Private to the proxy.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string_view>

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "config/config.hpp"
#include "net/net.hpp"

namespace tokentap::proxy {

/// The deadline of the stream's next operations, for streams that have one (Beast's
/// tcp_stream); a stream without (a test stream) is not timed.
template <class Stream>
void expire_after(Stream& s, clock::duration d) {
  if constexpr (requires { s.expires_after(d); }) s.expires_after(d);
}
template <class Stream>
void expire_never(Stream& s) {
  if constexpr (requires { s.expires_never(); }) s.expires_never();
}

/// Waits for the first byte of the next request on `s` (into `buf`, unless a pipelined request
/// is already there), for at most `wait`.  False: the connection is done — closed, reset or idle
/// past `wait`; no request to answer.
template <class Stream>
awaitable<bool> await_request(Stream& s, beast::flat_buffer& buf, clock::duration wait) {
  if (buf.size() > 0) co_return true;
  expire_after(s, wait);
  error_code ec;
  const auto n = co_await s.async_read_some(buf.prepare(4096), use_ec(ec));
  if (ec) co_return false;
  buf.commit(n);
  co_return true;
}

/// Reads one request from `s` (its first bytes in `buf`, see await_request) into `req`: the
/// head within timeouts.client_header (a byte-per-second client is cut off), a `100 Continue`
/// when the client waits for one, the body within the longer of client_header and idle.  False
/// with `ec` set: a request to reject (header_limit → 431, body_limit → 413, malformed → 400) or
/// a client that failed or left mid-request.  Bytes after the request (pipelined) stay in `buf`.
/// Its own coroutine so that the parser (~0.5 KiB with its buffers) lives only while the request
/// is read, not in the caller's frame for the whole response.
template <class Stream>
awaitable<bool> read_request(Stream& s, beast::flat_buffer& buf,
                             const config::timeouts_config& timeouts,
                             const config::limits_config& limits,
                             beast::http::request<beast::http::string_body>& req, error_code& ec) {
  namespace http = beast::http;
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(limits.max_request_header_bytes));
  parser.body_limit(limits.max_request_body_bytes);
  expire_after(s, timeouts.client_header);
  co_await http::async_read_header(s, buf, parser, use_ec(ec));
  if (ec) co_return false;

  if (parser.get()[http::field::expect] == "100-continue" && !parser.is_done()) {
    static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
    co_await asio::async_write(s, asio::buffer(cont), use_ec(ec));
    if (ec) co_return false;
  }
  if (!parser.is_done()) {
    expire_after(s, std::max(timeouts.client_header, timeouts.idle));
    co_await http::async_read(s, buf, parser, use_ec(ec));
    if (ec) co_return false;
  }
  expire_never(s);
  req = parser.release();
  // Nothing pipelined behind this request: give the read buffer back for the (possibly long)
  // response; the next request allocates again.
  if (buf.size() == 0) buf.shrink_to_fit();
  co_return true;
}

}  // namespace tokentap::proxy
