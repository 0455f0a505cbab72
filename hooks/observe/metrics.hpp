#pragma once
// Prometheus metrics (DESIGN.md §4) and the live statistics behind /api/stats and /dashboard.
//
// Cost model: nothing takes a lock per token.  A stream tallies its inter-token gaps and
// per-read overheads into local bucket counts and folds them into the shared histograms with one
// ObserveMultiple (one lock) at most once per second and at its end, so dashboards move while a
// long stream runs.  Per-request figures (TTFT, e2e, TPOT, tokens, outcome) are observed once, at
// the end of the stream.  Label handles are resolved once per (route, model, provider) series
// and cached; model values past `max_models` distinct ones become "other".
//
// The registry's parts: the streams' series and the hook (metrics.cpp), what other components
// publish through it (metrics_sources.cpp), the /api/stats JSON (stats_json.cpp).
#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "hooks/hook.hpp"
#include "hooks/observe/metric_ref.hpp"
#include "hooks/observe/quantile_sketch.hpp"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace tokentap::hooks {

/// Label values of one series.
struct series_key {
  std::string route, model, provider;
  bool operator<(const series_key& o) const {
    return std::tie(route, model, provider) < std::tie(o.route, o.model, o.provider);
  }
};

/// Bucket boundaries in use (seconds), from config or the defaults.
struct bucket_config {
  std::vector<double> ttft, itl, e2e;
  std::vector<double> phase;  ///< tokentap_latency_phase_seconds: 50 µs to 5 min
};
bucket_config default_buckets();

class endpoint_stats;
struct endpoint_health;
class tenant_stats;

class metrics_registry {
 public:
  explicit metrics_registry(const config::config& cfg);
  ~metrics_registry();

  /// Resolved handles of one series; stable for the registry's lifetime.
  struct series;
  series& resolve(std::string_view route, std::string_view model, std::string_view provider);

  /// Model label with bounded cardinality.
  std::string model_label(std::string_view model);

  /// Prometheus text format 0.0.4 of everything registered.
  std::string prometheus_text();
  /// JSON for /api/stats: per route and model, over the sliding window and since start.
  std::string stats_json();

  /// What a source reads lives as long as its `owner`: once the owner is gone, the source and its
  /// series are dropped at the next scrape.  An empty owner: the registry's lifetime.
  using owner_ref = std::weak_ptr<const void>;

  /// The registry's counter `name` with `labels` (registered on first use), for a component to
  /// count into directly.
  counter_ref counter(const std::string& name, const std::string& help,
                      const std::map<std::string, std::string>& labels = {});
  /// The same for a gauge.
  gauge_ref gauge(const std::string& name, const std::string& help,
                  const std::map<std::string, std::string>& labels = {});

  /// A counter kept elsewhere (the trace writer's, the OTLP exporter's thread), read at scrape
  /// time.  One source per name and label set: registering the series again (a reload's new
  /// generation) replaces its source, and the counter counts on from the new source's current
  /// value, so it never goes back.
  void add_counter_source(const std::string& name, const std::string& help,
                          std::function<std::uint64_t()> read,
                          const std::map<std::string, std::string>& labels = {},
                          owner_ref owner = {});
  /// A gauge kept elsewhere, read at scrape time (same rules).
  void add_gauge_source(const std::string& name, const std::string& help,
                        std::function<double()> read,
                        const std::map<std::string, std::string>& labels = {},
                        owner_ref owner = {});

  /// A section of /api/stats kept elsewhere: `"name":` followed by the value `render` writes,
  /// rendered at each query.  Registering a name again replaces its section.
  void add_stats_section(std::string name, std::function<void(base::json::writer&)> render,
                         owner_ref owner = {});

  /// A request the proxy answered itself before any hook saw it (malformed, no route, too
  /// large): counted in tokentap_requests_total{code} with model and provider `unknown`, under
  /// its route's name ("" when none matched).  Routes and codes are few: the series stay
  /// bounded.
  void count_local_reply(std::string_view route, unsigned code);

  /// A response head an endpoint of an upstream sent (DESIGN.md §10):
  /// tokentap_upstream_endpoint_requests_total{upstream, endpoint, code}.  Upstreams and
  /// endpoints come from the config and codes are three digits: the series stay bounded.
  void count_endpoint_response(std::string_view upstream, std::string_view endpoint, unsigned code);

  // Called by the metrics hook (see metrics.cpp).
  struct fold_batch;
  void fold(series& s, fold_batch& b);
  void finish(series& s, const stream_info& sum, const std::string& model, const std::string& route,
              std::uint64_t steps);

  const bucket_config& buckets() const noexcept { return buckets_; }

  /// The Prometheus registry /metrics renders: for families kept by other hooks (gen_ai_metrics).
  prometheus::Registry& prometheus_registry() noexcept { return *registry_; }

  /// The per-endpoint table of /api/stats (rows added at setup by the proxy).
  endpoint_stats& endpoints() noexcept { return *endpoints_; }
  /// An endpoint of an upstream, as long as `owner` lives: its /api/stats row (`active` and
  /// `healthy` read at each query) and, once the owner is gone, the end of its
  /// tokentap_upstream_endpoint_requests_total series.
  void add_endpoint(const std::string& upstream, const std::string& endpoint,
                    std::function<double()> active, std::function<endpoint_health()> health,
                    owner_ref owner);

 private:
  struct window;
  std::shared_ptr<prometheus::Registry> registry_;
  bucket_config buckets_;
  std::size_t max_models_;
  std::chrono::seconds window_;
  std::mutex mu_;  // series map, model set, windows (never per token)
  std::map<series_key, std::unique_ptr<series>> series_;
  std::map<std::string, bool, std::less<>> models_;
  std::map<std::string, std::unique_ptr<window>, std::less<>> windows_;  // by route \x1f model
  struct slow_row;                // a recent request's summary (metrics.cpp)
  std::deque<slow_row> slowest_;  // recent requests, bounded; rendered on query
  // A source's owner, and whether it had one (an empty weak_ptr and an expired one look alike).
  struct owned {
    owner_ref owner;
    bool has_owner = false;
    /// The owner, kept alive while its source is read; nullptr (and true) without one.
    std::shared_ptr<const void> lock(bool& alive) const {
      auto p = owner.lock();
      alive = !has_owner || p != nullptr;
      return p;
    }
  };
  struct counter_source : owned {
    prometheus::Family<prometheus::Counter>* family;
    prometheus::Counter* metric;
    std::function<std::uint64_t()> read;
    std::uint64_t seen = 0;
  };
  std::vector<counter_source> sources_;
  struct gauge_source : owned {
    prometheus::Family<prometheus::Gauge>* family;
    prometheus::Gauge* metric;
    std::function<double()> read;
  };
  std::vector<gauge_source> gauge_sources_;
  struct section : owned {
    std::string name;
    std::function<void(base::json::writer&)> render;
  };
  std::vector<section> sections_;
  std::map<std::string, owned> endpoint_owners_;  // by upstream \x1f endpoint \x1f (mu_)
  /// Reads every source into its series; drops those whose owner is gone (mu_ held).
  void poll_sources();
  std::map<std::pair<std::string, unsigned>, prometheus::Counter*> local_replies_;  // (mu_)
  prometheus::Family<prometheus::Counter>* endpoint_responses_ = nullptr;           // (mu_)
  std::map<std::string, prometheus::Counter*, std::less<>> endpoint_counters_;      // (mu_)
  struct families;
  std::unique_ptr<families> fam_;
  std::unique_ptr<endpoint_stats> endpoints_;
  bool tenants_enabled_;
  std::unique_ptr<tenant_stats> tenants_;
  std::chrono::steady_clock::time_point started_;
  std::string trace_dir_;  // where trace records go (empty: none), for the dashboard's commands
};

/// The "metrics" hook: per-stream tallies folded into a shared metrics_registry.
class metrics_hook_factory final : public hook_factory {
 public:
  explicit metrics_hook_factory(std::shared_ptr<metrics_registry> reg) : reg_(std::move(reg)) {}
  std::unique_ptr<hook> create() override;

 private:
  std::shared_ptr<metrics_registry> reg_;
};

/// Cache class of a request from its usage: hit (>= 90 % of input cached), partial, miss
/// (the provider reports cache fields and 0 cached), unknown.
std::string_view cache_class(const parsers::usage_counts& u) noexcept;

class hook_registry;
/// Registers "metrics": records into `metrics` (skipped without one).
void register_metrics_hook(hook_registry& r, std::shared_ptr<metrics_registry> metrics);

}  // namespace tokentap::hooks
