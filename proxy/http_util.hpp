#pragma once
// Header rules of a reverse proxy (RFC 9110 §7.6.1 hop-by-hop fields), secret redaction and the
// JSON error bodies the proxy answers with when it cannot forward.
#include <initializer_list>
#include <string>
#include <string_view>

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>

namespace tokentap::proxy {

namespace http = boost::beast::http;

/// Connection-specific fields never forwarded (plus any named in the `Connection` field).
bool is_hop_by_hop(std::string_view name) noexcept;

/// Copies every end-to-end field of `src` into `dst`, skipping hop-by-hop fields, fields named by
/// src's `Connection` header, and the fields named in `skip` (case-insensitive).
void copy_end_to_end(const http::fields& src, http::fields& dst,
                     std::initializer_list<std::string_view> skip = {});

/// Appends the bytes Beast's serializer writes for a message head (start line, fields, blank
/// line), built in one buffer.  The proxy's own heads (the upstream request, the client's
/// response head) are written this way: Beast's serializer walks a concatenation of a buffer per
/// field through generic buffer-sequence iterators, ~15–20 k instructions per head (issue 8).
void append_head(std::string& out, const http::request_header<>& h);
void append_head(std::string& out, const http::response_header<>& h);

/// Headers whose values are secrets and never reach a log, trace or label.
bool is_secret_header(std::string_view name) noexcept;

/// The request target with the values of `key`, `api_key`, `api-key` and `access_token` query
/// parameters replaced by `[redacted]`.
std::string redact_target(std::string_view target);

/// `text/event-stream` or NDJSON: a streamed body that must not be buffered by anyone.
bool is_streaming_content_type(std::string_view content_type) noexcept;

/// `{"error":{"type":…,"message":…,"code":status,"source":"tokentap"}}` — shaped like the
/// providers' own errors so SDKs surface the message.
std::string error_body(unsigned status, std::string_view type, std::string_view message);

}  // namespace tokentap::proxy
