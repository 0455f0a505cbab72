#pragma once
// Admission (DESIGN.md §11): request-phase rules that refuse what is over its limits before
// anything reaches the upstream — concurrency, requests per minute and tokens per minute, per
// tenant, route, model or for all requests.  Rates are token buckets refilled continuously (a
// per-minute limit is also the burst); a token budget reserves the request's estimate at
// admission and settles at stream end from the normalized usage, so a stream cannot overrun it
// unseen (an overrun is charged: the bucket goes into debt).  Its settings are three top-level
// sections, `admission:`, `priority:` and `shed:`, read here (admission_settings).  With
// `shared_state.redis`, the request and token budgets are shared by every instance through Redis
// (store/redis_budgets.hpp), synchronised off the request path; without Redis, or while it
// is unreachable, they are local.
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "config/section.hpp"
#include "hooks/hook.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/sliding_window.hpp"

namespace tokentap::store {
class redis_budgets;
}

namespace tokentap::hooks {

/// Request priorities (DESIGN.md §11, `priority:`): the value of `header` (high, normal or low),
/// else `default`.  Under a concurrency cap, `low` is refused past cap × (1 − headroom) and
/// `normal` past cap × (1 − headroom / 2); `high` may use the whole cap.
enum class priority : std::uint8_t { high, normal, low };
std::string_view to_string(priority p) noexcept;
struct priority_config {
  bool enabled = false;
  std::string header = "x-tokentap-priority";
  priority fallback = priority::normal;  ///< `default:`
  double headroom = 0.1;
  bool operator==(const priority_config&) const = default;
};

/// SLO-triggered shedding of a route (`shed:`): while the route's TTFT P95 over the last
/// `window` breaks `ttft_p95_ms` (with at least `min_requests` measured), requests of the
/// priorities in `drop` are refused — or, with `reroute`, sent to that upstream instead (a
/// smaller model's, say; `model` then replaces the body's model name) — and once it is back
/// under the SLO they are admitted again.
struct shed_rule {
  std::string route;
  double ttft_p95_ms = 0;
  std::chrono::seconds window{30};
  std::uint32_t min_requests = 20;
  std::vector<priority> drop{priority::low};
  std::string reroute;  ///< an upstream; empty: refuse
  std::string model;    ///< the model rerouted requests ask for; empty: as sent
  bool operator==(const shed_rule&) const = default;
};

/// One admission rule (`admission:`): limits per value of its scope — each tenant, each route,
/// each model, or all requests together (`global`) — optionally only for one route or model.
/// A limit of 0 is no limit.  Token budgets reserve the request's estimate (prompt characters / 4
/// + `max_tokens`, else `assumed_max_tokens`) at admission and settle at stream end from the
/// normalized usage.
struct admission_rule {
  enum class scope_kind { tenant, route, model, global };
  std::string name{};
  scope_kind scope = scope_kind::tenant;
  std::string route{}, model{};  ///< empty: every route / model
  std::uint32_t max_concurrent = 0;
  std::uint32_t requests_per_minute = 0;
  std::uint64_t tokens_per_minute = 0;
  std::uint32_t assumed_max_tokens = 1024;
  bool operator==(const admission_rule&) const = default;
};

/// The admission hook's settings: the `admission:` rules (a list, checked in order; the first
/// that refuses answers), `priority:` and `shed:` (one rule or a list, at most one per route).
/// Any of the three sections brings the hook, first.  A rule of scope tenant tells tenants
/// apart as a `tenants:` section does.
struct admission_settings {
  std::vector<admission_rule> rules;
  priority_config priority;
  std::vector<shed_rule> shed;
  /// Reads the three sections of `cfg`; routes and upstreams they name must be `cfg`'s, and
  /// shedding needs priorities.  Throws config::config_error naming the line.
  static admission_settings parse(const config::config& cfg);
  bool operator==(const admission_settings&) const = default;
};

/// Why a rule refused: the `reason` label of tokentap_admission_rejections_total.
/// `slo`: a shed rule refused the request's priority while its route breaks its TTFT SLO.
enum class admission_reason : std::uint8_t { concurrency, requests, tokens, slo, count_ };
std::string_view to_string(admission_reason r) noexcept;

/// Every rule's counters, shared by all exchanges.
class admission_state {
 public:
  /// Starts the Redis sync thread when budgets are shared (`cfg.shared_state`).  `cfg` gives
  /// the bounds of the buckets (tenants, routes, models) and outlives this.
  admission_state(admission_settings settings, const config::config& cfg);
  /// The settings of `cfg`'s sections (checked by the hook registry before).
  explicit admission_state(const config::config& cfg);
  /// Exports the rules' rejections, shedding and shared-state health and the /api/stats
  /// section for as long as `owner` (holding this state) lives.
  void publish(metrics_registry& metrics, std::weak_ptr<const void> owner);
  ~admission_state();
  admission_state(const admission_state&) = delete;
  admission_state& operator=(const admission_state&) = delete;

  /// Shared state: whether the last exchange with Redis succeeded (false without Redis), and
  /// how many failed / succeeded.
  bool shared_live() const noexcept { return shared_live_.load(std::memory_order_relaxed); }
  std::uint64_t sync_errors() const noexcept { return sync_errors_.load(); }
  std::uint64_t syncs() const noexcept { return syncs_.load(); }

  /// What one admission decision held: per rule, the bucket it counted on and the tokens it
  /// reserved; released (concurrency) and settled (tokens) once, at stream end.
  struct ticket {
    struct hold {
      std::size_t rule;
      void* bucket;
      double reserved_tokens;
      bool concurrent;
    };
    std::vector<hold> holds;
    /// Admitted by being sent elsewhere: the shed rule that rerouted it (nullptr: not rerouted).
    const shed_rule* rerouted = nullptr;
  };

  /// A refusal: which rule, why, and what the reply says.
  struct refusal {
    std::string_view rule;  ///< the refusing rule's name (a shed rule's: `shed-<route>`)
    admission_reason reason{};
    unsigned status = 429;
    std::uint32_t retry_after_s = 1;
    // The refusing rule's limits and what is left (for the rate-limit headers); 0 limit: none.
    std::uint64_t request_limit = 0, requests_left = 0, token_limit = 0, tokens_left = 0;
    double requests_reset_s = 0, tokens_reset_s = 0;
  };

  struct facts {
    std::string_view tenant, route, model;
    double estimate_tokens = 0;  ///< prompt estimate + output budget
    std::int64_t max_tokens = -1;
    priority prio = priority::normal;
  };

  /// Admits (filling `t`) or refuses (`t` left empty, nothing held).  A priority its route's shed
  /// rule drops is refused, or admitted with `t.rerouted` set when the rule reroutes (the
  /// other rules still apply).  `now` on the steady clock.
  bool admit(const facts& f, ticket& t, refusal& r, std::chrono::steady_clock::time_point now);
  /// The exchange ended: concurrency released, reserved tokens replaced by `used` (< 0: unknown,
  /// the reservation stands).
  void settle(ticket& t, double used, std::chrono::steady_clock::time_point now);

  /// A measured time to first token of a request of `route` that its upstream answered, for
  /// the route's shed rule (if it has one).  `now` on the steady clock.
  void record_ttft(std::string_view route, double ttft_ms,
                   std::chrono::steady_clock::time_point now);
  /// Whether `route`'s shed rule is shedding now (re-evaluated at most once a second).
  bool shedding(std::string_view route, std::chrono::steady_clock::time_point now);

  /// `{"shedding":[{route, active, ttft_p95_ms, slo_ms, samples, min_requests, drop, since_s,
  /// shed}], "rules":[{rule, concurrency, requests, tokens}]}` for /api/stats.
  void write_json(base::json::writer& w, std::chrono::steady_clock::time_point now);

  const admission_settings& settings() const noexcept { return settings_; }
  std::uint64_t rejections(std::size_t rule, admission_reason r) const noexcept {
    return rules_[rule]->rejected[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
  std::uint64_t shed_count(std::size_t shed_rule) const noexcept {
    return shed_[shed_rule]->shed.load(std::memory_order_relaxed);
  }
  std::uint64_t rerouted_count(std::size_t shed_rule) const noexcept {
    return shed_[shed_rule]->rerouted.load(std::memory_order_relaxed);
  }
  /// Whether a shed rule rewrites the model of what it reroutes.
  bool rewrites_model() const noexcept { return rewrites_model_; }

 private:
  struct bucket {
    std::uint32_t in_flight = 0;
    double requests = 0, tokens = 0;  // available
    std::chrono::steady_clock::time_point refilled{};
    double unsynced_requests = 0, unsynced_tokens = 0;  // used since the last sync (shared state)
  };
  struct rule_state {
    const admission_rule* cfg;
    std::size_t max_keys;
    std::mutex mu;
    std::unordered_map<std::string, std::unique_ptr<bucket>> buckets;
    std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(admission_reason::count_)>
        rejected{};
  };
  // A route's shed rule: per-second TTFT sketches over its window, and whether it sheds.
  struct shed_state {
    const shed_rule* cfg;
    std::string name;  // shed-<route>
    std::mutex mu;
    struct second {
      quantile_sketch ttft;
    };
    sliding_window<second> seconds{1};
    std::atomic<bool> active{false};
    std::atomic<std::int64_t> evaluated{-1};  // the second of the last evaluation
    double p95_ms = -1;                       // at the last evaluation (mu)
    std::uint64_t samples = 0;                // (mu)
    std::int64_t since = 0;                   // second the current state began (mu)
    std::atomic<std::uint64_t> shed{0};
    std::atomic<std::uint64_t> rerouted{0};
  };
  shed_state* shed_of(std::string_view route) noexcept;
  std::uint32_t concurrency_cap(const admission_rule& r, priority p) const noexcept;
  void evaluate(shed_state& s, std::int64_t now_s);
  bool shedding(shed_state& s, std::chrono::steady_clock::time_point now);

  bucket& bucket_of(rule_state& rs, std::string_view key,
                    std::chrono::steady_clock::time_point now);
  void refill(const admission_rule& r, bucket& b, std::chrono::steady_clock::time_point now) const;
  void sync_loop();
  bool sync_once();

  admission_settings settings_;  // (first: the rules' states point into it)
  const config::config* cfg_;
  std::vector<std::unique_ptr<rule_state>> rules_;
  std::vector<std::unique_ptr<shed_state>> shed_;
  bool rewrites_model_ = false;
  // Shared state: the sync thread and what it says.
  std::unique_ptr<store::redis_budgets> redis_;
  std::atomic<bool> shared_live_{false};  // the last sync succeeded: levels come from Redis
  std::atomic<std::uint64_t> sync_errors_{0}, syncs_{0};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread sync_thread_;
};

/// The "admission" hook (brought by its sections, before the listed hooks).
class admission_hook_factory final : public hook_factory {
 public:
  explicit admission_hook_factory(std::shared_ptr<admission_state> state)
      : state_(std::move(state)) {}
  std::unique_ptr<hook> create() override;

 private:
  std::shared_ptr<admission_state> state_;
};

class hook_registry;
/// Registers "admission" with its three sections (read in admission_settings.cpp).  A reload that
/// leaves what the admission state reads unchanged keeps it: budgets, concurrency in flight and
/// shedding windows carry on.
void register_admission(hook_registry& r, std::shared_ptr<metrics_registry> metrics);

}  // namespace tokentap::hooks
