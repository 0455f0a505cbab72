// The proxy's per-connection logic: read a request, forward it, relay the response unbuffered.
//
// Ordering is the contract here:
//  - each upstream read is written to the client before the next upstream read (no buffering;
//    a slow client therefore pauses the upstream: backpressure for free);
//  - the tap sees the bytes only after they were written to the client;
//  - while an exchange is in flight a watcher waits for the client socket to become readable, so
//    a client that goes away is noticed at once and the upstream connection is closed (nobody
//    keeps paying for tokens nobody reads), even while the upstream is silent.
#include "proxy/proxy_session.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <random>

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "config/config.hpp"
#include "config/log.hpp"
#include "hooks/metrics.hpp"
#include "hooks/tap.hpp"
#include "net/http_rules.hpp"
#include "net/rx_stamp.hpp"
#include "parsers/http_body.hpp"
#include "parsers/request_inspector.hpp"
#include "proxy/cluster.hpp"
#include "proxy/deferred_taps.hpp"
#include "proxy/http_util.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

using hooks::stream_outcome;

bool is_disconnect(const error_code& ec) {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted ||
         ec == asio::error::not_connected || ec == asio::error::bad_descriptor ||
         ec == http::error::end_of_stream;
}

// Errors on a reused keep-alive connection that mean "the upstream closed it while idle": the
// request never reached a live server, so one retry on a fresh connection is safe.
bool is_stale_connection(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

double ms_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Printable, bounded copy of a user-supplied value for the access log.
std::string log_safe(std::string_view v, std::size_t cap = 128) {
  std::string out;
  for (char c : v.substr(0, cap)) out.push_back((c > 0x20 && c < 0x7f && c != '"') ? c : '_');
  if (v.size() > cap) out += "...";
  return out;
}

/// State of one request/response exchange.
struct exchange {
  // What every relayed read touches, first (one line rather than three).
  std::unique_ptr<hooks::stream_tap> tap;
  std::uint64_t body_bytes = 0;
  std::optional<clock::time_point> first_byte;
  unsigned status = 0;
  stream_outcome outcome = stream_outcome::ok;
  bool reused_connection = false;
  bool upstream_reusable = false;
  bool response_started = false;  // head sent to the client
  bool response_complete = false;

  // The request as it is sent upstream: head (append_upstream_request_head) and body.  Released
  // once the response head is in (release_request).
  std::string request_head, request_body;
  std::string method;
  const config::route_config* route = nullptr;
  std::string target_redacted;
  std::string model;
  bool stream_requested = false;
  std::vector<parsers::message_digest> conversation;
  std::uint64_t tenant = 0;
  std::string route_key;                  // from the request phase, for the router
  cluster* upstream_cluster = nullptr;    // the route's upstream
  endpoint* upstream_endpoint = nullptr;  // its endpoint the router chose
  active_exchange in_flight;              // counted on that endpoint while the exchange lasts
  bool head = false;
  bool client_keep_alive = false;
  unsigned client_version = 11;
  clock::time_point start{};
  std::int64_t wall_start_us = 0;
  std::optional<clock::time_point> deadline;  // total timeout
};

enum class attempt_result { done, retry };

constexpr char crlf[] = "\r\n";
constexpr char last_chunk[] = "0\r\n\r\n";

/// `<size in hex>\r\n`, the start of one chunk of a chunked body.
class chunk_header {
 public:
  void set(std::size_t n) noexcept {
    std::size_t i = sizeof buf_;
    buf_[--i] = '\n';
    buf_[--i] = '\r';
    do {
      buf_[--i] = "0123456789abcdef"[n & 0xf];
      n >>= 4;
    } while (n != 0);
    begin_ = i;
  }
  asio::const_buffer buffer() const noexcept {
    return asio::buffer(buf_ + begin_, sizeof buf_ - begin_);
  }

 private:
  char buf_[2 * sizeof(std::size_t) + 2];
  std::size_t begin_ = sizeof buf_;  // an offset, not a pointer: copies stay valid
};

class proxy_session final : public net::session_base,
                            public std::enable_shared_from_this<proxy_session> {
 public:
  proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared)
      : net::session_base(w), shared_(shared), client_(std::move(socket)) {
    error_code ec;
    const auto ep = client_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string();
    client_.socket().set_option(tcp::no_delay(true), ec);
  }

  static awaitable<void> run(std::shared_ptr<proxy_session> self) {
    // (No co_await inside a condition: g++ 12 miscompiles co_await in && operands.)
    while (!self->closed_) {
      const bool more = co_await self->serve_one();
      if (!more) break;
    }
    self->close_client();
  }

  void drain() noexcept override {
    draining_ = true;
    if (idle_) close_client();
  }

  void force_close() noexcept override {
    draining_ = true;
    forced_ = true;
    close_upstream();
    close_client();
  }

 private:
  const config::timeouts_config& timeouts() const { return shared_.cfg.timeouts; }
  const config::limits_config& limits() const { return shared_.cfg.limits; }

  // ---------------------------------------------------------------- request side

  // Reads one request into `req`.  False when there is none: `ec` set means a bad or failed
  // request to answer (reject), `ec` clear means the connection is done (closed, idle, draining).
  // Its own coroutine so that the parser (~0.5 KiB with its buffers) lives only while the request
  // is read, not in serve_one's frame for the whole stream.
  awaitable<bool> read_request(http::request<http::string_body>& req, error_code& ec) {
    idle_ = true;
    if (draining_) co_return false;
    if (buf_.size() == 0) {
      // Waiting for the next request: the keep-alive timeout applies until its first byte.
      client_.expires_after(first_request_ ? timeouts().client_header : timeouts().keepalive);
      error_code rec;
      const auto n = co_await client_.async_read_some(buf_.prepare(4096), use_ec(rec));
      if (rec) co_return false;  // closed, reset, idle timeout or drained: no more requests
      buf_.commit(n);
    }
    first_request_ = false;
    idle_ = false;

    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits().max_request_header_bytes));
    parser.body_limit(limits().max_request_body_bytes);
    // The whole head must arrive within client_header (a byte-per-second client is cut off).
    client_.expires_after(timeouts().client_header);
    co_await http::async_read_header(client_, buf_, parser, use_ec(ec));
    if (ec) co_return false;

    if (parser.get()[http::field::expect] == "100-continue" && !parser.is_done()) {
      static constexpr std::string_view cont = "HTTP/1.1 100 Continue\r\n\r\n";
      error_code wec;
      co_await asio::async_write(client_, asio::buffer(cont), use_ec(wec));
      if (wec) co_return false;
    }
    if (!parser.is_done()) {
      client_.expires_after(std::max(timeouts().client_header, timeouts().idle));
      co_await http::async_read(client_, buf_, parser, use_ec(ec));
      if (ec) co_return false;
    }
    client_.expires_never();
    req = parser.release();
    // Nothing pipelined behind this request: give the read buffer back for the (possibly long)
    // response; the next request allocates again.
    if (buf_.size() == 0) buf_.shrink_to_fit();
    co_return true;
  }

  awaitable<bool> serve_one() {
    http::request<http::string_body> req;
    {
      error_code ec;
      const bool got = co_await read_request(req, ec);
      if (!got && !ec) co_return false;
      if (!got) co_return co_await reject(ec);
    }

    exchange ex;
    begin(req, ex);

    const std::string_view target = req.target();
    if (target.empty() || target.front() != '/') {
      shared_.stats.rejected_requests.fetch_add(1, std::memory_order_relaxed);
      co_await send_error(ex, 400, "bad_request", "request target must be a path (origin-form)");
      co_return false;
    }
    const auto path = target.substr(0, target.find('?'));
    ex.route = config::match_route(shared_.cfg, path);
    if (!ex.route) {
      shared_.stats.rejected_requests.fetch_add(1, std::memory_order_relaxed);
      co_await send_error(ex, 404, "no_route", "no route matches " + log_safe(path, 256));
      co_return ex.client_keep_alive && !draining_;
    }

    inspect(req, ex);
    if (shared_.taps) ex.tap = shared_.taps->create();
    if (ex.tap) {
      hooks::request_decision d;
      request_phase(req, ex, d);
      if (d.stop) co_return co_await answer_locally(std::move(req), ex, d);
      apply(d, req, ex);
    }
    if (!choose_endpoint(ex)) {
      // (No balancing policy refuses a request yet: with one endpoint per upstream there is
      // always one to pick.)
      shared_.stats.upstream_errors.fetch_add(1, std::memory_order_relaxed);
      ex.outcome = stream_outcome::upstream_error;
      if (ex.tap) {
        const auto headers = redacted_headers(req);
        ex.tap->on_request(request_view_of(ex, req.body(), headers));
        ex.tap->on_upstream_error("connect", 503);
      }
      co_await send_error(
          ex, 503, "no_upstream_endpoint",
          "no endpoint of upstream '" + ex.upstream_cluster->cfg().name + "' can take the request");
      if (ex.tap) ex.tap->on_stream_end(ex.outcome, mono_now_ns());
      access_log(ex);
      co_return ex.client_keep_alive && !draining_;
    }
    build_upstream_request(std::move(req), ex);
    start_tap(ex);

    shared_.stats.active_streams.fetch_add(1, std::memory_order_relaxed);
    watch_client();
    co_await forward(ex);
    stop_watching();
    shared_.stats.active_streams.fetch_sub(1, std::memory_order_relaxed);
    if (ex.tap) ex.tap->on_stream_end(ex.outcome, mono_now_ns());
    access_log(ex);

    co_return ex.response_complete&& ex.client_keep_alive && !draining_ && !client_gone_;
  }

  // Plain functions, not coroutines, for the steps between suspensions: GCC keeps every local of
  // a coroutine in its frame, which lives as long as the stream.

  void begin(const http::request<http::string_body>& req, exchange& ex) {
    ex.start = clock::now();
    ex.wall_start_us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    ex.method = req.method_string();
    ex.head = req.method() == http::verb::head;
    ex.client_version = req.version();
    ex.client_keep_alive = req.keep_alive();
    ex.target_redacted = net::redact_target(req.target());
    if (timeouts().total.count() > 0) ex.deadline = ex.start + timeouts().total;
  }

  hooks::request_view request_view_of(const exchange& ex, std::string_view body,
                                      std::span<const hooks::header_view> headers) const {
    const auto& up = shared_.cfg.upstreams[ex.route->upstream_index];
    return {ex.method, ex.target_redacted, ex.route->name,
            up.name,   ex.model,           ex.stream_requested,
            body,      to_ns(ex.start),    ex.wall_start_us,
            headers,   ex.conversation,    ex.tenant};
  }

  // The hooks' request phase, on the client's request (its headers redacted).
  void request_phase(const http::request<http::string_body>& req, const exchange& ex,
                     hooks::request_decision& d) const {
    const auto headers = redacted_headers(req);
    ex.tap->decide(request_view_of(ex, req.body(), headers), d);
  }

  // The router: the route's cluster, and the endpoint its balancer picks.  False: none can take
  // the request.
  bool choose_endpoint(exchange& ex) {
    ex.upstream_cluster = shared_.clusters[ex.route->upstream_index].get();
    ex.upstream_endpoint = ex.upstream_cluster->pick({.route_key = ex.route_key});
    if (ex.upstream_endpoint == nullptr) return false;
    ex.in_flight.reset(ex.upstream_endpoint);
    return true;
  }

  // What the request phase decided, applied to the request before its upstream head is built.
  static void apply(hooks::request_decision& d, http::request<http::string_body>& req,
                    exchange& ex) {
    for (const auto& f : d.upstream_headers) req.set(f.name, f.value);
    if (d.body) req.body() = std::move(*d.body);
    ex.route_key = std::move(d.route_key);
  }

  // A hook stopped the request: it is answered here and nothing is forwarded.  The hooks see it
  // as a request (the client's) that ended `rejected` with the reply's status — without its
  // conversation: no provider saw it, so no prompt cache holds it.
  awaitable<bool> answer_locally(http::request<http::string_body> req, exchange& ex,
                                 hooks::request_decision& d) {
    shared_.stats.rejected_requests.fetch_add(1, std::memory_order_relaxed);
    ex.conversation = {};
    {
      const auto headers = redacted_headers(req);
      ex.tap->on_request(request_view_of(ex, req.body(), headers));
    }
    req = {};
    co_await send_error(ex, d.status, d.error_type, std::move(d.error_message), d.reply_headers);
    ex.outcome = stream_outcome::rejected;
    ex.tap->on_stream_end(ex.outcome, mono_now_ns());
    access_log(ex);
    co_return ex.response_complete&& ex.client_keep_alive && !draining_;
  }

  void start_tap(exchange& ex) {
    if (ex.tap) {
      const auto headers = redacted_headers(ex.request_head);
      ex.tap->on_request(request_view_of(ex, ex.request_body, headers));
    }
    // The hooks took what they need from the digests; an open stream should not pin them.
    ex.conversation = {};
  }

  static void tap_response_head(const http::response<http::buffer_body>& ures,
                                clock::time_point head_time, exchange& ex) {
    if (!ex.tap) return;
    const auto headers = redacted_headers(ures);
    ex.tap->on_response_head({ex.status, ures[http::field::content_type],
                              ures[http::field::content_encoding], to_ns(head_time), headers});
  }

  // Answers a request that could not be read (or closes when there is nobody to answer).
  awaitable<bool> reject(error_code ec) {
    exchange ex;
    ex.start = clock::now();
    if (ec == http::error::header_limit) {
      shared_.stats.rejected_requests.fetch_add(1, std::memory_order_relaxed);
      co_await send_error(
          ex, 431, "request_header_too_large",
          "request head exceeds " + std::to_string(limits().max_request_header_bytes) + " bytes");
    } else if (ec == http::error::body_limit) {
      shared_.stats.rejected_requests.fetch_add(1, std::memory_order_relaxed);
      co_await send_error(
          ex, 413, "request_body_too_large",
          "request body exceeds " + std::to_string(limits().max_request_body_bytes) + " bytes");
    } else if (ec == beast::error::timeout) {
      TT_LOG(debug) << "client " << peer_ << " too slow sending its request; closing";
    } else if (!is_disconnect(ec) && ec != http::error::partial_message) {
      shared_.stats.rejected_requests.fetch_add(1, std::memory_order_relaxed);
      co_await send_error(ex, 400, "bad_request", "malformed request: " + ec.message());
    }
    co_return false;  // the stream position is unknown after a bad request: close
  }

  void inspect(const http::request<http::string_body>& req, exchange& ex) {
    // The tenant: a salted hash of the credential, so prefixes are never shared across tenants
    // and the key itself never leaves this function.
    if (auto v = req[http::field::authorization]; !v.empty())
      ex.tenant = tenant_hash(v);
    else if (auto k = req["x-api-key"]; !k.empty())
      ex.tenant = tenant_hash(k);
    const auto ct = req[http::field::content_type];
    if (req.body().empty() || ct.find("json") == std::string_view::npos) return;
    auto info = inspector_.inspect(req.body(), {.digests = shared_.taps != nullptr});
    ex.model = info.model;
    ex.stream_requested = info.stream;
    ex.conversation = std::move(info.digests);
  }

  static std::uint64_t tenant_hash(std::string_view secret) {
    static const std::uint64_t salt =
        std::random_device{}() * 0x9e3779b97f4a7c15ull ^ std::random_device{}();
    std::uint64_t h = 14695981039346656037ull ^ salt;
    for (unsigned char c : secret) h = (h ^ c) * 1099511628211ull;
    return h == 0 ? 1 : h;
  }

  // Consumes the client's request (its fields are not kept for the life of the stream).
  void build_upstream_request(http::request<http::string_body> req, exchange& ex) {
    const auto& e = *ex.upstream_endpoint;
    forwarded_request f{e.target.base_path, e.host_header, peer_, shared_.cfg.identity_encoding,
                        std::nullopt};
    // The body was read whole (bounded by max_request_body_bytes): sent with a Content-Length.
    if (!req.body().empty() || req.method() == http::verb::post ||
        req.method() == http::verb::put || req.method() == http::verb::patch)
      f.content_length = req.body().size();
    ex.request_head.clear();
    append_upstream_request_head(ex.request_head, req, f);
    ex.request_body = std::move(req.body());
  }

  // ---------------------------------------------------------------- upstream side

  awaitable<void> forward(exchange& ex) {
    const auto& c = *ex.upstream_cluster;
    const auto& e = *ex.upstream_endpoint;
    auto& pool = *shared_.pools[owner().index];
    for (int attempt = 0;; ++attempt) {
      auto conn = pool.take(c, e);
      ex.reused_connection = conn != nullptr;
      if (!conn) {
        error_code ec;
        connect_failure why{};
        conn = co_await pool.connect(c, e, ec, why);
        if (client_gone_) {
          ex.outcome = stream_outcome::client_disconnect;
          co_return;
        }
        if (!conn) {
          shared_.stats.upstream_errors.fetch_add(1, std::memory_order_relaxed);
          ex.outcome = why == connect_failure::timeout ? stream_outcome::timeout
                                                       : stream_outcome::upstream_error;
          if (ex.tap) {
            ex.tap->on_upstream_error(why == connect_failure::tls       ? "tls"
                                      : why == connect_failure::timeout ? "timeout"
                                                                        : "connect",
                                      502);
          }
          const auto& up = c.cfg();
          TT_LOG(warn) << "upstream " << up.name << " (" << e.target.to_string()
                       << "): " << to_string(why) << " failed: " << ec.message();
          co_await send_error(
              ex, 502,
              why == connect_failure::tls ? "upstream_tls_error" : "upstream_connect_error",
              "cannot reach upstream '" + up.name + "': " + std::string(to_string(why)) + ": " +
                  ec.message());
          co_return;
        }
        shared_.stats.upstream_connects.fetch_add(1, std::memory_order_relaxed);
      } else {
        shared_.stats.upstream_reuses.fetch_add(1, std::memory_order_relaxed);
      }
      upstream_ = conn.get();
      const bool may_retry = ex.reused_connection && attempt == 0;
      const auto r =
          co_await conn->visit([&](auto& s) { return exchange_on(s, *conn, ex, may_retry); });
      upstream_ = nullptr;
      if (r == attempt_result::retry) continue;  // the stale connection is dropped here
      if (ex.upstream_reusable && !draining_) pool.give_back(c, e, std::move(conn));
      co_return;
    }
  }

  // Expiry for the next upstream operation: `t` from now, but never past the total deadline.
  clock::time_point bounded(const exchange& ex, config::ms t,
                            clock::time_point now = clock::now()) const {
    const auto at = now + t;
    return ex.deadline ? std::min(at, *ex.deadline) : at;
  }

  template <class Stream>
  awaitable<attempt_result> exchange_on(Stream& up, upstream_connection& conn, exchange& ex,
                                        bool may_retry) {
    error_code ec;
    auto& lowest = conn.lowest();

    lowest.expires_at(bounded(ex, timeouts().upstream_header));
    {
      // The head in one buffer, the body as it is: one gathered write.
      const std::array<asio::const_buffer, 2> request{asio::buffer(ex.request_head),
                                                      asio::buffer(ex.request_body)};
      co_await asio::async_write(up, request, use_ec(ec));
    }
    if (ec) {
      if (may_retry && !client_gone_ && is_stale_connection(ec)) co_return attempt_result::retry;
      co_await fail_before_head(ex, ec, "sending the request");
      co_return attempt_result::done;
    }

    // Read the response head, skipping interim 1xx responses (100 Continue, 103 Early Hints).
    std::optional<http::response_parser<http::buffer_body>> parser;
    for (;;) {
      parser.emplace();
      parser->header_limit(static_cast<std::uint32_t>(limits().max_response_header_bytes));
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());  // streams are long
      if (ex.head) parser->skip(true);
      lowest.expires_at(bounded(ex, timeouts().upstream_header));
      co_await http::async_read_header(up, conn.buffer, *parser, use_ec(ec));
      if (ec) break;
      const auto code = parser->get().result_int();
      if (code < 100 || code >= 200 || code == 101) break;
    }
    if (ec) {
      if (may_retry && !client_gone_ && is_stale_connection(ec)) co_return attempt_result::retry;
      co_await fail_before_head(ex, ec, "reading the response head");
      co_return attempt_result::done;
    }
    const auto head_time = clock::now();
    // No retry past this point: the request (its body a whole conversation, often 10-100 KB)
    // is not needed again, and a stream may stay open for minutes.
    release_request(ex);
    auto& ures = parser->get();
    ex.status = ures.result_int();

    const bool no_body = ex.head || ex.status == 204 || ex.status == 304;
    const auto length = parser->content_length();
    auto body = parser->chunked() ? parsers::http_body_decoder::chunked()
                : length          ? parsers::http_body_decoder::length(*length)
                                  : parsers::http_body_decoder::until_close();
    tap_response_head(ures, head_time, ex);
    const bool chunked = co_await send_head(ures, length, no_body, ex, ec);
    ex.response_started = true;
    ures.clear();  // the head's fields were forwarded and tapped; the parser needs only its state
    if (ec) {
      client_lost(ex);
      co_return attempt_result::done;
    }
    if (no_body) {
      client_.expires_never();
      ex.response_complete = true;
      // After HEAD a non-conforming upstream may still send a body: never reuse that connection.
      ex.upstream_reusable =
          !ex.head && parser->is_done() && parser->keep_alive() && conn.buffer.size() == 0;
      co_return attempt_result::done;
    }

    // The relay loop (relay_op below): one read, one write, repeat, never reading ahead of the
    // client.  Its timeouts are enforced by one lazily re-armed timer (relay_timer_), not by
    // Beast's per-operation timers, so Beast's expiry is off for its duration.
    if (!relay_buf_) {
      relay_size_ = relay_buffer_min;
      relay_buf_ = std::make_unique<char[]>(relay_size_);
    }
    lowest.expires_never();
    client_.expires_never();
    {
      const relay_timeouts_guard relay_guard(*this);
      const bool body_done = co_await relay(relay_stream(up), conn, ex, body, chunked);
      if (!body_done) co_return attempt_result::done;
    }

    // End of body: the terminating chunk (chunked) or nothing (content-length, or close).
    if (chunked) {
      client_.expires_after(timeouts().client_write);
      co_await asio::async_write(client_, asio::buffer(last_chunk, 5), use_ec(ec));
    }
    client_.expires_never();
    if (ec) {
      client_lost(ex);
      co_return attempt_result::done;
    }
    ex.response_complete = true;
    // (A body that ends at the close is never keep-alive: Beast's keep_alive() says so.)
    ex.upstream_reusable = parser->keep_alive() && conn.buffer.size() == 0 && !body.extra();
    if (!length && ex.client_version < 11) close_client();
    co_return attempt_result::done;
  }

  /// Writes the client's response head: the upstream's status and end-to-end fields, our own
  /// framing.  Its own coroutine so that the message and its bytes exist only while the head is
  /// written, not in exchange_on's frame for the life of the stream.  Returns whether the body is
  /// to be sent chunked.
  awaitable<bool> send_head(const http::response<http::buffer_body>& ures,
                            boost::optional<std::uint64_t> length, bool no_body, exchange& ex,
                            error_code& ec) {
    // A body goes with its length, else chunked (HTTP/1.1) or until the close (HTTP/1.0); a HEAD
    // answer says what the length would be.
    std::optional<std::uint64_t> framed_length;
    if (length && (!no_body || ex.head)) framed_length = *length;
    const bool chunked = !no_body && !length && ex.client_version >= 11;
    if (!no_body && !length && ex.client_version < 11) ex.client_keep_alive = false;
    if (draining_ || owner().runtime.draining()) ex.client_keep_alive = false;
    std::string head;
    append_client_response_head(head, ures, ex.client_version, framed_length, chunked,
                                ex.client_keep_alive);
    client_.expires_after(timeouts().client_write);
    co_await asio::async_write(client_, asio::buffer(head), use_ec(ec));
    co_return chunked;
  }

  awaitable<void> fail_before_head(exchange& ex, error_code ec, const char* what) {
    if (client_gone_) {
      client_lost(ex);
      co_return;
    }
    shared_.stats.upstream_errors.fetch_add(1, std::memory_order_relaxed);
    const auto& up = shared_.cfg.upstreams[ex.route->upstream_index];
    if (ec == beast::error::timeout) {
      ex.outcome = stream_outcome::timeout;
      if (ex.tap) ex.tap->on_upstream_error("timeout", 504);
      TT_LOG(warn) << "upstream " << up.name << " timed out " << what;
      co_await send_error(ex, 504, "upstream_timeout",
                          "upstream '" + up.name + "' did not respond in time (" + what + ")");
      co_return;
    }
    ex.outcome =
        is_stale_connection(ec) ? stream_outcome::upstream_reset : stream_outcome::upstream_error;
    if (ex.tap) ex.tap->on_upstream_error("reset", 502);
    TT_LOG(warn) << "upstream " << up.name << " failed " << what << ": " << ec.message();
    co_await send_error(
        ex, 502,
        ex.outcome == stream_outcome::upstream_reset ? "upstream_reset" : "upstream_protocol_error",
        "upstream '" + up.name + "' failed " + what + ": " + ec.message());
  }

  void client_lost(exchange& ex) {
    ex.outcome = stream_outcome::client_disconnect;
    client_gone_ = true;
    shared_.stats.client_disconnects.fetch_add(1, std::memory_order_relaxed);
    close_upstream();
    close_client();
  }

  // ---------------------------------------------------------------- responses of our own

  awaitable<void> send_error(exchange& ex, unsigned status, std::string_view type,
                             std::string message,
                             std::span<const hooks::request_decision::field> extra = {}) {
    http::response<http::string_body> res{static_cast<http::status>(status), ex.client_version};
    for (const auto& f : extra) res.set(f.name, f.value);
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    const std::string_view target = ex.target_redacted;
    res.body() = net::error_body(status, type, message, target.substr(0, target.find('?')));
    const bool keep = ex.client_keep_alive && status < 500 && status != 400 && status != 413 &&
                      status != 431 && !draining_;
    ex.client_keep_alive = keep;
    res.keep_alive(keep);
    res.prepare_payload();
    ex.status = status;
    // An answer no hook saw (the request was not read, or matched no route): counted here.
    if (!ex.tap && shared_.count_local_replies)
      shared_.metrics->count_local_reply(ex.route ? std::string_view(ex.route->name) : "", status);
    error_code ec;
    client_.expires_after(timeouts().client_write);
    co_await http::async_write(client_, res, use_ec(ec));
    client_.expires_never();
    ex.response_started = true;
    ex.response_complete = !ec;
    if (ex.route == nullptr || status == 404) access_log(ex);
  }

  // ---------------------------------------------------------------- client watcher

  void watch_client() {
    watching_ = true;
    client_gone_ = false;
    client_.socket().async_wait(tcp_socket::wait_read,
                                [self = shared_from_this(), gen = ++watch_gen_](error_code ec) {
                                  self->on_client_readable(ec, gen);
                                });
  }

  void stop_watching() {
    if (!watching_) return;
    watching_ = false;
    ++watch_gen_;
    error_code ignored;
    client_.socket().cancel(ignored);
  }

  void on_client_readable(error_code ec, std::uint64_t gen) {
    if (gen != watch_gen_ || !watching_ || ec == asio::error::operation_aborted) return;
    watching_ = false;
    if (!ec) {
      char byte;
      const auto n = ::recv(client_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;  // a pipelined request: it waits in the socket for the next exchange
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch_client();
        return;
      }
    }
    // EOF or error: the client is gone.  Stop the upstream now.
    TT_LOG(debug) << "client " << peer_ << " disconnected mid-exchange; closing upstream";
    client_gone_ = true;
    close_upstream();
  }

  // ---------------------------------------------------------------- the relay loop

  // The response body as one asynchronous operation driven by plain completion handlers: read
  // from the upstream, write to the client, tap, again.  As coroutine steps, every read and write
  // cost an awaitable frame, executor copies and a pump of the awaitable thread (~1 k
  // instructions per event in the profile, a sixth of the proxy's own work with the tap off).
  // Beast reads the head; the body is read straight from the socket into the relay buffer and
  // its framing (chunked, Content-Length, until close) is decoded there in place
  // (parsers::http_body_decoder) — Beast's body parser read into the connection's buffer and
  // copied every read into ours, and its composed read cost ~1.5 k instructions per event.
  // The body is written straight to the socket, with our own chunk framing when chunked
  // (`size CRLF data CRLF`, the bytes Beast's serializer would produce: its buffers_cat
  // iterators cost ~6 % per event).  Completes with true when the body ended, false when the
  // exchange ended here: client lost, upstream broke or timed out, forced close — the outcome
  // is in `ex` and the sockets are closed as needed.
  template <class Upstream, class Handler>
  class relay_op final : deferred_step {
   public:
    relay_op(proxy_session& s, Upstream& up, upstream_connection& conn, exchange& ex,
             parsers::http_body_decoder& body, bool chunked, Handler&& h)
        : s_(s),
          up_(up),
          conn_(conn),
          ex_(ex),
          body_(body),
          chunked_(chunked),
          handler_(std::move(h)) {}

    void start(clock::time_point now) {
      if (!s_.client_nonblocking_) {  // once per session: writes below try at once, never wait
        error_code ec;
        s_.client_.socket().non_blocking(true, ec);
        s_.client_nonblocking_ = !ec;
      }
      early_ = conn_.buffer.size() > 0;
      release_head_buffer();
      if (body_.done()) {  // Content-Length: 0.  Completed through the executor, never inline.
        asio::post(up_.get_executor(), step<&relay_op::body_done>(this));
        return;
      }
      note_hot_lines();
      read(now);
    }

    // `now`: the time of the step before (read or sent), so that an event costs the clock reads
    // of its timestamps (read, sent; with a tap one more, for the backlog check), not one more
    // per deadline.
    void read(clock::time_point now) {
      if (early_) {
        // Body bytes that came with the head (in the buffer Beast read it into): relayed as
        // the first reads.  Completed through the executor, never inline.
        auto& early = conn_.buffer;
        const auto n =
            asio::buffer_copy(asio::buffer(s_.relay_buf_.get(), s_.relay_size_), early.data());
        early.consume(n);
        early_ = early.size() > 0;
        release_head_buffer();
        asio::post(up_.get_executor(), step<&relay_op::on_read>(this, n));
        return;
      }
      s_.set_relay_deadline(s_.upstream_deadline_, s_.bounded(ex_, s_.timeouts().idle, now));
      if constexpr (std::is_same_v<Upstream, tcp_socket>) {
        if (conn_.stamped) return stamped_read();
      }
      up_.async_read_some(asio::buffer(s_.relay_buf_.get(), s_.relay_size_),
                          step<&relay_op::on_read>(this));
    }

   private:
    // Intermediate handler: calls back into the op, which has one operation (or posted call)
    // pending at a time and owns itself.  Move-only: the one copy that Asio holds releases the
    // op if it is destroyed without being called — an io_context going away with the op's read
    // or write pending (a hard stop) — instead of leaking it and the coroutine frames it resumes.
    template <void (relay_op::*F)(error_code, std::size_t)>
    class step {
     public:
      explicit step(relay_op* op, std::size_t n = 0) noexcept : op_(op), n_(n) {}
      step(step&& o) noexcept : op_(std::exchange(o.op_, nullptr)), n_(o.n_) {}
      step& operator=(step&&) = delete;
      ~step() {
        if (op_ != nullptr) op_->abandon();
      }
      void operator()(error_code ec, std::size_t n = 0) {
        (std::exchange(op_, nullptr)->*F)(ec, n);
      }
      void operator()() { (std::exchange(op_, nullptr)->*F)({}, n_); }  // posted

     private:
      relay_op* op_;
      std::size_t n_;  // a posted call's byte count
    };

    // Reads that carry the kernel's receive time of their bytes (a plain-TCP upstream whose
    // socket stamps them, SO_TIMESTAMPNS): Asio's reads call `recv`, which drops the stamp, so the
    // relay waits for the socket to be readable (`async_wait`) and reads with `recvmsg`, which
    // returns it with the bytes.  A wait re-arms the descriptor in the reactor, so data or a
    // hangup that arrived before it is reported at once.  After a read that filled the buffer
    // more is likely waiting, and the next read tries at once (through the executor: a fast
    // upstream must not grow the stack).  What this costs against a plain read:
    // docs/perf-decisions.md, "Kernel receive stamps".
    void stamped_read() {
      if (stamped_full_) {
        asio::post(up_.get_executor(), step<&relay_op::on_readable>(this));
        return;
      }
      wait_readable();
    }

    void wait_readable() {
      up_.async_wait(tcp_socket::wait_read, step<&relay_op::on_readable>(this));
    }

    void on_readable(error_code ec, std::size_t) {
      if constexpr (std::is_same_v<Upstream, tcp_socket>) {
        std::size_t got = 0;
        if (!ec) {
          // What the handling of these bytes touches first, fetched while the kernel copies them.
          hot_.prefetch();
          iovec iov{s_.relay_buf_.get(), s_.relay_size_};
          if (!net::recv_stamped(up_.native_handle(), &iov, 1, 0, got, ec, rx_real_ns_)) {
            stamped_full_ = false;  // nothing there (yet): wait for it
            // Unless the deadline fired while this try was posted: its cancel found no wait to
            // end, and a wait now would have no deadline.
            if (!s_.upstream_timed_out_) return wait_readable();
            ec = asio::error::operation_aborted;  // (on_read reports it as the timeout)
          }
        }
        stamped_full_ = !ec && got == s_.relay_size_;
        on_read(ec, got);
      }
    }

    // The buffer Beast read the response head into is not read again while the body streams
    // (the relay reads into its own): once it holds no body bytes, its block (512 bytes or
    // more) goes back to the allocator instead of staying with every open stream — a kept-alive
    // connection's next head read allocates one again.
    void release_head_buffer() {
      if (!early_) conn_.buffer.shrink_to_fit();
    }

    void body_done(error_code, std::size_t) { finish(true); }
    void abandon() noexcept { delete this; }

    void on_read(error_code ec, std::size_t got) {
      // Reads that did not prefetch the next event's state themselves (stamped reads do): now,
      // so that it arrives during the write.
      if (!prefetching_reads()) hot_.prefetch();
      s_.upstream_deadline_ = no_deadline;  // idle counts only while a read waits
      if (ec && s_.upstream_timed_out_) ec = beast::error::timeout;
      read_ns_ = mono_now_ns();
      const auto now = from_mono(read_ns_);
      const auto previous = arrived_ns_;  // the read before's
      arrived_ns_ = read_ns_;
      if (rx_real_ns_ >= 0 && ex_.tap != nullptr) arrival(previous);
      got_ = got;
      const auto payload = body_.decode(s_.relay_buf_.get(), got);
      at_ = payload.offset;
      n_ = payload.size;
      using bad = parsers::http_body_decoder::error;
      if (body_.failed() != bad::none) {
        ec = body_.failed() == bad::trailers_too_long ? http::error::header_limit
                                                      : http::error::bad_chunk;
      } else if (ec == asio::error::eof) {
        ec = body_.close() ? error_code{} : error_code(http::error::partial_message);
      }
      read_ec_ = ec;
      if (n_ == 0) return next(now);
      if (!ex_.first_byte) ex_.first_byte = now;
      auto& client = s_.client_.socket();
      const char* data = s_.relay_buf_.get() + at_;
      if (chunked_) {
        hdr_.set(n_);
        bufs_ = {hdr_.buffer(), asio::buffer(data, n_), asio::buffer(crlf, 2)};
      } else {
        bufs_ = {asio::buffer(data, n_), asio::const_buffer(), asio::const_buffer()};
      }
      // The write is tried here, on the non-blocking socket (what Asio's write would do first
      // too), so that `sent_ns_` is when the kernel took the bytes: the tap's `written` time and
      // the proxy-overhead histogram then measure the proxy's own work, not also the wait of the
      // write's completion behind other ready handlers (2.5–5 ms at the P99 with 1,000 streams).
      // What the kernel does not take now (a slow client) is written asynchronously, under the
      // client-write deadline, and stamped when done.
      sent_ns_ = 0;
      if (s_.client_nonblocking_) {
        error_code ec;
        const auto total = asio::buffer_size(bufs_);
        const auto sent = client.write_some(bufs_, ec);
        if (!ec && sent == total) {
          sent_ns_ = mono_now_ns();
          // Written.  Without a tap the next read starts now.  With one, the completion goes
          // through the executor, behind what is queued, where on_write sees from its lateness
          // whether the thread is behind and then defers the tap work.
          if (ex_.tap == nullptr) {
            ex_.body_bytes += n_;
            return tap_then_next();
          }
          taps_service().count_behind();
          asio::post(up_.get_executor(), step<&relay_op::on_write>(this, sent));
          return;
        }
        if (!ec) consume(sent);  // (an error is reported again by the write below)
      }
      s_.set_relay_deadline(s_.write_deadline_, now + s_.timeouts().client_write);
      asio::async_write(client, bufs_, step<&relay_op::on_write>(this));
    }

    // When the bytes just read reached the socket, from the kernel's receive stamp (wall
    // clock): how long they waited there before the read completed, taken off the read's
    // monotonic time.  Within the stream arrivals never go back (an earlier read without a
    // stamp — body bytes that came with the head — is timed by its read; the two clocks are
    // read a few ns apart); a wait the wall clock cannot vouch for — it stepped between the
    // stamp and now — leaves the read time.
    void arrival(std::int64_t previous) {
      const auto waited = net::realtime_ns() - rx_real_ns_;
      if (waited < 0 || waited > max_rx_wait_ns) return;
      arrived_ns_ = std::max(read_ns_ - waited, previous);
    }

    void consume(std::size_t n) noexcept {
      for (auto& b : bufs_) {
        const auto k = std::min(n, b.size());
        b += k;
        n -= k;
      }
    }

    void on_write(error_code ec, std::size_t) {
      s_.write_deadline_ = no_deadline;
      if (ec) {
        if (s_.client_timed_out_)
          TT_LOG(info) << "client " << s_.peer_ << " read nothing for "
                       << s_.timeouts().client_write.count() << " ms; closed it";
        s_.client_lost(ex_);
        return finish(false);
      }
      ex_.body_bytes += n_;
      const bool stamped = sent_ns_ != 0;  // the kernel took it all when it was tried
      if (!stamped) sent_ns_ = mono_now_ns();
      // The completion ran late, other handlers ran since the read: a backlog.  The tap's work
      // waits for the reads already queued (deferred_taps); with none, it runs at once.
      if (ex_.tap && (stamped ? mono_now_ns() : sent_ns_) - read_ns_ > backlog_ns) {
        taps_service().push(this, up_.get_executor());
        return;
      }
      tap_then_next();
    }

    static constexpr std::int64_t backlog_ns = 50'000;              // read → write completion
    static constexpr std::int64_t max_rx_wait_ns = 60'000'000'000;  // beyond: a clock step

    deferred_taps& taps_service() {
      if (deferred_ == nullptr)
        deferred_ = &asio::use_service<deferred_taps>(up_.get_executor().context());
      return *deferred_;
    }

    void run_deferred() override { tap_then_next(); }
    void discard() noexcept override { abandon(); }

    void tap_then_next() {
      if (ex_.tap) {
        ex_.tap->on_body({s_.relay_buf_.get() + at_, n_}, {arrived_ns_, read_ns_, sent_ns_});
        note_hot_lines();
      }
      if (got_ == s_.relay_size_ && s_.relay_size_ < relay_buffer_max) {
        s_.relay_size_ *= 2;  // the upstream outpaces us: read more per syscall
        s_.relay_buf_ = std::make_unique<char[]>(s_.relay_size_);
      }
      next(from_mono(sent_ns_));
    }

    // Whether reads are stamped reads, which prefetch hot_ when the socket is ready.
    bool prefetching_reads() const noexcept {
      if constexpr (std::is_same_v<Upstream, tcp_socket>) return conn_.stamped;
      return false;
    }

    // What the next read's handling touches first, listed while it is in the cache: this op,
    // the exchange, the body decoder, the session's relay fields, then the tap's state
    // (stream_tap::add_hot_lines).  Prefetched when the next read is ready (stamped reads; for
    // other reads at the start of on_read).
    void note_hot_lines() noexcept {
      hot_.clear();
      hot_.add_range(this, &hot_);
      hot_.add_range(&ex_, &ex_.request_head);
      hot_.add(&body_, sizeof body_);
      s_.add_relay_hot_lines(hot_);
      if (ex_.tap) ex_.tap->add_hot_lines(hot_);
    }

    static clock::time_point from_mono(std::int64_t ns) noexcept {
      return clock::time_point(
          std::chrono::duration_cast<clock::duration>(std::chrono::nanoseconds(ns)));
    }

    void next(clock::time_point now) {
      if (read_ec_) {
        if (s_.client_gone_) {
          s_.client_lost(ex_);
        } else if (s_.forced_) {
          // Our own shutdown grace period ended: not the upstream's fault.
          ex_.outcome = stream_outcome::timeout;
          TT_LOG(info) << "shutdown grace period ended " << ex_.body_bytes
                       << " bytes into a response; closed it";
        } else {
          // The upstream broke mid-response: the client must see a truncated response, never
          // a clean end, so the connection is closed without the terminating chunk.
          s_.shared_.stats.upstream_errors.fetch_add(1, std::memory_order_relaxed);
          ex_.outcome = read_ec_ == beast::error::timeout ? stream_outcome::timeout
                                                          : stream_outcome::upstream_reset;
          TT_LOG(warn) << "upstream broke mid-response after " << ex_.body_bytes
                       << " bytes: " << read_ec_.message() << "; aborting the client response";
          s_.close_client();
        }
        return finish(false);
      }
      if (body_.done()) return finish(true);
      read(now);
    }

    // The op is gone before the handler runs (it resumes the coroutine that owns what the op
    // refers to).
    void finish(bool body_done) {
      auto h = std::move(handler_);
      delete this;
      std::move(h)(body_done);
    }

    proxy_session& s_;
    Upstream& up_;
    upstream_connection& conn_;
    exchange& ex_;
    parsers::http_body_decoder& body_;
    const bool chunked_;
    bool early_ = false;  // body bytes that came with the head are still in conn_.buffer
    Handler handler_;
    error_code read_ec_;
    std::int64_t read_ns_ = 0;
    std::int64_t sent_ns_ = 0;  // the kernel took the bytes (the tap's `written`)
    // The kernel received them (wall clock): written by every stamped read that returns bytes
    // (-1: no stamp); stays -1 for the others (TLS, early body bytes).
    std::int64_t rx_real_ns_ = -1;
    bool stamped_full_ = false;    // the last stamped read filled the buffer: try the next at once
    std::int64_t arrived_ns_ = 0;  // the tap's `arrived` (read_ns_ when unknown)
    deferred_taps* deferred_ = nullptr;  // looked up at first use (taps_service)
    std::size_t got_ = 0;                // bytes read (framing included)
    std::size_t n_ = 0;                  // payload bytes among them
    std::size_t at_ = 0;                 // where in the relay buffer they start
    chunk_header hdr_;
    std::array<asio::const_buffer, 3> bufs_{};
    parsers::hot_lines hot_;  // for the next read (note_hot_lines)
  };

  template <class Upstream>
  awaitable<bool> relay(Upstream& up, upstream_connection& conn, exchange& ex,
                        parsers::http_body_decoder& body, bool chunked) {
    return asio::async_initiate<const asio::use_awaitable_t<io_executor>&, void(bool)>(
        [self = this, up = &up, conn = &conn, ex = &ex, body = &body, chunked](auto handler) {
          using op = relay_op<Upstream, std::decay_t<decltype(handler)>>;
          (new op(*self, *up, *conn, *ex, *body, chunked, std::move(handler)))->start(clock::now());
        },
        asio::use_awaitable_t<io_executor>{});
  }

  // ---------------------------------------------------------------- relay timeouts

  static constexpr clock::time_point no_deadline = clock::time_point::max();

  // The relay loop's I/O object for the upstream: the socket itself when plain (no Beast layer),
  // the TLS stream when not.
  static tcp_socket& relay_stream(tcp_stream& s) noexcept { return s.socket(); }
  template <class Tls>
  static Tls& relay_stream(Tls& s) noexcept {
    return s;
  }

  // Deadlines only move later from one event to the next, so the timer is re-armed only when a
  // deadline is earlier than what it waits for (no_deadline when it waits for nothing); when it
  // fires it checks the deadlines as they are now and waits again for the earliest.  A stream
  // that keeps its deadlines costs one timer wake-up per timeout period, not two timer
  // operations per event.
  // The session's fields a relayed read touches (relay_op::note_hot_lines): the relay block,
  // the client socket.
  void add_relay_hot_lines(parsers::hot_lines& l) const noexcept {
    l.add_range(&relay_buf_, &watch_gen_ + 1);
    l.add(&client_.socket(), sizeof client_.socket());
  }

  void set_relay_deadline(clock::time_point& slot, clock::time_point at) {
    slot = at;
    if (at < relay_timer_at_) arm_relay_timer(at);
  }

  void arm_relay_timer(clock::time_point at) {
    relay_timer_at_ = at;
    relay_timer_.expires_at(at);  // a wait in progress ends with operation_aborted
    relay_timer_.async_wait([self = shared_from_this(), gen = ++relay_gen_](error_code ec) {
      if (ec != asio::error::operation_aborted && gen == self->relay_gen_) self->on_relay_timer();
    });
  }

  void on_relay_timer() {
    relay_timer_at_ = no_deadline;
    const auto now = clock::now();
    error_code ignored;
    if (write_deadline_ <= now) {
      // The client stopped reading: end its write (and the exchange).
      client_timed_out_ = true;
      write_deadline_ = no_deadline;
      client_.socket().cancel(ignored);
    }
    if (upstream_deadline_ <= now) {
      upstream_timed_out_ = true;
      upstream_deadline_ = no_deadline;
      if (upstream_) upstream_->lowest().socket().cancel(ignored);
    }
    const auto next = std::min(write_deadline_, upstream_deadline_);
    if (next != no_deadline) arm_relay_timer(next);
  }

  // Scope of the relay loop's deadlines: on every way out of the loop the timer is stopped.
  struct relay_timeouts_guard {
    explicit relay_timeouts_guard(proxy_session& s) noexcept : s(s) {
      s.upstream_timed_out_ = s.client_timed_out_ = false;
    }
    ~relay_timeouts_guard() {
      s.upstream_deadline_ = s.write_deadline_ = no_deadline;
      if (s.relay_timer_at_ != no_deadline) {
        s.relay_timer_at_ = no_deadline;
        ++s.relay_gen_;
        s.relay_timer_.cancel();
      }
    }
    relay_timeouts_guard(const relay_timeouts_guard&) = delete;
    relay_timeouts_guard& operator=(const relay_timeouts_guard&) = delete;
    proxy_session& s;
  };

  // ---------------------------------------------------------------- closing

  void close_upstream() noexcept {
    if (!upstream_) return;
    error_code ignored;
    auto& s = upstream_->lowest().socket();
    s.shutdown(tcp::socket::shutdown_both, ignored);
    s.close(ignored);
  }

  void close_client() noexcept {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    client_.socket().close(ignored);
  }

  // A header as the taps see it: a secret's value replaced (it never reaches a hook).
  static hooks::header_view redacted(std::string_view name, std::string_view value) noexcept {
    return {name, net::is_secret_header(name) ? std::string_view("[redacted]") : value};
  }

  // The request head's fields, as views for the taps.
  static std::vector<hooks::header_view> redacted_headers(std::string_view head) {
    std::vector<hooks::header_view> out;
    out.reserve(static_cast<std::size_t>(std::count(head.begin(), head.end(), '\n')));
    for_each_head_field(head, [&](std::string_view name, std::string_view value) {
      out.push_back(redacted(name, value));
    });
    return out;
  }

  // The request is not needed past the response head (no retry after it), and a stream may stay
  // open for minutes: its memory goes now.  (Assigning empty strings would keep the buffers.)
  static void release_request(exchange& ex) {
    std::string().swap(ex.request_head);
    std::string().swap(ex.request_body);
  }

  // The upstream response's fields, as views for the taps.
  static std::vector<hooks::header_view> redacted_headers(const http::fields& fields) {
    std::vector<hooks::header_view> out;
    out.reserve(static_cast<std::size_t>(std::distance(fields.begin(), fields.end())));
    for (const auto& f : fields) out.push_back(redacted(f.name_string(), f.value()));
    return out;
  }

  // ---------------------------------------------------------------- logging

  static std::int64_t to_ns(clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }

  void access_log(const exchange& ex) {
    if (!shared_.cfg.access_log || !log::enabled(log::level::info)) return;
    const auto end = clock::now();
    log::line l(log::level::info);
    l << "access peer=" << peer_ << " method=" << log_safe(ex.method, 16)
      << " path=" << log_safe(ex.target_redacted, 512)
      << " route=" << (ex.route ? ex.route->name : std::string("-")) << " status=" << ex.status
      << " outcome=" << hooks::to_string(ex.outcome);
    if (!ex.model.empty()) l << " model=" << log_safe(ex.model);
    if (ex.stream_requested) l << " stream=1";
    if (ex.first_byte) l << " ttfb_ms=" << ms_between(ex.start, *ex.first_byte);
    l << " dur_ms=" << ms_between(ex.start, end) << " bytes=" << ex.body_bytes
      << " conn=" << (ex.reused_connection ? "reused" : "new");
  }

  // What every relayed read touches comes first, together: with hundreds of open streams each
  // further line of a session's state is a cache miss per event (they were spread through it).
  std::unique_ptr<char[]> relay_buf_;
  std::size_t relay_size_ = 0;
  upstream_connection* upstream_ = nullptr;         // the connection of the exchange in flight
  clock::time_point relay_timer_at_ = no_deadline;  // what the timer waits for
  clock::time_point upstream_deadline_ = no_deadline, write_deadline_ = no_deadline;
  std::uint64_t relay_gen_ = 0;
  bool upstream_timed_out_ = false, client_timed_out_ = false;
  bool closed_ = false;
  bool client_gone_ = false;
  bool first_request_ = true;
  bool idle_ = true;
  bool draining_ = false;
  bool forced_ = false;              // force_close(): the shutdown grace period is over
  bool client_nonblocking_ = false;  // the client socket is in non-blocking mode (relay writes)
  bool watching_ = false;
  std::uint64_t watch_gen_ = 0;
  proxy_shared& shared_;
  tcp_stream client_;
  steady_timer relay_timer_{client_.get_executor()};
  beast::flat_buffer buf_;
  std::string peer_ = "unknown";
  // Whole conversations, however long (limits.max_request_body_bytes bounds what was read).
  parsers::request_inspector inspector_{shared_.cfg.limits.max_request_body_bytes};
};

}  // namespace

void start_proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared) {
  auto s = std::make_shared<proxy_session>(std::move(socket), w, shared);
  asio::co_spawn(w.ioc, proxy_session::run(std::move(s)),
                 [](std::exception_ptr e) { log_escaped_exception(e, "proxy session"); });
}

}  // namespace tokentap::proxy
