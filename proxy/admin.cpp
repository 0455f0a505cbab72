#include "proxy/admin.hpp"

#include <boost/beast/http.hpp>

#include "config/log.hpp"
#include "proxy/http_util.hpp"

namespace tokentap::admin {

namespace http = beast::http;

namespace {

class admin_session final : public session_base,
                            public std::enable_shared_from_this<admin_session> {
 public:
  admin_session(tcp::socket s, worker& w, std::shared_ptr<const handler_table> h)
      : session_base(w, listener_role::control), stream_(std::move(s)), handlers_(std::move(h)) {}

  static net::awaitable<void> run(std::shared_ptr<admin_session> self) {
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
    if (auto it = handlers_->find(path); it != handlers_->end()) {
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

  beast::tcp_stream stream_;
  std::shared_ptr<const handler_table> handlers_;
  bool idle_ = true;
  bool draining_ = false;
};

}  // namespace

void start_admin_session(tcp::socket socket, worker& w,
                         std::shared_ptr<const handler_table> handlers) {
  auto s = std::make_shared<admin_session>(std::move(socket), w, std::move(handlers));
  net::co_spawn(w.ioc, admin_session::run(std::move(s)),
                [](std::exception_ptr e) { log_escaped_exception(e, "admin session"); });
}

}  // namespace tokentap::admin
