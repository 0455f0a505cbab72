#include "proxy/admin.hpp"

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <openssl/crypto.h>

#include "net/http_rules.hpp"
#include "net/http_server.hpp"
#include "parsers/json_out.hpp"

namespace tokentap::admin {

namespace http = beast::http;

namespace {

bool same_secret(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) noexcept {
  return s.size() >= prefix.size() && beast::iequals(s.substr(0, prefix.size()), prefix);
}

}  // namespace

bool authorized(std::string_view authorization, std::string_view token) noexcept {
  if (token.empty()) return true;
  while (!authorization.empty() && authorization.front() == ' ') authorization.remove_prefix(1);
  if (starts_with_ci(authorization, "Bearer ")) {
    auto t = authorization.substr(7);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    return same_secret(t, token);
  }
  if (starts_with_ci(authorization, "Basic ")) {
    if (authorization.size() > 4096) return false;
    const auto userpass = json::base64_decode(authorization.substr(6));
    const auto colon = userpass.find(':');
    return colon != std::string::npos &&
           same_secret(std::string_view(userpass).substr(colon + 1), token);
  }
  return false;
}

namespace {

http::response<http::string_body> answer(const site& site, const net::http_request& req) {
  const std::string_view target = req.target();
  const auto path = target.substr(0, target.find('?'));
  const bool open = path == "/healthz" || path == "/readyz";  // probes carry no credentials
  if (!open && !authorized(req[http::field::authorization], site.bearer_token)) {
    http::response<http::string_body> res{http::status::unauthorized, req.version()};
    res.set(http::field::content_type, "application/json");
    res.set(http::field::cache_control, "no-store");
    res.insert(http::field::www_authenticate, "Basic realm=\"tokentap admin\"");
    res.insert(http::field::www_authenticate, "Bearer realm=\"tokentap admin\"");
    res.body() =
        net::error_body(401, "unauthorized", "this admin endpoint needs the admin bearer token");
    return res;
  }
  response r;
  if (auto it = site.handlers.find(path); it != site.handlers.end()) {
    r = it->second(req.method_string(), target);
  } else {
    r.status = 404;
    r.body = net::error_body(404, "not_found", "no admin endpoint at this path");
  }
  http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
  res.set(http::field::content_type, r.content_type);
  res.set(http::field::cache_control, "no-store");
  res.body() = std::move(r.body);
  return res;
}

}  // namespace

void start_admin_session(tcp_socket socket, net::worker& w, std::shared_ptr<const site> s) {
  static const net::http_server_limits limits{.header_limit = 8192,
                                              .body_limit = 64 * 1024,
                                              .idle_timeout = std::chrono::seconds(30),
                                              .reply_timeout = std::chrono::seconds(30),
                                              .role = net::listener_role::control};
  net::serve_http(std::move(socket), w, limits,
                  [s = std::move(s)](net::http_connection<tcp_stream>& c, net::http_request& req)
                      -> awaitable<bool> { return c.reply(req, answer(*s, req)); });
}

}  // namespace tokentap::admin
