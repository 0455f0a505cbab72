#include "sim/sim_server.hpp"

#include <sys/socket.h>

#include <cerrno>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "config/log.hpp"
#include "parsers/request_inspector.hpp"
#include "proxy/tls.hpp"

namespace tokentap::sim {

namespace http = beast::http;

struct server::impl {
  explicit impl(const server_options& o) : cache(o.cache) {}
  std::shared_ptr<net::ssl::context> tls;
  prefix_cache cache;
};

namespace {

// The canonical conversation (elements end with \x1e) with its oldest messages dropped until it
// fits the context window; leading tools/system elements stay.  This is the sliding window of a
// serving stack that truncates, and it changes the prompt's head (so the cache misses).
std::string slide_window(const std::string& canonical, std::size_t window_tokens) {
  const std::size_t max_bytes = window_tokens * prefix_cache::bytes_per_token;
  if (window_tokens == 0 || canonical.size() <= max_bytes) return canonical;
  std::string_view rest(canonical);
  std::string head;
  while (rest.starts_with("tools\x1f") || rest.starts_with("system\x1f")) {
    const auto end = rest.find('\x1e');
    if (end == std::string_view::npos) break;
    head.append(rest.substr(0, end + 1));
    rest.remove_prefix(end + 1);
  }
  while (head.size() + rest.size() > max_bytes) {
    const auto end = rest.find('\x1e');
    if (end == std::string_view::npos || end + 1 == rest.size()) break;  // keep the newest message
    rest.remove_prefix(end + 1);
  }
  return head + std::string(rest);
}

}  // namespace

namespace {

using request = http::request<http::string_body>;

std::string stats_json(const server_stats& s) {
  return "{\"connections\":" + std::to_string(s.connections.load()) +
         ",\"open_connections\":" + std::to_string(s.open_connections.load()) +
         ",\"requests\":" + std::to_string(s.requests.load()) +
         ",\"streams_completed\":" + std::to_string(s.streams_completed.load()) +
         ",\"disconnects\":" + std::to_string(s.disconnects.load()) +
         ",\"bytes_sent\":" + std::to_string(s.bytes_sent.load()) + "}\n";
}

template <class Stream>
class sim_session final : public session_base,
                          public std::enable_shared_from_this<sim_session<Stream>> {
 public:
  template <class... Args>
  sim_session(worker& w, const server_options& opts, std::shared_ptr<server_stats> stats,
              prefix_cache& cache, Args&&... args)
      : session_base(w),
        opts_(opts),
        stats_(std::move(stats)),
        cache_(cache),
        stream_(std::forward<Args>(args)...) {
    stats_->connections.fetch_add(1);
    stats_->open_connections.fetch_add(1);
  }
  ~sim_session() override { stats_->open_connections.fetch_sub(1); }

  static awaitable<void> run(std::shared_ptr<sim_session> self) {
    co_await self->serve();
    self->close();
  }

  void drain() noexcept override {
    draining_ = true;
    if (idle_) close();
  }
  void force_close() noexcept override { close(); }

 private:
  tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  awaitable<void> serve() {
    error_code ec;
    if constexpr (!std::is_same_v<Stream, tcp_stream>) {
      lowest().expires_after(std::chrono::seconds(10));
      co_await stream_.async_handshake(net::ssl::stream_base::server, use_ec(ec));
      if (ec) co_return;
    }
    beast::flat_buffer buf;
    while (!draining_ && !closed_) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64u << 20);
      idle_ = true;
      lowest().expires_after(std::chrono::seconds(120));
      co_await http::async_read(stream_, buf, parser, use_ec(ec));
      idle_ = false;
      if (ec) co_return;
      lowest().expires_never();
      stats_->requests.fetch_add(1);
      auto req = parser.release();
      const bool keep = co_await handle(req);
      if (!keep || !req.keep_alive()) co_return;
    }
  }

  awaitable<bool> send_simple(const request& req, unsigned status, std::string body,
                              std::string_view content_type = "application/json",
                              const plan* pl = nullptr) {
    http::response<http::string_body> res{static_cast<http::status>(status), req.version()};
    if (pl) add_digest_headers(res, *pl);
    res.set(http::field::content_type, content_type);
    res.set(http::field::server, "tokentap-sim");
    res.body() = std::move(body);
    res.keep_alive(req.keep_alive() && !draining_);
    res.prepare_payload();
    error_code ec;
    co_await http::async_write(stream_, res, use_ec(ec));
    co_return !ec && res.keep_alive();
  }

  awaitable<bool> handle(request& req) {
    const std::string_view target = req.target();
    const auto path = target.substr(0, target.find('?'));
    if (req.method() == http::verb::get) {
      if (path == "/healthz") co_return co_await send_simple(req, 200, "{\"status\":\"ok\"}\n");
      if (path == "/sim/stats") co_return co_await send_simple(req, 200, stats_json(*stats_));
    }
    if (path == "/sim/echo") {
      // The request head as the upstream received it (tests check the proxy's header rules).
      std::string head = "request-target: " + std::string(target) + "\n";
      for (const auto& f : req)
        head += std::string(f.name_string()) + ": " + std::string(f.value()) + "\n";
      co_return co_await send_simple(req, 200, head, "text/plain");
    }
    if (req.method() == http::verb::get) {
      if (path == "/v1/models") {
        co_return co_await send_simple(
            req, 200,
            "{\"object\":\"list\",\"data\":[{\"id\":\"sim-small\",\"object\":\"model\","
            "\"owned_by\":\"tokentap\"},{\"id\":\"sim-reasoner\",\"object\":\"model\","
            "\"owned_by\":\"tokentap\"}]}\n");
      }
    }
    api kind;
    if (req.method() == http::verb::post && path == "/v1/chat/completions") {
      kind = api::openai_chat;
    } else if (req.method() == http::verb::post && path == "/v1/messages") {
      kind = api::anthropic_messages;
    } else {
      co_return co_await send_simple(
          req, 404, "{\"error\":{\"message\":\"no such endpoint\",\"type\":\"not_found\"}}\n");
    }

    params p = opts_.defaults;
    for (const auto& f : req) {
      const auto name = f.name_string();
      if (name.size() > 6 && beast::iequals(name.substr(0, 6), "x-sim-")) {
        std::string lower(name.substr(6));
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (auto err = apply_header(p, lower, f.value())) {
          co_return co_await send_simple(
              req, 400,
              "{\"error\":{\"message\":\"" + *err + "\",\"type\":\"invalid_request_error\"}}\n");
        }
      }
    }
    const bool track = cache_.enabled() || opts_.context_window > 0;
    const auto info = inspector_.inspect(req.body(), {.digests = false, .canonical = track});
    if (!info.error.empty()) {
      co_return co_await send_simple(req, 400,
                                     "{\"error\":{\"message\":\"" + std::string(info.error) +
                                         "\",\"type\":\"invalid_request_error\"}}\n");
    }
    request_shape shape;
    shape.kind = kind;
    shape.model = info.model.empty() ? "sim-small" : info.model;
    shape.stream = info.stream;
    shape.include_usage = info.include_usage;
    shape.max_tokens = info.max_tokens;
    shape.prompt_chars = info.prompt_chars;
    shape.messages = info.messages;
    shape.body_hash = fnv1a(req.body());
    const auto start = clock::now();
    if (track) {
      // What the engine actually sees: the conversation, slid into the context window; then the
      // prefix cache serves its longest cached run of blocks.
      const std::string prompt = slide_window(info.canonical, opts_.context_window);
      shape.prompt_tokens =
          (prompt.size() + prefix_cache::bytes_per_token - 1) / prefix_cache::bytes_per_token;
      shape.cached_tokens = p.cache_bypass ? 0 : cache_.lookup_and_insert(prompt, start);
      shape.cache_control =
          !p.cache_bypass && req.body().find("\"cache_control\"") != std::string::npos;
    }

    if (p.hang) {
      // Never answer; wait until the client (the proxy) gives up and closes.
      co_await wait_for_close();
      co_return false;
    }
    if (p.fault_status > 0) {
      steady_timer t(stream_.get_executor());
      t.expires_at(start + std::chrono::microseconds(static_cast<long>(p.ttft_ms * 1000)));
      error_code ec;
      co_await t.async_wait(use_ec(ec));
      co_return co_await send_simple(req, static_cast<unsigned>(p.fault_status),
                                     error_body(kind, p.fault_status) + "\n");
    }

    const plan pl = make_plan(p, shape);
    if (!shape.stream) {
      steady_timer t(stream_.get_executor());
      t.expires_at(start + std::chrono::microseconds(static_cast<long>(pl.body_at_ms * 1000)));
      error_code ec;
      co_await t.async_wait(use_ec(ec));
      const bool keep = co_await send_simple(req, 200, pl.body + "\n", "application/json", &pl);
      stats_->streams_completed.fetch_add(1);
      co_return keep;
    }
    co_return co_await stream_plan(req, pl, p, start);
  }

  awaitable<bool> stream_plan(const request& req, const plan& pl, const params& p,
                              clock::time_point start) {
    error_code ec;
    http::response<http::empty_body> res{http::status::ok, req.version()};
    res.set(http::field::content_type, "text/event-stream; charset=utf-8");
    res.set(http::field::cache_control, "no-cache");
    res.set(http::field::server, "tokentap-sim");
    res.chunked(true);
    res.keep_alive(req.keep_alive());
    add_digest_headers(res, pl);
    http::response_serializer<http::empty_body> sr{res};
    co_await http::async_write_header(stream_, sr, use_ec(ec));
    if (ec) co_return false;

    watch_for_close();
    steady_timer timer(stream_.get_executor());
    timer_ = &timer;
    // Each event goes out at its planned time.  Events already due (a zero gap, or a client that
    // fell behind) are coalesced into one chunk, as a real server's socket buffer would.
    std::string batch;
    for (std::size_t i = 0; i < pl.events.size() && !client_gone_ && !closed_;) {
      const auto due =
          start + std::chrono::microseconds(static_cast<long>(pl.events[i].at_ms * 1000));
      if (due > clock::now()) {
        timer.expires_at(due);
        co_await timer.async_wait(use_ec(ec));
        if (client_gone_ || closed_) break;
      }
      batch.clear();
      const auto now = clock::now();
      do {
        if (p.stamp) batch.append(stamp_prefix).append(std::to_string(mono_now_ns())) += '\n';
        batch += pl.events[i++].bytes;
      } while (i < pl.events.size() && batch.size() < 256 * 1024 &&
               start + std::chrono::microseconds(static_cast<long>(pl.events[i].at_ms * 1000)) <=
                   now);
      co_await net::async_write(stream_, http::make_chunk(net::buffer(batch)), use_ec(ec));
      if (ec) {
        note_disconnect();
        break;
      }
      stats_->bytes_sent.fetch_add(batch.size(), std::memory_order_relaxed);
    }
    if (!client_gone_ && !closed_) {
      if (pl.ending == plan::end::reset) {
        timer_ = nullptr;
        reset();
        co_return false;
      }
      if (pl.ending == plan::end::stall && p.stall_ms <= 0) {
        timer.expires_at(clock::time_point::max());
        co_await timer.async_wait(use_ec(ec));  // until the client leaves (watcher cancels)
      }
    }
    timer_ = nullptr;
    if (client_gone_ || closed_) co_return false;
    stop_watching();
    co_await net::async_write(stream_, http::make_chunk_last(), use_ec(ec));
    if (ec) co_return false;
    stats_->streams_completed.fetch_add(1);
    co_return true;
  }

  // FNV-1a of the generated texts: a client can prove it received every token.
  template <class Message>
  static void add_digest_headers(Message& res, const plan& pl) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx",
                  static_cast<unsigned long long>(fnv1a(pl.content_text)));
    res.set("x-sim-content-fnv", buf);
    std::snprintf(buf, sizeof buf, "%016llx",
                  static_cast<unsigned long long>(fnv1a(pl.reasoning_text)));
    res.set("x-sim-reasoning-fnv", buf);
    res.set("x-sim-completion-tokens", std::to_string(pl.completion_tokens));
  }

  // The sim notices a vanished client immediately, like the proxy does, and records when.
  void watch_for_close() {
    watching_ = true;
    lowest().socket().async_wait(
        tcp::socket::wait_read,
        [self = this->shared_from_this()](error_code ec) { self->on_readable(ec); });
  }
  void stop_watching() {
    if (!watching_) return;
    watching_ = false;
    error_code ignored;
    lowest().socket().cancel(ignored);
  }
  void on_readable(error_code ec) {
    if (!watching_ || ec == net::error::operation_aborted) return;
    watching_ = false;
    if (!ec) {
      char byte;
      const auto n = ::recv(lowest().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0) return;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        watch_for_close();
        return;
      }
    }
    note_disconnect();
    if (timer_) timer_->cancel();
  }

  awaitable<void> wait_for_close() {
    steady_timer timer(stream_.get_executor());
    timer_ = &timer;
    watch_for_close();
    timer.expires_at(clock::time_point::max());
    error_code ec;
    co_await timer.async_wait(use_ec(ec));
    timer_ = nullptr;
  }

  void note_disconnect() {
    if (client_gone_) return;
    client_gone_ = true;
    stats_->disconnects.fetch_add(1);
    stats_->last_disconnect_ns.store(mono_now_ns());
  }

  void reset() {
    error_code ignored;
    auto& s = lowest().socket();
    s.set_option(net::socket_base::linger(true, 0), ignored);  // RST, not FIN
    s.close(ignored);
    closed_ = true;
  }

  void close() noexcept {
    if (timer_) timer_->cancel();
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    lowest().socket().close(ignored);
  }

  const server_options& opts_;
  std::shared_ptr<server_stats> stats_;
  prefix_cache& cache_;
  Stream stream_;
  parsers::request_inspector inspector_;
  steady_timer* timer_ = nullptr;
  bool idle_ = true, draining_ = false, closed_ = false, watching_ = false, client_gone_ = false;
};

template <class Session, class... Args>
void spawn(worker& w, Args&&... args) {
  auto s = std::make_shared<Session>(w, std::forward<Args>(args)...);
  net::co_spawn(w.ioc, Session::run(std::move(s)),
                [](std::exception_ptr e) { log_escaped_exception(e, "sim session"); });
}

}  // namespace

server::server(server_options opts)
    : opts_(std::move(opts)),
      stats_(std::make_shared<server_stats>()),
      impl_(std::make_unique<impl>(opts_)),
      runtime_(opts_.threads) {
  if (!opts_.tls_cert.empty() || !opts_.tls_key.empty())
    impl_->tls = tls::make_server_context(opts_.tls_cert, opts_.tls_key);
}

server::~server() {
  shutdown(std::chrono::milliseconds(0));
  join();
}

void server::start() {
  endpoint_ = runtime_.listen(opts_.host, opts_.port, [this](tcp_socket s, worker& w) {
    error_code ignored;
    s.set_option(tcp::no_delay(true), ignored);
    if (impl_->tls) {
      spawn<sim_session<beast::ssl_stream<tcp_stream>>>(w, opts_, stats_, impl_->cache,
                                                        std::move(s), *impl_->tls);
    } else {
      spawn<sim_session<tcp_stream>>(w, opts_, stats_, impl_->cache, std::move(s));
    }
  });
  runtime_.start();
}

void server::shutdown(std::chrono::milliseconds grace) {
  runtime_.shutdown(grace);
}
void server::join() {
  runtime_.join();
}

}  // namespace tokentap::sim
