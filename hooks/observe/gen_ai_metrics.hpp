#pragma once
// The OpenTelemetry GenAI semantic-convention metrics (opt-in: `metrics.semconv: true`), beside
// tokentap's own, so dashboards built for other gateways and instrumentations work unchanged.
// Histograms with the conventions' advisory buckets, named as the OpenTelemetry-to-Prometheus
// rules write them (dots to underscores, the unit as a suffix, `{token}` dropped):
//
//   gen_ai_client_operation_duration_seconds     request start to end of response (error_type
//                                                on failures)
//   gen_ai_client_token_usage                    input (cached included) and output tokens, per
//                                                request, by gen_ai_token_type
//   gen_ai_server_time_to_first_token_seconds    successful streamed responses
//   gen_ai_server_time_per_output_token_seconds  (last - first token) / (output tokens - 1), as
//                                                tokentap_time_per_output_token_seconds
//
// Labels on each: gen_ai_operation_name (chat, text_completion), gen_ai_provider_name (openai for
// OpenAI-compatible servers, anthropic, ollama, tgi, llamacpp), gen_ai_request_model (bounded as
// the `model` label), server_address and server_port (the endpoint that answered: bounded by the
// config).  Exchanges the proxy answered itself, or whose client left, are not operations of the
// upstream and are not recorded.
#include <memory>

#include "hooks/hook.hpp"

namespace tokentap::hooks {

class metrics_registry;

class gen_ai_metrics_factory final : public hook_factory {
 public:
  explicit gen_ai_metrics_factory(std::shared_ptr<metrics_registry> metrics);
  ~gen_ai_metrics_factory() override;
  std::unique_ptr<hook> create() override;

  class families;

 private:
  std::shared_ptr<families> fam_;
};

class hook_registry;
/// Registers "gen_ai_metrics" (skipped without a metrics registry).
void register_gen_ai_metrics(hook_registry& r, std::shared_ptr<metrics_registry> metrics);

}  // namespace tokentap::hooks
