#include "net/http_server.hpp"

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "net/http_rules.hpp"

namespace tokentap::net {

template <class Stream>
awaitable<void> http_connection<Stream>::run(std::shared_ptr<http_connection> self) {
  co_await self->serve();
  self->close();
}

template <class Stream>
awaitable<void> http_connection<Stream>::serve() {
  error_code ec;
  if constexpr (std::is_same_v<Stream, tls_stream>) {
    lowest().expires_after(limits_.handshake_timeout);
    co_await stream_.async_handshake(asio::ssl::stream_base::server, use_ec(ec));
    if (ec) co_return;
  }
  beast::flat_buffer buf;
  while (!draining_ && !closed_) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(limits_.header_limit);
    parser.body_limit(limits_.body_limit);
    idle_ = true;
    lowest().expires_after(limits_.idle_timeout);
    co_await http::async_read(stream_, buf, parser, use_ec(ec));
    idle_ = false;
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      // Answered, then closed: the rest of the oversized request is never read.
      const bool body = ec == http::error::body_limit;
      http_request head;
      head.version(parser.get().version());
      head.keep_alive(false);
      lowest().expires_after(std::chrono::seconds(5));
      co_await reply(
          head, body ? 413 : 431,
          error_body(body ? 413 : 431, body ? "request_too_large" : "request_header_too_large",
                     body ? "the request body is larger than this server accepts"
                          : "the request head is larger than this server accepts"));
      co_return;
    }
    if (ec) co_return;
    if (limits_.reply_timeout.count() > 0) {
      lowest().expires_after(limits_.reply_timeout);
    } else {
      lowest().expires_never();
    }
    auto req = parser.release();
    const bool keep = co_await responder_(*this, req);
    if (!keep || !req.keep_alive()) co_return;
  }
}

template <class Stream>
awaitable<bool> http_connection<Stream>::reply(const http_request& req,
                                               http::response<http::string_body> res) {
  res.version(req.version());
  res.keep_alive(req.keep_alive() && !draining_);
  res.prepare_payload();
  error_code ec;
  co_await http::async_write(stream_, res, use_ec(ec));
  co_return !ec && res.keep_alive();
}

template <class Stream>
awaitable<bool> http_connection<Stream>::reply(const http_request& req, unsigned status,
                                               std::string body, std::string_view content_type) {
  http::response<http::string_body> res{static_cast<http::status>(status), req.version()};
  res.set(http::field::content_type, content_type);
  res.body() = std::move(body);
  co_return co_await reply(req, std::move(res));
}

template <class Stream>
awaitable<bool> http_connection<Stream>::write_chunked_head(const http_request& req,
                                                            http::response<http::empty_body>& res) {
  res.version(req.version());
  res.chunked(true);
  res.keep_alive(req.keep_alive() && !draining_);
  http::response_serializer<http::empty_body> sr{res};
  error_code ec;
  co_await http::async_write_header(stream_, sr, use_ec(ec));
  co_return !ec;
}

template <class Stream>
awaitable<bool> http_connection<Stream>::write_chunk(std::string_view bytes) {
  error_code ec;
  co_await asio::async_write(stream_, http::make_chunk(asio::buffer(bytes.data(), bytes.size())),
                             use_ec(ec));
  co_return !ec;
}

template <class Stream>
awaitable<bool> http_connection<Stream>::write_last_chunk() {
  error_code ec;
  co_await asio::async_write(stream_, http::make_chunk_last(), use_ec(ec));
  co_return !ec;
}

template <class Stream>
void http_connection<Stream>::watch_for_hangup(std::function<void()> on_gone) {
  on_gone_ = std::move(on_gone);
  arm_hangup_watch();
}

template <class Stream>
void http_connection<Stream>::arm_hangup_watch() {
  watching_ = true;
  lowest().socket().async_wait(
      tcp::socket::wait_read, [self = this->shared_from_this()](error_code ec) {
        if (!self->watching_ || ec == asio::error::operation_aborted) return;
        self->watching_ = false;
        if (!ec) {
          // Readable: a pipelined request (bytes) is not a hangup; end of stream or an error is.
          char byte;
          const auto n =
              ::recv(self->lowest().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
          if (n > 0) return;
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            self->arm_hangup_watch();
            return;
          }
        }
        if (self->client_gone_) return;
        self->client_gone_ = true;
        if (self->on_gone_) self->on_gone_();
        if (self->timer_) self->timer_->cancel();
      });
}

template <class Stream>
void http_connection<Stream>::stop_watching() noexcept {
  if (!watching_) return;
  watching_ = false;
  error_code ignored;
  lowest().socket().cancel(ignored);
}

template <class Stream>
void http_connection<Stream>::reset() noexcept {
  error_code ignored;
  auto& s = lowest().socket();
  s.set_option(asio::socket_base::linger(true, 0), ignored);  // RST, not FIN
  s.close(ignored);
  closed_ = true;
}

template <class Stream>
void http_connection<Stream>::drain() noexcept {
  draining_ = true;
  if (idle_) close();
}

template <class Stream>
void http_connection<Stream>::close() noexcept {
  if (timer_) timer_->cancel();
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
  lowest().socket().close(ignored);
}

template class http_connection<tcp_stream>;
template class http_connection<tls_stream>;

namespace {

template <class Stream, class... StreamArgs>
void spawn(worker& w, const http_server_limits& limits, http_responder<Stream> responder,
           StreamArgs&&... args) {
  auto c = std::make_shared<http_connection<Stream>>(w, limits, std::move(responder),
                                                     std::forward<StreamArgs>(args)...);
  asio::co_spawn(w.ioc, http_connection<Stream>::run(std::move(c)),
                 [](std::exception_ptr e) { log_escaped_exception(e, "http connection"); });
}

}  // namespace

void serve_http(tcp_socket socket, worker& w, const http_server_limits& limits,
                http_responder<tcp_stream> responder) {
  spawn<tcp_stream>(w, limits, std::move(responder), std::move(socket));
}

void serve_https(tcp_socket socket, worker& w, asio::ssl::context& tls,
                 const http_server_limits& limits, http_responder<tls_stream> responder) {
  spawn<tls_stream>(w, limits, std::move(responder), std::move(socket), tls);
}

}  // namespace tokentap::net
