#pragma once
// The HTTP/1.1 clients of everything that is not the proxy's data path (whose upstream
// connections are proxy/upstream_pool's):
//  - `http_client`, the keep-alive client of `replay send` and the load generator: one plain-TCP
//    connection, a request written whole, the response head read, then its body piece by piece
//    as it arrives.  Reads go through rx_stamped_reader, so each piece carries when its bytes
//    reached the socket (the kernel's receive stamp) besides when the read completed: a client
//    measures the server's timing, not its own scheduling.
//  - `request_once`, one request and its whole answer on a new connection, plain or TLS, within
//    one timeout, for a thread of its own (the OTLP exporter's).
#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "net/net.hpp"

namespace tokentap::net {

using http_client_request = boost::beast::http::request<boost::beast::http::string_body>;
using http_client_response = boost::beast::http::response<boost::beast::http::string_body>;

/// Where `request_once` goes: `host` and `port`, over TLS when `tls` is set (SNI and the
/// certificate's name checked against `host`, as the context verifies).
struct once_target {
  std::string host;
  std::uint16_t port = 0;
  std::shared_ptr<boost::asio::ssl::context> tls;
};

/// Sends `req` on a new connection to `to` and reads its whole answer into `res` (a body up to
/// `body_limit` bytes), everything within `timeout`.  Blocks the calling thread, which runs an
/// io_context of its own: never call it on an I/O thread.  Returns why there is no answer
/// (resolving, connecting, the handshake, a write or a read failed; `timed_out`), or nothing.
error_code request_once(const once_target& to, const http_client_request& req,
                        std::chrono::milliseconds timeout, std::uint64_t body_limit,
                        http_client_response& res);

/// Body bytes as one read delivered them.
struct body_piece {
  std::size_t size = 0;      ///< bytes written to the caller's buffer
  std::int64_t read_ns = 0;  ///< the read completed (monotonic ns)
  /// When they reached the socket (monotonic ns, from the kernel's stamp); read_ns without one.
  std::int64_t arrived_ns = 0;
};

class http_client {
 public:
  explicit http_client(io_executor ex);
  ~http_client();
  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  bool is_open() const noexcept;
  /// Resolves and connects (TCP_NODELAY), within `timeout`.
  awaitable<error_code> connect(std::string_view host, std::uint16_t port,
                                std::chrono::milliseconds timeout);
  /// Writes `req` and reads the response head, each read after it bounded by `timeout` too.
  awaitable<error_code> send(http_client_request& req, std::chrono::milliseconds timeout);

  unsigned status() const noexcept;
  std::string_view header(std::string_view name) const;
  /// The response may be followed by another request on this connection.
  bool keep_alive() const noexcept;
  /// The response's body has been read whole.
  bool done() const noexcept;
  /// Reads the next body bytes (whatever arrived) into `into`.  A piece of size 0 with no error
  /// is the end of a body that ended on a framing boundary.
  awaitable<body_piece> read_some(std::span<char> into, error_code& ec);
  /// Closes the connection (the next connect opens a new one).
  void close() noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace tokentap::net
