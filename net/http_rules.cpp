#include "net/http_rules.hpp"

#include <array>
#include <string>

#include "base/json.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::net {

namespace {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto lower = [](unsigned char c) { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; };
    if (lower(static_cast<unsigned char>(a[i])) != lower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

bool is_hop_by_hop(std::string_view name) noexcept {
  static constexpr std::array<std::string_view, 9> names = {
      "connection", "keep-alive",        "proxy-connection", "proxy-authenticate", "te",
      "trailer",    "transfer-encoding", "upgrade",          "proxy-authorization"};
  for (auto n : names)
    if (iequals(n, name)) return true;
  return false;
}

bool is_secret_header(std::string_view name) noexcept {
  static constexpr std::array<std::string_view, 8> names = {
      "authorization", "x-api-key",           "api-key",        "cookie",
      "set-cookie",    "proxy-authorization", "x-goog-api-key", "x-tokentap-admin-token"};
  for (auto n : names)
    if (iequals(n, name)) return true;
  return false;
}

std::string redact_target(std::string_view target) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view query = target.substr(q + 1);
  bool first = true;
  while (true) {
    const auto amp = query.find('&');
    const auto param = query.substr(0, amp);
    const auto eq = param.find('=');
    const auto name = param.substr(0, eq);
    if (!first) out.push_back('&');
    first = false;
    if (eq != std::string_view::npos &&
        (iequals(name, "key") || iequals(name, "api_key") || iequals(name, "api-key") ||
         iequals(name, "access_token"))) {
      out.append(name).append("=[redacted]");
    } else {
      out.append(param);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

bool is_streaming_content_type(std::string_view ct) noexcept {
  auto starts = [&](std::string_view p) {
    return ct.size() >= p.size() && iequals(ct.substr(0, p.size()), p);
  };
  return starts("text/event-stream") || starts("application/x-ndjson") ||
         starts("application/jsonl") || starts("application/json-seq");
}

std::string error_body(unsigned status, std::string_view type, std::string_view message,
                       std::string_view path) {
  const auto provider = parsers::provider_from_path(path);
  std::string out;
  if (provider == parsers::provider::anthropic) {
    out = R"({"type":"error","error":{"type":")";
    base::json::append_escaped(out, type);
    out += R"(","message":")";
    base::json::append_escaped(out, message);
    out += R"(","source":"tokentap"}})";
  } else if (provider == parsers::provider::ollama || provider == parsers::provider::tgi) {
    out = R"({"error":")";
    base::json::append_escaped(out, message);
    out += R"(","error_type":")";
    base::json::append_escaped(out, type);
    out += R"(","source":"tokentap"})";
  } else {
    out = R"({"error":{"type":")";
    base::json::append_escaped(out, type);
    out += R"(","message":")";
    base::json::append_escaped(out, message);
    out += R"(","code":)" + std::to_string(status) + R"(,"source":"tokentap"}})";
  }
  out.push_back('\n');
  return out;
}

}  // namespace tokentap::net
