#pragma once
// The metrics registry's stats windows, shared by its two halves — the series it observes into
// (metrics.cpp) and the /api/stats JSON it renders (stats_json.cpp): one second of one (route,
// model), a (route, model)'s window of them, the slowest requests' rows.  Private to the
// registry.
#include <prometheus/labels.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "hooks/hook.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/observe/quantile_sketch.hpp"
#include "hooks/sliding_window.hpp"
#include "parsers/step_tagger.hpp"

namespace tokentap::hooks {

// What TTFT is made of, in the dashboard's stack: the proxy's phases before the first token,
// then the engine's queue and prefill and the rest (network, the engine's front end).
constexpr std::size_t ttft_phases = 9;
constexpr std::array<const char*, ttft_phases> ttft_phase_names = {
    "proxy",       "fault",        "failed_attempts", "connect",    "upstream_head",
    "first_token", "engine_queue", "engine_prefill",  "unexplained"};
constexpr std::array<hooks::phase, 6> ttft_proxy_phases = {
    hooks::phase::proxy,   hooks::phase::fault,         hooks::phase::failed_attempts,
    hooks::phase::connect, hooks::phase::upstream_head, hooks::phase::first_token};
// The `phase` label's values: the proxy's phases, client_wait, the engine's.
constexpr std::size_t phase_series = hooks::phase_count + 4;
constexpr std::array<const char*, 4> extra_phase_names = {"client_wait", "engine_queue",
                                                          "engine_prefill", "unexplained"};

/// One second of one (route, model): counts and sketches.
struct slot {
  std::uint64_t requests = 0, errors = 0, output_tokens = 0, cache_hits = 0, cache_known = 0,
                steps = 0;
  // Input and cached input tokens of the requests whose provider reports cache fields: the hit
  // ratio by tokens, as providers bill it.
  std::uint64_t cache_input_tokens = 0, cached_tokens = 0;
  quantile_sketch ttft, ttft_answer, itl, e2e, overhead;
  std::map<std::string, std::uint64_t> cache_events;  // by event name (a handful of kinds)
  // Where TTFT went (ttft_phase_names): sums over the requests with a streamed first token, the
  // engine's three over those that also had an engine account with its prefill.
  std::array<double, ttft_phases> ttft_phase_ms{};
  std::uint64_t ttft_phase_n = 0, engine_phase_n = 0, engine_queue_n = 0;
  void merge(const slot& o) {
    engine_queue_n += o.engine_queue_n;
    for (std::size_t i = 0; i < ttft_phases; ++i) ttft_phase_ms[i] += o.ttft_phase_ms[i];
    ttft_phase_n += o.ttft_phase_n;
    engine_phase_n += o.engine_phase_n;
    for (const auto& [k, v] : o.cache_events) cache_events[k] += v;
    requests += o.requests;
    errors += o.errors;
    output_tokens += o.output_tokens;
    cache_hits += o.cache_hits;
    cache_known += o.cache_known;
    cache_input_tokens += o.cache_input_tokens;
    cached_tokens += o.cached_tokens;
    steps += o.steps;
    ttft.merge(o.ttft);
    ttft_answer.merge(o.ttft_answer);
    itl.merge(o.itl);
    e2e.merge(o.e2e);
    overhead.merge(o.overhead);
  }
};

// One recent request for /api/stats' "slowest" table.  `cache` is one of cache_class()'s
// literals.
struct metrics_registry::slow_row {
  struct step_span {
    parsers::step_kind kind;
    double start_ms, end_ms;  // from the request's start
    bool redundant;
  };
  std::string route, model;
  parsers::provider provider;
  stream_outcome outcome;
  unsigned status;
  std::int64_t start_us;
  double ttft_ms, ttft_answer_ms, e2e_ms;
  std::int64_t output_tokens;
  std::string_view cache;
  std::string trace_id;          // the exchange's trace record (empty: none written)
  std::vector<step_span> steps;  // at most 200

  void render(base::json::writer& w) const;
};

struct metrics_registry::window {
  window(std::string r, std::string m, std::size_t n)
      : route(std::move(r)), model(std::move(m)), seconds(static_cast<std::int64_t>(n)) {}
  std::string route, model;
  sliding_window<slot> seconds;
  slot total;
  std::int64_t active = 0;
  slot& at(std::int64_t sec) { return seconds.at(sec); }
};

// A (route, model, provider) series: its resolved Prometheus handles and its window.
struct metrics_registry::series {
  prometheus::Histogram* duration;
  std::array<prometheus::Histogram*, 4> ttft;
  prometheus::Histogram* ttft_answer;
  std::array<prometheus::Histogram*, 3> itl;
  prometheus::Histogram* tpot;
  prometheus::Histogram* overhead;
  std::array<prometheus::Counter*, 5> tokens;  // without tenants
  // With tenants (requests and tokens gain a `tenant` label), by tenant; guarded by mu_.
  std::map<std::string, std::array<prometheus::Counter*, 5>, std::less<>> tenant_tokens;
  std::map<std::string, prometheus::Counter*> cache_event_counters;  // by event; guarded by mu_
  prometheus::Counter* stalls;
  std::array<prometheus::Counter*, 6> upstream_errors;
  std::array<prometheus::Counter*, 3> parse_errors;
  prometheus::Gauge* active;
  std::array<std::array<prometheus::Counter*, 2>, 5> steps;  // [kind][redundant]
  std::array<prometheus::Histogram*, 5> step_duration;       // [kind]
  std::array<prometheus::Histogram*, phase_series> phase;    // hooks::phase, then extra_phase_names
  prometheus::Counter* engine_invalid;
  // By (tenant, status), tenant "" without tenants; guarded by metrics_registry::mu_.
  std::map<std::pair<std::string, unsigned>, prometheus::Counter*> requests;
  prometheus::Labels labels;
  window* win;
};

}  // namespace tokentap::hooks
