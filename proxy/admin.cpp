#include "proxy/admin.hpp"

#include <boost/beast/http.hpp>

#include <openssl/crypto.h>

#include "config/log.hpp"
#include "parsers/json_out.hpp"
#include "proxy/http_util.hpp"

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

class admin_session final : public session_base,
                            public std::enable_shared_from_this<admin_session> {
 public:
  admin_session(tcp_socket s, worker& w, std::shared_ptr<const site> site)
      : session_base(w, listener_role::control), stream_(std::move(s)), site_(std::move(site)) {}

  static awaitable<void> run(std::shared_ptr<admin_session> self) {
    error_code ec;
    beast::flat_buffer buf;
    while (!self->draining_) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(8192);
      parser.body_limit(64 * 1024);
      self->idle_ = true;
      self->stream_.expires_after(std::chrono::seconds(30));
      co_await http::async_read(self->stream_, buf, parser, use_ec(ec));
      self->idle_ = false;
      if (ec) break;
      auto req = parser.release();
      auto res = self->answer(req);
      res.keep_alive(req.keep_alive() && !self->draining_);
      co_await http::async_write(self->stream_, res, use_ec(ec));
      if (ec || !res.keep_alive()) break;
    }
    error_code ignored;
    self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    self->stream_.close();
  }

  void drain() noexcept override {
    draining_ = true;
    if (idle_) stream_.close();
  }
  void force_close() noexcept override { stream_.close(); }

 private:
  http::response<http::string_body> answer(const http::request<http::string_body>& req) {
    const std::string_view target = req.target();
    const auto path = target.substr(0, target.find('?'));
    response r;
    const bool open = path == "/healthz" || path == "/readyz";  // probes carry no credentials
    if (!open && !authorized(req[http::field::authorization], site_->bearer_token)) {
      http::response<http::string_body> res{http::status::unauthorized, req.version()};
      res.set(http::field::content_type, "application/json");
      res.set(http::field::cache_control, "no-store");
      res.insert(http::field::www_authenticate, "Basic realm=\"tokentap admin\"");
      res.insert(http::field::www_authenticate, "Bearer realm=\"tokentap admin\"");
      res.body() = proxy::error_body(401, "unauthorized",
                                     "this admin endpoint needs the admin bearer token");
      res.prepare_payload();
      return res;
    }
    if (auto it = site_->handlers.find(path); it != site_->handlers.end()) {
      r = it->second(req.method_string(), target);
    } else {
      r.status = 404;
      r.body = proxy::error_body(404, "not_found", "no admin endpoint at this path");
    }
    http::response<http::string_body> res{static_cast<http::status>(r.status), req.version()};
    res.set(http::field::content_type, r.content_type);
    res.set(http::field::cache_control, "no-store");
    res.body() = std::move(r.body);
    res.prepare_payload();
    return res;
  }

  tcp_stream stream_;
  std::shared_ptr<const site> site_;
  bool idle_ = true;
  bool draining_ = false;
};

}  // namespace

void start_admin_session(tcp_socket socket, worker& w, std::shared_ptr<const site> site) {
  auto s = std::make_shared<admin_session>(std::move(socket), w, std::move(site));
  net::co_spawn(w.ioc, admin_session::run(std::move(s)),
                [](std::exception_ptr e) { log_escaped_exception(e, "admin session"); });
}

}  // namespace tokentap::admin
