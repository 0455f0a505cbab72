#include "proxy/health_checker.hpp"

#include <memory>

#include "config/log.hpp"
#include "proxy/cluster.hpp"
#include "proxy/engine_scraper.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

// One endpoint's probe loop, registered with its worker as a session: shutdown stops it.
class endpoint_probe final : public net::session_base,
                             public std::enable_shared_from_this<endpoint_probe> {
 public:
  endpoint_probe(net::worker& w, proxy_shared& shared, std::shared_ptr<const generation> g,
                 cluster& c, endpoint& e)
      : session_base(w, net::listener_role::control),
        shared_(shared),
        generation_(std::move(g)),
        cluster_(c),
        endpoint_(e),
        timer_(w.ioc.get_executor()) {}

  static awaitable<void> run(std::shared_ptr<endpoint_probe> self) { co_await self->loop(); }

  void drain() noexcept override { stop(); }
  void force_close() noexcept override { stop(); }

 private:
  void stop() noexcept {
    stopped_ = true;
    timer_.cancel();
    if (conn_ != nullptr) {
      error_code ignored;
      conn_->lowest().socket().close(ignored);
    }
  }

  awaitable<void> loop() {
    const auto& h = cluster_.cfg().health;
    while (!stopped_) {
      const auto started = clock::now();
      const bool passed = co_await probe(h);
      if (stopped_) break;
      record(passed, h);
      timer_.expires_at(started + h.interval);
      error_code ec;
      co_await timer_.async_wait(use_ec(ec));
    }
  }

  // One probe: connect, GET, read the answer (its body bounded), close.
  awaitable<bool> probe(const config::health_config& h) {
    auto& pool = *shared_.pools[owner().index];
    const auto r = co_await pool.get_once(cluster_, endpoint_, h.path, "tokentap-health-check",
                                          64 * 1024, clock::now() + h.timeout, conn_);
    co_return r.status >= 200 && r.status < 300;
  }

  void record(bool passed, const config::health_config& h) {
    auto& e = endpoint_;
    (passed ? e.probes_passed : e.probes_failed).fetch_add(1, std::memory_order_relaxed);
    if (passed) {
      failures_ = 0;
      if (e.probe_failing.load(std::memory_order_relaxed) && ++passes_ >= h.healthy_threshold) {
        e.probe_failing.store(false, std::memory_order_relaxed);
        TT_LOG(info) << "upstream " << cluster_.cfg().name << ": endpoint " << e.label
                     << " passes its health check again; back in balancing";
      }
      return;
    }
    passes_ = 0;
    if (!e.probe_failing.load(std::memory_order_relaxed) && ++failures_ >= h.unhealthy_threshold) {
      e.probe_failing.store(true, std::memory_order_relaxed);
      TT_LOG(warn) << "upstream " << cluster_.cfg().name << ": endpoint " << e.label << " failed "
                   << failures_ << " health checks in a row (GET " << h.path
                   << "); out of balancing until it passes";
    }
  }

  proxy_shared& shared_;
  std::shared_ptr<const generation> generation_;  // what cluster_ and endpoint_ belong to
  cluster& cluster_;
  endpoint& endpoint_;
  steady_timer timer_;
  upstream_connection* conn_ = nullptr;  // the probe's, while one is open
  bool stopped_ = false;
  unsigned failures_ = 0, passes_ = 0;
};

}  // namespace

void health_checks::start(net::worker& w, std::shared_ptr<const generation> g,
                          proxy_shared& shared) {
  start_engine_scrapes(w, g, shared, probes_);
  for (const auto& c : g->clusters) {
    if (!c->cfg().health.enabled) continue;
    for (const auto& e : c->endpoints()) {
      auto p = std::make_shared<endpoint_probe>(w, shared, g, *c, *e);
      probes_.push_back(p);
      asio::co_spawn(w.ioc, endpoint_probe::run(std::move(p)),
                     [](std::exception_ptr ex) { log_escaped_exception(ex, "health check"); });
    }
  }
}

void health_checks::stop() {
  for (const auto& weak : probes_)
    if (const auto p = weak.lock()) p->drain();
  probes_.clear();
}

}  // namespace tokentap::proxy
