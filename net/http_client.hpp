#pragma once
// The keep-alive HTTP/1.1 client of `replay send` and the load generator: one plain-TCP
// connection, a request written whole, the response head read, then its body piece by piece as
// it arrives.  Reads go through rx_stamped_reader, so each piece carries when its bytes reached
// the socket (the kernel's receive stamp) besides when the read completed: a client measures the
// server's timing, not its own scheduling.
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
