#include "proxy/health_checker.hpp"

#include <memory>

#include "base/log.hpp"
#include "proxy/cluster.hpp"
#include "proxy/endpoint_poller.hpp"
#include "proxy/engine_scraper.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

// One endpoint's probe.
class endpoint_probe final : public endpoint_poller {
 public:
  using endpoint_poller::endpoint_poller;

 private:
  clock::duration interval() const override { return cluster_.cfg().health.interval; }

  // Connect, GET, read the answer (its body bounded), close; a 2xx in time passes.
  awaitable<void> poll() override {
    const auto& h = cluster_.cfg().health;
    const auto r = co_await pool().get_once(cluster_, endpoint_, h.path, "tokentap-health-check",
                                            64 * 1024, clock::now() + h.timeout, conn_);
    if (!stopped()) record(r.status >= 200 && r.status < 300, h);
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
      endpoint_poller::spawn(w, std::move(p), "health check");
    }
  }
}

void health_checks::stop() {
  for (const auto& weak : probes_)
    if (const auto p = weak.lock()) p->drain();
  probes_.clear();
}

}  // namespace tokentap::proxy
