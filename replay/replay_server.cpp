#include "replay/replay_server.hpp"

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>

#include "net/http_rules.hpp"
#include "net/http_server.hpp"

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

recorded_end end_of(const record& r) noexcept {
  const bool upstream_answered = r.upstream_headers_ms >= 0;
  if (r.outcome == "upstream_reset")
    return upstream_answered ? recorded_end::reset : recorded_end::no_answer;
  if (r.outcome == "timeout") return recorded_end::stall;
  if (r.outcome == "upstream_error" && !upstream_answered) return recorded_end::no_answer;
  if (r.outcome == "client_disconnect") return recorded_end::cut;
  return recorded_end::complete;
}

namespace {

std::string hex(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// One recorded response, at its recorded pace (scaled by `speed`).
awaitable<bool> answer(net::http_connection<tcp_stream>& c, net::http_request& req,
                       replay_server& server, double speed) {
  const auto start = clock::now();
  std::uint64_t hash = 0;
  const record* r = server.match(req.method_string(), req.target(), req.body(), hash);
  if (!r) {
    co_return co_await c.reply(req, 404,
                               net::error_body(404, "no_recorded_response",
                                               "no recorded request matches hash " + hex(hash) +
                                                   " (" + std::string(req.method_string()) + " " +
                                                   net::redact_target(req.target()) + ")"));
  }
  auto at = [&](double ms) {
    return start + std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000.0 / speed));
  };
  steady_timer timer(c.stream().get_executor());
  c.waiting_on(&timer);
  struct unregister {
    net::http_connection<tcp_stream>& c;
    ~unregister() { c.waiting_on(nullptr); }
  } guard{c};
  error_code ec;
  const auto end = end_of(*r);
  // A stall lasts until the recorded exchange ended (the client's or the proxy's timeout then).
  auto stall = [&]() -> awaitable<void> {
    const double last =
        r->events.empty() ? 0.0 : static_cast<double>(r->events.back().t_us) / 1000.0;
    timer.expires_at(at(std::max(r->e2e_ms, last)));
    co_await timer.async_wait(use_ec(ec));
  };
  if (end == recorded_end::no_answer ||
      (end == recorded_end::stall && r->upstream_headers_ms < 0)) {
    if (end == recorded_end::stall) co_await stall();
    if (r->outcome == "upstream_reset") c.reset();
    co_return false;  // the connection closes with no response, as the upstream's did
  }
  // The head when the upstream sent it, then each read at its recorded offset.
  timer.expires_at(at(std::max(0.0, r->upstream_headers_ms)));
  co_await timer.async_wait(use_ec(ec));
  if (c.closed()) co_return false;
  http::response<http::empty_body> res{static_cast<http::status>(r->status), req.version()};
  for (const auto& [name, value] : r->response_headers) {
    if (net::is_hop_by_hop(name) || beast::iequals(name, "content-length")) continue;
    res.insert(name, value);
  }
  if (!co_await c.write_chunked_head(req, res)) co_return false;
  for (const auto& e : r->events) {
    timer.expires_at(at(static_cast<double>(e.t_us) / 1000.0));
    co_await timer.async_wait(use_ec(ec));
    if (c.closed()) co_return false;
    if (e.bytes.empty()) continue;
    if (!co_await c.write_chunk(e.bytes)) co_return false;
  }
  switch (end) {
    case recorded_end::complete:
      break;
    case recorded_end::reset:
      c.reset();
      co_return false;
    case recorded_end::stall:
      co_await stall();
      co_return false;
    case recorded_end::cut:
    case recorded_end::no_answer:
      co_return false;  // closed without the terminal chunk
  }
  co_return co_await c.write_last_chunk() && res.keep_alive();
}

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
  const auto path = net::redact_target(target);
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
  endpoint_ = runtime_.listen(opts_.host, opts_.port, [this](tcp_socket s, net::worker& w) {
    error_code ignored;
    s.set_option(tcp::no_delay(true), ignored);
    net::serve_http(std::move(s), w, {},
                    [this](net::http_connection<tcp_stream>& c, net::http_request& req) {
                      return answer(c, req, *this, opts_.speed);
                    });
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
