#include "proxy/admin.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <openssl/crypto.h>

#include "base/json.hpp"
#include "net/http_rules.hpp"
#include "net/http_server.hpp"

namespace tokentap::proxy::admin {

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
    const auto userpass = base::json::base64_decode(authorization.substr(6));
    const auto colon = userpass.find(':');
    return colon != std::string::npos &&
           same_secret(std::string_view(userpass).substr(colon + 1), token);
  }
  return false;
}

namespace {

http::response<http::string_body> to_http(response r, unsigned version) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::content_type, r.content_type);
  res.set(http::field::cache_control, "no-store");
  res.body() = std::move(r.body);
  return res;
}

http::response<http::string_body> unauthorized(unsigned version) {
  http::response<http::string_body> res{http::status::unauthorized, version};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::cache_control, "no-store");
  res.insert(http::field::www_authenticate, "Basic realm=\"tokentap admin\"");
  res.insert(http::field::www_authenticate, "Bearer realm=\"tokentap admin\"");
  res.body() =
      net::error_body(401, "unauthorized", "this admin endpoint needs the admin bearer token");
  return res;
}

std::string_view path_of(const net::http_request& req) {
  const std::string_view target = req.target();
  return target.substr(0, target.find('?'));
}

http::response<http::string_body> answer(const site& site, const net::http_request& req) {
  const auto path = path_of(req);
  const bool open = path == "/healthz" || path == "/readyz";  // probes carry no credentials
  if (!open && !authorized(req[http::field::authorization], site.bearer_token))
    return unauthorized(req.version());
  response r;
  if (auto it = site.handlers.find(path); it != site.handlers.end()) {
    r = it->second(req.method_string(), req.target());
  } else {
    r.status = 404;
    r.body = net::error_body(404, "not_found", "no admin endpoint at this path");
  }
  return to_http(std::move(r), req.version());
}

asio::awaitable<response, asio::thread_pool::executor_type> run_slow(const handler& h,
                                                                     std::string method,
                                                                     std::string target) {
  co_return h(method, target);
}

// A slow handler's answer, computed on the site's slow pool; this coroutine resumes on its I/O
// thread once it is ready.
awaitable<http::response<http::string_body>> answer_slow(const site& site, const handler& h,
                                                         const net::http_request& req) {
  if (site.bearer_token.empty())
    co_return to_http({403, "application/json",
                       net::error_body(403, "forbidden",
                                       "this admin endpoint is enabled only with an admin token "
                                       "(--admin-token-file or TOKENTAP_ADMIN_TOKEN)")},
                      req.version());
  if (!authorized(req[http::field::authorization], site.bearer_token))
    co_return unauthorized(req.version());
  auto r = co_await asio::co_spawn(
      site.slow_pool->get_executor(),
      run_slow(h, std::string(req.method_string()), std::string(req.target())),
      asio::use_awaitable_t<io_executor>{});
  co_return to_http(std::move(r), req.version());
}

}  // namespace

void start_admin_session(tcp_socket socket, net::worker& w, std::shared_ptr<const site> s) {
  static const net::http_server_limits limits{.header_limit = 8192,
                                              .body_limit = 64 * 1024,
                                              .idle_timeout = std::chrono::seconds(30),
                                              .reply_timeout = std::chrono::seconds(30),
                                              .role = net::listener_role::control};
  net::serve_http(std::move(socket), w, limits,
                  [s = std::move(s)](net::http_connection<tcp_stream>& c,
                                     net::http_request& req) -> awaitable<bool> {
                    const auto slow = s->slow_handlers.find(path_of(req));
                    if (slow != s->slow_handlers.end() && s->slow_pool != nullptr)
                      co_return co_await c.reply(req, co_await answer_slow(*s, slow->second, req));
                    co_return co_await c.reply(req, answer(*s, req));
                  });
}

}  // namespace tokentap::proxy::admin
