#include "hooks/observe/gen_ai_metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "hooks/export/gen_ai_semconv.hpp"
#include "hooks/observe/metrics.hpp"
#include "hooks/registry.hpp"

namespace tokentap::hooks {

namespace {

using prometheus::Histogram;

// The conventions' advisory boundaries (semantic conventions v1.41, gen-ai-metrics.md).
const Histogram::BucketBoundaries duration_buckets{0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                                   1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
const Histogram::BucketBoundaries token_buckets{
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864};
const Histogram::BucketBoundaries ttft_buckets{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,
                                               0.25,  0.5,   0.75, 1.0,  2.5,  5.0,  7.5,  10.0};
const Histogram::BucketBoundaries tpot_buckets{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                               0.3,  0.4,   0.5,  0.75,  1.0, 2.5};

}  // namespace

class gen_ai_metrics_factory::families {
 public:
  explicit families(std::shared_ptr<metrics_registry> m)
      : metrics(std::move(m)),
        duration(prometheus::BuildHistogram()
                     .Name("gen_ai_client_operation_duration_seconds")
                     .Help("GenAI operation duration (OpenTelemetry semantic conventions): request "
                           "start to the end of the response")
                     .Register(metrics->prometheus_registry())),
        tokens(prometheus::BuildHistogram()
                   .Name("gen_ai_client_token_usage")
                   .Help("Tokens used per request (OpenTelemetry semantic conventions): input "
                         "(cached included) and output")
                   .Register(metrics->prometheus_registry())),
        ttft(prometheus::BuildHistogram()
                 .Name("gen_ai_server_time_to_first_token_seconds")
                 .Help("Time to the first token of successful streamed responses (OpenTelemetry "
                       "semantic conventions)")
                 .Register(metrics->prometheus_registry())),
        tpot(prometheus::BuildHistogram()
                 .Name("gen_ai_server_time_per_output_token_seconds")
                 .Help("Time per output token after the first (OpenTelemetry semantic "
                       "conventions): (end - first token) / (output tokens - 1)")
                 .Register(metrics->prometheus_registry())) {}

  struct key {
    std::string operation, provider, model, address, port, error;
    bool operator<(const key& o) const {
      return std::tie(operation, provider, model, address, port, error) <
             std::tie(o.operation, o.provider, o.model, o.address, o.port, o.error);
    }
  };
  struct handles {
    Histogram* duration;
    Histogram* input_tokens;
    Histogram* output_tokens;
    Histogram* ttft;
    Histogram* tpot;
  };

  // The handles of a label set, resolved once (Family::Add allocates and locks).
  handles& resolve(const key& k) {
    std::lock_guard lk(mu);
    auto it = series.find(k);
    if (it != series.end()) return it->second;
    std::map<std::string, std::string> labels{{"gen_ai_operation_name", k.operation},
                                              {"gen_ai_provider_name", k.provider},
                                              {"gen_ai_request_model", k.model}};
    if (!k.address.empty()) {
      labels["server_address"] = k.address;
      labels["server_port"] = k.port;
    }
    auto with = [&](const char* name, const std::string& value) {
      auto l = labels;
      l[name] = value;
      return l;
    };
    handles h{};
    h.duration =
        &duration.Add(k.error.empty() ? labels : with("error_type", k.error), duration_buckets);
    h.input_tokens = &tokens.Add(with("gen_ai_token_type", "input"), token_buckets);
    h.output_tokens = &tokens.Add(with("gen_ai_token_type", "output"), token_buckets);
    h.ttft = &ttft.Add(labels, ttft_buckets);
    h.tpot = &tpot.Add(labels, tpot_buckets);
    return series.emplace(k, h).first->second;
  }

  std::shared_ptr<metrics_registry> metrics;
  prometheus::Family<Histogram>& duration;
  prometheus::Family<Histogram>& tokens;
  prometheus::Family<Histogram>& ttft;
  prometheus::Family<Histogram>& tpot;
  std::mutex mu;
  std::map<key, handles> series;  // bounded: operations x providers x models x endpoints x errors
};

namespace {

class gen_ai_metrics_hook final : public hook {
 public:
  explicit gen_ai_metrics_hook(std::shared_ptr<gen_ai_metrics_factory::families> f)
      : fam_(std::move(f)) {}

  void on_request(const request_view& r) override {
    path_.assign(r.target.substr(0, r.target.find('?')));
    model_.assign(r.model);
  }

  void on_stream_end(const stream_info& s) override {
    if (s.provider == parsers::provider::unknown || s.outcome == stream_outcome::rejected ||
        s.outcome == stream_outcome::client_disconnect || s.end_ns <= s.start_ns)
      return;
    gen_ai_metrics_factory::families::key k;
    k.operation = gen_ai_operation(s.provider, path_);
    k.provider = gen_ai_provider(s.provider);
    k.model = fam_->metrics->model_label(model_);
    if (!s.upstream.attempts.empty()) {
      const auto server = server_of(s.upstream.attempts.back().endpoint);
      k.address = server.address;
      k.port = server.port;
    }
    k.error = gen_ai_error_type(s);
    auto& h = fam_->resolve(k);
    const auto seconds = [](std::int64_t ns) { return static_cast<double>(ns) / 1e9; };
    h.duration->Observe(seconds(s.end_ns - s.start_ns));
    if (s.usage.input_tokens >= 0)
      h.input_tokens->Observe(static_cast<double>(s.usage.input_tokens));
    if (s.usage.output_tokens >= 0)
      h.output_tokens->Observe(static_cast<double>(s.usage.output_tokens));
    const bool ok = k.error.empty() && s.status >= 200 && s.status < 300;
    if (ok && s.first_token_ns >= s.start_ns) {
      h.ttft->Observe(seconds(s.first_token_ns - s.start_ns));
      if (s.usage.output_tokens > 1 && s.last_token_ns > s.first_token_ns)
        h.tpot->Observe(seconds(s.last_token_ns - s.first_token_ns) /
                        static_cast<double>(s.usage.output_tokens - 1));
    }
  }

  unsigned per_event() const noexcept override { return 0; }

 private:
  std::shared_ptr<gen_ai_metrics_factory::families> fam_;
  std::string path_, model_;
};

}  // namespace

gen_ai_metrics_factory::gen_ai_metrics_factory(std::shared_ptr<metrics_registry> metrics)
    : fam_(std::make_shared<families>(std::move(metrics))) {}

gen_ai_metrics_factory::~gen_ai_metrics_factory() = default;

std::unique_ptr<hook> gen_ai_metrics_factory::create() {
  return std::make_unique<gen_ai_metrics_hook>(fam_);
}

void register_gen_ai_metrics(hook_registry& r, std::shared_ptr<metrics_registry> metrics) {
  r.add("gen_ai_metrics",
        [metrics](const config::config&) -> std::shared_ptr<hook_factory> {
          if (!metrics) return nullptr;
          return std::make_shared<gen_ai_metrics_factory>(metrics);
        },
        {.provides = {}, .needs = {}, .reads = {}});
}

}  // namespace tokentap::hooks
