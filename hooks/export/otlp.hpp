#pragma once
// Spans as OTLP carries them (opentelemetry-proto, trace/v1), and their two encodings for
// OTLP/HTTP: binary protobuf (`application/x-protobuf`) and OTLP/JSON (`application/json`: ids as
// hex, enums as integers, 64-bit integers as strings).  Written by hand, so the runtime needs no
// protobuf library; checked against Google's protoc and a protobufjs receiver in the tests.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace tokentap::hooks {

using otel_trace_id = std::array<std::uint8_t, 16>;
using otel_span_id = std::array<std::uint8_t, 8>;

struct otel_attribute {
  using value_type =
      std::variant<std::string, std::int64_t, double, bool, std::vector<std::string>>;
  std::string key;
  value_type value;
};

struct otel_event {
  std::uint64_t time_unix_nano = 0;
  std::string name;
  std::vector<otel_attribute> attributes;
};

/// Span.SpanKind and Status.StatusCode values.
enum class otel_kind : std::uint8_t { internal = 1, server = 2, client = 3 };
enum class otel_status : std::uint8_t { unset = 0, ok = 1, error = 2 };

/// Span.flags bits beside the W3C trace flags (bits 0-7): whether the parent is remote is known,
/// and it is.
inline constexpr std::uint32_t otel_has_is_remote = 0x100, otel_is_remote = 0x200;

struct otel_span {
  otel_trace_id trace_id{};
  otel_span_id span_id{};
  otel_span_id parent_span_id{};  ///< all zero: a root span
  std::string trace_state;
  std::uint32_t flags = 0;
  std::string name;
  otel_kind kind = otel_kind::internal;
  std::uint64_t start_unix_nano = 0, end_unix_nano = 0;
  std::vector<otel_attribute> attributes;
  std::vector<otel_event> events;
  otel_status status = otel_status::unset;
  std::string status_message;
};

/// Who sends the spans: the Resource's attributes (service.name, ...) and the scope's name and
/// version.
struct otel_resource {
  std::vector<otel_attribute> attributes;
  std::string scope_name, scope_version;
};

/// Lowercase hex of an id (traceparent fields, OTLP/JSON ids).
std::string to_hex(std::span<const std::uint8_t> id);

/// An ExportTraceServiceRequest with one ResourceSpans holding `spans`.
std::string otlp_protobuf(const otel_resource& r, std::span<const otel_span> spans);
std::string otlp_json(const otel_resource& r, std::span<const otel_span> spans);

/// `body` as one gzip member (RFC 1952, zlib's default level), for `Content-Encoding: gzip`;
/// nullopt only when zlib has no memory for its state.
std::optional<std::string> otlp_gzip(const std::string& body);

}  // namespace tokentap::hooks
