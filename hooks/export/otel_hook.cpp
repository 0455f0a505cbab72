#include "hooks/export/otel_hook.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "base/json.hpp"
#include "hooks/export/gen_ai_semconv.hpp"
#include "hooks/registry.hpp"
#include "parsers/gen_ai_messages.hpp"

namespace tokentap::hooks {

namespace {

constexpr std::size_t max_captured_bytes = 64 * 1024;  // capture_content: per text

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // (uppercase is not valid in a traceparent)
}

template <std::size_t N>
bool read_hex(std::string_view s, std::array<std::uint8_t, N>& out) noexcept {
  if (s.size() != 2 * N) return false;
  bool any = false;
  for (std::size_t i = 0; i < N; ++i) {
    const int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    any = any || out[i] != 0;
  }
  return any;
}

// Random ids: a per-thread generator seeded from the system's entropy.
std::uint64_t random64() {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    return (static_cast<std::uint64_t>(rd()) << 32) ^ rd() ^
           std::hash<std::thread::id>{}(std::this_thread::get_id());
  }());
  return gen();
}

template <std::size_t N>
void fill_random(std::array<std::uint8_t, N>& id) {
  do {
    for (std::size_t i = 0; i < N; i += 8) {
      const auto r = random64();
      for (std::size_t j = 0; j < 8 && i + j < N; ++j)
        id[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
    }
  } while (std::all_of(id.begin(), id.end(), [](std::uint8_t b) { return b == 0; }));
}

class otel_hook final : public hook {
 public:
  otel_hook(const config::otel_config& cfg, std::shared_ptr<span_sink> sink)
      : cfg_(cfg), sink_(std::move(sink)) {}

  request_status on_request_phase(const request_view& r, request_callbacks& cb) override {
    begin(r);
    cb.set_upstream_header("traceparent", format_traceparent(trace_, client_id_, flags_));
    return request_status::proceed;
  }

  void on_request(const request_view& r) override {
    begin(r);  // (a request answered before the request phase reached this hook)
    method_.assign(r.method);
    path_.assign(r.target.substr(0, r.target.find('?')));
    route_.assign(r.route);
    model_.assign(r.model);
    stream_ = r.stream;
    wall_start_us_ = r.wall_start_us;
    start_ns_ = r.start_ns;
    max_tokens_ = r.max_tokens;
    if (cfg_.capture_content && sampled())
      input_ = parsers::gen_ai_input_of(r.body, max_captured_bytes);
  }

  void on_token(const token_event& t) override {
    if (t.channel != parsers::channel::content) return;
    if (answer_.size() + t.text.size() > max_captured_bytes) answer_truncated_ = true;
    if (answer_.size() < max_captured_bytes)
      answer_.append(t.text.substr(0, max_captured_bytes - answer_.size()));
  }

  unsigned per_event() const noexcept override { return cfg_.capture_content ? token_calls : 0u; }

  void on_stream_end(const stream_info& s) override {
    if (!started_ || !sampled() || !sink_) return;
    std::vector<otel_span> spans(2);
    server_span(s, spans[0]);
    client_span(s, spans[1]);
    sink_->export_spans(std::move(spans));
  }

 private:
  bool sampled() const noexcept { return (flags_ & 1) != 0; }

  // The trace this exchange belongs to: the client's, else a new one.
  void begin(const request_view& r) {
    if (started_) return;
    started_ = true;
    if (auto p = parse_traceparent(find_header(r.headers, "traceparent"))) {
      trace_ = p->trace_id;
      remote_parent_ = p->parent_id;
      has_parent_ = true;
      flags_ = p->flags & 1;
      const auto ts = find_header(r.headers, "tracestate");
      trace_state_.assign(ts.substr(0, 512));  // (W3C: 32 members of at most 256 bytes)
    } else {
      fill_random(trace_);
      flags_ = otel_hook_factory::keep(trace_, cfg_.sample_rate) ? 1 : 0;
    }
    fill_random(server_id_);
    fill_random(client_id_);
  }

  std::uint64_t unix_nano(mono_ns t) const {
    const auto start = static_cast<std::uint64_t>(wall_start_us_) * 1000;
    return t >= start_ns_ ? start + static_cast<std::uint64_t>(t - start_ns_) : start;
  }

  static void add(std::vector<otel_attribute>& a, std::string key, otel_attribute::value_type v) {
    a.push_back({std::move(key), std::move(v)});
  }
  static void add_count(std::vector<otel_attribute>& a, std::string key, std::int64_t v) {
    if (v >= 0) add(a, std::move(key), v);
  }
  static void add_ms(std::vector<otel_attribute>& a, std::string key, double v) {
    if (v >= 0) add(a, std::move(key), v);
  }

  void common(otel_span& sp, const stream_info& s) const {
    sp.trace_id = trace_;
    sp.start_unix_nano = unix_nano(start_ns_);
    sp.end_unix_nano = unix_nano(s.end_ns > 0 ? s.end_ns : start_ns_);
  }

  void server_span(const stream_info& s, otel_span& sp) const {
    common(sp, s);
    sp.span_id = server_id_;
    if (has_parent_) sp.parent_span_id = remote_parent_;
    sp.trace_state = trace_state_;
    sp.flags = flags_ | otel_has_is_remote | (has_parent_ ? otel_is_remote : 0);
    sp.kind = otel_kind::server;
    sp.name = method_ + " " + path_;
    auto& a = sp.attributes;
    add(a, "http.request.method", method_);
    add(a, "url.path", path_);
    add(a, "url.scheme", std::string("http"));
    if (s.status != 0) add(a, "http.response.status_code", static_cast<std::int64_t>(s.status));
    add(a, "tokentap.route", route_);
    if (!s.tenant.empty()) add(a, "tokentap.tenant", s.tenant);
    add(a, "tokentap.outcome", std::string(to_string(s.outcome)));
    // HTTP server spans: 5xx and exchanges that broke are errors; 4xx are the client's.
    const bool failed = s.status >= 500 || (s.outcome != stream_outcome::ok &&
                                            s.outcome != stream_outcome::client_disconnect &&
                                            s.outcome != stream_outcome::rejected);
    if (failed) {
      const auto type = gen_ai_error_type(s);
      add(a, "error.type", type.empty() ? std::string("_OTHER") : type);
      sp.status = otel_status::error;
    }
  }

  void client_span(const stream_info& s, otel_span& sp) const {
    common(sp, s);
    sp.span_id = client_id_;
    sp.parent_span_id = server_id_;
    sp.trace_state = trace_state_;
    sp.flags = flags_ | otel_has_is_remote;
    sp.kind = otel_kind::client;
    const auto operation = std::string(gen_ai_operation(s.provider, path_));
    sp.name = model_.empty() ? operation : operation + " " + model_;
    auto& a = sp.attributes;
    add(a, "gen_ai.operation.name", operation);
    add(a, "gen_ai.provider.name", std::string(gen_ai_provider(s.provider)));
    if (!model_.empty()) add(a, "gen_ai.request.model", model_);
    add(a, "gen_ai.request.stream", stream_);
    if (max_tokens_) add(a, "gen_ai.request.max_tokens", *max_tokens_);
    std::vector<std::string> reasons;
    for (const auto& c : s.by_choice)
      if (!c.finish_reason.empty()) reasons.push_back(c.finish_reason);
    if (reasons.empty() && !s.finish_reason.empty()) reasons.push_back(s.finish_reason);
    if (!reasons.empty()) add(a, "gen_ai.response.finish_reasons", std::move(reasons));
    if (!s.response_id.empty()) add(a, "gen_ai.response.id", s.response_id);
    if (!s.response_model.empty()) add(a, "gen_ai.response.model", s.response_model);
    if (s.first_token_ns >= s.start_ns && s.first_token_ns > 0)
      add(a, "gen_ai.response.time_to_first_chunk",
          static_cast<double>(s.first_token_ns - s.start_ns) / 1e9);
    add_count(a, "gen_ai.usage.input_tokens", s.usage.input_tokens);
    add_count(a, "gen_ai.usage.output_tokens", s.usage.output_tokens);
    add_count(a, "gen_ai.usage.cache_read.input_tokens", s.usage.cached_input_tokens);
    add_count(a, "gen_ai.usage.cache_creation.input_tokens", s.usage.cache_write_tokens);
    add_count(a, "gen_ai.usage.reasoning.output_tokens", s.usage.reasoning_tokens);
    const auto& up = s.upstream;
    if (!up.attempts.empty()) {
      const auto& last = up.attempts.back();
      const auto server = server_of(last.endpoint);
      add(a, "server.address", server.address);
      if (!server.port.empty())
        add(a, "server.port", static_cast<std::int64_t>(std::atoll(server.port.c_str())));
      add(a, "tokentap.upstream", last.upstream);
      add(a, "tokentap.upstream.endpoint", last.endpoint);
      add(a, "tokentap.upstream.attempts", static_cast<std::int64_t>(up.attempts.size()));
      add(a, "tokentap.routing.policy", up.policy);
      add(a, "tokentap.routing.reason", last.reason);
      if (last.matched_messages > 0)
        add(a, "tokentap.routing.matched_messages", std::int64_t{last.matched_messages});
    } else if (!up.name.empty()) {
      add(a, "tokentap.upstream", up.name);
    }
    const auto& t = s.timing;
    add_ms(a, "tokentap.ttft_ms", t.ttft_ms);
    add_ms(a, "tokentap.ttft_answer_ms", t.ttft_answer_ms);
    add_ms(a, "tokentap.itl.p50_ms", t.itl.p50);
    add_ms(a, "tokentap.itl.p95_ms", t.itl.p95);
    add_ms(a, "tokentap.itl.p99_ms", t.itl.p99);
    add_ms(a, "tokentap.itl.max_ms", t.itl.max);
    add_ms(a, "tokentap.tpot_ms", t.tpot_ms);
    if (t.itl.count > 0) add(a, "tokentap.stalls", static_cast<std::int64_t>(t.stalls));
    add(a, "tokentap.outcome", std::string(to_string(s.outcome)));
    if (!s.steps.empty()) add(a, "tokentap.steps", static_cast<std::int64_t>(s.steps.size()));
    if (!s.trace_record_id.empty()) add(a, "tokentap.trace.record_id", s.trace_record_id);
    if (s.redundant_tokens > 0)
      add(a, "tokentap.redundant_tokens", static_cast<std::int64_t>(s.redundant_tokens));
    if (cfg_.capture_content) {
      if (!input_.system_instructions.empty())
        add(a, "gen_ai.system_instructions", input_.system_instructions);
      if (!input_.input_messages.empty()) add(a, "gen_ai.input.messages", input_.input_messages);
      if (input_.truncated || answer_truncated_) add(a, "tokentap.content.truncated", true);
      std::string out = R"([{"role":"assistant","parts":[{"type":"text","content":)";
      base::json::append_string(out, answer_);
      out += "}]}]";
      add(a, "gen_ai.output.messages", std::move(out));
    }
    const auto type = gen_ai_error_type(s);
    if (!type.empty()) {
      add(a, "error.type", type);
      sp.status = otel_status::error;
      sp.status_message = !s.error_message.empty() ? s.error_message : s.upstream_error_reason;
    }
    // Steps and cache events: span events (never one per token).
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      const auto& st = s.steps[i];
      otel_event e{unix_nano(st.t_ns), "tokentap.step", {}};
      add(e.attributes, "tokentap.step.index", static_cast<std::int64_t>(i));
      add(e.attributes, "tokentap.step.kind", std::string(parsers::to_string(st.kind)));
      add(e.attributes, "tokentap.step.tokens", std::int64_t{st.tokens});
      if (st.redundant) add(e.attributes, "tokentap.step.redundant", true);
      sp.events.push_back(std::move(e));
    }
    for (const auto& [name, evidence] : s.cache_events) {
      otel_event e{sp.end_unix_nano, "tokentap.cache." + name, {}};
      add(e.attributes, "tokentap.cache.evidence", evidence);
      sp.events.push_back(std::move(e));
    }
    // A fault injected on purpose, at the request's start (a cut: at its end).
    if (!s.fault.rule.empty()) {
      otel_event e{
          s.fault.kind == "cut" ? sp.end_unix_nano : sp.start_unix_nano, "tokentap.fault", {}};
      add(e.attributes, "tokentap.fault.rule", s.fault.rule);
      add(e.attributes, "tokentap.fault.kind", std::string(s.fault.kind));
      add(e.attributes, "tokentap.fault.value", std::int64_t{s.fault.value});
      sp.events.push_back(std::move(e));
    }
  }

  const config::otel_config& cfg_;
  std::shared_ptr<span_sink> sink_;
  bool started_ = false, has_parent_ = false, stream_ = false, answer_truncated_ = false;
  otel_trace_id trace_{};
  otel_span_id remote_parent_{}, server_id_{}, client_id_{};
  std::uint8_t flags_ = 0;
  std::string trace_state_, method_, path_, route_, model_, answer_;
  parsers::gen_ai_input input_;
  std::optional<std::int64_t> max_tokens_;
  std::int64_t wall_start_us_ = 0;
  mono_ns start_ns_ = 0;
};

}  // namespace

std::optional<trace_parent> parse_traceparent(std::string_view v) noexcept {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2 = 55.
  if (v.size() < 55 || v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  const int v_hi = hex_digit(v[0]), v_lo = hex_digit(v[1]);
  if (v_hi < 0 || v_lo < 0 || (v_hi == 15 && v_lo == 15)) return std::nullopt;
  const bool version_00 = v_hi == 0 && v_lo == 0;
  // Version 00 is exactly 55 characters; a later one may carry more after another '-'.
  if (version_00 ? v.size() != 55 : (v.size() > 55 && v[55] != '-')) return std::nullopt;
  trace_parent p;
  if (!read_hex(v.substr(3, 32), p.trace_id) || !read_hex(v.substr(36, 16), p.parent_id))
    return std::nullopt;
  const int f_hi = hex_digit(v[53]), f_lo = hex_digit(v[54]);
  if (f_hi < 0 || f_lo < 0) return std::nullopt;
  p.flags = static_cast<std::uint8_t>(f_hi << 4 | f_lo);
  return p;
}

std::string format_traceparent(const otel_trace_id& t, const otel_span_id& s, std::uint8_t flags) {
  return "00-" + to_hex(t) + "-" + to_hex(s) + "-" +
         to_hex(std::span<const std::uint8_t>(&flags, 1));
}

bool otel_hook_factory::keep(const otel_trace_id& id, double r) noexcept {
  if (r >= 1) return true;
  if (r <= 0) return false;
  std::uint64_t low = 0;
  for (std::size_t i = 8; i < 16; ++i) low = low << 8 | id[i];
  return static_cast<double>(low) < r * 18446744073709551616.0;
}

otel_hook_factory::otel_hook_factory(const config::otel_config& cfg,
                                     std::shared_ptr<span_sink> sink)
    : cfg_(&cfg), sink_(std::move(sink)) {}

std::unique_ptr<hook> otel_hook_factory::create() {
  return std::make_unique<otel_hook>(*cfg_, sink_);
}

void register_otel(hook_registry& r, span_sink_maker span_sinks) {
  struct sink_of_registry {
    config::otel_config cfg;
    std::shared_ptr<span_sink> sink;
  };
  r.add(
      "otel",
      [span_sinks = std::move(span_sinks), last = std::make_shared<sink_of_registry>()](
          const config::config& cfg) -> std::shared_ptr<hook_factory> {
        if (!span_sinks || cfg.otel.endpoint.empty()) return nullptr;
        if (!last->sink || !(last->cfg == cfg.otel)) *last = {cfg.otel, span_sinks(cfg.otel)};
        return std::make_shared<otel_hook_factory>(cfg.otel, last->sink);
      },
      {.provides = {}, .needs = {}, .reads = {"timing", "steps", "cache_events", "trace_record"}});
}

}  // namespace tokentap::hooks
