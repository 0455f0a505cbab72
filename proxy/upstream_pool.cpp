#include "proxy/upstream_pool.hpp"

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/http.hpp>

#include "net/rx_stamp.hpp"
#include "proxy/cluster.hpp"

namespace tokentap::proxy {

upstream_connection::upstream_connection(io_executor ex)
    : stream_(std::in_place_type<plain_stream>, ex) {}

upstream_connection::upstream_connection(io_executor ex, asio::ssl::context& ctx)
    : stream_(std::in_place_type<tls_stream>, ex, ctx) {}

tcp_stream& upstream_connection::lowest() noexcept {
  return std::visit([](auto& s) -> tcp_stream& { return beast::get_lowest_layer(s); }, stream_);
}

std::string_view to_string(connect_failure f) noexcept {
  switch (f) {
    case connect_failure::none:
      return "none";
    case connect_failure::resolve:
      return "resolve";
    case connect_failure::connect:
      return "connect";
    case connect_failure::timeout:
      return "timeout";
    case connect_failure::tls:
      return "tls";
  }
  return "unknown";
}

namespace {

// An idle keep-alive connection is reusable only if the peer has neither closed it nor sent
// anything unsolicited.  A non-blocking peek tells without consuming.
bool still_usable(upstream_connection& c) {
  if (c.buffer.size() != 0) return false;
  auto& sock = c.lowest().socket();
  if (!sock.is_open()) return false;
  char byte;
  const auto n = ::recv(sock.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

bool is_ip_literal(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

upstream_pool::upstream_pool(asio::io_context& ioc) : ioc_(ioc) {}

std::unique_ptr<upstream_connection> upstream_pool::take(const cluster& c, const endpoint& e) {
  const auto held = idle_.find(e.id);
  if (held == idle_.end()) return nullptr;
  auto& q = held->second;
  const auto ttl = c.cfg().idle_ttl;
  const auto now = clock::now();
  while (!q.empty()) {
    auto conn = std::move(q.back());  // most recently used first: warmest, least likely closed
    q.pop_back();
    if (now - conn->idle_since < ttl && still_usable(*conn)) {
      conn->idle = false;
      return conn;
    }
  }
  return nullptr;
}

void upstream_pool::give_back(const cluster& c, const endpoint& e,
                              std::unique_ptr<upstream_connection> conn) {
  const auto max = c.cfg().max_idle;
  if (max == 0 || e.retired.load(std::memory_order_relaxed)) return;
  auto& q = idle_[e.id];
  conn->idle = true;
  conn->idle_since = clock::now();
  ++conn->exchanges;
  // Expired connections leave as soon as there is traffic, not only when they are next taken.
  const auto ttl = c.cfg().idle_ttl;
  while (!q.empty() && conn->idle_since - q.front()->idle_since >= ttl) q.pop_front();
  if (q.size() >= max) q.pop_front();  // drop the oldest
  q.push_back(std::move(conn));
}

awaitable<std::unique_ptr<upstream_connection>> upstream_pool::connect(
    const cluster& c, const endpoint& e, error_code& ec, connect_failure& why,
    std::chrono::milliseconds within) {
  const auto& up = c.cfg();
  const auto& target = e.target;
  const auto deadline = clock::now() + within;
  why = connect_failure::none;

  tcp_resolver resolver(ioc_);
  auto results =
      co_await resolver.async_resolve(target.host, std::to_string(target.port), use_ec(ec));
  if (ec) {
    why = connect_failure::resolve;
    co_return nullptr;
  }
  auto conn = c.tls() ? std::make_unique<upstream_connection>(ioc_.get_executor(), *c.tls())
                      : std::make_unique<upstream_connection>(ioc_.get_executor());
  auto& tcp_layer = conn->lowest();
  tcp_layer.expires_at(deadline);
  co_await tcp_layer.async_connect(results, use_ec(ec));
  if (ec) {
    why = ec == beast::error::timeout ? connect_failure::timeout : connect_failure::connect;
    co_return nullptr;
  }
  tcp_layer.socket().set_option(tcp::no_delay(true), ec);  // tokens are small: no Nagle delay
  ec = {};
  // (Refused, the reads carry no stamp: the relay then reads as for TLS, timed at read time.)
  if (!conn->is_tls()) conn->stamped = net::enable_rx_stamps(tcp_layer.socket().native_handle());
  if (conn->is_tls()) {
    co_await conn->visit([&](auto& s) -> awaitable<void> {
      using S = std::decay_t<decltype(s)>;
      if constexpr (std::is_same_v<S, upstream_connection::tls_stream>) {
        if (!is_ip_literal(target.host) &&
            !SSL_set_tlsext_host_name(s.native_handle(), target.host.c_str())) {
          ec = error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category());
          co_return;
        }
        if (up.tls_verify) s.set_verify_callback(asio::ssl::host_name_verification(target.host));
        tcp_layer.expires_at(deadline);
        co_await s.async_handshake(asio::ssl::stream_base::client, use_ec(ec));
      }
    });
    if (ec) {
      why = ec == beast::error::timeout ? connect_failure::timeout : connect_failure::tls;
      co_return nullptr;
    }
  }
  tcp_layer.expires_never();
  co_return conn;
}

awaitable<upstream_pool::get_result> upstream_pool::get_once(
    const cluster& c, const endpoint& e, const std::string& path, std::string_view user_agent,
    std::uint64_t body_limit, clock::time_point deadline, upstream_connection*& open) {
  get_result out;
  error_code ec;
  connect_failure why{};
  const auto within =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
  if (within.count() <= 0) co_return out;
  auto conn = co_await connect(c, e, ec, why, within);
  if (!conn) co_return out;
  open = conn.get();
  co_await conn->visit([&](auto& s) -> awaitable<void> {
    namespace http = beast::http;
    http::request<http::empty_body> req{http::verb::get, path, 11};
    req.set(http::field::host, e.host_header);
    req.set(http::field::user_agent, user_agent);
    req.set(http::field::connection, "close");
    conn->lowest().expires_at(deadline);
    co_await http::async_write(s, req, use_ec(ec));
    if (ec) co_return;
    http::response_parser<http::string_body> parser;
    parser.body_limit(body_limit);
    // The head first, then the rest: a body that came with the head in one read would otherwise
    // pass its limit unchecked (as in net::request_once).
    co_await http::async_read_header(s, conn->buffer, parser, use_ec(ec));
    if (!ec && !parser.is_done()) co_await http::async_read(s, conn->buffer, parser, use_ec(ec));
    if (ec) co_return;
    out.status = parser.get().result_int();
    out.body = std::move(parser.get().body());
  });
  open = nullptr;
  co_return out;
}

}  // namespace tokentap::proxy
