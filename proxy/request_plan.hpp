#pragma once
// What the proxy settles about an exchange without I/O: what the request is (its tenant, model,
// whether it streams, its prompt's size and conversation), what the hooks' request phase
// decided, the fault it gets, the endpoint the router picks, the answer to a request it could
// not read, and what the taps see from request to end (secrets redacted).  The session takes
// these steps in order (serve_one in proxy_session.cpp); test/proxy/request_plan_test.cpp takes
// them on their own.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "hooks/tap.hpp"
#include "parsers/request_inspector.hpp"
#include "proxy/exchange.hpp"

namespace tokentap::proxy {

struct proxy_shared;
using client_request = http::request<http::string_body>;

/// The exchange starts: when, the request's method, target (redacted), HTTP version and
/// keep-alive, its deadline under `timeouts`.
void begin(const client_request& req, exchange& ex, const config::timeouts_config& timeouts);

/// The request as the exchange keeps it: its tenant (a salted hash of its credential, named
/// when tenants are configured), and for a JSON body its model, whether it streams, its
/// prompt's size, its output budget and its conversation's digests.
void inspect(const client_request& req, exchange& ex, parsers::request_inspector& inspector,
             const proxy_shared& shared);

/// The request as the hooks see it.
hooks::request_view request_view_of(const exchange& ex, std::string_view body,
                                    std::span<const hooks::header_view> headers);

/// Tells the exchange's tap (when it has one) the request: the client's as it came, or, without
/// `req`, the request as it goes upstream (its head for the endpoint, its body).
void tap_request(exchange& ex, const client_request& req);
void tap_request(exchange& ex);

/// The hooks' request phase (the exchange's tap decides): what they decided is applied to the
/// request (headers, body, route key, another upstream), unless one stopped it — then the
/// decision that answers it.
std::unique_ptr<hooks::request_decision> request_phase(client_request& req, exchange& ex);

/// The exchange's fault (`faults:`; the request's fault headers are taken out of it, they are
/// ours); the refusal that answers the request when a per-request fault header asked for
/// something the proxy refuses.
std::unique_ptr<hooks::request_decision> fault_refusal(client_request& req, exchange& ex);

/// A decision that answers the request here: `status`, an error of `type` saying `message`.
hooks::request_decision refusal(unsigned status, std::string type, std::string message);

/// The answer an abort fault gives: its status, as its provider answers it.
hooks::request_decision abort_reply(const exchange& ex);

/// The router: the exchange's upstream cluster (its fallback when none of its endpoints can take
/// the request), and the endpoint its balancer picks, counted as in flight.  False: none can.
bool choose_endpoint(exchange& ex);

/// Takes the client's request for the upstream: its body, and its head (kept until the response
/// head is in, for an attempt on another endpoint) written for the chosen endpoint, forwarded
/// for `peer`.
void plan_upstream_request(client_request req, exchange& ex, std::string_view peer,
                           hooks::metrics_registry* metrics);

/// What the endpoint that answered reported of its prompt cache, for its balancer's evidence and
/// its hit ratio.
void report_cache(exchange& ex);

/// The answer to a request that could not be read as `ec` says (431, 413 or 400 under `limits`);
/// none when there is nobody to answer or the client was too slow: the connection just closes.
std::optional<hooks::request_decision> unreadable_reply(const error_code& ec,
                                                        const config::limits_config& limits);

/// The exchange's fault took effect: counted, and told to the tap (the trace record's `fault`).
void note_fault(exchange& ex);

/// Tells the tap the response head that came at `head_time`.
void tap_response_head(const http::response<http::buffer_body>& head, clock::time_point head_time,
                       exchange& ex);

/// The client's response head for the upstream's `head` (its status and end-to-end fields, our
/// framing): a body goes with its length, else chunked (HTTP/1.1) or until the close (HTTP/1.0,
/// which then ends keep-alive); a HEAD answer says what the length would be; `draining` ends
/// keep-alive.  Returns whether the body is to be sent chunked.
bool client_response_head(const http::response<http::buffer_body>& head,
                          std::optional<std::uint64_t> length, bool no_body, bool draining,
                          exchange& ex, std::string& out);

/// The exchange ended: the tap learns where its phases began, then that it ended.
void end_tap(exchange& ex);

/// The request is not needed past the response head (no retry after it), and a stream may stay
/// open for minutes: its memory goes now.
void release_request(exchange& ex);

/// Fields as the taps see them: a secret's value replaced (it never reaches a hook).
std::vector<hooks::header_view> redacted_headers(const http::fields& fields);
/// The same for a head written out (the upstream request's).
std::vector<hooks::header_view> redacted_headers(std::string_view head);

/// Steady-clock time in ns, as the hooks take it.
inline std::int64_t to_ns(clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

/// Printable, bounded copy of a client-supplied value for a log line or a message.
std::string log_safe(std::string_view v, std::size_t cap = 128);

}  // namespace tokentap::proxy
