#include "proxy/http_util.hpp"

#include <boost/beast/core/string.hpp>

#include <array>
#include <charconv>

#include "net/http_rules.hpp"

namespace tokentap::proxy {

namespace {

// Names of different lengths never call Beast's (out-of-line) comparison: a header goes past
// ~20 names here (hop-by-hop, the ones skipped, the secret ones) and matches almost none.
bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && boost::beast::iequals(a, b);
}

// Calls f(token) for each comma-separated token of a field value, trimmed.
template <class F>
void for_each_token(std::string_view v, F&& f) {
  while (!v.empty()) {
    auto comma = v.find(',');
    auto tok = v.substr(0, comma);
    while (!tok.empty() && (tok.front() == ' ' || tok.front() == '\t')) tok.remove_prefix(1);
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t')) tok.remove_suffix(1);
    if (!tok.empty()) f(tok);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

}  // namespace

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name.data(), name.size()).append(": ", 2);
  out.append(value.data(), value.size()).append("\r\n", 2);
}

void append_end_to_end(std::string& out, const http::fields& src,
                       std::initializer_list<std::string_view> skip) {
  const auto connection = src[http::field::connection];
  for (const auto& f : src) {
    const auto name = f.name_string();
    if (net::is_hop_by_hop(name)) continue;
    bool skipped = false;
    for (auto s : skip)
      if (iequals(s, name)) skipped = true;
    for_each_token(connection, [&](std::string_view tok) {
      if (iequals(tok, name)) skipped = true;
    });
    if (!skipped) append_field(out, name, f.value());
  }
}

namespace {

std::size_t fields_size(const http::fields& f) {
  std::size_t n = 2;
  for (const auto& e : f) n += e.name_string().size() + e.value().size() + 4;
  return n;
}

void append_version(std::string& out, unsigned version) {
  const char v[3] = {static_cast<char>('0' + version / 10 % 10), '.',
                     static_cast<char>('0' + version % 10)};
  out.append("HTTP/", 5).append(v, 3);
}

// "HTTP/X.Y ### <reason>\r\n".  Beast's reason() is never empty: without one it gives the
// status's usual one.
void append_status_line(std::string& out, unsigned version, unsigned code,
                        std::string_view reason) {
  append_version(out, version);
  const char status[5] = {' ', static_cast<char>('0' + code / 100 % 10),
                          static_cast<char>('0' + code / 10 % 10),
                          static_cast<char>('0' + code % 10), ' '};
  out.append(status, 5).append(reason.data(), reason.size()).append("\r\n", 2);
}

void append_number_field(std::string& out, std::string_view name, std::uint64_t value) {
  char digits[20];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  append_field(out, name, std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

}  // namespace

void append_upstream_request_head(std::string& out, const http::request_header<>& client,
                                  const forwarded_request& f) {
  const auto method = client.method_string();
  const auto target = client.target();
  out.reserve(out.size() + method.size() + f.base_path.size() + target.size() + 160 +
              fields_size(client));
  out.append(method.data(), method.size()).push_back(' ');
  out.append(f.base_path.data(), f.base_path.size()).append(target.data(), target.size());
  out.append(" HTTP/1.1\r\n", 11);
  append_end_to_end(out, client,
                    {"host", "expect", "content-length", "x-forwarded-for", "accept-encoding"});
  append_field(out, "Host", f.host);
  const auto xff = client["X-Forwarded-For"];
  out.append("X-Forwarded-For: ", 17);
  if (!xff.empty()) out.append(xff.data(), xff.size()).append(", ", 2);
  out.append(f.peer.data(), f.peer.size()).append("\r\n", 2);
  if (client.find("x-forwarded-proto") == client.end())
    append_field(out, "X-Forwarded-Proto", "http");
  // Event streams must come back uncompressed so they can be relayed and parsed as they arrive.
  if (f.identity_encoding) {
    append_field(out, "Accept-Encoding", "identity");
  } else if (const auto ae = client[http::field::accept_encoding]; !ae.empty()) {
    append_field(out, "Accept-Encoding", ae);
  }
  if (f.content_length) append_number_field(out, "Content-Length", *f.content_length);
  out.append("\r\n", 2);
}

void append_client_response_head(std::string& out, const http::response_header<>& upstream,
                                 unsigned version, std::optional<std::uint64_t> content_length,
                                 bool chunked, bool keep_alive) {
  out.reserve(out.size() + upstream.reason().size() + 120 + fields_size(upstream));
  append_status_line(out, version, upstream.result_int(), upstream.reason());
  // The proxy's own X-Accel-Buffering replaces an upstream's (Beast's set() did so, at the end).
  const bool streaming = net::is_streaming_content_type(upstream[http::field::content_type]);
  if (streaming) {
    append_end_to_end(out, upstream, {"content-length", "x-accel-buffering"});
    append_field(out, "X-Accel-Buffering", "no");
  } else {
    append_end_to_end(out, upstream, {"content-length"});
  }
  if (content_length)
    append_number_field(out, "Content-Length", *content_length);
  else if (chunked)
    append_field(out, "Transfer-Encoding", "chunked");
  // Connection is hop-by-hop (never copied): only what keep_alive() adds for this version.
  if (version >= 11 && !keep_alive)
    append_field(out, "Connection", "close");
  else if (version < 11 && keep_alive)
    append_field(out, "Connection", "keep-alive");
  out.append("\r\n", 2);
}

void set_error_body(http::response<http::string_body>& res, unsigned status, std::string_view type,
                    std::string_view message, std::string_view target) {
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.body() = net::error_body(status, type, message, target.substr(0, target.find('?')));
}

}  // namespace tokentap::proxy
