#include "hooks/export/otlp.hpp"

#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "base/json.hpp"

namespace tokentap::hooks {

namespace {

// ------------------------------------------------------------------ protobuf wire format

enum wire : std::uint8_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, unsigned field, wire w) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | w);
}

void put_bytes(std::string& out, unsigned field, const void* data, std::size_t n) {
  put_tag(out, field, length_delimited);
  put_varint(out, n);
  out.append(static_cast<const char*>(data), n);
}

void put_string(std::string& out, unsigned field, const std::string& s) {
  if (!s.empty()) put_bytes(out, field, s.data(), s.size());
}

void put_fixed64(std::string& out, unsigned field, std::uint64_t v) {
  put_tag(out, field, fixed64);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void put_fixed32(std::string& out, unsigned field, std::uint32_t v) {
  put_tag(out, field, fixed32);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void put_uint(std::string& out, unsigned field, std::uint64_t v) {
  if (v == 0) return;
  put_tag(out, field, varint);
  put_varint(out, v);
}

// A nested message: encoded into a scratch string by `body`, then written with its length.
template <class Body>
void put_message(std::string& out, unsigned field, Body body) {
  std::string m;
  body(m);
  put_bytes(out, field, m.data(), m.size());
}

bool all_zero(std::span<const std::uint8_t> id) {
  for (auto b : id)
    if (b != 0) return false;
  return true;
}

// AnyValue (common/v1): string 1, bool 2, int 3, double 4, array 5.
void put_any_value(std::string& out, const otel_attribute& a) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          put_bytes(out, 1, v.data(), v.size());  // (an empty string is still a value)
        } else if constexpr (std::is_same_v<T, bool>) {
          put_tag(out, 2, varint);
          put_varint(out, v ? 1 : 0);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          put_tag(out, 3, varint);
          put_varint(out, static_cast<std::uint64_t>(v));
        } else if constexpr (std::is_same_v<T, double>) {
          std::uint64_t bits;
          std::memcpy(&bits, &v, sizeof bits);
          put_fixed64(out, 4, bits);
        } else {
          put_message(out, 5, [&v](std::string& arr) {
            for (const auto& s : v)
              put_message(arr, 1,
                          [&s](std::string& any) { put_bytes(any, 1, s.data(), s.size()); });
          });
        }
      },
      a.value);
}

// KeyValue: key 1, value 2.
void put_attributes(std::string& out, unsigned field, const std::vector<otel_attribute>& attrs) {
  for (const auto& a : attrs)
    put_message(out, field, [&a](std::string& kv) {
      put_string(kv, 1, a.key);
      put_message(kv, 2, [&a](std::string& any) { put_any_value(any, a); });
    });
}

void put_span(std::string& out, const otel_span& s) {
  put_bytes(out, 1, s.trace_id.data(), s.trace_id.size());
  put_bytes(out, 2, s.span_id.data(), s.span_id.size());
  put_string(out, 3, s.trace_state);
  if (!all_zero(s.parent_span_id))
    put_bytes(out, 4, s.parent_span_id.data(), s.parent_span_id.size());
  put_string(out, 5, s.name);
  put_uint(out, 6, static_cast<std::uint64_t>(s.kind));
  put_fixed64(out, 7, s.start_unix_nano);
  put_fixed64(out, 8, s.end_unix_nano);
  put_attributes(out, 9, s.attributes);
  for (const auto& e : s.events)
    put_message(out, 11, [&e](std::string& ev) {
      put_fixed64(ev, 1, e.time_unix_nano);
      put_string(ev, 2, e.name);
      put_attributes(ev, 3, e.attributes);
    });
  if (s.status != otel_status::unset || !s.status_message.empty())
    put_message(out, 15, [&s](std::string& st) {
      put_string(st, 2, s.status_message);
      put_uint(st, 3, static_cast<std::uint64_t>(s.status));
    });
  if (s.flags != 0) put_fixed32(out, 16, s.flags);
}

// ------------------------------------------------------------------ OTLP/JSON

void append_hex(std::string& out, std::span<const std::uint8_t> id) {
  out += '"';
  out += to_hex(id);
  out += '"';
}

void append_json_value(std::string& out, const otel_attribute& a) {
  std::visit(
      [&out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out += "{\"stringValue\":";
          base::json::append_string(out, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "{\"boolValue\":true" : "{\"boolValue\":false";
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          out += "{\"intValue\":\"" + std::to_string(v) + "\"";
        } else if constexpr (std::is_same_v<T, double>) {
          // (Proto3 JSON spells the values a JSON number cannot hold as strings.)
          char buf[32];
          if (std::isfinite(v))
            std::snprintf(buf, sizeof buf, "%.17g", v);
          else
            std::snprintf(buf, sizeof buf, "\"%s\"",
                          std::isnan(v) ? "NaN"
                          : v > 0       ? "Infinity"
                                        : "-Infinity");
          out += "{\"doubleValue\":";
          out += buf;
        } else {
          out += "{\"arrayValue\":{\"values\":[";
          for (std::size_t i = 0; i < v.size(); ++i) {
            if (i) out += ',';
            out += "{\"stringValue\":";
            base::json::append_string(out, v[i]);
            out += '}';
          }
          out += "]}";
        }
        out += '}';
      },
      a.value);
}

void append_json_attributes(std::string& out, const std::vector<otel_attribute>& attrs) {
  out += "\"attributes\":[";
  for (std::size_t i = 0; i < attrs.size(); ++i) {
    if (i) out += ',';
    out += "{\"key\":";
    base::json::append_string(out, attrs[i].key);
    out += ",\"value\":";
    append_json_value(out, attrs[i]);
    out += '}';
  }
  out += ']';
}

void append_json_span(std::string& out, const otel_span& s) {
  out += "{\"traceId\":";
  append_hex(out, s.trace_id);
  out += ",\"spanId\":";
  append_hex(out, s.span_id);
  if (!s.trace_state.empty()) {
    out += ",\"traceState\":";
    base::json::append_string(out, s.trace_state);
  }
  if (!all_zero(s.parent_span_id)) {
    out += ",\"parentSpanId\":";
    append_hex(out, s.parent_span_id);
  }
  if (s.flags != 0) out += ",\"flags\":" + std::to_string(s.flags);
  out += ",\"name\":";
  base::json::append_string(out, s.name);
  out += ",\"kind\":" + std::to_string(static_cast<int>(s.kind));
  out += ",\"startTimeUnixNano\":\"" + std::to_string(s.start_unix_nano) + "\"";
  out += ",\"endTimeUnixNano\":\"" + std::to_string(s.end_unix_nano) + "\",";
  append_json_attributes(out, s.attributes);
  out += ",\"events\":[";
  for (std::size_t i = 0; i < s.events.size(); ++i) {
    const auto& e = s.events[i];
    if (i) out += ',';
    out += "{\"timeUnixNano\":\"" + std::to_string(e.time_unix_nano) + "\",\"name\":";
    base::json::append_string(out, e.name);
    out += ',';
    append_json_attributes(out, e.attributes);
    out += '}';
  }
  out += "],\"status\":{";
  if (!s.status_message.empty()) {
    out += "\"message\":";
    base::json::append_string(out, s.status_message);
    out += ',';
  }
  out += "\"code\":" + std::to_string(static_cast<int>(s.status)) + "}}";
}

}  // namespace

std::string to_hex(std::span<const std::uint8_t> id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(id.size() * 2);
  for (auto b : id) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::string otlp_protobuf(const otel_resource& r, std::span<const otel_span> spans) {
  std::string out;
  // ExportTraceServiceRequest.resource_spans 1 → ResourceSpans {resource 1, scope_spans 2}.
  put_message(out, 1, [&](std::string& rs) {
    put_message(rs, 1, [&](std::string& res) { put_attributes(res, 1, r.attributes); });
    put_message(rs, 2, [&](std::string& ss) {
      put_message(ss, 1, [&](std::string& scope) {
        put_string(scope, 1, r.scope_name);
        put_string(scope, 2, r.scope_version);
      });
      for (const auto& s : spans) put_message(ss, 2, [&s](std::string& m) { put_span(m, s); });
    });
  });
  return out;
}

std::string otlp_json(const otel_resource& r, std::span<const otel_span> spans) {
  std::string out = "{\"resourceSpans\":[{\"resource\":{";
  append_json_attributes(out, r.attributes);
  out += "},\"scopeSpans\":[{\"scope\":{\"name\":";
  base::json::append_string(out, r.scope_name);
  out += ",\"version\":";
  base::json::append_string(out, r.scope_version);
  out += "},\"spans\":[";
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (i) out += ',';
    append_json_span(out, spans[i]);
  }
  out += "]}]}]}";
  return out;
}

std::optional<std::string> otlp_gzip(const std::string& in) {
  if (in.size() > 0xffffffffu) return std::nullopt;  // (a batch is a few MB at most)
  z_stream z{};
  // 15 + 16: the largest window, with a gzip header and trailer instead of zlib's.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return std::nullopt;
  std::string out(deflateBound(&z, static_cast<uLong>(in.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  return out;
}

}  // namespace tokentap::hooks
