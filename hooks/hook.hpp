#pragma once
// Hooks: per-stream extensions of an intercepted exchange, Envoy-filter style, in two phases.
//
//  - A `hook_factory` is built once from the (immutable) configuration and shared by every I/O
//    thread; it owns whatever is expensive (metric handles, the trace writer).
//  - For each exchange the chain asks every enabled factory, in dependency order, for a cheap
//    per-stream `hook`.  Every callback has a pass-through default, so a hook overrides only what
//    it needs (and says, through per_event(), whether it has on_body / on_token: the chain
//    calls only those at every event).
//  - Request phase (`on_request_phase`), before anything is forwarded: each hook in order
//    returns proceed or stop, and through `request_callbacks` may answer locally, add upstream
//    headers, rewrite the body (hooks that say so: rewrites_body) and hand the router a key.
//  - Stream phase, after forwarding started: hooks observe.  They run after the bytes were
//    forwarded and cannot alter or delay them.  At the end, the hooks that provide a piece of
//    the `stream_info` fill it (`fill`), then every hook reads it whole (`on_stream_end`).
//  - A hook that throws is disabled for the rest of that stream and counted; the other hooks and
//    the forwarding go on (in the request phase: as if it had said proceed).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "hooks/observe/attribution.hpp"
#include "hooks/tap.hpp"
#include "parsers/step_tagger.hpp"
#include "parsers/stream_decoder.hpp"

namespace tokentap::hooks {

/// A token-bearing delta, stamped with the monotonic time its bytes were read from the upstream.
struct token_event {
  parsers::channel channel;
  std::string_view text;  ///< valid only during the call (often a view into the read): copy it
  mono_ns t_ns;
  /// False for a non-streamed (whole JSON) body: its tokens all arrive with the last byte, so
  /// they carry no per-token timing (no TTFT, no ITL) — only counts.
  bool streamed = true;
  /// Which choice (`n > 1`; parsers::tracked_choices): 0 for every provider without choices.
  std::uint32_t choice = 0;
};

/// A timing sample of one event, measured once by the chain for every hook that asks for
/// samples (hook::sample_calls): the gap before a streamed token, by the token's channel, or the
/// time one forwarded read took to reach the client.  The chain collects them in a small array
/// per stream and hands them over in batches (when the array is full, at least once a second
/// while events come, and at the stream's end): the timing and metrics hooks used to be called,
/// each for the same gaps, at every event — two more pieces of cold per-stream state per event
/// with hundreds of streams.
class sample {
 public:
  enum kind_t : std::uint8_t { itl_content, itl_reasoning, itl_tool, overhead };  // itl_*: channel
  sample() = default;
  sample(kind_t k, std::int64_t ns) noexcept
      : bits_(static_cast<std::uint64_t>(ns < 0 ? 0 : ns) << 2 | k) {}
  static kind_t itl(parsers::channel c) noexcept {
    static_assert(static_cast<int>(parsers::channel::content) == itl_content &&
                  static_cast<int>(parsers::channel::reasoning) == itl_reasoning &&
                  static_cast<int>(parsers::channel::tool) == itl_tool);
    return static_cast<kind_t>(c);
  }
  kind_t kind() const noexcept { return static_cast<kind_t>(bits_ & 3); }
  std::int64_t ns() const noexcept { return static_cast<std::int64_t>(bits_ >> 2); }
  double ms() const noexcept { return static_cast<double>(ns()) / 1e6; }

 private:
  std::uint64_t bits_ = 0;  // nanoseconds (>= 0) << 2 | kind
};

/// Latency figures of one exchange (milliseconds; -1 = not applicable).  Filled by the timing hook.
struct timing_summary {
  double upstream_headers_ms = -1;  ///< request start -> upstream response head
  double ttft_ms = -1;              ///< request start -> first token of any channel
  double ttft_answer_ms = -1;       ///< request start -> first content token
  double e2e_ms = -1;               ///< request start -> end of the response
  double decode_ms = -1;            ///< first token -> last token
  double tpot_ms = -1;              ///< decode_ms / (output tokens - 1)
  double tokens_per_s = -1;         ///< output tokens over decode time
  struct quantiles {
    double p50 = -1, p95 = -1, p99 = -1, max = -1;
    std::uint64_t count = 0;
  };
  quantiles itl;  ///< gaps between consecutive token events, all channels
  quantiles itl_content, itl_reasoning;
  quantiles overhead;                 ///< per forwarded read: read done -> client write done (ms)
  std::uint64_t stalls = 0;           ///< gaps longer than the stall threshold
  std::vector<double> itl_values_ms;  ///< the first timing.exact_samples gaps, in order (traces)
};

/// What the chain learns of an exchange while it runs: the part of its stream_info that comes
/// before the end.  The chain keeps only this while the stream is open (an idle stream holds it
/// for as long as it lasts) and makes the whole stream_info when the stream ends.
struct stream_progress {
  std::string tenant;  ///< request_view::tenant_name
  unsigned status = 0;
  std::string error_type, error_message;  ///< a provider error reported inside the stream
  std::string finish_reason;              ///< the last one reported (of any choice)
  std::string upstream_error_reason;      ///< set when the proxy answered for a failed upstream
  /// The upstream the exchange went to: its name, balancing policy, and every attempt on one of
  /// its endpoints in order (the last one's endpoint is the one that answered, or failed last).
  struct upstream_summary {
    std::string name, policy;
    struct attempt {
      std::string upstream, endpoint;
      std::string error;   ///< empty: the attempt whose head was used
      std::string reason;  ///< why the balancer chose its endpoint (routing_reason's name)
      std::uint32_t matched_messages = 0;  ///< prefix_match: conversation elements matched
    };
    std::vector<attempt> attempts;
  } upstream;
  std::uint64_t parse_errors[3] = {0, 0, 0};  ///< by parsers::parse_stage
  mono_ns start_ns = 0, head_ns = 0;
  std::int64_t wall_start_us = 0;
  /// A fault injected on purpose (`faults:`): the ground truth an analysis must recover.
  injected_fault fault;
};

/// What is known of an exchange when it ends.  The chain owns it and fills what it measured
/// itself (status, outcome, provider, usage, token times, errors); hooks that provide a piece
/// (hook_contract::provides: "timing", "steps", "cache_events") fill theirs in hook::fill, in
/// dependency order; then every hook reads the whole of it in hook::on_stream_end.
struct stream_info : stream_progress {
  stream_outcome outcome = stream_outcome::ok;
  parsers::provider provider = parsers::provider::unknown;
  parsers::usage_counts usage;
  /// The response's id and model as the stream named them (stream_decoder::response_id); empty
  /// when it did not.
  std::string response_id, response_model;
  /// Choices that answered (highest `choices[].index` + 1 with a token or a finish reason); 0
  /// when none did.  With more than one, `by_choice` has a row per choice index seen below
  /// parsers::tracked_choices, in index order; gaps between tokens are measured per choice.
  std::uint32_t choices = 0;
  struct choice_summary {
    std::uint32_t index = 0;
    std::uint64_t token_events = 0;
    std::string finish_reason;
  };
  std::vector<choice_summary> by_choice;
  mono_ns end_ns = 0;
  // Token arrival, from the chain: first and last streamed token of any channel (-1: none),
  // first streamed content token, and every token event (streamed or not).
  mono_ns first_token_ns = -1, last_token_ns = -1, first_content_ns = -1;
  std::uint64_t token_events = 0;
  timing_summary timing;  ///< filled by the timing hook ("timing")
  /// Where the time went (DESIGN.md §13), from the chain: the proxy's phases and the engine's
  /// account.
  attribution attributed;
  // Filled by the steps hook ("steps").
  std::vector<parsers::step> steps;
  std::vector<mono_ns> step_end_ns;  ///< when each step ended (the next one's start)
  parsers::channel steps_channel = parsers::channel::reasoning;
  std::uint64_t redundant_tokens = 0;
  /// Filled by the cache hook ("cache_events"): event names and their evidence (a JSON object
  /// each).
  std::vector<std::pair<std::string, std::string>> cache_events;
  /// Also the cache hook's: hit, partial or miss judged against what the engine could have had
  /// cached (the previous turn's prompt); empty when the hook does not run or the provider
  /// reports no cache fields (then the class follows from usage alone: cache_class).
  std::string_view cache_outcome;
  /// Filled by the trace hook ("trace_record"): the `id` of the exchange's trace record; empty
  /// when no record is written (no trace hook, or the exchange was not sampled).
  std::string trace_record_id;
};

/// A request-phase hook's verdict: let the request go on to the next hook and upstream, or stop
/// here (having answered it through request_callbacks::local_reply).
enum class request_status { proceed, stop };

/// What a hook may do to the request before it is forwarded.  Valid only during the call.
class request_callbacks {
 public:
  /// Answers the client with `status` and a provider-shaped JSON error; nothing is forwarded.
  /// The hook then returns request_status::stop.
  virtual void local_reply(unsigned status, std::string_view type, std::string_view message) = 0;
  /// An extra header on the local reply (e.g. `retry-after`).
  virtual void add_reply_header(std::string_view name, std::string_view value) = 0;
  /// Adds a header to the upstream request, replacing a field of that name.  Refused (false) for
  /// the fields the proxy owns: hop-by-hop and framing fields, Host.
  virtual bool set_upstream_header(std::string_view name, std::string_view value) = 0;
  /// Replaces the request body.  Refused (false) unless the hook says rewrites_body().
  virtual bool replace_body(std::string body) = 0;
  /// The request's key for the router: requests with one key prefer one endpoint.
  virtual void set_route_key(std::string_view key) = 0;
  /// Sends the request to another configured upstream than its route's (its endpoints, balancing,
  /// retries and fallback): e.g. a canary.  A name the configuration does not have is ignored
  /// (the route's upstream serves) and logged.
  virtual void set_upstream(std::string_view name) = 0;
  /// The upstream an earlier hook sent the request to (set_upstream); empty: the route's.
  virtual std::string_view upstream() const noexcept = 0;
};

class hook {
 public:
  virtual ~hook() = default;
  /// The request phase (see the top of this file); the request view's body is the client's.
  virtual request_status on_request_phase(const request_view&, request_callbacks&) {
    return request_status::proceed;
  }
  /// Whether this hook may rewrite request bodies (request_callbacks::replace_body).
  virtual bool rewrites_body() const noexcept { return false; }
  /// The request as forwarded (after every hook's request phase) or as answered locally.
  virtual void on_request(const request_view&) {}
  virtual void on_response_head(const response_view&) {}
  /// One forwarded upstream read (raw body bytes) and its times (stream_tap::on_body).
  virtual void on_body(std::string_view bytes, const body_times& t) {}
  virtual void on_token(const token_event&) {}
  /// The output tokens so far, when a chunk's usage reported them (after its token events; vLLM
  /// reports them in every chunk with `continuous_usage_stats`).  To hooks with token_calls.
  virtual void on_output_count(std::int64_t output_tokens, mono_ns t_ns) {}
  /// Timing samples since the last call, oldest first (see `sample`); `now_ns`: the time of
  /// the event that completed the batch.  Every sample reaches the hook before on_stream_end.
  virtual void on_samples(std::span<const sample>, mono_ns now_ns) {}
  /// The stream ended: a hook that provides a piece of the stream_info (its hook_contract)
  /// fills it here.  Called in dependency order, before any hook's on_stream_end; a hook fills
  /// only the pieces it declared.
  virtual void fill(stream_info&) {}
  /// The stream ended, and `info` is complete.
  virtual void on_stream_end(const stream_info&) {}

  /// The per-event callbacks this hook implements: the chain calls only those at every event
  /// (a call to an empty default still loads the hook's vtable line, cold with many streams),
  /// and collects samples only for hooks that take them.
  enum per_event_calls : unsigned { body_calls = 1, token_calls = 2, sample_calls = 4 };
  virtual unsigned per_event() const noexcept { return body_calls | token_calls; }
};

class hook_factory {
 public:
  virtual ~hook_factory() = default;
  /// Called for every exchange, from any I/O thread.  nullptr = no hook for this exchange.
  virtual std::unique_ptr<hook> create() = 0;
};

/// The pieces of the stream_info a hook fills (hook::fill) and those it takes: "timing",
/// "steps", "cache_events", "trace_record".
struct hook_contract {
  std::vector<std::string> provides;
  std::vector<std::string> needs;  ///< a configuration without a hook providing it is refused
  std::vector<std::string> reads;  ///< used when a configured hook provides it
};

}  // namespace tokentap::hooks
