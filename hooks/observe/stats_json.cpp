// The /api/stats JSON (DESIGN.md §10): per (route, model) series over the sliding window with
// its timeline, the slowest requests, and the sections other parts register (endpoints, tenants,
// admission, canaries).
#include <prometheus/gauge.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "hooks/govern/tenants.hpp"
#include "hooks/observe/endpoint_stats.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/observe/stats_window.hpp"
#include "parsers/json_out.hpp"

namespace tokentap::hooks {

void metrics_registry::slow_row::render(std::string& out) const {
  out += "{\"route\":";
  json::append_string(out, route);
  out += ",\"model\":";
  json::append_string(out, model);
  out += ",\"provider\":";
  json::append_string(out, parsers::to_string(provider));
  out += ",\"status\":";
  json::append_int(out, status);
  out += ",\"outcome\":";
  json::append_string(out, to_string(outcome));
  out += ",\"start_us\":";
  json::append_int(out, start_us);
  out += ",\"ttft_ms\":";
  json::append_ms(out, ttft_ms);
  out += ",\"ttft_answer_ms\":";
  json::append_ms(out, ttft_answer_ms);
  out += ",\"e2e_ms\":";
  json::append_ms(out, e2e_ms);
  out += ",\"output_tokens\":";
  json::append_int(out, output_tokens);
  out += ",\"cache\":";
  json::append_string(out, cache);
  out += ",\"trace_id\":";
  if (trace_id.empty())
    out += "null";
  else
    json::append_string(out, trace_id);
  // Step spans (ms from the request start) for the dashboard's timeline view.
  out += ",\"steps\":[";
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (i) out += ",";
    out += "{\"kind\":\"";
    out += parsers::to_string(steps[i].kind);
    out += "\",\"start_ms\":";
    json::append_ms(out, steps[i].start_ms);
    out += ",\"end_ms\":";
    json::append_ms(out, steps[i].end_ms);
    out += steps[i].redundant ? ",\"redundant\":true}" : "}";
  }
  out += "]}";
}

namespace {

void append_slot(std::string& out, const slot& s, double seconds, std::int64_t active) {
  char buf[64];
  out += "{\"requests\":" + std::to_string(s.requests) + ",\"errors\":" + std::to_string(s.errors);
  std::snprintf(buf, sizeof buf, ",\"request_rate\":%.3f",
                seconds > 0 ? s.requests / seconds : 0.0);
  out += buf;
  std::snprintf(buf, sizeof buf, ",\"error_rate\":%.4f",
                s.requests ? double(s.errors) / double(s.requests) : 0.0);
  out += buf;
  std::snprintf(buf, sizeof buf, ",\"tokens_per_s\":%.1f",
                seconds > 0 ? s.output_tokens / seconds : 0.0);
  out += buf;
  // `,"name":num/den` with `digits` decimals, or null without a denominator.
  auto ratio = [&](const char* name, std::uint64_t num, std::uint64_t den, int digits) {
    out += ",\"";
    out += name;
    out += "\":";
    if (den == 0) {
      out += "null";
      return;
    }
    std::snprintf(buf, sizeof buf, "%.*f", digits, double(num) / double(den));
    out += buf;
  };
  // One meaning of "cache hit ratio" everywhere: cached input tokens / input tokens.  The share
  // of requests judged a hit (cache_outcome) is its own, differently named figure.
  ratio("cache_hit_ratio", s.cached_tokens, s.cache_input_tokens, 4);
  ratio("cache_hit_requests_share", s.cache_hits, s.cache_known, 4);
  ratio("steps_per_response", s.steps, s.requests, 2);
  out += ",\"active\":" + std::to_string(active) + ",\"cache_events\":{";
  bool first_event = true;
  for (const auto& [k, v] : s.cache_events) {
    if (!first_event) out += ",";
    first_event = false;
    json::append_string(out, k);
    out += ":" + std::to_string(v);
  }
  out += "},";
  append_quantiles(out, "ttft_ms", s.ttft);
  out += ",";
  append_quantiles(out, "ttft_answer_ms", s.ttft_answer);
  out += ",";
  append_quantiles(out, "itl_ms", s.itl);
  out += ",";
  append_quantiles(out, "e2e_ms", s.e2e);
  out += ",";
  append_quantiles(out, "overhead_ms", s.overhead);
  // Where TTFT went: each phase's mean over the requests with a streamed first token (`n`); the
  // engine's prefill and the unexplained rest over those with an engine account (`engine_n`),
  // its queue over those whose engine reports one; null over none.
  out += ",\"ttft_phases_ms\":{\"n\":" + std::to_string(s.ttft_phase_n) +
         ",\"engine_n\":" + std::to_string(s.engine_phase_n);
  for (std::size_t i = 0; i < ttft_phases; ++i) {
    const auto n = i < ttft_proxy_phases.size() ? s.ttft_phase_n
                   : i == 6                     ? s.engine_queue_n
                                                : s.engine_phase_n;
    out += ",\"";
    out += ttft_phase_names[i];
    out += "\":";
    if (n == 0) {
      out += "null";
    } else {
      const double mean = s.ttft_phase_ms[i] / static_cast<double>(n);
      if (mean < 0) out += '-';
      json::append_ms(out, std::abs(mean));
    }
  }
  out += "}}";
}

}  // namespace

std::string metrics_registry::stats_json() {
  std::lock_guard lk(mu_);
  const auto now = steady_seconds();
  const auto n = window_.count();
  const double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const double window_s = std::min<double>(static_cast<double>(n), std::max(1.0, uptime));
  std::string out = "{\"window_s\":" + std::to_string(n) + ",\"quantile_relative_error\":" +
                    std::to_string(quantile_sketch::relative_error) + ",\"trace_dir\":";
  if (trace_dir_.empty())
    out += "null";
  else
    json::append_string(out, trace_dir_);
  out += ",\"series\":[";
  // Active streams per window key (sum over providers).
  std::map<const window*, std::int64_t> active;
  for (const auto& [k, s] : series_)
    active[s->win] += static_cast<std::int64_t>(s->active->Value());
  bool first = true;
  slot all_window;
  std::vector<slot> timeline(static_cast<std::size_t>(n));
  for (const auto& [key, w] : windows_) {
    slot agg;
    w->seconds.for_each(now, [&](std::int64_t sec, const slot& sl) {
      agg.merge(sl);
      timeline[static_cast<std::size_t>(n - 1 - (now - sec))].merge(sl);
    });
    all_window.merge(agg);
    if (!first) out += ",";
    first = false;
    out += "{\"route\":";
    json::append_string(out, w->route);
    out += ",\"model\":";
    json::append_string(out, w->model);
    out += ",\"window\":";
    append_slot(out, agg, window_s, active[w.get()]);
    out += ",\"since_start\":";
    append_slot(out, w->total, uptime, active[w.get()]);
    out += "}";
  }
  std::int64_t all_active = 0;
  for (const auto& [w, a] : active) all_active += a;
  out += "],\"all\":";
  append_slot(out, all_window, window_s, all_active);
  // Per-second history for the charts (oldest first): counts per second, quantiles over the
  // trailing chart_span seconds — one second often holds too few requests for a P95 apart
  // from the P99 — with the number of samples they are taken over (`ttft_n`).
  constexpr std::size_t chart_span = 10;
  out += ",\"chart_span_s\":" + std::to_string(chart_span) + ",\"timeline\":[";
  for (std::size_t i = 0; i < timeline.size(); ++i) {
    const auto& sl = timeline[i];
    slot span;
    for (std::size_t j = i + 1 > chart_span ? i + 1 - chart_span : 0; j <= i; ++j)
      span.merge(timeline[j]);
    if (i) out += ",";
    out += "{\"t\":" + std::to_string(static_cast<long long>(i) - n + 1) +
           ",\"requests\":" + std::to_string(sl.requests) +
           ",\"errors\":" + std::to_string(sl.errors) +
           ",\"tokens\":" + std::to_string(sl.output_tokens) +
           ",\"ttft_n\":" + std::to_string(span.ttft.count()) + ",\"ttft_p50\":";
    json::append_ms(out, span.ttft.quantile(0.5));
    out += ",\"ttft_p95\":";
    json::append_ms(out, span.ttft.quantile(0.95));
    out += ",\"ttft_p99\":";
    json::append_ms(out, span.ttft.quantile(0.99));
    out += ",\"itl_p50\":";
    json::append_ms(out, span.itl.quantile(0.5));
    out += ",\"itl_p95\":";
    json::append_ms(out, span.itl.quantile(0.95));
    out += ",\"itl_p99\":";
    json::append_ms(out, span.itl.quantile(0.99));
    out += "}";
  }
  // The slowest of the recent requests.
  std::vector<const slow_row*> rows;
  rows.reserve(slowest_.size());
  for (const auto& r : slowest_) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const slow_row* a, const slow_row* b) { return a->e2e_ms > b->e2e_ms; });
  out += "],\"endpoints\":";
  endpoints_->append_json(out, window_s);
  if (tenants_enabled_) {
    out += ",\"tenants\":";
    tenants_->append_json(out, window_s);
  }
  std::erase_if(sections_, [&out](const section& s) {
    bool alive = false;
    const auto keep = s.lock(alive);
    if (!alive) return true;
    out += ',';
    json::append_string(out, s.name);
    out += ':';
    s.render(out);
    return false;
  });
  out += ",\"slowest\":[";
  for (std::size_t i = 0; i < rows.size() && i < 10; ++i) {
    if (i) out += ",";
    rows[i]->render(out);
  }
  out += "]}";
  return out;
}

}  // namespace tokentap::hooks
