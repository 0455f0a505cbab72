#include "proxy/request_plan.hpp"

#include <algorithm>
#include <iterator>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include "base/clock.hpp"
#include "base/log.hpp"
#include "hooks/govern/tenants.hpp"
#include "net/http_rules.hpp"
#include "proxy/http_util.hpp"
#include "proxy/proxy_server.hpp"

namespace tokentap::proxy {

namespace {

// Whether `ec` says the peer went away (closed, reset, or our own cancel).
bool is_disconnect(const error_code& ec) noexcept {
  return ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::operation_aborted ||
         ec == asio::error::not_connected || ec == asio::error::bad_descriptor ||
         ec == http::error::end_of_stream;
}

hooks::header_view redacted(std::string_view name, std::string_view value) noexcept {
  return {name, net::is_secret_header(name) ? std::string_view("[redacted]") : value};
}

// What the request phase decided, applied to the request before its upstream head is built.
void apply(hooks::request_decision& d, client_request& req, exchange& ex) {
  for (const auto& f : d.upstream_headers) req.set(f.name, f.value);
  if (d.body) req.body() = std::move(*d.body);
  ex.route_key = std::move(d.route_key);
  if (d.upstream.empty()) return;
  const auto& ups = ex.gen->cfg.upstreams;
  const auto it = std::find_if(ups.begin(), ups.end(), [&](const config::upstream_config& u) {
    return u.name == d.upstream;
  });
  if (it != ups.end())
    ex.upstream_index = static_cast<std::size_t>(it - ups.begin());
  else
    TT_LOG(warn) << "a hook named unknown upstream '" << log_safe(d.upstream, 64) << "'; route "
                 << ex.route->name << " uses its own";
}

// The exchange's fault, and the request without its fault headers.
fault_plan::verdict choose_fault(client_request& req, exchange& ex) {
  const auto& plan = *ex.gen->faults;
  auto v = plan.choose(ex.route->name, [&req](std::string_view name) -> std::string_view {
    const auto it = req.find(name);
    return it == req.end() ? std::string_view() : std::string_view(it->value());
  });
  if (plan.reads_headers())
    for (auto it = req.begin(); it != req.end();) {
      const std::string_view name = it->name_string();
      if (name.size() >= fault_header_prefix.size() &&
          beast::iequals(name.substr(0, fault_header_prefix.size()), fault_header_prefix))
        it = req.erase(it);
      else
        ++it;
    }
  ex.fault = v.fault;
  return v;
}

}  // namespace

void begin(const client_request& req, exchange& ex, const config::timeouts_config& timeouts) {
  ex.start = clock::now();
  ex.wall_start_us = base::wall_now_us();
  ex.method = req.method_string();
  ex.head = req.method() == http::verb::head;
  ex.client_version = req.version();
  ex.client_keep_alive = req.keep_alive();
  ex.target_redacted = net::redact_target(req.target());
  if (timeouts.total.count() > 0) ex.deadline = ex.start + timeouts.total;
}

void inspect(const client_request& req, exchange& ex, parsers::request_inspector& inspector,
             const proxy_shared& shared) {
  // The key itself never leaves this function: prefixes are never shared across tenants.
  if (auto v = req[http::field::authorization]; !v.empty())
    ex.tenant = hooks::credential_hash(v, shared.credential_salt);
  else if (auto k = req["x-api-key"]; !k.empty())
    ex.tenant = hooks::credential_hash(k, shared.credential_salt);
  if (shared.tenants) {
    const auto& header = ex.gen->cfg.tenants.header;
    ex.tenant_name = shared.tenants->name_of(
        header.empty() ? std::string_view() : std::string_view(req[header]), ex.tenant);
  }
  const auto ct = req[http::field::content_type];
  if (req.body().empty() || ct.find("json") == std::string_view::npos) return;
  // Digests for the hooks (cache events) and for a balancer that routes by prefix.
  const bool by_prefix = ex.gen->clusters[ex.upstream_index]->routes_by_conversation();
  auto info = inspector.inspect(req.body(), {.digests = ex.gen->taps != nullptr || by_prefix});
  ex.model = info.model;
  // Ollama's native API streams unless the body says `stream: false`.
  const auto path = req.target().substr(0, req.target().find('?'));
  ex.stream_requested =
      info.stream || (!info.stream_given && (path == "/api/chat" || path == "/api/generate"));
  ex.prompt_chars = info.prompt_chars;
  ex.max_tokens = info.max_tokens;
  ex.conversation = std::move(info.digests);
}

hooks::request_view request_view_of(const exchange& ex, std::string_view body,
                                    std::span<const hooks::header_view> headers) {
  const auto& up = ex.gen->cfg.upstreams[ex.upstream_index];
  return {ex.method,      ex.target_redacted, ex.route->name,
          up.name,        ex.model,           ex.stream_requested,
          body,           to_ns(ex.start),    ex.wall_start_us,
          headers,        ex.conversation,    ex.tenant,
          ex.tenant_name, up.balance,         ex.prompt_chars,
          ex.max_tokens};
}

void tap_request(exchange& ex, const client_request& req) {
  if (!ex.tap) return;
  const auto headers = redacted_headers(req);
  ex.tap->on_request(request_view_of(ex, req.body(), headers));
}

void tap_request(exchange& ex) {
  if (!ex.tap) return;
  const auto headers = redacted_headers(ex.request_head);
  ex.tap->on_request(request_view_of(ex, ex.request_body, headers));
}

std::unique_ptr<hooks::request_decision> request_phase(client_request& req, exchange& ex) {
  hooks::request_decision d;
  {
    const auto headers = redacted_headers(req);
    ex.tap->decide(request_view_of(ex, req.body(), headers), d);
  }
  if (d.stop) return std::make_unique<hooks::request_decision>(std::move(d));
  apply(d, req, ex);
  return nullptr;
}

std::unique_ptr<hooks::request_decision> fault_refusal(client_request& req, exchange& ex) {
  auto v = choose_fault(req, ex);
  if (v.status == 0) return nullptr;
  return std::make_unique<hooks::request_decision>(
      refusal(v.status, "invalid_request_error", std::move(v.message)));
}

hooks::request_decision refusal(unsigned status, std::string type, std::string message) {
  hooks::request_decision d;
  d.stop = true;
  d.status = status;
  d.error_type = std::move(type);
  d.error_message = std::move(message);
  return d;
}

hooks::request_decision abort_reply(const exchange& ex) {
  const auto status = ex.fault.value;
  return refusal(status,
                 status == 429                    ? "rate_limit_error"
                 : status == 503 || status == 529 ? "overloaded_error"
                 : status >= 500                  ? "server_error"
                                                  : "invalid_request_error",
                 "fault '" + ex.fault.rule->name + "' injected: " + std::to_string(status));
}

bool choose_endpoint(exchange& ex) {
  ex.upstream_cluster = ex.gen->clusters[ex.upstream_index].get();
  const pick_context ctx{.route_key = ex.route_key, .conversation = ex.conversation, .tried = {}};
  ex.decision = ex.upstream_cluster->choose(ctx);
  if (ex.decision.chosen == nullptr && ex.upstream_cluster->fallback() != nullptr) {
    ex.upstream_cluster->count_decision(routing_reason::fallback);
    ex.upstream_cluster = ex.upstream_cluster->fallback();
    ex.decision = ex.upstream_cluster->choose(ctx);
    ex.decision.reason = routing_reason::fallback;
  } else if (ex.decision.chosen != nullptr) {
    ex.upstream_cluster->count_decision(ex.decision.reason);
  }
  ex.upstream_endpoint = ex.decision.chosen;
  if (ex.upstream_endpoint == nullptr) return false;
  ex.in_flight.reset(ex.upstream_endpoint);
  return true;
}

void plan_upstream_request(client_request req, exchange& ex, std::string_view peer,
                           hooks::metrics_registry* metrics) {
  // The body was read whole (bounded by max_request_body_bytes): sent with a Content-Length.
  std::optional<std::size_t> length;
  if (!req.body().empty() || req.method() == http::verb::post || req.method() == http::verb::put ||
      req.method() == http::verb::patch)
    length = req.body().size();
  ex.request_body = std::move(req.body());
  ex.tries.begin(ex, *ex.gen->clusters[ex.upstream_index], std::move(req.base()), length, peer,
                 ex.gen->cfg.identity_encoding, metrics);
}

void report_cache(exchange& ex) {
  const auto* u = ex.tap->usage();
  if (u == nullptr || !u->cache_fields || u->input_tokens < 0 || ex.upstream_endpoint == nullptr)
    return;
  ex.upstream_cluster->cache_report(*ex.upstream_endpoint, ex.decision, u->input_tokens,
                                    std::max<std::int64_t>(0, u->cached_input_tokens));
}

std::optional<hooks::request_decision> unreadable_reply(const error_code& ec,
                                                        const config::limits_config& limits) {
  if (ec == http::error::header_limit)
    return refusal(
        431, "request_header_too_large",
        "request head exceeds " + std::to_string(limits.max_request_header_bytes) + " bytes");
  if (ec == http::error::body_limit)
    return refusal(
        413, "request_body_too_large",
        "request body exceeds " + std::to_string(limits.max_request_body_bytes) + " bytes");
  if (ec == beast::error::timeout || is_disconnect(ec) || ec == http::error::partial_message)
    return std::nullopt;
  return refusal(400, "bad_request", "malformed request: " + ec.message());
}

void note_fault(exchange& ex) {
  ex.gen->faults->count(ex.fault);
  if (ex.tap) ex.tap->on_fault({ex.fault.rule->name, to_string(ex.fault.kind), ex.fault.value});
}

void tap_response_head(const http::response<http::buffer_body>& head, clock::time_point head_time,
                       exchange& ex) {
  if (!ex.tap) return;
  const auto headers = redacted_headers(head);
  ex.tap->on_response_head({ex.status, head[http::field::content_type],
                            head[http::field::content_encoding], to_ns(head_time), headers});
}

bool client_response_head(const http::response<http::buffer_body>& head,
                          std::optional<std::uint64_t> length, bool no_body, bool draining,
                          exchange& ex, std::string& out) {
  std::optional<std::uint64_t> framed_length;
  if (length && (!no_body || ex.head)) framed_length = *length;
  const bool chunked = !no_body && !length && ex.client_version >= 11;
  if (!no_body && !length && ex.client_version < 11) ex.client_keep_alive = false;
  if (draining) ex.client_keep_alive = false;
  append_client_response_head(out, head, ex.client_version, framed_length, chunked,
                              ex.client_keep_alive);
  return chunked;
}

void end_tap(exchange& ex) {
  if (!ex.tap) return;
  ex.tap->on_phase_marks(ex.marks);
  ex.tap->on_stream_end(ex.outcome, base::mono_now_ns());
}

void release_request(exchange& ex) {
  // (Assigning empty strings would keep the buffers.)
  std::string().swap(ex.request_head);
  std::string().swap(ex.request_body);
  std::vector<parsers::message_digest>().swap(ex.conversation);
  ex.tries.release_request();
}

std::vector<hooks::header_view> redacted_headers(const http::fields& fields) {
  std::vector<hooks::header_view> out;
  out.reserve(static_cast<std::size_t>(std::distance(fields.begin(), fields.end())));
  for (const auto& f : fields) out.push_back(redacted(f.name_string(), f.value()));
  return out;
}

std::vector<hooks::header_view> redacted_headers(std::string_view head) {
  std::vector<hooks::header_view> out;
  out.reserve(static_cast<std::size_t>(std::count(head.begin(), head.end(), '\n')));
  for_each_head_field(head, [&](std::string_view name, std::string_view value) {
    out.push_back(redacted(name, value));
  });
  return out;
}

std::string log_safe(std::string_view v, std::size_t cap) {
  std::string out;
  for (char c : v.substr(0, cap)) out.push_back((c > 0x20 && c < 0x7f && c != '"') ? c : '_');
  if (v.size() > cap) out += "...";
  return out;
}

}  // namespace tokentap::proxy
