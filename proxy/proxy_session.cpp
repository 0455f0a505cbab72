// The proxy's per-connection logic: read a request, forward it, relay the response unbuffered.
//
// Ordering is the contract here:
//  - each upstream read is written to the client before the next upstream read (no buffering;
//    a slow client therefore pauses the upstream: backpressure for free);
//  - the tap sees the bytes only after they were written to the client;
//  - while an exchange is in flight the client socket is watched (net/client_watch.hpp): a client
//    that goes away closes the upstream connection at once.
#include "proxy/proxy_session.hpp"

#include <memory>
#include <optional>

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "config/config.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/tap.hpp"
#include "net/client_watch.hpp"
#include "net/http_rules.hpp"
#include "net/rx_stamp.hpp"
#include "parsers/http_body.hpp"
#include "parsers/request_inspector.hpp"
#include "proxy/access_log.hpp"
#include "proxy/attempt_io.hpp"
#include "proxy/cluster.hpp"
#include "proxy/exchange.hpp"
#include "proxy/http_util.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/relay.hpp"
#include "proxy/request_plan.hpp"
#include "proxy/request_reader.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

using hooks::stream_outcome;

constexpr char last_chunk[] = "0\r\n\r\n";

class proxy_session final : public relay_host, public net::session_base {
 public:
  proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared)
      : proxy_session(std::move(socket), w, shared, shared.current()) {}

  // Each exchange runs on the configuration current when its request came (exchange::gen); the
  // connection reads its next request under the timeouts and limits of its last one, which it
  // keeps without the generation (connection_rules): an idle connection does not hold a
  // configuration a reload replaced (its hooks, clusters and metric series go once its last
  // exchange ended).
  proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared,
                std::shared_ptr<const generation> g)
      : relay_host(socket.get_executor(), g->rules->timeouts),
        net::session_base(w),
        shared_(shared),
        generation_(std::move(g)),
        rules_(generation_->rules),
        client_(std::move(socket)) {
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
    if (delay_timer_ != nullptr) delay_timer_->cancel();
    close_upstream();
    close_client();
  }

 private:
  const config::limits_config& limits() const { return rules_->limits; }

  // ---------------------------------------------------------------- request side

  // Reads one request into `req`.  False when there is none: `ec` set means a bad or failed
  // request to answer (reject), `ec` clear means the connection is done (closed, idle, draining).
  awaitable<bool> next_request(http::request<http::string_body>& req, error_code& ec) {
    idle_ = true;
    generation_.reset();
    if (draining_) co_return false;
    // Waiting for the next request: the keep-alive timeout applies until its first byte.
    const auto wait = first_request_ ? timeouts().client_header : timeouts().keepalive;
    if (!co_await await_request(client_, buf_, wait)) co_return false;
    first_request_ = false;
    idle_ = false;
    co_return co_await read_request(client_, buf_, timeouts(), limits(), req, ec);
  }

  // One exchange: its request taken (take_request), then forwarded and its response relayed.
  // This frame lives as long as the stream, so it holds the exchange and nothing else: the
  // request and what answers it here live in take_request's, which is gone by then.
  awaitable<bool> serve_one() {
    exchange ex;
    const auto next = co_await take_request(ex);
    if (next != after_request::forward) co_return next == after_request::keep_alive;

    shared_.stats.active_streams.add();
    watch_client();
    co_await forward(ex);
    watch_.stop(client_.socket());
    shared_.stats.active_streams.sub();
    if (ex.tap) {
      end_tap(ex);
      ex.outcome = ex.tap->judged_outcome(ex.outcome);  // an error inside a 200 stream
      report_cache(ex);
    }
    write_access_log(ex, peer_);

    co_return ex.response_complete&& ex.client_keep_alive && !draining_ && !client_gone_;
  }

  // What the connection does after take_request.
  enum class after_request { forward, keep_alive, close };
  static after_request answered(bool keep_alive) noexcept {
    return keep_alive ? after_request::keep_alive : after_request::close;
  }

  // Reads the next request and makes `ex` ready to forward it, or answers it here: a request
  // that could not be read, a target that is not a path, no route, a hook's or a fault's
  // refusal, no endpoint left.
  awaitable<after_request> take_request(exchange& ex) {
    http::request<http::string_body> req;
    {
      error_code ec;
      const bool got = co_await next_request(req, ec);
      if (!got && !ec) co_return after_request::close;
      if (!got) {
        co_await reject(ec);
        co_return after_request::close;  // the stream position is unknown after a bad request
      }
    }

    on_generation(ex);
    begin(req, ex, timeouts());

    const std::string_view target = req.target();
    if (target.empty() || target.front() != '/') {
      shared_.stats.rejected_requests.add();
      co_await send_error(ex, 400, "bad_request", "request target must be a path (origin-form)");
      co_return after_request::close;
    }
    const auto path = target.substr(0, target.find('?'));
    ex.route = config::match_route(ex.gen->cfg, path);
    if (!ex.route) {
      shared_.stats.rejected_requests.add();
      co_await send_error(ex, 404, "no_route", "no route matches " + log_safe(path, 256));
      co_return answered(ex.client_keep_alive && !draining_);
    }
    ex.upstream_index = ex.route->upstream_index;

    inspect(req, ex, inspector_, shared_);
    if (ex.gen->taps) ex.tap = ex.gen->taps->create();
    if (ex.tap) {
      if (auto stop = request_phase(req, ex))
        co_return answered(co_await answer_locally(std::move(req), ex, *stop));
    }
    if (ex.gen->faults) {
      if (auto refused = fault_refusal(req, ex))
        co_return answered(co_await answer_locally(std::move(req), ex, *refused));
      if (ex.fault && ex.fault.kind == fault_kind::abort)
        co_return answered(co_await abort_fault(std::move(req), ex));
    }
    // (The admin token never goes upstream, whatever the request was for.)
    req.erase(fault_token_header);
    if (!choose_endpoint(ex)) {
      // Every endpoint of the upstream (and of its fallback) is ejected.
      ex.outcome = stream_outcome::upstream_error;
      tap_request(ex, req);
      if (ex.tap) ex.tap->on_upstream_error("connect", 503);
      co_await send_error(
          ex, 503, "no_upstream_endpoint",
          "no endpoint of upstream '" + ex.upstream_cluster->cfg().name + "' can take the request");
      end_tap(ex);
      write_access_log(ex, peer_);
      co_return answered(ex.client_keep_alive && !draining_);
    }
    plan_upstream_request(std::move(req), ex, peer_, shared_.metrics.get());
    tap_request(ex);
    co_return after_request::forward;
  }

  // Plain functions, not coroutines, for the steps between suspensions: GCC keeps every local of
  // a coroutine in its frame, which lives as long as the stream.

  // The exchange takes the current configuration, and the connection its timeouts and limits.
  void on_generation(exchange& ex) {
    auto g = shared_.current();
    rules_ = g->rules;
    set_timeouts(rules_->timeouts);
    generation_ = std::move(g);
    ex.gen = generation_.get();
  }

  // An abort fault: the request is answered at once, as its provider answers that status, and
  // nothing is forwarded.  Recorded as the failure it looks like to the client.
  awaitable<bool> abort_fault(http::request<http::string_body> req, exchange& ex) {
    auto d = abort_reply(ex);
    note_fault(ex);
    co_return co_await answer_locally(
        std::move(req), ex, d,
        d.status >= 500 ? stream_outcome::upstream_error : stream_outcome::rejected);
  }

  // A delay fault: forwarding waits (the attribution's fault phase).  Ends early when the client
  // leaves or the proxy is forced to stop.
  awaitable<void> delay_fault(exchange& ex) {
    steady_timer t(client_.get_executor());
    t.expires_after(config::ms(ex.fault.value));
    delay_timer_ = &t;
    error_code ec;
    co_await t.async_wait(use_ec(ec));
    delay_timer_ = nullptr;
    note_fault(ex);
  }

  // A hook stopped the request: it is answered here and nothing is forwarded.  The hooks see it
  // as a request (the client's) that ended `rejected` with the reply's status — without its
  // conversation: no provider saw it, so no prompt cache holds it.
  awaitable<bool> answer_locally(http::request<http::string_body> req, exchange& ex,
                                 hooks::request_decision& d,
                                 stream_outcome outcome = stream_outcome::rejected) {
    shared_.stats.rejected_requests.add();
    ex.conversation = {};
    tap_request(ex, req);
    req = {};
    ex.outcome = outcome;
    if (ex.tap) ex.tap->on_local_reply(d.status);
    co_await send_error(ex, d.status, d.error_type, std::move(d.error_message), d.reply_headers);
    ex.outcome = outcome;
    end_tap(ex);
    write_access_log(ex, peer_);
    co_return ex.response_complete&& ex.client_keep_alive && !draining_;
  }

  // Answers a request that could not be read (or closes when there is nobody to answer).  The
  // connection closes after it: the stream position is unknown after a bad request.
  awaitable<void> reject(error_code ec) {
    exchange ex;
    if (!generation_) generation_ = shared_.current();
    ex.gen = generation_.get();  // (the limits it was read under are rules_')
    ex.start = clock::now();
    if (auto r = unreadable_reply(ec, limits())) {
      shared_.stats.rejected_requests.add();
      co_await send_error(ex, r->status, r->error_type, std::move(r->error_message));
    } else if (ec == beast::error::timeout) {
      TT_LOG(debug) << "client " << peer_ << " too slow sending its request; closing";
    }
  }

  // ---------------------------------------------------------------- upstream side

  awaitable<void> forward(exchange& ex) {
    ex.marks.routed = ex.marks.fault_done = base::mono_now_ns();
    if (ex.fault && ex.fault.kind == fault_kind::delay) {
      co_await delay_fault(ex);
      ex.marks.fault_done = base::mono_now_ns();
      if (client_gone_ || forced_) {
        ex.outcome = client_gone_ ? stream_outcome::client_disconnect : stream_outcome::timeout;
        co_return;
      }
    }
    auto& pool = *shared_.pools[owner().index];
    std::optional<response_head_parser> parser;
    auto end = co_await attempt_until_head(
        pool, ex, parser, {limits().max_response_header_bytes, timeouts().connect}, client_gone_,
        upstream_, [&](upstream_connection& c) {
          c.lowest().expires_at(bounded(ex, timeouts().upstream_header));
        });
    count(end);
    if (end.kind == end.head) {
      upstream_ = end.conn.get();
      co_await end.conn->visit([&](auto& s) { return relay_response(s, *end.conn, ex, *parser); });
      upstream_ = nullptr;
      if (ex.upstream_reusable && !draining_)
        pool.give_back(*ex.upstream_cluster, *ex.upstream_endpoint, std::move(end.conn));
    } else {
      co_await answer_failure(ex, end);
    }
    ex.tries.end();  // (the retries it held go back to their budgets now, not at the next request)
  }

  void count(const attempts_end<upstream_connection>& end) {
    if (end.connects > 0) shared_.stats.upstream_connects.add(end.connects);
    if (end.reuses > 0) shared_.stats.upstream_reuses.add(end.reuses);
  }

  // The response whose head came on `conn`: its head and body relayed to the client.
  template <class Stream>
  awaitable<void> relay_response(Stream& up, upstream_connection& conn, exchange& ex,
                                 response_head_parser& parser) {
    error_code ec;
    const auto head_time = clock::now();
    // No retry past this point: the request (its body a whole conversation, often 10-100 KB)
    // is not needed again, and a stream may stay open for minutes.
    release_request(ex);
    auto& ures = parser.get();
    ex.status = ures.result_int();
    // The upstream answered, but with a failure of its own (500, or a 502/503/504 that no
    // other endpoint could take over).
    if (ex.status >= 500) ex.outcome = stream_outcome::upstream_error;

    const bool no_body = ex.head || ex.status == 204 || ex.status == 304;
    const auto length = parser.content_length();
    auto body = parser.chunked() ? parsers::http_body_decoder::chunked()
                : length         ? parsers::http_body_decoder::length(*length)
                                 : parsers::http_body_decoder::until_close();
    tap_response_head(ures, head_time, ex);
    if (ex.fault && (ex.fault.kind == fault_kind::event_delay || ex.fault.kind == fault_kind::cut))
      ex.pacer = pacer_for(ures[http::field::content_type], client_.get_executor(), ex.fault);
    const bool chunked = co_await send_head(ures, length, no_body, ex, ec);
    ex.response_started = true;
    ures.clear();  // the head's fields were forwarded and tapped; the parser needs only its state
    if (ec) {
      client_lost(ex);
      co_return;
    }
    if (no_body) {
      client_.expires_never();
      ex.response_complete = true;
      // After HEAD a non-conforming upstream may still send a body: never reuse that connection.
      ex.upstream_reusable =
          !ex.head && parser.is_done() && parser.keep_alive() && conn.buffer.size() == 0;
      co_return;
    }

    // The relay (relay.hpp): one read, one write, repeat, never reading ahead of the client.
    // Its timeouts are enforced by the host's one lazily re-armed timer, not by Beast's
    // per-operation timers, so Beast's expiry is off for its duration.
    conn.lowest().expires_never();
    client_.expires_never();
    {
      const bool body_done =
          co_await async_relay(*this, client_.socket(), relay_io(up), {conn.buffer, conn.stamped},
                               ex, body, chunked, asio::use_awaitable_t<io_executor>{});
      if (ex.pacer && ex.pacer->applied) note_fault(ex);
      if (!body_done) co_return;
    }

    // End of body: the terminating chunk (chunked) or nothing (content-length, or close).
    if (chunked) {
      client_.expires_after(timeouts().client_write);
      co_await asio::async_write(client_, asio::buffer(last_chunk, 5), use_ec(ec));
    }
    client_.expires_never();
    if (ec) {
      client_lost(ex);
      co_return;
    }
    ex.response_complete = true;
    // (A body that ends at the close is never keep-alive: Beast's keep_alive() says so.)
    ex.upstream_reusable = parser.keep_alive() && conn.buffer.size() == 0 && !body.extra();
    if (!length && ex.client_version < 11) close_client();
  }

  /// Writes the client's response head (client_response_head).  Its own coroutine so that the
  /// message and its bytes exist only while the head is written, not in relay_response's frame
  /// for the life of the stream.  Returns whether the body is to be sent chunked.
  awaitable<bool> send_head(const http::response<http::buffer_body>& ures,
                            boost::optional<std::uint64_t> length, bool no_body, exchange& ex,
                            error_code& ec) {
    std::string head;
    const bool chunked =
        client_response_head(ures, length ? std::optional(*length) : std::nullopt, no_body,
                             draining_ || owner().runtime.draining(), ex, head);
    client_.expires_after(timeouts().client_write);
    co_await asio::async_write(client_, asio::buffer(head), use_ec(ec));
    co_return chunked;
  }

  // The attempts ended without a response head: the client is answered as the last one failed.
  awaitable<void> answer_failure(exchange& ex, const attempts_end<upstream_connection>& end) {
    if (end.kind == end.client_gone) {
      client_lost(ex);
      co_return;
    }
    const auto f = reply_to(end, ex.upstream_cluster->cfg().name);
    ex.outcome = f.outcome;
    if (ex.tap) ex.tap->on_upstream_error(f.tap_reason, f.status);
    TT_LOG(warn) << "upstream " << ex.upstream_cluster->cfg().name << " ("
                 << ex.upstream_endpoint->target.to_string() << "): " << f.message;
    co_await send_error(ex, f.status, f.type, f.message);
  }

  // ---------------------------------------------------------------- responses of our own

  awaitable<void> send_error(exchange& ex, unsigned status, std::string_view type,
                             std::string message,
                             std::span<const hooks::request_decision::field> extra = {}) {
    ex.client_keep_alive = ex.client_keep_alive && keeps_connection_after(status) && !draining_;
    auto res = error_response(status, ex.client_version, type, message, ex.target_redacted, extra,
                              ex.client_keep_alive);
    ex.status = status;
    // An answer of our own that no failure upstream explains is a refusal (bad request, no
    // route, a hook's decision), never "ok".
    if (ex.outcome == stream_outcome::ok) ex.outcome = stream_outcome::rejected;
    // An answer no hook saw (the request was not read, or matched no route): counted here.
    if (!ex.tap && ex.gen->count_local_replies)
      shared_.metrics->count_local_reply(ex.route ? std::string_view(ex.route->name) : "", status);
    error_code ec;
    client_.expires_after(timeouts().client_write);
    co_await http::async_write(client_, res, use_ec(ec));
    client_.expires_never();
    ex.response_started = true;
    ex.response_complete = !ec;
    if (ex.route == nullptr || status == 404) write_access_log(ex, peer_);
  }

  // ---------------------------------------------------------------- client watcher

  void watch_client() {
    client_gone_ = false;
    watch_.start(client_.socket(), [self = self()] { self->on_client_gone(); });
  }

  void on_client_gone() {
    TT_LOG(debug) << "client " << peer_ << " disconnected mid-exchange; closing upstream";
    client_gone_ = true;
    if (delay_timer_ != nullptr) delay_timer_->cancel();
    close_upstream();
  }

  // ---------------------------------------------------------------- the relay's host

  void client_lost(exchange& ex) override {
    ex.outcome = stream_outcome::client_disconnect;
    client_gone_ = true;
    shared_.stats.client_disconnects.add();
    close_upstream();
    close_client();
  }

  std::string_view peer() const noexcept override { return peer_; }

  void cancel_client_io() noexcept override {
    error_code ignored;
    client_.socket().cancel(ignored);
  }

  void cancel_upstream_io() noexcept override {
    error_code ignored;
    if (upstream_) upstream_->lowest().socket().cancel(ignored);
  }

  // ---------------------------------------------------------------- closing

  void close_upstream() noexcept {
    if (!upstream_) return;
    error_code ignored;
    auto& s = upstream_->lowest().socket();
    s.shutdown(tcp::socket::shutdown_both, ignored);
    s.close(ignored);
  }

  void close_client() noexcept override {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    client_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    client_.socket().close(ignored);
  }

  std::shared_ptr<proxy_session> self() {
    return std::static_pointer_cast<proxy_session>(shared_from_this());
  }

  upstream_connection* upstream_ = nullptr;  // the connection of the exchange in flight
  steady_timer* delay_timer_ = nullptr;      // a delay fault's, while it waits
  bool closed_ = false;
  bool first_request_ = true;
  bool idle_ = true;
  bool draining_ = false;
  net::client_watch watch_;
  proxy_shared& shared_;
  // The exchange's configuration, everything it refers to; none between requests, when the
  // connection keeps only the last exchange's rules (relay_host's timeouts point into them).
  std::shared_ptr<const generation> generation_;
  std::shared_ptr<const connection_rules> rules_;
  tcp_stream client_;
  beast::flat_buffer buf_;
  std::string peer_ = "unknown";
  // Whole conversations, however long (limits.max_request_body_bytes, at the connection's start,
  // bounds what was read).
  parsers::request_inspector inspector_{generation_->cfg.limits.max_request_body_bytes};
};

}  // namespace

void start_proxy_session(tcp_socket socket, net::worker& w, proxy_shared& shared) {
  auto s = std::make_shared<proxy_session>(std::move(socket), w, shared);
  asio::co_spawn(w.ioc, proxy_session::run(std::move(s)),
                 [](std::exception_ptr e) { net::log_escaped_exception(e, "proxy session"); });
}

}  // namespace tokentap::proxy
