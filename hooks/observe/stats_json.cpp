// The /api/stats JSON (DESIGN.md §10): per (route, model) series over the sliding window with
// its timeline, the slowest requests, and the sections other parts register (endpoints, tenants,
// admission, canaries).
#include <prometheus/gauge.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "base/clock.hpp"
#include "base/json.hpp"
#include "hooks/govern/tenants.hpp"
#include "hooks/observe/endpoint_stats.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/observe/stats_window.hpp"

namespace tokentap::hooks {

void metrics_registry::slow_row::render(base::json::writer& w) const {
  w.begin_object()
      .field("route", route)
      .field("model", model)
      .field("provider", parsers::to_string(provider));
  w.field("status", status).field("outcome", to_string(outcome));
  w.key("start_us").integer_or_null(start_us);
  w.key("ttft_ms").ms(ttft_ms);
  w.key("ttft_answer_ms").ms(ttft_answer_ms);
  w.key("e2e_ms").ms(e2e_ms);
  w.key("output_tokens").integer_or_null(output_tokens);
  w.field("cache", cache).key("trace_id").string_or_null(trace_id);
  // Step spans (ms from the request start) for the dashboard's timeline view.
  w.key("steps").begin_array();
  for (const auto& st : steps) {
    w.begin_object().field("kind", parsers::to_string(st.kind));
    w.key("start_ms").ms(st.start_ms);
    w.key("end_ms").ms(st.end_ms);
    if (st.redundant) w.field("redundant", true);
    w.end();
  }
  w.end().end();
}

namespace {

// `num / den` with `decimals`, or null without a denominator.
void ratio(base::json::writer& w, std::string_view key, std::uint64_t num, std::uint64_t den,
           int decimals) {
  w.key(key);
  if (den == 0)
    w.null();
  else
    w.number(static_cast<double>(num) / static_cast<double>(den), decimals);
}

void write_slot(base::json::writer& w, const slot& s, double seconds, std::int64_t active) {
  w.begin_object().field("requests", s.requests).field("errors", s.errors);
  w.key("request_rate").number(per_second(static_cast<double>(s.requests), seconds), 3);
  w.key("error_rate")
      .number(s.requests ? static_cast<double>(s.errors) / static_cast<double>(s.requests) : 0.0,
              4);
  w.key("tokens_per_s").number(per_second(static_cast<double>(s.output_tokens), seconds), 1);
  // One meaning of "cache hit ratio" everywhere: cached input tokens / input tokens.  The share
  // of requests judged a hit (cache_outcome) is its own, differently named figure.
  ratio(w, "cache_hit_ratio", s.cached_tokens, s.cache_input_tokens, 4);
  ratio(w, "cache_hit_requests_share", s.cache_hits, s.cache_known, 4);
  ratio(w, "steps_per_response", s.steps, s.requests, 2);
  w.field("active", active).key("cache_events").begin_object();
  for (const auto& [k, v] : s.cache_events) w.field(k, v);
  w.end();
  write_quantiles(w, "ttft_ms", s.ttft);
  write_quantiles(w, "ttft_answer_ms", s.ttft_answer);
  write_quantiles(w, "itl_ms", s.itl);
  write_quantiles(w, "e2e_ms", s.e2e);
  write_quantiles(w, "overhead_ms", s.overhead);
  // Where TTFT went: each phase's mean over the requests with a streamed first token (`n`); the
  // engine's prefill and the unexplained rest over those with an engine account (`engine_n`),
  // its queue over those whose engine reports one; null over none.
  w.key("ttft_phases_ms")
      .begin_object()
      .field("n", s.ttft_phase_n)
      .field("engine_n", s.engine_phase_n);
  for (std::size_t i = 0; i < ttft_phases; ++i) {
    const auto n = i < ttft_proxy_phases.size() ? s.ttft_phase_n
                   : i == 6                     ? s.engine_queue_n
                                                : s.engine_phase_n;
    w.key(ttft_phase_names[i]);
    if (n == 0)
      w.null();
    else
      w.number(s.ttft_phase_ms[i] / static_cast<double>(n), 3);  // (negative too: unexplained)
  }
  w.end().end();
}

}  // namespace

std::string metrics_registry::stats_json() {
  std::lock_guard lk(mu_);
  const auto now = base::steady_seconds();
  const auto n = window_.count();
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const double window_s = std::min<double>(static_cast<double>(n), std::max(1.0, uptime));
  std::string out;
  base::json::writer w(out);
  w.begin_object().field("window_s", n);
  w.key("quantile_relative_error").number(quantile_sketch::relative_error, 6);
  w.key("trace_dir").string_or_null(trace_dir_);
  // Active streams per window key (sum over providers).
  std::map<const window*, std::int64_t> active;
  for (const auto& [k, s] : series_)
    active[s->win] += static_cast<std::int64_t>(s->active->Value());
  slot all_window;
  std::vector<slot> timeline(static_cast<std::size_t>(n));
  w.key("series").begin_array();
  for (const auto& [key, win] : windows_) {
    slot agg;
    win->seconds.for_each(now, [&](std::int64_t sec, const slot& sl) {
      agg.merge(sl);
      timeline[static_cast<std::size_t>(n - 1 - (now - sec))].merge(sl);
    });
    all_window.merge(agg);
    w.begin_object().field("route", win->route).field("model", win->model).key("window");
    write_slot(w, agg, window_s, active[win.get()]);
    w.key("since_start");
    write_slot(w, win->total, uptime, active[win.get()]);
    w.end();
  }
  w.end();
  std::int64_t all_active = 0;
  for (const auto& [win, a] : active) all_active += a;
  w.key("all");
  write_slot(w, all_window, window_s, all_active);
  // Per-second history for the charts (oldest first): counts per second, quantiles over the
  // trailing chart_span seconds — one second often holds too few requests for a P95 apart
  // from the P99 — with the number of samples they are taken over (`ttft_n`).
  constexpr std::size_t chart_span = 10;
  w.field("chart_span_s", chart_span).key("timeline").begin_array();
  for (std::size_t i = 0; i < timeline.size(); ++i) {
    const auto& sl = timeline[i];
    slot span;
    for (std::size_t j = i + 1 > chart_span ? i + 1 - chart_span : 0; j <= i; ++j)
      span.merge(timeline[j]);
    w.begin_object()
        .field("t", static_cast<long long>(i) - n + 1)
        .field("requests", sl.requests)
        .field("errors", sl.errors)
        .field("tokens", sl.output_tokens)
        .field("ttft_n", span.ttft.count());
    w.key("ttft_p50").ms(span.ttft.quantile(0.5));
    w.key("ttft_p95").ms(span.ttft.quantile(0.95));
    w.key("ttft_p99").ms(span.ttft.quantile(0.99));
    w.key("itl_p50").ms(span.itl.quantile(0.5));
    w.key("itl_p95").ms(span.itl.quantile(0.95));
    w.key("itl_p99").ms(span.itl.quantile(0.99));
    w.end();
  }
  w.end().key("endpoints");
  endpoints_->write_json(w, window_s);
  if (tenants_enabled_) {
    w.key("tenants");
    tenants_->write_json(w, window_s);
  }
  std::erase_if(sections_, [&w](const section& s) {
    bool alive = false;
    const auto keep = s.lock(alive);
    if (!alive) return true;
    w.key(s.name);
    s.render(w);
    return false;
  });
  // The slowest of the recent requests.
  std::vector<const slow_row*> rows;
  rows.reserve(slowest_.size());
  for (const auto& r : slowest_) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const slow_row* a, const slow_row* b) { return a->e2e_ms > b->e2e_ms; });
  w.key("slowest").begin_array();
  for (std::size_t i = 0; i < rows.size() && i < 10; ++i) rows[i]->render(w);
  w.end().end();
  return out;
}

}  // namespace tokentap::hooks
