#include "hooks/govern/canary.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "hooks/registry.hpp"
#include "parsers/request_inspector.hpp"

namespace tokentap::hooks {

namespace {

using steady = canary_state::steady;

// What one side did over the current step.
struct side_stats {
  std::uint64_t requests = 0, errors = 0, truncated = 0;
  quantile_sketch ttft, itl;
  double error_rate() const { return requests > 0 ? double(errors) / double(requests) : 0; }
  double truncated_rate() const { return requests > 0 ? double(truncated) / double(requests) : 0; }
};

std::string fmt(const char* f, double a, double b, double c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

std::string_view to_string(canary_reason r) noexcept {
  switch (r) {
    case canary_reason::error_rate:
      return "error_rate";
    case canary_reason::truncated:
      return "truncated";
    case canary_reason::ttft:
      return "ttft";
    case canary_reason::itl:
      return "itl";
    case canary_reason::count_:
      break;
  }
  return "unknown";
}

std::string_view canary_state::to_string(phase p) noexcept {
  switch (p) {
    case phase::progressing:
      return "progressing";
    case phase::holding:
      return "holding";
    case phase::promoted:
      return "promoted";
    case phase::rolled_back:
      return "rolled_back";
  }
  return "unknown";
}

class canary_state::canary {
 public:
  const canary_config* cfg = nullptr;
  std::string baseline;                     // the route's own upstream
  std::atomic<std::uint32_t> weight_bp{0};  // the share, in 1/100 of a percent
  std::atomic<std::int64_t> evaluated{-1};  // the second of the last evaluation
  std::atomic<std::uint64_t> draws{0};      // requests without a conversation, placed by a draw
  std::mutex mu;                            // what follows
  phase ph = phase::progressing;
  std::size_t step = 0;
  steady::time_point step_started{};
  side_stats sides[2];  // [0]: baseline, [1]: canary
  canary_reason reason = canary_reason::count_;
  std::string evidence;  // why the last verdict was given, in numbers
  // Sides of recent conversations by root digest: two generations, so the memory is bounded by
  // cfg->max_conversations and a conversation still talking is never forgotten before an idle one.
  std::unordered_map<std::uint64_t, bool> recent, older;
};

canary_settings canary_settings::parse(const config::section& s, const config::config& cfg) {
  canary_settings out;
  if (!s) return out;
  std::vector<config::section> entries;
  if (s.type() == config::section::kind::list)
    entries = s.items();
  else
    entries.push_back(s);
  for (const auto& c : entries) {  // one per route
    c.check_keys(
        {"route", "upstream", "steps", "interval_s", "min_requests", "max_error_rate_delta",
         "max_ttft_p99_ratio", "max_itl_p99_ratio", "max_truncated_delta", "max_conversations"},
        "a canary");
    canary_config k;
    if (!c["route"] || !c["upstream"]) c.fail("a canary needs a route and an upstream");
    k.route = c["route"].string("route");
    k.upstream = c["upstream"].string("upstream");
    if (const auto& st = c["steps"]) {
      if (st.type() != config::section::kind::list || st.items().empty() || st.items().size() > 100)
        st.fail("canary.steps must be a list of 1 to 100 percentages, e.g. [5, 25, 50, 100]");
      k.steps.clear();
      for (const auto& x : st.items()) {
        const auto p = x.number("steps");
        if (!(p > 0 && p <= 100)) x.fail("canary.steps: each step must be above 0 and at most 100");
        if (!k.steps.empty() && !(p > k.steps.back()))
          x.fail("canary.steps must be strictly increasing");
        k.steps.push_back(p);
      }
    }
    const auto whole = [&](const char* key, std::uint64_t lo, std::uint64_t hi, auto& out) {
      const auto& v = c[key];
      if (!v) return;
      const auto n = v.non_negative(key);
      if (n < lo || n > hi)
        v.fail("canary." + std::string(key) + " must be from " + std::to_string(lo) + " to " +
               std::to_string(hi));
      out = static_cast<std::remove_reference_t<decltype(out)>>(n);
    };
    std::uint64_t interval_s = static_cast<std::uint64_t>(k.interval.count());
    whole("interval_s", 1, 86400, interval_s);
    k.interval = std::chrono::seconds(interval_s);
    whole("min_requests", 1, 10000000, k.min_requests);
    whole("max_conversations", 1, 10000000, k.max_conversations);
    const auto bounded = [&](const char* key, double& out, double lo, double hi) {
      const auto& v = c[key];
      if (!v) return;
      out = v.number(key);
      char range[64];
      std::snprintf(range, sizeof range, "from %g to %g", lo, hi);
      if (!(out >= lo && out <= hi)) v.fail("canary." + std::string(key) + " must be " + range);
    };
    bounded("max_error_rate_delta", k.max_error_rate_delta, 0, 1);
    bounded("max_truncated_delta", k.max_truncated_delta, 0, 1);
    bounded("max_ttft_p99_ratio", k.max_ttft_p99_ratio, 1, 1000);
    bounded("max_itl_p99_ratio", k.max_itl_p99_ratio, 1, 1000);
    for (const auto& other : out.canaries)
      if (other.route == k.route) c["route"].fail("a second canary for route '" + k.route + "'");
    // What it names: the route, and an upstream that is not the route's own.
    const auto route =
        std::find_if(cfg.routes.begin(), cfg.routes.end(),
                     [&](const config::route_config& r) { return r.name == k.route; });
    if (route == cfg.routes.end()) c["route"].fail("canary names unknown route '" + k.route + "'");
    const auto up =
        std::find_if(cfg.upstreams.begin(), cfg.upstreams.end(),
                     [&](const config::upstream_config& u) { return u.name == k.upstream; });
    if (up == cfg.upstreams.end())
      c["upstream"].fail("canary of route '" + k.route + "' names unknown upstream '" + k.upstream +
                         "'");
    if (up->name == route->upstream)
      c["upstream"].fail("canary of route '" + k.route + "' is the route's own upstream '" +
                         k.upstream + "': name the new version's upstream");
    out.canaries.push_back(std::move(k));
  }
  return out;
}

canary_state::canary_state(const config::config& cfg, steady::time_point start)
    : canary_state(canary_settings::parse(cfg.hook_section("canary"), cfg), cfg, start) {}

canary_state::canary_state(canary_settings settings, const config::config& cfg,
                           steady::time_point start)
    : settings_(std::move(settings)) {
  for (const auto& k : settings_.canaries) {
    auto c = std::make_unique<canary>();
    c->cfg = &k;
    for (const auto& r : cfg.routes)
      if (r.name == k.route) c->baseline = cfg.upstreams[r.upstream_index].name;
    enter_step(*c, 0, start);
    canaries_.push_back(std::move(c));
  }
}

void canary_state::publish(metrics_registry& metrics, std::weak_ptr<const void> owner) {
  for (auto& cp : canaries_) {
    auto* c = cp.get();
    metrics.add_gauge_source(
        "tokentap_canary_weight",
        "The share of its route's requests a canary upstream is given, in percent (0 once rolled "
        "back)",
        [this, c] {
          evaluate(*c, steady::now());
          return weight(*c);
        },
        {{"route", c->cfg->route}, {"upstream", c->cfg->upstream}}, owner);
  }
  for (std::size_t r = 0; r < rollbacks_.size(); ++r) {
    const auto why = static_cast<canary_reason>(r);
    metrics.add_counter_source(
        "tokentap_canary_rollbacks_total",
        "Canaries whose share was set to 0 because a gate broke, by the gate",
        [this, why] { return rollbacks(why); }, {{"reason", std::string(hooks::to_string(why))}},
        owner);
  }
  metrics.add_stats_section(
      "canaries", [this](base::json::writer& w) { write_json(w, steady::now()); }, owner);
}

canary_state::~canary_state() = default;

canary_state::canary* canary_state::of_route(std::string_view route) noexcept {
  for (auto& c : canaries_)
    if (c->cfg->route == route) return c.get();
  return nullptr;
}

const canary_config& canary_state::cfg_of(const canary& c) const noexcept {
  return *c.cfg;
}

const std::string& canary_state::baseline_of(const canary& c) const noexcept {
  return c.baseline;
}

double canary_state::weight(const canary& c) const noexcept {
  return c.weight_bp.load(std::memory_order_relaxed) / 100.0;
}

canary_state::phase canary_state::phase_of(canary& c) {
  std::lock_guard lk(c.mu);
  return c.ph;
}

std::size_t canary_state::step_of(canary& c) {
  std::lock_guard lk(c.mu);
  return c.step;
}

void canary_state::enter_step(canary& c, std::size_t step, steady::time_point now) {
  c.step = step;
  const double w = c.cfg->steps[step];
  c.weight_bp.store(static_cast<std::uint32_t>(w * 100 + 0.5), std::memory_order_relaxed);
  c.step_started = now;
  c.sides[0] = {};
  c.sides[1] = {};
  if (w >= 100) c.ph = phase::promoted;
}

bool canary_state::assign(canary& c, std::uint64_t root, steady::time_point now) {
  evaluate(c, now);
  const auto w = c.weight_bp.load(std::memory_order_relaxed);
  if (w == 0) return false;
  if (w >= 10000) return true;
  if (root == 0)
    return parsers::mix64(c.draws.fetch_add(1, std::memory_order_relaxed) + 1) % 10000 < w;
  std::lock_guard lk(c.mu);
  if (auto it = c.recent.find(root); it != c.recent.end()) return it->second;
  bool side;
  if (auto it = c.older.find(root); it != c.older.end()) {
    side = it->second;
    c.older.erase(it);
  } else {
    side = parsers::mix64(root) % 10000 < w;
  }
  if (c.recent.size() >= std::max<std::size_t>(1, c.cfg->max_conversations / 2)) {
    c.older = std::move(c.recent);
    c.recent.clear();
  }
  c.recent.emplace(root, side);
  return side;
}

void canary_state::record(canary& c, bool canary_side, const outcome& o, steady::time_point now) {
  {
    std::lock_guard lk(c.mu);
    auto& s = c.sides[canary_side ? 1 : 0];
    ++s.requests;
    if (o.error) ++s.errors;
    if (o.truncated) ++s.truncated;
    if (o.ttft_ms >= 0) s.ttft.add(o.ttft_ms);
  }
  evaluate(c, now);
}

void canary_state::add_itl(canary& c, bool canary_side, std::span<const double> gaps_ms) {
  if (gaps_ms.empty()) return;
  std::lock_guard lk(c.mu);
  auto& s = c.sides[canary_side ? 1 : 0];
  for (const auto g : gaps_ms) s.itl.add(g);
}

void canary_state::evaluate(canary& c, steady::time_point now) {
  const auto sec = base::seconds_of(now);
  auto seen = c.evaluated.load(std::memory_order_relaxed);
  if (seen >= sec || !c.evaluated.compare_exchange_strong(seen, sec)) return;
  std::lock_guard lk(c.mu);
  evaluate_locked(c, now);
}

void canary_state::evaluate_locked(canary& c, steady::time_point now) {
  if (c.ph == phase::promoted || c.ph == phase::rolled_back) return;
  const auto& k = *c.cfg;
  const auto& base = c.sides[0];
  const auto& can = c.sides[1];
  // No verdict, either way, before both sides have the minimum sample of the step.
  if (base.requests < k.min_requests || can.requests < k.min_requests) return;
  auto breach = canary_reason::count_;
  std::string why;
  if (can.error_rate() - base.error_rate() > k.max_error_rate_delta) {
    breach = canary_reason::error_rate;
    why = fmt("error rate %.2f %% against the baseline's %.2f %% (at most %.2f points more)",
              100 * can.error_rate(), 100 * base.error_rate(), 100 * k.max_error_rate_delta);
  } else if (can.truncated_rate() - base.truncated_rate() > k.max_truncated_delta) {
    breach = canary_reason::truncated;
    why = fmt("truncated streams %.2f %% against the baseline's %.2f %% (at most %.2f points more)",
              100 * can.truncated_rate(), 100 * base.truncated_rate(), 100 * k.max_truncated_delta);
  } else if (can.ttft.count() > 0 && base.ttft.count() > 0 &&
             can.ttft.quantile(0.99) > k.max_ttft_p99_ratio * base.ttft.quantile(0.99)) {
    breach = canary_reason::ttft;
    why = fmt("TTFT P99 %.1f ms against the baseline's %.1f ms (at most x%.2f)",
              can.ttft.quantile(0.99), base.ttft.quantile(0.99), k.max_ttft_p99_ratio);
  } else if (can.itl.count() > 0 && base.itl.count() > 0 &&
             can.itl.quantile(0.99) > k.max_itl_p99_ratio * base.itl.quantile(0.99)) {
    breach = canary_reason::itl;
    why = fmt("inter-token P99 %.1f ms against the baseline's %.1f ms (at most x%.2f)",
              can.itl.quantile(0.99), base.itl.quantile(0.99), k.max_itl_p99_ratio);
  }
  const auto at =
      fmt("step %.0f of %.0f (%g %%)", double(c.step + 1), double(k.steps.size()), k.steps[c.step]);
  if (breach != canary_reason::count_) {
    c.ph = phase::rolled_back;
    c.weight_bp.store(0, std::memory_order_relaxed);
    c.reason = breach;
    c.evidence = why + ", over " + std::to_string(can.requests) + " canary and " +
                 std::to_string(base.requests) + " baseline requests";
    rollbacks_[static_cast<std::size_t>(breach)].fetch_add(1, std::memory_order_relaxed);
    TT_LOG(warn) << "canary " << k.upstream << " of route " << k.route << " rolled back at " << at
                 << ": " << c.evidence << "; every request goes to " << c.baseline;
    return;
  }
  if (now - c.step_started < k.interval) return;
  // The step passed: every gate held over the interval with enough requests on both sides.
  c.evidence = "step passed with " + std::to_string(can.requests) + " canary and " +
               std::to_string(base.requests) + " baseline requests";
  if (c.ph == phase::progressing && c.step + 1 < k.steps.size()) {
    enter_step(c, c.step + 1, now);
    TT_LOG(info) << "canary " << k.upstream << " of route " << k.route << ": " << at
                 << " passed; now " << k.steps[c.step] << " %"
                 << (c.ph == phase::promoted ? " (promoted)" : "");
  } else {
    // The last step below 100 %: the share stays, gated over each new interval.
    if (c.ph == phase::progressing)
      TT_LOG(info) << "canary " << k.upstream << " of route " << k.route << ": " << at
                   << " passed; holding " << k.steps[c.step] << " %";
    c.ph = phase::holding;
    c.step_started = now;
    c.sides[0] = {};
    c.sides[1] = {};
  }
}

void canary_state::write_json(base::json::writer& w, steady::time_point now) {
  w.begin_array();
  for (auto& cp : canaries_) {
    auto& c = *cp;
    evaluate(c, now);
    std::lock_guard lk(c.mu);
    const auto& k = *c.cfg;
    w.begin_object()
        .field("route", k.route)
        .field("upstream", k.upstream)
        .field("baseline", c.baseline)
        .field("phase", to_string(c.ph))
        .field("step", c.step + 1)
        .field("steps", k.steps.size());
    w.key("weight").significant(weight(c), 6);
    w.field("step_age_s",
            std::chrono::duration_cast<std::chrono::seconds>(now - c.step_started).count())
        .field("interval_s", k.interval.count())
        .field("min_requests", k.min_requests);
    w.key("reason");
    if (c.reason == canary_reason::count_)
      w.null();
    else
      w.string(hooks::to_string(c.reason));
    w.field("evidence", c.evidence);
    for (int side = 1; side >= 0; --side) {
      const auto& s = c.sides[side];
      w.key(side == 1 ? "canary" : "baseline").begin_object().field("requests", s.requests);
      w.key("error_rate").significant(s.error_rate(), 6);
      w.key("truncated_rate").significant(s.truncated_rate(), 6);
      write_quantiles(w, "ttft_ms", s.ttft);
      write_quantiles(w, "itl_ms", s.itl);
      w.end();
    }
    w.end();
  }
  w.end();
}

namespace {

class canary_hook final : public hook {
 public:
  explicit canary_hook(std::shared_ptr<canary_state> state) : state_(std::move(state)) {}

  request_status on_request_phase(const request_view& r, request_callbacks& cb) override {
    c_ = state_->of_route(r.route);
    // A request an earlier hook sent elsewhere (a shed rule's reroute) is on neither side.
    if (!cb.upstream().empty()) c_ = nullptr;
    if (c_ == nullptr) return request_status::proceed;
    const std::uint64_t root =
        r.conversation.empty() ? 0 : r.conversation[parsers::root_of(r.conversation)].chain;
    on_canary_ = state_->assign(*c_, root, steady::now());
    if (on_canary_) cb.set_upstream(state_->cfg_of(*c_).upstream);
    return request_status::proceed;
  }

  void on_samples(std::span<const sample> batch, mono_ns) override {
    if (c_ == nullptr) return;
    std::array<double, 64> gaps;
    std::size_t n = 0;
    for (const auto& s : batch) {
      if (s.kind() == sample::overhead) continue;
      gaps[n++] = s.ms();
      if (n == gaps.size()) {
        state_->add_itl(*c_, on_canary_, gaps);
        n = 0;
      }
    }
    state_->add_itl(*c_, on_canary_, std::span<const double>(gaps.data(), n));
  }

  void on_stream_end(const stream_info& s) override {
    if (c_ == nullptr) return;
    // Neither side answered a refused request; a client that left says nothing of either.
    if (s.outcome == stream_outcome::rejected || s.outcome == stream_outcome::client_disconnect)
      return;
    canary_state::outcome o;
    const bool answered = s.status >= 200 && s.status < 300;
    o.error = s.status >= 500 || s.outcome == stream_outcome::upstream_error ||
              s.outcome == stream_outcome::stream_error ||
              (!answered && (s.outcome == stream_outcome::timeout ||
                             s.outcome == stream_outcome::upstream_reset));
    o.truncated =
        !o.error && answered &&
        (s.outcome == stream_outcome::timeout || s.outcome == stream_outcome::upstream_reset ||
         (s.token_events > 0 && s.finish_reason.empty()));
    if (s.first_token_ns >= 0 && s.start_ns > 0)
      o.ttft_ms = static_cast<double>(s.first_token_ns - s.start_ns) / 1e6;
    state_->record(*c_, on_canary_, o, steady::now());
  }

  unsigned per_event() const noexcept override { return sample_calls; }

 private:
  std::shared_ptr<canary_state> state_;
  canary_state::canary* c_ = nullptr;
  bool on_canary_ = false;
};

}  // namespace

std::unique_ptr<hook> canary_hook_factory::create() {
  return std::make_unique<canary_hook>(state_);
}

namespace {

// What the canary state reads of a configuration.
bool same_canary_inputs(const config::config& a, const config::config& b) {
  if (!(a.hook_section("canary") == b.hook_section("canary")) || a.routes != b.routes ||
      a.upstreams.size() != b.upstreams.size())
    return false;
  for (std::size_t i = 0; i < a.upstreams.size(); ++i)
    if (a.upstreams[i].name != b.upstreams[i].name) return false;
  return true;
}

}  // namespace

void register_canary(hook_registry& r, std::shared_ptr<metrics_registry> metrics) {
  add_with_carried_state<canary_hook_factory, canary_state>(r, "canary", same_canary_inputs,
                                                            std::move(metrics));
  r.reads_section<canary_settings>("canary", &canary_settings::parse, hook_registry::brings::last);
}

}  // namespace tokentap::hooks
