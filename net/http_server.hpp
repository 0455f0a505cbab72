#pragma once
// The keep-alive HTTP/1.1 server connection behind every listener but the proxy's own: the admin
// site, the simulator and `replay serve`.  It reads a request within its limits, hands it to the
// responder, and loops while both sides keep the connection; it drains and closes with the
// runtime.  Responders write simple answers with `reply` and streamed ones with the chunked
// writers; a responder that waits registers its timer so that a forced close wakes it.
//
// The proxy's client connections are not these: they relay bodies byte for byte and are timed
// per event (proxy/proxy_session.cpp).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "net/net.hpp"
#include "net/server_runtime.hpp"

namespace tokentap::net {

namespace http = boost::beast::http;
using http_request = http::request<http::string_body>;
using tls_stream = beast::ssl_stream<tcp_stream>;

struct http_server_limits {
  std::uint32_t header_limit = 16 * 1024;
  std::uint64_t body_limit = 64u << 20;
  /// How long a connection may sit between requests (and how long a request may take to arrive).
  std::chrono::seconds idle_timeout{120};
  /// Bound on writing one answer; zero for none (a stream's length is its responder's business).
  std::chrono::seconds reply_timeout{0};
  std::chrono::seconds handshake_timeout{10};
  listener_role role = listener_role::traffic;
};

template <class Stream>
class http_connection;

/// Answers one request; returns whether the connection may carry another one.  Runs on the
/// connection's worker thread.  Errors go through error_code: a responder does not throw.
template <class Stream>
using http_responder =
    std::function<awaitable<bool>(http_connection<Stream>& c, http_request& req)>;

/// One accepted connection.  Lives as long as its coroutine; owned by a shared_ptr.
template <class Stream>
class http_connection final : public session_base,
                              public std::enable_shared_from_this<http_connection<Stream>> {
 public:
  template <class... StreamArgs>
  http_connection(worker& w, const http_server_limits& limits, http_responder<Stream> responder,
                  StreamArgs&&... args)
      : session_base(w, limits.role),
        limits_(limits),
        responder_(std::move(responder)),
        stream_(std::forward<StreamArgs>(args)...) {}

  Stream& stream() noexcept { return stream_; }
  tcp_stream& lowest() noexcept { return beast::get_lowest_layer(stream_); }
  bool draining() const noexcept { return draining_; }
  bool closed() const noexcept { return closed_; }

  /// Writes a complete answer to `req`: Content-Length from the body, the connection kept only if
  /// the client asked for it and no drain began.  Returns whether the connection may go on.
  awaitable<bool> reply(const http_request& req, http::response<http::string_body> res);
  /// The common case of `reply`: a status, a content type and a body.
  awaitable<bool> reply(const http_request& req, unsigned status, std::string body,
                        std::string_view content_type = "application/json");

  /// A streamed answer: the head (chunked), then chunks, then the last chunk.  Each returns false
  /// when the write failed (the client left); the connection then ends.
  awaitable<bool> write_chunked_head(const http_request& req,
                                     http::response<http::empty_body>& res);
  awaitable<bool> write_chunk(std::string_view bytes);
  awaitable<bool> write_last_chunk();

  /// The timer a responder waits on, cancelled by a forced close or a noticed hangup; nullptr
  /// when it stops waiting.
  void waiting_on(steady_timer* t) noexcept { timer_ = t; }

  /// Notices the client closing while an answer is in progress (the client sends nothing then):
  /// calls `on_gone` once and cancels the registered timer.  Ends with `stop_watching`.
  void watch_for_hangup(std::function<void()> on_gone);
  void stop_watching() noexcept;
  bool client_gone() const noexcept { return client_gone_; }

  /// Ends the connection with a reset (RST) instead of a FIN.
  void reset() noexcept;

  void drain() noexcept override;
  void force_close() noexcept override { close(); }

  /// Runs the connection: the TLS handshake when there is one, then requests until either side
  /// ends it.
  static awaitable<void> run(std::shared_ptr<http_connection> self);

 private:
  awaitable<void> serve();
  void arm_hangup_watch();
  void close() noexcept;

  http_server_limits limits_;
  http_responder<Stream> responder_;
  Stream stream_;
  steady_timer* timer_ = nullptr;
  std::function<void()> on_gone_;
  bool idle_ = true, draining_ = false, closed_ = false, watching_ = false, client_gone_ = false;
};

extern template class http_connection<tcp_stream>;
extern template class http_connection<tls_stream>;

/// Serves an accepted plain-TCP connection on its worker.
void serve_http(tcp_socket socket, worker& w, const http_server_limits& limits,
                http_responder<tcp_stream> responder);
/// Serves an accepted connection over TLS (the context outlives the connection).
void serve_https(tcp_socket socket, worker& w, asio::ssl::context& tls,
                 const http_server_limits& limits, http_responder<tls_stream> responder);

}  // namespace tokentap::net
