#include "proxy/engine_scraper.hpp"

#include <memory>

#include "config/log.hpp"
#include "parsers/engine_metrics.hpp"
#include "proxy/cluster.hpp"
#include "proxy/endpoint_poller.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

constexpr std::uint64_t max_metrics_bytes = 8u << 20;  // a vLLM text is ~100 KB

// One endpoint's scrape.
class engine_scrape final : public endpoint_poller {
 public:
  engine_scrape(net::worker& w, proxy_shared& shared, std::shared_ptr<const generation> g,
                cluster& c, endpoint& e)
      : endpoint_poller(w, shared, std::move(g), c, e) {
    parsers::engine_kind_of(c.cfg().engine_metrics.kind, kind_);
  }

 private:
  enum result : int { ok, failed, garbage };

  clock::duration interval() const override { return cluster_.cfg().engine_metrics.interval; }

  // Connect, GET, read the text (bounded in size and by the interval), close.
  awaitable<void> poll() override {
    const auto& cfg = cluster_.cfg().engine_metrics;
    const auto r =
        co_await pool().get_once(cluster_, endpoint_, cfg.path, "tokentap-engine-metrics",
                                 max_metrics_bytes, clock::now() + cfg.interval, conn_);
    if (stopped()) co_return;
    parsers::engine_load load;
    if (r.status < 200 || r.status >= 300) {
      record(failed, load);
      co_return;
    }
    parsers::engine_metrics_reader reader(kind_);
    reader.feed(r.body);
    load = reader.finish();
    record(load.recognized() ? ok : garbage, load);
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

  parsers::engine_kind kind_ = parsers::engine_kind::unknown;
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
      endpoint_poller::spawn(w, std::move(s), "engine metrics");
    }
  }
}

}  // namespace tokentap::proxy
