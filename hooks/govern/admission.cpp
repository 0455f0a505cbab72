#include "hooks/govern/admission.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "base/log.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/registry.hpp"
#include "parsers/model_rewrite.hpp"
#include "store/redis_budgets.hpp"

namespace tokentap::hooks {

using steady = std::chrono::steady_clock;

std::string_view to_string(admission_reason r) noexcept {
  switch (r) {
    case admission_reason::concurrency:
      return "concurrency";
    case admission_reason::requests:
      return "requests";
    case admission_reason::tokens:
      return "tokens";
    case admission_reason::slo:
      return "slo";
    case admission_reason::count_:
      break;
  }
  return "unknown";
}

admission_state::admission_state(const config::config& cfg)
    : admission_state(admission_settings::parse(cfg), cfg) {}

admission_state::admission_state(admission_settings settings, const config::config& cfg)
    : settings_(std::move(settings)), cfg_(&cfg) {
  for (const auto& r : settings_.rules) {
    auto rs = std::make_unique<rule_state>();
    rs->cfg = &r;
    // Buckets a rule keeps, the overflow bucket ("other") included: bounded by the configuration.
    switch (r.scope) {
      case admission_rule::scope_kind::tenant:
        rs->max_keys = cfg.tenants.max + 3;  // (+ other, anonymous, and the overflow bucket)
        break;
      case admission_rule::scope_kind::route:
        rs->max_keys = cfg.routes.size() + 1;
        break;
      case admission_rule::scope_kind::model:
        rs->max_keys = cfg.metrics.max_models + 1;
        break;
      case admission_rule::scope_kind::global:
        rs->max_keys = 2;
        break;
    }
    rules_.push_back(std::move(rs));
  }
  for (const auto& r : settings_.shed) {
    auto ss = std::make_unique<shed_state>();
    ss->cfg = &r;
    ss->name = "shed-" + r.route;
    if (!r.model.empty()) rewrites_model_ = true;
    ss->seconds = sliding_window<shed_state::second>(r.window.count());
    shed_.push_back(std::move(ss));
  }
  const bool shares =
      !cfg.shared_state.redis_host.empty() &&
      std::any_of(settings_.rules.begin(), settings_.rules.end(), [](const auto& r) {
        return r.requests_per_minute > 0 || r.tokens_per_minute > 0;
      });
  if (shares) {
    redis_ = std::make_unique<store::redis_budgets>(cfg.shared_state);
    sync_thread_ = std::thread([this] { sync_loop(); });
  }
}

void admission_state::publish(metrics_registry& metrics, std::weak_ptr<const void> owner) {
  if (redis_) {
    metrics.add_gauge_source(
        "tokentap_shared_state_up",
        "1 while admission budgets are shared through Redis, 0 while this instance decides on "
        "its local budgets (Redis unreachable)",
        [this] { return shared_live() ? 1.0 : 0.0; }, {}, owner);
    metrics.add_counter_source(
        "tokentap_shared_state_errors_total",
        "Exchanges with Redis that failed (the instance stays local)",
        [this] { return sync_errors(); }, {}, owner);
    metrics.add_counter_source(
        "tokentap_shared_state_syncs_total", "Exchanges with Redis that succeeded",
        [this] { return syncs(); }, {}, owner);
  }
  metrics.add_stats_section(
      "admission", [this](base::json::writer& w) { write_json(w, steady::now()); }, owner);
  for (std::size_t i = 0; i < shed_.size(); ++i) {
    const auto& route = settings_.shed[i].route;
    metrics.add_counter_source(
        "tokentap_admission_rejections_total",
        "Requests an admission rule refused before anything reached the upstream, by reason",
        [this, i] { return shed_count(i); }, {{"rule", "shed-" + route}, {"reason", "slo"}}, owner);
    metrics.add_gauge_source(
        "tokentap_shed_active",
        "1 while a route breaks its TTFT SLO and its shed rule refuses the lower priorities",
        [this, i] { return shedding(*shed_[i], steady::now()) ? 1.0 : 0.0; }, {{"route", route}},
        owner);
    if (!settings_.shed[i].reroute.empty())
      metrics.add_counter_source(
          "tokentap_shed_rerouted_total",
          "Requests a shed rule sent to its reroute upstream instead of refusing them, while "
          "their route broke its TTFT SLO",
          [this, i] { return rerouted_count(i); },
          {{"route", route}, {"upstream", settings_.shed[i].reroute}}, owner);
  }
  for (std::size_t i = 0; i < rules_.size(); ++i)
    for (std::size_t k = 0; k < static_cast<std::size_t>(admission_reason::slo); ++k) {
      const auto why = static_cast<admission_reason>(k);
      metrics.add_counter_source(
          "tokentap_admission_rejections_total",
          "Requests an admission rule refused before anything reached the upstream, by reason",
          [this, i, why] { return rejections(i, why); },
          {{"rule", settings_.rules[i].name}, {"reason", std::string(to_string(why))}}, owner);
    }
}

admission_state::~admission_state() {
  {
    std::lock_guard lk(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (sync_thread_.joinable()) sync_thread_.join();
}

void admission_state::sync_loop() {
  const auto& ss = cfg_->shared_state;
  std::unique_lock lk(stop_mu_);
  while (!stopping_) {
    lk.unlock();
    const bool ok = sync_once();
    lk.lock();
    stop_cv_.wait_for(lk, ok ? ss.sync : ss.retry_after, [this] { return stopping_; });
  }
}

bool admission_state::sync_once() {
  // Every budget's use since the last exchange, taken under its rule's lock.
  struct ref {
    rule_state* rs;
    bucket* b;
    bool tokens;
  };
  std::vector<store::redis_budgets::budget> out;
  std::vector<ref> refs;
  for (auto& rsp : rules_) {
    auto& rs = *rsp;
    std::lock_guard lk(rs.mu);
    for (auto& [key, b] : rs.buckets) {
      const auto base = rs.cfg->name + ':' + key;
      if (rs.cfg->requests_per_minute > 0) {
        const double cap = rs.cfg->requests_per_minute;
        out.push_back({base + ":r", cap, cap / 60000.0, b->unsynced_requests});
        refs.push_back({&rs, b.get(), false});
      }
      if (rs.cfg->tokens_per_minute > 0) {
        const auto cap = static_cast<double>(rs.cfg->tokens_per_minute);
        out.push_back({base + ":t", cap, cap / 60000.0, b->unsynced_tokens});
        refs.push_back({&rs, b.get(), true});
      }
      b->unsynced_requests = b->unsynced_tokens = 0;
    }
  }
  const auto levels = redis_->exchange(out);
  const auto now = steady::now();
  if (!levels) {
    // What was used meanwhile is not sent again: this instance's own budgets counted it.
    sync_errors_.fetch_add(1, std::memory_order_relaxed);
    if (shared_live_.exchange(false) || sync_errors_.load() == 1)
      TT_LOG(warn) << "shared_state: Redis " << cfg_->shared_state.redis_host << ":"
                   << cfg_->shared_state.redis_port << " unreachable (" << redis_->last_error()
                   << "): admission falls back to this instance's own budgets";
    return false;
  }
  for (std::size_t i = 0; i < refs.size(); ++i) {
    auto& [rs, b, tokens] = refs[i];
    std::lock_guard lk(rs->mu);
    // The shared level, less what was used here since the exchange began.
    if (tokens)
      b->tokens = (*levels)[i] - b->unsynced_tokens;
    else
      b->requests = (*levels)[i] - b->unsynced_requests;
    b->refilled = now;
  }
  syncs_.fetch_add(1, std::memory_order_relaxed);
  if (!shared_live_.exchange(true))
    TT_LOG(info) << "shared_state: admission budgets shared through Redis "
                 << cfg_->shared_state.redis_host << ":" << cfg_->shared_state.redis_port;
  return true;
}

void admission_state::refill(const admission_rule& r, bucket& b, steady::time_point now) const {
  // Shared budgets refill in Redis, on its clock; the next exchange brings their level.
  if (shared_live_.load(std::memory_order_relaxed)) {
    b.refilled = now;
    return;
  }
  const double seconds = std::chrono::duration<double>(now - b.refilled).count();
  if (seconds <= 0) return;
  b.refilled = now;
  if (r.requests_per_minute > 0)
    b.requests = std::min<double>(r.requests_per_minute,
                                  b.requests + seconds * r.requests_per_minute / 60.0);
  if (r.tokens_per_minute > 0)
    b.tokens =
        std::min<double>(static_cast<double>(r.tokens_per_minute),
                         b.tokens + seconds * static_cast<double>(r.tokens_per_minute) / 60.0);
}

admission_state::bucket& admission_state::bucket_of(rule_state& rs, std::string_view key,
                                                    steady::time_point now) {
  auto it = rs.buckets.find(std::string(key));
  if (it == rs.buckets.end()) {
    // (Bounded by the configuration; past it, the key shares "other"'s bucket.)
    const std::string k = rs.buckets.size() + 1 < rs.max_keys ? std::string(key) : "other";
    it = rs.buckets.find(k);
    if (it == rs.buckets.end()) {
      auto b = std::make_unique<bucket>();
      b->requests = rs.cfg->requests_per_minute;  // a new key starts with a full minute
      b->tokens = static_cast<double>(rs.cfg->tokens_per_minute);
      b->refilled = now;
      it = rs.buckets.emplace(k, std::move(b)).first;
    }
  }
  return *it->second;
}

admission_state::shed_state* admission_state::shed_of(std::string_view route) noexcept {
  for (auto& s : shed_)
    if (s->cfg->route == route) return s.get();
  return nullptr;
}

void admission_state::record_ttft(std::string_view route, double ttft_ms, steady::time_point now) {
  auto* s = shed_of(route);
  if (s == nullptr || ttft_ms < 0) return;
  const auto sec = base::seconds_of(now);
  std::lock_guard lk(s->mu);
  s->seconds.at(sec).ttft.add(ttft_ms);
}

void admission_state::evaluate(shed_state& s, std::int64_t now_s) {
  std::lock_guard lk(s.mu);
  quantile_sketch all;
  s.seconds.for_each(now_s,
                     [&](std::int64_t, const shed_state::second& sec) { all.merge(sec.ttft); });
  s.samples = all.count();
  s.p95_ms = all.quantile(0.95);
  // Too few measurements say nothing: shedding needs evidence, and stops without it.
  const bool breaks = s.samples >= s.cfg->min_requests && s.p95_ms > s.cfg->ttft_p95_ms;
  if (breaks == s.active.load(std::memory_order_relaxed)) return;
  s.active.store(breaks, std::memory_order_relaxed);
  s.since = now_s;
  std::string drop;
  for (const auto p : s.cfg->drop) drop += (drop.empty() ? "" : ", ") + std::string(to_string(p));
  if (breaks)
    TT_LOG(warn) << "route " << s.cfg->route << ": TTFT P95 " << static_cast<long>(s.p95_ms)
                 << " ms over " << s.cfg->window.count() << " s breaks its SLO of "
                 << static_cast<long>(s.cfg->ttft_p95_ms) << " ms (" << s.samples
                 << " requests): refusing priority " << drop;
  else
    TT_LOG(info) << "route " << s.cfg->route << ": TTFT P95 "
                 << (s.p95_ms < 0 ? std::string("unmeasured")
                                  : std::to_string(static_cast<long>(s.p95_ms)) + " ms")
                 << " (" << s.samples << " requests) is back within its SLO of "
                 << static_cast<long>(s.cfg->ttft_p95_ms) << " ms: admitting priority " << drop
                 << " again";
}

bool admission_state::shedding(std::string_view route, steady::time_point now) {
  auto* s = shed_of(route);
  return s != nullptr && shedding(*s, now);
}

bool admission_state::shedding(shed_state& s, steady::time_point now) {
  const auto sec = base::seconds_of(now);
  auto seen = s.evaluated.load(std::memory_order_relaxed);
  if (seen != sec && s.evaluated.compare_exchange_strong(seen, sec)) evaluate(s, sec);
  return s.active.load(std::memory_order_relaxed);
}

std::uint32_t admission_state::concurrency_cap(const admission_rule& r, priority p) const noexcept {
  // Lower priorities leave headroom of the cap to higher ones: low the whole headroom, normal
  // half of it.
  if (!settings_.priority.enabled || p == priority::high) return r.max_concurrent;
  const double share = p == priority::low ? 1.0 : 0.5;
  const auto held = static_cast<std::uint32_t>(
      std::ceil(static_cast<double>(r.max_concurrent) * settings_.priority.headroom * share));
  return r.max_concurrent > held ? r.max_concurrent - held : 0;
}

bool admission_state::admit(const facts& f, ticket& t, refusal& r, steady::time_point now) {
  t.holds.clear();
  t.rerouted = nullptr;
  if (auto* s = shed_of(f.route);
      s != nullptr &&
      std::find(s->cfg->drop.begin(), s->cfg->drop.end(), f.prio) != s->cfg->drop.end() &&
      shedding(*s, now)) {
    if (!s->cfg->reroute.empty()) {
      t.rerouted = s->cfg;
      s->rerouted.fetch_add(1, std::memory_order_relaxed);
    } else {
      r = {};
      r.rule = s->name;
      r.reason = admission_reason::slo;
      r.status = 429;
      // The SLO is judged over the window: a client that comes back in a sixth of it sees the
      // latest verdict.
      r.retry_after_s =
          static_cast<std::uint32_t>(std::clamp<std::int64_t>(s->cfg->window.count() / 6, 1, 60));
      s->shed.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    auto& rs = *rules_[i];
    const auto& rule = *rs.cfg;
    if (!rule.route.empty() && rule.route != f.route) continue;
    if (!rule.model.empty() && rule.model != f.model) continue;
    std::string_view key;
    switch (rule.scope) {
      case admission_rule::scope_kind::tenant:
        key = f.tenant;
        break;
      case admission_rule::scope_kind::route:
        key = f.route;
        break;
      case admission_rule::scope_kind::model:
        key = f.model;
        break;
      case admission_rule::scope_kind::global:
        key = "all";
        break;
    }
    // A token budget reserves the prompt estimate and the output budget; an estimate larger
    // than the whole budget waits for a full bucket (and then runs it into debt).
    const double reserve =
        rule.tokens_per_minute > 0
            ? f.estimate_tokens +
                  static_cast<double>(f.max_tokens >= 0 ? f.max_tokens : rule.assumed_max_tokens)
            : 0.0;
    std::unique_lock lk(rs.mu);
    auto& b = bucket_of(rs, key, now);
    refill(rule, b, now);
    const auto refuse = [&](admission_reason why, double wait_s) {
      r = {};
      r.rule = rule.name;
      r.reason = why;
      // A cap on a route, model or everything is capacity, not a tenant's rate: 503.
      r.status =
          why == admission_reason::concurrency && rule.scope != admission_rule::scope_kind::tenant
              ? 503
              : 429;
      r.retry_after_s = static_cast<std::uint32_t>(std::clamp(std::ceil(wait_s), 1.0, 3600.0));
      r.request_limit = rule.requests_per_minute;
      r.requests_left = static_cast<std::uint64_t>(std::max(0.0, std::floor(b.requests)));
      r.requests_reset_s = rule.requests_per_minute > 0 ? (rule.requests_per_minute - b.requests) *
                                                              60.0 / rule.requests_per_minute
                                                        : 0;
      r.token_limit = rule.tokens_per_minute;
      r.tokens_left = static_cast<std::uint64_t>(std::max(0.0, std::floor(b.tokens)));
      r.tokens_reset_s = rule.tokens_per_minute > 0
                             ? (static_cast<double>(rule.tokens_per_minute) - b.tokens) * 60.0 /
                                   static_cast<double>(rule.tokens_per_minute)
                             : 0;
      rs.rejected[static_cast<std::size_t>(why)].fetch_add(1, std::memory_order_relaxed);
      return false;
    };
    bool ok = true;
    if (rule.max_concurrent > 0 && b.in_flight >= concurrency_cap(rule, f.prio))
      ok = refuse(admission_reason::concurrency, 1);
    else if (rule.requests_per_minute > 0 && b.requests < 1)
      ok = refuse(admission_reason::requests, (1 - b.requests) * 60.0 / rule.requests_per_minute);
    else if (rule.tokens_per_minute > 0) {
      const double need = std::min(reserve, static_cast<double>(rule.tokens_per_minute));
      if (b.tokens < need)
        ok = refuse(admission_reason::tokens,
                    (need - b.tokens) * 60.0 / static_cast<double>(rule.tokens_per_minute));
    }
    if (!ok) {
      lk.unlock();
      settle(t, -2, now);  // give back what the rules before this one took
      return false;
    }
    if (rule.max_concurrent > 0) ++b.in_flight;
    if (rule.requests_per_minute > 0) {
      b.requests -= 1;
      b.unsynced_requests += 1;
    }
    if (rule.tokens_per_minute > 0) {
      b.tokens -= reserve;
      b.unsynced_tokens += reserve;
    }
    t.holds.push_back({i, &b, reserve, rule.max_concurrent > 0});
  }
  return true;
}

void admission_state::settle(ticket& t, double used, steady::time_point now) {
  for (const auto& h : t.holds) {
    auto& rs = *rules_[h.rule];
    std::lock_guard lk(rs.mu);
    auto& b = *static_cast<bucket*>(h.bucket);
    if (h.concurrent && b.in_flight > 0) --b.in_flight;
    if (used == -2) {
      // Admission refused by a later rule: nothing was used.
      if (rs.cfg->requests_per_minute > 0) {
        b.requests += 1;
        b.unsynced_requests -= 1;
      }
      b.tokens += h.reserved_tokens;
      b.unsynced_tokens -= h.reserved_tokens;
    } else if (used >= 0 && rs.cfg->tokens_per_minute > 0) {
      refill(*rs.cfg, b, now);
      b.tokens = std::min(static_cast<double>(rs.cfg->tokens_per_minute),
                          b.tokens + h.reserved_tokens - used);
      b.unsynced_tokens += used - h.reserved_tokens;
    }
  }
  t.holds.clear();
}

void admission_state::write_json(base::json::writer& w, steady::time_point now) {
  const auto now_s = base::seconds_of(now);
  w.begin_object().key("shedding").begin_array();
  for (auto& sp : shed_) {
    auto& s = *sp;
    shedding(s, now);  // (a fresh verdict when none was made this second)
    std::lock_guard lk(s.mu);
    w.begin_object()
        .field("route", s.cfg->route)
        .field("active", s.active.load(std::memory_order_relaxed));
    w.key("ttft_p95_ms").ms(s.p95_ms);
    w.key("slo_ms").number(s.cfg->ttft_p95_ms, 0);
    w.field("window_s", s.cfg->window.count())
        .field("samples", s.samples)
        .field("min_requests", s.cfg->min_requests)
        .key("drop")
        .begin_array();
    for (const auto d : s.cfg->drop) w.string(to_string(d));
    w.end()
        .field("since_s", s.since > 0 ? now_s - s.since : 0)
        .field("shed", s.shed.load(std::memory_order_relaxed))
        .key("reroute")
        .string_or_null(s.cfg->reroute)
        .field("rerouted", s.rerouted.load(std::memory_order_relaxed))
        .end();
  }
  w.end().key("rules").begin_array();
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    w.begin_object().field("rule", rules_[i]->cfg->name);
    for (std::size_t k = 0; k < static_cast<std::size_t>(admission_reason::slo); ++k) {
      const auto reason = static_cast<admission_reason>(k);
      w.field(to_string(reason), rejections(i, reason));
    }
    w.end();
  }
  w.end().end();
}

namespace {

// A duration as OpenAI's reset headers write it: `1s`, `6m0s`, `250ms`.
std::string go_duration(double seconds) {
  if (seconds < 1) return std::to_string(static_cast<long>(std::ceil(seconds * 1000))) + "ms";
  const auto s = static_cast<long>(std::ceil(seconds));
  if (s < 60) return std::to_string(s) + "s";
  return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
}

// A moment `seconds` from now as Anthropic's reset headers write it (RFC 3339, UTC).
std::string rfc3339_in(double seconds) {
  const std::time_t t = std::time(nullptr) + static_cast<std::time_t>(std::ceil(seconds));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class admission_hook final : public hook {
 public:
  explicit admission_hook(std::shared_ptr<admission_state> state) : state_(std::move(state)) {}

  request_status on_request_phase(const request_view& r, request_callbacks& cb) override {
    const auto& prio = state_->settings().priority;
    admission_state::facts f;
    f.tenant = r.tenant_name.empty() ? std::string_view("anonymous") : r.tenant_name;
    f.prio = prio.fallback;
    if (prio.enabled)
      for (const auto& h : r.headers)
        if (iequals(h.name, prio.header)) {
          // An unknown value is the default, not an error: the request still goes through.
          if (iequals(h.value, "high"))
            f.prio = priority::high;
          else if (iequals(h.value, "normal"))
            f.prio = priority::normal;
          else if (iequals(h.value, "low"))
            f.prio = priority::low;
        }
    route_.assign(r.route);
    f.route = r.route;
    f.model = r.model;
    f.estimate_tokens = static_cast<double>(r.prompt_chars) / 4.0;
    f.max_tokens = r.max_tokens.value_or(-1);
    admission_state::refusal no;
    if (state_->admit(f, ticket_, no, steady::now())) {
      if (const auto* shed = ticket_.rerouted) {
        // Degraded, not refused: the rule's upstream serves it, under its model if it names one.
        cb.set_upstream(shed->reroute);
        if (!shed->model.empty())
          if (auto body = parsers::with_model(r.body, shed->model))
            cb.replace_body(std::move(*body));
      }
      return request_status::proceed;
    }
    const auto what = no.reason == admission_reason::slo
                          ? std::string("route over its latency SLO, shedding priority ") +
                                std::string(to_string(f.prio))
                          : std::string(no.status == 503 ? "capacity" : "rate limit") +
                                " reached (" + std::string(to_string(no.reason)) + ")";
    cb.local_reply(no.status, no.status == 503 ? "overloaded_error" : "rate_limit_error",
                   what + ", rule '" + std::string(no.rule) + "'; retry after " +
                       std::to_string(no.retry_after_s) + " s");
    cb.add_reply_header("retry-after", std::to_string(no.retry_after_s));
    cb.add_reply_header("x-tokentap-rejected-by", no.rule);
    const auto path = r.target.substr(0, r.target.find('?'));
    if (ends_with(path, "/messages")) {
      if (no.request_limit > 0) {
        cb.add_reply_header("anthropic-ratelimit-requests-limit", std::to_string(no.request_limit));
        cb.add_reply_header("anthropic-ratelimit-requests-remaining",
                            std::to_string(no.requests_left));
        cb.add_reply_header("anthropic-ratelimit-requests-reset", rfc3339_in(no.requests_reset_s));
      }
      if (no.token_limit > 0) {
        cb.add_reply_header("anthropic-ratelimit-tokens-limit", std::to_string(no.token_limit));
        cb.add_reply_header("anthropic-ratelimit-tokens-remaining", std::to_string(no.tokens_left));
        cb.add_reply_header("anthropic-ratelimit-tokens-reset", rfc3339_in(no.tokens_reset_s));
      }
    } else {
      if (no.request_limit > 0) {
        cb.add_reply_header("x-ratelimit-limit-requests", std::to_string(no.request_limit));
        cb.add_reply_header("x-ratelimit-remaining-requests", std::to_string(no.requests_left));
        cb.add_reply_header("x-ratelimit-reset-requests", go_duration(no.requests_reset_s));
      }
      if (no.token_limit > 0) {
        cb.add_reply_header("x-ratelimit-limit-tokens", std::to_string(no.token_limit));
        cb.add_reply_header("x-ratelimit-remaining-tokens", std::to_string(no.tokens_left));
        cb.add_reply_header("x-ratelimit-reset-tokens", go_duration(no.tokens_reset_s));
      }
    }
    return request_status::stop;
  }

  void on_stream_end(const stream_info& s) override {
    const auto& u = s.usage;
    double used = -1;
    if (u.input_tokens >= 0 || u.output_tokens >= 0)
      used = static_cast<double>(std::max<std::int64_t>(0, u.input_tokens) +
                                 std::max<std::int64_t>(0, u.output_tokens));
    const auto now = steady::now();
    const bool rerouted = ticket_.rerouted != nullptr;
    state_->settle(ticket_, used, now);
    // A route's TTFT as its shed rule judges it: requests its upstream answered with tokens (a
    // rerouted one says nothing of the route's own upstream).
    if (!rerouted && s.outcome != stream_outcome::rejected && s.status >= 200 && s.status < 300 &&
        s.first_token_ns >= 0 && s.start_ns > 0)
      state_->record_ttft(route_, static_cast<double>(s.first_token_ns - s.start_ns) / 1e6, now);
  }

  ~admission_hook() override { state_->settle(ticket_, -1, steady::now()); }

  bool rewrites_body() const noexcept override { return state_->rewrites_model(); }

  unsigned per_event() const noexcept override { return 0; }

 private:
  static bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  }

  std::shared_ptr<admission_state> state_;
  admission_state::ticket ticket_;
  std::string route_;
};

}  // namespace

std::unique_ptr<hook> admission_hook_factory::create() {
  return std::make_unique<admission_hook>(state_);
}

namespace {

constexpr const char* sections[] = {"admission", "priority", "shed"};

// What the admission state reads of a configuration.
bool same_admission_inputs(const config::config& a, const config::config& b) {
  for (const auto* s : sections)
    if (!(a.hook_section(s) == b.hook_section(s))) return false;
  return a.shared_state == b.shared_state && a.tenants == b.tenants &&
         a.routes.size() == b.routes.size() && a.metrics.max_models == b.metrics.max_models;
}

}  // namespace

void register_admission(hook_registry& r, std::shared_ptr<metrics_registry> metrics) {
  add_with_carried_state<admission_hook_factory, admission_state>(
      r, "admission", same_admission_inputs, std::move(metrics));
  r.reads_sections(
      "admission", {std::begin(sections), std::end(sections)},
      [](const config::config& cfg) { (void)admission_settings::parse(cfg); },
      hook_registry::brings::first);
  // A rule per tenant needs the proxy to tell tenants apart, as a `tenants:` section does.
  r.implies("admission", [](config::config& cfg) {
    const auto rules = admission_settings::parse(cfg).rules;
    if (std::any_of(rules.begin(), rules.end(), [](const admission_rule& x) {
          return x.scope == admission_rule::scope_kind::tenant;
        }))
      cfg.tenants.enabled = true;
  });
}

}  // namespace tokentap::hooks
