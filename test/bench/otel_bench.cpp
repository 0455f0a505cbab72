// What the OpenTelemetry export costs a request, measured where it happens.  The `otel` hook
// asks for no per-event call (without capture_content), so its cost is per request: the request
// phase (the client's `traceparent` parsed, the CLIENT span's formatted for the upstream, two
// span ids drawn), the stream end (two spans built from the stream_info) and the hand-off to the
// exporter, whose thread then encodes them (here: once per 512 spans, as a full batch).  The
// per-event figure is the request's cost over its events (`events_per_request`, 100 as in
// ab.sh); BENCHMARKS.md "OpenTelemetry export" sets it against the CPU a forwarded event costs.
#include <benchmark/benchmark.h>

#include <array>
#include <mutex>
#include <string>
#include <vector>

#include "hooks/export/otel_hook.hpp"
#include "hooks/export/otlp.hpp"

namespace {

using namespace tokentap;

constexpr double events_per_request = 100;

// The exporter's side, on the calling thread: a queue under a mutex, encoded per full batch
// (not encoded at all with `encode` false: what the I/O thread pays alone).
class encoding_sink final : public hooks::span_sink {
 public:
  encoding_sink(bool json, bool encode, bool gzip = false)
      : json_(json), encode_(encode), gzip_(gzip) {
    queue_.reserve(batch);
  }
  void export_spans(std::vector<hooks::otel_span> spans) noexcept override {
    std::lock_guard lock(mu_);
    for (auto& s : spans) queue_.push_back(std::move(s));
    if (queue_.size() >= batch && !encode_) queue_.clear();
    if (queue_.size() >= batch) {
      const auto body =
          json_ ? hooks::otlp_json(resource_, queue_) : hooks::otlp_protobuf(resource_, queue_);
      bytes_ += gzip_ ? hooks::otlp_gzip(body)->size() : body.size();
      queue_.clear();
    }
  }
  std::size_t bytes() const { return bytes_; }

 private:
  static constexpr std::size_t batch = 512;
  bool json_, encode_, gzip_;
  std::mutex mu_;
  std::vector<hooks::otel_span> queue_;
  hooks::otel_resource resource_{{{"service.name", std::string("tokentap")}}, "tokentap", "1"};
  std::size_t bytes_ = 0;
};

class no_callbacks final : public hooks::request_callbacks {
 public:
  void local_reply(unsigned, std::string_view, std::string_view) override {}
  void add_reply_header(std::string_view, std::string_view) override {}
  bool set_upstream_header(std::string_view, std::string_view v) override {
    sent = v.size();
    return true;
  }
  bool replace_body(std::string) override { return false; }
  void set_route_key(std::string_view) override {}
  void set_upstream(std::string_view) override {}
  std::string_view upstream() const noexcept override { return {}; }
  std::size_t sent = 0;
};

// What the chain hands the hook at stream end for a typical streamed chat completion: usage,
// timing, one attempt, three reasoning steps, one cache event.
hooks::stream_info typical_stream() {
  hooks::stream_info s;
  s.provider = parsers::provider::openai_chat;
  s.status = 200;
  s.usage.input_tokens = 1200;
  s.usage.output_tokens = 100;
  s.usage.cached_input_tokens = 1024;
  s.usage.reasoning_tokens = 40;
  s.finish_reason = "stop";
  s.response_id = "chatcmpl-CVFjOTBIgA3kuQLnIXXxtg7Ge7hbs";
  s.response_model = "gpt-4o-2024-08-06";
  s.start_ns = 1'000'000;
  s.first_token_ns = 151'000'000;
  s.first_content_ns = 900'000'000;
  s.end_ns = 2'100'000'000;
  s.timing.ttft_ms = 150;
  s.timing.ttft_answer_ms = 899;
  s.timing.tpot_ms = 19.5;
  s.timing.itl = {19.8, 24.1, 31.0, 45.2, 99};
  s.upstream.name = "vllm";
  s.upstream.policy = "prefix";
  s.upstream.attempts.push_back({"vllm", "10.0.0.7:8000", "", "prefix_match", 3});
  for (int i = 0; i < 3; ++i) {
    parsers::step st;
    st.offset = 40u * static_cast<unsigned>(i);
    st.kind = parsers::step_kind::other;
    st.t_ns = 200'000'000 + i * 200'000'000;
    st.tokens = 12;
    s.steps.push_back(st);
  }
  s.cache_events.emplace_back("hit", R"({"cached_tokens":1024})");
  return s;
}

void run_requests(benchmark::State& state, bool json, bool with_parent, bool encode = true,
                  bool gzip = false) {
  config::otel_config cfg;
  cfg.endpoint = "http://127.0.0.1:4318/v1/traces";
  auto sink = std::make_shared<encoding_sink>(json, encode, gzip);
  hooks::otel_hook_factory factory(cfg, sink);
  const std::array<hooks::header_view, 4> headers{{
      {"content-type", "application/json"},
      {"authorization", "[redacted]"},
      {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
      {"tracestate", "congo=t61rcWkgMzE"},
  }};
  hooks::request_view r;
  r.method = "POST";
  r.target = "/v1/chat/completions";
  r.route = "chat";
  r.upstream = "vllm";
  r.model = "gpt-4o";
  r.stream = true;
  r.start_ns = 1'000'000;
  r.wall_start_us = 1'764'900'000'000'000;
  r.headers = with_parent ? std::span<const hooks::header_view>(headers)
                          : std::span<const hooks::header_view>(headers).first(2);
  r.max_tokens = 512;
  const auto info = typical_stream();
  no_callbacks cb;
  for (auto _ : state) {
    auto h = factory.create();
    h->on_request_phase(r, cb);
    h->on_request(r);
    h->on_stream_end(info);
    benchmark::DoNotOptimize(h);
  }
  state.counters["per_event_at_100"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * events_per_request,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["export_bytes_per_request"] =
      static_cast<double>(sink->bytes()) / static_cast<double>(state.iterations());
}

void BM_OtelRequestContinuingClientTrace(benchmark::State& state) {
  run_requests(state, false, true);
}
BENCHMARK(BM_OtelRequestContinuingClientTrace);

void BM_OtelRequestNewTrace(benchmark::State& state) {
  run_requests(state, false, false);
}
BENCHMARK(BM_OtelRequestNewTrace);

void BM_OtelRequestJson(benchmark::State& state) {
  run_requests(state, true, true);
}
BENCHMARK(BM_OtelRequestJson);

// `compression: gzip`: the protobuf body deflated as the exporter sends it.
void BM_OtelRequestGzip(benchmark::State& state) {
  run_requests(state, false, true, true, true);
}
BENCHMARK(BM_OtelRequestGzip);

// The I/O thread's share: the hook's work and the queue push, no encoding.
void BM_OtelRequestIoThreadOnly(benchmark::State& state) {
  run_requests(state, false, true, false);
}
BENCHMARK(BM_OtelRequestIoThreadOnly);

}  // namespace

BENCHMARK_MAIN();
