#pragma once
// The seam where stream interception attaches to the relay loop.
//
// Two phases.  Before anything is forwarded the proxy asks the tap to decide on the request
// (`decide`): go on, or answer locally; add upstream headers, rewrite the body, hand the router a
// key.  After that the proxy forwards every upstream read to the client first and only then hands
// the same bytes, with when they arrived, were read and were written (monotonic), to the tap: it
// observes, and can never alter, delay or stop the forwarded stream.  Every method is noexcept: a
// tap that fails must contain its failure (the hook chain, hooks/hook_chain.hpp, is the tap the
// proxy runs).
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/hot_lines.hpp"
#include "parsers/request_inspector.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::hooks {

/// Nanoseconds on a monotonic clock (std::chrono::steady_clock).
using mono_ns = std::int64_t;

/// How an exchange ended.  Names match the trace record's `outcome` field (DESIGN.md §5).
enum class stream_outcome {
  ok,                 ///< the whole response reached the client
  client_disconnect,  ///< the client went away before the response ended
  upstream_error,     ///< the upstream could not be reached or answered with garbage
  upstream_reset,     ///< the upstream connection broke mid-response
  timeout,            ///< a configured timeout fired
  stream_error,       ///< the upstream reported an error inside the stream
  rejected,           ///< the request phase answered locally: nothing was forwarded
};

std::string_view to_string(stream_outcome o) noexcept;

/// Whether an exchange that ended with `status` and `o` failed on the upstream's side: a 5xx or
/// 429 answer, a connection that could not be made or broke, a timeout, an error inside the
/// stream.  What the tenants' and the endpoints' error rates count.  (The canary splits these
/// further: a stream cut after a 2xx head is its `truncated`, not an error.)
bool upstream_failed(unsigned status, stream_outcome o) noexcept;

/// One header; secret values (Authorization, x-api-key, cookies, ...) are already `[redacted]`.
struct header_view {
  std::string_view name;
  std::string_view value;
};

/// The value of the header `name` (given in lower case), matched whatever the header's case;
/// empty when absent.
std::string_view find_header(std::span<const header_view> headers, std::string_view name) noexcept;

/// The request as forwarded.  Views are valid only during the call.
struct request_view {
  std::string_view method;
  std::string_view target;  ///< path and query, secrets already redacted
  std::string_view route;
  std::string_view upstream;
  std::string_view model;
  bool stream = false;
  std::string_view body;
  mono_ns start_ns = 0;            ///< when the request head was read
  std::int64_t wall_start_us = 0;  ///< the same instant on the wall clock (µs since the epoch)
  std::span<const header_view> headers;
  /// The conversation's canonical digests (parsers::request_inspector), in order.
  std::span<const parsers::message_digest> conversation;
  /// Salted hash of the credential (Authorization / x-api-key); 0 = none.  Never the key.
  std::uint64_t tenant = 0;
  /// The tenant's name (DESIGN.md §11) when tenants are configured, else empty.
  std::string_view tenant_name;
  /// How the upstream's endpoint was chosen: its balancing policy (DESIGN.md §10).
  std::string_view balance;
  /// Text bytes of the prompt (system, messages, prompt, input), and the request's output budget
  /// (`max_tokens` / `max_completion_tokens`) when it sets one: what a token budget reserves.
  std::size_t prompt_chars = 0;
  std::optional<std::int64_t> max_tokens;
};

/// One attempt of an exchange on an endpoint of its upstream (DESIGN.md §10).
struct upstream_attempt {
  std::string_view upstream;  ///< the endpoint's upstream (the route's, or its fallback)
  std::string_view endpoint;  ///< host:port
  /// Empty: its response head was the one forwarded (or answered).  Else why it failed before
  /// any byte reached the client: connect, tls, timeout, reset, status_429, status_502,
  /// status_503.
  std::string_view error;
  /// Why the balancer chose the endpoint: its routing reason's name (DESIGN.md §10, the proxy's
  /// `routing_reason`); and for prefix_match, how many conversation elements matched.
  std::string_view reason;
  std::uint32_t matched_messages = 0;
};

/// The upstream response head.  Views are valid only during the call.
struct response_view {
  unsigned status = 0;
  std::string_view content_type;
  std::string_view content_encoding;  ///< non-empty: the body is compressed and passed through
  mono_ns t_ns = 0;                   ///< when the head was read from the upstream
  std::span<const header_view> headers;
};

/// When one forwarded upstream read happened, on the monotonic clock.
struct body_times {
  /// When its bytes reached the proxy: the kernel's receive time of the read's last bytes
  /// (segments that waited in the socket together carry the latest one's) where the upstream
  /// connection has receive stamps (plain TCP), else `read`.  Tokens are timed by it, so TTFT
  /// and inter-token gaps do not include the proxy's own scheduling delay (its wake-up, other
  /// streams' events handled first).  arrived <= read; never earlier than the read before's.
  mono_ns arrived = 0;
  mono_ns read = 0;     ///< the proxy's read of them completed
  mono_ns written = 0;  ///< the kernel took them for the client (written >= read)
};

/// When the proxy passed the boundaries between an exchange's phases (DESIGN.md §13), on the
/// monotonic clock; -1 = not reached.  With the request's start, the response head's time, the
/// first token's arrival and the end, they cut the exchange into its phases: our own work, an
/// injected fault, failed attempts, connecting, waiting for the head, the first token, decoding.
struct phase_marks {
  mono_ns routed = -1;      ///< our own work done (inspection, hooks, routing): forwarding begins
  mono_ns fault_done = -1;  ///< a delay injected before forwarding ended (routed without one)
  mono_ns attempt = -1;  ///< the last attempt on an endpoint began (taking or opening a connection)
  mono_ns connected = -1;  ///< its connection was ready (= attempt for a pooled one)
};

/// A fault injected on purpose into an exchange (DESIGN.md §13): the rule, its kind (delay,
/// event_delay, cut, abort) and value (ms, events or an HTTP status).  Empty rule: none.
struct injected_fault {
  std::string rule;
  std::string_view kind;  ///< a static name
  std::uint32_t value = 0;
};

/// What the request phase decided for one exchange (stream_tap::decide); the proxy applies it
/// before anything is sent upstream.
struct request_decision {
  struct field {
    std::string name, value;
  };
  /// Answer locally with `status` and a provider-shaped error (`error_type`, `error_message`)
  /// plus `reply_headers`; nothing is forwarded.
  bool stop = false;
  unsigned status = 0;
  std::string error_type, error_message;
  std::vector<field> reply_headers;
  /// Added to the upstream request, replacing a field of the same name.
  std::vector<field> upstream_headers;
  /// The request body to forward instead of the client's.
  std::optional<std::string> body;
  /// For the router: requests with the same key prefer the same endpoint.
  std::string route_key;
  /// For the router: the upstream to use instead of the route's (empty: the route's).
  std::string upstream;
};

/// Per-exchange observer.  Called on the exchange's I/O thread, never concurrently.
class stream_tap {
 public:
  virtual ~stream_tap() = default;
  /// The request phase: called once, before on_request, with the client's request (headers
  /// redacted, body as received).
  virtual void decide(const request_view&, request_decision&) noexcept {}
  /// The request as forwarded (after the request phase), or as answered locally.
  virtual void on_request(const request_view&) noexcept {}
  virtual void on_response_head(const response_view&) noexcept {}
  /// One forwarded upstream read, after its bytes were written to the client.  The span is
  /// valid only during the call.
  virtual void on_body(std::span<const char> bytes, const body_times& t) noexcept {}
  /// The proxy could not get a response from the upstream and answered `status` itself;
  /// `reason` is connect, tls, timeout or reset.  Called before on_stream_end.
  virtual void on_upstream_error(std::string_view reason, unsigned status) noexcept {}
  /// Each attempt on an endpoint, in order, once its outcome is known (a stale kept-alive
  /// connection retried on a new one is not an attempt of its own).
  virtual void on_upstream_attempt(const upstream_attempt&) noexcept {}
  /// The proxy answered the request itself with `status` (not a hook's request phase: a fault,
  /// a malformed fault header).  Called before on_stream_end.
  virtual void on_local_reply(unsigned status) noexcept {}
  /// A fault was injected into the exchange (at most once, before on_stream_end).
  virtual void on_fault(const injected_fault&) noexcept {}
  /// Where the exchange's phases began (phase_marks); called once, before on_stream_end.
  virtual void on_phase_marks(const phase_marks&) noexcept {}
  virtual void on_stream_end(stream_outcome, mono_ns end_ns) noexcept {}
  /// After on_stream_end: how the tap judged the exchange's end — the outcome it was given, or
  /// stream_error for a 2xx stream in which the provider reported an error.
  virtual stream_outcome judged_outcome(stream_outcome given) const noexcept { return given; }
  /// After on_stream_end: the provider's usage as the tap read it (normalized, DESIGN.md §6);
  /// nullptr when it reads none.
  virtual const parsers::usage_counts* usage() const noexcept { return nullptr; }
  /// Adds where the state lies that the next on_body touches first (parsers::hot_lines): the
  /// relay asks after each on_body, while that state is in the cache, and prefetches it when
  /// the next read is ready.
  virtual void add_hot_lines(parsers::hot_lines&) const noexcept {}
};

/// Makes one tap per exchange; shared by all I/O threads, so `create` must be thread safe.
/// Returning nullptr means "no tap for this exchange" and costs nothing on the relay loop.
class tap_factory {
 public:
  virtual ~tap_factory() = default;
  virtual std::unique_ptr<stream_tap> create() = 0;
};

}  // namespace tokentap::hooks
