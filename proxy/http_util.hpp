#pragma once
// The proxy's two heads, written straight from the parsed fields: the request it forwards
// upstream and the response head it sends the client (the field rules are net/http_rules.hpp);
// and the answers of its own.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace tokentap::proxy {

namespace http = boost::beast::http;

/// Appends `name: value` CRLF for every end-to-end field of `src`, in order: not hop-by-hop, not
/// named by src's `Connection` header, not named in `skip` (case-insensitive).
///
/// The proxy writes its two heads (the upstream request, the client's response head) itself, in
/// one buffer, straight from the parsed fields: Beast's serializer walked a concatenation of a
/// buffer per field through generic buffer-sequence iterators, and copying the fields into a Beast
/// field list first cost an allocation and a free per field (BENCHMARKS.md).  The bytes are the
/// ones Beast wrote for the messages the proxy used to build (the tests build those and compare).
void append_end_to_end(std::string& out, const http::fields& src,
                       std::initializer_list<std::string_view> skip = {});

/// Appends `name: value` CRLF.
void append_field(std::string& out, std::string_view name, std::string_view value);

/// What the proxy puts into a request it forwards, besides the client's end-to-end fields.
struct forwarded_request {
  std::string_view base_path;                 // the upstream's path prefix
  std::string_view host;                      // its Host
  std::string_view peer;                      // the client's address (X-Forwarded-For)
  bool identity_encoding = true;              // ask for an uncompressed body
  std::optional<std::size_t> content_length;  // the (buffered) body's, when sent with one
};

/// The upstream request's head: the client's method, the base path and its target, HTTP/1.1; its
/// end-to-end fields (not Host, Expect, Content-Length, X-Forwarded-For, Accept-Encoding); then
/// Host, X-Forwarded-For (the client's list and its address), X-Forwarded-Proto (unless the
/// client sent one), Accept-Encoding (`identity`, or the client's) and Content-Length.
void append_upstream_request_head(std::string& out, const http::request_header<>& client,
                                  const forwarded_request& f);

/// The client's response head: the upstream's status (an empty reason: the usual one) at the
/// client's HTTP version, its end-to-end fields but Content-Length, `X-Accel-Buffering: no` for
/// streamed content types, then the framing — Content-Length when given, else
/// `Transfer-Encoding: chunked` when `chunked` — and Connection as Beast's keep_alive() sets it
/// (HTTP/1.1 says `close`, HTTP/1.0 says `keep-alive`).
void append_client_response_head(std::string& out, const http::response_header<>& upstream,
                                 unsigned version, std::optional<std::uint64_t> content_length,
                                 bool chunked, bool keep_alive);

/// The body of an answer of the proxy's own (error_response), with its Content-Type and
/// Cache-Control.
void set_error_body(http::response<http::string_body>& res, unsigned status, std::string_view type,
                    std::string_view message, std::string_view target);

/// An answer of the proxy's own: `status`, a JSON error body shaped like the errors of the
/// provider `target` speaks (net::error_body; the target redacted), the `extra` fields (each with
/// `name` and `value`: a hook's, e.g. Retry-After), then Content-Type and `Cache-Control:
/// no-store`, its length, and Connection as `keep_alive` says.
template <class Fields>
http::response<http::string_body> error_response(unsigned status, unsigned version,
                                                 std::string_view type, std::string_view message,
                                                 std::string_view target, const Fields& extra,
                                                 bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(status), version};
  for (const auto& f : extra) res.set(f.name, f.value);
  set_error_body(res, status, type, message, target);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

/// Whether a connection stays open after an answer of the proxy's own with `status`: not after a
/// server error, nor after a request it could not read whole (400, 413, 431: where the next
/// request starts is unknown).
constexpr bool keeps_connection_after(unsigned status) noexcept {
  return status < 500 && status != 400 && status != 413 && status != 431;
}

/// Calls f(name, value) for each field of a head built by the functions above: the lines after
/// the start line, each `name: value` CRLF, up to the blank line.
template <class F>
void for_each_head_field(std::string_view head, F&& f) {
  auto eol = head.find("\r\n");
  while (eol != std::string_view::npos) {
    head.remove_prefix(eol + 2);
    eol = head.find("\r\n");
    if (eol == 0 || eol == std::string_view::npos) return;  // the blank line (or a cut head)
    const auto line = head.substr(0, eol);
    if (const auto colon = line.find(": "); colon != std::string_view::npos)
      f(line.substr(0, colon), line.substr(colon + 2));
  }
}

}  // namespace tokentap::proxy
