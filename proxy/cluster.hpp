#pragma once
// Upstreams as clusters (DESIGN.md §10): each configured upstream is a set of endpoints, and a
// load balancer chooses one for each request.  The router maps a request's route to its cluster
// and asks the cluster's balancer; balancing policies implement `load_balancer` and nothing else.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "base/clock.hpp"
#include "config/config.hpp"
#include "parsers/request_inspector.hpp"

namespace tokentap::proxy {

/// One address of a cluster, with what the proxy derives from it once.  Shared: an exchange that
/// counts on it keeps it alive (a hard stop destroys pending sessions after the clusters).
struct endpoint : std::enable_shared_from_this<endpoint> {
  /// The pools' key: the same for the same endpoint through reloads, never given to another.
  std::size_t id = 0;
  std::uint32_t index = 0;  ///< position among its cluster's endpoints
  config::url target;
  std::string host_header;       ///< its `Host` value
  std::string label;             ///< host:port, as metrics and logs name it
  std::uint64_t label_hash = 0;  ///< of `label`: the same in every tokentap process
  /// Exchanges in flight on it, all I/O threads (relaxed: a balancing hint, not an account).
  std::atomic<std::uint32_t> active{0};

  // Outlier detection (cluster::record_failure): failures in a row, until when the endpoint is
  // left out (steady clock, ns; 0: never was), how often it was.
  std::atomic<std::uint32_t> consecutive_failures{0};
  std::atomic<std::int64_t> ejected_until_ns{0};
  std::atomic<std::uint32_t> ejections{0};

  // What it reported of its prompt cache (cluster::cache_report): prompt tokens of the requests
  // whose usage carried cache fields, and how many of them it served from its cache.
  std::atomic<std::uint64_t> prompt_tokens{0};
  std::atomic<std::uint64_t> cached_tokens{0};

  bool ejected(std::int64_t now_ns) const noexcept {
    return ejected_until_ns.load(std::memory_order_relaxed) > now_ns;
  }

  // The active probe (`health:`, proxy/health_checker.hpp): out of balancing while it fails,
  // and the probes' outcomes.
  std::atomic<bool> probe_failing{false};
  std::atomic<std::uint64_t> probes_passed{0}, probes_failed{0};

  // The engine's own load from its /metrics (`engine_metrics:`, proxy/engine_scraper.hpp); -1
  // until read, or when the engine has no such figure.  And the scrapes' outcomes: ok, failed
  // (refused, timed out, not 2xx), garbage (no figure of an engine in the text).
  std::atomic<double> engine_running{-1}, engine_waiting{-1}, engine_kv_usage{-1};
  std::atomic<std::uint64_t> engine_scrapes[3] = {0, 0, 0};
  /// The engine's own TTFT at P50, P95, P99 (s) over the stats window, from its histogram
  /// (vLLM, SGLang); -1 while unknown.
  std::atomic<double> engine_ttft_s[3] = {-1, -1, -1};
  /// The engine's waiting requests, counted as balancing load when its upstream asks
  /// (`engine_metrics: {engine_load: true}`); 0 otherwise and while unknown.
  std::atomic<std::uint32_t> engine_queue{0};

  /// What balancers compare (relaxed, a hint): exchanges in flight here plus the engine's queue.
  std::uint32_t load() const noexcept {
    return active.load(std::memory_order_relaxed) + engine_queue.load(std::memory_order_relaxed);
  }

  /// No configuration names it any more (a reload): its connections are not kept for reuse.
  std::atomic<bool> retired{false};

  /// In balancing: neither ejected nor failing its probe.
  bool available(std::int64_t now_ns) const noexcept {
    return !ejected(now_ns) && !probe_failing.load(std::memory_order_relaxed);
  }
};

/// Why a request moved to another endpoint: the `reason` label of
/// tokentap_upstream_retries_total.
enum class retry_reason : std::uint8_t {
  connect,
  reset,
  timeout,
  status_429,
  status_502,
  status_503,
  count_  // (the number of reasons)
};
std::string_view to_string(retry_reason r) noexcept;

/// Why a balancer chose an endpoint: the `reason` label of tokentap_routing_decisions_total and
/// the trace record's `upstream.decision.reason` (DESIGN.md §10).
enum class routing_reason : std::uint8_t {
  round_robin,    ///< its turn
  least_request,  ///< the least busy (of two drawn, or of all), or a new conversation's place
  prefix_match,   ///< it served the longest prefix of the conversation
  hash,           ///< a new conversation's rendezvous hash
  load_bound,     ///< affinity gave way: the endpoint it pointed to was too busy
  fallback,       ///< the upstream's fallback took the request
  count_          // (the number of reasons)
};
std::string_view to_string(routing_reason r) noexcept;

/// What a balancer may consider for one request.
struct pick_context {
  std::string_view route_key;  ///< from the hooks' request phase; empty: none
  /// The conversation's elements in order (parsers::request_inspector digests); empty when the
  /// body was not inspected or is not a conversation.
  std::span<const parsers::message_digest> conversation;
  /// Endpoints this request already failed on (a retry): not picked again.
  std::span<endpoint* const> tried;

  bool was_tried(const endpoint* e) const noexcept {
    return std::find(tried.begin(), tried.end(), e) != tried.end();
  }
  /// Neither tried nor out of balancing (ejected, failing its probe): an endpoint the balancer
  /// may pick.
  bool usable(const endpoint& e) const noexcept { return !was_tried(&e) && e.available(now_ns); }

  std::int64_t now_ns = base::mono_now_ns();
};

/// A balancer's choice and why.
struct pick_result {
  endpoint* chosen = nullptr;  ///< nullptr: no endpoint can take the request
  routing_reason reason = routing_reason::least_request;
  std::uint32_t matched_messages = 0;  ///< prefix_match: conversation elements matched
  std::int64_t match_seen_ns = 0;      ///< prefix_match: when that prefix was last served there
};

class cluster;

/// Chooses an endpoint of a cluster for one request.  Called from every I/O thread at once.
class load_balancer {
 public:
  virtual ~load_balancer() = default;
  virtual pick_result choose(cluster& c, const pick_context& ctx) noexcept = 0;
  /// `e` took a request for `conversation` (its response head came): what it now holds.
  virtual void served(endpoint& e, std::span<const parsers::message_digest> conversation,
                      std::int64_t now_ns) noexcept {}
  /// `e`, chosen as `d`, reported `cached` prompt tokens from its cache (its usage had cache
  /// fields): evidence for or against what the balancer believed of it.
  virtual void cache_report(endpoint& e, const pick_result& d, std::int64_t cached,
                            std::int64_t now_ns) noexcept {}
  /// The routing reasons its choices give (the series of tokentap_routing_decisions_total
  /// exported for its upstream, besides `fallback`).
  virtual std::vector<routing_reason> reasons() const = 0;
  /// Whether it reads pick_context::conversation (the request's body is then digested for it).
  virtual bool routes_by_conversation() const noexcept { return false; }
};

/// Least outstanding requests by the power of two choices: two endpoints drawn at random, the
/// one with the smaller load() wins — exchanges in flight, plus the engine's queue where it is
/// counted (ties: the first drawn).  One endpoint: that one.  A
/// retry takes the least busy endpoint not tried yet.
class least_request_balancer final : public load_balancer {
 public:
  pick_result choose(cluster& c, const pick_context& ctx) noexcept override;
  std::vector<routing_reason> reasons() const override { return {routing_reason::least_request}; }
};

/// The least busy endpoint (by load()) the request may use (neither tried nor ejected); ties:
/// the first.
/// nullptr when there is none.
endpoint* least_busy_usable(cluster& c, const pick_context& ctx) noexcept;

/// Each endpoint in turn (one counter for every I/O thread); a retry takes the next endpoint
/// after the one that failed that was not tried yet.
class round_robin_balancer final : public load_balancer {
 public:
  pick_result choose(cluster& c, const pick_context& ctx) noexcept override;
  std::vector<routing_reason> reasons() const override { return {routing_reason::round_robin}; }

 private:
  std::atomic<std::uint64_t> next_{0};
};

/// The balancer of the policy an upstream's `balance` names.  Throws config::config_error, naming
/// the line and the policies there are, for a name that is none (start-up and reload only).
std::unique_ptr<load_balancer> make_balancer(const config::upstream_config& cfg);

/// make_balancer()'s check for every upstream of `cfg`, for check-config (throws as it does).
void check_balancing(const config::config& cfg);

/// An upstream at run time.  Immutable after start but for the endpoints' counters.
class cluster {
 public:
  /// `first_id`: the id of its first endpoint (ids run on over the clusters in order).
  /// `balancer`: the configured policy's when null.
  cluster(const config::upstream_config& cfg, std::size_t first_id,
          std::shared_ptr<boost::asio::ssl::context> tls,
          std::unique_ptr<load_balancer> balancer = nullptr);

  const config::upstream_config& cfg() const noexcept { return *cfg_; }
  std::vector<std::shared_ptr<endpoint>>& endpoints() noexcept { return endpoints_; }
  const std::vector<std::shared_ptr<endpoint>>& endpoints() const noexcept { return endpoints_; }
  /// The client TLS context of its https:// endpoints; nullptr for http://.
  boost::asio::ssl::context* tls() const noexcept { return tls_.get(); }

  pick_result choose(const pick_context& ctx) noexcept { return balancer_->choose(*this, ctx); }
  /// Its balancer's (load_balancer::reasons, routes_by_conversation).
  std::vector<routing_reason> reasons() const { return balancer_->reasons(); }
  bool routes_by_conversation() const noexcept { return balancer_->routes_by_conversation(); }
  endpoint* pick(const pick_context& ctx) noexcept { return choose(ctx).chosen; }

  /// `e` took a request for `conversation`: its response head came.
  void served(endpoint& e, std::span<const parsers::message_digest> conversation) noexcept {
    if (!conversation.empty()) balancer_->served(e, conversation, base::mono_now_ns());
  }
  /// `e`'s usage for a request chosen as `d` reported `cached` of `prompt` tokens from its cache.
  void cache_report(endpoint& e, const pick_result& d, std::int64_t prompt,
                    std::int64_t cached) noexcept;

  /// The upstream its `fallback` names (set once all clusters exist); nullptr: none.
  cluster* fallback() const noexcept { return fallback_; }
  void set_fallback(cluster* c) noexcept { fallback_ = c; }

  /// The retry budget (as Envoy's): a retry may start while the cluster's retries in flight stay
  /// under 20 % of its exchanges in flight, and at least min_retries_in_flight.  True: one retry
  /// more is in flight until end_retry().
  bool begin_retry() noexcept;
  void end_retry() noexcept { retrying_.fetch_sub(1, std::memory_order_relaxed); }
  static constexpr std::uint32_t min_retries_in_flight = 3;
  static constexpr std::uint32_t retry_budget_percent = 20;

  /// An attempt on `e` got a response head that was not a gateway failure (502, 503, 504).
  void record_success(endpoint& e) noexcept {
    e.consecutive_failures.store(0, std::memory_order_relaxed);
  }
  /// An attempt on `e` failed (refused, reset or timed out before the head, or 502/503/504):
  /// `outlier.consecutive_failures` in a row eject it, if no more than max_ejected_percent of the
  /// endpoints would then be out.  True when this failure ejected it.
  bool record_failure(endpoint& e) noexcept;
  /// Ejections so far of `e`'s (all its ejections, counted once each).
  std::uint64_t ejections(const endpoint& e) const noexcept {
    return e.ejections.load(std::memory_order_relaxed);
  }

  void count_retry(retry_reason r) noexcept {
    retries_[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t retries(retry_reason r) const noexcept {
    return retries_[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }

  /// A routing decision for a request of this upstream, by why the endpoint was chosen
  /// (`fallback`: its fallback upstream took the request).
  void count_decision(routing_reason r) noexcept {
    decisions_[static_cast<std::size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t decisions(routing_reason r) const noexcept {
    return decisions_[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }

 private:
  const config::upstream_config* cfg_;
  std::vector<std::shared_ptr<endpoint>> endpoints_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::unique_ptr<load_balancer> balancer_;
  std::atomic<std::uint32_t> retrying_{0};
  cluster* fallback_ = nullptr;
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(routing_reason::count_)>
      decisions_{};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(retry_reason::count_)> retries_{};
};

/// Marks an exchange in flight on an endpoint for as long as it lives.
class active_exchange {
 public:
  active_exchange() = default;
  explicit active_exchange(endpoint* e) noexcept { reset(e); }
  active_exchange(const active_exchange&) = delete;
  active_exchange& operator=(const active_exchange&) = delete;
  ~active_exchange() { reset(nullptr); }
  /// Now counted on `e` instead.
  void reset(endpoint* e) noexcept {
    if (e_) e_->active.fetch_sub(1, std::memory_order_relaxed);
    e_ = e != nullptr ? e->shared_from_this() : nullptr;
    if (e_) e_->active.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::shared_ptr<endpoint> e_;
};

}  // namespace tokentap::proxy
