#pragma once
// HTTP rules every server here follows: which fields are connection-specific (RFC 9110 §7.6.1),
// which are secrets, how a target's keys are redacted, which content types stream, and the JSON
// error bodies a server answers with itself.  Plain string functions: no Boost.
#include <string>
#include <string_view>

namespace tokentap::net {

/// Connection-specific fields never forwarded (plus any named in the `Connection` field).
bool is_hop_by_hop(std::string_view name) noexcept;

/// Headers whose values are secrets and never reach a log, trace or label.
bool is_secret_header(std::string_view name) noexcept;

/// The request target with the values of `key`, `api_key`, `api-key` and `access_token` query
/// parameters replaced by `[redacted]`.
std::string redact_target(std::string_view target);

/// `text/event-stream` or NDJSON: a streamed body that must not be buffered by anyone.
bool is_streaming_content_type(std::string_view content_type) noexcept;

/// The body of an answer a server here gives itself, shaped like the errors of the provider that
/// `path` (the request's, without its query) speaks, so that its SDK surfaces type and message:
///  - Anthropic: `{"type":"error","error":{"type":…,"message":…,"source":"tokentap"}}`;
///  - Ollama, TGI: `{"error":message,"error_type":type,"source":"tokentap"}`;
///  - OpenAI and compatible servers, and unknown paths:
///    `{"error":{"type":…,"message":…,"code":status,"source":"tokentap"}}`.
std::string error_body(unsigned status, std::string_view type, std::string_view message,
                       std::string_view path = {});

}  // namespace tokentap::net
