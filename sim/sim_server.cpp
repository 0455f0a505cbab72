#include "sim/sim_server.hpp"

// g++ 12 false positive on coroutines of asio's awaitable<T, io_context::executor_type>: the
// frame's own operator new/delete pair (thread-local recycling) is reported as mismatched once
// inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <algorithm>
#include <cstdio>
#include <deque>
#include <mutex>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "base/clock.hpp"
#include "net/http_server.hpp"
#include "net/tls.hpp"
#include "parsers/request_inspector.hpp"

namespace tokentap::sim {

namespace http = beast::http;

namespace {

// The engine model's batch: at most `max` sequences at once, the others wait first come first
// served.  Shared by every I/O thread.
class batch_gate {
 public:
  batch_gate(int max, server_stats& stats) : max_(max), stats_(stats) {}

  // Waits for a slot; the sequences in the batch then (this one included), or 0 when the wait
  // was cancelled (the client left): no slot is held.
  template <class Connection>
  awaitable<int> admit(Connection& c) {
    auto w = std::make_shared<waiter>(c.stream().get_executor());
    {
      std::lock_guard lk(mu_);
      if (max_ <= 0 || running_ < max_) co_return enter();
      queue_.push_back(w);
      stats_.waiting.fetch_add(1);
      stats_.queued.fetch_add(1);
    }
    w->timer.expires_at(clock::time_point::max());
    c.waiting_on(&w->timer);
    error_code ec;
    co_await w->timer.async_wait(use_ec(ec));
    c.waiting_on(nullptr);
    std::lock_guard lk(mu_);
    if (w->admitted) co_return running_;
    queue_.erase(std::remove(queue_.begin(), queue_.end(), w), queue_.end());
    stats_.waiting.fetch_sub(1);
    co_return 0;
  }

  // A sequence left the batch: the first waiter takes its slot.
  void release() {
    std::lock_guard lk(mu_);
    if (queue_.empty()) {
      --running_;
      stats_.running.fetch_sub(1);
      return;
    }
    auto w = queue_.front();
    queue_.pop_front();
    stats_.waiting.fetch_sub(1);
    w->admitted = true;
    asio::post(w->timer.get_executor(), [w] { w->timer.cancel(); });
  }

 private:
  struct waiter {
    template <class Executor>
    explicit waiter(Executor ex) : timer(ex) {}
    steady_timer timer;
    bool admitted = false;  // (mu_)
  };
  int enter() {
    stats_.running.fetch_add(1);
    return ++running_;
  }
  const int max_;
  server_stats& stats_;
  std::mutex mu_;
  int running_ = 0;
  std::deque<std::shared_ptr<waiter>> queue_;
};

// A latency histogram under vLLM's name and buckets, for /metrics.
class latency_histogram {
 public:
  latency_histogram(std::string name, std::vector<double> bounds)
      : name_(std::move(name)), bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double s) {
    const auto i = static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), s) -
                                            bounds_.begin());
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(s, std::memory_order_relaxed);
  }
  void render(std::string& out, const std::string& labels) const {
    out += "# TYPE " + name_ + " histogram\n";
    std::uint64_t cumulative = 0;
    char b[64];
    for (std::size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += counts_[i].load(std::memory_order_relaxed);
      if (i < bounds_.size())
        std::snprintf(b, sizeof b, "%g", bounds_[i]);
      else
        std::snprintf(b, sizeof b, "+Inf");
      out +=
          name_ + "_bucket{" + labels + ",le=\"" + b + "\"} " + std::to_string(cumulative) + "\n";
    }
    std::snprintf(b, sizeof b, "%.6f", sum_.load(std::memory_order_relaxed));
    out += name_ + "_sum{" + labels + "} " + b + "\n";
    out += name_ + "_count{" + labels + "} " + std::to_string(cumulative) + "\n";
  }

 private:
  std::string name_;
  std::vector<double> bounds_;
  std::vector<std::atomic<std::uint64_t>> counts_;
  std::atomic<double> sum_{0};
};

// vLLM's buckets (its loggers.py): TTFT, and request latencies (queue, prefill).
const std::vector<double> ttft_buckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> request_buckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

// The simulated engine's shared state: its prefix cache, batch and latency histograms.
struct engine_state {
  engine_state(const server_options& o, server_stats& stats)
      : cache(o.cache), batch(o.max_batch, stats) {}
  prefix_cache cache;
  batch_gate batch;
  latency_histogram ttft{"vllm:time_to_first_token_seconds", ttft_buckets};
  latency_histogram queue{"vllm:request_queue_time_seconds", request_buckets};
  latency_histogram prefill{"vllm:request_prefill_time_seconds", request_buckets};
};

}  // namespace

struct server::impl {
  impl(const server_options& o, server_stats& stats) : engine(o, stats) {}
  std::shared_ptr<asio::ssl::context> tls;
  engine_state engine;
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

using request = net::http_request;

std::string stats_json(const server_stats& s) {
  return "{\"connections\":" + std::to_string(s.connections.load()) +
         ",\"open_connections\":" + std::to_string(s.open_connections.load()) +
         ",\"requests\":" + std::to_string(s.requests.load()) +
         ",\"streams_completed\":" + std::to_string(s.streams_completed.load()) +
         ",\"disconnects\":" + std::to_string(s.disconnects.load()) +
         ",\"bytes_sent\":" + std::to_string(s.bytes_sent.load()) + "}\n";
}

// One connection's simulated engine, answering its requests on the shared HTTP connection.  It
// lives as long as the connection (the connection's responder owns it).
template <class Stream>
class sim_responder {
 public:
  using connection = net::http_connection<Stream>;

  sim_responder(const server_options& opts, std::shared_ptr<server_stats> stats,
                engine_state& engine)
      : opts_(opts), stats_(std::move(stats)), engine_(engine), cache_(engine.cache) {
    stats_->connections.fetch_add(1);
    stats_->open_connections.fetch_add(1);
  }
  ~sim_responder() { stats_->open_connections.fetch_sub(1); }
  sim_responder(const sim_responder&) = delete;
  sim_responder& operator=(const sim_responder&) = delete;

  awaitable<bool> answer(connection& c, request& req) {
    stats_->requests.fetch_add(1);
    co_return co_await handle(c, req);
  }

 private:
  // A reply with the simulator's Server field (and the digests of the texts when there are some).
  static awaitable<bool> send_simple(
      connection& c, const request& req, unsigned status, std::string body,
      std::string_view content_type = "application/json", const plan* pl = nullptr,
      const std::vector<std::pair<std::string, std::string>>& extra = {}) {
    http::response<http::string_body> res{static_cast<http::status>(status), req.version()};
    if (pl) add_digest_headers(res, *pl);
    for (const auto& [name, value] : extra) res.set(name, value);
    res.set(http::field::content_type, content_type);
    res.set(http::field::server, "tokentap-sim");
    res.body() = std::move(body);
    co_return co_await c.reply(req, std::move(res));
  }

  // The engine model under vLLM's metric names (what `engine_metrics: {kind: vllm}` reads).
  std::string metrics_text() const {
    const std::string labels = "model_name=\"sim\",engine=\"0\"";
    std::string out;
    const auto gauge = [&](const char* name, double v) {
      char b[64];
      std::snprintf(b, sizeof b, "%.6g", v);
      out += std::string("# TYPE ") + name + " gauge\n" + name + "{" + labels + "} " + b + "\n";
    };
    const auto counter = [&](const char* name, std::uint64_t v) {
      out += std::string("# TYPE ") + name + " counter\n" + name + "{" + labels + "} " +
             std::to_string(v) + "\n";
    };
    gauge("vllm:num_requests_running", static_cast<double>(stats_->running.load()));
    gauge("vllm:num_requests_waiting", static_cast<double>(stats_->waiting.load()));
    gauge("vllm:kv_cache_usage_perc", engine_.cache.usage());
    counter("vllm:prefix_cache_queries_total", stats_->prompt_tokens.load());
    counter("vllm:prefix_cache_hits_total", stats_->cached_tokens.load());
    engine_.ttft.render(out, labels);
    engine_.queue.render(out, labels);
    engine_.prefill.render(out, labels);
    return out;
  }

  static std::string error_json(std::string_view message, std::string_view type) {
    return "{\"error\":{\"message\":\"" + std::string(message) + "\",\"type\":\"" +
           std::string(type) + "\"}}\n";
  }

  awaitable<bool> handle(connection& c, request& req) {
    const std::string_view target = req.target();
    const auto path = target.substr(0, target.find('?'));
    if (req.method() == http::verb::get) {
      if (path == "/healthz" || path == "/health")  // (vLLM and SGLang answer /health)
        co_return co_await send_simple(c, req, 200, "{\"status\":\"ok\"}\n");
      if (path == "/sim/stats") co_return co_await send_simple(c, req, 200, stats_json(*stats_));
      if (path == "/metrics")
        co_return co_await send_simple(c, req, 200, metrics_text(),
                                       "text/plain; version=0.0.4; charset=utf-8");
    }
    if (path == "/sim/echo") {
      // The request head as the upstream received it (tests check the proxy's header rules).
      std::string head = "request-target: " + std::string(target) + "\n";
      for (const auto& f : req)
        head += std::string(f.name_string()) + ": " + std::string(f.value()) + "\n";
      co_return co_await send_simple(c, req, 200, head, "text/plain");
    }
    if (req.method() == http::verb::get && path == "/v1/models") {
      co_return co_await send_simple(
          c, req, 200,
          "{\"object\":\"list\",\"data\":[{\"id\":\"sim-small\",\"object\":\"model\","
          "\"owned_by\":\"tokentap\"},{\"id\":\"sim-reasoner\",\"object\":\"model\","
          "\"owned_by\":\"tokentap\"}]}\n");
    }
    api kind;
    if (req.method() == http::verb::post && path == "/v1/chat/completions") {
      kind = api::openai_chat;
    } else if (req.method() == http::verb::post && path == "/v1/messages") {
      kind = api::anthropic_messages;
    } else if (req.method() == http::verb::post && path == "/api/chat") {
      kind = api::ollama_chat;
    } else if (req.method() == http::verb::post && path == "/api/generate") {
      kind = api::ollama_generate;
    } else {
      co_return co_await send_simple(c, req, 404, error_json("no such endpoint", "not_found"));
    }

    params p = opts_.defaults;
    for (const auto& f : req) {
      const auto name = f.name_string();
      if (name.size() > 6 && beast::iequals(name.substr(0, 6), "x-sim-")) {
        std::string lower(name.substr(6));
        for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        if (auto err = apply_header(p, lower, f.value()))
          co_return co_await send_simple(c, req, 400, error_json(*err, "invalid_request_error"));
      }
    }
    const bool track = cache_.enabled() || opts_.context_window > 0;
    const auto info = inspector_.inspect(req.body(), {.digests = false, .canonical = track});
    if (!info.error.empty())
      co_return co_await send_simple(c, req, 400, error_json(info.error, "invalid_request_error"));
    request_shape shape;
    shape.kind = kind;
    shape.model = info.model.empty() ? "sim-small" : info.model;
    shape.stream = info.stream || (is_ollama(kind) && !info.stream_given);
    shape.include_usage = info.include_usage;
    shape.continuous_usage = info.continuous_usage;
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

    steady_timer timer(c.stream().get_executor());
    c.waiting_on(&timer);
    struct unregister {
      connection& c;
      ~unregister() {
        c.stop_watching();
        c.waiting_on(nullptr);
      }
    } guard{c};
    error_code ec;
    if (p.hang) {
      // Never answer; wait until the client (the proxy) gives up and closes.
      watch(c);
      timer.expires_at(clock::time_point::max());
      co_await timer.async_wait(use_ec(ec));
      co_return false;
    }
    if (p.fault_status > 0) {
      timer.expires_at(start + std::chrono::microseconds(static_cast<long>(p.ttft_ms * 1000)));
      co_await timer.async_wait(use_ec(ec));
      if (c.closed()) co_return false;
      co_return co_await send_simple(c, req, static_cast<unsigned>(p.fault_status),
                                     error_body(kind, p.fault_status) + "\n");
    }

    // The engine model: a slot in the batch first (the wait is the engine's queue), then the
    // answer's times count from there, its gaps longer for every other sequence in the batch.
    const int in_batch = co_await engine_.batch.admit(c);
    if (in_batch == 0) co_return false;  // the client left while queued
    struct slot_release {
      batch_gate& batch;
      ~slot_release() { batch.release(); }
    } slot{engine_.batch};
    const auto admitted = clock::now();
    const double queue_ms = std::chrono::duration<double, std::milli>(admitted - start).count();
    p.itl_ms += opts_.itl_per_seq_us / 1000.0 * (in_batch - 1);
    plan pl = make_plan(p, shape);
    const auto times = engine_times_of(pl, queue_ms);
    add_engine_report(pl, kind, opts_.engine, times);
    stats_->prompt_tokens.fetch_add(static_cast<std::uint64_t>(pl.prompt_tokens));
    stats_->cached_tokens.fetch_add(static_cast<std::uint64_t>(pl.cached_tokens));
    engine_.queue.observe(queue_ms / 1000);
    engine_.prefill.observe(times.prefill_ms / 1000);
    engine_.ttft.observe((queue_ms + times.prefill_ms) / 1000);
    if (!shape.stream) {
      timer.expires_at(admitted +
                       std::chrono::microseconds(static_cast<long>(pl.body_at_ms * 1000)));
      co_await timer.async_wait(use_ec(ec));
      if (c.closed()) co_return false;
      std::vector<std::pair<std::string, std::string>> headers;
      if (opts_.engine == engine_shape::tgi) {
        // TGI: whole milliseconds, on non-streamed answers only.
        headers = {
            {"x-queue-time", std::to_string(std::lround(times.queue_ms))},
            {"x-inference-time", std::to_string(std::lround(times.prefill_ms + times.decode_ms))}};
      }
      const bool keep =
          co_await send_simple(c, req, 200, pl.body + "\n", "application/json", &pl, headers);
      stats_->streams_completed.fetch_add(1);
      co_return keep;
    }
    co_return co_await stream_plan(c, req, timer, pl, p, admitted, kind);
  }

  awaitable<bool> stream_plan(connection& c, const request& req, steady_timer& timer,
                              const plan& pl, const params& p, clock::time_point start, api kind) {
    http::response<http::empty_body> res{http::status::ok, req.version()};
    // An SSE comment has no place between NDJSON lines: Ollama's answers go unstamped.
    const bool stamp = p.stamp && !is_ollama(kind);
    res.set(http::field::content_type,
            is_ollama(kind) ? "application/x-ndjson" : "text/event-stream; charset=utf-8");
    res.set(http::field::cache_control, "no-cache");
    res.set(http::field::server, "tokentap-sim");
    add_digest_headers(res, pl);
    if (!co_await c.write_chunked_head(req, res)) co_return false;

    watch(c);
    auto gone = [&] { return c.client_gone() || c.closed(); };
    // Each event goes out at its planned time.  Events already due (a zero gap, or a client that
    // fell behind) are coalesced into one chunk, as a real server's socket buffer would.
    error_code ec;
    std::string batch;
    for (std::size_t i = 0; i < pl.events.size() && !gone();) {
      const auto due =
          start + std::chrono::microseconds(static_cast<long>(pl.events[i].at_ms * 1000));
      if (due > clock::now()) {
        timer.expires_at(due);
        co_await timer.async_wait(use_ec(ec));
        if (gone()) break;
      }
      batch.clear();
      const auto now = clock::now();
      do {
        if (stamp) batch.append(stamp_prefix).append(std::to_string(base::mono_now_ns())) += '\n';
        batch += pl.events[i++].bytes;
      } while (i < pl.events.size() && batch.size() < 256 * 1024 &&
               start + std::chrono::microseconds(static_cast<long>(pl.events[i].at_ms * 1000)) <=
                   now);
      if (!co_await c.write_chunk(batch)) {
        note_disconnect();
        break;
      }
      stats_->bytes_sent.fetch_add(batch.size(), std::memory_order_relaxed);
    }
    if (!gone()) {
      if (pl.ending == plan::end::reset) {
        c.reset();
        co_return false;
      }
      if (pl.ending == plan::end::stall && p.stall_ms <= 0) {
        timer.expires_at(clock::time_point::max());
        co_await timer.async_wait(use_ec(ec));  // until the client leaves (the watch cancels)
      }
    }
    if (gone()) co_return false;
    c.stop_watching();
    if (!co_await c.write_last_chunk()) co_return false;
    stats_->streams_completed.fetch_add(1);
    co_return res.keep_alive();
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
  void watch(connection& c) {
    c.watch_for_hangup([this] { note_disconnect(); });
  }

  void note_disconnect() {
    if (disconnect_noted_) return;
    disconnect_noted_ = true;
    stats_->disconnects.fetch_add(1);
    stats_->last_disconnect_ns.store(base::mono_now_ns());
  }

  const server_options& opts_;
  std::shared_ptr<server_stats> stats_;
  engine_state& engine_;
  prefix_cache& cache_;
  parsers::request_inspector inspector_;
  bool disconnect_noted_ = false;
};

template <class Stream>
net::http_responder<Stream> responder(const server_options& opts,
                                      std::shared_ptr<server_stats> stats, engine_state& state) {
  auto engine = std::make_shared<sim_responder<Stream>>(opts, std::move(stats), state);
  return [engine](net::http_connection<Stream>& c, request& req) { return engine->answer(c, req); };
}

}  // namespace

server::server(server_options opts)
    : opts_(std::move(opts)),
      stats_(std::make_shared<server_stats>()),
      impl_(std::make_unique<impl>(opts_, *stats_)),
      runtime_(opts_.threads) {
  if (!opts_.tls_cert.empty() || !opts_.tls_key.empty())
    impl_->tls = net::tls_server_context(opts_.tls_cert, opts_.tls_key);
}

server::~server() {
  shutdown(std::chrono::milliseconds(0));
  join();
}

void server::start() {
  endpoint_ = runtime_.listen(opts_.host, opts_.port, [this](tcp_socket s, net::worker& w) {
    error_code ignored;
    s.set_option(tcp::no_delay(true), ignored);
    if (impl_->tls) {
      net::serve_https(std::move(s), w, *impl_->tls, {},
                       responder<net::tls_stream>(opts_, stats_, impl_->engine));
    } else {
      net::serve_http(std::move(s), w, {}, responder<tcp_stream>(opts_, stats_, impl_->engine));
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
