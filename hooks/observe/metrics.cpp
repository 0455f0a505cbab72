#include "hooks/observe/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <cmath>

#include "base/clock.hpp"
#include "hooks/govern/tenants.hpp"
#include "hooks/observe/endpoint_stats.hpp"
#include "hooks/observe/stats_window.hpp"
#include "hooks/registry.hpp"
#include "hooks/sliding_window.hpp"

namespace tokentap::hooks {

// ------------------------------------------------------------------ families and series

bucket_config default_buckets() {
  bucket_config b;
  // vLLM's TTFT boundaries, so existing panels compare.
  b.ttft = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
            1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
  // Sub-millisecond resolution for fast decoders (vLLM/OTel start at 10 ms).
  b.itl = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01,
           0.015,   0.02,   0.025,   0.03,   0.04,  0.05,   0.075, 0.1,    0.15,
           0.2,     0.3,    0.5,     0.75,   1.0,   2.5,    5.0,   10.0};
  b.e2e = {0.05, 0.1, 0.25, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5,   10,
           15,   20,  30,   40,  50,  60,  120, 240, 480, 960, 1920};
  // A phase may take 50 µs (our own work) or minutes (decoding a long answer).
  b.phase = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
             0.25,    0.5,    1.0,     2.5,    5.0,   10.0,   30.0,  60.0, 120.0, 300.0};
  return b;
}

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

constexpr std::array<const char*, 4> cache_names = {"hit", "partial", "miss", "unknown"};
constexpr std::array<const char*, 3> channel_names = {"content", "reasoning", "tool"};
// Disjoint parts, so that any sum over `type` counts each token once: input = input_uncached +
// cached_input + cache_write, output = output_answer + reasoning (docs/metrics.md).
constexpr std::array<const char*, 5> token_types = {"input_uncached", "output_answer", "reasoning",
                                                    "cached_input", "cache_write"};
constexpr std::array<const char*, 6> error_reasons = {"connect", "tls",        "timeout",
                                                      "reset",   "status_5xx", "stream_error"};
constexpr std::array<const char*, 3> stage_names = {"framing", "json", "oversize"};

int cache_index(std::string_view c) {
  for (int i = 0; i < 4; ++i)
    if (c == cache_names[static_cast<std::size_t>(i)]) return i;
  return 3;
}

std::size_t bucket_of(const std::vector<double>& bounds, double v) {
  return static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), v) -
                                  bounds.begin());
}

}  // namespace

std::string_view cache_class(const parsers::usage_counts& u) noexcept {
  if (!u.cache_fields || u.input_tokens <= 0 || u.cached_input_tokens < 0) return "unknown";
  if (u.cached_input_tokens == 0) return "miss";
  if (static_cast<double>(u.cached_input_tokens) >= 0.9 * static_cast<double>(u.input_tokens))
    return "hit";
  return "partial";
}

struct metrics_registry::families {
  explicit families(prometheus::Registry& r)
      : registry(r),
        requests(prometheus::BuildCounter()
                     .Name("tokentap_requests_total")
                     .Help("Finished requests by HTTP status")
                     .Register(r)),
        duration(prometheus::BuildHistogram()
                     .Name("tokentap_request_duration_seconds")
                     .Help("End to end: request start to last byte")
                     .Register(r)),
        ttft(prometheus::BuildHistogram()
                 .Name("tokentap_time_to_first_token_seconds")
                 .Help("Request start to first content or reasoning token")
                 .Register(r)),
        ttft_answer(prometheus::BuildHistogram()
                        .Name("tokentap_time_to_first_answer_token_seconds")
                        .Help("Request start to first content token (after any reasoning)")
                        .Register(r)),
        itl(prometheus::BuildHistogram()
                .Name("tokentap_inter_token_latency_seconds")
                .Help("Gap between consecutive token-bearing events")
                .Register(r)),
        tpot(prometheus::BuildHistogram()
                 .Name("tokentap_time_per_output_token_seconds")
                 .Help("Per request: (last - first token time) / (output tokens - 1)")
                 .Register(r)),
        tokens(prometheus::BuildCounter()
                   .Name("tokentap_tokens_total")
                   .Help("Tokens from usage, normalized, in disjoint parts: input_uncached, "
                         "cached_input, cache_write, output_answer, reasoning")
                   .Register(r)),
        steps(prometheus::BuildCounter()
                  .Name("tokentap_reasoning_steps_total")
                  .Help("Reasoning steps tagged")
                  .Register(r)),
        cache_events(prometheus::BuildCounter()
                         .Name("tokentap_cache_events_total")
                         .Help("Prompt-cache events")
                         .Register(r)),
        stalls(prometheus::BuildCounter()
                   .Name("tokentap_stream_stalls_total")
                   .Help("Gaps between tokens longer than the stall threshold")
                   .Register(r)),
        active(prometheus::BuildGauge()
                   .Name("tokentap_active_streams")
                   .Help("Streams in flight")
                   .Register(r)),
        upstream_errors(prometheus::BuildCounter()
                            .Name("tokentap_upstream_errors_total")
                            .Help("Upstream failures by reason")
                            .Register(r)),
        overhead(prometheus::BuildHistogram()
                     .Name("tokentap_proxy_overhead_seconds")
                     .Help("Per forwarded read: upstream read done to client write done")
                     .Register(r)),
        parse_errors(prometheus::BuildCounter()
                         .Name("tokentap_parse_errors_total")
                         .Help("Payloads not decoded, by stage")
                         .Register(r)),
        step_duration(prometheus::BuildHistogram()
                          .Name("tokentap_reasoning_step_duration_seconds")
                          .Help("Reasoning step duration: its first token to the next step's")
                          .Register(r)) {}
  prometheus::Registry& registry;
  Family<Counter>& requests;
  Family<Histogram>& duration;
  Family<Histogram>& ttft;
  Family<Histogram>& ttft_answer;
  Family<Histogram>& itl;
  Family<Histogram>& tpot;
  Family<Counter>& tokens;
  Family<Counter>& steps;
  Family<Counter>& cache_events;
  Family<Counter>& stalls;
  Family<Gauge>& active;
  Family<Counter>& upstream_errors;
  Family<Histogram>& overhead;
  Family<Counter>& parse_errors;
  Family<Histogram>& step_duration;
  Family<Histogram>& phase = prometheus::BuildHistogram()
                                 .Name("tokentap_latency_phase_seconds")
                                 .Help(
                                     "Where an exchange's time went (DESIGN.md §13): the "
                                     "proxy's phases, client_wait beside them, the engine's "
                                     "queue and prefill, and what neither explains")
                                 .Register(registry);
  Family<Counter>& engine_invalid = prometheus::BuildCounter()
                                        .Name("tokentap_engine_timings_invalid_total")
                                        .Help(
                                            "Engine timing fields whose value is no duration "
                                            "(negative, NaN, not a number, absurd): not taken")
                                        .Register(registry);
};

// What a stream observed since its last fold, kept small (an open stream holds one): bucket
// counts as 32-bit integers in one array, window-sketch keys as 16-bit integers (key_of's range is
// ±2,000), not doubles.
struct metrics_registry::fold_batch {
  static constexpr std::size_t overhead = sample::overhead;  // counts row after the channels
  explicit fold_batch(const bucket_config& b) : width(b.itl.size() + 1), counts(4 * width, 0) {}
  void count(std::size_t row, std::size_t bucket, double v) noexcept {
    ++counts[row * width + bucket];
    sum[row] += v;
    ++n[row];
  }
  std::size_t width;
  std::vector<std::uint32_t> counts;  // [row * width + bucket], rows: ITL by channel, overhead
  std::array<double, 4> sum{};
  std::array<std::uint64_t, 4> n{};
  std::vector<std::int16_t> itl_keys, overhead_keys;  // packed keys for the window sketches
};

metrics_registry::metrics_registry(const config::config& cfg)
    : registry_(std::make_shared<prometheus::Registry>()),
      buckets_(default_buckets()),
      max_models_(cfg.metrics.max_models),
      window_(cfg.metrics.window),
      fam_(std::make_unique<families>(*registry_)),
      endpoints_(std::make_unique<endpoint_stats>(cfg.metrics.window)),
      tenants_enabled_(cfg.tenants.enabled),
      tenants_(std::make_unique<tenant_stats>(cfg.metrics.window, cfg.tenants.max + 3)),
      started_(std::chrono::steady_clock::now()),
      trace_dir_(cfg.trace.dir) {
  if (!cfg.metrics.ttft_buckets.empty()) buckets_.ttft = cfg.metrics.ttft_buckets;
  if (!cfg.metrics.itl_buckets.empty()) buckets_.itl = cfg.metrics.itl_buckets;
  if (!cfg.metrics.e2e_buckets.empty()) buckets_.e2e = cfg.metrics.e2e_buckets;
}

metrics_registry::~metrics_registry() = default;

std::string metrics_registry::model_label(std::string_view model) {
  if (model.empty()) return "unknown";
  std::lock_guard lk(mu_);
  if (models_.count(model)) return std::string(model);
  if (models_.size() >= max_models_) return "other";
  models_.emplace(std::string(model), true);
  return std::string(model);
}

metrics_registry::series& metrics_registry::resolve(std::string_view route, std::string_view model,
                                                    std::string_view provider) {
  std::lock_guard lk(mu_);
  series_key key{std::string(route), std::string(model), std::string(provider)};
  auto it = series_.find(key);
  if (it != series_.end()) return *it->second;
  // First stream of this series: resolve every handle once (Family::Add allocates and locks).
  auto s = std::make_unique<series>();
  s->labels = {{"route", key.route}, {"model", key.model}, {"provider", key.provider}};
  auto with = [&](const char* name, const char* value) {
    auto l = s->labels;
    l.emplace(name, value);
    return l;
  };
  auto& f = *fam_;
  s->duration = &f.duration.Add(s->labels, buckets_.e2e);
  for (std::size_t i = 0; i < 4; ++i)
    s->ttft[i] = &f.ttft.Add(with("cache", cache_names[i]), buckets_.ttft);
  s->ttft_answer = &f.ttft_answer.Add(s->labels, buckets_.ttft);
  for (std::size_t i = 0; i < 3; ++i)
    s->itl[i] = &f.itl.Add(with("channel", channel_names[i]), buckets_.itl);
  s->tpot = &f.tpot.Add(s->labels, buckets_.itl);
  s->overhead = &f.overhead.Add(s->labels, buckets_.itl);
  if (!tenants_enabled_)
    for (std::size_t i = 0; i < 5; ++i) s->tokens[i] = &f.tokens.Add(with("type", token_types[i]));
  s->stalls = &f.stalls.Add(s->labels);
  for (std::size_t i = 0; i < 6; ++i)
    s->upstream_errors[i] = &f.upstream_errors.Add(with("reason", error_reasons[i]));
  for (std::size_t i = 0; i < 3; ++i)
    s->parse_errors[i] = &f.parse_errors.Add(with("stage", stage_names[i]));
  s->active = &f.active.Add(s->labels);
  for (std::size_t k = 0; k < 5; ++k) {
    const auto kind = std::string(parsers::to_string(static_cast<parsers::step_kind>(k)));
    for (std::size_t r = 0; r < 2; ++r) {
      auto l = s->labels;
      l.emplace("kind", kind);
      l.emplace("redundant", r ? "true" : "false");
      s->steps[k][r] = &f.steps.Add(l);
    }
    s->step_duration[k] = &f.step_duration.Add(with("kind", kind.c_str()), buckets_.e2e);
  }
  // (Labelled by route and model only: series of two providers share them.)
  const auto& phase_buckets = buckets_.phase;
  for (std::size_t i = 0; i < phase_series; ++i) {
    const std::string name = i < hooks::phase_count
                                 ? std::string(to_string(static_cast<hooks::phase>(i)))
                                 : std::string(extra_phase_names[i - hooks::phase_count]);
    s->phase[i] =
        &f.phase.Add({{"route", key.route}, {"model", key.model}, {"phase", name}}, phase_buckets);
  }
  s->engine_invalid = &f.engine_invalid.Add({});
  const auto wkey = key.route + '\x1f' + key.model;
  auto w = windows_.find(wkey);
  if (w == windows_.end())
    w = windows_
            .emplace(wkey, std::make_unique<window>(key.route, key.model,
                                                    static_cast<std::size_t>(window_.count())))
            .first;
  s->win = w->second.get();
  return *series_.emplace(std::move(key), std::move(s)).first->second;
}

void metrics_registry::fold(series& s, fold_batch& b) {
  thread_local std::vector<double> incs;  // ObserveMultiple takes doubles
  for (std::size_t row = 0; row < 4; ++row) {
    if (b.n[row] == 0) continue;
    const auto first = b.counts.begin() + static_cast<std::ptrdiff_t>(row * b.width);
    incs.assign(first, first + static_cast<std::ptrdiff_t>(b.width));
    (row == fold_batch::overhead ? s.overhead : s.itl[row])->ObserveMultiple(incs, b.sum[row]);
    std::fill(first, first + static_cast<std::ptrdiff_t>(b.width), 0u);
    b.sum[row] = 0;
    b.n[row] = 0;
  }
  if (b.itl_keys.empty() && b.overhead_keys.empty()) return;
  std::lock_guard lk(mu_);
  auto& sl = s.win->at(base::steady_seconds());
  sl.itl.add_packed(b.itl_keys, &s.win->total.itl);
  sl.overhead.add_packed(b.overhead_keys, &s.win->total.overhead);
  b.itl_keys.clear();
  b.overhead_keys.clear();
}

void metrics_registry::count_local_reply(std::string_view route, unsigned code) {
  std::lock_guard lk(mu_);
  auto key = std::make_pair(std::string(route), code);
  auto it = local_replies_.find(key);
  if (it == local_replies_.end()) {
    prometheus::Labels l{{"route", key.first},
                         {"model", "unknown"},
                         {"provider", "unknown"},
                         {"code", std::to_string(code)}};
    if (tenants_enabled_) l.emplace("tenant", "unknown");  // (answered before it was known)
    auto& c = fam_->requests.Add(l);
    it = local_replies_.emplace(std::move(key), &c).first;
  }
  it->second->Increment();
}

void metrics_registry::finish(series& s, const stream_info& sum, const std::string& model,
                              const std::string& route, std::uint64_t steps) {
  const auto& t = sum.timing;
  const auto& u = sum.usage;
  const auto cache = sum.cache_outcome.empty() ? cache_class(u) : sum.cache_outcome;
  s.duration->Observe(t.e2e_ms / 1000.0);
  if (t.ttft_ms >= 0)
    s.ttft[static_cast<std::size_t>(cache_index(cache))]->Observe(t.ttft_ms / 1000.0);
  if (t.ttft_answer_ms >= 0) s.ttft_answer->Observe(t.ttft_answer_ms / 1000.0);
  if (t.tpot_ms >= 0) s.tpot->Observe(t.tpot_ms / 1000.0);
  const auto& a = sum.attributed;
  const auto observe = [&](std::size_t i, std::optional<double> v) {
    if (v) s.phase[i]->Observe(std::max(0.0, *v) / 1000.0);
  };
  for (std::size_t i = 0; i < hooks::phase_count; ++i) observe(i, a.phases[i]);
  const auto engine_ms = [](double v) { return v >= 0 ? std::optional(v) : std::nullopt; };
  observe(hooks::phase_count, a.client_wait_ms);
  observe(hooks::phase_count + 1, engine_ms(a.engine.queue_ms));
  observe(hooks::phase_count + 2, engine_ms(a.engine.prefill_ms));
  observe(hooks::phase_count + 3, a.unexplained_ms);
  if (a.engine.invalid) s.engine_invalid->Increment(a.engine.invalid);
  const auto part = [](std::int64_t n) { return std::max<std::int64_t>(0, n); };
  const std::array<std::int64_t, 5> tok = {
      part(u.input_tokens) -
          std::min(part(u.input_tokens), part(u.cached_input_tokens) + part(u.cache_write_tokens)),
      part(u.output_tokens) - std::min(part(u.output_tokens), part(u.reasoning_tokens)),
      u.reasoning_tokens, u.cached_input_tokens, u.cache_write_tokens};
  if (!tenants_enabled_)
    for (std::size_t i = 0; i < 5; ++i)
      if (tok[i] > 0) s.tokens[i]->Increment(static_cast<double>(tok[i]));
  if (t.stalls) s.stalls->Increment(static_cast<double>(t.stalls));
  for (std::size_t i = 0; i < 3; ++i)
    if (sum.parse_errors[i]) s.parse_errors[i]->Increment(static_cast<double>(sum.parse_errors[i]));
  int reason = -1;
  if (!sum.upstream_error_reason.empty()) {
    for (int i = 0; i < 6; ++i)
      if (sum.upstream_error_reason == error_reasons[static_cast<std::size_t>(i)]) reason = i;
  } else if (sum.status >= 500 && sum.outcome != stream_outcome::rejected) {
    reason = 4;  // (a 5xx a hook answered with is not the upstream's)
  } else if (sum.outcome == stream_outcome::stream_error) {
    reason = 5;
  } else if (sum.outcome == stream_outcome::upstream_reset) {
    reason = 3;
  } else if (sum.outcome == stream_outcome::timeout) {
    reason = 2;
  }
  if (reason >= 0) s.upstream_errors[static_cast<std::size_t>(reason)]->Increment();
  const bool error = reason >= 0 || sum.status >= 500 || sum.status == 429;
  for (std::size_t i = 0; i < sum.steps.size(); ++i) {
    const auto k = static_cast<std::size_t>(sum.steps[i].kind);
    s.steps[k][sum.steps[i].redundant ? 1 : 0]->Increment();
    s.step_duration[k]->Observe(static_cast<double>(sum.step_end_ns[i] - sum.steps[i].t_ns) / 1e9);
  }

  endpoints_->record(sum);
  if (tenants_enabled_) tenants_->record(sum);
  std::lock_guard lk(mu_);
  // (Tenant names are bounded: tenants.max, `other`, `anonymous`.)
  const std::string_view tenant = tenants_enabled_ ? std::string_view(sum.tenant) : "";
  auto rit = s.requests.find(std::make_pair(std::string(tenant), sum.status));
  if (rit == s.requests.end()) {
    auto l = s.labels;
    l.emplace("code", std::to_string(sum.status));
    if (tenants_enabled_) l.emplace("tenant", std::string(tenant));
    rit =
        s.requests.emplace(std::make_pair(std::string(tenant), sum.status), &fam_->requests.Add(l))
            .first;
  }
  rit->second->Increment();
  if (tenants_enabled_) {
    auto tit = s.tenant_tokens.find(tenant);
    if (tit == s.tenant_tokens.end()) {
      std::array<Counter*, 5> c{};
      for (std::size_t i = 0; i < 5; ++i) {
        auto l = s.labels;
        l.emplace("type", token_types[i]);
        l.emplace("tenant", std::string(tenant));
        c[i] = &fam_->tokens.Add(l);
      }
      tit = s.tenant_tokens.emplace(std::string(tenant), c).first;
    }
    for (std::size_t i = 0; i < 5; ++i)
      if (tok[i] > 0) tit->second[i]->Increment(static_cast<double>(tok[i]));
  }
  // Cache events (the cache hook's, when it runs): one counter per event name.
  for (const auto& [event, evidence] : sum.cache_events) {
    auto cit = s.cache_event_counters.find(event);
    if (cit == s.cache_event_counters.end()) {
      auto l = s.labels;
      l.emplace("event", event);
      cit = s.cache_event_counters.emplace(event, &fam_->cache_events.Add(l)).first;
    }
    cit->second->Increment();
  }
  auto add = [&](slot& sl) {
    ++sl.requests;
    if (error) ++sl.errors;
    if (u.output_tokens > 0) sl.output_tokens += static_cast<std::uint64_t>(u.output_tokens);
    if (cache != "unknown") {
      ++sl.cache_known;
      if (cache == "hit") ++sl.cache_hits;
    }
    if (u.cache_fields && u.input_tokens > 0) {
      sl.cache_input_tokens += static_cast<std::uint64_t>(u.input_tokens);
      sl.cached_tokens += static_cast<std::uint64_t>(
          std::clamp<std::int64_t>(u.cached_input_tokens, 0, u.input_tokens));
    }
    sl.steps += steps;
    for (const auto& [event, evidence] : sum.cache_events) ++sl.cache_events[event];
    if (t.ttft_ms >= 0) sl.ttft.add(t.ttft_ms);
    if (t.ttft_answer_ms >= 0) sl.ttft_answer.add(t.ttft_answer_ms);
    if (a.ttft_ms()) {
      ++sl.ttft_phase_n;
      for (std::size_t i = 0; i < ttft_proxy_phases.size(); ++i)
        sl.ttft_phase_ms[i] += a[ttft_proxy_phases[i]].value_or(0);
      if (a.unexplained_ms) {
        ++sl.engine_phase_n;
        if (a.engine.queue_ms >= 0) {
          ++sl.engine_queue_n;
          sl.ttft_phase_ms[6] += a.engine.queue_ms;
        }
        sl.ttft_phase_ms[7] += std::max(0.0, a.engine.prefill_ms);
        sl.ttft_phase_ms[8] += *a.unexplained_ms;
      }
    }
    sl.e2e.add(t.e2e_ms);
  };
  add(s.win->at(base::steady_seconds()));
  add(s.win->total);
  // The slowest recent requests table: kept as values, rendered when /api/stats asks (this runs
  // at every stream's end, on its I/O thread, under the registry's lock).
  slow_row row{route,
               model,
               sum.provider,
               sum.outcome,
               sum.status,
               sum.wall_start_us,
               t.ttft_ms,
               t.ttft_answer_ms,
               t.e2e_ms,
               u.output_tokens,
               cache,
               sum.trace_record_id,
               {}};
  const auto n_steps = std::min<std::size_t>(sum.steps.size(), 200);
  row.steps.reserve(n_steps);
  for (std::size_t i = 0; i < n_steps; ++i)
    row.steps.push_back(
        {sum.steps[i].kind, static_cast<double>(sum.steps[i].t_ns - sum.start_ns) / 1e6,
         static_cast<double>(sum.step_end_ns[i] - sum.start_ns) / 1e6, sum.steps[i].redundant});
  slowest_.push_back(std::move(row));
  if (slowest_.size() > 200) slowest_.pop_front();
}

// ------------------------------------------------------------------ the hook

namespace {

class metrics_hook final : public hook {
 public:
  explicit metrics_hook(std::shared_ptr<metrics_registry> reg)
      : reg_(std::move(reg)), batch_(reg_->buckets()) {}

  void on_request(const request_view& r) override {
    route_ = std::string(r.route);
    model_ = reg_->model_label(r.model);
    named_model_ = !r.model.empty();
    path_provider_ =
        parsers::to_string(parsers::provider_from_path(r.target.substr(0, r.target.find('?'))));
    series_ = &reg_->resolve(route_, model_, path_provider_);
    series_active().Increment();
    last_fold_ = r.start_ns;
  }

  // Gaps between streamed tokens (by channel) and per-read overheads, measured by the chain.
  void on_samples(std::span<const sample> batch, mono_ns now) override {
    if (!series_) return;
    if (batch_.itl_keys.capacity() == 0) {  // once per stream, not a doubling per few samples
      batch_.itl_keys.reserve(64);
      batch_.overhead_keys.reserve(64);
    }
    const auto& bounds = reg_->buckets().itl;
    for (const auto smp : batch) {
      const double s = static_cast<double>(smp.ns()) / 1e9;
      batch_.count(smp.kind(), bucket_of(bounds, s), s);  // rows: channels, then overhead
      (smp.kind() == sample::overhead ? batch_.overhead_keys : batch_.itl_keys)
          .push_back(quantile_sketch::packed_key(s * 1000));
    }
    maybe_fold(now);
  }

  unsigned per_event() const noexcept override { return sample_calls; }

  // The request's counters and histograms go to the series of the provider the stream turned out
  // to speak (the stream_info's, as in the trace record): a path that names no provider is
  // `unknown` only until the decoder recognised the stream.  Until then — the in-flight gauge,
  // the gaps folded while a long stream runs — the path's provider is all there is.
  void on_stream_end(const stream_info& sum) override {
    if (!series_) return;
    auto* final_series = series_;
    const auto provider = parsers::to_string(sum.provider);
    // A request that names no model (llama.cpp's native /completion) counts under the model
    // its answer named.
    if (!named_model_ && !sum.response_model.empty()) {
      model_ = reg_->model_label(sum.response_model);
      final_series = &reg_->resolve(route_, model_, provider);
    } else if (provider != path_provider_) {
      final_series = &reg_->resolve(route_, model_, provider);
    }
    reg_->fold(*final_series, batch_);
    reg_->finish(*final_series, sum, model_, route_, sum.steps.size());
    series_active().Decrement();
    series_ = nullptr;
  }

  ~metrics_hook() override {
    if (series_) series_active().Decrement();  // the stream never ended cleanly
  }

 private:
  prometheus::Gauge& series_active() { return *series_->active; }
  // Folding at most once a second keeps the shared histograms' locks off the per-token path
  // while a long stream still shows up on dashboards within a second.
  void maybe_fold(mono_ns now) {
    if (now - last_fold_ < 1000000000) return;
    reg_->fold(*series_, batch_);
    last_fold_ = now;
  }

  std::shared_ptr<metrics_registry> reg_;
  metrics_registry::fold_batch batch_;
  metrics_registry::series* series_ = nullptr;
  std::string route_, model_;
  bool named_model_ = false;        // the request named its model
  std::string_view path_provider_;  // (a static name)
  mono_ns last_fold_ = 0;
};

}  // namespace

std::unique_ptr<hook> metrics_hook_factory::create() {
  return std::make_unique<metrics_hook>(reg_);
}

void register_metrics_hook(hook_registry& r, std::shared_ptr<metrics_registry> metrics) {
  r.add("metrics",
        [metrics](const config::config&) -> std::shared_ptr<hook_factory> {
          if (!metrics) return nullptr;
          return std::make_shared<metrics_hook_factory>(metrics);
        },
        {.provides = {}, .needs = {"timing"}, .reads = {"steps", "cache_events"}});
}

}  // namespace tokentap::hooks
