#include "net/http_client.hpp"

// g++ 12 false positive on coroutines of asio's awaitable<T, io_context::executor_type>: the
// frame's own operator new/delete pair (thread-local recycling) is reported as mismatched once
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <limits>
#include <optional>
#include <string>

#include <openssl/ssl.h>

#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "base/clock.hpp"
#include "net/rx_stamped_reader.hpp"

namespace tokentap::net {

namespace http = boost::beast::http;

struct http_client::impl {
  explicit impl(io_executor ex) : resolver(ex), ex(ex) {}
  tcp_resolver resolver;
  io_executor ex;
  std::optional<tcp_stream> stream;
  std::optional<rx_stamped_reader> rx;  // reads of `stream`, with the kernel's receive times
  beast::flat_buffer buf;
  std::optional<http::response_parser<http::buffer_body>> parser;
  std::chrono::milliseconds timeout{0};
};

http_client::http_client(io_executor ex) : impl_(std::make_unique<impl>(ex)) {}
http_client::~http_client() = default;

bool http_client::is_open() const noexcept {
  return impl_->stream.has_value();
}

awaitable<error_code> http_client::connect(std::string_view host, std::uint16_t port,
                                           std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  close();
  error_code ec;
  const auto results =
      co_await d.resolver.async_resolve(std::string(host), std::to_string(port), use_ec(ec));
  if (ec) co_return ec;
  d.stream.emplace(d.ex);
  d.stream->expires_after(timeout);
  co_await d.stream->async_connect(results, use_ec(ec));
  if (ec) {
    d.stream.reset();
    co_return ec;
  }
  d.stream->expires_never();
  error_code ignored;
  d.stream->socket().set_option(tcp::no_delay(true), ignored);
  d.rx.emplace(d.stream->socket());
  d.buf.clear();
  co_return ec;
}

awaitable<error_code> http_client::send(http_client_request& req,
                                        std::chrono::milliseconds timeout) {
  auto& d = *impl_;
  if (!d.stream) co_return asio::error::not_connected;
  d.timeout = timeout;
  d.parser.emplace();
  d.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
  error_code ec;
  d.stream->expires_after(timeout);
  co_await http::async_write(*d.stream, req, use_ec(ec));
  if (!ec) co_await http::async_read_header(*d.rx, d.buf, *d.parser, use_ec(ec));
  co_return ec;
}

unsigned http_client::status() const noexcept {
  return impl_->parser ? impl_->parser->get().result_int() : 0;
}

std::string_view http_client::header(std::string_view name) const {
  if (!impl_->parser) return {};
  return impl_->parser->get()[name];
}

bool http_client::keep_alive() const noexcept {
  return impl_->parser && impl_->parser->get().keep_alive();
}

bool http_client::done() const noexcept {
  return !impl_->parser || impl_->parser->is_done();
}

awaitable<body_piece> http_client::read_some(std::span<char> into, error_code& ec) {
  auto& d = *impl_;
  body_piece piece;
  ec = {};
  if (!d.parser || d.parser->is_done()) co_return piece;
  auto& body = d.parser->get().body();
  body.data = into.data();
  body.size = into.size();
  d.stream->expires_after(d.timeout);
  co_await http::async_read_some(*d.rx, d.buf, *d.parser, use_ec(ec));
  if (ec == http::error::need_buffer) ec = {};
  piece.size = into.size() - body.size;
  piece.read_ns = base::mono_now_ns();
  // When the bytes reached the socket (the last of them, if the read took several packets); bytes
  // that came with the head were received before this read began.
  piece.arrived_ns =
      d.rx->last_rx_ns() >= 0 ? std::min(d.rx->last_rx_ns(), piece.read_ns) : piece.read_ns;
  co_return piece;
}

void http_client::close() noexcept {
  auto& d = *impl_;
  d.parser.reset();
  d.rx.reset();
  if (d.stream) {
    error_code ignored;
    d.stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    d.stream->close();
    d.stream.reset();
  }
}

namespace {

// The answer's head, then its body: read apart, so that a Content-Length past the body limit is
// refused at the head (Boost 1.74's parser loses that error when it parses the body on in the
// same call, as async_read alone does).
template <class Stream>
awaitable<void> answer_on(Stream& s, const http_client_request& req, std::uint64_t body_limit,
                          http_client_response& res, error_code& ec) {
  http::response_parser<http::string_body> parser;
  parser.body_limit(body_limit);
  beast::flat_buffer buf;
  co_await http::async_write(s, req, use_ec(ec));
  if (!ec) co_await http::async_read_header(s, buf, parser, use_ec(ec));
  if (!ec && !parser.is_done()) co_await http::async_read(s, buf, parser, use_ec(ec));
  if (!ec) res = parser.release();
}

awaitable<void> exchange_on(const once_target& to, const http_client_request& req,
                            std::uint64_t body_limit, http_client_response& res, error_code& ec,
                            bool& done) {
  const auto ex = co_await asio::this_coro::executor;
  tcp_resolver resolver(ex);
  const auto results =
      co_await resolver.async_resolve(to.host, std::to_string(to.port), use_ec(ec));
  tcp_stream tcp(ex);
  if (!ec) co_await tcp.async_connect(results, use_ec(ec));
  if (!ec && !to.tls) {
    co_await answer_on(tcp, req, body_limit, res, ec);
  } else if (!ec) {
    beast::ssl_stream<tcp_stream> s(std::move(tcp), *to.tls);
    SSL_set_tlsext_host_name(s.native_handle(), to.host.c_str());
    s.set_verify_callback(asio::ssl::host_name_verification(to.host));
    co_await s.async_handshake(asio::ssl::stream_base::client, use_ec(ec));
    if (!ec) co_await answer_on(s, req, body_limit, res, ec);
  }
  done = true;
}

}  // namespace

error_code request_once(const once_target& to, const http_client_request& req,
                        std::chrono::milliseconds timeout, std::uint64_t body_limit,
                        http_client_response& res) {
  // What the coroutine writes through references outlives the io_context, whose destruction
  // destroys a frame that timed out.
  error_code ec;
  bool done = false;
  asio::io_context ioc(1);
  asio::co_spawn(ioc, exchange_on(to, req, body_limit, res, ec, done),
                 [](std::exception_ptr e) { log_escaped_exception(e, "request_once"); });
  ioc.run_for(timeout);  // (what is left is cancelled with the io_context)
  return done ? ec : error_code(asio::error::timed_out);
}

}  // namespace tokentap::net
