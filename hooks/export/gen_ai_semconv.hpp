#pragma once
// Values of the OpenTelemetry GenAI semantic conventions (v1.41) that the metrics under those
// names (gen_ai_metrics) and the spans (otel_hook) both report.
#include <string>
#include <string_view>

#include "hooks/hook.hpp"

namespace tokentap::hooks {

/// gen_ai.operation.name of a request path: text completion endpoints, else chat.
std::string_view gen_ai_operation(parsers::provider p, std::string_view path) noexcept;

/// gen_ai.provider.name: the API a server speaks (an OpenAI-compatible server is `openai`, as
/// the other gateways report it).
std::string_view gen_ai_provider(parsers::provider p) noexcept;

/// error.type: the status the upstream (or the proxy for it) answered with, else how the stream
/// failed; empty on success (a client that left, or a request the proxy refused, is no error of
/// the operation).
std::string gen_ai_error_type(const stream_info& s);

/// server.address and server.port of an endpoint label (host:port, [v6]:port).
struct server_address {
  std::string address, port;
};
server_address server_of(std::string_view endpoint_label);

}  // namespace tokentap::hooks
