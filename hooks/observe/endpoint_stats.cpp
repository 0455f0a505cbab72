#include "hooks/observe/endpoint_stats.hpp"

#include <cmath>
#include <cstdio>
#include <limits>

#include "base/clock.hpp"
#include "base/json.hpp"

namespace tokentap::hooks {

void endpoint_stats::add(std::string upstream, std::string endpoint, std::function<double()> active,
                         std::function<endpoint_health()> health, std::weak_ptr<const void> owner) {
  const bool has_owner = !owner.expired();
  {
    std::lock_guard lk(mu_);
    for (auto& r : rows_)
      if (r->upstream == upstream && r->endpoint == endpoint) {
        r->active = std::move(active);
        r->health = std::move(health);
        r->owner = std::move(owner);
        r->has_owner = has_owner;
        return;
      }
  }
  auto r = std::make_unique<row>();
  r->owner = std::move(owner);
  r->has_owner = has_owner;
  r->upstream = std::move(upstream);
  r->endpoint = std::move(endpoint);
  r->active = std::move(active);
  r->health = std::move(health);
  r->seconds = sliding_window<second>(window_.count());
  std::lock_guard lk(mu_);
  rows_.push_back(std::move(r));
}

void endpoint_stats::record(const stream_info& s) {
  if (s.upstream.attempts.empty()) return;
  const auto& last = s.upstream.attempts.back();
  const auto now = base::steady_seconds();
  std::lock_guard lk(mu_);
  for (auto& r : rows_) {
    if (r->endpoint != last.endpoint || r->upstream != last.upstream) continue;
    auto& sec = r->seconds.at(now);
    ++sec.requests;
    if (!last.error.empty() || upstream_failed(s.status, s.outcome)) ++sec.errors;
    const auto& u = s.usage;
    if (u.cache_fields && u.input_tokens > 0) {
      sec.prompt_tokens += static_cast<std::uint64_t>(u.input_tokens);
      sec.cached_tokens += static_cast<std::uint64_t>(
          std::clamp<std::int64_t>(u.cached_input_tokens, 0, u.input_tokens));
    }
    if (const auto i = reason_index(last.reason); i < max_reasons) ++sec.routed[i];
    if (s.timing.ttft_ms >= 0) sec.ttft.add(s.timing.ttft_ms);
    return;
  }
}

std::size_t endpoint_stats::reason_index(std::string_view reason) {
  if (reason.empty()) return max_reasons;
  const auto it = std::find(reason_names_.begin(), reason_names_.end(), reason);
  if (it != reason_names_.end()) return static_cast<std::size_t>(it - reason_names_.begin());
  if (reason_names_.size() == max_reasons) return max_reasons;
  reason_names_.emplace_back(reason);
  return reason_names_.size() - 1;
}

endpoint_stats::second endpoint_stats::in_window(const row& r, std::int64_t now) const {
  second sum;
  r.seconds.for_each(now, [&](std::int64_t, const second& sec) {
    sum.requests += sec.requests;
    sum.errors += sec.errors;
    sum.prompt_tokens += sec.prompt_tokens;
    sum.cached_tokens += sec.cached_tokens;
    for (std::size_t i = 0; i < max_reasons; ++i) sum.routed[i] += sec.routed[i];
    sum.ttft.merge(sec.ttft);
  });
  return sum;
}

std::array<double, 3> endpoint_stats::ttft_ms(std::string_view upstream,
                                              std::string_view endpoint) {
  const auto now = base::steady_seconds();
  std::lock_guard lk(mu_);
  for (const auto& r : rows_) {
    if (r->upstream != upstream || r->endpoint != endpoint) continue;
    const auto sum = in_window(*r, now);
    return {sum.ttft.quantile(0.5), sum.ttft.quantile(0.95), sum.ttft.quantile(0.99)};
  }
  return {-1, -1, -1};
}

double endpoint_stats::gap_ms(double proxy_ms, double engine_ms) noexcept {
  return proxy_ms < 0 || engine_ms < 0 ? std::numeric_limits<double>::quiet_NaN()
                                       : proxy_ms - engine_ms;
}

void endpoint_stats::write_json(base::json::writer& w, double window_s) {
  const auto now = base::steady_seconds();
  std::lock_guard lk(mu_);
  std::erase_if(rows_,
                [](const std::unique_ptr<row>& r) { return r->has_owner && r->owner.expired(); });
  // A figure, or null when it is not known (negative).
  const auto known = [&w](double v, auto write) {
    if (v < 0)
      w.null();
    else
      write(v);
  };
  w.begin_array();
  for (const auto& rp : rows_) {
    const auto& r = *rp;
    const auto keep = r.owner.lock();  // what active() and health() read stays alive
    if (r.has_owner && keep == nullptr) continue;
    const auto sum = in_window(r, now);
    const auto h = r.health();
    w.begin_object().field("upstream", r.upstream).field("endpoint", r.endpoint);
    w.key("active").number(r.active(), 0);
    w.field("healthy", h.healthy).field("probe_failing", h.probe_failing);
    w.key("ejection_ends_in_s").number(h.ejection_ends_in_s, 1);  // (NaN: not ejected)
    // The engine's own load (null: not scraped, or not reported).
    for (const auto& [name, v] : {std::pair{"engine_running", h.engine_running},
                                  std::pair{"engine_waiting", h.engine_waiting},
                                  std::pair{"engine_kv_usage", h.engine_kv_usage}}) {
      w.key(name);
      known(v, [&](double x) { w.significant(x, 4); });
    }
    w.key("request_rate").number(per_second(static_cast<double>(sum.requests), window_s), 3);
    w.field("requests", sum.requests)
        .field("errors", sum.errors)
        .field("prompt_tokens", sum.prompt_tokens)
        .field("cached_tokens", sum.cached_tokens)
        .key("hit_ratio");
    if (sum.prompt_tokens > 0)
      w.number(static_cast<double>(sum.cached_tokens) / static_cast<double>(sum.prompt_tokens), 4);
    else
      w.null();
    write_quantiles(w, "ttft_ms", sum.ttft);
    // The engine's own TTFT beside the proxy's, and what lies between them.
    const std::array<double, 3> proxy_ttft{sum.ttft.quantile(0.5), sum.ttft.quantile(0.95),
                                           sum.ttft.quantile(0.99)};
    for (const bool gap : {false, true}) {
      w.key(gap ? "ttft_gap_ms" : "engine_ttft_ms");
      if (h.engine_ttft_ms[0] < 0) {
        w.null();
        continue;
      }
      w.begin_object();
      static constexpr const char* keys[3] = {"p50", "p95", "p99"};
      for (std::size_t i = 0; i < 3; ++i) {
        w.key(keys[i]);
        if (gap)
          w.number(gap_ms(proxy_ttft[i], h.engine_ttft_ms[i]), 3);  // (NaN: null)
        else
          known(h.engine_ttft_ms[i], [&](double x) { w.number(x, 3); });
      }
      w.end();
    }
    w.key("reasons").begin_object();
    for (std::size_t i = 0; i < reason_names_.size(); ++i)
      if (sum.routed[i] > 0) w.field(reason_names_[i], sum.routed[i]);
    w.end().end();
  }
  w.end();
}

}  // namespace tokentap::hooks
