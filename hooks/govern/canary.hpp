#pragma once
// Canaries with automatic rollback (DESIGN.md §11, `canary:`).  A route's canary upstream gets a
// share of the route's requests that climbs through the configured steps; the proxy's own
// measurements of the two sides over the current step — error rate, truncated-stream rate, TTFT
// P99 and inter-token P99 — gate each step, and a breach sets the share to 0 at once and says why.
//
// The `canary` hook does the work in the request phase (which side: the router is told the
// upstream) and at stream end (what that side did).  A conversation keeps the side it was first
// sent to, so its prefix stays in one side's caches; a new conversation is placed by a hash of its
// root against the share, so several instances place it alike.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/section.hpp"
#include "hooks/hook.hpp"
#include "hooks/observe/metrics.hpp"

namespace tokentap::hooks {

/// A canary (`canary:`, DESIGN.md §11): a share of route `route`'s requests goes to upstream
/// `upstream` (the new version) instead of the route's own (the baseline).  The share climbs
/// through `steps` (percent), one step per `interval` once both sides have `min_requests`
/// measured in the step; while both have, any breach — error rate or truncated-stream rate
/// higher than the baseline's by more than the delta, TTFT P99 or inter-token P99 above the
/// baseline's times the ratio — sets the share to 0 at once (rollback).  A conversation keeps the
/// side it was first sent to (the last `max_conversations` remembered); new ones are split by a
/// hash of their root, so instances agree.
struct canary_config {
  std::string route{}, upstream{};
  std::vector<double> steps{5, 25, 50, 100};
  std::chrono::seconds interval{60};
  std::uint32_t min_requests = 100;
  double max_error_rate_delta = 0.005;
  double max_ttft_p99_ratio = 1.2;
  double max_itl_p99_ratio = 1.2;
  double max_truncated_delta = 0.005;
  std::size_t max_conversations = 100000;
  bool operator==(const canary_config&) const = default;
};

/// The `canary:` section: one canary (a mapping) or a list, at most one per route.  Its presence
/// brings the `canary` hook, after the listed ones (a request a hook refused is on neither side).
struct canary_settings {
  std::vector<canary_config> canaries;
  /// Reads the section; each canary must name a route of `cfg` and an upstream of `cfg` other
  /// than the route's own.
  static canary_settings parse(const config::section& s, const config::config& cfg);
};

/// Why a canary was rolled back: the `reason` label of tokentap_canary_rollbacks_total.
enum class canary_reason : std::uint8_t { error_rate, truncated, ttft, itl, count_ };
std::string_view to_string(canary_reason r) noexcept;

class canary_state {
 public:
  using steady = std::chrono::steady_clock;
  /// `start`: when the first step of every canary begins.  `cfg` names the routes' upstreams.
  canary_state(canary_settings settings, const config::config& cfg,
               steady::time_point start = steady::now());
  /// The canaries of `cfg`'s `canary:` section (checked by the hook registry before).
  explicit canary_state(const config::config& cfg, steady::time_point start = steady::now());
  /// Exports the canaries' weights, rollbacks and /api/stats section for as long as `owner`
  /// (holding this state) lives.
  void publish(metrics_registry& metrics, std::weak_ptr<const void> owner);
  ~canary_state();
  canary_state(const canary_state&) = delete;
  canary_state& operator=(const canary_state&) = delete;

  enum class phase : std::uint8_t {
    progressing,  ///< climbing through the steps
    holding,      ///< passed its last step below 100 %: keeps that share, still gated
    promoted,     ///< reached 100 %: every request of the route goes to the canary
    rolled_back,  ///< a gate broke: share 0 until the configuration changes
  };
  static std::string_view to_string(phase p) noexcept;

  /// What one finished exchange on one side showed.
  struct outcome {
    bool error = false;      ///< 5xx, the upstream unreachable or failing, an error in the stream
    bool truncated = false;  ///< a 2xx generation that ended without the provider's end
    double ttft_ms = -1;     ///< -1: no streamed token
  };

  class canary;
  /// The canary of a route, or nullptr (the route has none).
  canary* of_route(std::string_view route) noexcept;
  /// Whether a request goes to the canary upstream.  `root`: the conversation's root digest (0:
  /// the request has no conversation, and is placed by a draw).
  bool assign(canary& c, std::uint64_t root, steady::time_point now);
  /// A finished exchange on one side; its gaps between tokens come through add_itl.
  void record(canary& c, bool canary_side, const outcome& o, steady::time_point now);
  /// Gaps between tokens (ms) of a stream on one side.
  void add_itl(canary& c, bool canary_side, std::span<const double> gaps_ms);
  /// Re-evaluates the gates (at most once a second; record and assign call it too).
  void evaluate(canary& c, steady::time_point now);

  /// The canary's share in percent (0 after a rollback), its phase and step (0-based).
  double weight(const canary& c) const noexcept;
  phase phase_of(canary& c);
  std::size_t step_of(canary& c);
  std::uint64_t rollbacks(canary_reason r) const noexcept {
    return rollbacks_[static_cast<std::size_t>(r)].load(std::memory_order_relaxed);
  }
  const canary_config& cfg_of(const canary& c) const noexcept;
  /// Upstream the canary's route names (the baseline).
  const std::string& baseline_of(const canary& c) const noexcept;

  /// `[{route, upstream, baseline, phase, step, steps, weight, step_age_s, interval_s,
  /// min_requests, reason, evidence, canary: {...}, baseline: {...}}, ...]` (/api/stats).
  void write_json(base::json::writer& w, steady::time_point now);

 private:
  void evaluate_locked(canary& c, steady::time_point now);
  void enter_step(canary& c, std::size_t step, steady::time_point now);
  canary_settings settings_;  // (first: the canaries point into it)
  std::vector<std::unique_ptr<canary>> canaries_;
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(canary_reason::count_)>
      rollbacks_{};
};

/// The "canary" hook (brought by a `canary:` section).
class canary_hook_factory final : public hook_factory {
 public:
  explicit canary_hook_factory(std::shared_ptr<canary_state> state) : state_(std::move(state)) {}
  std::unique_ptr<hook> create() override;

 private:
  std::shared_ptr<canary_state> state_;
};

class hook_registry;
/// Registers "canary".  A reload that leaves the canaries, the routes and the upstreams' names
/// unchanged keeps each canary's progress.
void register_canary(hook_registry& r, std::shared_ptr<metrics_registry> metrics);

}  // namespace tokentap::hooks
