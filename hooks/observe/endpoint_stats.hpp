#pragma once
// The per-endpoint table of /api/stats and the dashboard (DESIGN.md §10): for each endpoint of
// each upstream, over the sliding window, its requests per second, errors, the share of prompt
// tokens it served from its cache (as it reported them), its TTFT quantiles and why requests
// were routed to it; with its streams in flight and whether it is in balancing, read live from
// the proxy.  Rows are registered at start-up from the config: the table is bounded by it.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/hook.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/sliding_window.hpp"

namespace tokentap::hooks {

/// An endpoint's standing in balancing, read when the table is rendered.
struct endpoint_health {
  bool healthy = true;         ///< in balancing
  bool probe_failing = false;  ///< out because its health probe fails
  /// Outlier detection: seconds until an ejected endpoint comes back (> 0), or since the last
  /// ejection ended (<= 0); NaN when it was never ejected.
  double ejection_ends_in_s = std::numeric_limits<double>::quiet_NaN();
  /// The engine's own figures from its /metrics (`engine_metrics:`); -1: unknown.
  double engine_running = -1, engine_waiting = -1, engine_kv_usage = -1;
  /// The engine's TTFT at P50, P95, P99 (ms) over the window, by its histogram; -1: unknown.
  std::array<double, 3> engine_ttft_ms{-1, -1, -1};
};

class endpoint_stats {
 public:
  explicit endpoint_stats(std::chrono::seconds window) : window_(window) {}

  /// A row for `endpoint` (host:port) of `upstream`; `active` and `health` are read when the
  /// table is rendered, while `owner` lives (an empty owner: always).  Adding a row that exists
  /// (a reload) replaces its readers and keeps its window; a row whose owner is gone leaves the
  /// table.
  void add(std::string upstream, std::string endpoint, std::function<double()> active,
           std::function<endpoint_health()> health, std::weak_ptr<const void> owner = {});

  /// A finished exchange: counted on the endpoint that answered it (its last attempt's), if
  /// that endpoint has a row.
  void record(const stream_info& s);

  /// `[{upstream, endpoint, active, healthy, probe_failing, ejection_ends_in_s (null: never
  /// ejected), engine_running, engine_waiting, engine_kv_usage, request_rate, requests, errors,
  /// hit_ratio, cached_tokens, prompt_tokens, ttft_ms: {p50, p95, p99, n},
  /// engine_ttft_ms: {p50, p95, p99}, ttft_gap_ms: {p50, p95, p99}, reasons: {...}}, ...]` over
  /// the window (`window_s`: its length so far); null where a figure is unknown.
  void write_json(base::json::writer& w, double window_s);

  /// The proxy's TTFT at P50, P95, P99 (ms) on an endpoint over the window; -1 where it has
  /// none (no row, or nothing measured).
  std::array<double, 3> ttft_ms(std::string_view upstream, std::string_view endpoint);

  /// What lies between the proxy and the engine: the proxy's TTFT quantile less the engine's
  /// (ms), or NaN when either is unknown.
  static double gap_ms(double proxy_ms, double engine_ms) noexcept;

  /// How many distinct routing reasons the rows count (the balancers' names, learned as they
  /// come; a reason past them is not counted).
  static constexpr std::size_t max_reasons = 12;

 private:
  struct second {
    std::uint64_t requests = 0, errors = 0, prompt_tokens = 0, cached_tokens = 0;
    std::array<std::uint64_t, max_reasons> routed{};  // by reason_names_' index
    quantile_sketch ttft;
  };
  struct row {
    std::string upstream, endpoint;
    std::function<double()> active;
    std::function<endpoint_health()> health;
    std::weak_ptr<const void> owner;
    bool has_owner = false;
    sliding_window<second> seconds{1};
  };
  // A row's seconds still in the window, summed (mu_ held).
  second in_window(const row& r, std::int64_t now) const;

  std::chrono::seconds window_;
  // The index of `reason` in reason_names_, added when new; max_reasons when full (mu_ held).
  std::size_t reason_index(std::string_view reason);

  std::mutex mu_;
  std::vector<std::unique_ptr<row>> rows_;
  std::vector<std::string> reason_names_;
};

}  // namespace tokentap::hooks
