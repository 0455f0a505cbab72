#pragma once
// Keep-alive connections to the upstreams, one pool per I/O thread (no locks: a pool is only
// touched by its worker's thread).  Plain TCP and TLS connections share one type.
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <boost/asio/ssl/context.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "config/config.hpp"
#include "net/net.hpp"

namespace tokentap::proxy {

/// One connection to an upstream, with its read buffer (bytes read past a response stay with the
/// connection).
class upstream_connection {
 public:
  using plain_stream = tcp_stream;
  using tls_stream = beast::ssl_stream<tcp_stream>;

  explicit upstream_connection(io_executor ex);
  upstream_connection(io_executor ex, asio::ssl::context& ctx);

  tcp_stream& lowest() noexcept;
  bool is_tls() const noexcept { return std::holds_alternative<tls_stream>(stream_); }

  /// Calls f(stream) with the concrete stream type.
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(std::forward<F>(f), stream_);
  }

  beast::flat_buffer buffer;
  clock::time_point idle_since{};
  unsigned exchanges = 0;  ///< completed exchanges on this connection
  bool idle = false;       ///< in the pool
  /// The kernel stamps what this socket receives (plain TCP, SO_TIMESTAMPNS accepted): the
  /// relay's reads return each read's arrival time with its bytes (relay.hpp).
  bool stamped = false;

 private:
  std::variant<plain_stream, tls_stream> stream_;
};

/// Why a new connection could not be made (the `reason` label of upstream error counters).
enum class connect_failure { none, resolve, connect, timeout, tls };
std::string_view to_string(connect_failure f) noexcept;

class cluster;
struct endpoint;

/// Keep-alive connections per endpoint, for one I/O thread.
class upstream_pool {
 public:
  using connection = upstream_connection;

  explicit upstream_pool(asio::io_context& ioc);

  /// A healthy idle connection to endpoint `e` of `c`, or nullptr.  Connections past their idle
  /// TTL or already closed by the peer are discarded here.
  std::unique_ptr<upstream_connection> take(const cluster& c, const endpoint& e);

  /// Returns a connection whose last exchange completed cleanly and may be reused.
  void give_back(const cluster& c, const endpoint& e, std::unique_ptr<upstream_connection> conn);

  /// Opens a new connection to `e` (TCP connect, then TLS handshake with SNI and host
  /// verification for https:// endpoints), bounded by `within`.  On failure `ec` and `why` are
  /// set and nullptr returned.
  awaitable<std::unique_ptr<upstream_connection>> connect(const cluster& c, const endpoint& e,
                                                          error_code& ec, connect_failure& why,
                                                          std::chrono::milliseconds within);

  /// `GET path` on a new connection to `e`, closed after, all within `deadline`: the health
  /// probes' and the engine-metrics scrapes' request.  `open` names the connection while it is
  /// in use (a stop may close it to end the wait).  Status 0: no answer; the body is cut at
  /// `body_limit` bytes (a longer one is no answer).
  struct get_result {
    unsigned status = 0;
    std::string body;
  };
  awaitable<get_result> get_once(const cluster& c, const endpoint& e, const std::string& path,
                                 std::string_view user_agent, std::uint64_t body_limit,
                                 clock::time_point deadline, upstream_connection*& open);

  /// Drops every idle connection (shutdown).
  void clear() { idle_.clear(); }
  /// Drops the idle connections of an endpoint no configuration names any more (a reload; its
  /// `retired` flag is set first, so none is given back after).
  void retire(std::size_t endpoint_id) { idle_.erase(endpoint_id); }

 private:
  asio::io_context& ioc_;
  std::unordered_map<std::size_t, std::deque<std::unique_ptr<upstream_connection>>>
      idle_;  // by endpoint id
};

}  // namespace tokentap::proxy
