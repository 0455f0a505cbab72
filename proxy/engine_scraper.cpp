#include "proxy/engine_scraper.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>

#include "base/log.hpp"
#include "parsers/engine_metrics.hpp"
#include "proxy/cluster.hpp"
#include "proxy/endpoint_poller.hpp"
#include "proxy/proxy_server.hpp"
#include "proxy/upstream_pool.hpp"

namespace tokentap::proxy {

namespace {

constexpr std::uint64_t max_metrics_bytes = 8u << 20;  // a vLLM text is ~100 KB

// The engine's TTFT over the stats window: its cumulative histogram now, less the one read about
// a window ago.  Reads are kept about window/32 apart, so a baseline is at most that much older
// than the window's start and the history stays small however short the interval.
class ttft_window {
 public:
  explicit ttft_window(clock::duration window) : window_(window), step_(window / 32) {}

  // A scrape's histogram (empty: the engine has none); `out` gets P50, P95, P99 in seconds, -1
  // where nothing was observed in the window.
  void add(clock::time_point now, std::vector<parsers::histogram_bucket> buckets,
           std::array<double, 3>& out) {
    out = {-1, -1, -1};
    if (buckets.empty()) {
      history_.clear();
      return;
    }
    while (history_.size() > 1 && history_[1].at <= now - window_) history_.pop_front();
    if (!history_.empty() && parsers::bucket_delta(buckets, history_.front().buckets, delta_)) {
      for (std::size_t i = 0; i < out.size(); ++i)
        out[i] = parsers::bucket_quantile(quantiles[i], delta_);
    } else {
      history_.clear();  // the first read, or the engine restarted (its counts fell)
    }
    if (history_.empty() || now - history_.back().at >= step_)
      history_.push_back({now, std::move(buckets)});
  }

  static constexpr double quantiles[3] = {0.5, 0.95, 0.99};

 private:
  struct read {
    clock::time_point at;
    std::vector<parsers::histogram_bucket> buckets;
  };
  clock::duration window_, step_;
  std::deque<read> history_;
  std::vector<parsers::histogram_bucket> delta_;
};

// One endpoint's scrape.
class engine_scrape final : public endpoint_poller {
 public:
  engine_scrape(net::worker& w, proxy_shared& shared, std::shared_ptr<const generation> g,
                cluster& c, endpoint& e)
      : endpoint_poller(w, shared, g, c, e), ttft_(g->cfg.metrics.window) {
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
    std::array<double, 3> ttft{-1, -1, -1};
    if (known) ttft_.add(clock::now(), load.ttft, ttft);
    for (std::size_t i = 0; i < ttft.size(); ++i)
      e.engine_ttft_s[i].store(ttft[i], std::memory_order_relaxed);
    const bool counted = known && cluster_.cfg().engine_metrics.engine_load && load.waiting > 0;
    e.engine_queue.store(
        counted ? static_cast<std::uint32_t>(std::lround(std::min(load.waiting, 1e6))) : 0,
        std::memory_order_relaxed);
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
  ttft_window ttft_;
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
