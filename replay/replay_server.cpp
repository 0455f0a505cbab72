#include "replay/replay_server.hpp"

#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>

#include "config/log.hpp"
#include "proxy/http_util.hpp"

namespace tokentap::replay {

namespace http = beast::http;

std::uint64_t request_hash(std::string_view method, std::string_view path, std::string_view body) {
  std::uint64_t h = 14695981039346656037ull;
  auto add = [&](std::string_view s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;  // field separator
  };
  add(method);
  add(path);
  add(body);
  return h;
}

namespace {

std::string hex(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

class replay_session final : public session_base,
                             public std::enable_shared_from_this<replay_session> {
 public:
  replay_session(tcp_socket s, worker& w, replay_server& srv, double speed)
      : session_base(w), stream_(std::move(s)), server_(srv), speed_(speed) {}

  static awaitable<void> run(std::shared_ptr<replay_session> self) {
    error_code ec;
    beast::flat_buffer buf;
    while (!self->draining_) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(64u << 20);
      self->idle_ = true;
      self->stream_.expires_after(std::chrono::seconds(120));
      co_await http::async_read(self->stream_, buf, parser, use_ec(ec));
      self->idle_ = false;
      if (ec) break;
      self->stream_.expires_never();
      auto req = parser.release();
      const bool keep = co_await self->answer(req);
      if (!keep || !req.keep_alive()) break;
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
  awaitable<bool> answer(http::request<http::string_body>& req) {
    const auto start = clock::now();
    std::uint64_t hash = 0;
    const record* r = server_.match(req.method_string(), req.target(), req.body(), hash);
    error_code ec;
    if (!r) {
      http::response<http::string_body> res{http::status::not_found, req.version()};
      res.set(http::field::content_type, "application/json");
      res.body() = proxy::error_body(404, "no_recorded_response",
                                     "no recorded request matches hash " + hex(hash) + " (" +
                                         std::string(req.method_string()) + " " +
                                         proxy::redact_target(req.target()) + ")");
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      co_await http::async_write(stream_, res, use_ec(ec));
      co_return !ec;
    }
    auto at = [&](double ms) {
      return start + std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000.0 / speed_));
    };
    steady_timer timer(stream_.get_executor());
    // The head when the upstream sent it, then each read at its recorded offset.
    timer.expires_at(at(std::max(0.0, r->upstream_headers_ms)));
    co_await timer.async_wait(use_ec(ec));
    http::response<http::empty_body> res{static_cast<http::status>(r->status), req.version()};
    for (const auto& [name, value] : r->response_headers) {
      if (proxy::is_hop_by_hop(name) || beast::iequals(name, "content-length")) continue;
      res.insert(name, value);
    }
    res.chunked(true);
    res.keep_alive(req.keep_alive());
    http::response_serializer<http::empty_body> sr{res};
    co_await http::async_write_header(stream_, sr, use_ec(ec));
    if (ec) co_return false;
    for (const auto& e : r->events) {
      timer.expires_at(at(static_cast<double>(e.t_us) / 1000.0));
      co_await timer.async_wait(use_ec(ec));
      if (e.bytes.empty()) continue;
      co_await net::async_write(stream_, http::make_chunk(net::buffer(e.bytes)), use_ec(ec));
      if (ec) co_return false;
    }
    co_await net::async_write(stream_, http::make_chunk_last(), use_ec(ec));
    co_return !ec;
  }

  tcp_stream stream_;
  replay_server& server_;
  double speed_;
  bool idle_ = true, draining_ = false;
};

}  // namespace

replay_server::replay_server(std::vector<record> records, serve_options opts)
    : records_(std::move(records)), opts_(opts), runtime_(opts.threads) {
  for (std::size_t i = 0; i < records_.size(); ++i) {
    const auto& r = records_[i];
    by_hash_[request_hash(r.method, r.path, r.body.value_or(""))].push_back(i);
    // Records without a body (trace.bodies: false) match on method and path alone.
    if (!r.body) by_hash_[request_hash(r.method, r.path, "\x01nobody")].push_back(i);
  }
}

replay_server::~replay_server() {
  shutdown(std::chrono::milliseconds(0));
  join();
}

const record* replay_server::match(std::string_view method, std::string_view target,
                                   std::string_view body, std::uint64_t& hash) {
  std::lock_guard lk(mu_);
  if (records_.empty()) return nullptr;
  if (opts_.match == match_mode::sequence) {
    hash = 0;
    served_++;
    return &records_[sequence_++ % records_.size()];
  }
  const auto path = proxy::redact_target(target);
  hash = request_hash(method, path, body);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) it = by_hash_.find(request_hash(method, path, "\x01nobody"));
  if (it == by_hash_.end()) return nullptr;
  // Identical requests get the recorded responses in their recorded order, then cycle.
  auto& next = next_[it->first];
  const auto idx = it->second[next++ % it->second.size()];
  served_++;
  return &records_[idx];
}

void replay_server::start() {
  endpoint_ = runtime_.listen(opts_.host, opts_.port, [this](tcp_socket s, worker& w) {
    error_code ignored;
    s.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<replay_session>(std::move(s), w, *this, opts_.speed);
    net::co_spawn(w.ioc, replay_session::run(std::move(session)),
                  [](std::exception_ptr e) { log_escaped_exception(e, "replay session"); });
  });
  runtime_.start();
}

void replay_server::shutdown(std::chrono::milliseconds grace) {
  runtime_.shutdown(grace);
}
void replay_server::join() {
  runtime_.join();
}

}  // namespace tokentap::replay
