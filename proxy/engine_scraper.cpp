#include "proxy/engine_scraper.hpp"

#include <memory>

#include "config/log.hpp"
#include "parsers/engine_metrics.hpp"
#include "proxy/cluster.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

constexpr std::uint64_t max_metrics_bytes = 8u << 20;  // a vLLM text is ~100 KB

// One endpoint's scrape loop, a session of its worker (as the health probes are).
class engine_scrape final : public net::session_base,
                            public std::enable_shared_from_this<engine_scrape> {
 public:
  engine_scrape(net::worker& w, proxy_shared& shared, std::shared_ptr<const generation> g,
                cluster& c, endpoint& e)
      : session_base(w, net::listener_role::control),
        shared_(shared),
        generation_(std::move(g)),
        cluster_(c),
        endpoint_(e),
        timer_(w.ioc.get_executor()) {
    parsers::engine_kind_of(c.cfg().engine_metrics.kind, kind_);
  }

  static awaitable<void> run(std::shared_ptr<engine_scrape> self) { co_await self->loop(); }

  void drain() noexcept override { stop(); }
  void force_close() noexcept override { stop(); }

 private:
  enum result : int { ok, failed, garbage };

  void stop() noexcept {
    stopped_ = true;
    timer_.cancel();
    if (conn_ != nullptr) {
      error_code ignored;
      conn_->lowest().socket().close(ignored);
    }
  }

  awaitable<void> loop() {
    const auto& cfg = cluster_.cfg().engine_metrics;
    while (!stopped_) {
      const auto started = clock::now();
      parsers::engine_load load;
      const auto r = co_await scrape(cfg, load);
      if (stopped_) break;
      record(r, load);
      timer_.expires_at(started + cfg.interval);
      error_code ec;
      co_await timer_.async_wait(use_ec(ec));
    }
  }

  // One scrape: connect, GET, read the text (bounded in size and by the interval), close.
  awaitable<result> scrape(const config::engine_metrics_config& cfg, parsers::engine_load& out) {
    auto& pool = *shared_.pools[owner().index];
    const auto r = co_await pool.get_once(cluster_, endpoint_, cfg.path, "tokentap-engine-metrics",
                                          max_metrics_bytes, clock::now() + cfg.interval, conn_);
    if (stopped_ || r.status < 200 || r.status >= 300) co_return failed;
    parsers::engine_metrics_reader reader(kind_);
    reader.feed(r.body);
    out = reader.finish();
    co_return out.recognized() ? ok : garbage;
  }

  void record(result r, const parsers::engine_load& load) {
    auto& e = endpoint_;
    e.engine_scrapes[r].fetch_add(1, std::memory_order_relaxed);
    const bool known = r == ok;
    e.engine_running.store(known ? load.running : -1, std::memory_order_relaxed);
    e.engine_waiting.store(known ? load.waiting : -1, std::memory_order_relaxed);
    e.engine_kv_usage.store(known ? load.kv_usage : -1, std::memory_order_relaxed);
    if (r != last_) {
      if (r == ok) {
        TT_LOG(info) << "upstream " << cluster_.cfg().name << ": endpoint " << e.label
                     << " engine metrics read (" << parsers::to_string(load.kind) << ")";
      } else {
        TT_LOG(warn) << "upstream " << cluster_.cfg().name << ": endpoint " << e.label
                     << " engine metrics at " << cluster_.cfg().engine_metrics.path
                     << (r == failed ? " could not be read" : " hold no engine's figures")
                     << "; its engine load is unknown until they can";
      }
      last_ = r;
    }
  }

  proxy_shared& shared_;
  std::shared_ptr<const generation> generation_;  // what cluster_ and endpoint_ belong to
  cluster& cluster_;
  endpoint& endpoint_;
  steady_timer timer_;
  parsers::engine_kind kind_ = parsers::engine_kind::unknown;
  upstream_connection* conn_ = nullptr;
  bool stopped_ = false;
  int last_ = -1;  // the last scrape's result (-1: none yet): logged when it changes
};

}  // namespace

void start_engine_scrapes(net::worker& w, const std::shared_ptr<const generation>& g,
                          proxy_shared& shared,
                          std::vector<std::weak_ptr<net::session_base>>& out) {
  for (const auto& c : g->clusters) {
    if (!c->cfg().engine_metrics.enabled) continue;
    for (const auto& e : c->endpoints()) {
      auto s = std::make_shared<engine_scrape>(w, shared, g, *c, *e);
      out.push_back(s);
      asio::co_spawn(w.ioc, engine_scrape::run(std::move(s)),
                     [](std::exception_ptr ex) { log_escaped_exception(ex, "engine metrics"); });
    }
  }
}

}  // namespace tokentap::proxy
